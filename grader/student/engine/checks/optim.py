"""Hidden checks of the optimisers ``optim.SGD`` and ``optim.AdamW``.

Each case builds a dict of two parameters of different shapes ("W" (4, 5) and
"b" (5,)), holds the caller's arrays in variables, runs several ``step``s with
fresh gradients, and records after every step both the dict's entries
(``W_1``, ``b_1`` ...) and the caller's own arrays (``W_held_1`` ...).
The dict entries are compared with the reference (values); the held arrays
show whether the update happened in place.

Optimisers are deterministic, so the comparison is elementwise at float64
tolerance: rtol 1e-9 and atol 1e-12 * max(1, max|expected|). A correct
implementation agrees to ~1e-15; the smallest classic mistake (weight decay
applied after the Adam step) moves a parameter by lr * wd * lr ~ 1e-8.
The AdamW case with gradients of 1e-10 makes eps matter: sqrt(v_hat) ~ 1e-10
is far below eps = 1e-8, so eps inside the square root or an unscaled eps
changes every update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.engine.checks.context import Context, error_text
from grader.student.engine.checks.kinds import Check, Compare, own_figure, result
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case

RTOL = 1e-9
ATOL = 1e-12
KEYS = ("W", "b")
SHAPES = {"W": (4, 5), "b": (5,)}


def optimiser_case(
    name: str, cls: str, kwargs: dict[str, Any], steps: int, rng: np.random.Generator, grad_scale: float = 1.0
) -> Case:
    """new opt = cls(**kwargs); params = {"W": W, "b": b}; ``steps`` x opt.step(params, grads_t).

    Records W_t, b_t (the dict's entries) and W_held_t, b_held_t (the caller's arrays) after
    every step, and the gradient arrays after the last step (gW_after, gb_after).
    """
    arrays: dict[str, np.ndarray] = {}
    for key in KEYS:
        arrays[key] = rng.standard_normal(SHAPES[key])
        for t in range(1, steps + 1):
            arrays[f"g{key}_{t}"] = grad_scale * rng.standard_normal(SHAPES[key])
    script: list[dict[str, Any]] = [{"op": "new", "var": "opt", "cls": cls, "kwargs": kwargs}]
    for key in KEYS:
        script.append({"op": "let", "var": key, "value": {"array": key}})
    script.append({"op": "let", "var": "params", "value": {"dict": {k: {"var": k} for k in KEYS}}})
    for t in range(1, steps + 1):
        for key in KEYS:
            script.append({"op": "let", "var": f"g{key}", "value": {"array": f"g{key}_{t}"}})
        grads = {"dict": {k: {"var": f"g{k}"} for k in KEYS}}
        script.append({"op": "call", "var": "opt", "method": "step", "args": [{"var": "params"}, grads]})
        for key in KEYS:
            script.append({"op": "get", "var": "params", "attr": key, "out": f"{key}_{t}"})
            script.append({"op": "output", "value": {"var": key}, "out": f"{key}_held_{t}"})
    for key in KEYS:
        script.append({"op": "output", "value": {"var": f"g{key}"}, "out": f"g{key}_after"})
    return Case(name, script, arrays)


def value_keys(steps: int) -> list[str]:
    return [f"{key}_{t}" for t in range(1, steps + 1) for key in KEYS]


class InPlace(Check):
    """After every step the caller's arrays are the dict's entries (updated in place); grads untouched."""

    def __init__(self, name: str, points: float, cases: dict[str, int]) -> None:
        super().__init__(name, points)
        self.cases = cases

    def run(self, ctx: Context) -> CheckResult:
        for case, steps in self.cases.items():
            s = ctx.student_result(case)
            held_keys = [f"{key}_held_{t}" for t in range(1, steps + 1) for key in KEYS]
            for t in range(1, steps + 1):
                for param in KEYS:
                    held, entry = s.outputs.get(f"{param}_held_{t}"), s.outputs.get(f"{param}_{t}")
                    if held is None or entry is None:
                        return result(self.name, self.points, False, f"case {case}: {error_text(s.error)}")
                    if held.shape == entry.shape and np.array_equal(held, entry, equal_nan=True):
                        continue
                    start = ctx.cases[case].arrays[param]
                    unchanged = held.shape == start.shape and np.array_equal(held, start)
                    why = (
                        "the caller's array did not change at all: params[key] was rebound to a new array"
                        " (param = param - ...) instead of being updated in place (param -= ...)"
                        if unchanged
                        else "the caller's array differs from params[key]"
                    )
                    mistake = ctx.diagnose(case, held_keys, RTOL, ATOL)
                    figure = own_figure(
                        held,
                        entry,
                        0.0,
                        0.0,
                        f"case {case}, step {t}: your caller's {param}",
                        param,
                        f"params[{param!r}] after the step",
                        f"the caller's {param} after the step",
                    )
                    return result(
                        self.name, self.points, False, f"case {case}, step {t}, {param}: {why}", mistake, figure
                    )
            for param in KEYS:
                got = s.outputs.get(f"g{param}_after")
                last = ctx.cases[case].arrays[f"g{param}_{steps}"]
                if got is None or got.shape != last.shape or not np.array_equal(got, last):
                    return result(
                        self.name,
                        self.points,
                        False,
                        f"case {case}: step modified the gradient grads[{param!r}]; leave grads unchanged",
                    )
        return result(self.name, self.points, True)


class SGDChecks(ExerciseChecks):
    """optim.SGD: plain, momentum, coupled weight decay with and without momentum, in-place update."""

    id = "optim.SGD"

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        lr = round(float(rng.uniform(0.05, 0.2)), 4)
        momentum = round(float(rng.uniform(0.7, 0.9)), 3)
        wd = round(float(rng.uniform(0.02, 0.1)), 4)
        plan = Plan()
        cases = {
            "plain": ({"lr": lr}, 3),
            "momentum": ({"lr": lr, "momentum": momentum}, 4),
            "momentum_wd": ({"lr": lr, "momentum": momentum, "weight_decay": wd}, 4),
            "wd": ({"lr": lr, "weight_decay": wd}, 3),
        }
        for name, (kwargs, steps) in cases.items():
            plan.add_case(optimiser_case(name, self.id, kwargs, steps, rng))
        what = {
            "plain": f"SGD(lr={lr}), 3 steps",
            "momentum": f"SGD(lr={lr}, momentum={momentum}), 4 steps",
            "momentum_wd": f"SGD(lr={lr}, momentum={momentum}, weight_decay={wd}), 4 steps",
            "wd": f"SGD(lr={lr}, weight_decay={wd}), 3 steps",
        }
        points = {"plain": 2.0, "momentum": 2.5, "momentum_wd": 2.5, "wd": 1.0}
        for name, (_kwargs, steps) in cases.items():
            plan.add(
                Compare(
                    name,
                    points[name],
                    case=name,
                    keys=value_keys(steps),
                    what=what[name],
                    rtol=RTOL,
                    atol=ATOL,
                    carry=1.0,
                )
            )  # pictures: each step's change, yours / expected
        plan.add(InPlace("in_place", 2.0, {name: steps for name, (_k, steps) in cases.items()}))
        return plan


class AdamWChecks(ExerciseChecks):
    """optim.AdamW: defaults, decoupled weight decay, betas, tiny gradients where eps matters, in place."""

    id = "optim.AdamW"

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        lr = round(float(rng.uniform(0.005, 0.02)), 5)
        wd = round(float(rng.uniform(0.05, 0.2)), 4)
        beta1 = round(float(rng.uniform(0.75, 0.85)), 3)
        beta2 = round(float(rng.uniform(0.95, 0.99)), 3)
        plan = Plan()
        cases: dict[str, tuple[dict[str, Any], int, float]] = {
            "defaults": ({"lr": lr}, 4, 1.0),
            "weight_decay": ({"lr": lr, "weight_decay": wd}, 4, 1.0),
            "betas": ({"lr": lr, "betas": {"tuple": [beta1, beta2]}, "weight_decay": 0.0}, 5, 1.0),
            "tiny_grads": ({"lr": lr}, 4, 1e-10),
        }
        for name, (kwargs, steps, scale) in cases.items():
            plan.add_case(optimiser_case(name, self.id, kwargs, steps, rng, grad_scale=scale))
        what = {
            "defaults": f"AdamW(lr={lr}) (default betas, eps, weight_decay), 4 steps",
            "weight_decay": f"AdamW(lr={lr}, weight_decay={wd}), 4 steps",
            "betas": f"AdamW(lr={lr}, betas=({beta1}, {beta2}), weight_decay=0), 5 steps",
            "tiny_grads": f"AdamW(lr={lr}) with gradients ~1e-10 (eps = 1e-8 dominates sqrt(v_hat)), 4 steps",
        }
        points = {"defaults": 2.0, "weight_decay": 2.5, "betas": 1.5, "tiny_grads": 2.0}
        for name, (_kwargs, steps, _scale) in cases.items():
            plan.add(
                Compare(
                    name,
                    points[name],
                    case=name,
                    keys=value_keys(steps),
                    what=what[name],
                    rtol=RTOL,
                    atol=ATOL,
                    carry=1.0,
                )
            )
        plan.add(InPlace("in_place", 2.0, {name: steps for name, (_k, steps, _s) in cases.items()}))
        return plan


CHECKS: list[ExerciseChecks] = [SGDChecks(), AdamWChecks()]
