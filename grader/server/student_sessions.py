"""The student's browser sessions: the table, and the launch token a student's page shows once.

Sessions are the dashboard's kind (``instructor.Sessions``), in a table of
their own per server process: the cookie (:data:`COOKIE`, Path=/student)
holds a random id, the server keeps sha256(id) -> the token's hash and the
expiry, so a revoked token or a logout ends it. An LTI launch
(grader/server/lti/web.py ``student_landing``) and the login form
(grader/server/student_pages.py) both open one here; each sets the cookie
its own way (the launch's cookie must work inside the LMS's frame).
"""

from __future__ import annotations

import hashlib

from starlette.requests import Request

from grader.server import auth, instructor

COOKIE = "normgrade_student"
MAX_SESSIONS = 20_000  # student sessions kept at once (the oldest goes first): a class, several devices each
MAX_AGE_S = instructor.SESSION_HOURS * 3600


def sessions(request: Request) -> instructor.Sessions:
    """This server process's table of student sessions (made at the first use; apart from the dashboard's)."""
    state = request.app.state
    if not hasattr(state, "student_sessions"):
        state.student_sessions = instructor.Sessions(MAX_SESSIONS)
        state.student_tokens_to_show = {}
    return state.student_sessions


def session_key(cookie: str) -> str:
    """How the table of tokens to show keys a session: sha256 of its cookie (as the sessions' own table)."""
    return hashlib.sha256(cookie.encode("utf-8", "replace")).hexdigest()


def tokens_to_show(request: Request) -> dict[str, str]:
    """sha256(session id) -> the token an LTI launch made for it, until the student's page has shown it once."""
    sessions(request)
    return request.app.state.student_tokens_to_show


def open_session(request: Request, token: str, show_token: bool = False) -> str:
    """A new session for the token's student; the cookie's value. ``show_token`` (an LTI launch, which made the
    token): the student's page shows it once, with the ``grade login`` command."""
    table = sessions(request)
    value = table.open(auth.hash_token(token))
    if show_token:
        shown = tokens_to_show(request)
        for key in [k for k in shown if k not in table.table]:  # sessions gone before their page was opened
            del shown[key]
        shown[session_key(value)] = token
    return value
