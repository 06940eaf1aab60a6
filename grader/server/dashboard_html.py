"""How the instructor's dashboard is drawn: its links, its templates, the overview's grid and the offline file.

The views (grader/server/dashboard.py) compute what each page shows; this module turns them into HTML with
the class report's jinja2 environment (grader/term/class_charts.py):

- :class:`Links`: where the pages point (the server's URLs, or anchors inside the one offline file);
- :func:`render` and :func:`overview_context`: a dashboard template and what the overview partial needs;
- :func:`grid_cells`: a student's row of the grid, written here (some 20,000 cells for a class of 500);
- :func:`offline_html`: ``grade report --format html``, every page in one file (grader/server/class_html.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup, escape

from grader.server.dashboard import Filters, exercise_detail, overview_rows, student_detail
from grader.student.course import parse_time
from grader.student.feedback.report import format_score
from grader.student.store import Store
from grader.term.class_charts import band, environment, histogram_chart, pass_rate_chart
from grader.term.class_report import ClassReport, StudentRow, _mistake_texts


# --- links ---------------------------------------------------------------------------------------


@dataclass
class Links:
    """Where the pages point: the server's URLs, or anchors inside the one offline file."""

    offline: bool
    anchors: dict[str, int] = field(default_factory=dict)  # student -> index (offline)

    def overview(self) -> str:
        return "#overview" if self.offline else "/instructor/"

    def quizzes(self) -> str:
        return "#quiz-items" if self.offline else "/instructor/quizzes"

    def quiz(self, chapter: str) -> str:
        """A quiz chapter's part of the item analysis."""
        return f"#quiz-{chapter}" if self.offline else f"/instructor/quizzes#quiz-{quote(chapter, safe='')}"

    def student(self, name: str) -> str:
        if self.offline:
            return f"#student-{self.anchors.get(name, 0)}"
        return "/instructor/students/" + quote(name, safe="")

    def exercise(self, exercise: str) -> str:
        return f"#exercise-{exercise}" if self.offline else "/instructor/exercises/" + quote(exercise, safe="")

    def export(self, kind: str) -> str:
        return f"/instructor/export/{kind}"


# --- rendering ------------------------------------------------------------------------------------


def render(template: str, **context: Any) -> str:
    """A dashboard template rendered with the class report's environment."""
    return environment().get_template(template).render(**context)


def overview_context(report: ClassReport, filters: Filters, now: datetime) -> dict[str, Any]:
    """What the overview partial needs: the rows, the filters, the charts, which group each quiz column is in."""
    rows = overview_rows(report, filters, now)
    index = {g.name: k for k, g in enumerate(report.groups)}
    quiz_group = {c: index.get(c, -1) for c, _ in report.chapters}
    return {
        "report": report,
        "summary": report.summary(),
        "rows": rows,
        "filters": filters,
        "visible": sum(r.visible for r in rows),
        "struggling_count": sum(r.struggling for r in rows),
        "now_iso": now.isoformat(timespec="seconds"),
        "quiz_group": quiz_group,
        "chapter_index": index.get(filters.chapter, ""),
        "cells": {r.student.name: grid_cells(report, r.student, quiz_group) for r in rows},
        "histogram": histogram_chart(report.histogram()),
        "pass_rate_chart": pass_rate_chart(report.exercises),
    }


# The look of a cell by the status of the exercise's latest upload: (class, mark shown, words for the hover and for
# screen readers). A wrong answer is the plain score on its colour; the others say what kept the code from an answer.
STATUS_LOOKS: dict[str, tuple[str, str, str]] = {
    "not_implemented": ("s-todo", "", "not implemented yet (the stubs still raise NotImplementedError)"),
    "error": ("s-crash", "!", "crashed (an exception, a syntax error or a forbidden import)"),
    "timeout": ("s-crash", "!", "ran out of time"),
    "not_graded": ("s-ng", "?", "not graded: the grader's machine failed, not the student's code"),
    "failed": ("", "", ""),  # the plain score: wrong answers on some checks (the legend says so)
    "passed": ("", "", ""),
}


@functools.lru_cache(maxsize=1024)
def mistake_sentence(mistake_id: str) -> str:
    """A named mistake's sentence (the catalogue's), '' when unknown: what a cell's hover says of it."""
    return _mistake_texts(mistake_id)[0]


