"""The check framework: an exercise's cases, its checks, and how a failure is explained.

An exercise's checks are an :class:`ExerciseChecks` subclass registered in
``grader.student.engine.checks.CHECKS``. It builds, deterministically from a seed, a
:class:`Plan`: the cases (scripts for ``grader.student.engine.ops``) and the checks that read
their outputs. ``cases(seed)`` hands the cases to the sandbox; ``evaluate``
rebuilds the same plan and runs every check on the student's and the
reference's results, in the parent.

Each check is worth points (an exercise's points add up to ``max_score`` = 10)
and passes or fails as a whole. Every expected result comes from one
:class:`grader.student.engine.diagnosis.Expected`: live runs of the reference and the
mistake variants (the instructor's hidden checks) or a case pack (the
handout's public checks), through this same code. When a check that compares
outputs fails, the exercise's known mistakes' results on the same case are
compared, part by part (:meth:`Context.diagnose`): the smallest set of known
mistakes (one, two or three, their variants composed) that reproduces the
student there, contradicts no other check and explains every case it changes
is named in ``CheckResult.misconception`` (the first) and ``CheckResult.also``
(the others), and their sentences and fixes open the message ("And also: ..."
for the others); with none, the message ends "Not a mistake we know". Gradients are
judged at the student's own state: where the forward is wrong, a gradient that
equals central differences of that forward passes (one bug costs once).

Check kinds: :class:`Compare` (outputs against the reference),
:class:`Consistency` (the student's backward against central differences of
the student's own forward), :class:`Unchanged` (inputs not mutated),
:class:`ShapeDtype`, :class:`Raises` and :class:`Custom` (any function of
the :class:`Context`). :class:`LayerPlan` builds the usual layer cases
(forward, backward, d<param>, numgrad, mutation) in one call per input.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable

import numpy as np

from grader.student.engine import generic
from grader.student.feedback import figures
from grader.student.engine.compare import compare, same_as, scale_of
from grader.student.engine.diagnosis import (
    REFERENCE_AGAIN, Combination, Expected, KnownMistake, diagnose, error_signature, numgrad_outputs,
)
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case, ScriptResult, warnings_in

Mistake = KnownMistake  # what checks name; the variant's code stays with the instructor

# A correct float64 implementation agrees with the reference to ~1e-12 relative;
# every classic mistake is off by more than 1e-5 on the inputs chosen to expose it.
RTOL = 1e-6
ATOL = 1e-8  # scaled by max(1, max|expected|) in Compare
# Central differences with h = 1e-5 in float64 on O(1) inputs are accurate to
# ~1e-9 absolute (truncation h^2 f''' ~ 1e-10, rounding eps |f| / h ~ 1e-10);
# a wrong backward is off by O(0.1).
NUMGRAD_RTOL = 1e-5
NUMGRAD_ATOL = 1e-6
# Backward checks compare with the reference far tighter than the forward's 1e-6: two correct float64
# gradients agree to ~1e-13 relative to the largest value, while a backward with its constants rounded to six
# digits (0.398942 for 1/sqrt(2 pi)) is off by ~1e-6, which neither rtol 1e-6 nor central differences
# (1e-5) can see.
BACKWARD_RTOL = 1e-9
BACKWARD_ATOL = 1e-11  # scaled by max(1, max|expected|)


# Part-by-part naming (Context.part_by_part): at most this many known mistakes are named together; pairs are
# sought among every candidate (the mistakes that change the case and contradict no check), triples among the
# POOL_LIMIT candidates that explain the most of the student's outputs.
COMBINE_AT_MOST = 3
POOL_LIMIT = 8

# Said when a failing output matches no known mistake (after the numbers).
UNKNOWN = "Not a mistake we know: the numbers above show where your output first differs."

# Errors that say nothing about which mistake was made.
UNDIAGNOSED_ERRORS = {"NotImplementedError", "NoResult", "MemoryError", "SystemExit", "KeyboardInterrupt"}


class ReferenceFailure(RuntimeError):
    """The reference itself failed on a case or lacks an output: a grader bug."""


class PlanError(ValueError):
    """A plan is inconsistent (points do not add up, duplicate names): a grader bug."""


# --------------------------------------------------------------------------- context


def error_text(error: dict[str, str] | None) -> str:
    """One readable paragraph for a case error: where, type, message, the student's frames."""
    if not error:
        return "no value was produced"
    where = error.get("where") or "your code"
    if error.get("type") == "NotImplementedError":
        text = f"{where} is not implemented yet (raise NotImplementedError)"
    elif error.get("type") in ("BadOutputError", "KernelBuildError"):  # (the message says all: a compiler log)
        text = error.get("message", "")
    else:
        text = f"{where} raised {error.get('type')}: {error.get('message', '')}"
    if error.get("traceback"):
        text += "\n" + error["traceback"]
    return text


