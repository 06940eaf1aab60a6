"""The class report's model (grader/term/class_report.py): the dataclasses of a class's report and
:func:`build`, which reads them from the progress database; the quiz items' statistics.

Definitions. A student's total is the sum over the course's exercises of the
best score recorded (0 when never graded); percent = 100 * total / the sum of
max scores. An exercise is *passed* by a student whose best score reaches its
max score; its pass rate is passed students / all students. A mistake's count
is the number of students with at least one graded check diagnosed as it.
An item's difficulty is the fraction of students whose *first* answer to it
was correct (lower is harder).
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


from grader.student.engine import catalogue
from grader.student.engine.model import at_full_marks
from grader import quiz as quiz_lib
from grader.student.course import DEFAULT_COURSE, Course, counted_score, parse_time
from grader.term import regrade, standing
from grader.term.progress import DEFAULT_MAX_SCORE
from grader.quiz import Quiz
from grader.student.feedback.report import mistake_entry
from grader.student.store import Store

HISTOGRAM_BINS = 10
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
    late: bool = False  # the counted attempt was late (penalised)
    override: float | None = None  # the instructor's manual score, which counts instead of the graded one
    override_comment: str = ""
    graded_score: float = 0.0  # the counted graded score, whatever the override
    marks: tuple[str, ...] = ()  # what the student sees of it, in the model's words (standing.cell_marks)

    @property
    def scored(self) -> bool:
        """Graded at least once, or given a score by the instructor."""
        return self.attempts > 0 or self.override is not None

    @property
    def passed(self) -> bool:
        return self.scored and at_full_marks(self.best_score, self.max_score)

    @property
    def fraction(self) -> float | None:
        """best_score / max_score (None when never scored): what the overview grid colours."""
        if not self.scored:
            return None
        return self.best_score / self.max_score if self.max_score else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "best_score": round(self.best_score, 6) if self.scored else None,
            "max_score": self.max_score,
            "last_status": self.last_status,
            "attempts": self.attempts,
            "passed": self.passed,
            "mistakes": list(self.mistakes),
            "message": self.message,
            "late": self.late,
            "marks": list(self.marks),
            "graded_score": round(self.graded_score, 6) if self.attempts else None,
            "override": None if self.override is None else {"score": self.override, "comment": self.override_comment},
        }


@dataclass
class StudentRow:
    """A student: one cell per exercise, the quiz standing per chapter, totals."""

    name: str
    exercises: dict[str, ExerciseCell]
    quizzes: dict[str, quiz_lib.ChapterProgress]
    last_attempt: str | None = None
    full_name: str = ""  # the roster's name (the course server's), "" without a roster
    email: str = ""
    last_activity: str | None = None  # the latest upload or quiz answer
    last_progress: str | None = None  # the latest upload that raised the best score of an exercise
    late_uploads: int = 0  # uploads with at least one exercise after its chapter's due date
    quiz_points: dict[str, float] = field(default_factory=dict)  # chapter -> points of questions answered right

    @property
    def label(self) -> str:
        """The roster name when there is one, else the id."""
        return self.full_name or self.name

    def group_percent(self, exercise_ids: list[str]) -> float:
        """100 * points / points possible over some exercises (a chapter)."""
        cells = [self.exercises[e] for e in exercise_ids if e in self.exercises]
        possible = sum(c.max_score for c in cells)
        return 100.0 * sum(c.best_score for c in cells) / possible if possible else 0.0

    @functools.cached_property
    def total(self) -> float:
        """The sum of the exercises' counted scores (read once the row is complete: it is cached)."""
        return sum(c.best_score for c in self.exercises.values())

    @functools.cached_property
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
            "name": self.full_name,
            "email": self.email,
            "last_activity": self.last_activity,
            "last_progress": self.last_progress,
            "late_uploads": self.late_uploads,
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
    attempted: int  # students with at least one graded submission
    passed: int  # students whose best score is full marks
    students: int  # students in the report
    mean_best: float  # mean best score over all students (0 for never graded)
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
    answered: int  # students with at least one answer
    first_correct: int  # of those, whose first answer was correct
    answers: int  # answers recorded, all attempts
    discrimination: float | None = None  # upper minus lower group's first-try rate (None: too few students)
    wrong_answer: str = ""  # the wrong answer given by the most students ("" when none was wrong)
    wrong_students: int = 0

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
            "discrimination": None if self.discrimination is None else round(self.discrimination, 6),
            "wrong_answer": self.wrong_answer,
            "wrong_students": self.wrong_students,
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
class Group:
    """An assignment group of exercises: a course chapter, or a catalogue topic without a course file."""

    name: str
    exercise_ids: list[str]

    def max_score(self, student: StudentRow) -> float:
        return sum(student.exercises[e].max_score for e in self.exercise_ids)

    def score(self, student: StudentRow) -> float:
        return sum(student.exercises[e].best_score for e in self.exercise_ids)


