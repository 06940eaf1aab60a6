"""Hidden checks of linear.Linear: the reference passes, each wrong variant fails the right check."""

from __future__ import annotations

import numpy as np
import pytest
from checks_util import (
    SEEDS,
    assert_full_marks,
    assert_named,
    by_name,
    failed,
    grade_in_process,
    patched,
    stub_namespace,
    total,
    variant_ns,
)

from grader.mistakes import for_exercise
from reference import linear as ref

ID = "linear.Linear"


def wrong(cls: type) -> dict:
    return failed(grade_in_process(ID, variant_ns("linear", Linear=cls)))


def test_reference_full_marks_two_seeds_identical_rerun() -> None:
    for seed in SEEDS:
        first = assert_full_marks(ID, seed=seed)
        again = grade_in_process(ID, variant_ns("linear"), seed, fresh=True)
        assert [r.to_json() for r in first] == [r.to_json() for r in again]


@pytest.mark.parametrize("mistake_id", [m.id for m in for_exercise(ID)])
def test_every_mistake_is_named(mistake_id: str) -> None:
    assert_named(ID, mistake_id)


def test_stub_scores_zero() -> None:
    results = grade_in_process(ID, stub_namespace())
    assert total(results) == 0.0
    assert by_name(results)["constructor"].message.startswith("not graded yet: this check counts once Linear.forward")


def test_constructor_check() -> None:
    def init(self, in_features, out_features, bias=True, rng=None):
        ref.Linear.__init__(self, in_features, out_features, bias, rng)
        self.W = self.W.T.copy()

    bad = wrong(patched(ref.Linear, __init__=init))
    assert set(bad) == {"constructor"}
    assert bad["constructor"].message == "W has shape (6, 4), expected (out_features, in_features) = (4, 6)"

    def normal_init(self, in_features, out_features, bias=True, rng=None):
        ref.Linear.__init__(self, in_features, out_features, bias, rng)
        self.W = np.random.default_rng(0).standard_normal((out_features, in_features))

    bad = wrong(patched(ref.Linear, __init__=normal_init))
    assert set(bad) == {"constructor"}
    assert "U(-k, k), k = 1/sqrt(in_features)" in bad["constructor"].message


def test_bias_false_check() -> None:
    named = assert_named(ID, "linear-bias-false-keeps-b")
    assert named.name == "bias_false_b_none"
    assert "with bias=False, self.b must be None" in named.message


def test_forward_checks_and_random_wrong_output_is_unnamed() -> None:
    def forward(self, x):
        return ref.Linear.forward(self, x) + 1e-3 * (np.arange(self.out_features) == 1)

    bad = wrong(patched(ref.Linear, forward=forward))
    for name in ("forward", "forward_batch1", "forward_zeros", "forward_no_bias"):
        assert name in bad and bad[name].misconception is None
    assert bad["forward"].message.startswith("forward on x of shape (4, 5) with random W, b: y: first significant")


def test_forward_no_bias_check() -> None:
    def forward(self, x):
        if self.b is None:
            self.x = np.array(x, dtype=np.float64)
            return self.x @ self.W.T + 1.0
        return ref.Linear.forward(self, x)

    bad = wrong(patched(ref.Linear, forward=forward))
    assert set(bad) == {"forward_no_bias"}


@pytest.mark.parametrize(
    "mistake_id, check",
    [
        ("linear-dW-transposed", "backward"),
        ("linear-db-not-summed", "backward_batch1"),
        ("linear-db-mean", "backward_zeros"),
        ("linear-dW-mean", "backward_no_bias"),
    ],
)
def test_backward_checks_name_the_mistake(mistake_id: str, check: str) -> None:
    from grader.mistakes import CATALOGUE

    bad = wrong(CATALOGUE[mistake_id].namespace.linear.Linear)  # the variant class itself
    assert bad[check].misconception == mistake_id


def test_backward_message_and_numgrad() -> None:
    named = assert_named(ID, "linear-dW-transposed")
    assert "dW: shape (5, 3), expected (3, 5)" in named.message

    def backward(self, dout):
        dx = ref.Linear.backward(self, dout)
        return dx * 1.01

    bad = wrong(patched(ref.Linear, backward=backward))
    assert bad["numgrad"].message.startswith("Your forward is right but your backward is not: dx disagrees")
    assert bad["backward"].misconception == "generic-scale"  # no catalogue entry: dx is 1.01 times the expected
    assert "Your dx is 1.01 times the expected value" in bad["backward"].message


def test_no_mutation_and_shape_dtype() -> None:
    def forward(self, x):
        y = ref.Linear.forward(self, x)
        x[...] = 0.0
        return y.astype(np.float32)

    bad = wrong(patched(ref.Linear, forward=forward))
    assert "no_mutation" in bad and "shape_dtype" in bad
    assert bad["shape_dtype"].message == "y (case mat) has dtype float32, expected float64"


def test_a_crash_is_named_when_a_mistake_crashes_the_same_way() -> None:
    def backward(self, dout):
        ref.Linear.backward(self, dout)
        return dout @ self.W.T  # (N, out) @ (in, out): a ValueError from matmul

    student_cls = type("Linear", (ref.Linear,), {"backward": backward})
    results = by_name(grade_in_process(ID, variant_ns("linear", Linear=student_cls)))
    assert results["backward"].misconception == "linear-dx-uses-WT"
    assert "Linear.backward raised ValueError: matmul" in results["backward"].message

    def other_backward(self, dout):
        raise ValueError("my own shape check failed")

    student_cls = type("Linear", (ref.Linear,), {"backward": other_backward})
    results = by_name(grade_in_process(ID, variant_ns("linear", Linear=student_cls)))
    assert not results["backward"].passed and results["backward"].misconception is None


def test_square_case_names_transposes_that_crash_elsewhere_with_other_messages() -> None:
    """np.dot raises other messages than @ on the (5, 3) cases; the square case names the mistake by value."""

    def backward(self, dout):
        ref.Linear.backward(self, dout)
        return np.dot(dout, self.W.T)

    results = by_name(grade_in_process(ID, variant_ns("linear", Linear=patched(ref.Linear, backward=backward))))
    assert not results["backward"].passed and results["backward"].misconception == "generic-shape"  # the crash
    assert results["backward_square"].misconception == "linear-dx-uses-WT"
    assert results["forward_square"].passed

    def forward(self, x):
        self.x = np.array(x, dtype=np.float64)
        return self.x.dot(self.W) + self.b

    results = by_name(grade_in_process(ID, variant_ns("linear", Linear=patched(ref.Linear, forward=forward))))
    assert not results["forward"].passed and results["forward"].misconception == "generic-shape"  # the crash's cause
    assert results["forward_square"].misconception == "linear-forward-no-transpose"


def test_db_summed_over_features_is_named() -> None:
    named = assert_named(ID, "linear-db-wrong-axis")
    assert "db: shape (4,), expected (3,)" in named.message
