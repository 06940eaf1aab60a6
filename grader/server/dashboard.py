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
  distribution, named mistakes ranked by students, unnamed failing checks;
- **overrides** (:func:`record_override`): the instructor's score for an
  exercise, with a required comment, appended to the ``score_overrides`` log.

A student is *struggling* when their percent is below the threshold, or when
no upload has raised any of their exercise scores in the last N days (or
ever) while that percent is below 100. The percent is that of the chosen chapter; with no chapter chosen, of
the exercises already due (the chapters whose due date has passed), or of all
exercises where the course has no due date. Before anything was due (the chosen chapter's, or every chapter's
due date still to come) nobody is struggling: on day 0 nothing is late.
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote, urlencode

from grader.term.class_report import (
    Bar,
    Chart,
    ClassReport,
    ExerciseStats,
    StudentRow,
    _mistake_texts,
    _number,
    environment,
    histogram_chart,
    pass_rate_chart,
)
from markupsafe import Markup, escape

from grader.term.class_report import band
from grader.term.regrade import instructor_score
from grader.student.course import counted_score, late_exercises, parse_time
from grader.student.errors import GraderError
from grader.student.engine.model import GradeReport, at_full_marks
from grader.student.feedback.report import format_score, format_text
from grader.student.sanitize import clean_text
from grader.student.store import Store, jobs, utc_now
from grader.student.store import overrides as override_log

STRUGGLING_PERCENT = 50.0
INACTIVE_DAYS = 7
SORTS = ("name", "total", "activity", "late")
FIRST_ORDER = {"name": "asc", "total": "asc", "activity": "asc", "late": "desc"}  # the order a first click gives
COMMENT_MAX = 500
UNNAMED_TOP = 10


class DashboardError(GraderError):
    """A request the dashboard cannot carry out (one line: what was wrong and what to do)."""


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


# --- charts -------------------------------------------------------------------------------------


@dataclass
class LineChart:
    """An SVG line over time: its size, its points (x, y, tooltip), and axis ticks (position, text; the time
    axis's also their anchor: start, middle or end, so that no label leaves the picture)."""

    width: float
    height: float
    points: list[tuple[float, float, str]]
    x_ticks: list[tuple[float, str, str]]
    y_ticks: list[tuple[float, str]]
    left: float
    bottom: float
    label: str

    @property
    def path(self) -> str:
        """The polyline's points attribute, as a step line (each value holds until the next)."""
        out: list[str] = []
        for k, (x, y, _) in enumerate(self.points):
            if k:
                out.append(f"{x:.1f},{self.points[k - 1][1]:.1f}")
            out.append(f"{x:.1f},{y:.1f}")
        return " ".join(out)


def line_chart(
    series: list[tuple[datetime, float, str]],
    y_max: float,
    y_format: str,
    label: str,
    end: datetime | None = None,
    width: float = 560,
    height: float = 200,
) -> LineChart:
    """A step line of (time, value, tooltip) from the first time to ``end`` (default: the last)."""
    left, right, top, bottom = 44.0, 12.0, 10.0, 30.0
    plot_w, plot_h = width - left - right, height - top - bottom
    y_max = y_max or 1.0
    if not series:
        return LineChart(width, height, [], [], [], left, top + plot_h, label)
    start = series[0][0]
    stop = max(end or series[-1][0], series[-1][0])
    span = max((stop - start).total_seconds(), 1.0)

    def x_of(t: datetime) -> float:
        return left + plot_w * (t - start).total_seconds() / span

    def y_of(v: float) -> float:
        return top + plot_h - plot_h * min(max(v / y_max, 0.0), 1.0)

    points = [(x_of(t), y_of(v), tip) for t, v, tip in series]
    if end is not None and end > series[-1][0]:
        points.append((x_of(end), points[-1][1], ""))
    x_ticks = []
    for when, text in time_ticks(start, stop):
        x = x_of(when)
        half = 3.6 * len(text)  # about half the label's width at 12 px
        anchor = "start" if x - half < 2 else "end" if x + half > width - 2 else "middle"
        x_ticks.append((x, text, anchor))
    y_ticks = [(y_of(y_max * f), y_format.format(y_max * f)) for f in (0, 0.5, 1)]
    return LineChart(width, height, points, x_ticks, y_ticks, left, top + plot_h, label + " (times in UTC)")


