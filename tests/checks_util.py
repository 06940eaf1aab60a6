"""Test helpers shared by the checks tests: grade one exercise in-process, make wrong submissions.

The in-process grading (``grade_in_process``, ``run_cases``, ``reference_runs``, ``variant_ns``,
``stub_namespace``, ``SEEDS``) is bench/in_process.py's, shared with the benches and re-exported here by name;
here are the assertions and the ways of making a wrong submission.
"""

from __future__ import annotations

from typing import Any

from bench.in_process import (  # noqa: F401 (re-exported for the tests)
    SEEDS,
    grade_in_process,
    reference_runs,
    run_cases,
    stub_namespace,
    variant_ns,
)
from gradcheck_util import Layer
from grader.mistakes import reference_namespace
from grader.student.engine.checks import CHECKS
from grader.student.engine.model import CheckResult


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


def corrupt_forward(base: type[Layer], when: Any, how: Any) -> type:
    """A subclass of ``base`` whose forward output y becomes ``how(y)`` when ``when(x)`` is true."""

    def forward(self: Any, x: Any) -> Any:
        y = base.forward(self, x)
        return how(y) if when(x) else y

    return patched(base, forward=forward)


def corrupt_backward(base: type[Layer], when: Any, how: Any) -> type:
    """A subclass of ``base`` whose dx becomes ``how(dx)`` when ``when(dout)`` is true."""

    def backward(self: Any, dout: Any) -> Any:
        dx = base.backward(self, dout)
        return how(dx) if when(dout) else dx

    return patched(base, backward=backward)