@dataclass
class Context:
    """What a check can read: the plan's cases, the student's results, and the expected results.

    ``expected`` (live runs or a case pack) provides the reference's results
    (``reference``), the exercise's known mistakes (``mistakes``) and each
    mistake's results (:meth:`run_mistake`).
    """

    exercise_id: str
    seed: int
    cases: dict[str, Case]
    student: dict[str, ScriptResult]
    expected: Expected
    _runs: dict[tuple[str, str], ScriptResult] = field(default_factory=dict)
    _pool_cache: list[Mistake] | None = None
    _memo: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # (question, mistake id, case) -> answer
    _twin: list["Context | None"] = field(default_factory=list)  # [the public twin] once asked for

    def public_twin(self) -> "Context | None":
        """The same exercise at its public seed (the handout's case pack), no student results: live grading only.

        A hidden check that fails with a known mistake draws that mistake's results on the public case beside its
        own picture (:meth:`Compare.public_picture`). None from a case pack, or when this is the public seed.
        """
        if not self._twin:
            found = self.expected.public_twin() if self.expected.live else None
            twin = None
            if found is not None and found[0] != self.seed:
                seed, cases, expected = found
                twin = Context(self.exercise_id, seed, {c.name: c for c in cases}, {}, expected)
            self._twin.append(twin)
        return self._twin[0]

    @property
    def reference(self) -> Any:
        """The reference's result of each case (a mapping by case name)."""
        return self.expected.reference

    @property
    def mistakes(self) -> list[Mistake]:
        """The exercise's known mistakes, in catalogue order."""
        return self.expected.mistakes

    def student_result(self, case: str) -> ScriptResult:
        """The student's result for a case (an error result when the sandbox returned none)."""
        result = self.student.get(case)
        if result is None:
            return ScriptResult(error={"type": "NoResult", "message": "this case did not run", "traceback": ""})
        return result

    def student_output(self, case: str, key: str) -> np.ndarray | None:
        return self.student_result(case).outputs.get(key)

    def reference_output(self, case: str, key: str) -> np.ndarray:
        """The reference's output ``key`` of ``case``; ReferenceFailure when missing."""
        result = self.reference.get(case)
        if result is None or key not in result.outputs:
            detail = error_text(result.error) if result is not None else "no reference result"
            raise ReferenceFailure(f"{self.exercise_id} case {case!r}: reference lacks {key!r}: {detail}")
        return result.outputs[key]

    def run_mistake(self, mistake: Mistake, case: Case) -> ScriptResult:
        """A mistake's result on a case without its numgrad ops, from ``expected``, cached per (mistake, case).

        Central differences are the slow part of a case and say nothing a
        forward output does not, so diagnosis never compares them.
        """
        key = (mistake.id, case.name)
        if key not in self._runs:
            self._runs[key] = self.expected.variant(mistake.id, case)
        return self._runs[key]

    def diagnose(
        self,
        case: str,
        keys: list[str],
        rtol: float = RTOL,
        atol: float = ATOL,
        match_error: bool = False,
        match_warnings: bool | tuple[str, ...] = False,
    ) -> Mistake | None:
        """The known mistake (or :class:`Combination` of two or three) that explains the failing ``keys`` of ``case``.

        Part by part (:meth:`part_by_part`): the smallest set of known mistakes, their
        variants composed (``Expected.combination``), that reproduces the student's
        outputs ``keys`` of ``case`` (preferably every output of the case), contradicts
        no other check and is part of an explanation of every case it changes. For a
        student with one known mistake that is round 2's rule: its variant reproduces
        the student everywhere. None means "not a mistake we know".
        """
        found = self.part_by_part(case, keys, self._passes(case, keys), rtol, atol, match_error, match_warnings)
        if found is None:
            found = generic.find(self, case, keys, rtol, atol, match_error, match_warnings)
        return found

    def _passes(self, case: str, keys: list[str]) -> list[list[str]]:
        """The output keys to match, in order: every (non-numgrad) output of ``case``, then ``keys`` alone."""
        reference = self.reference.get(case)
        numgrad_keys = numgrad_outputs(self.cases[case])
        every_key = sorted(set(reference.outputs) - numgrad_keys) if reference is not None else []
        keys = [k for k in keys if k not in numgrad_keys]
        return [every_key, keys] if keys and every_key and every_key != sorted(keys) else [keys]

    def reproduces(self, mistake: Mistake, case: str, keys: list[str], rtol: float = RTOL, atol: float = ATOL,
                   match_error: bool = False, match_warnings: bool | tuple[str, ...] = False) -> bool:
        """``mistake``'s variant differs from the reference on ``case`` and equals the student on ``keys``."""
        return diagnose([mistake], self.cases[case], self.student_result(case), keys, rtol=rtol, atol=atol,
                        match_error=match_error, match_warnings=match_warnings, run=self.run_mistake,
                        reference=self.reference.get(case)) is not None

    def part_by_part(self, case: str, keys: list[str], passes: list[list[str]], rtol: float = RTOL,
                     atol: float = ATOL, match_error: bool = False, match_warnings: bool | tuple[str, ...] = False) -> Mistake | None:
        """The smallest set of known mistakes that reproduces the student on ``case`` and contradicts no check.

        Real code often has two mistakes at once (CS231n BatchNorms: the biased running
        variance and eps outside the square root): neither variant alone reproduces the
        student everywhere, but each reproduces the cases behind some checks exactly. The
        candidates are the mistakes that contradict no other check (:meth:`contradicts`:
        wherever the variant differs from the reference, so does the student); sets of one,
        two and three of them, composed into one variant, are tried in that order on
        ``case``. The set named keeps only the mistakes this check's ``keys`` need.
        """
        pool = [m for m in self._pool() if self._touches(m, case)]
        for pass_keys in passes:
            if not pass_keys and not match_error and not match_warnings:
                continue
            for size in range(1, COMBINE_AT_MOST + 1):
                found: list[tuple[tuple[int, int], Mistake]] = []
                for members in combinations(pool if size <= 2 else pool[:POOL_LIMIT], size):
                    candidate = self._combined(self._ordered(list(members)))
                    if candidate is None or not self.reproduces(candidate, case, pass_keys, rtol, atol, match_error,
                                                                match_warnings):
                        continue
                    if size > 1 and self.contradicts(candidate) or not self.consistent(self._ordered(list(members))):
                        continue  # (a pool member alone contradicts nothing)
                    found.append(((self.explained(candidate), self._reach(candidate)), candidate))
                if found:
                    best = max(score for score, _ in found)
                    chosen = next(m for score, m in found if score == best)
                    return self._needed(chosen, case, keys or pass_keys, rtol, atol, match_error, match_warnings)
        return None

    def _pool(self) -> list[Mistake]:
        """The exercise's mistakes that change something and contradict no check, most explaining first."""
        if self._pool_cache is None:
            pool = [m for m in self.mistakes if self._changes_something(m) and not self.contradicts(m)]
            pool.sort(key=self.explained, reverse=True)
            self._pool_cache = pool
        return self._pool_cache

    def _memoised(self, question: str, mistake_id: str, case: str, compute: Callable[[], Any]) -> Any:
        """The answer to ``question`` about a mistake and a case, computed once per Context (``_memo``)."""
        key = (question, mistake_id, case)
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _reach(self, mistake: Mistake) -> int:
        """Memoised per (mistake, case): :meth:`_compute_reach`."""
        return self._memoised("_reach", mistake.id, "", lambda: self._compute_reach(mistake))

    def _compute_reach(self, mistake: Mistake) -> int:
        """How many outputs of all cases ``mistake``'s variant changes (the student changed them too: no
        contradiction). Of two explanations of a check that reproduce as much, the one that also accounts for
        more of the student's other differences is the simpler (eps outside the root in training and eval,
        rather than in eval only, when training differs too)."""
        count = 0
        for name, case in self.cases.items():
            parts = self._comparable(name)
            if parts is None:
                continue
            _, reference, keys = parts
            variant = self.run_mistake(mistake, case)
            count += sum(not _same_tight(variant.outputs.get(k), reference.outputs[k]) for k in keys)
        return count

    def _touches(self, mistake: Mistake, case: str) -> bool:
        """Memoised per (mistake, case): :meth:`_compute_touches`."""
        return self._memoised("_touches", mistake.id, case, lambda: self._compute_touches(mistake, case))

    def _compute_touches(self, mistake: Mistake, case: str) -> bool:
        """Whether ``mistake``'s variant differs from the reference on ``case`` (an output or the error)."""
        parts = self._comparable(case)
        if parts is None:
            return False
        _, reference, keys = parts
        variant = self.run_mistake(mistake, self.cases[case])
        return error_signature(variant) != error_signature(reference) or \
            bool(variant.warnings) != bool(reference.warnings) or \
            any(not _same_tight(variant.outputs.get(k), reference.outputs[k]) for k in keys)

    def _changes_something(self, mistake: Mistake) -> bool:
        """Whether ``mistake``'s variant differs from the reference on some compared output of some case."""
        for name, case in self.cases.items():
            parts = self._comparable(name)
            if parts is None:
                continue
            _, reference, keys = parts
            variant = self.run_mistake(mistake, case)
            if any(not _same_tight(variant.outputs.get(k), reference.outputs[k]) for k in keys):
                return True
            if error_signature(variant) != error_signature(reference) or \
                    bool(variant.warnings) != bool(reference.warnings):
                return True  # a crash, or a warning with the right values
        return False

    def contradicts(self, mistake: Mistake) -> bool:
        """Whether ``mistake``'s variant differs from the reference on an output where the student does not.

        Such a mistake predicts a failure the student does not have: it cannot be one
        of the student's mistakes (however well it reproduces some other case).
        """
        for name, case in self.cases.items():
            parts = self._comparable(name)
            if parts is None:
                continue
            student, reference, keys = parts
            variant = self.run_mistake(mistake, case)
            for key in keys:
                expected = reference.outputs[key]
                if not _same_tight(variant.outputs.get(key), expected) and _same_tight(student.outputs.get(key), expected):
                    return True
        return False

    def _combined(self, members: list[Mistake]) -> Mistake | None:
        """One mistake, or a :class:`Combination` whose results the Expected composes; None when it cannot."""
        if len(members) == 1:
            return members[0]
        combined = self.expected.combination([m.id for m in members])
        if combined is None:
            return None
        return Combination(combined, self.exercise_id, "", "", parts=list(members))

    def _needed(self, chosen: Mistake, case: str, keys: list[str], rtol: float, atol: float, match_error: bool,
                match_warnings: bool) -> Mistake:
        """``chosen`` less the parts this check's ``keys`` do not need (the rest reproduces them without)."""
        parts = list(getattr(chosen, "parts", [])) or [chosen]
        for part in list(parts):
            rest = [p for p in parts if p is not part]
            if not rest:
                break
            smaller = self._combined(rest)
            if smaller is not None and self.reproduces(smaller, case, keys, rtol, atol, match_error, match_warnings):
                parts = rest
        return parts[0] if len(parts) == 1 else self._combined(parts) or chosen

    def _comparable(self, name: str) -> tuple[ScriptResult, ScriptResult, list[str]] | None:
        """(student result, reference result, deterministic output keys without numgrad) of a case.

        None without a reference result. A key whose reference value changes from
        run to run (a draw from an unseeded generator, such as Linear's default W)
        says nothing about a mistake and is left out.
        """
        reference = self.reference.get(name)
        if reference is None:
            return None

        def compute() -> tuple[ScriptResult, ScriptResult, list[str]]:
            numgrad_keys = numgrad_outputs(self.cases[name])
            again = self.run_mistake(_REFERENCE_AGAIN, self.cases[name])
            keys = [k for k in sorted(set(reference.outputs) - numgrad_keys)
                    if same_as(again.outputs.get(k), reference.outputs[k], rtol=0.0, atol=0.0)]
            return self.student_result(name), reference, keys

        return self._memoised("comparable", "", name, compute)

    def explains_case(self, mistake: Mistake, name: str) -> bool:
        """Memoised per (mistake, case): :meth:`_compute_explains_case`."""
        return self._memoised("explains_case", mistake.id, name, lambda: self._compute_explains_case(mistake, name))

    def _compute_explains_case(self, mistake: Mistake, name: str) -> bool:
        """Whether ``mistake``'s variant reproduces the student on case ``name`` wherever it changes something.

        Every output where the variant differs from the reference must equal the
        student's, and where the variant stops with an error the reference does not
        raise, the student must stop there too (same type, same call; the message may
        differ: np.dot and @ word a shape error differently). A crash-only mistake is
        named only when the message matches as well: that is the case's own test
        (``match_error``).
        """
        parts = self._comparable(name)
        if parts is None:
            return True
        student, reference, keys = parts
        own = self.own_gradients(name)
        variant = self.run_mistake(mistake, self.cases[name])
        if error_signature(variant) != error_signature(reference) and \
                (error_signature(variant) or ())[:2] != (error_signature(student) or ())[:2]:
            return False
        for key in sorted(set(keys) | (set(variant.outputs) - set(reference.outputs))):
            if key in own:
                continue  # right for the student's own forward: the variant's backward need not match it
            mine = variant.outputs.get(key)
            if same_as(mine, reference.outputs.get(key)):
                continue  # not affected
            theirs = student.outputs.get(key)
            if mine is None and theirs is None:
                continue
            if not same_as(theirs, mine):
                return False
        return True

    def consistent(self, members: list[Mistake]) -> bool:
        """Whether mistakes ``members`` are part of an explanation of every case they affect.

        On each case their composed variant changes, it reproduces the student there
        (:meth:`explains_case`), or does so with one or two more candidate mistakes
        composed in (the student's other mistakes). A mistake that matches one case by
        coincidence (a degenerate batch of one) explains no other case it changes.
        """
        combined = self._combined(members)
        if combined is None:
            return False
        pool = self._pool()
        for name in self.cases:
            if not self._touches(combined, name) or self.explains_case(combined, name):
                continue
            others = [m for m in pool if m not in members and self._touches(m, name)]
            if not any(
                (more := self._combined(self._ordered(members + list(extra)))) is not None
                and self.explains_case(more, name)
                for size in range(1, COMBINE_AT_MOST - len(members) + 1)
                for extra in combinations(others if size == 1 else others[:POOL_LIMIT], size)
            ):
                return False
        return True

    def _ordered(self, members: list[Mistake]) -> list[Mistake]:
        """``members`` in catalogue order (one id, one cached run, per combination)."""
        order = {m.id: i for i, m in enumerate(self.mistakes)}
        return sorted(members, key=lambda m: order.get(m.id, len(order)))

    def own_gradients(self, name: str) -> set[str]:
        """The gradient keys of case ``name`` that equal central differences of the student's own forward.

        Such a gradient is exactly what the student's forward implies, so it says
        nothing about a mistake beyond the forward's.
        """
        student = self.student_result(name)
        own: set[str] = set()
        for op in self.cases[name].script:
            if op.get("op") != "numgrad":
                continue
            num_key = op["out"]
            key = num_key[len("num_"):]
            if same_as(student.outputs.get(key), student.outputs.get(num_key), rtol=NUMGRAD_RTOL,
                       atol=NUMGRAD_ATOL):
                own.add(key)
        if "dx" in own and same_as(student.outputs.get("dx_again"), student.outputs.get("dx"), rtol=1e-12, atol=1e-12):
            own.add("dx_again")  # the second backward of the same forward
        return own

    def explained(self, mistake: Mistake) -> int:
        """Memoised per (mistake, case): :meth:`_compute_explained`."""
        return self._memoised("explained", mistake.id, "", lambda: self._compute_explained(mistake))

    def _compute_explained(self, mistake: Mistake) -> int:
        """How many of the student's outputs that differ from the reference the variant reproduces."""
        count = 0
        for name, case in self.cases.items():
            parts = self._comparable(name)
            if parts is None:
                continue
            student, reference, keys = parts
            variant = self.run_mistake(mistake, case)
            for key in keys:
                theirs = student.outputs.get(key)
                if theirs is not None and not same_as(theirs, reference.outputs[key]) \
                        and same_as(theirs, variant.outputs.get(key)):
                    count += 1
        return count


