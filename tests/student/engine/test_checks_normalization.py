"""Hidden checks of the normalisation layers: the reference and independent correct versions pass,
each wrong variant fails the right check, and every known mistake is named."""

from __future__ import annotations

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
from grader.mistakes import CATALOGUE, for_exercise
from reference import normalization as ref

IDS = [e for e in CHECKS if e.startswith("normalization.")]
MISTAKES = [(m.exercise, m.id) for e in IDS for m in for_exercise(e)]


def wrong(name: str, cls: type) -> dict:
    return failed(grade_in_process(f"normalization.{name}", variant_ns("normalization", **{name: cls})))


@pytest.mark.parametrize("exercise_id", IDS)
def test_reference_full_marks_two_seeds_identical_rerun(exercise_id: str) -> None:
    for seed in SEEDS:
        first = assert_full_marks(exercise_id, seed=seed)
        again = grade_in_process(exercise_id, variant_ns("normalization"), seed, fresh=True)
        assert [r.to_json() for r in first] == [r.to_json() for r in again]


@pytest.mark.parametrize("exercise_id, mistake_id", MISTAKES)
def test_every_mistake_is_named_on_its_variant(exercise_id: str, mistake_id: str) -> None:
    assert_named(exercise_id, mistake_id)


@pytest.mark.parametrize("exercise_id", IDS)
def test_stubs_score_zero(exercise_id: str) -> None:
    results = grade_in_process(exercise_id, stub_namespace())
    assert total(results) == 0.0
    assert all(
        "not implemented" in r.message or "not graded yet" in r.message or "nothing was raised" in r.message
        for r in results
    )


# --------------------------------------------------------------------------- independent correct versions


class GraphBatchNorm1d(ref.BatchNorm1d):
    """BatchNorm1d (2-D and 3-D) with var = E[x^2] - E[x]^2 and a staged (computational-graph) backward."""

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 3:
            n, c, length = x.shape
            y = self.forward(x.transpose(0, 2, 1).reshape(-1, c))
            self.shape3 = (n, c, length)
            return y.reshape(n, length, c).transpose(0, 2, 1)
        self.shape3 = None
        if self.training:
            if x.shape[0] <= 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=0)
            var = (x**2).mean(axis=0) - mu**2
            m = x.shape[0]
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.xc = x - mu
        self.std = np.sqrt(var + self.eps)
        self.xn = self.xc / self.std
        self.was_training = self.training
        return self.gamma * self.xn + self.beta

    def backward(self, dout):
        dout = np.asarray(dout, dtype=np.float64)
        if self.shape3 is not None:
            n, c, length = self.shape3
            d2 = dout.transpose(0, 2, 1).reshape(-1, c)
            self.shape3, saved = None, self.shape3
            dx = self.backward(d2)
            self.shape3 = saved
            return dx.reshape(n, length, c).transpose(0, 2, 1)
        self.dbeta = dout.sum(axis=0)
        self.dgamma = (dout * self.xn).sum(axis=0)
        dxn = dout * self.gamma
        if not self.was_training:
            return dxn / self.std
        m = dout.shape[0]
        dxc = dxn / self.std
        dstd = -np.sum(dxn * self.xc / self.std**2, axis=0)
        dvar = 0.5 * dstd / self.std
        dxc += (2.0 / m) * self.xc * dvar
        dmu = -np.sum(dxc, axis=0)
        return dxc + dmu / m


class SeedRMSNorm(ref.RMSNorm):
    """The course text's RMSNorm with its dgamma fixed for any leading dims."""

    def forward(self, x):
        self.x = np.array(x, dtype=np.float64)
        self.rms = np.sqrt(np.mean(self.x**2, axis=-1, keepdims=True) + self.eps)
        self.x_norm = self.x / self.rms
        return self.x_norm * self.gamma

    def backward(self, dout):
        D = self.x.shape[-1]
        self.dgamma = np.sum(dout * self.x_norm, axis=tuple(range(dout.ndim - 1)))
        sum_term = np.sum(dout * self.gamma * self.x, axis=-1, keepdims=True)
        return (dout * self.gamma / self.rms) - (self.x / (D * self.rms**3)) * sum_term


