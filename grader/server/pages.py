"""The server's HTML pages (Jinja2, the templates of grader/templates/).

One public page: the course (its chapters, due dates, score rule and how to
log in); then the instructor's dashboard under ``/instructor/``
(grader/server/instructor.py: its login, pages and exports; the views in
grader/server/dashboard.py, the templates ``dash_*.html.j2``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from grader.server import insight_pages, instructor, term_pages
from grader.term import class_report
from grader.student import standing
from grader.student.course import Course

TEMPLATES = Jinja2Templates(env=class_report.environment())  # the one environment: every template autoescaped


def rate_text(submissions: int, minutes: float) -> str:
    """ "30 uploads per hour", "5 uploads per 10 minutes" (never "60.0 minutes")."""
    if minutes == 60:
        window = "hour"
    elif minutes % 60 == 0:
        window = f"{minutes / 60:g} hours"
    else:
        window = f"{minutes:g} minutes"
    return f"{submissions} upload{'s' if submissions != 1 else ''} per {window}"


def chapter_rows(course: Course, now: datetime) -> list[dict[str, Any]]:
    """The course page's chapters, in the words of grader/student/standing.py: state now, when uploads open,
    due, what late work counts, when uploads close, and when an exam's feedback comes."""
    rows = []
    for chapter in course.chapters:
        state = standing.chapter_state(chapter, now)
        late = standing.late_work(chapter)
        now_text = state.message().removeprefix(f"chapter '{chapter.name}' ")  # the row names the chapter
        rows.append(
            {
                "name": chapter.name,
                "state": now_text,
                "opens": standing.format_time(chapter.opens),
                "due": standing.format_time(chapter.due) or "no due date",
                "late": late,
                "closes": standing.format_time(chapter.closes_at()) or "never",
                "feedback": (
                    f"exam: at {standing.format_time(chapter.release_feedback)}"
                    if chapter.release_feedback
                    else "at once"
                ),
            }
        )
    return rows


async def course_page(request: Request) -> Response:
    """GET /: the course name, each chapter's state, dates and exam mode, the score rule, and how to start."""
    course: Course = request.app.state.normgrade.config.course
    return TEMPLATES.TemplateResponse(
        request,
        "server_index.html.j2",
        {
            "title": course.name,
            "course_name": course.name,
            "course": course.to_json(),
            "student": None,
            "bearer": False,
            "csrf": "",  # the student pages' frame, with nobody logged in
            "chapters": chapter_rows(course, datetime.now(timezone.utc)),
            "rate": rate_text(course.rate_submissions, course.rate_minutes),
            "exams": [c.name for c in course.chapters if c.release_feedback is not None],
            "base_url": str(request.base_url).rstrip("/"),
        },
    )


def routes() -> list[BaseRoute]:
    """The course page, then the instructor's dashboard."""
    return [
        Route("/", course_page, methods=["GET"]),
        *instructor.routes(),
        *term_pages.routes(),
        *insight_pages.routes(),
    ]