def _same_tight(a: Any, b: Any) -> bool:
    """Equal at the backward checks' tolerance: whether a variant changes an output at all (a backward off by
    1e-6 relative changes it, as far as the backward checks can tell)."""
    return same_as(a, b, rtol=BACKWARD_RTOL, atol=BACKWARD_ATOL)


# A second reference run as a pseudo-mistake, so that Context.run_mistake caches it.
_REFERENCE_AGAIN = KnownMistake(REFERENCE_AGAIN, "", "", "")


def result(name: str, points: float, ok: bool, message: str = "", mistake: Mistake | None = None,
           figure: dict[str, Any] | None = None) -> CheckResult:
    """A CheckResult worth ``points`` when ok, 0 otherwise; a named mistake's explanation comes first.

    ``figure`` (grader.student.feedback.figures) is kept only on a failure.
    """
    if mistake is not None:
        message = mistake.explain() + ("\n" + message if message else "")
    parts = list(getattr(mistake, "parts", []) or ([mistake] if mistake is not None else []))
    return CheckResult(
        name=name,
        passed=ok,
        score=points if ok else 0.0,
        max_score=points,
        message="" if ok else message,
        misconception=None if ok or not parts else parts[0].id,
        figure=None if ok else figure,
        also=[] if ok else [p.id for p in parts[1:]],
    )


