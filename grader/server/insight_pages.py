"""The dashboard's insight pages: the class's mistakes and the quizzes' item statistics.

- ``/instructor/mistakes``: the most frequent named mistakes of the last :data:`WEEK` (or ``?since=YYYY-MM-DD``
  for the week from that day), per exercise and concept, with how many students made each, how many fixed it on
  their next upload and the median time it took (:mod:`grader.term.class_mistakes`); each row opens
  ``/instructor/mistakes/{exercise}/{mistake}``, the students who made it and their uploads; the same rows as
  CSV at ``/instructor/mistakes.csv``.
- ``/instructor/item-stats``: per question and parameterised variant, facility, discrimination, the distractors'
  shares, the unfair-variant and negative-discrimination flags, and the 2PL fit with standard errors where the
  class is large enough (:mod:`grader.term.item_stats`), else a note in plain words.

The same login and headers as every dashboard page (grader/server/instructor.py).
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from grader import quiz as quiz_lib
from grader.quiz import locking
from grader.server import app as api
from grader.server.dashboard_html import Links, render
from grader.server.instructor import csrf_token, grading_banner, guarded, message, store_of
from grader.student.quiz.concepts import CONCEPTS
from grader.term import class_mistakes, item_stats, regrade

WEEK = timedelta(days=7)


def insight_page(request: Request, title: str, page: str, status: int = 200, **context: Any) -> HTMLResponse:
    """An insight page (dash_insight.html.j2, on the dashboard's base) with the dashboard's shared context."""
    st = request.app.state.normgrade
    values: dict[str, Any] = {
        "title": f"{title} - {st.config.course.name}",
        "course_name": st.config.course.name,
        "links": Links(offline=False),
        "csrf": csrf_token(request),
        "with_script": False,
        "heading": title,
        "banner": grading_banner(request),
        "page": page,
        "open_regrades": len(regrade.requests(store_of(request), status="open")),
    }
    if "since" in context:  # the window's first and last day, as the page writes them
        values["since_day"] = f"{context['since']:%Y-%m-%d}"
        values["last_day"] = f"{context['until'] - timedelta(seconds=1):%Y-%m-%d}"
    values.update(context)
    return HTMLResponse(
        render("dash_insight.html.j2", **values), status_code=status, headers={"Cache-Control": "no-store"}
    )


class NotADay(ValueError):
    """``?since=`` that is not a day (its message is the page's one line)."""


def week_of(request: Request) -> tuple[datetime, datetime]:
    """The window [since, until): ``?since=YYYY-MM-DD`` and the 7 days from it, else the 7 days up to now;
    NotADay for anything else."""
    given = request.query_params.get("since", "").strip()
    if not given:
        until = api.now_utc()
        return until - WEEK, until
    try:
        since = datetime.strptime(given, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        raise NotADay(
            f"since={given[:20]!r} is not a day: write it as YYYY-MM-DD, or leave it out for the last 7 days"
        ) from None
    return since, since + WEEK


def refused(handler: Any) -> Any:
    """A page handler whose NotADay becomes the dashboard's one-line 400 page."""

    async def run(request: Request, mode: str) -> Response:
        try:
            return await handler(request, mode)
        except NotADay as exc:
            return message(request, 400, "Class mistakes", str(exc))

    run.__doc__ = handler.__doc__
    return run


def class_mistakes_of(request: Request, since: datetime, until: datetime) -> list[class_mistakes.ClassMistake]:
    """The class's named mistakes in [since, until) from the course database."""
    store = store_of(request)
    uploads = class_mistakes.uploads_of(store.submission_rows(), store.diagnosed_mistakes())
    return class_mistakes.frequent_mistakes(uploads, since, until)


def concept_title(concept: str | None) -> str:
    return CONCEPTS[concept].title if concept in CONCEPTS else "(no concept)"


def hours_text(hours: float | None) -> str:
    """A median time to fix in words: "40 min", "5.5 h", "2.1 days"; "-" when nobody fixed it."""
    if hours is None:
        return "-"
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


async def mistakes_page(request: Request, mode: str) -> Response:
    """GET /instructor/mistakes: the most frequent named mistakes of the week, who fixed them and how fast."""
    since, until = week_of(request)
    rows = class_mistakes_of(request, since, until)
    return insight_page(
        request,
        "Class mistakes",
        "mistakes",
        since=since,
        until=until,
        mistakes=rows,
        concept_title=concept_title,
        hours_text=hours_text,
        since_query=request.query_params.get("since", ""),
    )


async def mistake_page(request: Request, mode: str) -> Response:
    """GET /instructor/mistakes/{exercise}/{mistake}: the students who made it this week and their uploads."""
    since, until = week_of(request)
    exercise, mistake = request.path_params["exercise"], request.path_params["mistake"]
    found = next(
        (m for m in class_mistakes_of(request, since, until) if m.exercise == exercise and m.mistake == mistake), None
    )
    if found is None:
        return insight_page(
            request,
            "Class mistakes",
            "mistake",
            status=404,
            mistake=None,
            exercise=exercise,
            mistake_id=mistake,
            since=since,
            until=until,
        )
    return insight_page(
        request,
        f"{mistake} in {exercise}",
        "mistake",
        mistake=found,
        exercise=exercise,
        mistake_id=mistake,
        since=since,
        until=until,
        concept_title=concept_title,
        hours_text=hours_text,
    )


async def mistakes_csv(request: Request, mode: str) -> Response:
    """GET /instructor/mistakes.csv: the page's rows (class_mistakes.to_csv_rows) for a spreadsheet."""
    since, until = week_of(request)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(class_mistakes.to_csv_rows(class_mistakes_of(request, since, until)))
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="class-mistakes.csv"', "Cache-Control": "no-store"},
    )


def variant_text(params: str) -> str:
    """A variant's drawn values as ``a=3, n=128`` (its params JSON), "fixed" for a question without."""
    import json

    if not params:
        return "fixed"
    try:
        values = json.loads(params)
    except ValueError:
        return params[:60]
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) if isinstance(values, dict) else params[:60]


async def item_stats_page(request: Request, mode: str) -> Response:
    """GET /instructor/item-stats: facility, discrimination, distractors, variants' flags and the 2PL fit."""
    responses = item_stats.responses_of(store_of(request).quiz_answer_rows())
    config = request.app.state.normgrade.config
    quiz_dir = config.quiz_dir if config.quiz_dir is not None else quiz_lib.default_quiz_dir()
    stats = item_stats.item_stats(responses, locking.misconceptions(quiz_dir))  # the labels stay server side
    students = len({r.student for r in responses})
    irt = None
    note = ""
    if students < item_stats.IRT_MIN_STUDENTS:
        note = (
            f"The two-parameter IRT fit needs at least {item_stats.IRT_MIN_STUDENTS} students who answered; "
            f"this class has {students}, too few for its estimates to mean anything, so it is not shown. "
            "Facility, discrimination and the flags below do not need it."
        )
    else:
        try:
            fitted = item_stats.fit_2pl(responses)
        except ImportError:
            note = "The IRT fit needs SciPy on the server (the `learning` extra); it is not installed."
        else:
            irt = {i.question: i for i in fitted or []}
    return insight_page(
        request,
        "Item statistics",
        "items",
        stats=stats,
        irt=irt,
        irt_note=note,
        students=students,
        unfair_gap=item_stats.UNFAIR_GAP,
        variant_text=variant_text,
    )


def routes() -> list[BaseRoute]:
    """The insight pages, behind the dashboard's login (mounted by grader/server/pages.py)."""
    pages = [
        ("/instructor/mistakes", mistakes_page, True),
        ("/instructor/mistakes.csv", mistakes_csv, False),
        ("/instructor/mistakes/{exercise}/{mistake}", mistake_page, True),
        ("/instructor/item-stats", item_stats_page, True),
    ]
    return [Route(path, guarded(refused(handler), is_page), methods=["GET"]) for path, handler, is_page in pages]
