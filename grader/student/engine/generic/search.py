"""The search of the generic diagnoses: the families tried in :data:`~grader.student.engine.generic.claims.ORDER`
on a failing check (:func:`find`, memoised per question in the Context; a claim that held for one check is tried
first for the next), and a crash named by its cause after the checks ran (:func:`name_crashes`). The first claim
that holds on every case (:func:`~grader.student.engine.generic.claims.holds`) is named.
"""

from __future__ import annotations

from typing import Any

from grader.student.engine.diagnosis import KnownMistake, numgrad_outputs
from grader.student.engine.generic.claims import ORDER, Claim, Context, differs, holds, student_output
from grader.student.engine.generic.crash_families import crash_claims
from grader.student.engine.generic.data_families import (
    inplace_claims,
    region_claims,
    scale_claims,
    transpose_claims,
)
from grader.student.engine.generic.live_families import (
    axes_claims,
    function_claims,
    mode_claims,
    param_claims,
    term_claims,
)


def name_crashes(ctx: "Context", results: list[Any]) -> list[Any]:
    """``results`` with each failing, unnamed check whose message shows a case's crash named by that crash's
    cause (:func:`crash_claims`): checks of every kind (statistical, custom) report a crash the same way."""
    from dataclasses import replace

    named = []
    for r in results:
        if not r.passed and not r.misconception:
            for case in ctx.cases:
                error = ctx.student_result(case).error
                if (
                    error
                    and error.get("message")
                    and f"{error.get('type')}: {error['message']}" in r.message
                    or error
                    and error.get("type") == "BadOutputError"
                    and error.get("message", "") in r.message
                ):
                    found = _first(ctx, crash_claims(ctx, case), case, [], 0.0, 0.0)
                    if found is not None:
                        r = replace(r, misconception=found.id, message=found.explain() + "\n" + r.message)
                    break
        named.append(r)
    return named


def find(
    ctx: "Context",
    case: str,
    keys: list[str],
    rtol: float,
    atol: float,
    match_error: bool = False,
    match_warnings: Any = False,
) -> KnownMistake | None:
    """The first generic claim, in :data:`ORDER`, that explains ``keys`` of ``case`` and holds on every case.

    Memoised per (case, keys, tolerances) in the Context; a claim that held for one check is tried first for
    the next (one mistake usually fails several checks).
    """
    question = f"{','.join(keys)}|{rtol}|{atol}|{match_error}|{match_warnings}"
    return ctx._memoised(
        "generic", question, case, lambda: _find(ctx, case, keys, rtol, atol, match_error, match_warnings)
    )


def _find(
    ctx: "Context", case: str, keys: list[str], rtol: float, atol: float, match_error: bool, match_warnings: Any
) -> KnownMistake | None:
    if match_warnings and not keys:
        return None
    result = ctx.student_result(case)
    keys = [k for k in keys if k not in numgrad_outputs(ctx.cases[case])]
    if match_error or (result.error is not None and not keys):
        claims = crash_claims(ctx, case)
        return _first(ctx, claims, case, [], rtol, atol)
    if not keys or any(student_output(ctx, case, k) is None for k in keys):
        return _first(ctx, crash_claims(ctx, case), case, [], rtol, atol)
    keys = [k for k in keys if differs(ctx, case, k, rtol, atol)]
    if not keys:
        return None  # the values are right (a dtype, or a warning): the check's message says what is wrong
    held: list[Claim] = ctx._memoised("generic-held", "", "", list)
    found = _first(ctx, held, case, keys, rtol, atol)
    if found is not None:
        return found
    for family in ORDER:
        claims = _claims(ctx, family, case, keys, rtol, atol)
        for claim in claims:
            if holds(ctx, claim, case, keys, rtol, atol):
                held.append(claim)
                return claim.mistake(ctx.exercise_id)
    return None


def _claims(ctx: "Context", family: str, case: str, keys: list[str], rtol: float, atol: float) -> list[Claim]:
    if family == "generic-inplace":
        return inplace_claims(ctx, case, keys)
    if family == "generic-param":
        return param_claims(ctx, case, keys, rtol, atol)
    if family == "generic-mode":
        return mode_claims(ctx, case)
    if family == "generic-function":
        return function_claims(ctx, case)
    if family == "generic-terms":
        return term_claims(ctx, case, keys)
    if family == "generic-axes":
        return axes_claims(ctx, case, keys)
    if family == "generic-transpose":
        return transpose_claims(ctx, case, keys)
    if family == "generic-scale":
        found = scale_claims(ctx, case, keys, None)
        for base in ctx._pool()[:8]:
            if ctx._touches(base, case):
                found += scale_claims(ctx, case, keys, base)
        return [c for c in found if c.family == "generic-scale"]
    if family == "generic-offset":
        return [c for c in scale_claims(ctx, case, keys, None) if c.family == "generic-offset"]
    if family == "generic-region":
        return region_claims(ctx, case, keys)
    return []


def _first(
    ctx: "Context", claims: list[Claim], case: str, keys: list[str], rtol: float, atol: float
) -> KnownMistake | None:
    for claim in claims:
        if holds(ctx, claim, case, keys, rtol, atol):
            return claim.mistake(ctx.exercise_id)
    return None
