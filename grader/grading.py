"""The grading pipeline: ``grade(path, selectors, student) -> GradeReport``.

1. resolve the selectors (``catalogue.resolve``) and check the folder;
2. scan the student's files statically (``loader.scan_forbidden_imports``): a file
   that imports ``reference``/``grader`` (itself or through a sibling file it
   imports) scores zero for its exercises, a file with a syntax error is an error
   with its line; the other files are graded;
3. build each exercise's cases from ``exercise_seed(student, id)``;
4. run the cases on the student's folder in sandboxed children (``sandbox.run_cases``);
5. ``evaluate`` each exercise in this process against the reference results,
   computed here (``ops.run_script`` on the reference package; lazily, as the
   checks ask for them, and cached per exercise and seed), and decide its status.

No database here: storing the report is the caller's step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from grader.student import catalogue, loader
from grader.student.errors import SetupError
from grader.student.ingest import Ingested, read_submission
from grader.student.model import CheckResult, ExerciseResult, GradeReport, exercise_seed
from grader.student.ops import Case, ScriptResult, run_script
from grader.student.sanitize import clean_text
from grader.student.sandbox import Job, JobOutcome, Limits, human_bytes, run_cases
from grader.student.worker import FORBIDDEN_SUFFIX
from grader.student.diagnosis import REFERENCE_AGAIN, KnownMistake, without_numgrad

# Case errors that make an exercise an ``error`` rather than a plain failure.
_ERROR_KINDS = {
    "MemoryError": "ran out of memory (limit {memory}) in {where}",
    "SystemExit": "called sys.exit({message}) in {where} (sys.exit/os._exit in your code?)",
    "BadOutputError": "{message}",
    "ImportError": "{message}",
    "KernelBuildError": "{message}",
    "RecursionError": "{where} recursed without end (RecursionError)",
}


class ReferenceResults(Mapping[str, ScriptResult]):
    """The reference's result of each case, computed in this process on first access.

    Lazy because some checks never read the reference (fit_function is graded by
    its error on a grid, and its reference run is the costliest of all), so
    computing every case up front would only compete with the sandboxed children
    for the CPU.
    """

    def __init__(self, cases: list[Case]) -> None:
        self._cases = {case.name: case for case in cases}
        self._results: dict[str, ScriptResult] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> ScriptResult:
        with self._lock:
            if name not in self._results:
                case = self._cases[name]  # KeyError for an unknown case, as a dict would
                self._results[name] = run_script(_reference_namespace(), case.script, case.arrays)
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
    from grader.mistakes import reference_namespace

    return reference_namespace()


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

    The live :class:`grader.student.diagnosis.Expected`: hidden checks with
    per-student seeds (``grade submit`` in this repository, ``grade batch``, the
    course server, the Gradescope bundle) and the source of every case pack.
    """

    live = True

    def __init__(self, exercise_id: str, reference: Mapping[str, ScriptResult]) -> None:
        from grader.mistakes import for_exercise

        self.exercise_id = exercise_id
        self._reference = reference
        self._mistakes = {m.id: m for m in for_exercise(exercise_id)}
        self.mistakes: list[KnownMistake] = list(self._mistakes.values())

    @property
    def reference(self) -> Mapping[str, ScriptResult]:
        return self._reference

    def namespace(self, mistake_id: str | None) -> Any:
        """The reference package (None or REFERENCE_AGAIN) or the namespace of mistake ``mistake_id``."""
        if mistake_id is None or mistake_id == REFERENCE_AGAIN:
            return _reference_namespace()
        return self._mistakes[mistake_id].namespace

    def variant(self, mistake_id: str, case: Case) -> ScriptResult:
        """Run ``mistake_id``'s namespace (or the reference again) on ``case`` without its numgrad ops."""
        return run_script(self.namespace(mistake_id), without_numgrad(case), case.arrays)


def files_hash(path: Path) -> str:
    """sha256 over the exercise files a hand-in would be graded with (see :class:`grader.student.ingest.Ingested`)."""
    return read_submission(path).files_hash()


def _check_folder(path: Path) -> None:
    """SetupError unless ``path`` is a folder holding at least one exercise file."""
    if not path.exists():
        raise SetupError(f"'{path}' does not exist: pass --path to the folder with your exercise files")
    if not path.is_dir():
        raise SetupError(f"'{path}' is not a folder: pass --path to the folder with your exercise files")
    topics = catalogue.CPU_TOPICS
    if not any((path / f"{t}.py").is_file() for t in topics) and not (path / "kernels").is_dir():
        raise SetupError(
            f"'{path}' has no exercise files ({', '.join(t + '.py' for t in topics[:3])}, ...): "
            "pass --path to the folder with your exercise files"
        )


