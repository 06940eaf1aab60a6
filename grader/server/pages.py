"""The server's HTML pages (Jinja2, the templates of grader/templates/).

Today one public page: the course (its chapters, due dates, score rule and
how to log in). The instructor's dashboard of issue 12 goes here: add its
routes to :func:`routes` (under ``/instructor/``) and its templates beside
``server_index.html.j2``; the store, the course and the score rule are on
``request.app.state.normgrade`` (grader/server/app.py, ServerState).
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).resolve().parent.parent / "templates"))


async def course_page(request: Request) -> Response:
    """GET /: the course name, chapters with due dates and late penalties, and how to start."""
    st = request.app.state.normgrade
    return TEMPLATES.TemplateResponse(
        request, "server_index.html.j2",
        {"course": st.config.course.to_json(), "base_url": str(request.base_url).rstrip("/")},
    )


def routes() -> list[BaseRoute]:
    """The page routes (issue 12 adds the instructor's here)."""
    return [Route("/", course_page, methods=["GET"])]
