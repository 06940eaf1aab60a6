"""The server's HTML pages (Jinja2, the templates of grader/templates/).

One public page: the course (its chapters, due dates, score rule and how to
log in); then the instructor's dashboard under ``/instructor/``
(grader/server/instructor.py: its login, pages and exports; the views in
grader/server/dashboard.py, the templates ``dash_*.html.j2``).
"""

from __future__ import annotations


from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from grader.server import instructor, term_pages
from grader.term import class_report

TEMPLATES = Jinja2Templates(env=class_report.environment())  # the one environment: every template autoescaped


async def course_page(request: Request) -> Response:
    """GET /: the course name, chapters with due dates and late penalties, and how to start."""
    st = request.app.state.normgrade
    return TEMPLATES.TemplateResponse(
        request, "server_index.html.j2",
        {"course": st.config.course.to_json(), "base_url": str(request.base_url).rstrip("/")},
    )


def routes() -> list[BaseRoute]:
    """The course page, then the instructor's dashboard."""
    return [Route("/", course_page, methods=["GET"]), *instructor.routes(), *term_pages.routes()]
