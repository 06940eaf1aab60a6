"""Generic diagnoses (grader/student/engine/generic/): each family names a mistake no catalogue lists,
only when its claim holds on every case it touches; the catalogue keeps its names; offline, the families
that need reference code are silent.

Every wrong submission here is written for the test (a subclass of the reference layer with one method
rewritten), never taken from the catalogue or from the mutation benchmark.
"""

from __future__ import annotations

import numpy as np
import pytest
from checks_util import SEEDS, grade_in_process, patched, variant_ns

from grader.student.engine.generic.claims import holds
from grader.student.engine.generic.data_families import scale_claims
from reference import activations as ref_act
from reference import linear as ref_lin
from reference import normalization as ref_norm


def names(results: list) -> dict[str, str]:
    """{check: misconception} of the failing checks that name something."""
    return {r.name: r.misconception for r in results if not r.passed and r.misconception}


def messages(results: list, family: str) -> list[str]:
    return [r.message for r in results if r.misconception == family]


def assert_says(results: list, family: str, words: str) -> None:
    """Some failing check names ``family`` with ``words`` in its message (the first such check)."""
    said = messages(results, family)
    assert said and words in said[0], [(r.name, r.misconception, r.message[:160]) for r in results if not r.passed]


def graded(topic: str, seed: int = SEEDS[0], **classes: type) -> list:
    exercise = f"{topic}.{next(iter(classes))}"
    return grade_in_process(exercise, variant_ns(topic, **classes), seed)


# --------------------------------------------------------------------------- data-only families


def test_scale_named_with_its_known_constant():
    """Sigmoid's backward doubled: 2 times the expected dx in every case."""
    wrong = patched(ref_act.Sigmoid, backward=lambda self, dout: 2.0 * ref_act.Sigmoid.backward(self, dout))
    results = graded("activations", Sigmoid=wrong)
    assert set(names(results).values()) == {"generic-scale"}
    assert "Your dx is 2 times the expected value, in every case" in messages(results, "generic-scale")[0]


def test_scale_named_by_a_size_of_the_case():
    """LayerNorm's dgamma divided by D (a mean instead of a sum over the features? no: dgamma / D)."""

    def backward(self, dout):
        dx = ref_norm.LayerNorm.backward(self, dout)
        self.dgamma = self.dgamma / dout.shape[-1]
        return dx

    results = graded("normalization", LayerNorm=patched(ref_norm.LayerNorm, backward=backward))
    assert_says(results, "generic-scale", "1/D")
    assert "generic-scale" in set(names(results).values())


def test_a_factor_in_some_cases_only_is_not_a_scale():
    """dx doubled on 2-D input only: the claim fails on the 3-D and 4-D cases, so it is not named there."""

    def backward(self, dout):
        dx = ref_act.Tanh.backward(self, dout)
        return 2.0 * dx if dout.ndim == 2 else dx

    results = graded("activations", Tanh=patched(ref_act.Tanh, backward=backward))
    assert "generic-scale" not in set(names(results).values())
    assert not any(r.misconception for r in results if r.name == "backward_2d" and r.message.count("2 times"))


def test_offset_is_named():
    def forward(self, x):
        return ref_act.SiLU.forward(self, x) + 0.5

    results = graded("activations", SiLU=patched(ref_act.SiLU, forward=forward))
    assert_says(results, "generic-offset", "plus 1/2")


def test_region_names_the_side_of_zero():
    """ELU forward wrong for x <= 0 only (alpha e^x, the -1 forgotten; at 0 it gives alpha): right where x > 0."""

    def forward(self, x):
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, self.alpha * np.exp(np.minimum(self.x, 0.0)))

    results = graded("activations", ELU=patched(ref_act.ELU, forward=forward))
    assert_says(results, "generic-region", "where x <= 0 only")


def test_region_names_a_skipped_tail():
    """Linear's forward leaves its last row at zero (a loop one short)."""

    def forward(self, x):
        y = ref_lin.Linear.forward(self, x)
        if y.ndim == 2 and y.shape[0] > 1:
            y[-1] = 0.0
        return y

    results = graded("linear", Linear=patched(ref_lin.Linear, forward=forward))
    assert_says(results, "generic-region", "the last row")