@dataclass
class ClassReport:
    """Everything the class reports show."""

    generated_at: str
    exercise_ids: list[str]
    chapters: list[tuple[str, str]]  # (chapter, title) of the quiz chapters
    students: list[StudentRow]
    exercises: list[ExerciseStats]
    items: list[ItemStats]
    groups: list[Group] = field(default_factory=list)
    overrides: list[dict[str, Any]] = field(default_factory=list)  # the override log, oldest first
    course: Course = DEFAULT_COURSE
    quizzes: list[Quiz] = field(default_factory=list)

    def student(self, name: str) -> StudentRow | None:
        """The row of one student (None: not in the class)."""
        return next((s for s in self.students if s.name == name), None)

    def group_of(self, exercise_id: str) -> str:
        """The name of the group holding an exercise."""
        return next((g.name for g in self.groups if exercise_id in g.exercise_ids), "")

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
            "groups": [{"name": g.name, "exercises": list(g.exercise_ids)} for g in self.groups],
            "overrides": [dict(row) for row in self.overrides],
        }


# --- building it from the store ---------------------------------------------------------------


def _mistake_texts(mistake_id: str) -> tuple[str, str]:
    """(sentence, fix) of a known mistake from ``grader.mistakes.CATALOGUE``; ('', '') when unknown."""
    import grader.mistakes  # noqa: F401  (registers the catalogue's sentences with grader.student.engine.diagnosis)

    entry = mistake_entry(mistake_id)
    if entry is None:
        return "", ""
    return str(getattr(entry, "sentence", "")), str(getattr(entry, "fix", ""))


def exercise_groups(ids: list[str], course: Course) -> list[Group]:
    """The assignment groups: the course's chapters in order, then a group per topic for the rest."""
    groups: list[Group] = []
    placed: set[str] = set()
    for chapter in course.chapters:
        members = [e for e in ids if course.chapter_of(e) is chapter]
        if members:
            groups.append(Group(chapter.name, members))
            placed.update(members)
    for ex in ids:
        if ex in placed:
            continue
        topic = ex.split(".")[0]
        group = next((g for g in groups if g.name == topic), None)
        if group is None:
            group = Group(topic, [])
            groups.append(group)
        group.exercise_ids.append(ex)
    return groups


