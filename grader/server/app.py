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

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grader.student.errors import StoreError
from grader.server.headers import as_dict as security_headers

# The handlers and helpers live by concern in api_base.py (config, state, helpers), api_jobs.py (submissions,
# progress) and api_course.py (quizzes, regrades, extensions, health, roster, rescore); re-exported here, where
# the other pages and the tests reach them as ``app.<name>``.
from grader.server.api_base import (
    API_PREFIX,
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    MAX_MESSAGE,
    MAX_WAIT_S,
    ServerConfig,
    ServerState,
    db_store,
    fail,
    grader_version,
    instructor,
    now_utc,
    path_id,
    read_json,
    state,
    too_deep,
    who,
)
from grader.server.api_jobs import (
    closed_chapters,
    create_submission,
    for_student,
    get_me,
    get_progress,
    get_submission,
    job_json,
    list_students,
    list_submissions,
    own_progress,
    phase,
    where,
)
from grader.server.api_course import (
    answer_quiz,
    answer_regrade,
    closed_explanation,
    create_extension,
    create_regrade,
    get_health,
    get_quiz,
    judge_and_record,
    list_extensions,
    list_quizzes,
    list_regrades,
    quiz_or_404,
    reference_or_503,
    rescore_in_thread,
    rescore_now,
    sync_roster,
)

__all__ = [
    "API_PREFIX",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MESSAGE",
    "MAX_WAIT_S",
    "ServerConfig",
    "ServerState",
    "closed_chapters",
    "closed_explanation",
    "db_store",
    "fail",
    "for_student",
    "grader_version",
    "instructor",
    "job_json",
    "judge_and_record",
    "now_utc",
    "own_progress",
    "path_id",
    "phase",
    "quiz_or_404",
    "read_json",
    "reference_or_503",
    "rescore_in_thread",
    "state",
    "too_deep",
    "where",
    "who",
    "API",
    "api_index",
    "api_table",
    "server_error",
]

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
