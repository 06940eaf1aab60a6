"""The student's own pages on the course server, under ``/student/``.

What they show (the data: grader/server/student_view.py; the templates ``student_*.html.j2``):

- ``/student/``: every chapter in the course's order with its counted score, due date and quiz standing,
  the student's deadlines (their extensions included), their latest uploads and regrade requests, and how
  to hand in from their computer (after an LTI launch: the launch's token and the ``grade login`` command,
  shown once);
- ``/student/chapters/{chapter}``: one chapter: each exercise's counted score with its late note and the
  instructor's override, the student's own dates for it, the quiz standing, the uploads holding its exercises;
- ``/student/submissions/{id}``: "Submission N": where it is while it waits (queued with the uploads ahead
  of it, running, retried after what, not graded and why), then the same report and pictures as ``grade
  submit --html`` prints for that upload (``report_html.format_html``, from the same document the API
  gives: exam mode applied), its late notes, and the regrade form with the instructor's answers;
- ``/student/quizzes/{chapter}``: the chapter's questions posed for this student (their numbers, their
  choice order), answered in the browser and judged by the API's own code (``app.judge_and_record``: the
  same judge, attempts, "Not this one." and explanations); a formula or number shows, as it is typed, how
  it is read (``POST .../preview``: ``grader.quiz.judging.preview``, never a verdict); ``?section=<id>`` (from a
  checkpoint of the text) adds a link back to that section;
- ``/student/text/``, ``/student/text/{chapter}.html``: the course text (``text/*.md``, grader/course/text.py),
  each section's checkpoint listing its questions (posed for this student) linked to their forms on the quiz
  page; ``/student/text/{chapter}/{section}`` is a section's address (a redirect to its anchor; 404 when there is
  none); the maths typed by KaTeX from ``/student/text/assets/`` (the npm package's files, served by this server:
  the page's CSP allows scripts, styles and fonts from 'self'). A report's "Read §chapter.section" links there.

Who may open them: a student, by the session an LTI launch made (grader/server/lti.py ``student_landing``),
by logging in at ``/student/login`` with their token, or with the token as ``Authorization: Bearer``
(scripts). The instructor's token gets 403 (the dashboard is theirs); nothing at all, a redirect to the
login. A student reaches only their own rows, by the API's rule: the student comes from the token or the
session, never from the request, and another student's submission is 404.

Sessions are the dashboard's kind (grader/server/student_sessions.py, a table of their own): the cookie
``normgrade_student`` (Path=/student, HttpOnly) holds a random id, the server keeps sha256(id) -> the
token's hash and the expiry, so a revoked token or a logout ends it everywhere. Over https the cookie is
``SameSite=None; Secure; Partitioned``, so that it works when the LMS shows the page in its frame (a
cross-site frame never gets a Lax or Strict cookie); over plain http (a test on loopback) it is Strict.
Every form carries a CSRF field, the HMAC of its cookie (the login form's of a cookie it sets first), and
every answer the dashboard's security headers (grader/server/headers.py); a page with the preview script
names it by its hash and may ``fetch`` only from this server (``connect-src 'self'``).
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from grader import quiz as quiz_lib
from grader.course import text as course_text
from grader.quiz import graded, judging
from grader.server import app as api
from grader.server import auth, instructor, lti, practice_api
from grader.queue import records
from grader.server.dashboard_html import render
from grader.server.headers import as_dict as security_headers, with_own_files
from grader.server.student_sessions import COOKIE, MAX_AGE_S, open_session, session_key, sessions, tokens_to_show
from grader.server.student_view import (
    ChapterView,
    SubmissionView,
    chapter_plan,
    chapter_url,
    chapter_views,
    quiz_url,
    submission_view,
)
from grader.student.coursetext import Section
from grader.student.feedback.report_html import format_html
from grader.student.quiz.quiz_text import answer_hint
from grader.term import regrade
from grader.term import standing as term_standing

LOGIN_COOKIE = "normgrade_student_login"  # set by the login form: its CSRF field is tied to it
MAX_FORM_BYTES = 16 * 1024
LATEST_UPLOADS = 10  # on /student/; a chapter's page lists its latest CHAPTER_UPLOADS
CHAPTER_UPLOADS = 20
CONNECT_SELF = "; connect-src 'self'"  # the preview script's fetch goes to this server alone
TEXT_URL = "/student/text/"  # the course text's pages: {TEXT_URL}{chapter}.html#{section}


class PageError(Exception):
    """A request the student's pages answer with a short page: the status, a heading and one line."""

    def __init__(self, status: int, heading: str, text: str) -> None:
        super().__init__(text)
        self.status, self.heading, self.text = status, heading, text