class LoopLayerNorm(ref.LayerNorm):
    """LayerNorm through a flattened (rows, features) view and the explicit three-term dx."""

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        k = int(np.prod(self.normalized_shape))
        self.shape = x.shape
        rows = x.reshape(-1, k)
        self.mu = rows.mean(axis=1, keepdims=True)
        self.var = ((rows - self.mu) ** 2).mean(axis=1, keepdims=True)
        self.xh = (rows - self.mu) / np.sqrt(self.var + self.eps)
        return (self.xh * self.gamma.reshape(-1) + self.beta.reshape(-1)).reshape(x.shape)

    def backward(self, dout):
        k = self.xh.shape[1]
        d = np.asarray(dout, dtype=np.float64).reshape(-1, k)
        self.dgamma = (d * self.xh).sum(axis=0).reshape(self.normalized_shape)
        self.dbeta = d.sum(axis=0).reshape(self.normalized_shape)
        g = d * self.gamma.reshape(-1)
        inv = 1.0 / np.sqrt(self.var + self.eps)
        dx = inv / k * (k * g - g.sum(axis=1, keepdims=True) - self.xh * (g * self.xh).sum(axis=1, keepdims=True))
        return dx.reshape(self.shape)


@pytest.mark.parametrize(
    "name, cls", [("BatchNorm1d", GraphBatchNorm1d), ("RMSNorm", SeedRMSNorm), ("LayerNorm", LoopLayerNorm)]
)
def test_independent_correct_implementations_get_full_marks(name: str, cls: type) -> None:
    for seed in SEEDS:
        assert_full_marks(f"normalization.{name}", variant_ns("normalization", **{name: cls}), seed)


# --------------------------------------------------------------------------- BatchNorm checks


def test_bn_constructor_check() -> None:
    def init(self, num_features, eps=1e-5, momentum=0.1):
        ref.BatchNorm1d.__init__(self, num_features, eps, momentum)
        self.running_var = np.zeros(num_features)

    bad = wrong("BatchNorm1d", patched(ref.BatchNorm1d, __init__=init))
    assert bad["constructor"].message.startswith(
        "gamma (ones), beta (zeros), running_mean (zeros), running_var (ones) of normalization.BatchNorm1d(4):"
        " running_var: first significant difference at index 0: received 0, expected 1"
    )


def test_bn_forward_checks() -> None:
    named = assert_named("normalization.BatchNorm1d", "bn-unbiased-normalisation")
    assert named.name == "forward"
    named = assert_named("normalization.BatchNorm1d", "bn-3d-stats-axis0")
    assert named.name == "forward_second"
    named = assert_named("normalization.BatchNorm1d", "bn-eps-outside-sqrt")
    results = by_name(grade_in_process("normalization.BatchNorm1d", CATALOGUE["bn-eps-outside-sqrt"].namespace))
    assert results["forward_tiny"].misconception == "bn-eps-outside-sqrt"
    assert "eps = 1e-5 matters there" in results["forward_tiny"].message


def test_bn_batch1_and_large_checks() -> None:
    cls = corrupt_forward(ref.BatchNorm1d, lambda x: np.shape(x)[0] == 1, lambda y: y * 0.99)
    assert "forward_batch1" in wrong("BatchNorm1d", cls)
    cls = corrupt_forward(ref.BatchNorm2d, lambda x: np.max(np.abs(x)) > 1e3, lambda y: y.astype(np.float32) + 0)
    bad = wrong("BatchNorm2d", cls)
    assert bad["forward_large"].message == (
        "training forward on magnitudes around 1e4: y: dtype float32, expected float64"
    )