def overrides_in_force(log: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(student, exercise) -> the latest override row whose score is set (a NULL score withdraws it)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in log:
        latest[(row["student"], row["exercise"])] = row
    return {key: row for key, row in latest.items() if row["score"] is not None}


def _late_flags(rows: list[dict[str, Any]], course: Course) -> list[bool]:
    """Per submission row: was it uploaded after its chapter's due date?

    Times written by the store (``utc_now``: ``...+00:00``) are compared as
    text with the due date in the same form; any other form is parsed.
    """
    due: dict[str, tuple[str, Any]] = {}  # exercise -> (due as stored text, due)
    for chapter in course.chapters:
        if chapter.due is not None:
            text = chapter.due.astimezone(timezone.utc).isoformat(timespec="seconds")
            due.update({e: (text, chapter.due) for e in chapter.exercises})
    extended = {e.student for e in course.extensions} | {
        s for e in course.extensions if e.group for s in course.groups.get(e.group, ())
    }
    flags = []
    for row in rows:
        limit = due.get(row["exercise"])
        if limit is not None and row["student"] in extended:  # their own dates (an extension)
            own = course.chapter_of(row["exercise"], row["student"])
            assert own is not None and own.due is not None
            limit = (own.due.astimezone(timezone.utc).isoformat(timespec="seconds"), own.due)
        if limit is None:
            flags.append(False)
        elif row["started_at"].endswith("+00:00") and len(row["started_at"]) == len(limit[0]):
            flags.append(row["started_at"] > limit[0])
        else:
            flags.append(parse_time(row["started_at"]) > limit[1])
    return flags


def build(
    store: Store,
    exercise_ids: list[str] | None = None,
    quizzes: list[Quiz] | None = None,
    generated_at: str | None = None,
    course: Course | None = None,
    with_mistakes: bool = True,
    with_items: bool = True,
    mistakes_of: tuple[str | None, str | None] = (None, None),
    roster: dict[str, dict[str, Any]] | None = None,
) -> ClassReport:
    """Read the class report from ``store`` (a fixed handful of queries, whatever the class size).

    ``with_mistakes=False`` leaves out the diagnosed mistakes and
    ``with_items=False`` the quiz item analysis (the dashboard's overview
    shows neither); ``mistakes_of=(student, exercise)`` reads the mistakes of
    one student and/or one exercise only (a student's or an exercise's page).

    ``exercise_ids``: the columns (default: the course's exercises; exercises
    recorded in the store but not listed are appended). ``quizzes``: the quiz
    chapters (default: none). ``course``: which score counts (``grader.student.course``;
    default: the best ever) and the assignment groups (its chapters). The
    instructor's overrides (``score_overrides``) replace the graded score.
    Students are those with anything recorded, plus the roster's: the store's
    (the course server's) and ``roster`` (id -> {name, email}, ``grade report
    --roster``: the names and e-mails a ``grade batch`` database lacks), which
    wins where both name a student.
    """
    course = store.effective_course(course or DEFAULT_COURSE)  # with the dashboard's extensions
    generated_at = generated_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
    now = parse_time(generated_at)
    ids = list(exercise_ids) if exercise_ids is not None else list(catalogue.EXERCISES)
    quizzes = list(quizzes or [])
    submissions = store.submission_rows()
    for row in submissions:
        if row["exercise"] not in ids:
            ids.append(row["exercise"])
    roster = {**store.roster_entries(), **(roster or {})}
    names = sorted(set(store.students()) | set(roster))

    diagnosed: dict[int, list[str]] = {}  # submission id -> distinct diagnosed mistakes, in check order
    for row in store.diagnosed_mistakes(*mistakes_of) if with_mistakes else []:
        found = diagnosed.setdefault(row["submission_id"], [])
        if row["misconception"] not in found:
            found.append(row["misconception"])

    rows_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    seen: dict[str, dict[str, set[str]]] = {i: {} for i in ids}  # exercise -> mistake -> students
    last_progress: dict[str, str] = {}
    late_attempts: dict[str, set[int]] = {}
    best_so_far: dict[tuple[str, str], float] = {}
    for row, late in zip(submissions, _late_flags(submissions, course), strict=True):
        key = (row["student"], row["exercise"])
        rows_of.setdefault(key, []).append(row)
        for mistake in diagnosed.get(row["id"], []):
            seen[row["exercise"]].setdefault(mistake, set()).add(row["student"])
        if row["score"] > best_so_far.get(key, 0.0):
            best_so_far[key] = row["score"]
            last_progress[row["student"]] = max(row["started_at"], last_progress.get(row["student"], ""))
        if late:
            late_attempts.setdefault(row["student"], set()).add(row["attempt_id"])

    last_attempt: dict[str, str] = {}
    for row in store.attempts():
        last_attempt[row["student"]] = row["started_at"]
    answers_of: dict[str, list[dict[str, Any]]] = {}
    last_answer: dict[str, str] = {}
    for row in store.quiz_answer_summary():
        answers_of.setdefault(row["student"], []).append(row)
        last_answer[row["student"]] = max(row["last_at"], last_answer.get(row["student"], ""))
    log = store.score_overrides()
    overridden = overrides_in_force(log)
    rescored = {(r["student"], r["exercise"]) for r in submissions if r.get("rescoring_id") is not None}
    regraded = {
        (r["student"], r["exercise"]) for r in regrade.requests(store, status="answered") if r["override"] is not None
    }

    students: list[StudentRow] = []
    for name in names:
        cells: dict[str, ExerciseCell] = {}
        for ex in ids:
            rows = rows_of.get((name, ex))
            cell = ExerciseCell()
            if rows:
                counted = counted_score(rows, course.chapter_of(ex, name), course.rule)
                last = rows[-1]
                cell = ExerciseCell(
                    counted.score,
                    counted.max_score,
                    counted.last_status,
                    counted.attempts,
                    list(diagnosed.get(last["id"], [])),
                    str(last.get("message") or ""),
                    counted.late,
                    graded_score=counted.score,
                )
            override = overridden.get((name, ex))
            if override is not None:
                cell.override = float(override["score"])
                cell.override_comment = str(override["comment"])
                cell.best_score = cell.override
            if cell.scored:
                cell.marks = standing.cell_marks(
                    course,
                    ex,
                    name,
                    now,
                    late=cell.late,
                    rescored=(name, ex) in rescored,
                    regrade_accepted=(name, ex) in regraded and override is not None,
                )
            cells[ex] = cell
        standings, points = quiz_standings(quizzes, answers_of.get(name, []))
        entry = roster.get(name, {})
        activity = max(last_attempt.get(name, ""), last_answer.get(name, "")) or None
        students.append(
            StudentRow(
                name,
                cells,
                standings,
                last_attempt.get(name),
                str(entry.get("name") or ""),
                str(entry.get("email") or ""),
                activity,
                last_progress.get(name),
                len(late_attempts.get(name, ())),
                points,
            )
        )

    exercises: list[ExerciseStats] = []
    for ex in ids:
        cells_ex = [s.exercises[ex] for s in students]
        max_score = next((c.max_score for c in cells_ex if c.attempts), DEFAULT_MAX_SCORE)
        ranked = sorted(seen[ex].items(), key=lambda kv: (-len(kv[1]), kv[0]))
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
        generated_at=generated_at,
        exercise_ids=ids,
        chapters=[(q.chapter, q.title) for q in quizzes],
        students=students,
        exercises=exercises,
        items=item_stats(store.quiz_answer_rows(), quizzes) if with_items else [],
        groups=exercise_groups(ids, course),
        overrides=log,
        course=course,
        quizzes=quizzes,
    )


