"""The dashboard's term pages: regrade requests, extensions, the last rescoring, similarity.

``/instructor/term`` shows the open regrade requests (each with the report of
the upload it is about and a form to answer: a reply, and optionally a score,
written as an override), the extensions (the course file's and those granted
here, with the form to grant or withdraw one, logged with its reason), and
the last ``grade rescore`` (who changed, before/after, the checks that
flipped). ``/instructor/similarity`` lists the pairs of ``grade similarity``
with what a match means, and opens a pair side by side with the matching
regions marked. The same login and CSRF rules as every dashboard page
(grader/server/instructor.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from grader.term import extensions, regrade, rescore, similarity
from grader.queue import records
from grader.server.dashboard_html import Links, render
from grader.server.instructor import check_csrf, csrf_token, grading_banner, guarded, message, read_form, store_of
from grader.student.errors import GraderError
from grader.student.feedback.report import format_text
from grader.student.sanitize import clean_text
from grader.student.store import Store

LOG = logging.getLogger("normgrade.dashboard")


def term_page(request: Request, title: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A term page (term_page.html.j2, on the dashboard's base): the shared context, then the page's own."""
    st = request.app.state.normgrade
    values: dict[str, Any] = {
        "title": f"{title} - {st.config.course.name}",
        "course_name": st.config.course.name,
        "links": Links(offline=False),
        "csrf": csrf_token(request),
        "with_script": False,
        "notice": "",
        "notice_error": False,
        "heading": title,
        "banner": grading_banner(request),
        "open_regrades": len(regrade.requests(store_of(request), status="open")),
    }
    values.update(context)
    return HTMLResponse(
        render("term_page.html.j2", **values), status_code=status, headers={"Cache-Control": "no-store"}
    )


def upload_report(store: Any, request_row: dict[str, Any]) -> str:
    """The text report of the upload a regrade request is about, for that exercise (the result in force)."""
    job = records.job(store, int(request_row["job_id"])) if request_row["job_id"] is not None else None
    report = records.report_of(store, job) if job is not None else None
    if report is None:
        return ""
    report.exercises = [e for e in report.exercises if e.id == request_row["exercise"]]
    return clean_text(format_text(report))


def term_context(request: Request) -> dict[str, Any]:
    store = store_of(request)
    course = request.app.state.normgrade.config.course
    open_requests = [{**r, "report": upload_report(store, r)} for r in regrade.requests(store, status="open")]
    answered = list(reversed(regrade.requests(store, status="answered")))[:20]
    return {
        "page": "term",
        "requests": open_requests,
        "answered": answered,
        "extensions": extensions.listing(store, course),
        "chapters": [c.name for c in course.chapters if c.due],
        "groups": sorted(course.groups),
        "rescoring": rescore.last_rescoring(store),
    }


async def term_overview(request: Request, mode: str) -> Response:
    """GET /instructor/term: open regrade requests, extensions, the last rescoring."""
    saved = request.query_params.get("saved", "")
    notice = {"answer": "Answer saved.", "extension": "Extension saved."}.get(saved, "")
    return term_page(request, "Term: requests, extensions, rescoring", notice=notice, **term_context(request))


async def answer_request(request: Request, mode: str) -> Response:
    """POST /instructor/term/regrades/{id}: a reply and optionally a score (an override), then back."""
    form = await read_form(request)
    check_csrf(request, form, mode)
    request_id = records.row_id(request.path_params["id"])
    if request_id is None:
        return message(
            request,
            400,
            "No such request",
            "That is not the number of a regrade request: go back to the Term page.",
            error=True,
            next_url="/instructor/term",
        )
    try:
        row = regrade.answer(store_of(request), request_id, form.get("reply", ""), form.get("score", ""), "instructor")
    except regrade.RegradeError as exc:
        return term_page(
            request,
            "Term: requests, extensions, rescoring",
            status=exc.status,
            notice=f"Answer not saved: {exc}",
            notice_error=True,
            **term_context(request),
        )
    LOG.warning("regrade request %s answered: %s", row["id"], "override" if row["override"] is not None else "reply")
    return RedirectResponse("/instructor/term?saved=answer#requests", status_code=303)