def _blocked(exercise_id: str, path: Path, ingested: Ingested, problems: dict[str, str], deps: dict[str, set[str]]) -> str | None:
    """Why an exercise cannot run at all, or None.

    Its file was refused at ingest (a link, a FIFO...) or is missing, or it (or
    a sibling file it imports) imports reference/grader or does not parse.
    """
    if catalogue.topic_of(exercise_id) == "kernels":
        return None
    file = f"{catalogue.topic_of(exercise_id)}.py"
    if file in ingested.refused:
        return ingested.refused[file]
    if file not in ingested.files:
        return f"{file} is missing from '{clean_text(path)}'"
    if file in problems:
        return problems[file]
    for dep in sorted(deps.get(file, ())):
        if dep in problems:
            return f"{file} imports {dep}, and {problems[dep]}"
    return None


def _special_error(results: dict[str, ScriptResult], limits: Limits) -> str | None:
    """The message of a case error that makes the whole exercise an error, if any."""
    for name, result in results.items():
        error = result.error
        if error and error.get("type") in _ERROR_KINDS:
            template = _ERROR_KINDS[error["type"]]
            where = error.get("where") or "your code"
            message = template.format(
                memory=human_bytes(limits.memory_bytes), where=where, message=error.get("message", "")
            )
            return f"case {name!r}: {message}"
    return None


# Ops that run code the student writes (``new`` only runs the constructor the stub provides).
_STUDENT_CODE_OPS = {"call", "func", "numgrad", "eval_fn", "cl_kernel"}


def _nothing_implemented(cases: list[Case], results: dict[str, ScriptResult]) -> bool:
    """Whether every case that calls student-written code (not just the stub's constructor) failed."""
    calling = [c for c in cases if any(op.get("op") in _STUDENT_CODE_OPS for op in c.script)]
    return all(results.get(c.name) is None or results[c.name].error is not None for c in calling)


def _forbidden_at_runtime(results: dict[str, ScriptResult]) -> str | None:
    """The import guard's message when student code imported reference/grader while running."""
    for result in results.values():
        error = result.error
        if error and error.get("type") in ("ImportError", "PermissionError") and FORBIDDEN_SUFFIX in error.get("message", ""):
            return f"{error['message']}: this exercise scores zero"
    return None


def _status(
    checks: list[CheckResult],
    cases: list[Case],
    results: dict[str, ScriptResult],
    max_score: float,
    special: str | None,
) -> str:
    """not_implemented / error / passed / failed for an exercise whose cases ran.

    not_implemented: a case raised NotImplementedError and the exercise scored
    nothing, or scored only on cases that never call the student's own code
    (the constructor the stub ships with).
    """
    score = sum(c.score for c in checks)
    raised_nie = any(r.error and r.error.get("type") == "NotImplementedError" for r in results.values())
    if raised_nie and (score <= 0 or _nothing_implemented(cases, results)):
        return "not_implemented"
    if special:
        return "error"
    return "passed" if score >= max_score - 1e-9 else "failed"


def output_limit_reached(output: str, limits: Limits) -> bool:
    """Whether the captured output filled the whole limit (or was cut): heavy printing, not an endless loop."""
    return "more output cut]" in output or len(output.encode("utf-8", errors="replace")) >= limits.output_bytes


def _exercise_result(
    exercise_id: str,
    seed: int,
    checks_def: Any,
    cases: list[Case],
    outcome: JobOutcome,
    expected: Any,
    limits: Limits,
) -> ExerciseResult:
    """Turn a sandbox outcome into an ExerciseResult (evaluation happens here, in the parent)."""
    t0 = time.monotonic()
    max_score = float(checks_def.max_score)
    if outcome.status != "ok":
        status = "timeout" if outcome.status == "timeout" else "error"
        message = outcome.message
        if status == "timeout" and output_limit_reached(outcome.output, limits):
            message = (f"output limit reached: your code printed more than the {human_bytes(limits.output_bytes)}"
                       f" kept (a print inside a loop?), and writing it all used up the time:"
                       f" {message.replace(' (infinite loop?)', '')}. Remove or reduce the prints.")
        return ExerciseResult(exercise_id, status, 0.0, max_score, [], message, outcome.duration, outcome.output)
    try:
        checks = checks_def.evaluate(outcome.results, expected, seed)
    except Exception as exc:  # a grader bug must not take the other exercises down
        message = f"the grader could not evaluate {exercise_id}: {type(exc).__name__}: {exc} (a grader bug: please report it)"
        return ExerciseResult(exercise_id, "error", 0.0, max_score, [], message, outcome.duration, outcome.output)
    forbidden = _forbidden_at_runtime(outcome.results)
    if forbidden:
        return ExerciseResult(exercise_id, "error", 0.0, max_score, [], forbidden, outcome.duration, outcome.output)
    special = _special_error(outcome.results, limits)
    status = _status(checks, cases, outcome.results, max_score, special)
    score = sum(c.score for c in checks)
    duration = outcome.duration + (time.monotonic() - t0)
    return ExerciseResult(
        exercise_id, status, score, max_score, checks, special or "", duration, outcome.output
    )


