"""Hidden checks of the activations: the reference passes, each wrong variant fails the right check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from checks_util import (
    SEEDS,
    assert_full_marks,
    assert_named,
    by_name,
    corrupt_backward,
    corrupt_forward,
    failed,
    grade_in_process,
    patched,
    stub_namespace,
    total,
    variant_ns,
)

from grader.student.engine.checks import CHECKS
from grader.mistakes import for_exercise
from reference import activations as ref

IDS = [e for e in CHECKS if e.startswith("activations.")]
MISTAKES = [m.id for e in IDS for m in for_exercise(e)]


@pytest.mark.parametrize("exercise_id", IDS)
def test_reference_gets_full_marks_on_two_seeds_and_reruns_identically(exercise_id: str) -> None:
    for seed in SEEDS:
        first = assert_full_marks(exercise_id, seed=seed)
        again = grade_in_process(exercise_id, variant_ns("activations"), seed, fresh=True)
        assert [r.to_json() for r in first] == [r.to_json() for r in again]


@pytest.mark.parametrize("exercise_id", IDS)
def test_points_add_up_and_cases_depend_on_the_seed(exercise_id: str) -> None:
    checks = CHECKS[exercise_id]
    a, b = checks.cases(SEEDS[0]), checks.cases(SEEDS[1])
    assert [c.name for c in a] == [c.name for c in b]
    assert any(not np.array_equal(a[i].arrays[k], b[i].arrays[k]) for i in range(len(a)) for k in a[i].arrays)
    assert checks.checked_plan(SEEDS[0]).total_points() == 10.0


@pytest.mark.parametrize("mistake_id", MISTAKES)
def test_every_mistake_is_named_on_its_variant(mistake_id: str) -> None:
    assert_named(next(m.exercise for e in IDS for m in for_exercise(e) if m.id == mistake_id), mistake_id)


def test_at_least_sixteen_activation_mistakes() -> None:
    assert len(MISTAKES) >= 16


def test_stubs_score_zero_with_not_implemented_messages() -> None:
    results = grade_in_process("activations.GELU", stub_namespace())
    assert total(results) == 0.0
    assert "GELU.forward is not implemented yet" in by_name(results)["forward_2d"].message


def wrong(cls_name: str, cls: type, exercise: str = "") -> list:
    return grade_in_process(exercise or f"activations.{cls_name}", variant_ns("activations", **{cls_name: cls}))


def test_forward_1d_fails_for_a_layer_that_assumes_a_batch_axis() -> None:
    cls = corrupt_forward(ref.ReLU, lambda x: np.ndim(x) == 1, lambda y: y.reshape(-1, 1))
    bad = failed(wrong("ReLU", cls))
    assert set(bad) == {"forward_1d", "shape_dtype"}
    assert bad["forward_1d"].message == "forward on a 1-D input of shape (7,): y: shape (7, 1), expected (7,)"
    assert bad["forward_1d"].misconception is None


@pytest.mark.parametrize(
    "check, ndim, text",
    [
        ("forward_2d", 2, "forward on x of shape (4, 5)"),
        ("forward_3d", 3, "forward on x of shape (2, 3, 4)"),
        ("forward_4d", 4, "forward on x of shape (2, 3, 4, 5)"),
    ],
)
def test_forward_shape_checks_fail_on_their_shape(check: str, ndim: int, text: str) -> None:
    cls = corrupt_forward(
        ref.Tanh, lambda x: np.ndim(x) == ndim and np.shape(x)[0] != 1 and np.shape(x)[-1] <= 5, lambda y: y * 1.001
    )
    bad = failed(wrong("Tanh", cls))
    assert check in bad
    assert bad[check].message.startswith(f"{text}: y: first significant difference at index")
    assert bad[check].misconception is None  # a random wrong output is no known mistake


def test_forward_batch1_fails_when_the_batch_axis_is_squeezed() -> None:
    cls = corrupt_forward(ref.Sigmoid, lambda x: np.shape(x)[:1] == (1,), np.squeeze)
    bad = failed(wrong("Sigmoid", cls))
    assert bad["forward_batch1"].message == "forward on a batch of one, shape (1, 6): y: shape (6,), expected (1, 6)"


@pytest.mark.parametrize("check, ndim", [("backward_2d", 2), ("backward_3d", 3), ("backward_4d", 4)])
def test_backward_shape_checks_fail_on_their_shape(check: str, ndim: int) -> None:
    cls = corrupt_backward(ref.SiLU, lambda d: np.ndim(d) == ndim, lambda dx: dx + 0.01)
    bad = failed(wrong("SiLU", cls))
    assert check in bad
    assert "Your forward is right but your backward is not" in bad[check].message or ndim != 2
    assert ": dx: first significant difference" in bad[check].message


def test_zeros_checks() -> None:
    cls = corrupt_forward(ref.ELU, lambda x: np.any(x == 0.0), lambda y: np.where(y == 0.0, 1e-3, y))
    bad = failed(wrong("ELU", cls))
    assert "forward on exact zeros and tiny values (1e-8): y:" in bad["forward_zeros"].message
    assert bad["forward_zeros"].misconception == "generic-region"  # wrong at x = 0 only, in every case
    named = assert_named("activations.ReLU", "relu-grad-at-zero")
    assert named.name == "backward_zeros"
    assert "at x = 0 the derivative is the one of the x <= 0 branch" in named.message


def test_large_magnitudes_nan_and_warnings() -> None:
    def forward(self, x):
        self.out = 1.0 / (1.0 + np.exp(-x)) * (np.exp(x) / np.exp(x))  # inf / inf = nan at 1e4
        return self.out

    bad = failed(wrong("Sigmoid", patched(ref.Sigmoid, forward=forward)))
    assert "forward_large" in bad
    assert "received nan" in bad["forward_large"].message
    named = assert_named("activations.Sigmoid", "sigmoid-overflow")
    assert named.name == "forward_large"
    assert named.message.startswith("Known mistake sigmoid-overflow: 1 / (1 + e^-x) overflows")
    assert "your values are right; only the warning costs this check's points" in named.message
    assert "RuntimeWarning: overflow" in named.message


def test_gelu_backward_right_values_that_warn_lose_only_that_check() -> None:
    """Issue 31: a GELU backward whose values are right at |x| = 1e4 but whose exp overflowed. The contract
    (spec section 3) forbids the warning, so backward_large fails, and its message says the values are right."""
    import math

    def backward(self, dout):
        x = self.x
        if self.approximate == "tanh":
            return ref.GELU.backward(self, dout)
        pdf = 1.0 / math.sqrt(2.0 * math.pi) / np.exp(0.5 * x**2)  # exp overflows at 1e4; 1 / inf is the right 0
        return dout * (ref._phi_cdf(x) + x * pdf)

    bad = failed(wrong("GELU", patched(ref.GELU, backward=backward)))
    assert set(bad) == {"backward_large"}
    assert "your values are right; only the warning costs this check's points" in bad["backward_large"].message
    assert "RuntimeWarning: overflow" in bad["backward_large"].message


def test_backward_large_fails_for_a_derivative_formula_that_overflows() -> None:
    def backward(self, dout):
        x = np.log(self.out / (1.0 - self.out))  # inf at saturation
        return dout * np.exp(-x) / (1.0 + np.exp(-x)) ** 2

    with np.errstate(all="ignore"):
        bad = failed(wrong("Sigmoid", patched(ref.Sigmoid, backward=backward)))
    assert "backward_large" in bad and "backward on large magnitudes" in bad["backward_large"].message


def test_hyper_parameter_checks() -> None:
    named = assert_named("activations.LeakyReLU", "leaky-slope-ignored")
    assert named.name == "forward_hyper"
    assert named.message.startswith("Known mistake leaky-slope-ignored:")
    assert "forward with negative_slope = 0.2 (not the default 0.01)" in named.message
    named = assert_named("activations.ELU", "elu-grad-missing-alpha")
    assert named.name == "backward_hyper"


def test_numgrad_tells_forward_from_backward_bugs() -> None:
    # backward wrong, forward right
    cls = corrupt_backward(ref.Tanh, lambda d: True, lambda dx: 1.1 * dx)
    bad = failed(wrong("Tanh", cls))
    assert bad["numgrad"].message.startswith(
        "Your forward is right but your backward is not: dx disagrees with central differences of your own forward"
    )
    # forward wrong, backward consistent with it
    scaled = patched(
        ref.Tanh,
        forward=lambda self, x: 2.0 * ref.Tanh.forward(self, x),
        backward=lambda self, dout: 2.0 * ref.Tanh.backward(self, dout),
    )
    results = by_name(wrong("Tanh", scaled))
    assert results["numgrad"].passed
    # judged at the student's own state: the forward's bug costs in the forward checks only
    assert not results["forward_2d"].passed and not results["forward_3d"].passed
    for name in ("backward_2d", "backward_3d", "backward_4d", "backward_hyper"):
        assert results[name].passed, name
    # the zeros case has no central differences (kinks of the other activations sit there): judged as before
    assert not results["backward_zeros"].passed


def test_no_mutation_check() -> None:
    named = assert_named("activations.ReLU", "relu-inplace")
    assert named.name == "no_mutation"
    assert "your code modified its input array (case vec)" in named.message

    def forward(self, x):
        x[...] = np.tanh(x)  # right values, written into the caller's array
        self.out = x
        return x.copy()

    bad = failed(wrong("Tanh", patched(ref.Tanh, forward=forward)))
    assert set(bad) == {"no_mutation"}
    assert bad["no_mutation"].misconception == "generic-inplace"  # no catalogue entry: the generic family's words
    assert "Forward wrote into the x it was given: afterwards it holds your y" in bad["no_mutation"].message


def test_shape_dtype_check() -> None:
    cls = corrupt_forward(ref.GELU, lambda x: True, lambda y: y.astype(np.float32))
    bad = failed(wrong("GELU", cls))
    assert bad["shape_dtype"].message == "y (case vec) has dtype float32, expected float64"


def test_prelu_constructor_and_per_channel_alpha() -> None:
    def init(self, num_parameters: int = 1, init: float = 0.25) -> None:
        ref.PReLU.__init__(self, num_parameters, 0.25)

    bad = failed(wrong("PReLU", patched(ref.PReLU, __init__=init)))
    assert set(bad) == {"constructor"}
    assert bad["constructor"].message.startswith("PReLU(num_parameters=3, init=0.1).alpha: alpha:")

    def forward(self, x):  # per-channel alpha applied along the last axis
        self.x = np.array(x, dtype=np.float64)
        return (
            np.where(self.x > 0, self.x, self.alpha[0] * self.x)
            if self.num_parameters == 1
            else np.where(self.x > 0, self.x, np.mean(self.alpha) * self.x)
        )

    bad = failed(wrong("PReLU", patched(ref.PReLU, forward=forward)))
    assert "forward_hyper" in bad
    assert "one alpha per channel" in bad["forward_hyper"].message


def test_gelu_tanh_mode_and_exactness() -> None:
    named = assert_named("activations.GELU", "gelu-tanh-approx")
    assert named.name == "forward_1d"
    named = assert_named("activations.GELU", "gelu-approximate-ignored")
    assert named.name == "forward_hyper"
    assert 'approximate="tanh"' in named.message


def test_an_independent_correct_gelu_passes() -> None:
    class MyGELU(ref.GELU):
        def forward(self, x):
            self.x = np.array(x, dtype=np.float64)
            if self.approximate == "tanh":
                return ref.GELU.forward(self, x)
            phi = np.vectorize(lambda v: 0.5 * math.erfc(-v / math.sqrt(2.0)))(self.x)
            return self.x * phi

    assert_full_marks("activations.GELU", variant_ns("activations", GELU=MyGELU))


def test_backward_twice_check() -> None:
    named = assert_named("activations.Sigmoid", "sigmoid-backward-inplace")
    assert named.name == "backward_twice"
    assert "a second backward(dout) after the same forward gave a different dx" in named.message

    def backward(self, dout):
        dx = dout * (1.0 - self.out**2)
        self.out = self.out + 1.0  # corrupts the cache
        return dx

    bad = failed(wrong("Tanh", patched(ref.Tanh, backward=backward)))
    assert set(bad) == {"backward_twice"} and bad["backward_twice"].misconception is None


def test_prelu_square_case_names_alpha_on_the_last_axis_whatever_the_operand_order() -> None:
    class AlphaRight(ref.PReLU):
        def forward(self, x):
            self.x = np.array(x, dtype=np.float64)
            return np.where(self.x > 0, self.x, self.x * self.alpha)

        def backward(self, dout):
            negative = np.where(self.x > 0, 0.0, dout * self.x)
            self.dalpha = negative.reshape(-1, self.num_parameters).sum(axis=0)
            return np.where(self.x > 0, dout, dout * self.alpha)

    results = by_name(wrong("PReLU", AlphaRight))
    # x * alpha crashes as alpha * x does (NumPy's broadcast error, shapes in either order): named there too
    assert not results["forward_hyper"].passed and results["forward_hyper"].misconception == "prelu-alpha-last-axis"
    assert results["forward_square"].misconception == "prelu-alpha-last-axis"
    assert "alpha on axis 1, not on the last axis" in results["forward_square"].message
    assert results["forward_2d"].passed  # one shared alpha: the bug does not show


def test_leaky_branches_swapped_is_named_on_the_forward() -> None:
    named = assert_named("activations.LeakyReLU", "leaky-branches-swapped")
    assert named.name.startswith("forward")


def test_a_warning_in_backward_is_not_the_forward_checks_fault() -> None:
    """Round 3: an ELU whose exp overflows in backward only: forward_large passes, backward_large fails and names
    the backward mistake (not elu-exp-overflow, whose fix the forward already applies)."""

    class ELU(ref.ELU):
        def backward(self, dout):
            return np.where(self.x > 0, dout, dout * self.alpha * np.exp(self.x))

    results = by_name(grade_in_process("activations.ELU", variant_ns("activations", ELU=ELU)))
    assert results["forward_large"].passed
    assert not results["backward_large"].passed
    assert results["backward_large"].misconception == "elu-backward-exp-overflow"
    assert "(in ELU.backward" in results["backward_large"].message
    assert {n for n, r in results.items() if not r.passed} == {"backward_large"}


def test_nan_everywhere_earns_nothing() -> None:
    """Round 3: a ReLU whose every output is NaN used to score 4.25/10 (NaN equals NaN in consistency checks)."""

    class ReLU(ref.ReLU):
        def forward(self, x):
            self.x = np.array(x, dtype=float)
            return np.full(np.shape(x), np.nan)

        def backward(self, dout):
            return np.full(np.shape(dout), np.nan)

    results = grade_in_process("activations.ReLU", variant_ns("activations", ReLU=ReLU))
    assert total(results) == 0.0
    assert "NaN or inf" in by_name(results)["numgrad"].message
    assert by_name(results)["no_mutation"].message.startswith("earns nothing yet")


def test_supporting_checks_still_count_beside_right_values() -> None:
    """A right forward with a wrong backward keeps its shape and mutation points (support needs something else)."""

    class ReLU(ref.ReLU):
        def backward(self, dout):
            return 2.0 * np.asarray(dout) * (self.x > 0)

    results = by_name(grade_in_process("activations.ReLU", variant_ns("activations", ReLU=ReLU)))
    assert results["forward_2d"].passed and results["shape_dtype"].passed and results["no_mutation"].passed


def test_gelu_tanh_backward_without_its_cubic_term_costs_a_point() -> None:
    from grader.mistakes import CATALOGUE

    mistake = CATALOGUE["gelu-tanh-backward-no-cubic"]
    results = grade_in_process("activations.GELU", mistake.namespace)
    assert total(results) == pytest.approx(9.0)
    assert by_name(results)["backward_hyper"].misconception == "gelu-tanh-backward-no-cubic"


def test_backward_constants_rounded_to_six_digits_are_seen() -> None:
    """Round 3: an error of 1e-6 relative in backward passes central differences (1e-5) but not the reference."""
    from grader.mistakes import CATALOGUE

    results = by_name(grade_in_process("activations.GELU", CATALOGUE["gelu-grad-rounded-constants"].namespace))
    assert results["numgrad"].passed and not results["backward_2d"].passed
    assert results["backward_2d"].misconception == "gelu-grad-rounded-constants"
