"""Grading one exercise in-process, for the benches and the tests (tests/checks_util.py re-exports it).

``grade_in_process(exercise_id, ns, seed)`` runs the exercise's cases on ``ns``
and on the reference with ``grader.student.engine.ops.run_script`` (no sandbox) and returns
``evaluate``'s CheckResults. ``variant_ns("normalization", BatchNorm1d=Wrong)``
is the reference namespace with names of one topic replaced; ``stub_namespace()`` the shipped stubs.
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
