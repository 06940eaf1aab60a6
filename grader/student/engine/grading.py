"""The grading pipeline: ``grade(path, selectors, student, limits, source) -> GradeReport``.

1. resolve the selectors (``catalogue.resolve``) and check the folder;
2. scan the student's files statically (``loader.scan``): a file
   that imports ``reference``/``grader`` (itself or through a sibling file it
   imports) scores zero for its exercises, a file with a syntax error is an error
   with its line; the other files are graded;
3. ask the ``source`` for each exercise's seed, cases and expected results
   (:class:`Prepared`): the instructor's live source (``grader.course.grading``: the
   per-student seed ``exercise_seed(student, id)``, the reference and mistake
   variants run in this process) or a case pack (:mod:`grader.student.engine.pack`:
   the public seed, everything read from data);
4. run the cases on the student's folder in sandboxed children (``sandbox.run_cases``);
5. ``evaluate`` each exercise in this process against the expected results and
   decide its status. Checks that need reference code run only with a live
   source; a report from packs lists them as hidden (``GradeReport.notices``).

No database here: storing the report is the caller's step.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from grader.student.engine import catalogue, loader
from grader.student.errors import SetupError
from grader.student.sandbox.ingest import Ingested, read_submission
from grader.student.engine.model import WHERE_PREFIX, CheckResult, ExerciseResult, GradeReport, at_full_marks
from grader.student.engine.ops import Case, ScriptResult
from grader.student.sanitize import clean_text
from grader.student.sandbox.runner import Job, JobOutcome, Limits, Workspace, human_bytes, prestart_workspace, run_cases
from grader.student.sandbox.worker import FORBIDDEN_SUFFIX
from grader.student.engine.diagnosis import Expected

# Case errors that make an exercise an ``error`` rather than a plain failure.
_ERROR_KINDS = {
    "MemoryError": "ran out of memory (limit {memory}) in {where}",
    "SystemExit": "called sys.exit({message}) in {where} (sys.exit/os._exit in your code?)",
    "BadOutputError": "{message}",
    "ImportError": "{message}",
    "KernelBuildError": "{message}",
    "RecursionError": "{where} recursed without end (RecursionError)",
}


@dataclass
class Prepared:
    """What a source gives for one exercise: the seed its plan is built from, the cases to run, the expected results."""

    seed: int
    cases: list[Case]
    expected: Expected


class Source(Protocol):
    """Where an exercise's cases and expected results come from (live reference runs, or a case pack)."""

    live: bool

    def prepare(self, exercise_id: str, student: str) -> Prepared:
        """The seed, cases and expected results of ``exercise_id`` for ``student``."""
        ...

    def notices(self, ids: list[str]) -> list[str]:
        """Lines for the report about how ``ids`` were graded here (e.g. which checks run elsewhere)."""
        ...


def files_hash(path: Path) -> str:
    """sha256 over the exercise files a hand-in would be graded with (see
    :class:`grader.student.sandbox.ingest.Ingested`)."""
    return read_submission(path).files_hash()


def check_folder(path: Path) -> None:
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


def _blocked(
    exercise_id: str, path: Path, ingested: Ingested, problems: dict[str, str], deps: dict[str, set[str]]
) -> str | None:
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


# Case errors that say the grader's own machine failed (no OpenCL device builds a kernel): not graded.
_GRADER_FAULT_KINDS = ("OpenCLUnavailable",)


def _grader_fault(results: dict[str, ScriptResult]) -> str | None:
    """The message of a case error that is the grader's machine's fault, if any (the exercise is ``not_graded``)."""
    for result in results.values():
        error = result.error
        if error and error.get("type") in _GRADER_FAULT_KINDS:
            return clean_text(error.get("message"), 2000) or "the grader's machine could not run this exercise"
    return None


def _forbidden_at_runtime(results: dict[str, ScriptResult]) -> str | None:
    """The import guard's message when student code imported reference/grader while running."""
    for result in results.values():
        error = result.error
        if (
            error
            and error.get("type") in ("ImportError", "PermissionError")
            and FORBIDDEN_SUFFIX in error.get("message", "")
        ):
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
    return "passed" if at_full_marks(score, max_score) else "failed"


def output_limit_reached(output: str, limits: Limits) -> bool:
    """Whether the captured output filled the whole limit (or was cut): heavy printing, not an endless loop."""
    return "more output cut]" in output or len(output.encode("utf-8", errors="replace")) >= limits.output_bytes


