"""The course server: a Starlette application, its JSON API under ``/api/v1/`` and its pages.

``grader.server.web.create_app(config)`` builds the application (these
routes beside the pages built on them); ``grade serve`` runs it with
uvicorn. One process owns the course database: ``create_app`` claims it
(``grader.student.store.serve``: a lock on ``course.db-serving`` holding the
pid and URL; a second server, or a writing command such as ``grade roster
import``, is refused in one line while it is held) until the application
stops. Its request handlers (in the event-loop thread, one connection), the
collector thread and the LTI score poster (their own connections) all open the
file with ``Store.open``, which never drops the process's SQLite locks.
Workers only see the queue.

Every API answer is JSON; an error is ``{"error": "<one line: what was wrong
and what to do>"}`` with a fitting status (400 bad input, 401 bad token, 403
not allowed or deadline passed, 404 not found or not yours, 409 key reused,
413 too large, 429 rate limit with Retry-After). A student only ever reaches
their own rows: the student id comes from the token, never from the request,
and a submission id of someone else is "not found". ``GET /api/v1/`` lists the
endpoints (``API`` below).

Hostile requests: a body is read up to its limit (413 past it) and its JSON
nesting depth is measured on the raw bytes before it is parsed (400 past
MAX_JSON_DEPTH); ids in paths are bounded integers (400 otherwise, 404 when
there is no such row); an instructor's ``/students/{id}/...`` of a student the
course does not know is 404. Every response carries the security headers of
grader/server/headers.py (CSP with ``frame-ancestors 'none'``, nosniff,
no-referrer; only the LTI launch and the pages it lands on may be framed, by
the configured LMS origins).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import secrets
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grader.term import extensions, regrade, rescore, standing
from grader.term import progress
from grader.term.class_report import overrides_in_force
from grader.student.engine import catalogue
from grader import quiz as quiz_lib
from grader.quiz import graded, judging
from grader.student.course import DEFAULT_COURSE, Course, late_exercises, parse_time
from grader.student import standing as student_standing
from grader.student.errors import GraderError, StoreError
from grader.server import auth, lti_services
from grader.server.api_schema import ROW_ID, TEXT, TEXTS, body_object, takes
from grader.queue import estimate, records
from grader.server.headers import as_dict as security_headers
from grader.server.text_input import refuse_unsafe_text
from grader.server.auth import Principal
from grader.queue.collector import Collector
from grader.queue.jobs import DEFAULT_LEASE_TIMEOUT_S, MAX_TRIES, open_queue
from grader.queue.selftest import RETRY_FIRST_S, SelfTest
from grader.student.store import Store, students
from grader.student.store import roster as store_roster
from grader.student.client.uploads import MAX_UPLOAD_BYTES, check_files
from grader.student.client.wire import report_from_dict, report_to_dict

API_PREFIX = "/api/v1"
MAX_JSON_BYTES = 64 * 1024  # any request body but an upload (quiz answers)
IDEMPOTENCY_KEY_MAX = 100
MAX_WAIT_S = 30.0  # the longest a GET /submissions/{id}?wait=S is held
MAX_JSON_DEPTH = 32  # nesting of arrays and objects in a request body (an upload needs 2)
MAX_ID = records.MAX_ROW_ID  # SQLite's largest integer: a larger id is refused before any query
MAX_MESSAGE = 400  # characters of an error's one line
MAX_SELECTORS, MAX_SELECTOR_CHARS = 200, 100  # an upload's exercise list (did-you-mean on a 60 KB name took 7 s)


@dataclass
class ServerConfig:
    """What ``grade serve`` was given."""

    db_path: Path
    queue_url: str
    course: Course = DEFAULT_COURSE
    quiz_dir: Path | None = None
    job_timeout: float = 600.0
    collect_interval: float = 0.2
    lease_timeout: float = DEFAULT_LEASE_TIMEOUT_S
    selftest_retry: float = RETRY_FIRST_S  # a failing kind is tested again after this, doubling (selftest.py)
    url: str = ""  # where this machine reaches the server (written beside the database for its commands)


@dataclass
class ServerState:
    """Per-application state: the config, the event-loop thread's store, the quizzes, the collector."""

    config: ServerConfig
    quizzes: list[quiz_lib.Quiz]
    store: Store | None = None  # opened in the event-loop thread when the application starts
    collector: Collector | None = None
    grader_version: str = field(default="unknown")
    waiters: dict[int, list[asyncio.Event]] = field(default_factory=dict)  # long polls per job id

    def wake(self, job_id: int) -> None:
        """Answer the long polls waiting on a job (called in the event loop)."""
        for event in self.waiters.get(job_id, []):
            event.set()

    @property
    def selftest(self) -> SelfTest | None:
        """The collector's self-test (None without a collector: the tests that run none)."""
        return self.collector.selftest if self.collector is not None else None


