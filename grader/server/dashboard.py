"""What the instructor's dashboard shows: the views of its pages, built from the class report and the store.

No web framework here: the course server's pages (grader/server/instructor.py)
and the offline ``grade report --format html`` (grader/server/class_html.py) render
these views with the same templates (grader/templates/dash_*.html.j2).

- the **overview**: :class:`Filters` (chapter, "struggling", sort) applied to
  the class report's students by :func:`overview_rows`;
- a **student** (:func:`student_detail`): every upload with its total over time,
  the report the student saw, quiz answers with first-try correctness, the
  instructor's overrides;
- an **exercise** (:func:`exercise_detail`): pass rate over time, score
  distribution, named mistakes ranked by students, unnamed failing checks.

Their charts are drawn by grader/term/class_charts.py, their HTML (links, the
grid, the offline file) by grader/server/dashboard_html.py; the instructor's
overrides are written by grader/term/overrides.py.

A student is *struggling* when their percent is below the threshold, or when
no upload has raised any of their exercise scores in the last N days (or
ever) while that percent is below 100. The percent is that of the chosen chapter; with no chapter chosen, of
the exercises already due (the chapters whose due date has passed), or of all
exercises where the course has no due date. Before anything was due (the chosen chapter's, or every chapter's
due date still to come) nobody is struggling: on day 0 nothing is late.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup

from grader.term.class_charts import Chart, LineChart, distribution_chart, line_chart
from grader.term.class_report import ClassReport, ExerciseStats, StudentRow, _number
from grader.student.course import counted_score, late_exercises, parse_time
from grader.student.engine.model import GradeReport, at_full_marks
from grader.student.feedback.report import format_text
from grader.student.sanitize import clean_text
from grader.student.store import Store, jobs

STRUGGLING_PERCENT = 50.0
INACTIVE_DAYS = 7
SORTS = ("name", "total", "activity", "late")
FIRST_ORDER = {"name": "asc", "total": "asc", "activity": "asc", "late": "desc"}  # the order a first click gives
UNNAMED_TOP = 10


# --- the overview -------------------------------------------------------------------------------


@dataclass
class Filters:
    """The overview's chapter filter, "struggling" filter and sort, as in its query string."""

    chapter: str = ""
    struggling: bool = False
    threshold: float = STRUGGLING_PERCENT
    days: float = INACTIVE_DAYS
    sort: str = "name"
    order: str = "asc"

    @classmethod
    def from_query(cls, query: Mapping[str, str], chapters: list[str]) -> "Filters":
        """Read the query string; a value that cannot be used falls back to its default."""

        def number(key: str, default: float, low: float, high: float) -> float:
            try:
                value = float(query.get(key, default))
            except ValueError:
                return default
            return min(max(value, low), high) if math.isfinite(value) else default

        sort = query.get("sort", "name")
        sort = sort if sort in SORTS else "name"
        order = query.get("order", FIRST_ORDER[sort])
        chapter = query.get("chapter", "")
        return cls(
            chapter=chapter if chapter in chapters else "",
            struggling=query.get("struggling", "") in ("1", "on", "true"),
            threshold=number("threshold", STRUGGLING_PERCENT, 0, 100),
            days=number("days", INACTIVE_DAYS, 0, 3650),
            sort=sort,
            order=order if order in ("asc", "desc") else "asc",
        )

    def query(self, **changes: Any) -> str:
        """The query string of these filters with some values changed (``?...``)."""
        values = {
            "chapter": self.chapter,
            "struggling": "1" if self.struggling else "",
            "threshold": f"{self.threshold:g}",
            "days": f"{self.days:g}",
            "sort": self.sort,
            "order": self.order,
        }
        values.update({k: v for k, v in changes.items()})
        return "?" + urlencode({k: v for k, v in values.items() if v != ""})

    def sort_link(self, key: str) -> str:
        """The query that sorts by ``key``: the other order when already sorted by it."""
        if key == self.sort:
            return self.query(sort=key, order="desc" if self.order == "asc" else "asc")
        return self.query(sort=key, order=FIRST_ORDER[key])

    def aria_sort(self, key: str) -> str:
        """``ascending``/``descending`` for the sorted column, ``none`` for the others."""
        if key != self.sort:
            return "none"
        return "ascending" if self.order == "asc" else "descending"


def due_exercises(report: ClassReport, now: datetime) -> list[str]:
    """The exercises of the chapters whose due date has passed (all exercises while none has)."""
    due = [
        e
        for c in report.course.chapters
        if c.due is not None and c.due <= now
        for e in c.exercises
        if e in report.exercise_ids
    ]
    return due or list(report.exercise_ids)


