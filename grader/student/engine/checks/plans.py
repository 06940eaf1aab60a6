"""The plans: an exercise's cases and checks for a seed, and the builders of the usual layer cases.

An exercise's checks are an :class:`ExerciseChecks` subclass registered in
``grader.student.engine.checks.CHECKS``. It builds, deterministically from a seed, a :class:`Plan`: the
cases (scripts for ``grader.student.engine.ops``) and the checks that read their outputs (an exercise's
points add up to ``max_score`` = 10). ``cases(seed)`` hands the cases to the sandbox; ``evaluate`` rebuilds
the same plan and runs every check on the student's and the reference's results, in the parent.
:class:`LayerPlan` builds the usual layer cases (forward, backward, d<param>, numgrad, mutation) in one call
per input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.student.engine.generic import search
from grader.student.engine.compare import compare, scale_of
from grader.student.engine.diagnosis import (
    Expected,
)
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case, ScriptResult


from grader.student.engine.checks.context import (
    BACKWARD_ATOL,
    BACKWARD_RTOL,
    Context,
    PlanError,
    error_text,
)
from grader.student.engine.checks.kinds import (
    HANDED,
    Check,
    Compare,
    Consistency,
    Custom,
    Outcome,
    ShapeDtype,
    Unchanged,
    own_figure,
    result,
)


# --------------------------------------------------------------------------- plans


@dataclass
class Plan:
    """An exercise's cases and checks for one seed."""

    cases: list[Case] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def add_case(self, case: Case) -> str:
        if any(c.name == case.name for c in self.cases):
            raise PlanError(f"duplicate case name {case.name!r}")
        self.cases.append(case)
        return case.name

    def add(self, check: Check) -> Check:
        if any(c.name == check.name for c in self.checks):
            raise PlanError(f"duplicate check name {check.name!r}")
        self.checks.append(check)
        return check

    def total_points(self) -> float:
        return sum(c.points for c in self.checks)


class ExerciseChecks:
    """One exercise's hidden checks. Subclasses set ``id`` and implement ``plan(seed)``.

    ``timeout`` is the wall-clock budget (seconds) of the whole exercise in the child.
    """

    id: str = ""
    max_score: float = 10.0
    timeout: float = 10.0
    needs_opencl: bool = False
    # False when judging reads the reference's and the variants' results only through StatCheck verdicts
    # (dropout, init): a case pack then stores those verdicts instead of the (large) sampled outputs.
    pack_outputs: bool = True
    # The student's own exercises this one runs (blocks.MLPBlock: Linear, BatchNorm1d, GELU, Dropout): when one of
    # them falls short in the same run, the report says to fix it first. Empty: any exercise of an imported file.
    uses: tuple[str, ...] = ()

    def plan(self, seed: int) -> Plan:
        raise NotImplementedError

    def checked_plan(self, seed: int) -> Plan:
        """``plan(seed)`` after verifying that its points add up to ``max_score``."""
        plan = self.plan(seed)
        if abs(plan.total_points() - self.max_score) > 1e-9:
            raise PlanError(f"{self.id}: checks add up to {plan.total_points()}, expected {self.max_score}")
        return plan

    def cases(self, seed: int) -> list[Case]:
        """The cases to run on the student and on the reference."""
        return self.checked_plan(seed).cases

    def runs_here(self, seed: int, live: bool) -> list[Check]:
        """The checks of ``plan(seed)`` that run with live reference code (``live``) or with a case pack."""
        return [c for c in self.checked_plan(seed).checks if live or not c.live_only]

    def points_here(self, seed: int, live: bool) -> float:
        """The points of the checks that run here: ``max_score`` live, less the live-only checks with a pack."""
        return sum(c.points for c in self.runs_here(seed, live))

    def evaluate(self, student: dict[str, ScriptResult], expected: Expected, seed: int) -> list[CheckResult]:
        """Run the checks of ``plan(seed)`` that can run with ``expected`` on the student's results (in the parent)."""
        plan = self.checked_plan(seed)
        ctx = Context(
            exercise_id=self.id,
            seed=seed,
            cases={c.name: c for c in plan.cases},
            student=student,
            expected=expected,
        )
        checks = [check for check in plan.checks if expected.live or not check.live_only]
        results = search.name_crashes(ctx, [check.grade(ctx) for check in checks])
        return no_credit_for_support_alone(checks, results)


NOTHING_ELSE = (
    "earns nothing yet: every other check of this exercise fails, and consistency, repeatability,"
    " shape and unchanged inputs count only beside right values"
)


def no_credit_for_support_alone(checks: list[Check], results: list[CheckResult]) -> list[CheckResult]:
    """``results`` with every passing supporting check failed when no other check passed."""
    if any(r.passed and not c.supporting and r.max_score > 0 for c, r in zip(checks, results, strict=True)):
        return results
    return [
        result(r.name, r.max_score, False, NOTHING_ELSE) if r.passed and c.supporting else r
        for c, r in zip(checks, results, strict=True)
    ]