# --------------------------------------------------------------------------- checks


@dataclass
class Check:
    """A named check worth ``points``; subclasses implement ``run``.

    ``requires`` names a case that must run without NotImplementedError for the
    check to count: checks of code the stub already provides (constructors)
    earn nothing until the student's own code runs.
    """

    name: str
    points: float
    requires: str | None = None
    # True for a check that runs the reference's code on values read off the student's output (no case pack can
    # hold those): it runs only where the reference is (hidden grading), and a handout's report says so.
    live_only: bool = False
    # True for a check that only supports others (gradient consistency, repeatability, shape and dtype, inputs
    # unchanged): it earns nothing while every other check of the exercise fails (a layer that returns NaN
    # everywhere is consistent with itself, repeatable and of the right shape, and has earned nothing).
    supporting: bool = False

    def run(self, ctx: Context) -> CheckResult:
        raise NotImplementedError

    def grade(self, ctx: Context) -> CheckResult:
        """``run``, unless the required case stopped on NotImplementedError; its picture as the student may see it."""
        if self.requires is not None:
            error = ctx.student_result(self.requires).error
            if error is not None and error.get("type") == "NotImplementedError":
                where = error.get("where") or "your code"
                return result(self.name, self.points, False,
                              f"not graded yet: this check counts once {where} is implemented")
        checked = self.run(ctx)
        case = getattr(self, "case", "")  # a comparison's case (other kinds of check have none)
        if not checked.passed and case:
            checked = dataclasses.replace(checked, case=case)  # where a location is sought
        return for_student(checked, ctx.expected.live)