def nothing_due_yet(report: ClassReport, chapter: str, now: datetime) -> bool:
    """Whether the chapters with a due date (``chapter`` alone when one is chosen) all have it still to come."""
    dated = [c for c in report.course.chapters if c.due is not None and (not chapter or c.name == chapter)]
    return bool(dated) and all(c.due is not None and c.due > now for c in dated)


def struggling_percent(report: ClassReport, student: StudentRow, chapter: str, due: list[str]) -> float:
    """The percent the "struggling" threshold applies to: the chapter's, else that of the exercises due."""
    group = next((g for g in report.groups if g.name == chapter), None)
    return student.group_percent(group.exercise_ids if group else due)


def is_struggling(
    report: ClassReport, student: StudentRow, filters: Filters, now: datetime, due: list[str] | None = None
) -> bool:
    """Below the threshold or no progress in ``filters.days`` days, once something was due (see the module
    docstring)."""
    if nothing_due_yet(report, filters.chapter, now):
        return False
    due = due if due is not None else due_exercises(report, now)
    percent = struggling_percent(report, student, filters.chapter, due)
    if percent < filters.threshold:
        return True
    if percent >= 100.0 - 1e-9:
        return False  # everything counted is done: there is no progress left to make
    if student.last_progress is None:
        return True
    return now - parse_time(student.last_progress) > timedelta(days=filters.days)


@dataclass
class OverviewRow:
    """One student's row of the grid: shown or hidden by the filters."""

    student: StudentRow
    visible: bool
    struggling: bool
    group_percents: list[float]
    due_percent: float  # of the exercises due (the "struggling" percent without a chapter)


def sort_key(row: OverviewRow, key: str) -> Any:
    """The overview's order by ``key``, ties by name then id (as the page's script sorts: the
    template writes ``label | lower`` and the id into each row)."""
    s = row.student
    tie = (s.label.lower(), s.name)
    if key == "total":
        return (round(s.percent, 2), *tie)
    if key == "activity":
        return (s.last_activity or "", *tie)
    if key == "late":
        return (s.late_uploads, *tie)
    return tie


def overview_rows(report: ClassReport, filters: Filters, now: datetime) -> list[OverviewRow]:
    """Every student, sorted as asked, marked visible or not by the filters (the page hides, JS re-filters)."""
    rows = []
    due = due_exercises(report, now)
    for s in report.students:
        struggling = is_struggling(report, s, filters, now, due)
        rows.append(
            OverviewRow(
                s,
                struggling or not filters.struggling,
                struggling,
                [s.group_percent(g.exercise_ids) for g in report.groups],
                s.group_percent(due),
            )
        )
    rows.sort(key=lambda r: sort_key(r, filters.sort), reverse=filters.order == "desc")
    return rows


# --- a student's page -----------------------------------------------------------------------------


@dataclass
class AttemptView:
    """One upload of a student: its score, its total after it, whether it was late, its report."""

    id: int
    started_at: str
    score: float
    max_score: float
    total_after: float  # the student's counted exercise total right after this upload
    late_exercises: list[str]  # exercises graded after their chapter's due date
    report_text: str  # what the student saw (grader.student.feedback.report.format_text); "" when left out
    pictures_html: str = (
        ""  # the failing checks' pictures the student saw (grader.student.feedback.drawing); "" when none
    )
    label: str = ""  # "Submission 38" (the number the student was given) or "Upload 12" (no server)


@dataclass
class AnswerView:
    """One quiz answer: what was answered, whether right, when."""

    answer: str
    correct: bool
    at: str
    params: str = ""  # the numbers this student was given, for a parameterised question ("x=1.5, n=4")


@dataclass
class QuestionView:
    """A quiz question and a student's answers to it."""

    id: str
    prompt: str
    answers: list[AnswerView]

    @property
    def first_correct(self) -> bool | None:
        """Whether the first answer was right (None: never answered)."""
        return self.answers[0].correct if self.answers else None

    @property
    def ever_correct(self) -> bool:
        return any(a.correct for a in self.answers)


@dataclass
class StudentDetail:
    """Everything the student's page shows."""

    row: StudentRow
    attempts: list[AttemptView]  # newest first
    chart: LineChart
    quizzes: list[tuple[str, list[QuestionView]]]  # (chapter title, questions)
    overrides: list[dict[str, Any]]  # this student's override log, newest first