class Redirect(Exception):
    """A request answered with a redirect (to the login form)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


@dataclass(frozen=True)
class Visitor:
    """The student a request is from, and how it came: "bearer" (a token header) or "session" (the cookie)."""

    student: str
    mode: str
    cookie: str = ""

    @property
    def principal(self) -> auth.Principal:
        return auth.Principal(self.student, "student")


# --- sessions ---------------------------------------------------------------------------------------


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    """A cookie of the student's pages: Path=/student, HttpOnly; over https SameSite=None, Secure and
    Partitioned (it must reach the page inside the LMS's frame), over http SameSite=Strict: the launch's
    cookie rule (``lti.set_launch_cookie``), which sets the session cookie of a student's launch too."""
    lti.set_launch_cookie(request, response, name, value, max_age, "/student", over_http="strict")


def start_session(request: Request, response: Response, token: str) -> None:
    """Log the browser in as the token's student (the login form): a new session, its cookie on ``response``."""
    set_cookie(request, response, COOKIE, open_session(request, token), MAX_AGE_S)


def visitor(request: Request) -> Visitor:
    """Who the request is from; PageError (401, 403) or Redirect (to the login) when not a student."""
    store = api.db_store(request)
    header = request.headers.get("authorization")
    if header is not None:
        principal = auth.lookup(store.db, auth.bearer(header))
        if principal is None:
            raise PageError(
                401,
                "The token is not valid",
                "The token sent is not valid (mistyped, revoked or replaced): use your current token.",
            )
        return _student(principal, "bearer")
    cookie = request.cookies.get(COOKIE, "")
    token_hash = sessions(request).token_hash(cookie)
    principal = auth.lookup_hash(store.db, token_hash) if token_hash else None
    if principal is not None:
        return _student(principal, "session", cookie)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    raise Redirect("/student/login?next=" + quote(target, safe=""))


def _student(principal: auth.Principal, mode: str, cookie: str = "") -> Visitor:
    if principal.is_instructor:
        raise PageError(
            403,
            "For students",
            "These are a student's own pages: the instructor's token opens the dashboard at /instructor/.",
        )
    return Visitor(principal.student, mode, cookie)


# --- forms ------------------------------------------------------------------------------------------


async def read_form(request: Request) -> dict[str, list[str]]:
    """A small urlencoded form (at most MAX_FORM_BYTES): every value of each field."""
    fields = await instructor.read_urlencoded(request, MAX_FORM_BYTES)
    if fields is None:
        raise PageError(413, "Too large", f"The form is larger than {MAX_FORM_BYTES} bytes: shorten it.")
    return fields


def first(form: dict[str, list[str]], name: str) -> str:
    return form.get(name, [""])[0]


def csrf_field(request: Request, who: Visitor) -> str:
    """The CSRF field of this visitor's forms ("" for a Bearer request: it has no cookie to abuse)."""
    return instructor.csrf_of(request, who.cookie)


def check_csrf(request: Request, form: dict[str, list[str]], who: Visitor) -> None:
    """A session's form must carry its CSRF field (403 otherwise); a Bearer request needs none."""
    if who.mode == "bearer":
        return
    expected = csrf_field(request, who)
    if not expected or not hmac.compare_digest(first(form, "csrf"), expected):
        raise PageError(403, "Form expired", "The form is from another session: reload the page and send it again.")


# --- responses --------------------------------------------------------------------------------------


def html_page(
    request: Request, template: str, status: int = 200, who: Visitor | None = None, **context: Any
) -> HTMLResponse:
    """A student page: the shared context (course, student, CSRF field), the page's own, the security
    headers (its inline script allowed by hash, fetching from this server only), never cached."""
    st = api.state(request)
    values: dict[str, Any] = {
        "course_name": st.config.course.name,
        "student": who.student if who else "",
        "csrf": csrf_field(request, who) if who else "",
        "bearer": who is not None and who.mode == "bearer",
        "notice": "",
        "notice_error": False,
        "title": "",
    }
    values.update(context)
    values["title"] = f"{values['title']} - {st.config.course.name}" if values["title"] else st.config.course.name
    html = render(template, **values)
    headers = security_headers(html)
    if "<script>" in html:
        headers["Content-Security-Policy"] += CONNECT_SELF
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store", **headers})


def message(request: Request, status: int, heading: str, text: str, who: Visitor | None = None) -> HTMLResponse:
    return html_page(
        request,
        "student_message.html.j2",
        status,
        who,
        title=heading,
        heading=heading,
        message=text,
        error=status >= 400,
        login=False,
    )


Handler = Callable[[Request, Visitor], Awaitable[Response]]


def for_students(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The handler, run for a student only; PageError and the API's HTTPException become a short page."""

    async def run(request: Request) -> Response:
        who: Visitor | None = None
        try:
            who = visitor(request)
            return await handler(request, who)
        except Redirect as redirect:
            return RedirectResponse(redirect.url, status_code=303)
        except PageError as exc:
            return message(request, exc.status, exc.heading, exc.text, who)
        except HTTPException as exc:  # the API helpers' refusals (app.fail): the same line, as a page
            return message(
                request,
                exc.status_code,
                "Not found" if exc.status_code == 404 else "Not possible",
                str(exc.detail),
                who,
            )

    run.__doc__ = handler.__doc__
    return run


# --- login ------------------------------------------------------------------------------------------


def safe_next(value: str) -> str:
    """Only a path of the student's pages may follow a login (no open redirect)."""
    return value if value.startswith("/student/") and not value.startswith("//") else "/student/"


def login_page(request: Request, status: int, text: str = "", next_url: str = "/student/") -> HTMLResponse:
    """The login form, with a fresh login cookie whose HMAC is the form's CSRF field."""
    value = secrets.token_urlsafe(24)
    response = html_page(
        request,
        "student_message.html.j2",
        status,
        None,
        title="Log in",
        heading="Log in",
        message=text,
        error=bool(text),
        login=True,
        next=next_url,
        login_csrf=instructor.csrf_of(request, value),
        hours=instructor.SESSION_HOURS,
    )
    set_cookie(request, response, LOGIN_COOKIE, value, 3600)
    return response


async def login_form(request: Request) -> Response:
    """GET /student/login: the form asking for the student's token."""
    return login_page(request, 200, next_url=safe_next(request.query_params.get("next", "/student/")))


async def login(request: Request) -> Response:
    """POST /student/login: check the token (a student's), start a session, go on to the page asked for."""
    try:
        form = await read_form(request)
    except PageError as exc:
        return message(request, exc.status, exc.heading, exc.text)
    next_url = safe_next(first(form, "next"))
    expected = instructor.csrf_of(request, request.cookies.get(LOGIN_COOKIE, ""))
    if not expected or not hmac.compare_digest(first(form, "csrf"), expected):
        return login_page(request, 403, "The form expired (or cookies are off): log in again.", next_url)
    token = first(form, "token").strip()
    principal = auth.lookup(api.db_store(request).db, token)
    if principal is None:
        return login_page(
            request,
            401,
            "That token is not valid (mistyped, revoked or replaced): paste the "
            "token your instructor gave you, or open the course from the LMS.",
            next_url,
        )
    if principal.is_instructor:
        return login_page(request, 403, "That is the instructor's token: the dashboard is at /instructor/.", next_url)
    response = RedirectResponse(next_url, status_code=303)
    start_session(request, response, token)
    set_cookie(request, response, LOGIN_COOKIE, "", 0)  # deleted with its own attributes (partitioned too)
    return response


async def logout(request: Request, who: Visitor) -> Response:
    """POST /student/logout: end the session (every copy of its cookie stops working)."""
    check_csrf(request, await read_form(request), who)
    sessions(request).close(who.cookie)
    response = RedirectResponse("/student/login", status_code=303)
    set_cookie(request, response, COOKIE, "", 0)
    return response


# --- the pages --------------------------------------------------------------------------------------


def _chapters(request: Request, who: Visitor) -> list[ChapterView]:
    st = api.state(request)
    store = api.db_store(request)
    answers = store.quiz_attempts(who.student)
    standings = {q.chapter: quiz_lib.chapter_progress(q, answers) for q in st.quizzes}
    course = store.effective_course(st.config.course)
    views = chapter_views(chapter_plan(course, st.quizzes), api.own_progress(st, store, who.student), standings)
    states = {s.chapter: s.message() for s in term_standing.chapter_states(course, api.now_utc(), who.student)}
    for view in views:
        view.state = states.get(view.name, "")
    return views


def _submissions(
    request: Request, who: Visitor, limit: int, exercises: set[str] | None = None
) -> tuple[list[SubmissionView], int]:
    """The student's latest ``limit`` uploads (of those grading one of ``exercises``, when given), newest first,
    each as the API shows it to them; and how many there are in all (of the latest records.jobs_of gives)."""
    store = api.db_store(request)
    config = api.state(request).config
    jobs = records.jobs_of(store, who.student)
    if exercises is not None:  # chosen on the row, before any report is rebuilt
        jobs = [j for j in jobs if exercises & set(records.exercise_ids(j))]
    return [
        submission_view(api.for_student(request, who.principal, api.job_json(store, job, config)))
        for job in jobs[:limit]
    ], len(jobs)


def _grade_login(request: Request, who: Visitor) -> str:
    """The ``grade login`` command with the token an LTI launch made, the first time the page is shown."""
    if who.mode != "session":
        return ""
    token = tokens_to_show(request).pop(session_key(who.cookie), "")
    if not token:
        return ""
    server = api.state(request).config.course.server_url or lti.tool_url(request)
    return f".venv/bin/grade login {server} --token {token}"


async def home(request: Request, who: Visitor) -> Response:
    """GET /student/: the chapters in the course's order, deadlines, latest uploads, regrade requests."""
    st = api.state(request)
    store = api.db_store(request)
    progress = api.own_progress(st, store, who.student)
    return html_page(
        request,
        "student_home.html.j2",
        who=who,
        title="Your page",
        chapters=_chapters(request, who),
        progress=progress,
        uploads=_submissions(request, who, LATEST_UPLOADS)[0],
        regrades=[regrade.public(r) for r in regrade.requests(store, who.student)],
        login_command=_grade_login(request, who),
        server=st.config.course.server_url or lti.tool_url(request),
        practice_due=practice_api.due_today(store, who.student, api.now_utc()),
    )


async def chapter_page(request: Request, who: Visitor) -> Response:
    """GET /student/chapters/{chapter}: one chapter's exercises, dates, quiz standing and uploads."""
    name = request.path_params["chapter"]
    chapter = next((c for c in _chapters(request, who) if c.name == name), None)
    if chapter is None:
        raise PageError(404, "No such chapter", f"'{name[:80]}' is not a chapter of this course: see your page.")
    chapter.submissions, uploads = _submissions(request, who, CHAPTER_UPLOADS, {e.id for e in chapter.exercises})
    text_link = f"{TEXT_URL}{quote(name)}.html" if name in course_text.load() else ""
    return html_page(
        request,
        "student_chapter.html.j2",
        who=who,
        title=f"Chapter {name}",
        chapter=chapter,
        uploads=uploads,
        text_link=text_link,
    )


def _own_submission(request: Request, who: Visitor) -> SubmissionView:
    """The visitor's submission of the path: 404 when it is not theirs, exactly as the API's rule."""
    job_id = api.path_id(request)
    store = api.db_store(request)
    job = records.job(store, job_id)
    if job is None or job["student"] != who.student:
        raise PageError(404, "Not found", f"There is no submission {job_id} of yours: your page lists yours.")
    return submission_view(api.for_student(request, who.principal, api.job_json(store, job, api.state(request).config)))


def submission_page(
    request: Request,
    who: Visitor,
    status: int = 200,
    notice: str = "",
    notice_error: bool = False,
    reason: str = "",
    asked: str = "",
) -> HTMLResponse:
    """The page of one upload (shared by GET and the regrade form's answer)."""
    upload = _own_submission(request, who)
    asks = [regrade.public(r) for r in regrade.requests(api.db_store(request), who.student) if r["job_id"] == upload.id]
    # format_html escapes every value it writes: its HTML is marked safe here, by name (the templates escape the rest)
    report = (
        Markup(format_html(upload.report, fragment=True, text_href=TEXT_URL, late_shares=upload.late_shares))
        if upload.report is not None
        else ""
    )
    return html_page(
        request,
        "student_submission.html.j2",
        status,
        who,
        title=upload.label,
        upload=upload,
        report_html=report,
        requests=asks,
        notice=notice,
        notice_error=notice_error,
        reason=reason,
        asked=asked,
        reason_max=regrade.REASON_MAX,
    )


async def submission(request: Request, who: Visitor) -> Response:
    """GET /student/submissions/{id}: its state while it waits, then its report and pictures, regrades."""
    filed = request.query_params.get("filed", "")
    return submission_page(request, who, notice="Your regrade request was sent to the instructor." if filed else "")


async def file_regrade(request: Request, who: Visitor) -> Response:
    """POST /student/submissions/{id}/regrades: a regrade request about this upload (grader/term/regrade.py)."""
    form = await read_form(request)
    check_csrf(request, form, who)
    upload = _own_submission(request, who)
    exercise, reason = first(form, "exercise"), first(form, "reason")
    try:
        regrade.file_request(api.db_store(request), who.student, exercise, reason, upload.id)
    except regrade.RegradeError as exc:
        return submission_page(request, who, exc.status, f"Not sent: {exc}", True, reason, exercise)
    return RedirectResponse(f"{upload.url}?filed=1#regrades", status_code=303)


# --- quizzes ----------------------------------------------------------------------------------------


@dataclass
class QuestionView:
    """A question as the student's quiz page shows it: posed for them, their standing, what they were told."""

    number: int
    posed: quiz_lib.Posed
    standing: graded.GradedStanding
    hint: str
    previewable: bool  # a number or a formula: the box shows how the answer is read
    explanation: str = ""  # shown once the question is closed (or with a verdict that reveals it)
    verdict: dict[str, Any] | None = None  # the answer just judged (the API's document), for this question
    error: str = ""  # an unreadable answer's reason (not judged, no attempt spent)
    answer: str = ""  # what was typed (kept in the box after an error or a preview)
    reading: str = ""  # how the typed answer is read (a preview)

    @property
    def id(self) -> str:
        return self.posed.question.id

    @property
    def choices(self) -> list[tuple[int, str]]:
        return list(enumerate((c.text for c in self.posed.choices), 1))


def _question_views(request: Request, who: Visitor, quiz: quiz_lib.Quiz) -> list[QuestionView]:
    st = api.state(request)
    answers = api.db_store(request).quiz_attempts(who.student)
    views = []
    for number, question in enumerate(quiz.questions, 1):
        posed = quiz_lib.pose(question, who.student)
        standing = graded.standing(question, answers, st.config.course.quiz_attempts)
        names = sorted(set(question.symbols))  # a drawn question's answer is a number: no names
        view = QuestionView(
            number,
            posed,
            standing,
            answer_hint(question.kind, question.tolerance, names),
            question.kind == "numeric" or (question.kind == "short" and bool(question.symbols)),
        )
        if standing.closed:
            view.explanation = api.closed_explanation(posed)
        views.append(view)
    return views


def _quiz(request: Request) -> quiz_lib.Quiz:
    st = api.state(request)
    quiz = api.quiz_or_404(st, request.path_params["chapter"])
    api.reference_or_503(quiz)
    return quiz


def quiz_page(
    request: Request, who: Visitor, quiz: quiz_lib.Quiz, views: list[QuestionView], status: int = 200
) -> HTMLResponse:
    st = api.state(request)
    standing = quiz_lib.chapter_progress(quiz, api.db_store(request).quiz_attempts(who.student))
    due = st.config.course.quiz_due(quiz.chapter)
    past = graded.past_due(due, datetime.now(timezone.utc))
    return html_page(
        request,
        "student_quiz.html.j2",
        status,
        who,
        title=f"Quiz: {quiz.title or quiz.chapter}",
        quiz=quiz,
        questions=views,
        standing=standing,
        due=due,
        past_due=past,
        action=quiz_url(quiz.chapter),
        chapter_link=chapter_url(quiz.chapter),
        back=_back_section(request, quiz.chapter),
        text_url=TEXT_URL,
    )


def _back_section(request: Request, chapter: str) -> Section | None:
    """The section of the text the student came from (``?section=<id>``, a checkpoint's link), when it is one of
    this chapter's; None otherwise (an unknown id is ignored: the quiz page works without it)."""
    section_id = request.query_params.get("section", "")
    text = course_text.load().get(chapter) if section_id else None
    return text.section(section_id) if text else None


async def quiz_get(request: Request, who: Visitor) -> Response:
    """GET /student/quizzes/{chapter}: the chapter's questions posed for the student, with their attempts."""
    quiz = _quiz(request)
    return quiz_page(request, who, quiz, _question_views(request, who, quiz))


def _answer_of(form: dict[str, list[str]]) -> str:
    """The answer a question's form sends: the text typed, or the numbers of the choices ticked, as shown."""
    return ", ".join(v.strip() for v in form.get("answer", []) if v.strip())


async def quiz_answer(request: Request, who: Visitor) -> Response:
    """POST /student/quizzes/{chapter}: one question's answer, judged and recorded as the API does (or, with
    ``preview``, only read back); the page again with what the student is told."""
    quiz = _quiz(request)
    form = await read_form(request)
    check_csrf(request, form, who)
    views = _question_views(request, who, quiz)
    view = next((v for v in views if v.id == first(form, "question")), None)
    if view is None:
        raise PageError(400, "No such question", f"'{first(form, 'question')[:60]}' is not a question of this quiz.")
    raw = _answer_of(form)
    view.answer = raw
    if first(form, "preview"):
        try:
            view.reading = await _read_back(view.posed, raw, who.student)
        except quiz_lib.AnswerFormatError as exc:
            view.error = str(exc)
        return quiz_page(request, who, quiz, views)
    try:
        status, doc = await api.judge_and_record(
            api.state(request), api.db_store(request), who.student, quiz, view.posed.question, raw, True
        )
    except HTTPException as exc:  # 422: unreadable (no attempt spent); 503: the reference is missing
        view.error = str(exc.detail)
        return quiz_page(request, who, quiz, views, exc.status_code)
    views = _question_views(request, who, quiz)  # the attempts after this one
    view = next(v for v in views if v.id == doc["question"])
    view.verdict = doc
    if doc.get("explanation"):
        view.explanation = str(doc["explanation"])
    return quiz_page(request, who, quiz, views, status)


async def _read_back(posed: quiz_lib.Posed, raw: str, student: str) -> str:
    """How an answer is read (judging.preview, in a judging process under its time budget; one preview of
    ``student``'s at a time, apart from their answer being judged, so a preview never delays a submission)."""
    return await asyncio.to_thread(judging.preview_bounded, posed, raw, None, f"{student} (preview)")


async def quiz_preview(request: Request, who: Visitor) -> Response:
    """POST /student/quizzes/{chapter}/preview (the page's script, as the answer is typed): ``{"read": ...}``,
    or ``{"error": ...}`` with the reason it cannot be read; never a verdict, nothing recorded."""
    quiz = _quiz(request)
    form = await read_form(request)
    check_csrf(request, form, who)
    try:
        question = quiz.question(first(form, "question"))
    except KeyError:
        return JSONResponse({"error": "no such question"}, status_code=400)
    try:
        doc = {"read": await _read_back(quiz_lib.pose(question, who.student), _answer_of(form), who.student)}
    except quiz_lib.AnswerFormatError as exc:
        doc = {"error": str(exc)}  # a reading too: the reason it cannot be read (200, as for any preview)
    return JSONResponse(doc, headers={"Cache-Control": "no-store"})


# --- the course text --------------------------------------------------------------------------------

ASSET_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".woff2": "font/woff2",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
}


def _text_page(request: Request, who: Visitor, heading: str, **context: Any) -> HTMLResponse:
    """A page of the text: the student's page with the text's style sheets and KaTeX, from this server only."""
    response = html_page(request, "student_text.html.j2", who=who, title=heading, heading=heading, **context)
    response.headers["Content-Security-Policy"] = with_own_files(response.headers["Content-Security-Policy"])
    return response


async def text_index(request: Request, who: Visitor) -> Response:
    """GET /student/text/: the chapters of the course text."""
    chapters = course_text.load()
    menu = "".join(
        f'<li><a href="{quote(n)}.html">{Markup.escape(chapters[n].title)}</a></li>'
        for n in course_text.ordered(chapters)
    )
    return _text_page(request, who, "The course text", menu=Markup(menu), chapter=None)


async def text_chapter(request: Request, who: Visitor) -> Response:
    """GET /student/text/{chapter}.html: one chapter, each checkpoint's questions posed for this student and
    linked to their forms on the quiz page (judged there, attempts capped: the one judge)."""
    name = request.path_params["chapter"]
    chapters = course_text.load()
    chapter = chapters.get(name)
    if chapter is None:
        raise PageError(404, "No such chapter", f"'{name[:80]}' is not a chapter of the course text: see {TEXT_URL}.")
    quiz = next((q for q in api.state(request).quizzes if q.chapter == name), None)
    prompts = {q.id: quiz_lib.pose(q, who.student).prompt for q in quiz.questions} if quiz else {}
    quiz_link = quiz_url(name) if quiz else None
    return _text_page(
        request,
        who,
        chapter.title,
        chapter=chapter,
        chapter_link=chapter_url(name),
        quiz_link=quiz_link,
        menu=Markup(course_text.chapter_menu(name, course_text.ordered(chapters))),
        intro=Markup(course_text.render_markdown(chapter.intro)),
        sections=Markup(course_text.sections_html(chapter, prompts, quiz_link)),
    )


async def text_section(request: Request, who: Visitor) -> Response:
    """GET /student/text/{chapter}/{section}: a section by its address, a redirect to its place in the
    chapter's page; 404 when the text has no such section."""
    name, section_id = request.path_params["chapter"], request.path_params["section"]
    chapter = course_text.load().get(name)
    if chapter is None or chapter.section(section_id) is None:
        raise PageError(
            404,
            "No such section",
            f"The course text has no section '{name[:60]}.{section_id[:60]}': see its chapters at {TEXT_URL}.",
        )
    return RedirectResponse(f"{TEXT_URL}{quote(name)}.html#{quote(section_id)}", status_code=303)


async def text_asset(request: Request) -> Response:
    """GET /student/text/assets/{name}: the text's script and style, and KaTeX's files from its npm package
    (course_text.KATEX_FILES: the script, the style sheet, the fonts); public (the same for everyone), 404 for
    anything else."""
    name = request.path_params["name"]
    own = {"render.js": course_text.RENDER_JS, "text.css": course_text.TEXT_CSS}
    if name in own:
        return Response(own[name], media_type=ASSET_TYPES["." + name.rpartition(".")[2]])
    missing = PlainTextResponse("No such file of the course text.", status_code=404)
    if name.partition("/")[0] not in course_text.KATEX_FILES or "\0" in name:  # (a NUL no path can hold)
        return missing
    root = course_text.KATEX_DIR.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root) or not path.is_file() or path.suffix not in ASSET_TYPES:
        return missing
    return FileResponse(path, media_type=ASSET_TYPES[path.suffix])


