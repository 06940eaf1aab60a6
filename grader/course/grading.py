"""Grading with the reference: the instructor's entry point ``grade(path, selectors, student) -> GradeReport``.

The pipeline itself is :func:`grader.student.engine.grading.grade` (the same code the
handout runs on case packs); this module gives it the **live** source: each
exercise's per-student seed (``exercise_seed(student, id)``), its cases from
the check definition, and a :class:`LiveExpected` that runs the reference
(lazily, cached per exercise and seed) and the mistake variants in this
process. Used by ``grade submit`` in this repository, ``grade batch``, the
course server's workers, the Gradescope bundle and ``grade release`` (which
turns live results at the public seeds into case packs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from grader.student.engine.diagnosis import REFERENCE_AGAIN, KnownMistake, combined_id, without_numgrad
from grader.student.engine.grading import Prepared, error_report, files_hash, output_limit_reached
from grader.student.engine.grading import grade as grade_with
from grader.student.engine.model import GradeReport, exercise_seed
from grader.student.engine.ops import Case, ScriptResult, run_script
from grader.student.sandbox.runner import Limits, Workspace


ROOT = Path(__file__).resolve().parents[2]
# What decides a live verdict: the checks and the pipeline, the mistakes, the live checks and emulations, the
# reference. A change to any of them is a new grader, whatever pyproject.toml's version says.
JUDGE_TREES = ("grader/student/engine", "grader/mistakes", "grader/course", "reference")


PUBLIC_STUDENT = "(public checks)"  # the "student" whose seed the public checks (the case packs) use


def public_seed(exercise_id: str) -> int:
    """The fixed seed of an exercise's public checks (the same for every student: the handout's case pack)."""
    return exercise_seed(PUBLIC_STUDENT, exercise_id)


def judge_digest(root: Path = ROOT, trees: tuple[str, ...] = JUDGE_TREES) -> str:
    """sha256 (12 hex digits) over the source files of ``trees`` under ``root``: each file's relative path and
    content, in order (``.py``, ``.cl`` and ``.json`` files; caches left out)."""
    import hashlib

    digest = hashlib.sha256()
    for tree in trees:
        for path in sorted((root / tree).rglob("*")):
            if path.suffix in (".py", ".cl", ".json") and "__pycache__" not in path.parts and path.is_file():
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


_VERSION: list[str] = []


def grader_version() -> str:
    """The version recorded with every live-graded attempt: ``0.1.0+3f2a9c1b7e0d``, the installed normgrade's
    version and :func:`judge_digest`, so that a rescoring after a fix of a check (same package version) is told
    apart from the grading it replaces (the dashboard, ``grade rescore``, the exports show it). Computed once."""
    if not _VERSION:
        from importlib import metadata

        try:
            package = metadata.version("normgrade")
        except metadata.PackageNotFoundError:
            package = "unknown"
        _VERSION.append(f"{package}+{judge_digest()}")
    return _VERSION[0]


class ReferenceResults(Mapping[str, ScriptResult]):
    """The reference's result of each case, computed in this process on first access.

    Lazy because some checks never read the reference (fit_function is graded by
    its error on a grid, and its reference run is the costliest of all), so
    computing every case up front would only compete with the sandboxed children
    for the CPU. The reference runs each case without its ``numgrad`` ops: those
    central differences of the *student's* forward are compared with the
    student's own backward, never with the reference's (they were most of the
    reference's cost). ``numgrad=True`` keeps them: the reference graded as a
    student (``grade release`` checks that it passes its own public checks).
    """

    def __init__(self, cases: list[Case], numgrad: bool = False) -> None:
        self._cases = {case.name: case for case in cases}
        self._numgrad = numgrad
        self._results: dict[str, ScriptResult] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> ScriptResult:
        with self._lock:
            if name not in self._results:
                case = self._cases[name]  # KeyError for an unknown case, as a dict would
                script = case.script if self._numgrad else without_numgrad(case)
                self._results[name] = run_script(_reference_namespace(), script, case.arrays)
            return self._results[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cases)

    def __len__(self) -> int:
        return len(self._cases)


_REFERENCE_CACHE: dict[tuple[str, int], ReferenceResults] = {}
_REFERENCE_CACHE_SIZE = 4096  # (exercise, seed) entries kept; the oldest go first
_REFERENCE_LOCK = threading.Lock()


def _reference_namespace() -> Any:
    """The ``reference`` package with its topic modules loaded (kernels are emulated by ops_opencl)."""
    from reference.opencl.emulation import (
        reference_namespace,
    )  # not grader.mistakes: the catalogue waits for a diagnosis

    return reference_namespace()


def clear_reference_cache() -> None:
    """Forget every cached reference result (a batch: each student has seeds of their own, so none would hit)."""
    with _REFERENCE_LOCK:
        _REFERENCE_CACHE.clear()


def reference_results(exercise_id: str, seed: int, cases: list[Case]) -> ReferenceResults:
    """The reference results of an exercise's cases (lazy), cached per (exercise, seed)."""
    key = (exercise_id, seed)
    with _REFERENCE_LOCK:
        results = _REFERENCE_CACHE.get(key)
        if results is None:
            results = _REFERENCE_CACHE[key] = ReferenceResults(cases)
            while len(_REFERENCE_CACHE) > _REFERENCE_CACHE_SIZE:
                del _REFERENCE_CACHE[next(iter(_REFERENCE_CACHE))]
        return results


class LiveExpected:
    """The expected results of one exercise, computed here: the reference (lazy, cached) and the mistake variants.

    The live :class:`grader.student.engine.diagnosis.Expected`: hidden checks with
    per-student seeds (``grade submit`` in this repository, ``grade batch``, the
    course server, the Gradescope bundle) and the source of every case pack.
    """

    live = True

    def __init__(self, exercise_id: str, reference: Mapping[str, ScriptResult]) -> None:
        self.exercise_id = exercise_id
        self._reference = reference
        self._mistakes: dict[str, Any] | None = None
        self._combined: dict[str, Any] = {}
        self._terms: dict[tuple[Any, ...], Any] = {}

    @property
    def mistakes(self) -> list[KnownMistake]:
        """The exercise's known mistakes; the catalogue (grader.mistakes) is imported when a check first asks."""
        return list(self._by_id().values())

    def _by_id(self) -> dict[str, Any]:
        if self._mistakes is None:
            from grader.mistakes import for_exercise

            self._mistakes = {m.id: m for m in for_exercise(self.exercise_id)}
        return self._mistakes

    @property
    def reference(self) -> Mapping[str, ScriptResult]:
        return self._reference

    def namespace(self, mistake_id: str | None) -> Any:
        """The reference package (None or REFERENCE_AGAIN) or the namespace of mistake ``mistake_id``."""
        if mistake_id is None or mistake_id == REFERENCE_AGAIN:
            return _reference_namespace()
        if mistake_id in self._combined:
            return self._combined[mistake_id].namespace
        return self._by_id()[mistake_id].namespace

    def combination(self, ids: list[str]) -> str | None:
        """Mistakes ``ids`` at once (grader.mistakes.compose): flags merged, or disjoint methods inherited."""
        key = combined_id(ids)
        if key not in self._combined:
            from grader.mistakes import compose

            by_id = self._by_id()
            self._combined[key] = compose([by_id[i] for i in ids])
        return key if self._combined[key] is not None else None

    def variant(self, mistake_id: str, case: Case) -> ScriptResult:
        """Run ``mistake_id``'s namespace (or the reference again) on ``case`` without its numgrad ops."""
        return run_script(self.namespace(mistake_id), without_numgrad(case), case.arrays)

    def rerun(self, script: list[dict[str, Any]], arrays: dict[str, Any]) -> ScriptResult:
        """The reference on a rewritten ``script`` (generic diagnoses: a setting changed, eval and training
        swapped, another activation's backward), numgrad ops left out."""
        return run_script(_reference_namespace(), [op for op in script if op.get("op") != "numgrad"], arrays)

    def signature(self, target: str) -> dict[str, Any]:
        """The reference's keyword defaults (bool and float only) of layer class or function ``target``
        ('normalization.BatchNorm1d'): the settings generic diagnoses may find changed."""
        import inspect

        topic, name = target.split(".", 1)
        obj = getattr(getattr(_reference_namespace(), topic), name, None)
        if obj is None:
            return {}
        try:
            parameters = inspect.signature(obj).parameters  # (a class: its __init__'s, without self)
        except (TypeError, ValueError):
            return {}
        return {
            p.name: p.default
            for p in parameters.values()
            if isinstance(p.default, (bool, float)) and p.kind is not p.VAR_KEYWORD
        }

    def terms(self, case: Case, student: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The reference's results of ``case`` as named terms (grader/course/terms.py; running statistics from the
        student's own previous values ``student``), or None."""
        from grader.course.terms import terms

        key = (case.name, id(case), id(student))
        if key not in self._terms:
            self._terms[key] = terms(self.exercise_id, case, student)
        return self._terms[key]

    def axis_variants(self, case: Case, keys: list[str]) -> list[tuple[str, str, str, tuple[int, ...]]]:
        """(rule, what, of which array, its axes here) of each reduction over other axes than the reference's that
        changes outputs ``keys`` of ``case`` (grader/course/terms.py)."""
        from grader.course.terms import AXIS_RULES, REDUCTION_KEYS, REDUCTIONS, SUMS

        x = case.arrays.get("x")
        if x is None:
            return []
        grouped = self.exercise_id == "normalization.GroupNorm"  # (its statistics' axes: of x as (N, groups, -1))

        def viewed(what: str) -> str:
            return "x reshaped (N, groups, -1)" if grouped and what not in SUMS else f"x of shape {tuple(np.shape(x))}"

        return [
            (rule, what, viewed(what), AXIS_RULES[rule](3 if grouped and what not in SUMS else np.ndim(x)))
            for rule in AXIS_RULES
            for what in REDUCTIONS
            if set(REDUCTION_KEYS[what]) & set(keys) and self.axis_variant(case, rule, what) is not None
        ]

    def axis_variant(self, case: Case, rule: str, what: str) -> dict[str, Any] | None:
        """The reference's results of ``case`` with one reduction over the axes of ``rule`` (terms.axis_variant)."""
        from grader.course.terms import axis_variant

        key = (case.name, id(case), rule, what)
        if key not in self._terms:
            self._terms[key] = axis_variant(self.exercise_id, case, rule, what)
        return self._terms[key]

    def live_check(self, name: str) -> Callable[..., Any]:
        """The instructor-side check function ``name`` (grader/course/live_checks.py)."""
        from grader.course.live_checks import LIVE_CHECKS

        return LIVE_CHECKS[name]

    def verdict(self, check: str, mistake_id: str, compute: Callable[[], tuple[bool, Any]]) -> tuple[bool, Any]:
        """A statistical check's verdict on a variant: computed from the variant's live results."""
        return compute()

    def public_twin(self) -> tuple[int, list[Case], "LiveExpected"]:
        """The exercise at its public seed: the cases and (cached, shared by every student) reference results a
        case pack is written from (grader/course/packs.py)."""
        from grader.student.engine.checks import CHECKS

        seed = public_seed(self.exercise_id)
        cases = CHECKS[self.exercise_id].cases(seed)
        return seed, cases, LiveExpected(self.exercise_id, reference_results(self.exercise_id, seed, cases))


class LiveSource:
    """The live source of the pipeline: per-student seeds, the reference and the mistake variants run here."""

    live = True

    def prepare(self, exercise_id: str, student: str) -> Prepared:
        """Cases at ``exercise_seed(student, exercise_id)`` and their live expected results."""
        from grader.student.engine.checks import CHECKS

        seed = exercise_seed(student, exercise_id)
        cases = CHECKS[exercise_id].cases(seed)
        return Prepared(seed, cases, LiveExpected(exercise_id, reference_results(exercise_id, seed, cases)))

    def notices(self, ids: list[str]) -> list[str]:
        """Nothing to add: every check runs here."""
        return []

    def trace_reference(self, exercise_id: str, case: Case) -> ScriptResult | None:
        """The reference's run of ``case`` with every intermediate recorded (:func:`grader.course.align.
        reference_trace`), made while the sandbox runs the student's traced run; None where it fails."""
        from grader.course import align

        try:
            return align.reference_trace(case, exercise_id.split(".", 1)[0])
        except Exception:  # noqa: BLE001 - the grader's fault: locate then tries once more itself
            return None

    def locate(
        self,
        exercise_id: str,
        case: Case,
        student: ScriptResult,
        student_source: str,
        reference: ScriptResult | None = None,
    ) -> dict[str, Any] | None:
        """Where the student's traced run of ``case`` leaves the reference's (:func:`grader.course.align.locate`);
        ``reference``: the reference's traced run when :meth:`trace_reference` made it already.

        A location only adds to a verdict already reached: a fault of the locator itself (the grader's) leaves the
        check without one, never the grading stopped."""
        from grader.course import align

        topic = exercise_id.split(".", 1)[0]
        try:
            return align.locate(
                exercise_id,
                topic,
                student,
                reference or align.reference_trace(case, topic),
                student_source,
                align.reference_source(topic),
            )
        except Exception:  # noqa: BLE001 - the grader's fault: no location, the verdict stands
            return None


def grade(
    path: Path | str,
    selectors: list[str] | None,
    student: str,
    limits: Limits | None = None,
    workspace: Workspace | None = None,
) -> GradeReport:
    """Grade the exercises ``selectors`` (ids or topics; None or [] for all) of ``path`` with the hidden checks.

    Raises UsageError for an unknown selector and SetupError for a missing or
    empty folder; everything the student's code does ends up in the report.
    ``workspace``: workers the caller started early (see grader.student.engine.grading.grade).
    """
    return grade_with(path, selectors, student, limits, LiveSource(), workspace)


__all__ = [
    "LiveExpected",
    "LiveSource",
    "Limits",
    "error_report",
    "files_hash",
    "grade",
    "grader_version",
    "judge_digest",
    "output_limit_reached",
    "reference_results",
]
