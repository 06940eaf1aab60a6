"""Class reports for the instructor, built from the progress database only.

``build(store, exercise_ids, quizzes)`` reads every student's best scores,
quiz answers and diagnosed mistakes into a :class:`ClassReport`, which is then
written as

- HTML (:func:`format_html`): one self-contained file (inline CSS and SVG, no
  script, no external URL) with the class summary, the score distribution and
  the per-exercise pass rates as SVG charts, the most frequent diagnosed
  mistakes per exercise, quiz item difficulty and a table per student;
  printable (``@media print``);
- CSV (:func:`format_csv`): one row per student: student, total, one column per
  exercise (best score, empty when never graded) and one per quiz chapter
  (``quiz:<chapter>``: 1 when complete, else 0), ready for a gradebook;
- JSON (:func:`format_json`): the same data, structured.

Definitions. A student's total is the sum over the course's exercises of the
best score recorded (0 when never graded); percent = 100 * total / the sum of
max scores. An exercise is *passed* by a student whose best score reaches its
max score; its pass rate is passed students / all students. A mistake's count
is the number of students with at least one graded check diagnosed as it.
An item's difficulty is the fraction of students whose *first* answer to it
was correct (lower is harder).
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import jinja2

from grader.student.sanitize import csv_cell

from grader.student import catalogue
from grader import quiz as quiz_lib
from grader.student.course import Course
from grader.progress import DEFAULT_MAX_SCORE
from grader.quiz import Quiz
from grader.student.report import format_score, mistake_entry, status_style
from grader.student.store import Store

HISTOGRAM_BINS = 10
TOP_MISTAKES = 5
TEMPLATE = "report.html.j2"


# --- the data ------------------------------------------------------------------------------


@dataclass
class ExerciseCell:
    """One student's standing on one exercise (attempts 0: never graded)."""

    best_score: float = 0.0
    max_score: float = DEFAULT_MAX_SCORE
    last_status: str | None = None
    attempts: int = 0
    mistakes: list[str] = field(default_factory=list)  # diagnosed in the latest graded submission
    message: str = ""  # the latest submission's exercise-level reason (timeout, crash, forbidden import)

    @property
    def passed(self) -> bool:
        return self.attempts > 0 and self.best_score >= self.max_score - 1e-9

    def to_json(self) -> dict[str, Any]:
        return {
            "best_score": round(self.best_score, 6) if self.attempts else None,
            "max_score": self.max_score,
            "last_status": self.last_status,
            "attempts": self.attempts,
            "passed": self.passed,
            "mistakes": list(self.mistakes),
            "message": self.message,
        }


@dataclass
class StudentRow:
    """A student: one cell per exercise, the quiz standing per chapter, totals."""

    name: str
    exercises: dict[str, ExerciseCell]
    quizzes: dict[str, quiz_lib.ChapterProgress]
    last_attempt: str | None = None

    @property
    def total(self) -> float:
        return sum(c.best_score for c in self.exercises.values())

    @property
    def max_total(self) -> float:
        return sum(c.max_score for c in self.exercises.values())

    @property
    def percent(self) -> float:
        """100 * total / max_total (0 when there is nothing to score)."""
        return 100.0 * self.total / self.max_total if self.max_total else 0.0

    @property
    def exercises_passed(self) -> int:
        return sum(1 for c in self.exercises.values() if c.passed)

    @property
    def quizzes_complete(self) -> int:
        return sum(1 for q in self.quizzes.values() if q.complete)

    @property
    def complete(self) -> bool:
        """Every exercise at full marks and every quiz chapter complete."""
        return self.exercises_passed == len(self.exercises) and self.quizzes_complete == len(self.quizzes)

    def to_json(self) -> dict[str, Any]:
        return {
            "student": self.name,
            "total": round(self.total, 6),
            "max_total": self.max_total,
            "percent": round(self.percent, 2),
            "exercises_passed": self.exercises_passed,
            "quizzes_complete": self.quizzes_complete,
            "complete": self.complete,
            "last_attempt": self.last_attempt,
            "exercises": {k: c.to_json() for k, c in self.exercises.items()},
            "quizzes": {k: q.to_json() for k, q in self.quizzes.items()},
        }


@dataclass
class MistakeCount:
    """A diagnosed mistake of one exercise: how many students made it, and what it is."""

    id: str
    students: int
    sentence: str = ""
    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "students": self.students, "sentence": self.sentence, "fix": self.fix}