def test_transpose_is_named():
    """dW returned transposed on top of the right values (a (in, out) gradient)."""

    def backward(self, dout):
        dx = ref_lin.Linear.backward(self, dout)
        self.dW = self.dW.T.copy()
        return dx

    results = grade_in_process("linear.Linear", variant_ns("linear", Linear=patched(ref_lin.Linear, backward=backward)))
    found = set(names(results).values())
    assert found <= {"linear-dW-transposed", "generic-transpose"} and found  # the catalogue knows it first


def test_inplace_names_what_x_became():
    def forward(self, x):
        self.x = x
        np.maximum(x, 0.0, out=x)  # the caller's x now holds y
        return x

    results = graded("activations", ReLU=patched(ref_act.ReLU, forward=forward))
    found = names(results)
    assert found.get("no_mutation") in ("relu-inplace", "generic-inplace")


@pytest.mark.parametrize(
    ("method", "family", "words"),
    [
        ("none", "generic-none", "None"),
        ("call", "generic-call", "argument missing"),
        ("shape", "generic-shape", "shapes do not fit"),
        ("key", "generic-key", "never stored"),
    ],
)
def test_crashes_named_by_their_cause(method, family, words):
    """Each crash family on a forward that crashes that way (only where the reference does not crash)."""

    def forward(self, x):
        self.x = np.array(x, dtype=np.float64)
        if method == "none":
            scale = None
            return self.x * scale
        if method == "call":
            return np.maximum(self.x)
        if method == "shape":
            return self.x + np.ones(self.x.shape[-1] + 1)
        if method == "key":
            cache = {"x_": self.x}
            return np.tanh(cache["x"])

    assert_says(graded("activations", Tanh=patched(ref_act.Tanh, forward=forward)), family, words)


def test_validation_named_from_the_students_own_raise():
    """A ValueError the student's own check raised (the traceback's last line a raise) on a valid input."""
    from checks_util import run_cases, reference_runs

    from grader.course.grading import LiveExpected
    from grader.student.engine.checks import CHECKS
    from grader.student.engine.checks.context import Context
    from grader.student.engine.ops import ScriptResult

    exercise, seed = "activations.Tanh", SEEDS[0]
    student = run_cases(exercise, variant_ns("activations"), seed)
    student["cube"] = ScriptResult(
        error={
            "type": "ValueError",
            "message": "Tanh expects a 2-D input",
            "where": "Tanh.forward",
            "traceback": '  File "activations.py", line 9,'
            ' in forward\n    raise ValueError("Tanh expects a 2-D input")',
        }
    )
    plan = CHECKS[exercise].checked_plan(seed)
    ctx = Context(
        exercise, seed, {c.name: c for c in plan.cases}, student, LiveExpected(exercise, reference_runs(exercise, seed))
    )
    found = ctx.diagnose("cube", [], match_error=True)
    assert found is not None and found.id == "generic-validation" and "valid input" in found.sentence
    student["cube"].error["traceback"] = '  File "activations.py", line 9, in forward\n    return np.tanh(x)'
    ctx = Context(
        exercise, seed, {c.name: c for c in plan.cases}, student, LiveExpected(exercise, reference_runs(exercise, seed))
    )
    assert ctx.diagnose("cube", [], match_error=True) is None  # numpy's ValueError: not the student's check
    student["cube"].error["traceback"] = (
        '  File "activations.py", line 9, in forward\n    return lin.forward(x)\n'
        '  File "linear.py", line 30, in forward\n    raise ValueError("bad")'
    )
    ctx = Context(
        exercise, seed, {c.name: c for c in plan.cases}, student, LiveExpected(exercise, reference_runs(exercise, seed))
    )
    assert ctx.diagnose("cube", [], match_error=True) is None  # another exercise's check, tripped by a wrong call


# --------------------------------------------------------------------------- families that run the reference


def test_param_default_changed():
    """BatchNorm1d's default eps set to 1e-3: the cases that leave eps unset behave as eps = 0.001."""

    class Wrong(ref_norm.BatchNorm1d):
        def __init__(self, num_features, eps=1e-3, momentum=0.1):
            super().__init__(num_features, eps, momentum)

    results = graded("normalization", BatchNorm1d=Wrong)
    assert_says(results, "generic-param", "default eps behaves as 0.001")


