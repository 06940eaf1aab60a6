"""The JSON API's ground (grader/server/app.py): the server's config and per-application state, the limits on a
request, and the helpers every handler uses (errors, who is calling, reading a bounded body, the clock)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from grader import quiz as quiz_lib
from grader.student.course import DEFAULT_COURSE, Course
from grader.server import auth
from grader.queue import records
from grader.server.text_input import refuse_unsafe_text
from grader.server.auth import Principal
from grader.queue.collector import Collector
from grader.queue.jobs import DEFAULT_LEASE_TIMEOUT_S
from grader.queue.selftest import RETRY_FIRST_S, SelfTest
from grader.student.store import Store, students

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