def test_bn_backward_and_numgrad_checks() -> None:
    named = assert_named("normalization.BatchNorm2d", "bn-backward-ignores-stats-2d")
    assert named.name == "backward"
    assert "Your forward is right but your backward is not" in named.message
    named = assert_named("normalization.BatchNorm2d", "bn-dgamma-wrong-axes")
    assert "dgamma: shape (3, 4, 5), expected (3,)" in named.message
    cls = corrupt_backward(ref.BatchNorm1d, lambda d: np.ndim(d) == 3, lambda dx: dx * 1.01)
    bad = wrong("BatchNorm1d", cls)
    assert set(bad) == {"backward_second"}
    bad = wrong("BatchNorm1d", corrupt_backward(ref.BatchNorm1d, lambda d: True, lambda dx: -dx))
    assert bad["numgrad"].message.startswith("Your forward is right but your backward is not: dx disagrees")


def test_bn_running_statistics_checks() -> None:
    named = assert_named("normalization.BatchNorm1d", "bn-momentum-inverted")
    assert named.name == "running_mean"
    assert "running_mean after each of 3 training steps, momentum 0.3" in named.message
    named = assert_named("normalization.BatchNorm1d", "bn-biased-running-var")
    assert named.name == "running_var"
    assert named.message.startswith("Known mistake bn-biased-running-var: running_var is updated with the biased")
    named = assert_named("normalization.BatchNorm1d", "bn-running-var-count-batch")
    assert named.name == "running_stats_second"


def test_bn_eval_checks() -> None:
    named = assert_named("normalization.BatchNorm1d", "bn-eval-uses-batch-stats")
    assert named.name == "eval_forward"
    named = assert_named("normalization.BatchNorm2d", "bn-eval-updates-running-2d")
    assert named.name == "eval_no_update"

    def backward(self, dout):  # training formula in eval mode too
        self.cache["training"] = True
        return ref.BatchNorm1d.backward(self, dout)

    bad = wrong("BatchNorm1d", patched(ref.BatchNorm1d, backward=backward))
    assert set(bad) == {"eval_backward"}
    assert "\nbackward in eval mode: dx: first significant difference" in bad["eval_backward"].message


def test_bn_batch_of_one_value_must_raise() -> None:
    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape[0] == 1 and x.ndim == 2:
            return np.zeros_like(x)
        return ref.BatchNorm1d.forward(self, x)

    bad = wrong("BatchNorm1d", patched(ref.BatchNorm1d, forward=forward))
    assert set(bad) == {"batch_of_one_value"}
    assert bad["batch_of_one_value"].message.endswith("expected ValueError, but nothing was raised")
    assert bad["batch_of_one_value"].misconception is None


def test_bn_no_mutation_and_dtype() -> None:
    def forward(self, x):
        y = ref.BatchNorm2d.forward(self, x)
        x -= x.mean()
        return y

    bad = wrong("BatchNorm2d", patched(ref.BatchNorm2d, forward=forward))
    assert set(bad) == {"no_mutation"}
    cls = corrupt_forward(ref.BatchNorm2d, lambda x: True, lambda y: y.astype(np.float32))
    assert "shape_dtype" in wrong("BatchNorm2d", cls)


# --------------------------------------------------------------------------- per-sample norms


def test_layernorm_checks() -> None:
    assert assert_named("normalization.LayerNorm", "ln-batch-axis").name == "forward_2d"
    assert assert_named("normalization.LayerNorm", "ln-last-axis-only").name == "forward_tuple"
    named = assert_named("normalization.LayerNorm", "ln-dgamma-axis0")
    assert named.name == "backward_3d" and "dgamma: shape (3, 6), expected (6,)" in named.message
    results = by_name(grade_in_process("normalization.LayerNorm", CATALOGUE["ln-eps-outside-sqrt"].namespace))
    assert results["forward_tiny"].misconception == "ln-eps-outside-sqrt"

    def init(self, normalized_shape, eps=1e-5):  # a tuple normalized_shape mishandled
        ref.LayerNorm.__init__(self, normalized_shape, eps)
        self.gamma = np.ones(self.normalized_shape[-1])
        self.beta = np.zeros(self.normalized_shape[-1])

    bad = wrong("LayerNorm", patched(ref.LayerNorm, __init__=init))
    assert "constructor" in bad and "gamma_2: shape (4,), expected (3, 4)" in bad["constructor"].message