def test_param_read_another_way():
    """LeakyReLU reading negative_slope as 1 - slope everywhere it is given."""

    class Wrong(ref_act.LeakyReLU):
        def __init__(self, negative_slope=0.01):
            super().__init__(negative_slope if negative_slope == 0.01 else 1.0 - negative_slope)

    results = graded("activations", LeakyReLU=Wrong)
    assert_says(results, "generic-param", "negative_slope were read as 1 - negative_slope")


def test_mode_state_updated_twice():
    def forward(self, x):
        if self.training:
            ref_norm.BatchNorm1d.forward(self, x)
        return ref_norm.BatchNorm1d.forward(self, x)

    results = graded("normalization", BatchNorm1d=patched(ref_norm.BatchNorm1d, forward=forward))
    assert_says(results, "generic-mode", "twice")


def test_function_derivative_at_the_output():
    def backward(self, dout):
        return dout * (1.0 - np.tanh(self.out) ** 2)

    results = graded("activations", Tanh=patched(ref_act.Tanh, backward=backward))
    assert_says(results, "generic-function", "at the output y")


def test_terms_coefficients():
    """GELU's backward with its x phi(x) term's sign flipped."""
    import math

    def backward(self, dout):
        x = self.x
        if self.approximate == "tanh":
            return ref_act.GELU.backward(self, dout)
        pdf = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
        return dout * (ref_act._phi_cdf(x) - x * pdf)

    results = graded("activations", GELU=patched(ref_act.GELU, backward=backward))
    assert_says(
        results, "generic-terms", "the term dout*x*phi(x) has the wrong sign; the other terms (dout*Phi(x)) are right"
    )


def test_terms_factor_per_group():
    """RMSNorm's second term divided by RMS^2 more: wrong by a factor that changes from row to row."""

    def backward(self, dout):
        x, rms = self.cache["x"], self.cache["rms"]
        self.dgamma = (dout * self.cache["x_norm"]).reshape(-1, self.dim).sum(axis=0)
        total = np.sum(dout * self.gamma * x, axis=-1, keepdims=True)
        return dout * self.gamma / rms - x / (self.dim * rms**5) * total

    results = graded("normalization", RMSNorm=patched(ref_norm.RMSNorm, backward=backward))
    assert_says(results, "generic-terms", "changes from one normalised group to the next")


def test_axes_of_the_variance_alone():
    """InstanceNorm2d's variance over every axis (its mean right)."""

    def forward(self, x):
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=(2, 3), keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var() + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std}
        return self.gamma.reshape(1, -1, 1, 1) * x_hat + self.beta.reshape(1, -1, 1, 1)

    results = graded("normalization", InstanceNorm2d=patched(ref_norm.InstanceNorm2d, forward=forward))
    assert_says(results, "generic-axes", "variance is taken over every axis")


# --------------------------------------------------------------------------- the guarantees


def test_catalogued_mistake_keeps_its_id():
    from grader.mistakes import CATALOGUE

    mistake = CATALOGUE["tanh-grad-not-squared"]
    results = grade_in_process("activations.Tanh", mistake.namespace)
    assert set(names(results).values()) == {"tanh-grad-not-squared"}


def test_correct_code_gets_no_name():
    results = grade_in_process("normalization.LayerNorm", variant_ns("normalization"))
    assert all(r.passed for r in results)


def test_a_claim_that_fails_on_another_case_is_not_named():
    """holds() on a scale claim: reproduces the failing case, contradicted on a case where the student is right."""
    from checks_util import run_cases, reference_runs

    from grader.course.grading import LiveExpected
    from grader.student.engine.checks import CHECKS
    from grader.student.engine.checks.context import Context

    def backward(self, dout):
        dx = ref_act.Sigmoid.backward(self, dout)
        return 2.0 * dx if dout.ndim == 2 else dx

    exercise, seed = "activations.Sigmoid", SEEDS[0]
    ns = variant_ns("activations", Sigmoid=patched(ref_act.Sigmoid, backward=backward))
    plan = CHECKS[exercise].checked_plan(seed)
    ctx = Context(
        exercise,
        seed,
        {c.name: c for c in plan.cases},
        run_cases(exercise, ns, seed),
        LiveExpected(exercise, reference_runs(exercise, seed)),
    )
    claims = scale_claims(ctx, "mat", ["dx"], None)
    assert claims and claims[0].predict("mat")["dx"] is not None
    assert not holds(ctx, claims[0], "mat", ["dx"], 1e-9, 1e-11)
    assert ctx.diagnose("mat", ["dx"], 1e-9, 1e-11) is None


