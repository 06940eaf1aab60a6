"""The course file (``course.toml``) and the one rule that decides which score counts.

A course file configures ``grade serve`` and, with ``--course``, ``grade report``
and ``grade progress``::

    name = "Deep networks, building blocks"
    score = "best"                     # "best" (default) or "latest"

    [rate_limit]                       # uploads per student and window (default 30 per 60 minutes)
    submissions = 30
    per_minutes = 60

    [[chapter]]
    name = "normalization"             # a topic, or any name with `exercises`
    exercises = ["normalization"]      # topics or exercise ids (default: [name])
    due = 2026-12-01T23:59:00Z         # a TOML date-time with its time zone
    late_penalty = 0.2                 # fraction of a late score lost (default 1: late counts nothing)
    late_until = 2026-12-08T23:59:00Z  # uploads refused after this (default: due, when late counts nothing)

    [quiz]
    attempts = 2                       # tries per graded quiz question, never reset (default: each question's own)

    [scaffolding]                      # what `grade release` gives away in the stubs (grader/scaffold.py)
    level = "derive"                   # "guided" (default), "derive" or "contract"
    [scaffolding.exercises]            # per-exercise (or per-topic) overrides
    "normalization.BatchNorm1d" = "contract"

Which score counts, per student and exercise (:func:`counted_score`, used by the
server, ``grade report`` and ``grade progress`` alike):

- every recorded attempt has an *effective* score: its score when submitted by
  the due date (or when the exercise has no due date), ``score * (1 -
  late_penalty)`` when submitted late, 0 when submitted after ``late_until``;
- rule ``best``: the highest effective score (with the default penalty of 1,
  this is "the best before the due date");
- rule ``latest``: the effective score of the latest attempt (a folder replaced
  by blank stubs then counts 0).

Without a course file the rule is ``best`` with no due dates: the best score ever.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from grader.student import catalogue
from grader.student.errors import GraderError
from grader.student.scaffolding import DEFAULT_LEVEL, LEVELS

RULES = ("best", "latest")
DEFAULT_RATE = (30, 60)  # uploads per student, per minutes


class CourseError(GraderError):
    """The course file is unreadable or invalid (one line naming the file and the field)."""


@dataclass(frozen=True)
class Chapter:
    """A chapter's deadline policy over its exercises."""

    name: str
    exercises: tuple[str, ...]
    due: datetime | None = None
    late_penalty: float = 1.0
    late_until: datetime | None = None

    def closes_at(self) -> datetime | None:
        """When uploads for this chapter stop being accepted (None: never)."""
        if self.late_until is not None:
            return self.late_until
        if self.due is not None and self.late_penalty >= 1.0:
            return self.due
        return None

    def is_open(self, when: datetime) -> bool:
        """Whether an upload made at ``when`` is accepted."""
        closes = self.closes_at()
        return closes is None or when <= closes

    def effective(self, score: float, when: datetime) -> tuple[float, bool]:
        """(the score that may count, whether it was late) for an attempt made at ``when``."""
        if self.due is None or when <= self.due:
            return score, False
        if self.late_until is not None and when > self.late_until:
            return 0.0, True
        return score * (1.0 - self.late_penalty), True


@dataclass(frozen=True)
class Course:
    """A parsed course file (or the default course: best score ever, no deadlines)."""

    name: str = "normgrade course"
    rule: str = "best"
    chapters: tuple[Chapter, ...] = ()
    rate_submissions: int = DEFAULT_RATE[0]
    rate_minutes: float = DEFAULT_RATE[1]
    by_exercise: Mapping[str, Chapter] = field(default_factory=dict)
    scaffolding_level: str = DEFAULT_LEVEL
    scaffolding_exercises: Mapping[str, str] = field(default_factory=dict)  # exercise id -> level
    quiz_attempts: int | None = None  # [quiz] attempts: tries per graded question (None: each question's own)

    def quiz_due(self, chapter: str) -> datetime | None:
        """The due date of a quiz chapter: the course chapter of that name (or covering that topic), if any."""
        for c in self.chapters:
            if c.name == chapter or chapter in c.exercises:
                return c.due
        return None

    def scaffolding_levels(self, default: str | None = None) -> dict[str, str]:
        """Every exercise's stub level: its override, else ``default`` (``grade release --level``), else the course's."""
        base = default if default is not None else self.scaffolding_level
        return {e: self.scaffolding_exercises.get(e, base) for e in catalogue.EXERCISES}

    def chapter_of(self, exercise_id: str) -> Chapter | None:
        """The chapter whose policy covers an exercise (None: no deadline)."""
        return self.by_exercise.get(exercise_id)

    def closed_exercises(self, ids: Iterable[str], when: datetime) -> dict[str, Chapter]:
        """The exercises among ``ids`` whose chapter no longer accepts uploads at ``when``."""
        closed = {}
        for exercise_id in ids:
            chapter = self.chapter_of(exercise_id)
            if chapter is not None and not chapter.is_open(when):
                closed[exercise_id] = chapter
        return closed

    @property
    def rate_window(self) -> timedelta:
        return timedelta(minutes=self.rate_minutes)

    def to_json(self) -> dict[str, Any]:
        """The public part of the course: name, rule, rate limit, chapters and their dates."""
        return {
            "name": self.name,
            "score_rule": self.rule,
            "rate_limit": {"submissions": self.rate_submissions, "per_minutes": self.rate_minutes},
            "chapters": [
                {
                    "name": c.name,
                    "exercises": list(c.exercises),
                    "due": _iso(c.due),
                    "late_penalty": c.late_penalty,
                    "closes": _iso(c.closes_at()),
                }
                for c in self.chapters
            ],
        }