def _rebuild_report(store: Store, student: str, rows: list[dict[str, Any]]) -> GradeReport:
    """The report of one upload rebuilt from its recorded rows, the hidden checks' full pictures kept."""
    from grader.queue.records import rebuild_report

    return rebuild_report(store, student, rows, rows[0]["files_hash"] or "" if rows else "", instructor=True)


def pictures_html(report: GradeReport) -> str:
    """Each failing check's picture, under its name: as the student's own page (``grade view``) draws it, but for
    a hidden check the full picture, its expected values drawn (``instructor_figure``); "" when none."""
    from grader.student.feedback import drawing
    from grader.student.feedback.report_html import name_html

    parts = []
    for ex in report.exercises:
        for c in ex.checks:
            if c.passed or not c.figure:
                continue
            picture = (
                drawing.figure_html(c.instructor_figure, instructor=True)
                if c.instructor_figure
                else drawing.figure_html(c.figure)
            )
            parts.append(f"<h4>{name_html(ex.id)}, {html.escape(c.name)}</h4>{picture}")
    return f"<style>{drawing.CSS}</style>{''.join(parts)}" if parts else ""


def _params_text(raw: str | None) -> str:
    """The recorded parameters of a quiz answer (JSON) as ``name=value, ...``; "" for a fixed question."""
    if not raw:
        return ""
    try:
        values = json.loads(raw)
    except json.JSONDecodeError:
        return clean_text(raw, 120)
    if not isinstance(values, dict):
        return clean_text(raw, 120)
    return clean_text(", ".join(f"{k}={v}" for k, v in values.items()), 120)


def submission_numbers(store: Store, student: str) -> dict[int, int]:
    """attempt id -> the number of the server submission it recorded (what `grade submit` printed)."""
    return jobs.submission_numbers(store.db, student)


def attempt_label(attempt_id: int, submission_of: Mapping[int, int]) -> str:
    """The one name of an upload in every view: the student's "Submission N" when it came through the
    server (N is the job id the student was given), else "Upload N" (the attempt's id)."""
    job = submission_of.get(attempt_id)
    return f"Submission {job}" if job is not None else f"Upload {attempt_id}"


def student_detail(
    store: Store, report: ClassReport, student: str, reports_kept: int | None = None
) -> StudentDetail | None:
    """The student's page (None: not in the class). ``reports_kept``: how many of the latest uploads
    carry their full report (all when None; the offline report keeps one)."""
    row = report.student(student)
    if row is None:
        return None
    course = report.course
    by_attempt: dict[int, list[dict[str, Any]]] = {}
    for sub in store.submissions(student=student):
        by_attempt.setdefault(sub["attempt_id"], []).append(sub)
    history: dict[str, list[dict[str, Any]]] = {}
    views: list[AttemptView] = []
    submission_of = submission_numbers(store, student)
    series: list[tuple[datetime, float, str]] = []
    for attempt in sorted(store.attempts(student), key=lambda a: (a["started_at"], a["id"])):
        rows = by_attempt.get(attempt["id"], [])
        late = []
        for sub in rows:
            history.setdefault(sub["exercise"], []).append(sub)
            chapter = course.chapter_of(sub["exercise"], student)
            if chapter is not None and chapter.effective(sub["score"], parse_time(sub["started_at"]))[1]:  # its rule
                late.append(sub["exercise"])
        total = sum(counted_score(h, course.chapter_of(ex, student), course.rule).score for ex, h in history.items())
        views.append(
            AttemptView(
                attempt["id"],
                attempt["started_at"],
                attempt["score"],
                attempt["max_score"],
                total,
                late,
                "",
                label=attempt_label(attempt["id"], submission_of),
            )
        )
        series.append(
            (
                parse_time(attempt["started_at"]),
                total,
                f"{attempt['started_at']}: total {_number(total)} of {_number(row.max_total)}",
            )
        )
    views.reverse()
    keep = len(views) if reports_kept is None else reports_kept
    for view in views[:keep]:
        rows = by_attempt.get(view.id, [])
        rebuilt = _rebuild_report(store, student, rows) if rows else None
        shares = (
            {}
            if rebuilt is None
            else {  # the late notes the student's copy of this report carried
                item["exercise"]: item["counts"]
                for item in late_exercises(course, rebuilt.graded_exercises, parse_time(view.started_at), student)
            }
        )
        view.report_text = clean_text(format_text(rebuilt, late_shares=shares)) if rebuilt is not None else ""
        view.pictures_html = Markup(pictures_html(rebuilt)) if rebuilt is not None else ""  # drawn escaped: safe
    end = parse_time(report.generated_at)
    chart = line_chart(
        series, row.max_total, "{:.0f}", f"{row.label}'s exercise total after each upload", end, width=440, height=180
    )  # narrow enough to stay readable when a phone shrinks it

    answers: dict[tuple[str, str], list[AnswerView]] = {}
    for a in store.quiz_attempts(student):
        answers.setdefault((a["chapter"], a["question"]), []).append(
            AnswerView(clean_text(a["answer"], 200), bool(a["correct"]), a["answered_at"], _params_text(a["params"]))
        )
    quizzes = []
    for quiz in report.quizzes:
        questions = [
            QuestionView(q.id, q.display_prompt, answers.get((quiz.chapter, q.id), [])) for q in quiz.questions
        ]
        quizzes.append((quiz.title or quiz.chapter, questions))
    overrides = [o for o in report.overrides if o["student"] == student][::-1]
    return StudentDetail(row, views, chart, quizzes, overrides)


