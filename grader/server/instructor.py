"""The instructor's dashboard on the course server: pages under ``/instructor/``, its login and its exports.

Who may see it. Every page and export needs the instructor: either an
``Authorization: Bearer <instructor token>`` header (scripts, API clients), or
the browser session that ``/instructor/login`` sets after checking the
instructor token typed into its form. A student's token gets 403 on every
page; no credentials at all get a redirect to the login form (pages) or 401
(exports).

The session lives on the server. The cookie ``normgrade_session`` (HttpOnly,
SameSite=Strict, Path=/instructor, Secure when served over https) holds a
random session id (256 bits); the server keeps, in this process's memory,
``sha256(id) -> (sha256 of the instructor token, expiry)`` (:class:`Sessions`).
A session is valid while it is in that table, unexpired (SESSION_HOURS) and
its instructor token not revoked. Logging out deletes it from the table, so a
copy of the cookie is dead from then on; a restart logs everyone out. At most
MAX_SESSIONS are kept (the oldest goes first). Forms that change something
(an override, logging out) carry a CSRF field, the HMAC of the session
cookie under a per-process key, checked in constant time; SameSite=Strict
already keeps the cookie off cross-site requests.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from grader.term import class_report, regrade
from grader.server import auth
from grader.queue import records, selftest
from grader.server.headers import as_dict as security_headers
from grader.server.text_input import refuse_unsafe_text
from grader.server.dashboard import Filters, exercise_detail, student_detail
from grader.server.dashboard_html import Links, items_by_chapter, overview_context, render
from grader.term.overrides import OverrideError, record_override
from grader.student.store import Store, tokens

COOKIE = "normgrade_session"
SESSION_HOURS = 12
MAX_SESSIONS = 1000
MAX_FORM_BYTES = 16 * 1024
LOG = logging.getLogger("normgrade.dashboard")


# --- sessions -------------------------------------------------------------------------------------


def _key(request: Request) -> bytes:
    """This server process's session key (made at the first use)."""
    state = request.app.state
    if not hasattr(state, "dashboard_key"):
        state.dashboard_key = secrets.token_bytes(32)
    return state.dashboard_key


def _mac(key: bytes, message: str) -> str:
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def _instructor_hashes(store: Store) -> list[str]:
    """The stored hashes of the instructor tokens not revoked."""
    return tokens.live_hashes(store.db, auth.INSTRUCTOR)


class Sessions:
    """The server's table of dashboard sessions: sha256(session id) -> (instructor token hash, expiry)."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.table: dict[str, tuple[str, float]] = {}
        self.limit = limit  # sessions kept at most (the oldest goes first)

    @staticmethod
    def _digest(value: str) -> str:
        return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()

    def open(self, token_hash: str, now: float | None = None) -> str:
        """A new session for the instructor token with this stored hash; its cookie value (the session id)."""
        now = time.time() if now is None else now
        for digest in [d for d, (_, expiry) in self.table.items() if expiry < now]:
            del self.table[digest]
        while len(self.table) >= self.limit:
            del self.table[next(iter(self.table))]  # the oldest
        value = secrets.token_urlsafe(32)
        self.table[self._digest(value)] = (token_hash, now + SESSION_HOURS * 3600)
        return value

    def token_hash(self, value: str | None, now: float | None = None) -> str | None:
        """The instructor token hash of a live session, or None (unknown, ended, expired)."""
        if not value or len(value) > 200:
            return None
        entry = self.table.get(self._digest(value))
        if entry is None or entry[1] < (time.time() if now is None else now):
            return None
        return entry[0]

    def close(self, value: str | None) -> None:
        """End a session (logout): its cookie stops working everywhere."""
        if value:
            self.table.pop(self._digest(value), None)


def sessions(request: Request) -> Sessions:
    """This server process's session table (made at the first use)."""
    state = request.app.state
    if not hasattr(state, "dashboard_sessions"):
        state.dashboard_sessions = Sessions()
    return state.dashboard_sessions


def new_session(request: Request, token_hash: str, now: float | None = None) -> str:
    """The cookie value of a new server-side session for the instructor token with this stored hash."""
    return sessions(request).open(token_hash, now)


def session_valid(request: Request, store: Store, value: str | None) -> bool:
    """Whether a cookie value is a live session of a current (not revoked) instructor token."""
    token_hash = sessions(request).token_hash(value)
    return token_hash is not None and any(hmac.compare_digest(token_hash, h) for h in _instructor_hashes(store))