def quiz_standings(
    quizzes: list[Quiz], summary: list[dict[str, Any]]
) -> tuple[dict[str, quiz_lib.ChapterProgress], dict[str, float]]:
    """One student's standing per quiz chapter (as ``grader.quiz.chapter_progress``; ``attempts``
    counts every answer recorded for the chapter) and the points of the questions they answered
    right, from their rows of ``Store.quiz_answer_summary``."""
    by_chapter = {row["chapter"]: row for row in summary}
    standings: dict[str, quiz_lib.ChapterProgress] = {}
    points: dict[str, float] = {}
    for quiz in quizzes:
        row = by_chapter.get(quiz.chapter, {"answers": 0, "right": set()})
        ids = {q.id for q in quiz.questions}
        checkpoints = {q.id for q in quiz.questions if q.checkpoint}
        correct = row["right"] & ids
        standings[quiz.chapter] = quiz_lib.ChapterProgress(
            quiz.chapter,
            quiz.title,
            len(ids),
            len(checkpoints),
            len(checkpoints & correct),
            len(correct),
            int(row["answers"]),
        )
        points[quiz.chapter] = sum(q.points for q in quiz.questions if q.id in correct)
    return standings, points


DISCRIMINATION_GROUP = 0.27  # the upper and lower 27 % of the students who answered an item
DISCRIMINATION_MIN = 4  # fewer students who answered: no discrimination index


