"""The JSON API's submissions and progress (grader/server/app.py): uploads, their jobs and where they stand,
a student's progress, the roster and ``/me``."""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grader.term import standing
from grader.term import progress
from grader.term.class_report import overrides_in_force
from grader.student.engine import catalogue
from grader.student.course import Course, late_exercises, parse_time
from grader.student import standing as student_standing
from grader.student.errors import GraderError
from grader.server.api_schema import ROW_ID, TEXT, TEXTS, body_object, takes
from grader.queue import estimate, records
from grader.server.auth import Principal
from grader.queue.jobs import MAX_TRIES
from grader.student.store import Store
from grader.student.store import roster as store_roster
from grader.student.client.uploads import MAX_UPLOAD_BYTES, check_files
from grader.student.client.wire import report_from_dict, report_to_dict
from grader.server.api_base import (
    API_PREFIX,
    IDEMPOTENCY_KEY_MAX,
    MAX_WAIT_S,
    MAX_SELECTORS,
    MAX_SELECTOR_CHARS,
    ServerConfig,
    ServerState,
    fail,
    state,
    db_store,
    who,
    instructor,
    student_of,
    path_id,
    read_json,
    now_utc,
)

# --- submissions ------------------------------------------------------------------------------


def job_json(store: Store, job: dict[str, Any], config: ServerConfig | None = None) -> dict[str, Any]:
    """A job as the API shows it; with the full report (grader.student.client.wire) and the ``--json`` document once
    done.

    While the job is open, ``phase`` says where it is in one word (queued,
    running, retried) and ``where`` in one line (queued with how many ahead,
    running on which worker, which try after what failure);
    ``max_tries``, ``job_timeout_s`` and ``lease_timeout_s`` bound how long
    the server can take before it closes the job as done or error. Once done,
    ``late`` lists each exercise uploaded after its chapter's due date with
    the share of its score that counts, and ``closed_chapters`` the chapters
    whose exercises the upload could no longer grade. A ``held`` job (some
    exercises wait for the grader's machine: records.py) carries its report
    so far (the held exercises ``not_graded``) and ``held``: their ids, points
    and reason; ``where`` is the one line the student reads.
    """
    config = config or ServerConfig(Path(), "")
    doc: dict[str, Any] = {
        "id": job["id"],
        "student": job["student"],
        "status": job["status"],
        "exercises": records.exercise_ids(job),
        "received_at": job["received_at"],
        "finished_at": job["finished_at"],
        "tries": job["tries"],
        "worker": job["worker"],
        "error": job["error"] if job["status"] == "error" else None,
        "queue_position": records.position_in_queue(store, job) if job["status"] in ("received", "queued") else 0,
        "estimate_s": estimate.estimate(store, job),
        "url": f"{API_PREFIX}/submissions/{job['id']}",
        "max_tries": MAX_TRIES,
        "job_timeout_s": config.job_timeout,
        "lease_timeout_s": config.lease_timeout,
        "retry_reason": job["error"] if job["status"] in records.OPEN_STATES else None,
        "held": None,
    }
    report = records.report_of(store, job)
    if job["status"] == records.HELD and report is not None:
        held = report.not_graded
        doc["held"] = {
            "exercises": [e.id for e in held],
            "points": sum(e.max_score for e in held),
            "reason": job["held_reason"],
            "regrades": int(job["regrades"] or 0),
        }
    doc["phase"] = phase(doc)
    doc["where"] = where(doc)
    received = parse_time(job["received_at"])
    course = store.effective_course(config.course)  # the dashboard's extensions too
    doc["closed_chapters"] = closed_chapters(course, received, job["student"])
    if report is not None:
        doc["report"] = report_to_dict(report)
        doc["json"] = report.to_json()
        doc["late"] = late_exercises(course, report.graded_exercises, received, job["student"])
    return doc


def phase(doc: dict[str, Any]) -> str:
    """Where a job is, as one word: queued, running, retried (an earlier try failed; open again), done, held,
    error."""
    if doc["status"] in records.OPEN_STATES:
        if int(doc["tries"] or 0) > 1:
            return "retried"
        return "running" if doc["status"] == "running" else "queued"
    return str(doc["status"])


def where(doc: dict[str, Any]) -> str:
    """One line: where an open job is (what the waiting client prints), or how it ended."""
    status, tries = doc["status"], int(doc["tries"] or 0)
    retry = ""
    if tries > 1:
        retry = f", try {tries} of {doc['max_tries']}"
        if doc.get("retry_reason"):
            retry += f" (after {doc['retry_reason']})"
    if status in ("received", "queued"):
        ahead = int(doc.get("queue_position") or 0)
        return f"queued{f' ({ahead} ahead)' if ahead else ''}{retry}"
    if status == "running":
        return f"running on worker {doc['worker'] or '?'}{retry}"
    if status == "error":
        return f"not graded: {doc['error']}"
    if status == records.HELD and doc.get("held"):
        return held_line(doc["id"], doc["held"])
    return "graded"