def _exercise_result(
    exercise_id: str,
    seed: int,
    checks_def: Any,
    cases: list[Case],
    outcome: JobOutcome,
    expected: Expected,
    limits: Limits,
) -> ExerciseResult:
    """Turn a sandbox outcome into an ExerciseResult (evaluation happens here, in the parent)."""
    t0 = time.monotonic()
    max_score = float(checks_def.points_here(seed, expected.live))
    fault = outcome.message if outcome.status == "not_graded" else None
    if outcome.status == "ok":
        fault = _grader_fault(outcome.results)
    if fault:  # the grader's machine failed: no verdict on the student's work, nothing to count
        return ExerciseResult(exercise_id, "not_graded", 0.0, max_score, [], fault, outcome.duration, outcome.output)
    if outcome.status != "ok":
        status = "timeout" if outcome.status == "timeout" else "error"
        message = outcome.message
        if status == "timeout" and output_limit_reached(outcome.output, limits):
            message = (
                f"output limit reached: your code printed more than the {human_bytes(limits.output_bytes)}"
                f" kept (a print inside a loop?), and writing it all used up the time:"
                f" {message.replace(' (infinite loop?)', '')}. Remove or reduce the prints."
            )
        return ExerciseResult(exercise_id, status, 0.0, max_score, [], message, outcome.duration, outcome.output)
    try:
        checks = checks_def.evaluate(outcome.results, expected, seed)
    except Exception as exc:  # a grader bug must not take the other exercises down
        message = (
            f"the grader could not evaluate {exercise_id}: {type(exc).__name__}: {exc} (a grader bug: please report it)"
        )
        return ExerciseResult(exercise_id, "error", 0.0, max_score, [], message, outcome.duration, outcome.output)
    forbidden = _forbidden_at_runtime(outcome.results)
    if forbidden:
        return ExerciseResult(exercise_id, "error", 0.0, max_score, [], forbidden, outcome.duration, outcome.output)
    special = _special_error(outcome.results, limits)
    status = _status(checks, cases, outcome.results, max_score, special)
    score = sum(c.score for c in checks)
    duration = outcome.duration + (time.monotonic() - t0)
    return ExerciseResult(exercise_id, status, score, max_score, checks, special or "", duration, outcome.output)


# How a knock-on note names the state of the exercise to see to first, and what to do: by its status.
KNOCK_ON_WORDS = {
    "failed": ("fails its own checks", "fix"),
    "timeout": ("times out", "fix"),
    "not_implemented": ("is not implemented yet", "implement"),
}


def _with_knock_on_note(ex: ExerciseResult, graded: list[ExerciseResult], deps: dict[str, set[str]]) -> ExerciseResult:
    """``ex`` with a first line naming the student's own exercises it builds on that fail their own checks.

    An exercise short of full marks whose file imports sibling files (blocks.py
    imports linear.py, ...) may fail because of them: the exercises graded in
    the same run that its check definition declares it ``uses`` (or, without a
    declaration, every exercise of the imported files) and that fall short are
    named, so that the student fixes those first.
    """
    from grader.student.engine.checks import CHECKS

    if ex.score >= ex.max_score or ex.status == "not_graded" or catalogue.topic_of(ex.id) == "kernels":
        return ex
    imported = {f[: -len(".py")] for f in deps.get(f"{catalogue.topic_of(ex.id)}.py", set())}
    uses = tuple(getattr(CHECKS[ex.id], "uses", ()))
    notes = []
    for other in graded:
        if (
            other.id == ex.id
            or other.score >= other.max_score
            or other.status == "not_graded"
            or catalogue.topic_of(other.id) not in imported
        ):
            continue
        if uses and other.id not in uses:
            continue
        word, fix = KNOCK_ON_WORDS.get(other.status, KNOCK_ON_WORDS["failed"])
        if uses:
            notes.append(f"{ex.id} uses your {other.id}, which {word}: {fix} that first.")
        else:
            notes.append(
                f"{ex.id} imports your {catalogue.topic_of(other.id)}.py, where {other.id} {word}: {fix} that first."
            )
    if not notes:
        return ex
    message = "\n".join(notes + ([ex.message] if ex.message else []))
    return dataclasses.replace(ex, message=message)


def grade(
    path: Path | str,
    selectors: list[str] | None,
    student: str,
    limits: Limits | None,
    source: Source,
    workspace: Workspace | None = None,
) -> GradeReport:
    """Grade the exercises ``selectors`` (ids or topics; None or [] for all) of the folder ``path``.

    ``source`` gives each exercise's cases and expected results (live or a case
    pack). Raises UsageError for an unknown selector and SetupError for a
    missing or empty folder (or a missing case pack); everything the student's
    code does ends up in the report. ``workspace``: one the caller started
    (:func:`grader.student.sandbox.runner.prestart_workspace`), closed here or by the sandbox.
    """
    limits = limits or Limits()
    try:
        ids = catalogue.resolve(list(selectors or []))
        folder = Path(path).resolve()
        check_folder(folder)
        sandboxed = limits.sandboxed()
        ingested = read_submission(folder)
        if workspace is None:  # the workers start now, importing NumPy while the cases are prepared
            workspace = prestart_workspace(limits, sandboxed, ids)
        return _graded(ids, folder, ingested, student, limits, source, workspace)
    finally:
        if workspace is not None:
            workspace.close()  # (the sandbox closes it after the jobs; a second close does nothing)


