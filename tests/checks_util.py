"""Test helpers shared by the checks tests: grade one exercise in-process, make wrong submissions.

``grade_in_process(exercise_id, ns, seed)`` runs the exercise's cases on ``ns``
and on the reference with ``grader.student.engine.ops.run_script`` (no sandbox) and returns
``evaluate``'s CheckResults. ``variant_ns("normalization", BatchNorm1d=Wrong)``
is the reference namespace with names of one topic replaced.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from grader.student.engine.checks import CHECKS
from grader.course.grading import LiveExpected
from grader.mistakes import patched_namespace, reference_namespace
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import run_script

SEEDS = (12345, 2026)


def run_cases(exercise_id: str, ns: Any, seed: int) -> dict:
    """{case name: ScriptResult} of the exercise's cases run on ``ns``."""
    return {c.name: run_script(ns, c.script, c.arrays) for c in CHECKS[exercise_id].cases(seed)}


_REFERENCE_RUNS: dict[tuple[str, int], dict] = {}


def reference_runs(exercise_id: str, seed: int) -> dict:
    """The reference's results of an exercise's cases (cached: evaluate never modifies them)."""
    key = (exercise_id, seed)
    if key not in _REFERENCE_RUNS:
        _REFERENCE_RUNS[key] = run_cases(exercise_id, reference_namespace(), seed)
    return _REFERENCE_RUNS[key]


def grade_in_process(exercise_id: str, ns: Any, seed: int = SEEDS[0], fresh: bool = False) -> list[CheckResult]:
    """The CheckResults of ``ns`` on one exercise, graded in this process against the reference.

    ``fresh`` reruns the reference instead of reusing its cached results.
    """
    student = run_cases(exercise_id, ns, seed)
    reference = run_cases(exercise_id, reference_namespace(), seed) if fresh else reference_runs(exercise_id, seed)
    return CHECKS[exercise_id].evaluate(student, LiveExpected(exercise_id, reference), seed)


def variant_ns(reference_module_attr: str, **overrides: Any) -> Any:
    """The reference namespace with ``overrides`` replacing names of topic ``reference_module_attr``."""
    topic = getattr(reference_namespace(), reference_module_attr)
    for name in overrides:
        if not hasattr(topic, name):
            raise AttributeError(f"reference.{reference_module_attr} has no {name}")
    return patched_namespace(reference_module_attr, overrides)


def stub_namespace() -> Any:
    """The shipped student stubs (``exercises/``) loaded as a package under a private name."""
    name = "_checks_util_stub_exercises"
    if name in sys.modules:
        return sys.modules[name]
    root = Path(__file__).resolve().parents[1] / "exercises"
    spec = importlib.util.spec_from_file_location(name, root / "__init__.py", submodule_search_locations=[str(root)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def total(results: list[CheckResult]) -> float:
    return sum(r.score for r in results)


def failed(results: list[CheckResult]) -> dict[str, CheckResult]:
    """The failing checks by name."""
    return {r.name: r for r in results if not r.passed}


def assert_full_marks(exercise_id: str, ns: Any = None, seed: int = SEEDS[0]) -> list[CheckResult]:
    """Grade ``ns`` (default: the reference) and assert every check passed with full marks."""
    results = grade_in_process(exercise_id, reference_namespace() if ns is None else ns, seed)
    bad = {r.name: r.message for r in results if not r.passed}
    assert not bad, f"{exercise_id} seed {seed}: {bad}"
    assert abs(total(results) - CHECKS[exercise_id].max_score) < 1e-9
    return results


def assert_named(exercise_id: str, mistake_id: str, seed: int = SEEDS[0]) -> CheckResult:
    """The mistake's own variant fails some check that names it; returns that check."""
    from grader.mistakes import CATALOGUE

    mistake = CATALOGUE[mistake_id]
    results = grade_in_process(exercise_id, mistake.namespace, seed)
    named = [r for r in results if r.misconception == mistake_id]
    assert named, f"{mistake_id} not named: {[(r.name, r.misconception, r.message) for r in results if not r.passed]}"
    assert all(not r.passed for r in named)
    return named[0]


def patched(base: type, **methods: Any) -> type:
    """A subclass of ``base`` with ``methods`` replaced (plain functions taking ``self`` first)."""
    return type(f"Wrong{base.__name__}", (base,), methods)


def corrupt_forward(base: type, when: Any, how: Any) -> type:
    """A subclass of ``base`` whose forward output y becomes ``how(y)`` when ``when(x)`` is true."""

    def forward(self: Any, x: Any) -> Any:
        y = base.forward(self, x)
        return how(y) if when(x) else y

    return patched(base, forward=forward)


def corrupt_backward(base: type, when: Any, how: Any) -> type:
    """A subclass of ``base`` whose dx becomes ``how(dx)`` when ``when(dout)`` is true."""

    def backward(self: Any, dout: Any) -> Any:
        dx = base.backward(self, dout)
        return how(dx) if when(dout) else dx

    return patched(base, backward=backward)