def grader_version() -> str:
    """The version recorded with each attempt: normgrade's and the digest of what judges (grader.course.grading)."""
    from grader.course.grading import grader_version as live_version

    return live_version()


# --- helpers -------------------------------------------------------------------------------


def fail(status: int, message: str, headers: dict[str, str] | None = None) -> HTTPException:
    """An API error: ``{"error": message}`` with ``status`` (one line, at most MAX_MESSAGE characters)."""
    line = " ".join(message.split())
    if len(line) > MAX_MESSAGE:
        line = line[: MAX_MESSAGE - 3] + "..."
    return HTTPException(status, line, headers=headers)


def state(request: Request) -> ServerState:
    """The application's ServerState."""
    return request.app.state.normgrade


def db_store(request: Request) -> Store:
    """The handlers' store (open while the application runs)."""
    store = state(request).store
    assert store is not None, "the application has not started"
    return store


def who(request: Request) -> Principal:
    """The principal of the request's bearer token; 401 (one line, what to do) when there is none."""
    token = auth.bearer(request.headers.get("authorization"))
    if token is None:
        raise fail(401, "no token sent: run `grade login URL` with the token your instructor gave you")
    principal = auth.lookup(db_store(request).db, token)
    if principal is None:
        raise fail(
            401,
            "the token is not valid (mistyped, revoked or replaced): "
            "run `grade login URL` again with your current token",
        )
    return principal


def instructor(request: Request) -> Principal:
    """The principal, who must be the instructor (403 otherwise)."""
    principal = who(request)
    if not principal.is_instructor:
        raise fail(403, "this is for the instructor only")
    return principal


def student_of(principal: Principal, request: Request) -> str:
    """The student whose data a request reads: oneself, or (instructor) the one in the path.

    The ``/students/{student}/...`` routes are the instructor's: 403 for a student.
    """
    if "student" in request.path_params and not principal.is_instructor:
        raise fail(403, "this is for the instructor only: read your own data without /students/{id}")
    if principal.is_instructor:
        student = request.path_params.get("student")
        if not student:
            raise fail(400, "the instructor reads a student's data under /api/v1/students/{id}/...")
        if not known_student(db_store(request), str(student)):
            raise fail(
                404,
                f"there is no student {str(student)[:64]!r} in this course: list them with GET {API_PREFIX}/students",
            )
        return str(student)
    return principal.student


def known_student(store: Store, student: str) -> bool:
    """Whether the course knows ``student`` (in the roster, or with anything recorded)."""
    if len(student) > 200:
        return False
    return students.known(store.db, student)