def _graded(
    ids: list[str],
    folder: Path,
    ingested: Ingested,
    student: str,
    limits: Limits,
    source: Source,
    workspace: Workspace,
) -> GradeReport:
    """The report of :func:`grade` once the hand-in is ingested and the workers are starting."""
    from grader.student.engine.checks import CHECKS

    sandboxed = workspace.sandboxed
    scanned = loader.scan(ingested.files)
    problems, deps = scanned.problems, scanned.deps
    prepared = {i: source.prepare(i, student) for i in ids}
    blocked: dict[str, str] = {}
    jobs: list[Job] = []
    for exercise_id in ids:
        reason = _blocked(exercise_id, folder, ingested, problems, deps)
        if reason:
            blocked[exercise_id] = reason
            continue
        definition = CHECKS[exercise_id]
        jobs.append(
            Job(exercise_id, prepared[exercise_id].cases, float(definition.timeout), bool(definition.needs_opencl))
        )

    # Each exercise is evaluated as soon as its outcome arrives, by one evaluator thread,
    # while the sandboxed children run the others (the slots go on feeding their children).
    evaluated: dict[str, Future[ExerciseResult]] = {}
    crashed: dict[str, set[str]] = {}  # per exercise: the cases whose run stopped on an error (the student's code)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="evaluate") as evaluator:

        def evaluate(outcome: JobOutcome) -> None:
            crashed[outcome.id] = {name for name, r in outcome.results.items() if r.error is not None}
            here = prepared[outcome.id]
            evaluated[outcome.id] = evaluator.submit(
                _exercise_result, outcome.id, here.seed, CHECKS[outcome.id], here.cases, outcome, here.expected, limits
            )

        # A source that locates keeps the workspace's workers for the location's traced run (closed by grade).
        keep = getattr(source, "locate", None) is not None
        run_cases(ingested, jobs, limits, on_outcome=evaluate, workspace=workspace, deps=deps, keep=keep)

    exercises: list[ExerciseResult] = []
    for exercise_id in ids:
        if exercise_id in blocked:
            max_score = float(CHECKS[exercise_id].points_here(prepared[exercise_id].seed, source.live))
            exercises.append(ExerciseResult(exercise_id, "error", 0.0, max_score, [], blocked[exercise_id]))
        else:
            exercises.append(evaluated[exercise_id].result())
    exercises = [_with_knock_on_note(ex, exercises, deps) for ex in exercises]
    exercises = _located(exercises, prepared, source, folder, ingested, limits, crashed, workspace, deps)
    notices = sorted(set(ingested.refused.values())) + source.notices(ids)
    if not getattr(source, "live", False) and any(
        ex.status == "failed" and all(c.where is None for c in ex.checks) for ex in exercises
    ):
        notices.append(NEEDS_SERVER_TO_LOCATE)
    if not sandboxed:
        notices.append(f"graded without the OS sandbox ({clean_text(limits.sandbox_off_reason())})")
    return GradeReport(
        student=student, exercises=exercises, files_hash=ingested.files_hash(), notices=notices, sandboxed=sandboxed
    )


# Said by a grading without the reference (the handout's case packs) when a failing exercise has no location: a
# crash is located from the case pack's shapes, where values leave the reference's only where the reference runs.
NEEDS_SERVER_TO_LOCATE = (
    "the line of your code where a failing check's values leave the reference's is found by the"
    " course server's grading (grade login, then grade submit): these public checks locate a"
    " crash, and show the numbers only"
)

# At most this many failing cases of one exercise are run again with their lines recorded.
LOCATE_CASES = 2


def _locatable(ex: ExerciseResult, source: Source) -> bool:
    """Whether ``ex`` is one :func:`_located` seeks a location for: failed, on the CPU, graded by a source that
    locates (live grading; a handout's case packs locate crashes alone)."""
    from grader.student.engine.checks import CHECKS

    return getattr(source, "locate", None) is not None and ex.status == "failed" and not CHECKS[ex.id].needs_opencl