def for_student(checked: CheckResult, live: bool) -> CheckResult:
    """A check's result with the picture the student may see: graded live (hidden checks), a figure whose expected
    values are the reference's becomes ``figures.hidden_view`` of itself, and the full one goes to
    ``instructor_figure`` (the instructor's dashboard draws it; no student view carries it)."""
    figure = checked.figure
    if not live or figure is None or not figure.get("from_reference"):
        return checked
    return dataclasses.replace(checked, figure=figures.hidden_view(figure), instructor_figure=figure)


def forward_matches(ctx: Context, case: str, forward_key: str, y: np.ndarray) -> bool:
    """The student's forward output ``y`` equals the reference's (rtol, atol scaled by y)."""
    return compare(y, ctx.reference_output(case, forward_key), RTOL, ATOL * scale_of(y)).ok


def gradient_note(ctx: Context, case: str, key: str, num_key: str, forward_key: str) -> str:
    """Tell forward bugs from backward bugs with the student's own central differences.

    - forward right, backward off its own numgrad: "your forward is right but your backward is not";
    - backward matches its own numgrad, forward wrong: "your forward is wrong".
    """
    s = ctx.student_result(case)
    grad, num, y = s.outputs.get(key), s.outputs.get(num_key), s.outputs.get(forward_key)
    if grad is None or num is None or y is None:
        return ""
    forward_ok = forward_matches(ctx, case, forward_key, y)
    consistent = same_as(grad, num, rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL)
    if forward_ok and not consistent:
        return (
            f"Your forward is right but your backward is not: {key} disagrees with central"
            " differences of your own forward."
        )
    if consistent and not forward_ok:
        return (
            "Your backward matches central differences of your own forward but not the reference:"
            " your forward is wrong, fix it first."
        )
    return ""