@dataclass
class ExerciseStats:
    """Class-wide figures of one exercise."""

    id: str
    max_score: float
    attempted: int        # students with at least one graded submission
    passed: int           # students whose best score is full marks
    students: int         # students in the report
    mean_best: float      # mean best score over all students (0 for never graded)
    mistakes: list[MistakeCount] = field(default_factory=list)

    @property
    def pass_rate(self) -> float:
        """passed / students (0 for an empty class)."""
        return self.passed / self.students if self.students else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "max_score": self.max_score,
            "students": self.students,
            "attempted": self.attempted,
            "passed": self.passed,
            "pass_rate": round(self.pass_rate, 6),
            "mean_best": round(self.mean_best, 6),
            "mistakes": [m.to_json() for m in self.mistakes],
        }


@dataclass
class ItemStats:
    """A quiz question: how many students answered it, and how many got it right the first time."""

    chapter: str
    question: str
    prompt: str
    checkpoint: bool
    answered: int          # students with at least one answer
    first_correct: int     # of those, whose first answer was correct
    answers: int           # answers recorded, all attempts

    @property
    def difficulty(self) -> float | None:
        """first_correct / answered: the fraction right at the first try (None when nobody answered)."""
        return self.first_correct / self.answered if self.answered else None

    def to_json(self) -> dict[str, Any]:
        return {
            "chapter": self.chapter,
            "question": self.question,
            "prompt": self.prompt,
            "checkpoint": self.checkpoint,
            "answered": self.answered,
            "first_correct": self.first_correct,
            "answers": self.answers,
            "difficulty": None if self.difficulty is None else round(self.difficulty, 6),
        }


@dataclass
class Bin:
    """One bar of the score histogram: students with low <= percent < high (the last bin includes 100)."""

    low: float
    high: float
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "count": self.count}