def grid_cells(report: ClassReport, student: StudentRow, quiz_group: dict[str, int]) -> Markup:
    """A student's grid cells: one per exercise (group by group), then one per quiz chapter.

    Written here rather than in the template because a class of 500 has some
    20,000 of them. Each cell: its colour class (:func:`band`), its look by the
    latest upload's status (:data:`STATUS_LOOKS`: striped when not implemented,
    "!" for a crash or a time-out, a wrong answer plain), ``g<k>`` (the group
    the chapter filter keeps; -1 for a quiz chapter that is no exercise group),
    the score as text, a diamond when the latest upload has a named mistake,
    a dagger when exam mode holds the score from the student, and a ``title``
    for hover: the exercise, the score, the status, the named mistake with its
    sentence and the cell's marks in the model's words (``ExerciseCell.marks``:
    "held from the student until T", "late: counts 70%", "extension: due T",
    "regrade accepted", "rescored"). Screen readers read the same words
    ("not submitted", "crashed", "named mistake: ...") from hidden text.
    """
    parts: list[str] = []
    for k, group in enumerate(report.groups):
        for ex in group.exercise_ids:
            c = student.exercises[ex]
            shown = escape(ex)
            if not c.scored:
                parts.append(f'<td class="c b-none g g{k}"><span class="sr-only">not submitted</span></td>')
                continue
            text = format_score(c.best_score)
            look, mark, words = STATUS_LOOKS.get(c.last_status or "", ("", "", ""))
            title = f"{shown}: {text} / {format_score(c.max_score)}"
            marks = ""
            if words:
                title += f"; latest upload: {escape(words)}"
                if look:
                    marks += f'<span class="sr-only"> {escape(words.split(" (")[0])}</span>'
            if c.mistakes and c.last_status in ("failed", "passed"):
                named = c.mistakes[0]
                sentence = mistake_sentence(named)
                title += f"; named mistake {escape(named)}" + (f": {escape(sentence)}" if sentence else "")
                if len(c.mistakes) > 1:
                    title += f" (and {escape(', '.join(c.mistakes[1:]))})"
                marks += (
                    f'<span class="mk" aria-hidden="true">&#9670;</span><span class="sr-only"> named mistake:'
                    f" {escape(', '.join(c.mistakes))}</span>"
                )
            if c.late:  # its words ("late: counts 70%") are the model's, among c.marks below
                marks += '<span aria-hidden="true">*</span>'
            if c.override is not None:
                title += ", override"
                marks += '&#9998;<span class="sr-only"> override</span>'
            if any("held from the student" in m for m in c.marks):
                marks += '<span aria-hidden="true">&#8224;</span>'
            if c.marks:  # the model's words (standing.cell_marks): what the student sees of this score
                title += "; " + escape("; ".join(c.marks))
                marks += f'<span class="sr-only"> {escape("; ".join(c.marks))}</span>'
            lead = f'<span aria-hidden="true">{mark}</span>' if mark else ""
            classes = " ".join(filter(None, ("c", f"b-{band(c.fraction)}", look, "g", f"g{k}")))
            parts.append(f'<td class="{classes}" title="{title}">{lead}{text}{marks}</td>')
    for chapter, _ in report.chapters:
        q = student.quizzes[chapter]
        fraction = q.questions_correct / q.questions if q.attempts and q.questions else None
        done = '&#10003;<span class="sr-only"> complete</span>' if q.complete else ""
        if not q.attempts:  # the dash alone (from the stylesheet), as an exercise never submitted
            parts.append(
                f'<td class="c b-none g g{quiz_group[chapter]}" title="Quiz {escape(chapter)}: not started, '
                f'0 of {q.questions} right"><span class="sr-only">not started</span></td>'
            )
            continue
        parts.append(
            f'<td class="c b-{band(fraction)} g g{quiz_group[chapter]}" title="Quiz {escape(chapter)}: '
            f'{q.questions_correct} of {q.questions} right, {q.state}">'
            f"{q.questions_correct}/{q.questions}{done}</td>"
        )
    return Markup("".join(parts))


def items_by_chapter(items: list[Any]) -> dict[str, list[Any]]:
    """The quiz items (``class_report.ItemStats``) grouped by chapter."""
    grouped: dict[str, list[Any]] = {}
    for item in items:
        grouped.setdefault(item.chapter, []).append(item)
    return grouped


def offline_html(report: ClassReport, store: Store | None, title: str) -> str:
    """``grade report --format html``: overview, quiz items, every exercise and every student in one file."""
    links = Links(offline=True, anchors={s.name: k for k, s in enumerate(report.students)})
    now = parse_time(report.generated_at)
    exercises = [] if store is None else [exercise_detail(store, report, e) for e in report.exercise_ids]
    students = [] if store is None else [student_detail(store, report, s.name, reports_kept=1) for s in report.students]
    return render(
        "report.html.j2",
        title=title,
        course_name=report.course.name,
        links=links,
        with_script=True,
        csrf="",
        items_by_chapter=items_by_chapter(report.items),
        chapters=report.chapters,
        exercise_details=exercises,
        student_details=students,
        heading="h2",
        open_first=False,
        notice="",
        notice_error=False,
        **overview_context(report, Filters(), now),
    )
