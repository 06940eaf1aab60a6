"""The student's practice page, ``/student/practice``: what is due today and the practice that the student's
mistakes call for, each concept with one question answerable on the page.

The same loop as ``grade practice`` on the server (grader/server/practice_api.py): the questions are practice
instances, an answer is judged by the quizzes' judge and kept as a review of its concept, never as a quiz
attempt. The same login, CSRF and headers as every student page (grader/server/student_pages.py).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from grader.server import app as api
from grader.server import practice_api
from grader.server.student_pages import TEXT_URL, Visitor, check_csrf, first, for_students, html_page, read_form
from grader.student.coursetext import section_href


def practice_page(request: Request, who: Visitor, status: int = 200, **context: Any) -> Response:
    """The page: the due list and the concepts to practise, with what the last answer was told (``context``)."""
    doc = practice_api.practice_doc(api.state(request), api.db_store(request), who.student, api.now_utc())
    for item in doc["practise"]:  # the concept's main section, on the served course text
        item["reading"] = (
            {"address": item["sections"][0], "href": section_href(item["sections"][0], TEXT_URL)}
            if item["sections"]
            else None
        )
    values: dict[str, Any] = {"verdict": None, "error": ""}
    values.update(context)
    return html_page(request, "student_practice.html.j2", status, who, title="Practice", doc=doc, **values)


async def practice_get(request: Request, who: Visitor) -> Response:
    """GET /student/practice: what is due today and what to practise, one question per concept."""
    return practice_page(request, who)


async def practice_post(request: Request, who: Visitor) -> Response:
    """POST /student/practice: one practice answer, judged as a review (no quiz attempt); the page again."""
    form = await read_form(request)
    check_csrf(request, form, who)
    concept, question = first(form, "concept"), first(form, "question")
    raw = ", ".join(v.strip() for v in form.get("answer", []) if v.strip())
    try:
        verdict = await practice_api.practise_answer(
            api.state(request), api.db_store(request), who.student, concept, question, raw, True, api.now_utc()
        )
    except HTTPException as exc:  # 400: not a question to practise; 422: unreadable (no review)
        return practice_page(request, who, exc.status_code, error=str(exc.detail))
    return practice_page(request, who, verdict=verdict)


def routes() -> list[BaseRoute]:
    """The practice page's routes, behind the student check (mounted by grader/server/web.py)."""
    return [
        Route("/student/practice", for_students(practice_get), methods=["GET"]),
        Route("/student/practice", for_students(practice_post), methods=["POST"]),
    ]