def test_rmsnorm_checks() -> None:
    assert assert_named("normalization.RMSNorm", "rms-subtracts-mean").name == "forward_2d"
    named = assert_named("normalization.RMSNorm", "rms-dgamma-axis0")
    assert named.name == "backward_3d"
    assert named.message.startswith("Known mistake rms-dgamma-axis0: dgamma is summed over axis 0 only")
    named = assert_named("normalization.RMSNorm", "rms-eps-outside-sqrt")
    results = by_name(grade_in_process("normalization.RMSNorm", CATALOGUE["rms-eps-outside-sqrt"].namespace))
    assert not results["forward_tiny"].passed and results["forward_2d"].passed


def test_rmsnorm_large_and_batch1() -> None:
    cls = corrupt_forward(ref.RMSNorm, lambda x: np.max(np.abs(x)) > 1e3, lambda y: np.full_like(y, np.nan))
    bad = wrong("RMSNorm", cls)
    assert set(bad) == {"forward_large"}
    assert "received nan" in bad["forward_large"].message
    cls = corrupt_backward(ref.RMSNorm, lambda d: np.shape(d)[0] == 1, lambda dx: dx[0])
    bad = wrong("RMSNorm", cls)
    assert set(bad) == {"backward_batch1", "shape_dtype"}


def test_eval_same_as_train_check() -> None:
    def forward(self, x):
        y = ref.LayerNorm.forward(self, x)
        return y if self.training else np.asarray(x, dtype=np.float64)

    bad = wrong("LayerNorm", patched(ref.LayerNorm, forward=forward))
    assert set(bad) == {"eval_same_as_train"}
    assert "eval mode on x of shape (4, 6) (it behaves exactly as in" in bad["eval_same_as_train"].message
    assert bad["eval_same_as_train"].misconception in (None, "generic-region")
    assert "normalized_shape" not in bad["eval_same_as_train"].message.split("\n")[0]  # not a setting every case has


def test_groupnorm_checks() -> None:
    assert assert_named("normalization.GroupNorm", "gn-groups-strided").name == "forward_4d"
    assert assert_named("normalization.GroupNorm", "gn-per-channel").name == "forward_4d"

    def init(self, num_groups, num_channels, eps=1e-5):
        ref.GroupNorm.__init__(self, num_groups if num_channels % num_groups == 0 else 1, num_channels, eps)

    bad = wrong("GroupNorm", patched(ref.GroupNorm, __init__=init))
    assert set(bad) == {"bad_groups_raises"}
    assert bad["bad_groups_raises"].message == (
        "GroupNorm(num_groups=4, num_channels=6) (6 % 4 != 0): expected ValueError, but nothing was raised"
    )
    cls = corrupt_forward(ref.GroupNorm, lambda x: np.ndim(x) == 2, lambda y: y + 1e-3)
    assert "forward_2d" in wrong("GroupNorm", cls)


def test_instancenorm_checks() -> None:
    assert assert_named("normalization.InstanceNorm2d", "in-over-channels").name == "forward_4d"
    assert assert_named("normalization.InstanceNorm2d", "in-batch-stats").name == "forward_4d"

    def backward(self, dout):
        dx = ref.InstanceNorm2d.backward(self, dout)
        self.dgamma = self.dgamma * 2.0
        return dx

    bad = wrong("InstanceNorm2d", patched(ref.InstanceNorm2d, backward=backward))
    assert {"backward_4d", "numgrad"} <= set(bad)
    assert bad["backward_4d"].misconception == "generic-scale"  # no catalogue entry: what kind of wrong it is
    assert "Your dgamma is 2 times the expected value" in bad["backward_4d"].message
    assert "dgamma disagrees with central differences" in bad["numgrad"].message