def held_line(job_id: int, held: dict[str, Any]) -> str:
    """The one line a student reads about a held job: how much waits, that the server grades it, and why."""
    count = len(held["exercises"])
    return (
        f"{count} exercise{'s' if count != 1 else ''} ({held['points']:g} points) not graded yet: the server "
        f"grades {'them' if count != 1 else 'it'} by itself once its machine is fixed (no new upload needed; "
        f"`grade result {job_id}` shows {'them' if count != 1 else 'it'} then): {held['reason']}"
    )


def closed_chapters(course: Course, when: datetime, student: str | None = None) -> list[dict[str, Any]]:
    """The chapters taking no upload at ``when`` (for ``student``, with their extensions): name, ``state`` ("not
    open yet" or "closed": grader/student/standing.py), ``message`` ("chapter 'x' opens at T" / "... closed at
    T"), closing time and their exercises."""
    out = []
    for chapter in course.chapters:
        found = student_standing.chapter_state(standing.student_chapter(course, chapter, student), when)
        if found.state in (student_standing.NOT_OPEN, student_standing.CLOSED):
            closes = chapter.closes_at()
            out.append(
                {
                    "chapter": chapter.name,
                    "state": found.state,
                    "message": found.message(),
                    "closed_at": closes.isoformat(timespec="minutes") if closes else None,
                    "exercises": list(chapter.exercises),
                }
            )
    return out


def selected_exercises(course: Course, selectors: list[str], when: datetime, student: str | None = None) -> list[str]:
    """The exercise ids an upload grades: those named (all when none), refusing closed chapters.

    With no selectors, closed chapters are left out; naming an exercise of a
    closed chapter, or having nothing open, is a 403 with the date. The dates
    are the student's own (their extensions: pass ``store.effective_course``).
    """
    try:
        ids = catalogue.resolve(selectors)
    except GraderError as exc:
        raise fail(400, str(exc)) from exc
    closed = course.closed_exercises(ids, when, student)
    if selectors and closed:
        first, chapter = next(iter(closed.items()))
        found = student_standing.chapter_state(chapter, when)
        if found.state == student_standing.NOT_OPEN:
            raise fail(403, f"{found.message()} ({first}): submit it then")
        raise fail(403, f"{found.message()} ({first}): it takes no more uploads; submit the exercises of open chapters")
    ids = [i for i in ids if i not in closed]
    if not ids:
        raise fail(403, "every chapter's deadline has passed: submissions are closed")
    return ids


@takes(
    body_object({"files": {"type": "object", "additionalProperties": TEXT}, "exercises": TEXTS}, ("files",)),
    headers={"Idempotency-Key": TEXT},
)
async def create_submission(request: Request) -> Response:
    """POST /submissions: store the upload (files + row, one transaction), then answer 202."""
    st = state(request)
    store = db_store(request)
    principal = who(request)
    if principal.is_instructor:
        raise fail(403, "the instructor token cannot submit: log in with a student token")
    key = request.headers.get("idempotency-key") or secrets.token_hex(16)
    if len(key) > IDEMPOTENCY_KEY_MAX or not key.isprintable():
        raise fail(400, f"Idempotency-Key must be printable and at most {IDEMPOTENCY_KEY_MAX} characters")
    doc = await read_json(request, MAX_UPLOAD_BYTES)
    try:
        files = check_files(doc.get("files"))
    except GraderError as exc:
        raise fail(400, str(exc)) from exc
    selectors = doc.get("exercises", [])
    if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
        raise fail(400, "exercises must be a list of exercise ids or topics")
    if len(selectors) > MAX_SELECTORS or any(len(s) > MAX_SELECTOR_CHARS for s in selectors):
        raise fail(
            400,
            f"exercises must be at most {MAX_SELECTORS} exercise ids or topics of at most "
            f"{MAX_SELECTOR_CHARS} characters each",
        )
    when = now_utc()
    try:
        taken = records.replayed_job(store, principal.student, key, files)  # a retry: answered as it was taken
        if taken is not None:
            new = records.NewJob(taken, False)
        else:
            ids = selected_exercises(store.effective_course(st.config.course), selectors, when, principal.student)
            new = records.create_job(store, principal.student, key, files, ids, st.config.course, when)
    except records.KeyReused as exc:
        raise fail(
            409, "this Idempotency-Key was used for different files: send a new key for a new submission"
        ) from exc
    except records.RateLimited as exc:
        raise fail(
            429,
            f"rate limit reached: {exc.limit} submissions per {exc.minutes:g} minutes; "
            f"try again in {exc.retry_after} s",
            {"Retry-After": str(exc.retry_after)},
        ) from exc
    body = for_student(request, principal, job_json(store, new.job, st.config))  # a replay answers the held report
    body["replayed"] = not new.created
    return JSONResponse(body, status_code=202, headers={"Location": body["url"]})