def _with_knock_on_note(ex: ExerciseResult, graded: list[ExerciseResult], deps: dict[str, set[str]]) -> ExerciseResult:
    """``ex`` with a first line naming the student's own exercises it builds on that fail their own checks.

    An exercise short of full marks whose file imports sibling files (blocks.py
    imports linear.py, ...) may fail because of them: the exercises graded in
    the same run that its check definition declares it ``uses`` (or, without a
    declaration, every exercise of the imported files) and that fall short are
    named, so that the student fixes those first.
    """
    from grader.student.checks import CHECKS

    if ex.score >= ex.max_score or catalogue.topic_of(ex.id) == "kernels":
        return ex
    imported = {f[: -len(".py")] for f in deps.get(f"{catalogue.topic_of(ex.id)}.py", set())}
    uses = tuple(getattr(CHECKS[ex.id], "uses", ()))
    notes = []
    for other in graded:
        if other.id == ex.id or other.score >= other.max_score or catalogue.topic_of(other.id) not in imported:
            continue
        if uses and other.id not in uses:
            continue
        word = "times out" if other.status == "timeout" else "fails its own checks"
        if uses:
            notes.append(f"{ex.id} uses your {other.id}, which {word}: fix that first.")
        else:
            notes.append(f"{ex.id} imports your {catalogue.topic_of(other.id)}.py, where {other.id} {word}:"
                         " fix that first.")
    if not notes:
        return ex
    message = "\n".join(notes + ([ex.message] if ex.message else []))
    return dataclasses.replace(ex, message=message)


def grade(path: Path | str, selectors: list[str] | None, student: str, limits: Limits | None = None) -> GradeReport:
    """Grade the exercises ``selectors`` (ids or topics; None or [] for all) of the folder ``path``.

    Raises UsageError for an unknown selector and SetupError for a missing or
    empty folder; everything the student's code does ends up in the report.
    """
    from grader.student.checks import CHECKS

    limits = limits or Limits()
    ids = catalogue.resolve(list(selectors or []))
    folder = Path(path).resolve()
    _check_folder(folder)
    sandboxed = limits.sandboxed()
    ingested = read_submission(folder)
    problems = loader.scan_forbidden_imports(ingested.files)
    deps = loader.local_dependencies(ingested.files)

    seeds = {i: exercise_seed(student, i) for i in ids}
    blocked: dict[str, str] = {}
    jobs: list[Job] = []
    cases: dict[str, list[Case]] = {}
    for exercise_id in ids:
        reason = _blocked(exercise_id, folder, ingested, problems, deps)
        if reason:
            blocked[exercise_id] = reason
            continue
        definition = CHECKS[exercise_id]
        cases[exercise_id] = definition.cases(seeds[exercise_id])
        jobs.append(
            Job(exercise_id, cases[exercise_id], float(definition.timeout), bool(definition.needs_opencl))
        )

    outcomes = run_cases(ingested, jobs, limits)

    exercises: list[ExerciseResult] = []
    for exercise_id in ids:
        max_score = float(CHECKS[exercise_id].max_score)
        if exercise_id in blocked:
            exercises.append(ExerciseResult(exercise_id, "error", 0.0, max_score, [], blocked[exercise_id]))
            continue
        exercises.append(
            _exercise_result(
                exercise_id,
                seeds[exercise_id],
                CHECKS[exercise_id],
                cases[exercise_id],
                outcomes[exercise_id],
                LiveExpected(exercise_id, reference_results(exercise_id, seeds[exercise_id], cases[exercise_id])),
                limits,
            )
        )
    exercises = [_with_knock_on_note(ex, exercises, deps) for ex in exercises]
    notices = sorted(set(ingested.refused.values()))
    if not sandboxed:
        notices.append(f"graded without the OS sandbox ({clean_text(limits.sandbox_off_reason())})")
    return GradeReport(
        student=student, exercises=exercises, files_hash=ingested.files_hash(), notices=notices, sandboxed=sandboxed
    )


def error_report(student: str, selectors: list[str] | None, reason: str) -> GradeReport:
    """A report giving every selected exercise an ``error`` verdict with ``reason`` (a hand-in that could not be graded).

    Its files hash is empty, so ``grade batch`` tries the student again on its next run.
    """
    from grader.student.checks import CHECKS

    reason = clean_text(reason, 2000)
    exercises = [
        ExerciseResult(i, "error", 0.0, float(CHECKS[i].max_score), [], reason) for i in catalogue.resolve(list(selectors or []))
    ]
    return GradeReport(student=student, exercises=exercises)


__all__ = ["Limits", "error_report", "files_hash", "grade", "reference_results"]