# Tick spacings of a time axis, the shortest first: minutes, hours, days, weeks, months.
TICK_STEPS = (
    [timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30)]
    + [timedelta(hours=h) for h in (1, 2, 3, 6, 12)]
    + [timedelta(days=d) for d in (1, 2, 7, 14, 28, 56, 91)]
)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def time_ticks(start: datetime, stop: datetime, most: int = 4) -> list[tuple[datetime, str]]:
    """Round times from ``start`` to ``stop``, at most ``most`` + 1, and their labels.

    The spacing is the shortest of TICK_STEPS that gives no more than ``most`` + 1
    round times. Under a day apart, ticks say the time of day ("14:30"), with the
    date ("Dec 02 14:30") on the first and wherever the day changes; a day or
    more apart, the date alone. Times are UTC, as stored. With fewer than two
    round times in the span, its two ends are the ticks.
    """
    if start.tzinfo is None:
        start, stop = start.replace(tzinfo=timezone.utc), stop.replace(tzinfo=timezone.utc)
    span = stop - start

    def multiples(step: timedelta) -> range:
        """k with start <= EPOCH + k * step <= stop."""
        return range(math.ceil((start - EPOCH) / step), math.floor((stop - EPOCH) / step) + 1)

    step = next((s for s in TICK_STEPS if len(multiples(s)) <= most + 1), TICK_STEPS[-1])
    times = [EPOCH + step * k for k in multiples(step)]
    if len(times) < 2:
        times = [start, stop] if stop > start else [start]
    fine = step < timedelta(days=1) or span < timedelta(days=1)
    clock = "%H:%M:%S" if span < timedelta(minutes=2) else "%H:%M"  # seconds apart: the seconds tell them apart
    ticks: list[tuple[datetime, str]] = []
    day = None
    for when in times:
        if not fine:
            label = when.strftime("%b %d")
        elif when.date() != day:
            label = when.strftime(f"%b %d {clock}")
        else:
            label = when.strftime(clock)
        day = when.date()
        if not ticks or label != ticks[-1][1]:
            ticks.append((when, label))
    return ticks


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


def distribution_chart(fractions: list[float], width: float = 560, height: float = 200) -> Chart:
    """Students per tenth of the max score (the last bar: full marks)."""
    counts = [0] * 11
    for f in fractions:
        counts[min(10, max(0, int(math.floor(f * 10 + 1e-9))))] += 1
    left, right, top, bottom = 36.0, 8.0, 18.0, 34.0
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max(counts) or 1
    step = plot_w / len(counts)
    bars = []
    for k, count in enumerate(counts):
        h = plot_h * count / most
        label = "100%" if k == 10 else f"{10 * k}%"
        what = "at full marks" if k == 10 else f"with {10 * k}% to {10 * k + 10}%"
        bars.append(
            Bar(
                left + k * step + 2,
                top + plot_h - h,
                step - 4,
                h,
                label,
                str(count),
                f"{count} student{'s' if count != 1 else ''} {what}",
            )
        )
    ticks = [(top + plot_h - plot_h * v / most, str(v)) for v in sorted({0, most // 2, most})]
    return Chart(width, height, bars, ticks, baseline=top + plot_h, label_x=left)


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


# --- overrides -------------------------------------------------------------------------------------


def record_override(
    store: Store, report: ClassReport, student: str, exercise: str, score: str, comment: str, author: str = "instructor"
) -> dict[str, Any]:
    """Append an override to the log (an empty ``score`` withdraws the one in force); the row written.

    DashboardError (one line) for an unknown student or exercise, a score that
    is not a number from 0 to the exercise's max score, or a missing comment.
    """
    row = report.student(student)
    if row is None:
        raise DashboardError(f"'{student}' is not a student of this course: pick one from the overview")
    if exercise not in row.exercises:
        raise DashboardError(f"'{exercise}' is not an exercise of this course: pick one from the list")
    comment = " ".join(comment.split())
    if not comment:
        raise DashboardError("an override needs a comment saying why: write one and submit again")
    if len(comment) > COMMENT_MAX:
        raise DashboardError(f"the comment is {len(comment)} characters; keep it under {COMMENT_MAX}")
    max_score = row.exercises[exercise].max_score
    value: float | None = None
    if score.strip():
        try:
            value = instructor_score(score, max_score, "withdraw the override")
        except ValueError as exc:
            raise DashboardError(str(exc)) from None
    elif row.exercises[exercise].override is None:
        raise DashboardError(f"{exercise} has no override to withdraw: give a score")
    when = utc_now()
    entry = {
        "student": student,
        "exercise": exercise,
        "score": value,
        "comment": comment,
        "author": author,
        "created_at": when,
    }
    with store.transaction() as db:
        entry["id"] = override_log.add(db, student, exercise, value, comment, author, when)
    return entry


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