@takes(path={"id": ROW_ID}, query={"wait": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_S}})
async def get_submission(request: Request) -> Response:
    """GET /submissions/{id}[?wait=S]: a job's state, and its report once graded (404 when not yours).

    With ``wait`` (seconds, at most MAX_WAIT_S) an open job's answer is held
    until the job is closed or the time is up (a long poll: the client learns
    of its report at once, without asking many times a second).
    """
    st = state(request)
    store = db_store(request)
    principal = who(request)
    job_id = path_id(request)
    try:
        wait = float(request.query_params.get("wait", 0))
    except ValueError:
        raise fail(400, f"wait must be a number of seconds (0 to {MAX_WAIT_S:g})") from None
    if not math.isfinite(wait):
        raise fail(400, f"wait must be a number of seconds (0 to {MAX_WAIT_S:g})")
    wait = min(max(wait, 0.0), MAX_WAIT_S)
    closed = asyncio.Event()
    st.waiters.setdefault(job_id, []).append(closed)  # before reading: a close in between still wakes us
    try:
        job = records.job(store, job_id)
        if job is None or (not principal.is_instructor and job["student"] != principal.student):
            raise fail(404, f"there is no submission {job_id} of yours: list yours with GET /api/v1/submissions")
        if wait and job["status"] in records.OPEN_STATES:  # (a held job answers at once: the student is told)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(closed.wait(), wait)
            job = records.job(store, job_id) or job
    finally:
        events = st.waiters.get(job_id, [])
        if closed in events:
            events.remove(closed)
        if not events:
            st.waiters.pop(job_id, None)
    return JSONResponse(for_student(request, principal, job_json(store, job, st.config)))


def for_student(request: Request, principal: Principal, doc: dict[str, Any]) -> dict[str, Any]:
    """A job document as its student may see it (grader/term/standing.py): exam-mode chapters held until their
    release, every message at its exercise's scaffolding level."""
    if principal.is_instructor or "report" not in doc:
        return doc
    course = db_store(request).effective_course(state(request).config.course)
    shown = standing.student_report(report_from_dict(doc["report"]), course, now_utc())
    return {**doc, "report": report_to_dict(shown), "json": shown.to_json()}


async def list_submissions(request: Request) -> Response:
    """GET /submissions (own) and GET /students/{student}/submissions (instructor): newest first."""
    store = db_store(request)
    principal = who(request)
    student = student_of(principal, request)
    config = state(request).config
    return JSONResponse(
        {
            "student": student,
            "submissions": [
                for_student(request, principal, job_json(store, j, config)) for j in records.jobs_of(store, student)
            ],
        }
    )


# --- progress, roster -----------------------------------------------------------------------------


def progress_json(st: ServerState, store: Store, student: str) -> dict[str, Any]:
    """The student's progress under the course's score rule (the same summary as `grade progress`).

    The instructor's overrides in force replace the graded score, as on the
    dashboard and in the exports (one counted score in every view); they are
    listed under ``overrides`` (exercise -> score, graded score, comment).
    """
    summary = progress.summarize(
        store, student, progress.course_exercises(), st.quizzes, "grade submit", st.config.course
    )
    in_force = overrides_in_force(store.score_overrides(student))
    applied: dict[str, Any] = {}
    for chapter in summary.chapters:
        for exercise in chapter.exercises:
            override = in_force.get((student, exercise.id))
            if override is not None:
                applied[exercise.id] = {
                    "score": float(override["score"]),
                    "graded": exercise.best_score,
                    "comment": str(override["comment"]),
                }
                exercise.best_score = float(override["score"])
    doc = summary.to_json()
    doc["overrides"] = applied
    return doc


def own_progress(st: ServerState, store: Store, student: str) -> dict[str, Any]:
    """A student's progress as they may see it (the API's GET /progress and their page): exam-mode chapters
    held until their release (grader/term/standing.py)."""
    return standing.student_progress(
        progress_json(st, store, student), store.effective_course(st.config.course), now_utc()
    )


async def get_progress(request: Request) -> Response:
    """GET /progress (own) and GET /students/{student}/progress (instructor)."""
    st = state(request)
    store = db_store(request)
    principal = who(request)
    student = student_of(principal, request)
    if principal.is_instructor:
        return JSONResponse(progress_json(st, store, student))
    return JSONResponse(own_progress(st, store, student))


async def list_students(request: Request) -> Response:
    """GET /students (instructor): the roster with each student's counted total."""
    st = state(request)
    store = db_store(request)
    instructor(request)
    rows = []
    for entry in store_roster.rows(store.db):
        summary = progress_json(st, store, entry["student"])
        rows.append(
            {**entry, "score": summary["score"], "max_score": summary["max_score"], "percent": summary["percent"]}
        )
    return JSONResponse({"students": rows})


async def get_me(request: Request) -> Response:
    """GET /me: who this token belongs to, and the course (``grade login`` checks a token with it)."""
    st = state(request)
    principal = who(request)
    return JSONResponse({"student": principal.student, "role": principal.role, "course": st.config.course.to_json()})