# --------------------------------------------------------------------------- layer helpers


def layer_script(
    cls: str,
    kwargs: dict[str, Any] | None = None,
    *,
    params: dict[str, str] | None = None,
    mode: str = "train",
    prelude: list[dict[str, Any]] | None = None,
    x: str = "x",
    dout: str | None = "dout",
    grads: list[str] | None = None,
    numgrad: list[str] | None = None,
    after_forward: list[str] | None = None,
    twice: bool = False,
) -> list[dict[str, Any]]:
    """The usual layer script on variable ``m``.

    new m = cls(**kwargs); p_<p> = copy of arrays[params[p]], set m.<p> = p_<p>; m.eval() when
    mode == "eval"; the prelude ops; x0 = copy of arrays[x]; y = m.forward(x0); x_after = x0;
    get each attr of after_forward; dout0 = copy of arrays[dout]; dx = m.backward(dout0);
    d<g> = m.d<g> for g in grads; with ``twice``, dx_again = m.backward(a fresh copy of dout);
    then every array handed to the student is recorded again (mutation after every call):
    x_after_backward = x0, dout_after = dout0, <p>_after = p_<p>;
    numgrad outputs num_dx ("x" in numgrad) and num_d<p> (a parameter name).
    """
    script: list[dict[str, Any]] = [{"op": "new", "var": "m", "cls": cls, "args": [], "kwargs": dict(kwargs or {})}]
    for attr, key in (params or {}).items():
        script.append({"op": "let", "var": f"p_{attr}", "value": {"array": key}})
        script.append({"op": "set", "var": "m", "attr": attr, "value": {"var": f"p_{attr}"}})
    if mode == "eval":
        script.append({"op": "call", "var": "m", "method": "eval"})
    script.extend(prelude or [])
    script.append({"op": "let", "var": "x0", "value": {"array": x}})
    script.append({"op": "call", "var": "m", "method": "forward", "args": [{"var": "x0"}], "out": "y"})
    script.append({"op": "output", "value": {"var": "x0"}, "out": "x_after"})
    for attr in after_forward or []:
        script.append({"op": "get", "var": "m", "attr": attr, "out": attr})
    if dout is not None:
        script.append({"op": "let", "var": "dout0", "value": {"array": dout}})
        script.append({"op": "call", "var": "m", "method": "backward", "args": [{"var": "dout0"}], "out": "dx"})
        for g in grads or []:
            script.append({"op": "get", "var": "m", "attr": f"d{g}", "out": f"d{g}"})
        if twice:
            script.append(
                {"op": "call", "var": "m", "method": "backward", "args": [{"array": dout}], "out": "dx_again"}
            )
        script.append({"op": "output", "value": {"var": "x0"}, "out": "x_after_backward"})
        script.append({"op": "output", "value": {"var": "dout0"}, "out": "dout_after"})
        for attr in params or {}:
            script.append({"op": "output", "value": {"var": f"p_{attr}"}, "out": f"{attr}_after"})
        for target in numgrad or []:
            op: dict[str, Any] = {"op": "numgrad", "var": "m", "x": {"array": x}, "dout": {"array": dout}}
            if target == "x":
                op["out"] = "num_dx"
            else:
                op["out"] = f"num_d{target}"
                op["wrt"] = target
            script.append(op)
    return script


