"""``grade rescore``: grade every stored upload again with the current grader, and say whose score changed.

After a fix to a check, the reference or a mistake's sentence, the instructor
runs ``grade rescore --db course.db [EXERCISE...]``. Each stored upload (a
server job with its files, ``job_files``, or a hand-in ``grade batch`` graded
and kept the same way) holding one of the exercises is put
on the grading queue again (the same Huey task as an upload, so it is graded
in the OS sandbox by ``grade worker`` processes, embedded or on Redis), under
the task id ``rescore-<run>-job-<id>``. Its result is recorded *beside* the
old one: a new ``submissions`` row (with its check rows) for each exercise,
timed at the upload (deadlines judge the upload, not the rescoring), marked
with the rescoring's id; the old row gets ``superseded_by`` = the new row's id
and is otherwise left as it was, so the old verdict stays readable and every
reader of the counted score (``Store.submissions`` and friends) sees the new
one. One transaction per upload: a rescoring killed half-way leaves the
uploads it recorded rescored and the others as they were; running it again
grades the current rows again.

What changed is decided by the one counted-score rule
(``grader.student.course.counted_score`` over the student's rows with the
course's and the student's own dates): a :class:`Change` per student and
exercise whose counted score moved, with the checks that flipped (passed ->
failed or back) in the uploads whose score moved. ``--dry-run`` grades and
reports the same without recording anything. The last rescoring (its time,
grader version, uploads, changes, errors) is kept in ``rescorings`` for the
dashboard.
"""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from grader.queue import records
from grader.queue.jobs import Queue, task_id
from grader.student.course import Course, counted_score
from grader.student.errors import GraderError
from grader.student.engine.model import ExerciseResult
from grader.student.store import Store, jobs, rescorings, utc_now
from grader.student.store import results as graded_rows
from grader.student.client.wire import report_from_dict

RESCORE_ATTEMPT = 0  # the ``attempt`` a rescoring task carries (uploads' tries are 1 and 2)


class RescoreError(GraderError):
    """A rescoring that cannot run (one line: what was wrong, what to do)."""


@dataclass
class Change:
    """One student's counted score of one exercise, before and after the rescoring."""

    student: str
    exercise: str
    before: float
    after: float
    max_score: float
    flipped: list[str] = field(default_factory=list)  # "submission 12: forward passed -> failed"


@dataclass
class Outcome:
    """What a rescoring did: the uploads graded again, the changes, the uploads it could not grade."""

    rescoring_id: int | None  # None for a dry run
    grader_version: str
    exercises: list[str]
    uploads: int
    changes: list[Change]
    errors: list[dict[str, Any]]  # {"job", "student", "error"}
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        """The API's answer (``POST /api/v1/rescore``), with the CLI's text of it."""
        return {**asdict(self), "text": format_text(self)}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Outcome":
        """The inverse of :meth:`to_json` (``grade rescore`` through the server that serves the database)."""
        return cls(
            doc.get("rescoring_id"),
            str(doc["grader_version"]),
            list(doc["exercises"]),
            int(doc["uploads"]),
            [Change(**c) for c in doc["changes"]],
            list(doc["errors"]),
            bool(doc["dry_run"]),
        )


def stored_uploads(store: Store, exercises: list[str]) -> list[tuple[dict[str, Any], list[str]]]:
    """(job row, exercise ids to grade again) of every graded upload holding one of ``exercises`` (all: [])."""
    found = []
    for job in jobs.graded(store.db):
        ids = [e for e in records.exercise_ids(job) if not exercises or e in exercises]
        if ids:
            found.append((job, ids))
    return found


def rescore_task_id(run: str, job_id: int) -> str:
    return f"rescore-{run}-job-{job_id}"


def grade_again(
    store: Store,
    queue: Queue,
    uploads: list[tuple[dict[str, Any], list[str]]],
    timeout: float,
    on_result: Callable[[int, int], None] | None = None,
    poll: float = 0.2,
) -> dict[int, dict[str, Any]]:
    """Put every upload on the queue and wait for the results; job id -> the task's result dict.

    An upload whose worker died, or that has no result within ``timeout``
    seconds of the last result, is missing from the answer (the caller lists
    it as an error). The results are removed from the queue once read.
    """
    run = uuid.uuid4().hex[:12]
    waiting: dict[str, int] = {}
    for job, ids in uploads:
        tid = rescore_task_id(run, int(job["id"]))
        files = records.job_files(store, int(job["id"]))
        queue.huey.enqueue(queue.task.s(int(job["id"]), RESCORE_ATTEMPT, job["student"], ids, files, id=tid))
        waiting[tid] = int(job["id"])
    results: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        while waiting and time.monotonic() < deadline:
            for tid in list(waiting):
                result = queue.result(tid)
                if result is None:
                    continue
                job_id = waiting.pop(tid)
                results[job_id] = result
                queue.forget(tid)
                queue.forget(task_id(job_id, RESCORE_ATTEMPT))  # the lease its grading held
                deadline = time.monotonic() + timeout
                if on_result is not None:
                    on_result(len(results), len(uploads))
            if waiting:
                time.sleep(poll)
    finally:  # not graded in time, or the command was stopped: not left to be graded later for nobody
        for tid in waiting:
            queue.huey.revoke_by_id(tid, revoke_once=True)
    return results