def _answer_text(question: Any, answer: str) -> str:
    """A recorded answer as the instructor reads it: choice texts for choice ids, else the answer."""
    choices = {c.id: c.text for c in getattr(question, "choices", ())}
    if choices and all(part in choices for part in answer.split(",")):
        return "; ".join(choices[part] for part in answer.split(","))
    return answer


def discrimination(scored: list[tuple[float, bool]]) -> float | None:
    """Upper-lower index: first-try rate of the top 27 % by rest score minus that of the bottom 27 %.

    ``scored``: per student who answered the item, (their first-try score on the
    chapter's other questions, whether their first answer to this one was right).
    None with fewer than DISCRIMINATION_MIN students.
    """
    if len(scored) < DISCRIMINATION_MIN:
        return None
    ranked = sorted(scored, key=lambda pair: pair[0])
    n = max(1, round(DISCRIMINATION_GROUP * len(ranked)))
    lower, upper = ranked[:n], ranked[-n:]
    return sum(c for _, c in upper) / n - sum(c for _, c in lower) / n


def item_stats(answers: list[dict[str, Any]], quizzes: list[Quiz]) -> list[ItemStats]:
    """Per quiz question, in course order (then questions only the store knows): item analysis.

    ``answers`` are store rows (student, chapter, question, answer, correct),
    oldest first; a student's first answer to a question is their first row
    for it. Difficulty: the fraction right first time. Discrimination:
    :func:`discrimination` over the chapter's first-try scores. The most
    chosen wrong answer: the wrong answer given by the most students (any try).
    """
    first: dict[tuple[str, str], dict[str, bool]] = {}  # (chapter, question) -> student -> first correct
    counts: dict[tuple[str, str], int] = {}
    wrong: dict[tuple[str, str], dict[str, set[str]]] = {}  # item -> wrong answer -> students
    for row in answers:
        key = (row["chapter"], row["question"])
        first.setdefault(key, {}).setdefault(row["student"], bool(row["correct"]))
        counts[key] = counts.get(key, 0) + 1
        if not row["correct"]:
            wrong.setdefault(key, {}).setdefault(str(row.get("answer", "")), set()).add(row["student"])
    chapter_score: dict[tuple[str, str], float] = {}  # (chapter, student) -> first-try correct answers
    for (chapter, _), firsts in first.items():
        for student, correct in firsts.items():
            chapter_score[(chapter, student)] = chapter_score.get((chapter, student), 0.0) + correct

    def stats(chapter: str, qid: str, question: Any) -> ItemStats:
        key = (chapter, qid)
        firsts = first.get(key, {})
        scored = [(chapter_score[(chapter, s)] - c, c) for s, c in firsts.items()]
        wrongs = sorted(wrong.get(key, {}).items(), key=lambda kv: (-len(kv[1]), kv[0]))
        top, who = wrongs[0] if wrongs else ("", set())
        return ItemStats(
            chapter,
            qid,
            getattr(question, "display_prompt", getattr(question, "prompt", "")),
            bool(getattr(question, "checkpoint", False)),
            len(firsts),
            sum(firsts.values()),
            counts.get(key, 0),
            discrimination(scored),
            _answer_text(question, top) if top else "",
            len(who),
        )

    items: list[ItemStats] = []
    known: set[tuple[str, str]] = set()
    for quiz in quizzes:
        for q in quiz.questions:
            known.add((quiz.chapter, q.id))
            items.append(stats(quiz.chapter, q.id, q))
    for key in sorted(k for k in first if k not in known):
        items.append(stats(key[0], key[1], None))
    return items
