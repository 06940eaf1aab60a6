"""Known mistakes as the student side sees them, and where expected results come from.

A :class:`KnownMistake` is what a report may say about a mistake: its id, the
exercise, one sentence saying what is wrong and one saying how to fix it, and
an optional level-neutral hint (the misconception and the property that
fails, no formula) that replaces both where the exercise's stub was released
below the ``guided`` scaffolding level (:mod:`grader.student.engine.scaffolding`).
The wrong code itself (the variant) stays with the instructor (``grader.mistakes``).

An :class:`Expected` is the single source of everything a check compares a
student against, for one exercise and one seed: the reference's result of each
case, and each known mistake's result of each case (the variant run on the
same script, numgrad ops left out). Two implementations serve the same
judging code (``grader.student.engine.checks``): ``grader.course.grading.LiveExpected`` runs
the reference and the variants in the instructor's process (hidden checks,
per-student seeds), and :class:`grader.student.engine.pack.PackExpected` reads them
from a case pack computed once by ``grade release`` (public seeds, offline).

:func:`diagnose`, :func:`outputs_match` and :func:`error_signature` compare
results; they know nothing of where the results came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from grader.student.engine.compare import DEFAULT_ATOL, DEFAULT_RTOL, same_as
from grader.student.engine.ops import Case, ScriptResult, warnings_in
from grader.student.engine.scaffolding import level_of

# The id under which an Expected serves a second, independent reference run of a case (a key whose
# value changes between two runs comes from an unseeded generator and says nothing about a mistake).
REFERENCE_AGAIN = "(reference run again)"


@dataclass
class KnownMistake:
    """A known mistake: id, exercise id, what is wrong (one sentence), the fix, and a level-neutral hint."""

    id: str
    exercise: str
    sentence: str
    fix: str
    hint: str = ""

    def said(self, level: str | None = None) -> tuple[str, str]:
        """(what is wrong, the fix) as a report says them at ``level`` (default: the level the exercise was
        released at). Below ``guided``: the hint, else the sentence, and no fix (the fix pastes the formula)."""
        if (level or level_of(self.exercise)) == "guided":
            return self.sentence, self.fix
        return self.hint or self.sentence, ""

    def explain(self, level: str | None = None) -> str:
        """'Known mistake <id>: <sentence> Fix: <fix>' (printed before any numbers); below guided, see :meth:`said`."""
        what, fix = self.said(level)
        return f"Known mistake {self.id}: {what}" + (f" Fix: {fix}" if fix else "")


@dataclass
class Combination(KnownMistake):
    """Two or three known mistakes at once (id ``a+b``): the variant that has them all reproduces the student.

    A report names the first (``CheckResult.misconception``) and the others "and also"
    (``CheckResult.also``); each part's sentence and fix are said in turn.
    """

    parts: list[KnownMistake] = field(default_factory=list)

    def explain(self, level: str | None = None) -> str:
        """Each part's :meth:`KnownMistake.explain`, the second and third introduced by 'And also'."""
        texts = [part.explain(level) for part in self.parts]
        return "\n".join([texts[0]] + [f"And also: {text}" for text in texts[1:]])


def combined_id(ids: list[str]) -> str:
    """The id under which an Expected serves the variant with every mistake of ``ids`` at once."""
    return "+".join(ids)


# Every known mistake this process has heard of, by id: what a report says about a misconception id.
# Filled by grader.mistakes (instructor: the whole catalogue) and by each case pack loaded (handout).
KNOWN: dict[str, KnownMistake] = {}


def register_known(mistakes: list[KnownMistake]) -> None:
    """Make ``mistakes``' sentences and fixes available to reports (:func:`known_mistake`)."""
    for mistake in mistakes:
        KNOWN.setdefault(mistake.id, mistake)


def known_mistake(mistake_id: str) -> KnownMistake | None:
    """The known mistake ``mistake_id``, or None when none registered here has that id."""
    return KNOWN.get(mistake_id)


class Expected(Protocol):
    """Expected results of one exercise at one seed (see the module docstring)."""

    #: True when reference code runs here (live), False for a case pack.
    live: bool

    @property
    def mistakes(self) -> list[KnownMistake]:
        """The exercise's known mistakes, in catalogue order."""
        ...

    @property
    def reference(self) -> Mapping[str, ScriptResult]:
        """The reference's result of each case, by case name."""
        ...

    def variant(self, mistake_id: str, case: Case) -> ScriptResult:
        """The result of mistake ``mistake_id``'s variant (or :data:`REFERENCE_AGAIN`) on ``case`` without numgrad
        ops."""
        ...

    def combination(self, ids: list[str]) -> str | None:
        """The id under which :meth:`variant` serves mistakes ``ids`` all at once (their variants composed),
        or None when they cannot be combined here (or a case pack does not hold that combination)."""
        ...

    def verdict(self, check: str, mistake_id: str, compute: Callable[[], tuple[bool, Any]]) -> tuple[bool, Any]:
        """(ok, fingerprint) of statistical check ``check`` on mistake ``mistake_id``'s variant: ``compute()``
        where the variant's results are at hand (live), the stored pair in a case pack."""
        ...

    def live_check(self, name: str) -> Callable[..., Any]:
        """Live only: the instructor-side check function ``name`` (``grader.course.live_checks``), for checks that run
        the reference's code on values read off the student's output. A pack raises :class:`NeedsReference`."""
        ...

    def public_twin(self) -> tuple[int, list[Case], "Expected"] | None:
        """Live only: the same exercise at its public seed (seed, cases, expected results: what the handout's case
        pack holds), so that a hidden check's picture can show the public case beside it. None from a pack."""
        ...