# --- an exercise's page ---------------------------------------------------------------------------


@dataclass
class UnnamedCheck:
    """A check that fails without a named mistake: the next mistake to add to the catalogue."""

    name: str
    students: int
    failures: int
    example: str


@dataclass
class ExerciseDetail:
    """Everything the exercise's page shows."""

    stats: ExerciseStats
    pass_chart: LineChart
    distribution: Chart
    never: int  # students who never submitted it
    unnamed: list[UnnamedCheck]


def pass_rate_series(store: Store, report: ClassReport, exercise: str) -> list[tuple[datetime, float, str]]:
    """The share of the class at full marks on ``exercise`` over time, counted as the grid counts it.

    After each upload the student's score is the one that counts
    (``course.counted_score``: late penalties, the course's rule), so the
    line ends where the page's "at full marks" figure stands; the
    instructor's overrides in force are applied at the report's time.
    """
    chapter = report.course.chapter_of(exercise)
    history: dict[str, list[dict[str, Any]]] = {}
    full: set[str] = set()
    size = len(report.students) or 1
    rows = sorted(store.submissions(exercise=exercise), key=lambda r: (parse_time(r["started_at"]), r["id"]))
    series: list[tuple[datetime, float, str]] = []
    for row in rows:  # by time (ids need not be in time order: imported data)
        when = parse_time(row["started_at"])
        if not series:
            series.append((when, 0.0, ""))  # the line starts at the first upload, at 0
        history.setdefault(row["student"], []).append(row)
        counted = counted_score(history[row["student"]], chapter, report.course.rule)
        before = len(full)
        if at_full_marks(counted.score, counted.max_score):
            full.add(row["student"])
        else:
            full.discard(row["student"])
        if len(full) != before:
            series.append(
                (when, len(full) / size, f"{when:%Y-%m-%d %H:%M}: {len(full)} of {size} students at full marks")
            )
    final = sum(1 for s in report.students if s.exercises[exercise].passed)
    if series and final != len(full):  # overrides in force
        end = parse_time(report.generated_at)
        series.append((end, final / size, f"with the instructor's overrides: {final} of {size} students at full marks"))
    return series


def exercise_detail(store: Store, report: ClassReport, exercise: str) -> ExerciseDetail | None:
    """The exercise's page (None: not an exercise of the report)."""
    if exercise not in report.exercise_ids:
        return None
    stats = report.exercises[report.exercise_ids.index(exercise)]
    series = pass_rate_series(store, report, exercise)
    end = parse_time(report.generated_at)
    pass_chart = line_chart(series, 1.0, "{:.0%}", f"Share of the class at full marks on {exercise}", end)
    cells = [s.exercises[exercise] for s in report.students]
    fractions = [c.fraction for c in cells if c.fraction is not None]

    failing: dict[str, dict[str, Any]] = {}
    for check in store.failing_checks(exercise):
        if check["misconception"]:
            continue
        entry = failing.setdefault(check["name"], {"students": set(), "failures": 0, "example": ""})
        entry["students"].add(check["student"])
        entry["failures"] += 1
        entry["example"] = entry["example"] or clean_text(check["message"] or "", 300)
    unnamed = sorted(
        (UnnamedCheck(name, len(e["students"]), e["failures"], e["example"]) for name, e in failing.items()),
        key=lambda u: (-u.students, -u.failures, u.name),
    )
    return ExerciseDetail(
        stats,
        pass_chart,
        distribution_chart([float(f) for f in fractions]),
        len(cells) - len(fractions),
        unnamed[:UNNAMED_TOP],
    )