def _current_rows(store: Store, attempt_id: int) -> dict[str, dict[str, Any]]:
    """The rows in force of one upload's attempt, exercise -> submissions row."""
    return {r["exercise"]: r for r in graded_rows.in_force_of_attempt(store.db, attempt_id)}


def flips(store: Store, old_row: dict[str, Any], new: ExerciseResult) -> list[str]:
    """The checks of one exercise whose verdict changed between the old row and the new result."""
    old = {c["name"]: c["passed"] for c in store.check_results(int(old_row["id"]))}
    out = []
    for check in new.checks:
        if check.name in old and old[check.name] != check.passed:
            out.append(
                f"{check.name} {'passed' if old[check.name] else 'failed'} -> {'passed' if check.passed else 'failed'}"
            )
        elif check.name not in old:
            out.append(f"{check.name} new, {'passed' if check.passed else 'failed'}")
    names = {c.name for c in new.checks}
    out += [f"{name} removed" for name in old if name not in names]
    if not new.checks and old_row["status"] != new.status:
        out.append(f"status {old_row['status']} -> {new.status}")
    return out


def changes(store: Store, course: Course, new_results: dict[int, ExerciseResult]) -> list[Change]:
    """The counted scores that move when the rows ``new_results`` (old submission id -> new result) replace theirs."""
    course = store.effective_course(course)
    touched: dict[tuple[str, str], list[int]] = {}
    old_rows: dict[int, dict[str, Any]] = {}
    for sub_id in new_results:
        row = graded_rows.submission(store.db, sub_id)
        old_rows[sub_id] = row
        touched.setdefault((row["student"], row["exercise"]), []).append(sub_id)
    out = []
    for (student, exercise), ids in sorted(touched.items()):
        rows = store.submissions(student=student, exercise=exercise)
        after_rows = [
            (
                {**r, "score": new_results[r["id"]].score, "status": new_results[r["id"]].status}
                if r["id"] in new_results
                else r
            )
            for r in rows
        ]
        chapter = course.chapter_of(exercise, student)
        before = counted_score(rows, chapter, course.rule)
        after = counted_score(after_rows, chapter, course.rule)
        if abs(before.score - after.score) <= 1e-9:
            continue
        flipped = []
        for sub_id in ids:
            if abs(float(old_rows[sub_id]["score"]) - new_results[sub_id].score) > 1e-9:
                flipped += [
                    f"upload of {old_rows[sub_id]['started_at']}: {f}"
                    for f in flips(store, old_rows[sub_id], new_results[sub_id])
                ]
        out.append(Change(student, exercise, before.score, after.score, after.max_score, flipped))
    return out


def _record(store: Store, rescoring_id: int, rows: list[tuple[dict[str, Any], ExerciseResult]], version: str) -> None:
    """One upload's new rows beside the old (same attempt, same upload time), each old row pointed at its new
    one, in one transaction."""
    with store.transaction() as db:
        for old_row, new in rows:
            if not graded_rows.supersede(db, old_row, new, version, rescoring_id):
                # rescored by another run meanwhile: keep theirs, drop ours
                raise _Lost()


class _Lost(Exception):
    """Rolls back one upload's recording when another rescoring recorded it first."""


