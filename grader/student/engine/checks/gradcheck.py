"""Hidden checks of ``gradcheck.numerical_gradient`` and ``gradcheck.rel_error``.

numerical_gradient is called on named curved functions (``grader.student.engine.ops.TARGETS``:
x tanh x, x^3 - 2x, e^sin x, and the row softmax whose every output depends on
every input of its row) with a random dout, and compared with the reference's
central differences at rtol 1e-7, atol 1e-8 * max(1, max|expected|). Two
central differences with the same h agree to ~1e-10 (rounding 1e-16 / h); a
one-sided difference is off by h/2 * f'' * dout ~ 1e-6 to 1e-5. A case with
h = 1e-3 on x^3 - 2x (error h^2 = 1e-6) shows whether h is honoured. x must be
unchanged afterwards (to 1e-12: restoring by subtraction may cost one ulp).

rel_error: max |a - b| / max(1e-8, |a| + |b|) on random pairs, on zeros (0, no
NaN, no warning), on tiny values where the 1e-8 floor applies, and on pairs of
opposite signs (|a| + |b|, not |a + b|), and where b > a (|a - b|); the result is a scalar.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.engine.checks.context import Context, error_text
from grader.student.engine.checks.kinds import Compare, Custom, ShapeDtype, own_figure, Outcome
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.feedback import figures
from grader.student.engine.ops import Case

NG_RTOL = 1e-7
NG_ATOL = 1e-8


def numgrad_case(name: str, target: str, x: np.ndarray, dout: np.ndarray, h: float | None = None) -> Case:
    """f = TARGETS[target]; grad = numerical_gradient(f, x, dout[, h]); x_after = x."""
    kwargs = {} if h is None else {"h": h}
    script: list[dict[str, Any]] = [
        {"op": "target", "var": "f", "name": target},
        {"op": "let", "var": "x", "value": {"array": "x"}},
        {
            "op": "func",
            "fn": "gradcheck.numerical_gradient",
            "args": [{"var": "f"}, {"var": "x"}, {"array": "dout"}],
            "kwargs": kwargs,
            "out": "grad",
        },
        {"op": "output", "value": {"var": "x"}, "out": "x_after"},
    ]
    return Case(name, script, {"x": x, "dout": dout})


def x_restored(ctx: Context) -> Outcome:
    """x_after equals x to 1e-12 * max(1, |x|) in every case."""
    for name, case in ctx.cases.items():
        s = ctx.student_result(name)
        after = s.outputs.get("x_after")
        if after is None:
            return False, f"case {name}: {error_text(s.error)}", None
        x = case.arrays["x"]
        if after.shape != x.shape or not np.allclose(after, x, rtol=0.0, atol=1e-12 * max(1.0, float(np.abs(x).max()))):
            diff = float(np.max(np.abs(after - x))) if after.shape == x.shape else float("nan")
            return (
                False,
                f"case {name}: x changed by up to {diff:.2g} after numerical_gradient returned: restore"
                " every x[i] to its saved value after the two evaluations",
                ctx.diagnose(name, ["x_after"], rtol=0.0, atol=1e-12),
                own_figure(
                    after,
                    x,
                    0.0,
                    1e-12 * max(1.0, float(np.abs(x).max())),
                    f"case {name}: x after numerical_gradient returned",
                    "x",
                    "x as it was given",
                    "x after the call",
                ),
            )
    return True, "", None


class NumericalGradientChecks(ExerciseChecks):
    """gradcheck.numerical_gradient on curved targets, coupled outputs, shapes, dout, h, x restored."""

    id = "gradcheck.numerical_gradient"

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        plan = Plan()
        plan.add_case(numgrad_case("x_tanh", "x_tanh", rng.uniform(-2, 2, (3, 4)), rng.standard_normal((3, 4))))
        plan.add_case(numgrad_case("exp_sin", "exp_sin", rng.uniform(-3, 3, (4, 3)), rng.standard_normal((4, 3))))
        plan.add_case(numgrad_case("softmax", "softmax_rows", rng.standard_normal((3, 5)), rng.standard_normal((3, 5))))
        plan.add_case(numgrad_case("vector", "cube", rng.uniform(-2, 2, 7), rng.standard_normal(7)))
        plan.add_case(numgrad_case("tensor", "x_tanh", rng.uniform(-2, 2, (2, 3, 2)), rng.standard_normal((2, 3, 2))))
        plan.add_case(
            numgrad_case("dout", "exp_sin", rng.uniform(-3, 3, (3, 4)), rng.integers(-3, 4, (3, 4)).astype(np.float64))
        )
        plan.add_case(numgrad_case("h", "cube", rng.uniform(-2, 2, (3, 3)), rng.standard_normal((3, 3)), h=1e-3))

        def grad_check(name: str, points: float, case: str, what: str) -> None:
            plan.add(Compare(name, points, case=case, keys=["grad"], what=what, rtol=NG_RTOL, atol=NG_ATOL))

        grad_check("curved", 1.0, "x_tanh", "f(x) = x tanh(x) on a (3, 4) x with a random dout")
        grad_check("curved_2", 1.0, "exp_sin", "f(x) = e^sin(x) on a (4, 3) x")
        grad_check(
            "coupled",
            2.0,
            "softmax",
            "f = softmax over each row (every output depends on every input of its row): the sum over ALL outputs",
        )
        grad_check("shape_1d", 0.75, "vector", "f(x) = x^3 - 2x on a 1-D x")
        grad_check("shape_3d", 0.75, "tensor", "f(x) = x tanh(x) on a (2, 3, 2) x")
        grad_check("dout", 1.0, "dout", "f(x) = e^sin(x) with dout of integers in [-3, 3] (zeros included)")
        grad_check("h", 1.0, "h", "f(x) = x^3 - 2x with h=1e-3 (central differences are off by h^2 = 1e-6)")
        plan.add(Custom("x_restored", 1.5, fn=x_restored))
        plan.add(ShapeDtype("shape_dtype", 1.0, items=[(c.name, "grad") for c in plan.cases]))
        return plan


def rel_case(name: str, a: np.ndarray, b: np.ndarray) -> Case:
    script = [{"op": "func", "fn": "gradcheck.rel_error", "args": [{"array": "a"}, {"array": "b"}], "out": "err"}]
    return Case(name, script, {"a": a, "b": b})


def rel_scalar(ctx: Context) -> Outcome:
    """rel_error returns one number (shape ()), in every case."""
    for name in ctx.cases:
        s = ctx.student_result(name)
        err = s.outputs.get("err")
        if err is None:
            return False, f"case {name}: {error_text(s.error)}", None
        if err.shape != ():
            return (
                False,
                f"case {name}: rel_error returned shape {err.shape}; expected one number (the max over elements)",
                ctx.diagnose(name, ["err"]),
                figures.shapes_figure(err.shape, (), title=f"rel_error (case {name})", key="err"),
            )
    return True, "", None


class RelErrorChecks(ExerciseChecks):
    """gradcheck.rel_error on random pairs, zeros, tiny values, opposite signs; returns a scalar."""

    id = "gradcheck.rel_error"

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        plan = Plan()
        a = rng.standard_normal((4, 5))
        plan.add_case(rel_case("pairs", a, a + 1e-3 * rng.standard_normal((4, 5))))
        plan.add_case(rel_case("zeros", np.zeros((3, 4)), np.zeros((3, 4))))
        tiny = 1e-10 * rng.standard_normal(6)
        plan.add_case(rel_case("tiny", tiny, 1e-10 * rng.standard_normal(6)))
        c = rng.uniform(0.5, 2.0, 5)
        plan.add_case(rel_case("opposite", c, -c * rng.uniform(0.9, 1.1, 5)))
        plan.add_case(rel_case("mixed", rng.standard_normal(8), np.concatenate([rng.standard_normal(7), [0.0]])))
        base = rng.uniform(1.0, 2.0, 6)
        larger = base - 1e-3
        larger[int(rng.integers(0, 6))] += 0.5
        plan.add_case(rel_case("b_larger", base, larger))
        plan.add(Compare("pairs", 2.0, case="pairs", keys=["err"], what="random pairs", check_dtype=False))
        plan.add(
            Compare(
                "zeros",
                2.0,
                case="zeros",
                keys=["err"],
                what="two zero arrays (0, not NaN)",
                check_dtype=False,
                match_warnings=True,
            )
        )
        plan.add(
            Compare(
                "floor",
                2.0,
                case="tiny",
                keys=["err"],
                what="values ~1e-10 (the 1e-8 floor applies)",
                check_dtype=False,
            )
        )
        plan.add(
            Compare(
                "opposite_signs",
                1.5,
                case="opposite",
                keys=["err"],
                what="a and b of opposite signs (denominator |a| + |b|)",
                check_dtype=False,
            )
        )
        plan.add(
            Compare(
                "max_over_elements",
                1.0,
                case="mixed",
                keys=["err"],
                what="the maximum over elements",
                check_dtype=False,
            )
        )
        plan.add(
            Compare(
                "b_larger",
                0.5,
                case="b_larger",
                keys=["err"],
                what="the largest error where b > a (|a - b|, not a - b)",
                check_dtype=False,
            )
        )
        plan.add(Custom("scalar", 1.0, fn=rel_scalar))
        return plan


CHECKS: list[ExerciseChecks] = [NumericalGradientChecks(), RelErrorChecks()]
