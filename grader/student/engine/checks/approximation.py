"""Hidden checks of ``approximation.fit_function`` (Cybenko's theorem made concrete).

The student's fit_function runs in the child on two named targets of
``grader.student.engine.ops.TARGETS`` (sin(2 pi x), and a narrow Gaussian bump
e^(-(x - 0.5)^2 / 0.02)) with 32 hidden units, the default 2000 steps and a
generator seeded from the exercise seed; the returned g is evaluated on a
dense grid of 1001 points of [0, 1] (``eval_fn``). Graded here, in the parent,
by the largest error max |g(x) - f(x)| over the grid:

- below 0.05: full marks for that target;
- from 0.05 to 0.30: partial credit falling linearly to 0 (a fit that has the
  right shape but is not tight enough still earns something);
- 0.30 or more, NaN, or the wrong shape: nothing.

The reference reaches 0.003 to 0.02 on both targets. Training 2000 steps twice
takes ~1 s in NumPy, so this exercise gets a 60 s budget (``timeout``) instead
of the default 10 s, leaving room for slower but correct student code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.feedback import figures
from grader.student.engine.checks.context import Context, error_text
from grader.student.engine.checks.kinds import Check, result
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import TARGETS, Case

FULL_MARKS_ERROR = 0.05
ZERO_MARKS_ERROR = 0.30
N_HIDDEN = 32
GRID = np.linspace(0.0, 1.0, 1001).reshape(-1, 1)
TARGET_TEXT = {"sin_2pi": "sin(2 pi x)", "gauss_bump": "exp(-(x - 0.5)^2 / 0.02)"}


def fit_case(name: str, target: str, seed: int) -> Case:
    """g = fit_function(TARGETS[target], 32, rng(seed)); y = g(grid); y_small = g(5 points)."""
    script: list[dict[str, Any]] = [
        {"op": "target", "var": "f", "name": target},
        {"op": "func", "fn": "approximation.fit_function", "args": [{"var": "f"}, N_HIDDEN, {"rng": seed}], "to": "g"},
        {"op": "eval_fn", "var": "g", "x": {"array": "grid"}, "out": "y"},
        {"op": "eval_fn", "var": "g", "x": {"array": "small"}, "out": "y_small"},
    ]
    small = np.array([[0.0], [0.1], [0.45], [0.8], [1.0]])
    return Case(name, script, {"grid": GRID.copy(), "small": small})


def partial_score(err: float, points: float) -> float:
    """points when err < 0.05, falling linearly to 0 at err = 0.30."""
    if not np.isfinite(err) or err >= ZERO_MARKS_ERROR:
        return 0.0
    if err < FULL_MARKS_ERROR:
        return points
    return points * (ZERO_MARKS_ERROR - err) / (ZERO_MARKS_ERROR - FULL_MARKS_ERROR)


class MaxError(Check):
    """max |g - f| over the grid of ``case``, graded with partial credit."""

    def __init__(self, name: str, points: float, case: str, target: str) -> None:
        super().__init__(name, points)
        self.case = case
        self.target = target

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        y = s.outputs.get("y")
        what = f"fitting f(x) = {TARGET_TEXT[self.target]} with {N_HIDDEN} hidden units"
        if y is None:
            return CheckResult(self.name, False, 0.0, self.points, f"{what}: {error_text(s.error)}")
        if y.size != GRID.size:
            return CheckResult(
                self.name, False, 0.0, self.points, f"{what}: g returned shape {y.shape} for x of shape {GRID.shape}"
            )
        expected = TARGETS[self.target](GRID)
        diff = np.abs(y.reshape(-1).astype(np.float64) - expected.reshape(-1))
        err = float(np.max(diff)) if np.all(np.isfinite(diff)) else float("nan")
        score = partial_score(err, self.points)
        if score >= self.points:
            return CheckResult(self.name, True, self.points, self.points)
        if not np.isfinite(err):
            message = f"{what}: g returned NaN or inf on the grid (did training diverge? try a smaller learning rate)"
        else:
            worst = float(GRID[int(np.argmax(diff)), 0])
            message = (
                f"{what}: the largest error over 1001 points of [0, 1] is {err:.3g} (at x = {worst:.3f});"
                f" full marks below {FULL_MARKS_ERROR}, partial credit up to {ZERO_MARKS_ERROR}."
                " More steps, a learning-rate schedule or spreading the hidden units' biases over"
                " [0, 1] helps"
            )
        figure = figures.fit_figure(GRID, y, expected, title=what, full_marks_error=FULL_MARKS_ERROR)
        return CheckResult(self.name, False, score, self.points, message, figure=figure)


class OutputShape(Check):
    """g maps (N, 1) to (N, 1) float64 for N = 1001 and N = 5."""

    def run(self, ctx: Context) -> CheckResult:
        for case in ("sin", "bump"):
            s = ctx.student_result(case)
            for key, n in (("y", GRID.shape[0]), ("y_small", 5)):
                y = s.outputs.get(key)
                if y is None:
                    return result(self.name, self.points, False, f"case {case}: {error_text(s.error)}")
                if y.shape != (n, 1) or y.dtype != np.float64:
                    return result(
                        self.name,
                        self.points,
                        False,
                        f"case {case}: g(x) for x of shape ({n}, 1) returned shape {y.shape}"
                        f" dtype {y.dtype}; expected ({n}, 1) float64",
                    )
        return result(self.name, self.points, True)


class FitFunctionChecks(ExerciseChecks):
    """approximation.fit_function: max error on sin(2 pi x) and on a bump, output shape."""

    id = "approximation.fit_function"
    timeout = 60.0

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        seeds = [int(s) for s in rng.integers(0, 2**31, size=2)]
        plan = Plan()
        plan.add_case(fit_case("sin", "sin_2pi", seeds[0]))
        plan.add_case(fit_case("bump", "gauss_bump", seeds[1]))
        plan.add(MaxError("sin_2pi", 5.0, "sin", "sin_2pi"))
        plan.add(MaxError("gauss_bump", 3.0, "bump", "gauss_bump"))
        plan.add(OutputShape("output_shape", 2.0))
        return plan


CHECKS: list[ExerciseChecks] = [FitFunctionChecks()]