async def grant_extension(request: Request, mode: str) -> Response:
    """POST /instructor/term/extensions: grant (or withdraw, with no due date) an extension, with its reason."""
    form = await read_form(request)
    check_csrf(request, form, mode)
    course = request.app.state.normgrade.config.course
    try:
        row = extensions.grant(
            store_of(request),
            course,
            form.get("student", ""),
            form.get("group", ""),
            form.get("chapter", ""),
            form.get("due", ""),
            form.get("reason", ""),
            "instructor",
            form.get("late_penalty", ""),
            form.get("late_until", ""),
        )
    except GraderError as exc:
        return term_page(
            request,
            "Term: requests, extensions, rescoring",
            status=400,
            notice=f"Extension not saved: {exc}",
            notice_error=True,
            **term_context(request),
        )
    LOG.warning(
        "extension: %r %r -> %s (%r)", row.get("student") or row.get("group"), row["chapter"], row["due"], row["reason"]
    )
    return RedirectResponse("/instructor/term?saved=extension#extensions", status_code=303)


async def rescore_now(request: Request, mode: str) -> Response:
    """POST /instructor/term/rescore: rescore the served course live (the API's POST /rescore), then the Term page
    with whose counted score changed (the exercises field: ids or topics, empty for all)."""
    from grader.server.app import rescore_in_thread
    from grader.student.engine import catalogue

    form = await read_form(request)
    check_csrf(request, form, mode)
    try:
        selectors = form.get("exercises", "").split()
        outcome = await rescore_in_thread(request.app, catalogue.resolve(selectors) if selectors else [])
    except GraderError as exc:
        return term_page(
            request,
            "Term: requests, extensions, rescoring",
            status=400,
            notice=f"Not rescored: {exc}",
            notice_error=True,
            **term_context(request),
        )
    LOG.warning("rescoring %s: %d uploads, %d changes", outcome.rescoring_id, outcome.uploads, len(outcome.changes))
    said = rescore.format_text(outcome).splitlines()[0]
    return term_page(request, "Term: requests, extensions, rescoring", notice=said, **term_context(request))


async def _pairs(request: Request) -> list[similarity.Pair]:
    """The similarity pairs, computed once per server process (in a thread, on a connection of its own: a
    large class takes a while) and kept until ?refresh=1."""
    state = request.app.state
    if request.query_params.get("refresh") or not hasattr(state, "similarity_pairs"):
        path = state.normgrade.config.db_path

        def compute() -> list[similarity.Pair]:
            with Store.open(path) as store:
                return similarity.find_pairs(store)

        state.similarity_pairs = await asyncio.to_thread(compute)
    return state.similarity_pairs


async def similarity_page(request: Request, mode: str) -> Response:
    """GET /instructor/similarity: pairs above the threshold, and what a match means (503 without copydetect)."""
    try:
        pairs = await _pairs(request)
    except GraderError as exc:
        return message(request, 503, "Similarity", str(exc), error=True)
    return term_page(
        request,
        "Similarity",
        page="similarity",
        pairs=pairs,
        threshold=similarity.THRESHOLD,
        meaning=similarity.MEANING,
        quote=quote,
    )


async def pair_page(request: Request, mode: str) -> Response:
    """GET /instructor/similarity/{topic}/{a}/{b}: the two files side by side, matching regions marked."""
    topic, a, b = (request.path_params[k] for k in ("topic", "a", "b"))
    try:
        pairs = await _pairs(request)
    except GraderError as exc:  # copydetect not installed: the same 503 as the list page
        return message(request, 503, "Similarity", str(exc), error=True)
    pair = next((p for p in pairs if (p.topic, p.a, p.b) == (topic, a, b)), None)
    if pair is None:
        return message(
            request,
            404,
            "No such pair",
            "That pair is not above the threshold (or no longer): go back to the similarity page.",
            error=True,
            next_url="/instructor/similarity",
        )
    store = store_of(request)
    texts = {}
    for name, job_id, ranges in ((a, pair.job_a, pair.slices_a), (b, pair.job_b, pair.slices_b)):
        text = records.job_files(store, job_id).get(f"{topic}.py", "")
        texts[name] = [(clean_text(piece), matched) for piece, matched in similarity.segments(text, ranges)]
    return term_page(request, f"{topic}: {a} and {b}", page="pair", pair=pair, texts=texts, meaning=similarity.MEANING)


PAGES: list[tuple[str, str, Any]] = [
    ("GET", "/instructor/term", term_overview),
    ("POST", "/instructor/term/regrades/{id}", answer_request),
    ("POST", "/instructor/term/extensions", grant_extension),
    ("POST", "/instructor/term/rescore", rescore_now),
    ("GET", "/instructor/similarity", similarity_page),
    ("GET", "/instructor/similarity/{topic}/{a}/{b}", pair_page),
]


def routes() -> list[BaseRoute]:
    """The term pages, each behind the dashboard's instructor check."""
    return [Route(path, guarded(handler), methods=[method]) for method, path, handler in PAGES]
