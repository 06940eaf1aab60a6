"""The check's context and how a failure is explained: the tolerances, :class:`Context` and its diagnosis.

A :class:`Context` is what a check can read: the plan's cases, the student's results, and one
:class:`grader.student.engine.diagnosis.Expected` (live runs of the reference and the mistake variants for
the instructor's hidden checks, or a case pack for the handout's public checks). When a check that compares
outputs fails, the exercise's known mistakes' results on the same case are compared, part by part
(:meth:`Context.diagnose`): the smallest set of known mistakes (one, two or three, their variants composed)
that reproduces the student there, contradicts no other check and explains every case it changes is named in
``CheckResult.misconception`` (the first) and ``CheckResult.also`` (the others), and their sentences and
fixes open the message ("And also: ..." for the others); with none, the message ends "Not a mistake we
know". Gradients are judged at the student's own state: where the forward is wrong, a gradient that equals
central differences of that forward passes (one bug costs once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable

import numpy as np

from grader.student.engine.generic import search
from grader.student.engine.compare import same_as
from grader.student.engine.diagnosis import (
    REFERENCE_AGAIN,
    Combination,
    Expected,
    KnownMistake,
    diagnose,
    error_signature,
    numgrad_outputs,
)
from grader.student.engine.ops import Case, ScriptResult

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
            found = search.find(self, case, keys, rtol, atol, match_error, match_warnings)
        return found

    def _passes(self, case: str, keys: list[str]) -> list[list[str]]:
        """The output keys to match, in order: every (non-numgrad) output of ``case``, then ``keys`` alone."""
        reference = self.reference.get(case)
        numgrad_keys = numgrad_outputs(self.cases[case])
        every_key = sorted(set(reference.outputs) - numgrad_keys) if reference is not None else []
        keys = [k for k in keys if k not in numgrad_keys]
        return [every_key, keys] if keys and every_key and every_key != sorted(keys) else [keys]

    def reproduces(
        self,
        mistake: Mistake,
        case: str,
        keys: list[str],
        rtol: float = RTOL,
        atol: float = ATOL,
        match_error: bool = False,
        match_warnings: bool | tuple[str, ...] = False,
    ) -> bool:
        """``mistake``'s variant differs from the reference on ``case`` and equals the student on ``keys``."""
        return (
            diagnose(
                [mistake],
                self.cases[case],
                self.student_result(case),
                keys,
                rtol=rtol,
                atol=atol,
                match_error=match_error,
                match_warnings=match_warnings,
                run=self.run_mistake,
                reference=self.reference.get(case),
            )
            is not None
        )

    def part_by_part(
        self,
        case: str,
        keys: list[str],
        passes: list[list[str]],
        rtol: float = RTOL,
        atol: float = ATOL,
        match_error: bool = False,
        match_warnings: bool | tuple[str, ...] = False,
    ) -> Mistake | None:
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
                    if candidate is None or not self.reproduces(
                        candidate, case, pass_keys, rtol, atol, match_error, match_warnings
                    ):
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
        """How many outputs of all cases ``mistake``'s variant changes (the student changed them too: no
        contradiction). Of two explanations of a check that reproduce as much, the one that also accounts for
        more of the student's other differences is the simpler (eps outside the root in training and eval,
        rather than in eval only, when training differs too). Counted with :meth:`explained`, in one walk."""
        return self._explained_and_reach(mistake)[1]

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
        return (
            error_signature(variant) != error_signature(reference)
            or bool(variant.warnings) != bool(reference.warnings)
            or any(not _same_tight(variant.outputs.get(k), reference.outputs[k]) for k in keys)
        )

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
            if error_signature(variant) != error_signature(reference) or bool(variant.warnings) != bool(
                reference.warnings
            ):
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
                if not _same_tight(variant.outputs.get(key), expected) and _same_tight(
                    student.outputs.get(key), expected
                ):
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

    def _needed(
        self,
        chosen: Mistake,
        case: str,
        keys: list[str],
        rtol: float,
        atol: float,
        match_error: bool,
        match_warnings: bool | tuple[str, ...],
    ) -> Mistake:
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
            keys = [
                k
                for k in sorted(set(reference.outputs) - numgrad_keys)
                if same_as(again.outputs.get(k), reference.outputs[k], rtol=0.0, atol=0.0)
            ]
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
        if (
            error_signature(variant) != error_signature(reference)
            and (error_signature(variant) or ())[:2] != (error_signature(student) or ())[:2]
        ):
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
            key = num_key[len("num_") :]
            if same_as(student.outputs.get(key), student.outputs.get(num_key), rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL):
                own.add(key)
        if "dx" in own and same_as(student.outputs.get("dx_again"), student.outputs.get("dx"), rtol=1e-12, atol=1e-12):
            own.add("dx_again")  # the second backward of the same forward
        return own

    def explained(self, mistake: Mistake) -> int:
        """How many of the student's outputs that differ from the reference the variant reproduces."""
        return self._explained_and_reach(mistake)[0]

    def _explained_and_reach(self, mistake: Mistake) -> tuple[int, int]:
        """Memoised per mistake: (:meth:`explained`, :meth:`_reach`), counted in one walk over the cases' outputs
        (each variant run once): explained counts the keys where the student differs from the reference and the
        variant equals the student; reach the keys where the variant differs from the reference (tightly)."""
        return self._memoised("explained_reach", mistake.id, "", lambda: self._count_explained_and_reach(mistake))

    def _count_explained_and_reach(self, mistake: Mistake) -> tuple[int, int]:
        explained = reach = 0
        for name, case in self.cases.items():
            parts = self._comparable(name)
            if parts is None:
                continue
            student, reference, keys = parts
            variant = self.run_mistake(mistake, case)
            for key in keys:
                theirs = student.outputs.get(key)
                if (
                    theirs is not None
                    and not same_as(theirs, reference.outputs[key])
                    and same_as(theirs, variant.outputs.get(key))
                ):
                    explained += 1
                reach += not _same_tight(variant.outputs.get(key), reference.outputs[key])
        return explained, reach


def _same_tight(a: Any, b: Any) -> bool:
    """Equal at the backward checks' tolerance: whether a variant changes an output at all (a backward off by
    1e-6 relative changes it, as far as the backward checks can tell)."""
    return same_as(a, b, rtol=BACKWARD_RTOL, atol=BACKWARD_ATOL)


# A second reference run as a pseudo-mistake, so that Context.run_mistake caches it.
_REFERENCE_AGAIN = KnownMistake(REFERENCE_AGAIN, "", "", "")