class LayerPlan(Plan):
    """A Plan with helpers for layers: ``layer`` adds a case and its forward/backward checks.

    ``rng`` (seeded from the exercise seed) draws every input, so each student
    sees different numbers and the same student always the same.
    """

    def __init__(self, cls: str, seed: int) -> None:
        super().__init__()
        self.cls = cls
        self.rng = np.random.default_rng(seed)
        self.layer_cases: list[str] = []  # cases with x / x_after / y / dx, for mutation and shape checks
        self.backward_cases: list[str] = []

    def layer(
        self,
        name: str,
        x: np.ndarray,
        *,
        kwargs: dict[str, Any] | None = None,
        params: dict[str, np.ndarray] | None = None,
        mode: str = "train",
        grads: list[str] | None = None,
        numgrad: list[str] | None = None,
        twice: bool = False,
        backward: bool = True,
        prelude: list[dict[str, Any]] | None = None,
        extra_arrays: dict[str, np.ndarray] | None = None,
        after_forward: list[str] | None = None,
        dout: np.ndarray | None = None,
    ) -> str:
        """Add case ``name``: the layer (constructor ``kwargs``, parameters set to ``params``) on ``x``.

        dout is drawn from N(0, 1) unless given. Returns the case name.
        """
        arrays: dict[str, np.ndarray] = {"x": np.asarray(x, dtype=np.float64)}
        param_keys: dict[str, str] = {}
        for attr, value in (params or {}).items():
            arrays[f"param_{attr}"] = np.asarray(value, dtype=np.float64)
            param_keys[attr] = f"param_{attr}"
        if backward:
            arrays["dout"] = self.rng.standard_normal(arrays["x"].shape) if dout is None else np.asarray(dout, float)
        arrays.update(extra_arrays or {})
        script = layer_script(
            self.cls,
            kwargs,
            params=param_keys,
            mode=mode,
            prelude=prelude,
            dout="dout" if backward else None,
            grads=grads,
            numgrad=numgrad,
            twice=twice,
            after_forward=after_forward,
        )
        self.add_case(Case(name, script, arrays))
        self.layer_cases.append(name)
        if backward:
            self.backward_cases.append(name)
        return name

    def forward_check(self, name: str, points: float, case: str, what: str, **kw: Any) -> Check:
        """Compare y of ``case`` with the reference."""
        return self.add(Compare(name, points, case=case, keys=["y"], what=what, **kw))

    def backward_check(
        self, name: str, points: float, case: str, what: str, grads: list[str] | None = None, **kw: Any
    ) -> Check:
        """Compare dx and each d<g> of ``case`` with the reference (with the numgrad note when present), at
        BACKWARD_RTOL / BACKWARD_ATOL unless given."""
        keys = ["dx"] + [f"d{g}" for g in grads or []]
        pairs = self._numgrad_pairs(case)
        numgrad = {k: pairs[k] for k in keys if k in pairs}
        kw.setdefault("rtol", BACKWARD_RTOL)
        kw.setdefault("atol", BACKWARD_ATOL)
        return self.add(Compare(name, points, case=case, keys=keys, what=what, numgrad=numgrad, **kw))

    def _numgrad_pairs(self, case: str) -> dict[str, str]:
        """Analytic key -> numgrad key of ``case``'s numgrad ops: {"dx": "num_dx", "dgamma": "num_dgamma"}."""
        script = next(c.script for c in self.cases if c.name == case)
        return {op["out"][len("num_") :]: op["out"] for op in script if op.get("op") == "numgrad"}

    def consistency_check(self, name: str, points: float, case: str, what: str) -> Check:
        """The student's dx (and d<p>) against central differences of their own forward on ``case``."""
        return self.add(
            Consistency(name, points, case=case, pairs=self._numgrad_pairs(case), what=what, supporting=True)
        )

    def backward_twice_check(self, name: str, points: float, case: str) -> Check:
        """A second backward(dout) after the same forward returns the same dx (``case`` built with twice=True)."""
        return self.add(Custom(name, points, fn=lambda ctx: _same_twice(ctx, case), supporting=True))

    def no_mutation_check(self, name: str, points: float) -> Check:
        """Every array handed to the student is unchanged after every call, in every layer case.

        x after forward (x_after); with a backward, x again (x_after_backward), dout
        (dout_after) and each parameter array set on the layer (<p>_after), checked
        whenever the case got that far.
        """
        items: list[tuple[Any, ...]] = []
        for case in self.layer_cases:
            items.append((case, "x_after", "x"))
            if case in self.backward_cases:
                items.append((case, "x_after_backward", "x", True))
                items.append((case, "dout_after", "dout", True))
                script = next(c.script for c in self.cases if c.name == case)
                for op in script:
                    if op.get("op") == "output" and op["out"].endswith("_after") and op["out"] not in HANDED:
                        attr = op["out"][: -len("_after")]
                        items.append((case, op["out"], f"param_{attr}", True))
        return self.add(Unchanged(name, points, items=items, supporting=True))

    def shape_dtype_check(self, name: str, points: float) -> Check:
        """y (and dx where there is a backward) have the reference's shape and dtype in every layer case."""
        items = [(c, "y") for c in self.layer_cases] + [(c, "dx") for c in self.backward_cases]
        return self.add(ShapeDtype(name, points, items=items, supporting=True))


def _same_twice(ctx: Context, case: str) -> Outcome:
    """dx_again equals dx (to rounding): backward left the cached forward state alone."""
    s = ctx.student_result(case)
    dx, again = s.outputs.get("dx"), s.outputs.get("dx_again")
    if dx is None or again is None:
        return False, f"backward called twice: {error_text(s.error)}", None
    if not (np.all(np.isfinite(dx)) and np.all(np.isfinite(again))):
        return False, "backward returned NaN or inf: repeating it proves nothing until its values are finite", None
    cmp = compare(again, dx, 1e-12, 1e-12 * scale_of(dx), check_dtype=False)
    if cmp.ok:
        return True, "", None
    return (
        False,
        "a second backward(dout) after the same forward gave a different dx: backward must not modify"
        f" what forward cached (no in-place updates of self.* in backward): {cmp.message}",
        ctx.diagnose(case, ["dx_again"]),
        own_figure(
            again,
            dx,
            1e-12,
            1e-12 * scale_of(dx),
            f"backward called twice (case {case}): dx",
            "dx",
            "dx of your first backward",
            "dx of your second backward",
        ),
    )


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...], margin: float = 0.05) -> np.ndarray:
    """N(0, 1) values pushed to |x| >= margin, so kinks at 0 stay out of central differences' reach."""
    x = rng.standard_normal(shape)
    return np.where(x < 0, -1.0, 1.0) * np.maximum(np.abs(x), margin)