def _located(
    exercises: list[ExerciseResult],
    prepared: dict[str, Prepared],
    source: Source,
    folder: Path,
    ingested: Ingested,
    limits: Limits,
    crashed: dict[str, set[str]] | None = None,
    workspace: Workspace | None = None,
    deps: dict[str, set[str]] | None = None,
) -> list[ExerciseResult]:
    """``exercises`` with each failing comparison's location (``CheckResult.where``, said first in its message).

    Only a source with ``locate`` locates (live grading; the case packs, crashes only); a correct submission
    runs nothing here. The failing cases run once more in the sandbox with the topic's lines recorded
    (:func:`grader.student.engine.trace.traced`), and ``source.locate`` aligns them with the reference's.
    That run is ``workspace``'s next round when given (the grading's own, kept open: its idle workers run the
    traced cases on a fresh load of the student's package, no new worker starts), else in a fresh one;
    ``deps``: the submission's ``loader.local_dependencies``, when the caller has them (not parsed again).
    The reference's traces (``source.trace_reference``) are made before that run, not beside it (see below).
    A source that locates crashes only (``locates_crashes_only``: the case packs) traces only the failing cases
    that ``crashed`` (per exercise, the cases whose first run stopped on an error): a wrong value runs nothing more.
    """
    from grader.student.engine.checks import CHECKS
    from grader.student.engine.trace import traced

    locate = getattr(source, "locate", None)
    wanted: dict[str, list[str]] = {}
    for ex in exercises:
        if not _locatable(ex, source):
            continue
        cases = list(dict.fromkeys(c.case for c in ex.checks if not c.passed and c.case))
        if getattr(source, "locates_crashes_only", False):
            cases = [name for name in cases if name in (crashed or {}).get(ex.id, set())]
        cases = cases[:LOCATE_CASES]
        if cases:
            wanted[ex.id] = cases
    if locate is None or not wanted:
        return exercises
    jobs = []
    for exercise_id, names in wanted.items():
        by_name = {case.name: case for case in prepared[exercise_id].cases}
        topic = exercise_id.split(".", 1)[0]
        jobs.append(
            Job(
                exercise_id, [traced(by_name[name], topic) for name in names], float(CHECKS[exercise_id].timeout), False
            )
        )
    # The reference's traces, made before the sandbox run and not beside it in a thread: CPython 3.11's AST
    # constructor keeps its recursion depth in state shared by threads (python/cpython#106905), so an ast.parse in
    # one thread while another builds an AST fails with "AST constructor recursion depth mismatch".
    ahead = getattr(source, "trace_reference", None)
    references = (
        {
            (exercise_id, name): ahead(exercise_id, case)
            for exercise_id, names in wanted.items()
            for name in names
            for case in prepared[exercise_id].cases
            if case.name == name
        }
        if ahead is not None
        else {}
    )
    outcomes = run_cases(ingested, jobs, limits, workspace=workspace, deps=deps)
    located = []
    for ex in exercises:
        outcome = outcomes.get(ex.id)
        if ex.id not in wanted or outcome is None or outcome.status != "ok":
            located.append(ex)
            continue
        source_file = folder / f"{ex.id.split('.', 1)[0]}.py"
        text = source_file.read_text(encoding="utf-8", errors="replace") if source_file.is_file() else ""
        by_name = {case.name: case for case in prepared[ex.id].cases}
        places: dict[str, dict[str, Any] | None] = {}
        for name in wanted[ex.id]:
            result = outcome.results.get(f"{name}~trace")
            reference = references.get((ex.id, name))
            places[name] = (
                locate(ex.id, by_name[name], result, text, reference) if result is not None and text else None
            )
        checks = [_with_where(c, places.get(c.case)) if not c.passed else c for c in ex.checks]
        located.append(dataclasses.replace(ex, checks=checks))
    return located


def _with_where(check: CheckResult, where: dict[str, Any] | None) -> CheckResult:
    """``check`` with ``where`` (and its words as the message's first line), or as it is when None."""
    if where is None:
        return check
    said = f"{WHERE_PREFIX}{where['file']} line {where['line']}: `{where['code']}`" + (
        f" — {where['words']}" if where.get("words") else ""
    )
    return dataclasses.replace(check, where=where, message=said + ("\n" + check.message if check.message else ""))


def error_report(student: str, selectors: list[str] | None, reason: str) -> GradeReport:
    """A report giving every selected exercise an ``error`` verdict with ``reason`` (a hand-in that could not be
    graded).

    Its files hash is empty, so ``grade batch`` tries the student again on its next run.
    """
    from grader.student.engine.checks import CHECKS

    reason = clean_text(reason, 2000)
    exercises = [
        ExerciseResult(i, "error", 0.0, float(CHECKS[i].max_score), [], reason)
        for i in catalogue.resolve(list(selectors or []))
    ]
    return GradeReport(student=student, exercises=exercises)


__all__ = ["Limits", "Prepared", "Source", "error_report", "files_hash", "grade"]