def csrf_token(request: Request) -> str:
    """The CSRF field of the forms: tied to the session cookie ("" without one)."""
    return csrf_of(request, request.cookies.get(COOKIE, ""))


def csrf_of(request: Request, cookie: str) -> str:
    """The CSRF field tied to a cookie's value: its HMAC under this process's key ("" without a cookie).
    The dashboard's forms and the student's pages (grader/server/student_pages.py) use it alike."""
    return _mac(_key(request), f"csrf|{cookie}") if cookie else ""


class Denied(Exception):
    """The request may not see the dashboard: ``response`` says why (403, 401 or a redirect to log in)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def store_of(request: Request) -> Store:
    store = request.app.state.normgrade.store
    assert store is not None, "the application has not started"
    return store


def require_instructor(request: Request, page: bool = True) -> str:
    """'bearer' or 'session' when the request is the instructor's; raises Denied otherwise."""
    store = store_of(request)
    header = request.headers.get("authorization")
    if header is not None:
        principal = auth.lookup(store.db, auth.bearer(header))
        if principal is None:
            raise Denied(
                message(
                    request,
                    401,
                    "The token is not valid",
                    "The token sent is not valid (mistyped, revoked or replaced): use the current instructor token.",
                    error=True,
                )
            )
        if not principal.is_instructor:
            raise Denied(
                message(
                    request,
                    403,
                    "For the instructor only",
                    "This page is for the instructor only: a student's token cannot open it.",
                    error=True,
                )
            )
        return "bearer"
    if session_valid(request, store, request.cookies.get(COOKIE)):
        return "session"
    if not page:
        raise Denied(
            message(
                request,
                401,
                "Log in first",
                "Log in at /instructor/login, or send the instructor token as a Bearer header.",
                error=True,
            )
        )
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    raise Denied(RedirectResponse("/instructor/login?next=" + quote(target, safe=""), status_code=303))


async def read_urlencoded(request: Request, limit: int) -> dict[str, list[str]] | None:
    """An urlencoded form body, every value of each field; None as soon as it passes ``limit`` bytes (read no
    further); 400 for text that cannot be taken (grader/server/text_input.py). The dashboard's, the student's
    pages' and the LTI launch's forms are read here."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    refuse_unsafe_text(fields, "the form")
    return fields


async def read_form(request: Request) -> dict[str, str]:
    """A small urlencoded form (at most MAX_FORM_BYTES), first value of each field."""
    fields = await read_urlencoded(request, MAX_FORM_BYTES)
    if fields is None:
        raise Denied(message(request, 413, "Too large", "The form is too large.", error=True))
    return {k: v[0] for k, v in fields.items()}


def check_csrf(request: Request, form: dict[str, str], mode: str) -> None:
    """A cookie session's form must carry its CSRF field (a Bearer request carries no cookie to abuse)."""
    if mode == "bearer":
        return
    expected = csrf_token(request)
    if not expected or not hmac.compare_digest(form.get("csrf", ""), expected):
        raise Denied(
            message(
                request,
                403,
                "Form expired",
                "The form is from another session: reload the page and submit it again.",
                error=True,
            )
        )


# --- responses ------------------------------------------------------------------------------------


def message(
    request: Request,
    status: int,
    heading: str,
    text: str,
    error: bool = False,
    login: bool = False,
    next_url: str = "/instructor/",
) -> HTMLResponse:
    """A short page: a heading, one line, and the login form when asked."""
    st = request.app.state.normgrade
    page = render(
        "dash_message.html.j2",
        title=heading,
        course_name=st.config.course.name,
        links=None,
        with_script=False,
        heading=heading,
        message=text,
        error=error,
        login=login,
        next=next_url,
        hours=SESSION_HOURS,
        back="" if login else "/instructor/",
        back_text="Back to the dashboard",
    )
    return HTMLResponse(page, status_code=status, headers={"Cache-Control": "no-store", **security_headers(page)})


def class_now(request: Request, **build: Any) -> class_report.ClassReport:
    """The class report as the server counts it (its course, its quizzes)."""
    st = request.app.state.normgrade
    return class_report.build(store_of(request), quizzes=st.quizzes, course=st.config.course, **build)


def grading_banner(request: Request) -> list[str]:
    """The banner of every dashboard page: the kinds of exercise not being graded, the uploads held
    (grader/queue/selftest.py ``banner``); [] when all is well."""
    st = request.app.state.normgrade
    return selftest.banner(st.selftest, records.held_jobs(store_of(request)))