@dataclass
class Compare(Check):
    """Student outputs ``keys`` of ``case`` equal the reference's within rtol/atol (atol scaled by the data).

    ``numgrad`` maps an analytic gradient key to the student's numgrad key in the
    same case (``{"dx": "num_dx"}``) to add the forward/backward note; where the
    student's forward is wrong, such a gradient that equals central differences of
    that forward passes (:meth:`own_gradient`): one bug costs once.
    """

    case: str = ""
    keys: list[str] = field(default_factory=list)
    what: str = ""
    rtol: float = RTOL
    atol: float = ATOL
    diagnose: bool = True
    numgrad: dict[str, str] = field(default_factory=dict)
    forward_key: str = "y"
    check_dtype: bool = True
    # Fail values that are right when the case warned: True (any warning) or the methods whose warnings count
    # (("forward",): a warning backward raised is not the forward check's fault).
    match_warnings: bool | tuple[str, ...] = False
    # For <name>_<step> keys (figures.step_ratios): the share of the previous value a step keeps (1 - momentum for a
    # running average, 1 for an optimiser's parameters), and the value before step 1 by name when it is no input
    # array of the case (a buffer's initial value).
    carry: float = 0.0
    start: dict[str, float] = field(default_factory=dict)

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        for key in self.keys:
            expected = ctx.reference_output(self.case, key)
            received = s.outputs.get(key)
            if received is None:
                mistake = None
                if self.diagnose and s.error is not None and s.error.get("type") not in UNDIAGNOSED_ERRORS:
                    mistake = ctx.diagnose(self.case, [], match_error=True)
                return result(self.name, self.points, False, f"{self.what}: {error_text(s.error)}", mistake)
            cmp = compare(received, expected, self.rtol, self.atol * scale_of(expected), self.check_dtype)
            if not cmp.ok and self.own_gradient(ctx, key):
                continue  # the forward's bug, charged by the forward checks: this gradient is right for it
            if not cmp.ok:
                mistake = ctx.diagnose(self.case, self.keys, self.rtol, self.atol) if self.diagnose else None
                note = ""
                if key in self.numgrad:
                    note = gradient_note(ctx, self.case, key, self.numgrad[key], self.forward_key)
                message = f"{self.what}: {key}: {cmp.message}"
                if received.shape == expected.shape and not np.any(received) and np.any(expected):
                    message += f" ({key} is all zeros: an array made with np.zeros_like and never filled in?)"
                if note:
                    message = note + "\n" + message
                if self.diagnose and mistake is None and received.shape == expected.shape \
                        and received.dtype == expected.dtype:
                    message += "\n" + UNKNOWN
                return result(self.name, self.points, False, message, mistake, self.figure(ctx, key, mistake))
        warned = warnings_in(s, self.match_warnings)
        if warned:
            mistake = ctx.diagnose(self.case, self.keys, self.rtol, self.atol, match_warnings=self.match_warnings)
            return result(
                self.name,
                self.points,
                False,
                f"{self.what}: your values are right; only the warning costs this check's points (no floating-point"
                f" warning is allowed here): {warned[0]}",
                mistake,
            )
        return result(self.name, self.points, True)

    def figure(self, ctx: Context, key: str, mistake: Mistake | None = None) -> dict[str, Any] | None:
        """The full picture of the failing ``key`` (:meth:`picture`), and beside it, for a known mistake graded live,
        the same check on the public case (:meth:`public_picture`)."""
        s = ctx.student_result(self.case)
        figure = self.picture(s.outputs, lambda k: ctx.reference_output(self.case, k), ctx.cases[self.case], key)
        if figure is not None and figure.get("from_reference"):
            twin = self.public_picture(ctx, key, mistake)
            if twin is not None:
                figure["public"] = twin
        return figure

    def picture(self, outputs: dict[str, np.ndarray], expected_of: Callable[[str], np.ndarray], case: Case,
                key: str) -> dict[str, Any] | None:
        """The figure of ``key`` of ``outputs`` against ``expected_of``: the shapes when they differ, the steps'
        trajectory when the keys are <name>_<step>, else the elements (the dtypes when only those differ)."""
        received, expected = outputs.get(key), expected_of(key)
        if received is None:
            return None
        title = f"{self.what}: {key}"
        if np.shape(received) != np.shape(expected):
            return figures.shapes_figure(np.shape(received), np.shape(expected), title=title, key=key)
        if figures.step_series(self.keys) is not None:
            starts = {name: self.start.get(name, case.arrays.get(name)) for name in figures.step_series(self.keys) or {}}
            figure = figures.trajectory_figure(outputs, {k: expected_of(k) for k in self.keys}, self.keys, self.rtol,
                                               self.atol, title=self.what, carry=self.carry,
                                               starts={k: v for k, v in starts.items() if v is not None})
            if figure is not None:
                return figure
        figure = figures.elements_figure(received, expected, self.rtol, self.atol * scale_of(expected), title=title,
                                         key=key)
        if figure is None and self.check_dtype and np.asarray(received).dtype != np.asarray(expected).dtype:
            return figures.shapes_figure(np.shape(received), np.shape(expected), title=title, key=key,
                                         received_dtype=str(np.asarray(received).dtype),
                                         expected_dtype=str(np.asarray(expected).dtype))
        return figure

    def public_picture(self, ctx: Context, key: str, mistake: Mistake | None) -> dict[str, Any] | None:
        """The same check on the public case with the named mistake's results as the student's, when it fails there too.

        The mistake reproduces the student on the hidden case (that is how it was named), so its results on the
        public inputs are what the student's code gives there: the handout's ``grade submit`` draws this very
        picture from the student's own code. Live grading only; None without a named mistake.
        """
        twin = ctx.public_twin() if mistake is not None else None
        if twin is None or self.case not in twin.cases:
            return None
        parts = list(getattr(mistake, "parts", []) or [mistake])
        if any(isinstance(part, generic.GenericMistake) for part in parts):
            return None  # a generic diagnosis is found from the hidden case's results: it has no code to run
        variant = twin._combined(parts)
        if variant is None:
            return None
        case = twin.cases[self.case]
        outputs = twin.run_mistake(variant, case).outputs
        received, expected = outputs.get(key), twin.reference_output(self.case, key)
        if received is None or compare(received, expected, self.rtol, self.atol * scale_of(expected),
                                       self.check_dtype).ok:
            return None
        figure = self.picture(outputs, lambda k: twin.reference_output(self.case, k), case, key)
        if figure is None:
            return None
        figure["title"] = f"Public case: {figure['title']}"
        figure["public_case"] = {"mistake": variant.id}
        figure["summary"] = (f"The same check on the public case (the inputs and expected values of your handout's"
                             f" case pack), as the known mistake {variant.id} computes it: it reproduces your output"
                             f" on the hidden case, and `grade submit` in your handout draws this picture from your"
                             f" own code. " + figure["summary"])
        return figure

    def own_gradient(self, ctx: Context, key: str) -> bool:
        """Whether gradient ``key`` is right for the student's own forward where that forward is wrong.

        Judged at the student's own state: the forward output of the case differs
        from the reference, and the gradient equals central differences of the
        student's own forward (same shape and dtype as expected). Then the bug is
        the forward's alone and costs points once, in the forward checks.
        """
        if key not in self.numgrad:
            return False
        s = ctx.student_result(self.case)
        grad, num, y = s.outputs.get(key), s.outputs.get(self.numgrad[key]), s.outputs.get(self.forward_key)
        if grad is None or num is None or y is None:
            return False
        expected = ctx.reference_output(self.case, key)
        if grad.shape != expected.shape or (self.check_dtype and grad.dtype != expected.dtype):
            return False
        if y.shape != ctx.reference_output(self.case, self.forward_key).shape or \
                forward_matches(ctx, self.case, self.forward_key, y):
            return False
        if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(num))):
            return False  # NaN equals NaN here, but a NaN gradient is right for nothing
        return same_as(grad, num, rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL)