DEFAULT_COURSE = Course()


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def parse_time(text: str) -> datetime:
    """An ISO 8601 time as stored by the store (``utc_now``); naive times are taken as UTC."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


# --- which score counts ---------------------------------------------------------------


@dataclass
class Counted:
    """The score that counts for one exercise, and what it was chosen from."""

    score: float          # the counted (effective) score
    max_score: float
    best_raw: float       # the best score ever graded, penalties aside
    latest: float         # the latest attempt's graded score
    late: bool            # the counted attempt was late
    last_status: str
    attempts: int


def counted_score(rows: list[Mapping[str, Any]], chapter: Chapter | None, rule: str) -> Counted:
    """THE rule for which score counts, given one exercise's attempts, oldest first.

    ``rows`` have ``score``, ``max_score``, ``status`` and ``started_at`` (the
    time of the upload). See the module docstring for the rule.
    """
    if not rows:
        raise ValueError("counted_score needs at least one attempt")
    effective = []
    for row in rows:
        if chapter is None:
            effective.append((float(row["score"]), False))
        else:
            effective.append(chapter.effective(float(row["score"]), parse_time(row["started_at"])))
    if rule == "latest":
        chosen = effective[-1]
    else:
        chosen = max(effective, key=lambda pair: pair[0])  # first of equal scores
    last = rows[-1]
    return Counted(
        score=chosen[0],
        max_score=float(last["max_score"]),
        best_raw=max(float(r["score"]) for r in rows),
        latest=float(last["score"]),
        late=chosen[1],
        last_status=str(last["status"]),
        attempts=len(rows),
    )


# --- parsing ----------------------------------------------------------------------------


def _time(value: Any, where: str, path: Path) -> datetime:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    raise CourseError(
        f"{path}: {where} must be a date-time with its time zone, like 2026-12-01T23:59:00Z (got {value!r})"
    )


def _chapter(raw: Any, index: int, path: Path) -> Chapter:
    where = f"chapter {index}"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise CourseError(f"{path}: {where} needs a name = \"...\" (a topic such as 'normalization')")
    name = raw["name"]
    where = f"chapter '{name}'"
    unknown = sorted(set(raw) - {"name", "exercises", "due", "late_penalty", "late_until"})
    if unknown:
        raise CourseError(
            f"{path}: {where} has an unknown field '{unknown[0]}': use name, exercises, due, late_penalty, late_until"
        )
    selectors = raw.get("exercises", [name])
    if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
        raise CourseError(f"{path}: {where}: exercises must be a list of topics or exercise ids")
    try:
        ids = tuple(catalogue.resolve(selectors)) if selectors else ()
    except GraderError as exc:
        raise CourseError(f"{path}: {where}: {exc}") from exc
    if not ids:
        raise CourseError(f"{path}: {where}: exercises is empty: list topics or exercise ids")
    due = _time(raw["due"], f"{where} due", path) if "due" in raw else None
    penalty = raw.get("late_penalty", 1.0)
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not 0 <= penalty <= 1:
        raise CourseError(f"{path}: {where}: late_penalty must be a number from 0 to 1 (the fraction lost)")
    late_until = _time(raw["late_until"], f"{where} late_until", path) if "late_until" in raw else None
    if late_until is not None and (due is None or late_until < due):
        raise CourseError(f"{path}: {where}: late_until needs a due date before it")
    return Chapter(name, ids, due, float(penalty), late_until)


def _scaffolding(raw: Any, path: Path) -> tuple[str, dict[str, str]]:
    """(default level, exercise id -> level) of a [scaffolding] table."""
    if not isinstance(raw, dict) or set(raw) - {"level", "exercises"}:
        raise CourseError(f"{path}: [scaffolding] takes level = \"derive\" and a table [scaffolding.exercises]")
    level = raw.get("level", DEFAULT_LEVEL)
    if level not in LEVELS:
        raise CourseError(f"{path}: scaffolding.level = {level!r} is not a level: use {', '.join(LEVELS)}")
    overrides = raw.get("exercises", {})
    if not isinstance(overrides, dict):
        raise CourseError(f"{path}: [scaffolding.exercises] maps exercise ids to levels, like"
                          " \"normalization.BatchNorm1d\" = \"contract\"")
    resolved: list[tuple[list[str], str]] = []
    for selector, value in overrides.items():
        if value not in LEVELS:
            raise CourseError(f"{path}: scaffolding.exercises.\"{selector}\" = {value!r} is not a level:"
                              f" use {', '.join(LEVELS)}")
        try:
            resolved.append((catalogue.resolve([selector]), value))
        except GraderError as exc:
            raise CourseError(f"{path}: scaffolding.exercises: {exc}") from exc
    by_exercise: dict[str, str] = {}
    for ids, value in sorted(resolved, key=lambda pair: -len(pair[0])):  # a topic first, its exercises override it
        by_exercise.update({e: value for e in ids})
    return level, by_exercise


def parse_course(doc: Mapping[str, Any], path: Path) -> Course:
    """Validate a parsed TOML document into a Course (CourseError on the first problem)."""
    unknown = sorted(set(doc) - {"name", "score", "rate_limit", "chapter", "scaffolding", "quiz"})
    if unknown:
        raise CourseError(f"{path}: unknown field '{unknown[0]}': use name, score, rate_limit, [[chapter]],"
                          " [scaffolding]")
    name = doc.get("name", DEFAULT_COURSE.name)
    if not isinstance(name, str):
        raise CourseError(f"{path}: name must be a string")
    rule = doc.get("score", "best")
    if rule not in RULES:
        raise CourseError(f"{path}: score = {rule!r} is not a rule: use \"best\" or \"latest\"")
    rate = doc.get("rate_limit", {})
    if not isinstance(rate, dict) or set(rate) - {"submissions", "per_minutes"}:
        raise CourseError(f"{path}: [rate_limit] takes submissions = N and per_minutes = M")
    submissions = rate.get("submissions", DEFAULT_RATE[0])
    minutes = rate.get("per_minutes", DEFAULT_RATE[1])
    if isinstance(submissions, bool) or not isinstance(submissions, int) or submissions < 1:
        raise CourseError(f"{path}: rate_limit.submissions must be a whole number of at least 1")
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0:
        raise CourseError(f"{path}: rate_limit.per_minutes must be a positive number")
    raw_chapters = doc.get("chapter", [])
    if not isinstance(raw_chapters, list):
        raise CourseError(f"{path}: chapters are written [[chapter]] (an array of tables)")
    chapters = tuple(_chapter(raw, i, path) for i, raw in enumerate(raw_chapters, 1))
    by_exercise: dict[str, Chapter] = {}
    for chapter in chapters:
        for exercise_id in chapter.exercises:
            if exercise_id in by_exercise:
                raise CourseError(
                    f"{path}: {exercise_id} is in chapters '{by_exercise[exercise_id].name}' and "
                    f"'{chapter.name}': put each exercise in one chapter"
                )
            by_exercise[exercise_id] = chapter
    level, levels = _scaffolding(doc.get("scaffolding", {}), path)
    quiz = doc.get("quiz", {})
    attempts = quiz.get("attempts") if isinstance(quiz, dict) else None
    if not isinstance(quiz, dict) or set(quiz) - {"attempts"} or (
            "attempts" in quiz and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1)):
        raise CourseError(f"{path}: [quiz] takes attempts = N, a whole number of at least 1")
    return Course(name, rule, chapters, submissions, float(minutes), by_exercise, level, levels, attempts)


def load_course(path: Path | str) -> Course:
    """Read and validate ``course.toml``; CourseError (one line) when it cannot be used."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError as exc:
        raise CourseError(f"{path} does not exist: pass --course with your course.toml") from exc
    except OSError as exc:
        raise CourseError(f"cannot read {path} ({exc.strerror}): pass another --course") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path} is not valid TOML ({exc}): fix that line") from exc
    return parse_course(doc, path)