def test_offline_grading_names_data_families_only(tmp_path):
    """A PackExpected has no rerun, terms or axes: those families are skipped, the data families still name."""
    from grader.course.grading import LiveExpected
    from grader.student.engine.checks.context import Context

    class Pack:  # a stand-in with only what a case pack gives: the reference's and the variants' results
        live = False

        def __init__(self, live: LiveExpected) -> None:
            self._live = live
            self.mistakes = live.mistakes

        @property
        def reference(self):
            return self._live.reference

        def variant(self, mistake_id, case):
            return self._live.variant(mistake_id, case)

        def combination(self, ids):
            return None

    from checks_util import run_cases, reference_runs

    from grader.student.engine.checks import CHECKS

    exercise, seed = "activations.Sigmoid", SEEDS[0]
    wrong = patched(ref_act.Sigmoid, backward=lambda self, dout: 2.0 * ref_act.Sigmoid.backward(self, dout))
    ns = variant_ns("activations", Sigmoid=wrong)
    plan = CHECKS[exercise].checked_plan(seed)
    pack = Pack(LiveExpected(exercise, reference_runs(exercise, seed)))
    assert not hasattr(pack, "rerun") and not hasattr(pack, "terms")
    ctx = Context(exercise, seed, {c.name: c for c in plan.cases}, run_cases(exercise, ns, seed), pack)
    found = ctx.diagnose("mat", ["dx"], 1e-9, 1e-11)
    assert found is not None and found.id == "generic-scale"


def test_generic_combined_with_a_catalogued_mistake_names_both():
    """Tanh's derivative not squared (catalogued) and then doubled: the known mistake first, the factor "and also"."""
    from grader.mistakes import CATALOGUE

    base = CATALOGUE["tanh-grad-not-squared"].replacement

    def backward(self, dout):
        return 2.0 * base.backward(self, dout)

    results = graded("activations", Tanh=patched(base, backward=backward))
    both = [r for r in results if r.misconception == "tanh-grad-not-squared" and "generic-scale" in r.also]
    assert both, [(r.name, r.misconception, r.also) for r in results if not r.passed]
    assert "And also: Generic diagnosis generic-scale: Your dx is 2 times" in both[0].message


def test_right_values_of_the_wrong_dtype_get_no_generic_name():
    """float32 values (right to float32's precision) on one case: the check says the dtype; no setting, no factor is
    named (a claim must change one of the failing outputs, and a solved setting must reproduce the student)."""

    def forward(self, x):
        y = ref_norm.BatchNorm2d.forward(self, x)
        return y.astype(np.float32) if np.max(np.abs(x)) > 1e3 else y

    results = graded("normalization", BatchNorm2d=patched(ref_norm.BatchNorm2d, forward=forward))
    large = next(r for r in results if r.name == "forward_large")
    assert not large.passed and large.misconception is None
    assert large.message == "training forward on magnitudes around 1e4: y: dtype float32, expected float64"


def test_a_setting_is_named_only_when_every_case_with_it_is_wrong():
    """LayerNorm returning x in eval mode: wrong in every eval case, right in every other; never "except with
    normalized_shape=6", a setting most right cases have too."""

    def forward(self, x):
        y = ref_norm.LayerNorm.forward(self, x)
        return y if self.training else np.asarray(x, dtype=np.float64)

    results = graded("normalization", LayerNorm=patched(ref_norm.LayerNorm, forward=forward))
    said = messages(results, "generic-region")
    assert said and said[0].startswith(
        "Generic diagnosis generic-region: Your y is wrong in every case in eval mode and right in every case without"
    )