def test_random_wrong_outputs_are_not_named() -> None:
    rng = np.random.default_rng(3)
    cls = corrupt_forward(ref.BatchNorm1d, lambda x: True, lambda y: y + 1e-2 * rng.standard_normal(y.shape))
    for result in wrong("BatchNorm1d", cls).values():
        assert result.misconception is None


def test_batchnorm_square_case_names_gamma_on_the_last_axis() -> None:
    """(C,) gamma and beta used as is crash on most shapes; the (2, 3, 2, 3) case shows the wrong values."""

    def forward(self, x):
        ref.BatchNorm2d.forward(self, x)
        return self.cache["x_hat"] * self.gamma + self.beta  # operands reversed w.r.t. the catalogue's variant

    bad = wrong("BatchNorm2d", patched(ref.BatchNorm2d, forward=forward))
    assert bad["forward_square"].misconception == "bn-affine-last-axis-2d"
    assert "(last axis of size C" in bad["forward_square"].message
    # the crash elsewhere has the operands the other way round: the same broadcast error, so the same name
    assert bad["forward"].misconception == "bn-affine-last-axis-2d"

    def forward_own_check(self, x):
        ref.BatchNorm2d.forward(self, x)
        if self.gamma.shape != (x.shape[-1],):
            raise ValueError("gamma does not fit the input")  # a crash of the student's own wording
        return self.cache["x_hat"] * self.gamma + self.beta

    bad = wrong("BatchNorm2d", patched(ref.BatchNorm2d, forward=forward_own_check))
    assert bad["forward"].misconception is None  # a crash with another message names nothing


@pytest.mark.parametrize(
    "mistake_id, check",
    [
        ("bn-3d-no-keepdims", "forward_square"),
        ("bn-3d-dgamma-axis0", "backward_second"),
        ("bn-backward-count-batch", "backward_second"),
        ("bn-inplace-centering", "no_mutation"),
        ("bn-train-uses-running-stats", "forward"),
    ],
)
def test_new_batchnorm1d_mistakes_are_named_on_the_check_that_shows_them(mistake_id: str, check: str) -> None:
    bad = wrong("BatchNorm1d", CATALOGUE[mistake_id].namespace.normalization.BatchNorm1d)
    assert bad[check].misconception == mistake_id


def test_layernorm_inplace_and_no_keepdims_are_named() -> None:
    assert assert_named("normalization.LayerNorm", "ln-inplace-centering").name == "no_mutation"
    named = assert_named("normalization.LayerNorm", "ln-no-keepdims")
    assert "could not be broadcast" in named.message


def test_layernorm_and_rmsnorm_are_checked_on_4d_input() -> None:
    """Round 3: dgamma right on 2-D and 3-D input but summed over axes (0, 1) whatever the rank loses points on 4-D
    input (no case of rank 4 used to exist: a false pass)."""
    from reference import normalization as nref

    class LN(nref.LayerNorm):
        def backward(self, dout):
            dx = super().backward(dout)
            axes = (0,) if dout.ndim == 2 else (0, 1)
            self.dgamma = (dout * self.cache["x_hat"]).sum(axis=axes)
            self.dbeta = dout.sum(axis=axes)
            return dx

    class RMS(nref.RMSNorm):
        def backward(self, dout):
            dx = super().backward(dout)
            self.dgamma = (dout * self.cache["x_norm"]).sum(axis=(0,) if dout.ndim == 2 else (0, 1))
            return dx

    for exercise, name, cls in (
        ("normalization.LayerNorm", "LayerNorm", LN),
        ("normalization.RMSNorm", "RMSNorm", RMS),
    ):
        results = grade_in_process(exercise, variant_ns("normalization", **{name: cls}))
        failing = {r.name for r in results if not r.passed}
        assert "backward_4d" in failing, (exercise, failing)
        assert failing <= {"backward_4d", "backward_tuple", "numgrad", "eval_same_as_train", "shape_dtype"}, failing