@dataclass
class Consistency(Check):
    """The student's analytic gradients equal central differences of the student's own forward.

    ``pairs`` maps analytic keys to numgrad keys of ``case``: ``{"dx": "num_dx", "dgamma": "num_dgamma"}``.
    """

    case: str = ""
    pairs: dict[str, str] = field(default_factory=dict)
    what: str = ""
    forward_key: str = "y"
    rtol: float = NUMGRAD_RTOL
    atol: float = NUMGRAD_ATOL

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        y = s.outputs.get(self.forward_key)
        forward_ok = y is not None and forward_matches(ctx, self.case, self.forward_key, y)
        for key, num_key in self.pairs.items():
            grad, num = s.outputs.get(key), s.outputs.get(num_key)
            if grad is None or num is None:
                return result(self.name, self.points, False, f"{self.what}: {error_text(s.error)}")
            if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(num))):
                return result(self.name, self.points, False,
                              f"{self.what}: {key} or the central differences of your forward are NaN or inf:"
                              " a gradient can be checked only where forward gives finite values")
            cmp = compare(grad, num, self.rtol, self.atol * scale_of(num), check_dtype=False)
            if not cmp.ok:
                if forward_ok:
                    lead = f"Your forward is right but your backward is not: {key} disagrees with central" \
                           " differences of your own forward"
                else:
                    lead = f"Your backward is not the gradient of your own forward: {key} disagrees with its" \
                           " central differences"
                return result(self.name, self.points, False, f"{lead} ({self.what}): {cmp.message}",
                              figure=own_figure(grad, num, self.rtol, self.atol * scale_of(num),
                                                f"{self.what}: {key}", key,
                                                f"central differences of your forward ({num_key})"))
        return result(self.name, self.points, True)


# What each recorded copy of a handed-over array says when it changed (Unchanged's messages).
HANDED = {
    "x_after": "forward modified the x it was given",
    "x_after_backward": "the x given to forward was modified later, by backward (an alias such as"
                        " mask = self.x; mask[...] = ... writes into the caller's array)",
    "dout_after": "backward modified the dout it was given",
}


@dataclass
class Unchanged(Check):
    """Inputs come back unmodified: output ``out_key`` of each case equals its input array ``array_key``.

    Items are (case, out_key, array_key) or (case, out_key, array_key, optional): an
    optional item whose output is missing because the case stopped earlier (a crash,
    charged by the checks of that call) is skipped.
    """

    items: list[tuple[Any, ...]] = field(default_factory=list)

    def run(self, ctx: Context) -> CheckResult:
        for item in self.items:
            case, out_key, array_key = item[:3]
            optional = len(item) > 3 and bool(item[3])
            s = ctx.student_result(case)
            after = s.outputs.get(out_key)
            if after is None:
                if optional and s.error is not None:
                    continue
                return result(self.name, self.points, False, f"case {case}: {error_text(s.error)}")
            before = ctx.cases[case].arrays[array_key]
            if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
                cmp = compare(after, before, 0.0, 0.0)
                what = HANDED.get(out_key)
                if what is None and out_key.endswith("_after"):
                    what = f"the parameter array {out_key[:-len('_after')]} handed to the layer was modified in place"
                name = array_key.removeprefix("param_")
                return result(
                    self.name,
                    self.points,
                    False,
                    f"your code modified its input array (case {case}): {what or out_key}: {cmp.message}."
                    " Work on a copy (x = x.copy() or x = x - mu, never x -= mu; mask = x > 0, never mask = x).",
                    ctx.diagnose(case, [out_key], rtol=0.0, atol=0.0),
                    own_figure(after, before, 0.0, 0.0, f"case {case}: {name} after your code ran", name,
                               f"{name} as it was handed to your code", f"{name} after your code ran"),
                )
        return result(self.name, self.points, True)