# --- routes -----------------------------------------------------------------------------------------

PAGES: list[tuple[str, str, Handler]] = [
    ("GET", "/student/", home),
    ("GET", "/student/chapters/{chapter:path}", chapter_page),
    ("GET", "/student/submissions/{id}", submission),
    ("POST", "/student/submissions/{id}/regrades", file_regrade),
    ("GET", "/student/quizzes/{chapter}", quiz_get),
    ("POST", "/student/quizzes/{chapter}", quiz_answer),
    ("POST", "/student/quizzes/{chapter}/preview", quiz_preview),
    ("GET", "/student/text/", text_index),
    ("GET", "/student/text/{chapter}.html", text_chapter),
    ("GET", "/student/text/{chapter}/{section}", text_section),
    ("POST", "/student/logout", logout),
]


def routes() -> list[BaseRoute]:
    """The login routes, then every page behind the student check (mounted by grader/server/web.py)."""
    out: list[BaseRoute] = [
        Route("/student/login", login_form, methods=["GET"]),
        Route("/student/login", login, methods=["POST"]),
        Route("/student", lambda request: RedirectResponse("/student/", status_code=307), methods=["GET"]),
        Route("/student/text/assets/{name:path}", text_asset, methods=["GET"]),
    ]
    return out + [Route(path, for_students(handler), methods=[method]) for method, path, handler in PAGES]