def page(request: Request, title: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A dashboard page (dash_page.html.j2): the shared context, then the page's own."""
    st = request.app.state.normgrade
    values: dict[str, Any] = {
        "title": f"{title} - {st.config.course.name}",
        "course_name": st.config.course.name,
        "links": Links(offline=False),
        "csrf": csrf_token(request),
        "heading": "h1",
        "open_first": True,
        "notice": "",
        "notice_error": False,
        "with_script": context.get("page") == "overview",
        "banner": grading_banner(request),
        "open_regrades": len(regrade.requests(store_of(request), status="open")),  # the menu and the overview
    }
    values.update(context)
    html = render("dash_page.html.j2", **values)
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store", **security_headers(html)})


def guarded(handler: Any, page_route: bool = True) -> Any:
    """The handler, run only for the instructor (Denied becomes its response)."""

    async def run(request: Request) -> Response:
        try:
            mode = require_instructor(request, page_route)
            return await handler(request, mode)
        except Denied as denied:
            return denied.response

    run.__doc__ = handler.__doc__
    return run


# --- login ----------------------------------------------------------------------------------------


def safe_next(value: str) -> str:
    """Only a path of the dashboard may follow a login (no open redirect)."""
    return value if value.startswith("/instructor/") and not value.startswith("//") else "/instructor/"


async def login_form(request: Request) -> Response:
    """GET /instructor/login: the form asking for the instructor token."""
    return message(
        request,
        200,
        "Instructor login",
        "",
        login=True,
        next_url=safe_next(request.query_params.get("next", "/instructor/")),
    )


async def login(request: Request) -> Response:
    """POST /instructor/login: check the instructor token, set the session cookie, go on."""
    try:
        form = await read_form(request)
    except Denied as denied:
        return denied.response
    store = store_of(request)
    next_url = safe_next(form.get("next", "/instructor/"))
    principal = auth.lookup(store.db, form.get("token", "").strip())
    if principal is None:
        return message(
            request,
            401,
            "Instructor login",
            "That token is not valid (mistyped, revoked or replaced): paste the instructor token from `grade roster`.",
            error=True,
            login=True,
            next_url=next_url,
        )
    if not principal.is_instructor:
        return message(
            request,
            403,
            "Instructor login",
            "That is a student's token: the dashboard needs the instructor token.",
            error=True,
            login=True,
            next_url=next_url,
        )
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(
        COOKIE,
        new_session(request, auth.hash_token(form["token"].strip())),
        max_age=SESSION_HOURS * 3600,
        path="/instructor",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request, mode: str) -> Response:
    """POST /instructor/logout: forget the session cookie."""
    check_csrf(request, await read_form(request), mode)
    sessions(request).close(request.cookies.get(COOKIE))
    response = RedirectResponse("/instructor/login", status_code=303)
    response.delete_cookie(COOKIE, path="/instructor")
    return response


# --- pages ----------------------------------------------------------------------------------------


async def overview(request: Request, mode: str) -> Response:
    """GET /instructor/: the class grid (sortable, filterable; each cell names the mistake of the latest upload),
    quiz completion, class charts."""
    report = class_now(request, with_items=False)
    filters = Filters.from_query(request.query_params, [g.name for g in report.groups])
    now = datetime.now(timezone.utc)
    return page(request, "Class overview", page="overview", **overview_context(report, filters, now))


async def student_page(request: Request, mode: str) -> Response:
    """GET /instructor/students/{student}: history, reports, quiz answers, overrides."""
    name = request.path_params["student"]
    report = class_now(request, with_items=False, mistakes_of=(name, None))
    detail = student_detail(store_of(request), report, name)
    if detail is None:
        return message(request, 404, "No such student", f"There is no student '{name}' in this course.", error=True)
    notice = request.query_params.get("saved", "")
    return page(
        request,
        detail.row.label,
        page="student",
        d=detail,
        anchor="student",
        report=report,
        notice="Override saved." if notice else "",
    )


async def exercise_page(request: Request, mode: str) -> Response:
    """GET /instructor/exercises/{exercise}: pass rate over time, distribution, mistakes, unnamed failures."""
    name = request.path_params["exercise"]
    report = class_now(request, with_items=False, mistakes_of=(None, name))
    detail = exercise_detail(store_of(request), report, name)
    if detail is None:
        return message(request, 404, "No such exercise", f"'{name}' is not an exercise of this course.", error=True)
    return page(request, name, page="exercise", d=detail, anchor="exercise", report=report)


async def items_page(request: Request, mode: str) -> Response:
    """GET /instructor/quizzes: item analysis (difficulty, discrimination, most chosen wrong answer)."""
    st = request.app.state.normgrade
    items = class_report.item_stats(store_of(request).quiz_answer_rows(), st.quizzes)
    return page(
        request,
        "Quiz item analysis",
        page="items",
        chapters=[(q.chapter, q.title) for q in st.quizzes],
        items_by_chapter=items_by_chapter(items),
    )


async def held_page(request: Request, mode: str) -> Response:
    """GET /instructor/held: the self-test of each kind and the uploads held for the grader's machine."""
    st = request.app.state.normgrade
    store = store_of(request)
    held = [{**job, "exercises": records.held_ids(job)} for job in records.held_jobs(store)]
    verdicts = st.selftest.as_json() if st.selftest is not None else {}
    kinds = [(selftest.sentence(selftest.LABELS[kind]), v) for kind, v in verdicts.items()]
    return page(request, "Held uploads", page="held", held=held, kinds=kinds)


async def save_override(request: Request, mode: str) -> Response:
    """POST /instructor/overrides: an override with its required comment (logged), then back to the student."""
    form = await read_form(request)
    check_csrf(request, form, mode)
    student = form.get("student", "")
    report = class_now(request, with_items=False, with_mistakes=False)
    try:
        entry = record_override(
            store_of(request), report, student, form.get("exercise", ""), form.get("score", ""), form.get("comment", "")
        )
    except OverrideError as exc:
        detail = student_detail(store_of(request), report, student)
        if detail is None:
            return message(request, 400, "Override not saved", str(exc), error=True)
        return page(
            request,
            detail.row.label,
            status=400,
            page="student",
            d=detail,
            anchor="student",
            report=report,
            notice=f"Override not saved: {exc}",
            notice_error=True,
        )
    LOG.warning(
        "score override: %r %r -> %s (%r)",
        entry["student"],
        entry["exercise"],
        "withdrawn" if entry["score"] is None else entry["score"],
        entry["comment"],
    )
    return RedirectResponse("/instructor/students/" + quote(student, safe="") + "?saved=1#override", status_code=303)


# --- exports --------------------------------------------------------------------------------------


def _download(text: str, media: str, filename: str) -> Response:
    return Response(
        text,
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"},
    )


async def export(request: Request, mode: str) -> Response:
    """GET /instructor/export/{canvas.csv,moodle.csv,class.json}: the gradebook imports and the JSON."""
    kind = request.path_params["kind"]
    if kind not in ("canvas.csv", "moodle.csv", "class.json"):
        return JSONResponse({"error": f"no export '{kind}': use canvas.csv, moodle.csv or class.json"}, 404)
    report = class_now(request, with_mistakes=kind == "class.json", with_items=kind == "class.json")
    if kind == "canvas.csv":
        return _download(class_report.format_canvas(report), "text/csv; charset=utf-8", "grades-canvas.csv")
    if kind == "moodle.csv":
        return _download(class_report.format_moodle(report), "text/csv; charset=utf-8", "grades-moodle.csv")
    return _download(class_report.format_json(report, indent=None), "application/json", "class.json")


# the dashboard's routes: (method, path, handler, a page (True) or an export (False))
PAGES: list[tuple[str, str, Any, bool]] = [
    ("GET", "/instructor/", overview, True),
    ("GET", "/instructor/students/{student:path}", student_page, True),
    ("GET", "/instructor/exercises/{exercise}", exercise_page, True),
    ("GET", "/instructor/quizzes", items_page, True),
    ("GET", "/instructor/held", held_page, True),
    ("POST", "/instructor/overrides", save_override, True),
    ("POST", "/instructor/logout", logout, True),
    ("GET", "/instructor/export/{kind}", export, False),
]


def routes() -> list[BaseRoute]:
    """The login routes, then every dashboard route behind :func:`require_instructor`."""
    out: list[BaseRoute] = [
        Route("/instructor/login", login_form, methods=["GET"]),
        Route("/instructor/login", login, methods=["POST"]),
        Route("/instructor", lambda request: RedirectResponse("/instructor/", status_code=307), methods=["GET"]),
    ]
    out += [Route(path, guarded(handler, is_page), methods=[method]) for method, path, handler, is_page in PAGES]
    return out