@dataclass
class ShapeDtype(Check):
    """Outputs have the reference's shape and dtype: items are (case, key)."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def run(self, ctx: Context) -> CheckResult:
        values = [ctx.student_output(case, key) for case, key in self.items]
        if values and all(v is not None and v.dtype.kind == "f" and not np.any(np.isfinite(v)) for v in values):
            return result(self.name, self.points, False, "every output is NaN or inf: shape and dtype count only"
                                                         " for finite values")
        for case, key in self.items:
            s = ctx.student_result(case)
            got = s.outputs.get(key)
            if got is None:
                return result(self.name, self.points, False, f"{key} (case {case}): {error_text(s.error)}")
            expected = ctx.reference_output(case, key)
            if got.shape != expected.shape or got.dtype != expected.dtype:
                what = "shape" if got.shape != expected.shape else "dtype"
                mine, theirs = (got.shape, expected.shape) if what == "shape" else (got.dtype, expected.dtype)
                return result(
                    self.name, self.points, False, f"{key} (case {case}) has {what} {mine}, expected {theirs}",
                    figure=figures.shapes_figure(got.shape, expected.shape, title=f"{key} (case {case})", key=key,
                                                 received_dtype=str(got.dtype), expected_dtype=str(expected.dtype)),
                )
        return result(self.name, self.points, True)


@dataclass
class Raises(Check):
    """The case must stop with exception ``exc_type`` (e.g. ValueError for a bad constructor argument)."""

    case: str = ""
    exc_type: str = "ValueError"
    what: str = ""
    diagnose: bool = False  # name a mistake whose variant fails to raise in the same way (opt-in)

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        got = s.error["type"] if s.error else None
        if got == self.exc_type:
            return result(self.name, self.points, True)
        mistake = ctx.diagnose(self.case, [], match_error=True) if self.diagnose else None
        if got is None:
            message = f"{self.what}: expected {self.exc_type}, but nothing was raised"
        else:
            message = f"{self.what}: expected {self.exc_type}, got {error_text(s.error)}"
        return result(self.name, self.points, False, message, mistake)


# What a Custom check's function returns: (ok, message, mistake_or_None), or with the figure fourth.
Outcome = tuple[bool, str, Mistake | None] | tuple[bool, str, Mistake | None, dict[str, Any] | None]


@dataclass
class Custom(Check):
    """Any check: ``fn(ctx) -> (ok, message, mistake_or_None)`` or ``(ok, message, mistake_or_None, figure)``."""

    fn: Callable[[Context], Outcome] | None = None

    def run(self, ctx: Context) -> CheckResult:
        assert self.fn is not None
        ok, message, mistake, *figure = self.fn(ctx)
        return result(self.name, self.points, ok, message, mistake, figure[0] if figure else None)


def own_figure(received: Any, expected: Any, rtol: float, atol: float, title: str, key: str, expected_label: str,
               received_label: str = "yours") -> dict[str, Any] | None:
    """The picture of a check that compares the student with their own data (a gradient with central differences
    of their forward, an input after the call with itself before): elements, or the shapes when they differ."""
    if np.shape(received) != np.shape(expected):
        return figures.shapes_figure(np.shape(received), np.shape(expected), title=title, key=key)
    return figures.elements_figure(received, expected, rtol, atol, title=title, key=key, from_reference=False,
                                   labels={"received": received_label, "expected": expected_label})


def live_check(name: str, *args: Any) -> Callable[[Context], Outcome]:
    """A Custom check function implemented where the reference is (``grader.course.live_checks``), named here.

    Give its check ``live_only=True``: only a live ``Expected`` can provide it.
    """

    def run(ctx: Context) -> Outcome:
        return ctx.expected.live_check(name)(ctx, *args)

    return run


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
        results = generic.name_crashes(ctx, [check.grade(ctx) for check in checks])
        return no_credit_for_support_alone(checks, results)


NOTHING_ELSE = ("earns nothing yet: every other check of this exercise fails, and consistency, repeatability,"
                " shape and unchanged inputs count only beside right values")


def no_credit_for_support_alone(checks: list[Check], results: list[CheckResult]) -> list[CheckResult]:
    """``results`` with every passing supporting check failed when no other check passed."""
    if any(r.passed and not c.supporting and r.max_score > 0 for c, r in zip(checks, results, strict=True)):
        return results
    return [result(r.name, r.max_score, False, NOTHING_ELSE) if r.passed and c.supporting else r
            for c, r in zip(checks, results, strict=True)]


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
            script.append({"op": "call", "var": "m", "method": "backward", "args": [{"array": dout}],
                           "out": "dx_again"})
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
        self.layer_cases: list[str] = []      # cases with x / x_after / y / dx, for mutation and shape checks
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

    def backward_check(self, name: str, points: float, case: str, what: str, grads: list[str] | None = None,
                       **kw: Any) -> Check:
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
        return {op["out"][len("num_"):]: op["out"] for op in script if op.get("op") == "numgrad"}

    def consistency_check(self, name: str, points: float, case: str, what: str) -> Check:
        """The student's dx (and d<p>) against central differences of their own forward on ``case``."""
        return self.add(Consistency(name, points, case=case, pairs=self._numgrad_pairs(case), what=what,
                                    supporting=True))

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
        own_figure(again, dx, 1e-12, 1e-12 * scale_of(dx), f"backward called twice (case {case}): dx", "dx",
                   "dx of your first backward", "dx of your second backward"),
    )


def away_from_zero(rng: np.random.Generator, shape: tuple[int, ...], margin: float = 0.05) -> np.ndarray:
    """N(0, 1) values pushed to |x| >= margin, so kinks at 0 stay out of central differences' reach."""
    x = rng.standard_normal(shape)
    return np.where(x < 0, -1.0, 1.0) * np.maximum(np.abs(x), margin)
