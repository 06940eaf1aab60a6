"""A mistake's "explained" and "reach" (which explanation is simplest) are counted in one walk over the cases."""

from __future__ import annotations

from typing import Any

import pytest
from checks_util import SEEDS, reference_runs, run_cases

from grader.course.grading import LiveExpected
from grader.mistakes import CATALOGUE
from grader.student.engine.checks import CHECKS
from grader.student.engine.checks.context import Context, _same_tight
from grader.student.engine.compare import same_as

EXERCISE = "normalization.BatchNorm1d"


def test_explained_and_reach_walk_the_cases_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = SEEDS[0]
    mistake = CATALOGUE["bn-eps-outside-sqrt"]
    plan = CHECKS[EXERCISE].checked_plan(seed)
    student = run_cases(EXERCISE, mistake.namespace, seed)
    ctx = Context(
        EXERCISE, seed, {c.name: c for c in plan.cases}, student, LiveExpected(EXERCISE, reference_runs(EXERCISE, seed))
    )
    walked: list[str] = []
    comparable = ctx._comparable

    def counted(name: str) -> Any:
        walked.append(name)
        return comparable(name)

    monkeypatch.setattr(ctx, "_comparable", counted)
    explained, reach = ctx.explained(mistake), ctx._reach(mistake)
    assert sorted(walked) == sorted(ctx.cases)  # each case once, for both counts
    monkeypatch.undo()
    # the counts themselves, as their docstrings state them
    want_explained = want_reach = 0
    for name, case in ctx.cases.items():
        parts = ctx._comparable(name)
        if parts is None:
            continue
        mine, reference, keys = parts
        variant = ctx.run_mistake(mistake, case)
        for key in keys:
            theirs, expected = mine.outputs.get(key), reference.outputs[key]
            want_explained += (
                theirs is not None and not same_as(theirs, expected) and same_as(theirs, variant.outputs.get(key))
            )
            want_reach += not _same_tight(variant.outputs.get(key), expected)
    assert (explained, reach) == (want_explained, want_reach) and explained > 0 and reach > 0