class NeedsReference(RuntimeError):
    """A check asked for reference code where only a case pack is available (a grader bug outside live_only checks)."""


def without_numgrad(case: Case) -> list[dict[str, Any]]:
    """``case``'s script without its numgrad ops: central differences say nothing a forward output does not."""
    return [op for op in case.script if op.get("op") != "numgrad"]


def numgrad_outputs(case: Case) -> set[str]:
    """The output keys of ``case``'s numgrad ops (the student's own central differences)."""
    return {out for op in case.script if op.get("op") == "numgrad" and (out := op.get("out")) is not None}


def outputs_match(
    student: ScriptResult,
    candidate: ScriptResult,
    keys: list[str],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    match_error: bool = False,
    match_warnings: bool | tuple[str, ...] = False,
) -> bool:
    """True when ``candidate`` reproduces ``student`` on every key (and the error / warnings if asked).

    With ``match_error`` both must have stopped the same way: no error, or the
    same exception type, raised at the same op, with the same message. A key
    missing from both then counts as reproduced.
    """
    if match_error and error_signature(student) != error_signature(candidate):
        return False
    if match_warnings and bool(warnings_in(student, match_warnings)) != bool(warnings_in(candidate, match_warnings)):
        return False
    for key in keys:
        a = student.outputs.get(key)
        b = candidate.outputs.get(key)
        if a is None and b is None and match_error:
            continue
        if not same_as(a, b, rtol=rtol, atol=atol):
            return False
        if _no_finite(a) and _no_finite(b) and warning_kinds(student) != warning_kinds(candidate):
            return False  # NaN everywhere says nothing: two ways to it are alike only if they warned alike
    return True


def _no_finite(value: Any) -> bool:
    """A float array without one finite value (NaN or inf everywhere)."""
    import numpy as np

    return (
        value is not None
        and getattr(value, "dtype", None) is not None
        and value.dtype.kind == "f"
        and value.size > 0
        and not np.any(np.isfinite(value))
    )


def warning_kinds(result: ScriptResult) -> set[str]:
    """What a run's warnings were ("RuntimeWarning: divide by zero encountered in divide"), without where."""
    return {text.split(" (in ")[0] for text in result.warnings}


_BROADCAST = re.compile(r"operands could not be broadcast together with shapes (.*?)\s*")


def error_signature(result: ScriptResult) -> tuple[str, str, str] | None:
    """(type, op, message) of a result's error, or None.

    The op is the last part of ``where`` ("forward" of "Linear.forward"): a
    variant's class name differs from the student's. NumPy's broadcast error
    lists the operands' shapes in the order the code wrote them (a + b or
    b + a), so its shapes are sorted: the same structural mistake reads alike.
    """
    if result.error is None:
        return None
    where = result.error.get("where", "").rsplit(".", 1)[-1]
    message = result.error.get("message", "")
    broadcast = _BROADCAST.fullmatch(message)
    if broadcast:
        shapes = sorted(re.findall(r"\([^)]*\)", broadcast.group(1)))
        message = "operands could not be broadcast together with shapes " + " ".join(shapes)
    return (result.error.get("type", ""), where, message)


def diagnose(
    mistakes: list[KnownMistake],
    case: Case,
    student: ScriptResult,
    keys: list[str],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    match_error: bool = False,
    match_warnings: bool | tuple[str, ...] = False,
    run: Callable[[KnownMistake, Case], ScriptResult] | None = None,
    reference: ScriptResult | None = None,
) -> KnownMistake | None:
    """The first mistake whose variant, run on ``case``, reproduces the student's outputs ``keys``.

    With ``reference`` given, a mistake whose variant agrees with the reference on
    every key (and in error type and warnings) is skipped: it is not wrong on this
    case, so it cannot explain a failure there. ``run(mistake, case)`` gives a variant's result
    (``Context.run_mistake``: from an :class:`Expected`, cached).
    """
    if not keys and not match_error and not match_warnings:
        return None
    for mistake in mistakes:
        if run is None:
            raise TypeError("diagnose needs run(mistake, case): the variants' results come from an Expected")
        result = run(mistake, case)
        if reference is not None and outputs_match(reference, result, keys, rtol, atol, match_error, match_warnings):
            continue
        if outputs_match(student, result, keys, rtol, atol, match_error, match_warnings):
            return mistake
    return None