@dataclass
class ClassReport:
    """Everything the class reports show."""

    generated_at: str
    exercise_ids: list[str]
    chapters: list[tuple[str, str]]       # (chapter, title) of the quiz chapters
    students: list[StudentRow]
    exercises: list[ExerciseStats]
    items: list[ItemStats]

    @property
    def percents(self) -> list[float]:
        return [s.percent for s in self.students]

    @property
    def mean_percent(self) -> float:
        return statistics.fmean(self.percents) if self.students else 0.0

    @property
    def median_percent(self) -> float:
        return statistics.median(self.percents) if self.students else 0.0

    @property
    def mean_total(self) -> float:
        return statistics.fmean(s.total for s in self.students) if self.students else 0.0

    @property
    def median_total(self) -> float:
        return statistics.median(s.total for s in self.students) if self.students else 0.0

    @property
    def max_total(self) -> float:
        return self.students[0].max_total if self.students else 0.0

    @property
    def exercise_completion(self) -> float:
        """Mean over students of the fraction of exercises at full marks."""
        if not self.students or not self.exercise_ids:
            return 0.0
        return statistics.fmean(s.exercises_passed / len(self.exercise_ids) for s in self.students)

    @property
    def quiz_completion(self) -> float:
        """Mean over students of the fraction of quiz chapters complete."""
        if not self.students or not self.chapters:
            return 0.0
        return statistics.fmean(s.quizzes_complete / len(self.chapters) for s in self.students)

    @property
    def students_complete(self) -> int:
        return sum(1 for s in self.students if s.complete)

    def histogram(self, bins: int = HISTOGRAM_BINS) -> list[Bin]:
        """Students per band of percent: [0, 10), [10, 20), ..., [90, 100] for 10 bins."""
        width = 100.0 / bins
        counts = [0] * bins
        for p in self.percents:
            counts[min(bins - 1, max(0, int(p // width)))] += 1
        return [Bin(k * width, (k + 1) * width, counts[k]) for k in range(bins)]

    def summary(self) -> dict[str, Any]:
        return {
            "students": len(self.students),
            "max_total": self.max_total,
            "mean_total": round(self.mean_total, 6),
            "median_total": round(self.median_total, 6),
            "mean_percent": round(self.mean_percent, 2),
            "median_percent": round(self.median_percent, 2),
            "exercise_completion": round(self.exercise_completion, 6),
            "quiz_completion": round(self.quiz_completion, 6),
            "students_complete": self.students_complete,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "generated_at": self.generated_at,
            "summary": self.summary(),
            "exercise_ids": list(self.exercise_ids),
            "quiz_chapters": [c for c, _ in self.chapters],
            "histogram": [b.to_json() for b in self.histogram()],
            "exercises": [e.to_json() for e in self.exercises],
            "quiz_items": [i.to_json() for i in self.items],
            "students": [s.to_json() for s in self.students],
        }


# --- building it from the store ---------------------------------------------------------------


def _mistake_texts(mistake_id: str) -> tuple[str, str]:
    """(sentence, fix) of a known mistake from ``grader.mistakes.CATALOGUE``; ('', '') when unknown."""
    import grader.mistakes  # noqa: F401  (registers the catalogue's sentences with grader.student.diagnosis)

    entry = mistake_entry(mistake_id)
    if entry is None:
        return "", ""
    return str(getattr(entry, "sentence", "")), str(getattr(entry, "fix", ""))


def _diagnosed(store: Store, submission_id: int) -> list[str]:
    """The distinct mistake ids diagnosed in one submission's checks, in check order."""
    seen: list[str] = []
    for row in store.check_results(submission_id):
        mistake = row.get("misconception")
        if mistake and mistake not in seen:
            seen.append(mistake)
    return seen


def build(
    store: Store,
    exercise_ids: list[str] | None = None,
    quizzes: list[Quiz] | None = None,
    generated_at: str | None = None,
    course: Course | None = None,
) -> ClassReport:
    """Read the class report from ``store``.

    ``exercise_ids``: the columns (default: the course's exercises; exercises
    recorded in the store but not listed are appended). ``quizzes``: the quiz
    chapters (default: none). ``course``: which score counts (``grader.student.course``;
    default: the best ever).
    """
    ids = list(exercise_ids) if exercise_ids is not None else list(catalogue.EXERCISES)
    quizzes = list(quizzes or [])
    names = store.students()
    submissions = store.submissions()
    for row in submissions:
        if row["exercise"] not in ids:
            ids.append(row["exercise"])

    # diagnosed mistakes: per submission (graded, not passed), then per student and exercise
    mistakes_of: dict[int, list[str]] = {}
    for row in submissions:
        if row["status"] != "passed":
            found = _diagnosed(store, row["id"])
            if found:
                mistakes_of[row["id"]] = found
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    seen: dict[str, dict[str, set[str]]] = {i: {} for i in ids}  # exercise -> mistake -> students
    for row in submissions:
        latest[(row["student"], row["exercise"])] = row
        for mistake in mistakes_of.get(row["id"], []):
            seen[row["exercise"]].setdefault(mistake, set()).add(row["student"])

    last_attempt: dict[str, str] = {}
    for row in store.attempts():
        last_attempt[row["student"]] = row["started_at"]

    answers = store.quiz_attempts()
    students: list[StudentRow] = []
    for name in names:
        best = store.best_scores(name, course)
        cells: dict[str, ExerciseCell] = {}
        for ex in ids:
            entry = best.get(ex)
            if entry is None:
                cells[ex] = ExerciseCell()
                continue
            last = latest.get((name, ex), {})
            cells[ex] = ExerciseCell(
                float(entry["best_score"]), float(entry["max_score"]), entry["last_status"],
                int(entry["attempts"]), list(mistakes_of.get(last.get("id", -1), [])),
                str(last.get("message") or ""),
            )
        mine = [a for a in answers if a["student"] == name]
        standings = {q.chapter: quiz_lib.chapter_progress(q, mine) for q in quizzes}
        students.append(StudentRow(name, cells, standings, last_attempt.get(name)))

    exercises: list[ExerciseStats] = []
    for ex in ids:
        cells_ex = [s.exercises[ex] for s in students]
        max_score = next((c.max_score for c in cells_ex if c.attempts), DEFAULT_MAX_SCORE)
        ranked = sorted(seen[ex].items(), key=lambda kv: (-len(kv[1]), kv[0]))[:TOP_MISTAKES]
        exercises.append(
            ExerciseStats(
                id=ex,
                max_score=max_score,
                attempted=sum(1 for c in cells_ex if c.attempts),
                passed=sum(1 for c in cells_ex if c.passed),
                students=len(students),
                mean_best=statistics.fmean(c.best_score for c in cells_ex) if cells_ex else 0.0,
                mistakes=[MistakeCount(m, len(who), *_mistake_texts(m)) for m, who in ranked],
            )
        )

    return ClassReport(
        generated_at=generated_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        exercise_ids=ids,
        chapters=[(q.chapter, q.title) for q in quizzes],
        students=students,
        exercises=exercises,
        items=item_stats(answers, quizzes),
    )


def item_stats(answers: list[dict[str, Any]], quizzes: list[Quiz]) -> list[ItemStats]:
    """Per quiz question, in course order (then questions only the store knows): first-try correctness.

    ``answers`` are store rows (student, chapter, question, correct), oldest first.
    """
    first: dict[tuple[str, str], dict[str, bool]] = {}   # (chapter, question) -> student -> first correct
    counts: dict[tuple[str, str], int] = {}
    for row in answers:
        key = (row["chapter"], row["question"])
        first.setdefault(key, {}).setdefault(row["student"], bool(row["correct"]))
        counts[key] = counts.get(key, 0) + 1
    items: list[ItemStats] = []
    known: set[tuple[str, str]] = set()
    for quiz in quizzes:
        for q in quiz.questions:
            key = (quiz.chapter, q.id)
            known.add(key)
            firsts = first.get(key, {})
            items.append(ItemStats(
                quiz.chapter, q.id, q.prompt, q.checkpoint, len(firsts), sum(firsts.values()), counts.get(key, 0)
            ))
    for key in sorted(k for k in first if k not in known):
        firsts = first[key]
        items.append(ItemStats(key[0], key[1], "", False, len(firsts), sum(firsts.values()), counts[key]))
    return items


# --- CSV and JSON ------------------------------------------------------------------------------


def _number(value: float) -> str:
    """A score for a spreadsheet: at most 4 decimals, no trailing zeros (9.5, 10, 4.3333)."""
    text = f"{round(value, 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def csv_header(report: ClassReport) -> list[str]:
    """student, total, one column per exercise id, one ``quiz:<chapter>`` per quiz chapter."""
    return ["student", "total"] + list(report.exercise_ids) + [f"quiz:{c}" for c, _ in report.chapters]


def format_csv(report: ClassReport) -> str:
    """One row per student: total, best score per exercise (empty: never graded), quiz chapter complete 1/0.

    A student name a spreadsheet would run as a formula (``=HYPERLINK(...)``) is neutralised.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_header(report))
    for s in report.students:
        row = [csv_cell(s.name), _number(s.total)]
        for ex in report.exercise_ids:
            cell = s.exercises[ex]
            row.append(_number(cell.best_score) if cell.attempts else "")
        for chapter, _ in report.chapters:
            row.append("1" if s.quizzes[chapter].complete else "0")
        writer.writerow(row)
    return buffer.getvalue()


def format_json(report: ClassReport) -> str:
    """The whole report as one JSON document."""
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False)


# --- HTML: charts as SVG geometry, then the template --------------------------------------------


@dataclass
class Bar:
    """One bar of an SVG chart, in pixels, with its labels."""

    x: float
    y: float
    width: float
    height: float
    label: str
    value: str
    title: str = ""


@dataclass
class Chart:
    """An SVG chart: its size, its bars, and axis ticks (position, text)."""

    width: float
    height: float
    bars: list[Bar]
    ticks: list[tuple[float, str]] = field(default_factory=list)
    baseline: float = 0.0
    label_x: float = 0.0


def histogram_chart(bins: list[Bin], width: float = 560, height: float = 240) -> Chart:
    """Vertical bars, one per percent band; bar height proportional to the number of students."""
    left, right, top, bottom = 36.0, 8.0, 18.0, 40.0
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max((b.count for b in bins), default=0) or 1
    step = plot_w / max(1, len(bins))
    bars = []
    for k, b in enumerate(bins):
        h = plot_h * b.count / most
        high = "100" if k == len(bins) - 1 else f"{b.high:g}"
        bars.append(Bar(
            x=left + k * step + 2, y=top + plot_h - h, width=step - 4, height=h,
            label=f"{b.low:g}-{high}", value=str(b.count),
            title=f"{b.count} student{'s' if b.count != 1 else ''} with {b.low:g}% to {high}%",
        ))
    ticks = [(top + plot_h - plot_h * v / most, str(v)) for v in sorted({0, most // 2, most})]
    return Chart(width, height, bars, ticks, baseline=top + plot_h, label_x=left)


def pass_rate_chart(stats: list[ExerciseStats], width: float = 560) -> Chart:
    """Horizontal bars, one per exercise: the fraction of students at full marks."""
    label_w, value_w, row, top = 190.0, 48.0, 18.0, 6.0
    plot_w = width - label_w - value_w
    bars = [
        Bar(
            x=label_w, y=top + k * row, width=plot_w * s.pass_rate, height=row - 4,
            label=s.id, value=f"{100 * s.pass_rate:.0f}%",
            title=f"{s.id}: {s.passed} of {s.students} students at full marks",
        )
        for k, s in enumerate(stats)
    ]
    height = top * 2 + row * len(stats)
    ticks = [(label_w + plot_w * f, f"{100 * f:.0f}%") for f in (0.0, 0.5, 1.0)]
    return Chart(width, height, bars, ticks, baseline=label_w + plot_w, label_x=label_w)


def _environment() -> jinja2.Environment:
    """The jinja2 environment over ``grader/templates`` (autoescaped)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = format_score
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.0f}%"
    return env


def status_label(status: str | None) -> str:
    """The report label of a status (PASS, FAIL, TODO, ERROR, TIMEOUT); '-' when never graded."""
    return status_style(status)[0]


def format_html(report: ClassReport, title: str = "normgrade class report") -> str:
    """The self-contained HTML report (inline CSS and SVG; no script, no external resource)."""
    template = _environment().get_template(TEMPLATE)
    return template.render(
        title=title,
        report=report,
        summary=report.summary(),
        histogram=histogram_chart(report.histogram()),
        pass_rates=pass_rate_chart(report.exercises),
        mistakes=[e for e in report.exercises if e.mistakes],
        items=report.items,
        status_label=status_label,
    )