def rescore(
    store: Store,
    queue: Queue,
    course: Course,
    exercises: list[str],
    grader_version: str,
    dry_run: bool = False,
    timeout: float = 600.0,
    on_result: Callable[[int, int], None] | None = None,
    unavailable: str | None = None,
) -> Outcome:
    """Grade every stored upload of ``exercises`` (all: []) again on ``queue``; record beside (unless a dry run).

    A fault of the grading machine is never a new result: an exercise that comes back ``not_graded`` (its
    worker's self-test fails for its kind, or the OS sandbox cannot start there) keeps its recorded result and
    is listed as not graded again with the worker's reason; ``unavailable`` (why no worker can grade here, e.g.
    bubblewrap is missing) sends nothing and lists every upload so at once. Running it again once the machine
    is fixed grades the same stored files: no new upload is needed.
    """
    uploads = stored_uploads(store, exercises)
    if not uploads:
        raise RescoreError(
            "no graded upload with stored files holds those exercises: nothing to rescore "
            "(uploads to the course server and hand-ins graded by `grade batch` keep their files; "
            "`grade submit` keeps none)"
        )
    results = grade_again(store, queue, uploads, timeout, on_result) if unavailable is None else {}
    errors: list[dict[str, Any]] = []
    new_results: dict[int, ExerciseResult] = {}
    old_of: dict[int, dict[str, Any]] = {}
    graded = 0
    for job, _ids in uploads:
        result = results.get(int(job["id"]))
        if result is None:
            why = unavailable or f"no result within {timeout:g} s (is a `grade worker` running on the queue?)"
            errors.append({"job": job["id"], "student": job["student"], "error": _not_graded(why)})
            continue
        if not result.get("ok"):
            errors.append({"job": job["id"], "student": job["student"], "error": str(result.get("error"))})
            continue
        report = report_from_dict(result["report"])
        current = _current_rows(store, int(job["attempt_id"]))
        refused = [e for e in report.exercises if e.status == "not_graded"]
        if refused:
            errors.append(
                {
                    "job": job["id"],
                    "student": job["student"],
                    "error": _not_graded(f"{', '.join(e.id for e in refused)}: {refused[0].message}"),
                }
            )
        graded += len(refused) < len(report.exercises)
        for exercise in report.exercises:
            if exercise.status == "not_graded":
                continue  # the machine's fault: the recorded result stands
            old = current.get(exercise.id)
            if old is not None:
                new_results[int(old["id"])] = exercise
                old_of[int(old["id"])] = old
    found = changes(store, course, new_results)
    rescoring_id = None
    if not dry_run:
        with store.transaction() as db:
            rescoring_id = rescorings.start(
                db, utc_now(), grader_version, json.dumps(exercises), graded, json.dumps(errors)
            )
        by_upload: dict[int, list[tuple[dict[str, Any], ExerciseResult]]] = {}
        for sub_id, new in new_results.items():
            by_upload.setdefault(int(old_of[sub_id]["attempt_id"]), []).append((old_of[sub_id], new))
        for rows in by_upload.values():
            try:
                _record(store, rescoring_id, rows, grader_version)
            except _Lost:
                errors.append(
                    {
                        "job": None,
                        "student": rows[0][0]["student"],
                        "error": "this upload was rescored by another run meanwhile (its result kept)",
                    }
                )
        with store.transaction() as db:
            rescorings.finish(db, rescoring_id, utc_now(), json.dumps([asdict(c) for c in found]), json.dumps(errors))
    return Outcome(rescoring_id, grader_version, exercises, graded, found, errors, dry_run)


def _not_graded(why: str) -> str:
    """The error line of an upload a rescoring could not grade (a fault of the grading machine, never a zero)."""
    return f"{why}; its recorded result stands: fix the worker and run `grade rescore` again"


def last_rescoring(store: Store) -> dict[str, Any] | None:
    """The latest recorded rescoring, its JSON columns read (None: never rescored)."""
    row = rescorings.latest(store.db)
    if row is None:
        return None
    return {
        **row,
        "exercises": json.loads(row["exercises"]),
        "changes": json.loads(row["changes"] or "[]"),
        "errors": json.loads(row["errors"] or "[]"),
    }


def format_text(outcome: Outcome) -> str:
    """The changes as lines: who, which exercise, before -> after, and the checks that flipped."""
    what = "would change" if outcome.dry_run else "changed"
    head = (
        f"{'Dry run: ' if outcome.dry_run else ''}{outcome.uploads} upload"
        f"{'s' if outcome.uploads != 1 else ''} graded again with {outcome.grader_version}; "
        f"{len(outcome.changes)} counted score{'s' if len(outcome.changes) != 1 else ''} {what}"
    )
    lines = [
        head
        + ("" if outcome.dry_run else f" (rescoring {outcome.rescoring_id}; nothing recorded before was overwritten)")
        + "."
    ]
    for c in outcome.changes:
        lines.append(f"  {c.student}  {c.exercise}  {c.before:g} -> {c.after:g} of {c.max_score:g}")
        lines += [f"      {f}" for f in c.flipped]
    for e in outcome.errors:
        lines.append(f"  not graded again: submission {e['job']} of {e['student']}: {e['error']}")
    return "\n".join(lines)


def format_csv(outcome: Outcome) -> str:
    """One CSV row per change: student, exercise, before, after, max_score, flipped checks (; separated)."""
    from grader.student.sanitize import csv_cell

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["student", "exercise", "before", "after", "max_score", "flipped"])
    for c in outcome.changes:
        writer.writerow(
            [
                csv_cell(c.student),
                c.exercise,
                f"{c.before:g}",
                f"{c.after:g}",
                f"{c.max_score:g}",
                csv_cell("; ".join(c.flipped)),
            ]
        )
    return out.getvalue()