def path_id(
    request: Request,
    name: str = "id",
    what: str = "a submission id",
    hint: str = "use the number `grade submit` printed",
) -> int:
    """A numeric id of the path, refused with 400 unless it is an integer from 1 to MAX_ID."""
    raw = str(request.path_params.get(name, ""))
    value = records.row_id(raw)
    if value is None:
        raise fail(400, f"{raw[:40]!r} is not {what}: {hint} (1 to {MAX_ID})")
    return value


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it passes ``limit`` bytes (also when chunked)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise fail(
            413, f"the request is {int(declared)} bytes; at most {limit} are accepted: upload only your exercise files"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise fail(413, f"the request is larger than {limit} bytes: upload only your exercise files")
        chunks.append(chunk)
    return b"".join(chunks)


JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a string (its escapes included), unrolled: linear
NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
TO_SQUARE = bytes.maketrans(b"{}", b"[]")


def too_deep(body: bytes, limit: int) -> bool:
    """Whether a JSON text nests arrays and objects more than ``limit`` deep, decided without parsing it.

    Strings are blanked (their brackets do not count), everything but the
    brackets dropped, ``{}`` made ``[]``; then the innermost pairs ``[]`` are
    removed ``limit`` times. Brackets left over mean deeper than ``limit`` (or
    brackets that do not match, which no parser would accept either). Each
    step is one pass of C code over the body: a body nested 100,000 deep, or a
    megabyte of ``[]``, is refused in milliseconds, before ``json.loads`` could
    overflow the stack on it.
    """
    brackets = JSON_STRING.sub(b'""', body).translate(TO_SQUARE, NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            return True  # brackets that do not match
        brackets = shorter
    return bool(brackets)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The JSON object in the body: at most ``limit`` bytes (413) and MAX_JSON_DEPTH deep (400), else 400; text
    that cannot be taken (grader/server/text_input.py) is a 400 too."""
    body = await read_body(request, limit)
    if too_deep(body, MAX_JSON_DEPTH):
        raise fail(
            400,
            f"the body is nested more than {MAX_JSON_DEPTH} levels deep (or its brackets do not "
            "match): send a flat JSON object",
        )
    try:
        doc = json.loads(body, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise fail(400, f"the body is not JSON ({exc}): send a JSON object") from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, NaN
        raise fail(400, f"the body is not usable JSON ({str(exc)[:80]}): send a JSON object") from exc
    if not isinstance(doc, dict):
        raise fail(400, "the body must be a JSON object")
    refuse_unsafe_text(doc)
    return doc


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


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


# --- quizzes --------------------------------------------------------------------------------------


def quiz_or_404(st: ServerState, chapter: str) -> quiz_lib.Quiz:
    for quiz in st.quizzes:
        if quiz.chapter == chapter:
            return quiz
    chapters = ", ".join(q.chapter for q in st.quizzes) or "none"
    raise fail(404, f"'{chapter}' is not a quiz chapter: chapters are {chapters}")


def public_question(posed: quiz_lib.Posed, st: graded.GradedStanding) -> dict[str, Any]:
    """A question as one student sees it before answering: the prompt rendered with their numbers,
    the choices in their order, their attempts; never a salt, digest, key, reference call or explanation."""
    question = posed.question
    return {
        "id": question.id,
        "kind": question.kind,
        "prompt": posed.prompt,
        "choices": [{"id": c.id, "text": c.text} for c in posed.choices],
        "params": dict(posed.values) or None,
        "tolerance": question.tolerance,
        "symbols": sorted(set(question.symbols.values())) or None,
        "points": question.points,
        "checkpoint": question.checkpoint,
        "attempts": st.allowed,
        "attempts_left": st.left,
        "answered_correctly": st.correct,
    }


def reference_or_503(quiz: quiz_lib.Quiz) -> None:
    """A chapter with parameterised questions needs the reference where the server runs (503 otherwise)."""
    try:
        quiz_lib.needs_reference(quiz)
    except quiz_lib.ReferenceUnavailableError as exc:
        raise fail(503, f"the course server cannot judge this chapter ({exc}); tell your instructor") from exc


async def list_quizzes(request: Request) -> Response:
    """GET /quizzes (own) and GET /students/{student}/quizzes (instructor): each chapter's standing."""
    st = state(request)
    store = db_store(request)
    student = student_of(who(request), request)
    answers = store.quiz_attempts(student)
    return JSONResponse(
        {"student": student, "chapters": [quiz_lib.chapter_progress(q, answers).to_json() for q in st.quizzes]}
    )


async def get_quiz(request: Request) -> Response:
    """GET /quizzes/{chapter}: the questions posed for the caller (their numbers and choice order), no keys.

    Each question says whether the caller has answered it correctly already
    (``grade quiz`` asks only the others unless ``--all``); ``standing`` is the chapter's.
    """
    st = state(request)
    store = db_store(request)
    principal = who(request)
    quiz = quiz_or_404(st, request.path_params["chapter"])
    reference_or_503(quiz)
    answers = store.quiz_attempts(principal.student)
    attempts = st.config.course.quiz_attempts
    return JSONResponse(
        {
            "student": principal.student,
            "chapter": quiz.chapter,
            "title": quiz.title,
            "standing": quiz_lib.chapter_progress(quiz, answers).to_json(),
            "questions": [
                public_question(quiz_lib.pose(q, principal.student), graded.standing(q, answers, attempts))
                for q in quiz.questions
            ],
        }
    )


def closed_answer(
    question: quiz_lib.Question, posed: quiz_lib.Posed, st: graded.GradedStanding
) -> tuple[int, dict[str, Any]]:
    """409 for an answer to a closed question (right already, or out of attempts): not judged, not recorded;
    the one-line reason, whether it counts as right, and its explanation (a closed question may be explained)."""
    return 409, {
        "error": " ".join(graded.closed_message(question, st).split()),
        "question": question.id,
        "correct": st.correct,
        "params": dict(posed.values) or None,
        "attempts_left": 0,
        "explanation": closed_explanation(posed),
    }


def closed_explanation(posed: quiz_lib.Posed) -> str:
    """The explanation of a closed question as posed for its student (a parameterised one with their numbers
    and the reference's answer to them): shown once the question is closed, never before."""
    expected = None
    if posed.question.parameterised:
        call = quiz_lib.params_lib.parse_reference(posed.question.reference, set(posed.values))
        expected = quiz_lib.params_lib.reference_answer(call, posed.values)
    return posed.explanation(expected)


@takes(body_object({"question": TEXT, "answer": {}, "shown": {"type": "boolean"}}, ("question", "answer")))
async def answer_quiz(request: Request) -> Response:
    """POST /quizzes/{chapter}/answers ``{"question", "answer", "shown"}``: judged once here, recorded, then told.

    The answer is judged as posed for the token's student (their numbers). With
    ``"shown": true`` choice numbers count in the order GET /quizzes/{chapter}
    lists them (what ``grade quiz`` shows); otherwise choices are named by id (an
    answers file's numbers count in file order, as locally). An unreadable or
    too complex answer is a 422 with the reason, not recorded, and costs no
    attempt. Each question allows a fixed number of judged attempts that never
    resets (``grader.quiz.graded``); an answer to a question answered correctly
    or out of attempts is a 409. Before the chapter's due date a wrong answer
    says only "Not this one."; the explanation comes with a correct answer, the
    last attempt, or any answer after the due date. Judging runs in a separate
    process with a time budget, awaited from a worker thread, so one hostile
    answer never holds up other requests.
    """
    st = state(request)
    store = db_store(request)
    principal = who(request)
    if principal.is_instructor:
        raise fail(403, "the instructor token cannot answer quizzes: log in with a student token")
    quiz = quiz_or_404(st, request.path_params["chapter"])
    doc = await read_json(request, MAX_JSON_BYTES)
    question_id = doc.get("question")
    if "answer" not in doc:
        raise fail(400, 'send {"question": ID, "answer": ...}: the body has no "answer"')
    try:
        question = quiz.question(str(question_id))
    except KeyError:
        raise fail(
            400,
            f"'{question_id}' is not a question of chapter '{quiz.chapter}': "
            f"list them with GET {API_PREFIX}/quizzes/{quiz.chapter}",
        ) from None
    shown = doc.get("shown", False)
    if not isinstance(shown, bool):
        raise fail(400, "shown must be true (choice numbers as listed) or false (choice ids)")
    status, answer = await judge_and_record(st, store, principal.student, quiz, question, doc.get("answer"), shown)
    return JSONResponse(answer, status_code=status)


async def judge_and_record(
    st: ServerState, store: Store, student: str, quiz: quiz_lib.Quiz, question: quiz_lib.Question, raw: Any, shown: bool
) -> tuple[int, dict[str, Any]]:
    """One answer of ``student``, judged as posed for them, recorded, then told: (200, the verdict) or (409,
    the question is closed, not judged); the API's POST .../answers and the student's page both go here.

    HTTPException 422 for an unreadable or too complex answer (not recorded, no attempt spent), 503 when the
    reference is missing. The rules are those of :func:`answer_quiz`.
    """
    attempts = st.config.course.quiz_attempts
    before = graded.standing(question, store.quiz_attempts(student), attempts)
    posed = quiz_lib.pose(question, student)
    if before.closed:
        return closed_answer(question, posed, before)
    try:
        verdict = await asyncio.to_thread(judging.judge_bounded, posed, raw, shown, None, student)
    except quiz_lib.AnswerFormatError as exc:
        raise fail(422, str(exc)) from exc
    except quiz_lib.ReferenceUnavailableError as exc:
        raise fail(503, f"the course server cannot judge this question ({exc}); tell your instructor") from exc
    # nothing was awaited from here on: the check and the record are one step for this event loop
    before = graded.standing(question, store.quiz_attempts(student), attempts)
    if before.closed:  # a concurrent answer used the last attempt while this one was judged
        return closed_answer(question, posed, before)
    first_try = store.record_quiz_answer(
        student, quiz.chapter, question.id, verdict.answer, verdict.correct, verdict.values
    )
    after = before.after(verdict.correct)
    due_passed = graded.past_due(st.config.course.quiz_due(quiz.chapter), datetime.now(timezone.utc))
    reveal = graded.reveals_explanation(after, due_passed)
    standing = quiz_lib.chapter_progress(quiz, store.quiz_attempts(student))
    return 200, {
        "question": question.id,
        "answer": verdict.answer,
        "correct": verdict.correct,
        "params": dict(verdict.values) or None,
        "first_try": first_try,
        "attempt": after.used,
        "attempts": after.allowed,
        "attempts_left": after.left,
        "feedback": graded.feedback(after),
        "explanation": posed.explanation(verdict.expected) if reveal else None,
        "chapter": standing.to_json(),
    }


# --- the instructor's term: regrade requests, extensions (grader/term/regrade.py, grader/term/extensions.py) ----------


def _text(doc: dict[str, Any], key: str) -> str:
    """A string field of a JSON body ("" when absent; 400 when it is not text or a number)."""
    value = doc.get(key, "")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise fail(400, f"{key} must be text")
    return str(value)


@takes(body_object({"exercise": TEXT, "reason": TEXT, "submission": ROW_ID}, ("exercise", "reason")))
async def create_regrade(request: Request) -> Response:
    """POST /regrades: file a regrade request {exercise, reason, submission?} about one of your uploads."""
    principal = who(request)
    if principal.is_instructor:
        raise fail(403, "the instructor answers regrade requests: log in with a student token to file one")
    doc = await read_json(request, MAX_JSON_BYTES)
    job_id = doc.get("submission")
    if job_id is not None and records.row_id(job_id) is None:
        raise fail(400, f"submission must be the id of one of your submissions (a number from 1 to {MAX_ID})")
    try:
        row = regrade.file_request(
            db_store(request), principal.student, _text(doc, "exercise"), _text(doc, "reason"), job_id
        )
    except regrade.RegradeError as exc:
        raise fail(exc.status, str(exc)) from exc
    return JSONResponse(regrade.public(row), status_code=201)


@takes(query={"status": {"enum": ["open", "answered"]}})
async def list_regrades(request: Request) -> Response:
    """GET /regrades: your regrade requests and their answers (the instructor: everyone's, ?status=open)."""
    principal = who(request)
    status = request.query_params.get("status") or None
    if status not in (None, "open", "answered"):
        raise fail(400, "status is open or answered")
    if principal.is_instructor:
        return JSONResponse({"requests": regrade.requests(db_store(request), None, status)})
    rows = regrade.requests(db_store(request), principal.student, status)
    return JSONResponse({"requests": [regrade.public(r) for r in rows]})


@takes(body_object({"reply": TEXT, "score": {"type": ["number", "string"]}}, ("reply",)), path={"id": ROW_ID})
async def answer_regrade(request: Request) -> Response:
    """POST /regrades/{id}/answer (instructor): {reply, score?}; a score is written as an override."""
    principal = instructor(request)
    doc = await read_json(request, MAX_JSON_BYTES)
    try:
        row = regrade.answer(
            db_store(request),
            path_id(request, what="a regrade request id", hint="use the # of GET /api/v1/regrades"),
            _text(doc, "reply"),
            _text(doc, "score"),
            principal.student or "instructor",
        )
    except regrade.RegradeError as exc:
        raise fail(exc.status, str(exc)) from exc
    return JSONResponse(row)


async def list_extensions(request: Request) -> Response:
    """GET /extensions (instructor): every extension, the course file's then those granted here."""
    instructor(request)
    st = state(request)
    return JSONResponse({"extensions": extensions.listing(db_store(request), st.config.course)})


@takes(
    body_object(
        {k: TEXT for k in ("student", "group", "chapter", "due", "reason", "late_until")}
        | {"late_penalty": {"type": ["number", "string"]}},
        ("chapter", "due", "reason"),
    )
)
async def create_extension(request: Request) -> Response:
    """POST /extensions (instructor): {student or group, chapter, due, reason, late_penalty?, late_until?}."""
    principal = instructor(request)
    doc = await read_json(request, MAX_JSON_BYTES)
    st = state(request)
    try:
        row = extensions.grant(
            db_store(request),
            st.config.course,
            _text(doc, "student"),
            _text(doc, "group"),
            _text(doc, "chapter"),
            _text(doc, "due"),
            _text(doc, "reason"),
            principal.student or "instructor",
            _text(doc, "late_penalty"),
            _text(doc, "late_until"),
            via="API",
        )
    except GraderError as exc:
        raise fail(400, str(exc)) from exc
    return JSONResponse(row, status_code=201)


# --- health ------------------------------------------------------------------------------------------


async def get_health(request: Request) -> Response:
    """GET /health: what the workers can grade (the self-test of each kind) and how many uploads are held.

    ``ok`` is true when the last self-test passed every kind; ``selftest`` is
    per kind (``cpu``: NumPy exercises, ``opencl``: kernel exercises) ``ok``
    (null before the first run), ``reason``, ``exercise``, ``checked_at``
    (null without a collector); ``held`` counts the held uploads and their
    exercises; ``unrecorded`` counts the results since the server started that
    could not be recorded (each of those jobs ended ``error``) with the last
    reason (null when none). No token needed: it names no student.
    """
    st = state(request)
    test = st.selftest
    verdicts = test.as_json() if test is not None else None
    held = records.held_jobs(db_store(request))
    collector = st.collector
    return JSONResponse(
        {
            "ok": verdicts is not None and all(v["ok"] for v in verdicts.values()),
            "selftest": verdicts,
            "held": {"uploads": len(held), "exercises": sum(len(records.held_ids(j)) for j in held)},
            "unrecorded": {
                "jobs": collector.unrecorded if collector is not None else 0,
                "last_reason": collector.last_unrecorded if collector is not None else None,
            },
        }
    )


@takes(body_object({}, closed=True))
async def sync_roster(request: Request) -> Response:
    """POST /roster/sync (instructor, body {}): pull the LMS's membership into the roster now; the new tokens.

    ``grade roster sync`` comes here while the server runs (only the server
    writes the database it serves); the dashboard's button does the same sync.
    """
    instructor(request)
    extra = sorted(await read_json(request, MAX_JSON_BYTES))
    if extra:
        raise fail(400, f"the roster sync takes no fields ({extra[0][:40]!r} given): send {{}}")
    result = await lti_services.sync_in_thread(request.app)
    return JSONResponse(result.to_json())


@takes(body_object({"exercises": TEXTS, "dry_run": {"type": "boolean"}}))
async def rescore_now(request: Request) -> Response:
    """POST /rescore (instructor, body {"exercises": [...], "dry_run": false}): grade the stored uploads again.

    A served course is rescored live (grader/term/rescore.py, on the server's own queue and workers: uploads
    go on being taken meanwhile); the answer is the outcome with whose counted score changed, as `grade rescore`
    prints it (``text``). `grade rescore` comes here while the server runs; the dashboard's Term page too.
    """
    instructor(request)
    doc = await read_json(request, MAX_JSON_BYTES)
    selectors, dry_run = doc.get("exercises", []), doc.get("dry_run", False)
    if (
        not isinstance(selectors, list)
        or not all(isinstance(x, str) for x in selectors)
        or not isinstance(dry_run, bool)
    ):
        raise fail(400, 'send {"exercises": [exercise ids or topics], "dry_run": false}')
    try:
        outcome = await rescore_in_thread(request.app, catalogue.resolve(selectors) if selectors else [], dry_run)
    except GraderError as exc:
        raise fail(400, str(exc)) from exc
    return JSONResponse(outcome.to_json())


async def rescore_in_thread(app: Any, exercises: list[str], dry_run: bool = False) -> rescore.Outcome:
    """A rescoring of the served course on a connection of its own in a worker thread (the loop goes on)."""
    st: ServerState = app.state.normgrade

    def run() -> rescore.Outcome:
        with Store.open(st.config.db_path) as store:
            return rescore.rescore(
                store,
                open_queue(st.config.queue_url),
                store.effective_course(st.config.course),
                exercises,
                st.grader_version,
                dry_run,
                timeout=float(st.config.job_timeout),
            )

    return await asyncio.to_thread(run)


# --- the API index, errors, the application -----------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]
API: list[tuple[str, str, Handler, str]] = [  # (method, path, handler, who may call it)
    ("GET", "/health", get_health, "anyone"),
    ("GET", "/me", get_me, "any token"),
    ("POST", "/submissions", create_submission, "student"),
    ("GET", "/submissions", list_submissions, "student"),
    ("GET", "/submissions/{id}", get_submission, "owner or instructor"),
    ("GET", "/progress", get_progress, "student"),
    ("GET", "/quizzes", list_quizzes, "student"),
    ("GET", "/quizzes/{chapter}", get_quiz, "any token"),
    ("POST", "/quizzes/{chapter}/answers", answer_quiz, "student"),
    ("GET", "/students", list_students, "instructor"),
    ("GET", "/students/{student}/submissions", list_submissions, "instructor"),
    ("GET", "/students/{student}/progress", get_progress, "instructor"),
    ("GET", "/students/{student}/quizzes", list_quizzes, "instructor"),
    ("POST", "/regrades", create_regrade, "student"),
    ("GET", "/regrades", list_regrades, "any token"),
    ("POST", "/regrades/{id}/answer", answer_regrade, "instructor"),
    ("GET", "/extensions", list_extensions, "instructor"),
    ("POST", "/extensions", create_extension, "instructor"),
    ("POST", "/roster/sync", sync_roster, "instructor"),
    ("POST", "/rescore", rescore_now, "instructor"),
]


async def api_index(request: Request) -> Response:
    """GET /api/v1/: every endpoint with its method, who may call it and its summary (first docstring line)."""
    return JSONResponse(
        {
            "endpoints": [
                {"method": m, "path": API_PREFIX + p, "who": w, "summary": (h.__doc__ or "").strip().splitlines()[0]}
                for m, p, h, w in api_table(request)
            ]
        }
    )


def api_table(request: Request) -> list[tuple[str, str, Any, str]]:
    """The endpoints the application serves, with who may call each (grader/server/web.py API_TABLE; this
    module's API alone where an application was built without it)."""
    return getattr(request.app.state, "api_table", API)


async def server_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: a JSON 500 (503 when the database is busy) with one line, never a traceback."""
    headers = security_headers()  # (this handler answers outside the middleware)
    if isinstance(exc, (StoreError, sqlite3.OperationalError)):
        return JSONResponse(
            {"error": f"the course database is busy ({' '.join(str(exc).split())[:200]}): try again"},
            status_code=503,
            headers={"Retry-After": "5", **headers},
        )
    return JSONResponse(
        {"error": f"the server failed ({type(exc).__name__}): try again later, and tell your instructor if it goes on"},
        status_code=500,
        headers=headers,
    )
