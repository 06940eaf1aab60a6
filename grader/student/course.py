"""The course file (``course.toml``) and the one rule that decides which score counts.

A course file configures ``grade serve`` and, with ``--course``, ``grade report``
and ``grade progress``::

    name = "Deep networks, building blocks"
    score = "best"                     # "best" (default) or "latest"
    hand_in = "server"                 # where work is graded: "server", "gradescope" or "both"
                                       # (default: "server" when [server] names one, else "gradescope")
                                       # (top-level fields come before the first [table]: TOML reads
                                       # a key below a table header as a field of that table)

    [rate_limit]                       # uploads per student and window (default 30 per 60 minutes)
    submissions = 30
    per_minutes = 60

    [[chapter]]
    name = "normalization"             # a topic, or any name with `exercises`
    exercises = ["normalization"]      # topics or exercise ids (default: [name]; [] with quiz: its quiz alone)
    quiz = "normalization"             # the quiz chapter it holds (default: its name; docs/term.md)
    due = 2026-12-01T23:59:00Z         # a TOML date-time with its time zone
    late_penalty = 0.2                 # fraction of a late score lost (default 1: late counts nothing)
    late_until = 2026-12-08T23:59:00Z  # uploads refused after this (default: due, when late counts nothing)
    opens = 2026-12-01T09:00:00Z       # exam mode: uploads refused before this (default: always open)
    release_feedback = 2026-12-01T13:00:00Z  # exam mode: until then a student sees "received, graded" only
    show_score = true                  # exam mode: ... and their score (default false: not even that)

    [groups]                           # named groups of students (for group extensions)
    team-3 = ["alice", "bob"]

    [[extension]]                      # a student's (or a group's) own dates for one chapter
    student = "alice"                  # or group = "team-3"
    chapter = "normalization"
    due = 2026-12-04T23:59:00Z         # replaces the chapter's due date for them
    late_penalty = 0.1                 # optional: else the chapter's
    late_until = 2026-12-10T23:59:00Z  # optional: else the chapter's (when still after the new due)
    reason = "medical note, 2026-11-28"

    [server]
    url = "https://grader.example.org" # the course server: `grade login` in the handout asks only for a token;
                                       # `grade serve` listens on the port of an http:// url (else 8000, or --port)

    [quiz]
    attempts = 2                       # tries per graded quiz question, never reset (default: each question's own)

    [scaffolding]                      # what `grade release` gives away in the stubs (grader/course/scaffold.py)
    level = "derive"                   # "guided" (default), "derive" or "contract"
    [scaffolding.exercises]            # per-exercise (or per-topic) overrides
    "normalization.BatchNorm1d" = "contract"

    [lti]                              # the LMS (LTI 1.3): its [[lti.platform]] tables in docs/lti.md and
    tool_url = "https://grader.example.org"  # grader/server/lti/

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

Exam mode (per chapter): ``opens`` and the closing time make the upload
window; with ``release_feedback`` a student sees of an upload, until that
time, only that it was received and graded (and their score when
``show_score``); the checks' messages and named mistakes appear at the
release (grader/term/standing.py applies it on the server; the instructor sees all).

Extensions change the dates, never the rule: ``Course.chapter_of(exercise,
student)`` is the chapter as it applies to that student (their extension's
due date, late penalty and late_until in place of the chapter's), and every
caller of :func:`counted_score` (the store, progress, the class report and its
exports, the server's upload deadlines, the dashboard) asks for it with the
student. An extension of the student's own wins over one of their group; of
several for the same student and chapter, the last one written wins (the
course file's first, then the dashboard's log in order: ``Store.effective_course``
adds those, see grader/student/store/extensions.py). A dashboard extension with no due
date withdraws the student's earlier dashboard extensions of that chapter.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from grader.student.engine import catalogue
from grader.student.errors import GraderError
from grader.student.engine.scaffolding import DEFAULT_LEVEL, LEVELS

RULES = ("best", "latest")
HAND_IN = ("server", "gradescope", "both")
# What `grade release --course` writes into the handout's grader/student/ (never in the repository): the
# course's server, where work is graded and the chapters' dates, read by the handout's `grade login`.
HANDOUT_SETTINGS = Path(__file__).with_name("course.json")
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
    opens: datetime | None = None  # exam mode: no upload before this
    release_feedback: datetime | None = None  # exam mode: checks' messages and named mistakes hidden until then
    show_score: bool = False  # exam mode: the score is shown before the release
    quiz: str = ""  # its quiz chapter (quizzes/<quiz>.json); "": the chapter's name

    @property
    def quiz_chapter(self) -> str:
        """The quiz chapter this chapter holds: its ``quiz = "..."`` when given, else its own name."""
        return self.quiz or self.name

    def feedback_hidden(self, now: datetime) -> bool:
        """Whether a student may not yet see the checks' messages and named mistakes (exam mode)."""
        return self.release_feedback is not None and now < self.release_feedback

    def closes_at(self) -> datetime | None:
        """When uploads for this chapter stop being accepted (None: never)."""
        if self.late_until is not None:
            return self.late_until
        if self.due is not None and self.late_penalty >= 1.0:
            return self.due
        return None

    def is_open(self, when: datetime) -> bool:
        """Whether an upload made at ``when`` is accepted (after ``opens``, until :meth:`closes_at`)."""
        if self.opens is not None and when < self.opens:
            return False
        closes = self.closes_at()
        return closes is None or when <= closes

    def effective(self, score: float, when: datetime) -> tuple[float, bool]:
        """(the score that may count, whether it was late) for an attempt made at ``when``."""
        if self.due is None or when <= self.due:
            return score, False
        if self.late_until is not None and when > self.late_until:
            return 0.0, True
        return score * (1.0 - self.late_penalty), True

    def extended(self, extension: "Extension") -> "Chapter":
        """This chapter with an extension's dates in place of its own.

        The extension's due date replaces the chapter's; its late penalty and
        late_until, when it gives them, replace the chapter's; the chapter's
        late_until is kept only while it is still after the new due date.
        """
        penalty = self.late_penalty if extension.late_penalty is None else extension.late_penalty
        until = extension.late_until
        if until is None and self.late_until is not None and self.late_until > extension.due:
            until = self.late_until
        return replace(self, due=extension.due, late_penalty=penalty, late_until=until)


@dataclass(frozen=True)
class Extension:
    """Own dates for one chapter, for one student or a group (from course.toml or the dashboard's log)."""

    chapter: str
    due: datetime
    reason: str
    student: str | None = None  # exactly one of student and group
    group: str | None = None
    late_penalty: float | None = None
    late_until: datetime | None = None
    source: str = "course.toml"  # or "dashboard, <author> at <time>", "API, <author> at <time>"

    def to_json(self) -> dict[str, Any]:
        return {
            "chapter": self.chapter,
            "student": self.student,
            "group": self.group,
            "due": _iso(self.due),
            "late_penalty": self.late_penalty,
            "late_until": _iso(self.late_until),
            "reason": self.reason,
            "source": self.source,
        }


EXTENSION_VIAS = (
    "dashboard",
    "API",
)  # where a logged extension is granted: the dashboard's form, POST /api/v1/extensions


def logged_by(author: str) -> str:
    """Where and by whom a logged extension was granted: ``"API, instructor"`` (rows written before the log
    said where name the author alone: those came from the dashboard)."""
    return author if author.startswith(tuple(f"{via}, " for via in EXTENSION_VIAS)) else f"dashboard, {author}"


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
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # group -> its students
    extensions: tuple[Extension, ...] = ()  # in the order written
    log_applied: bool = False  # the dashboard's extension log is in ``extensions`` (Store.effective_course)
    lti: Mapping[str, Any] = field(default_factory=dict)  # the raw [lti] table, read by grader/server/lti/platforms.py
    server_url: str | None = None  # [server] url: the course server students log in to
    hand_in: str = "gradescope"  # where work is graded: "server", "gradescope" or "both"

    @property
    def graded_on_server(self) -> bool:
        return self.hand_in in ("server", "both")

    @property
    def graded_on_gradescope(self) -> bool:
        return self.hand_in in ("gradescope", "both")

    def handout_json(self) -> dict[str, Any]:
        """What the handout keeps of the course (:data:`HANDOUT_SETTINGS`): the public part, server, hand-in."""
        return {**self.to_json(), "server": self.server_url, "hand_in": self.hand_in}

    quiz_attempts: int | None = None  # [quiz] attempts: tries per graded question (None: each question's own)

    def chapter_of_quiz(self, quiz: str) -> Chapter | None:
        """The course chapter that holds quiz chapter ``quiz``: the one whose ``quiz`` names it, else the one of
        its name (:attr:`Chapter.quiz_chapter`); None when none does."""
        return next((c for c in self.chapters if c.quiz_chapter == quiz), None)

    def quiz_due(self, chapter: str) -> datetime | None:
        """The due date of a quiz chapter: that of the course chapter holding it (:meth:`chapter_of_quiz`)."""
        held = self.chapter_of_quiz(chapter)
        return held.due if held is not None else None

    def check_quizzes(self, quizzes: Iterable[str]) -> None:
        """CourseError when a course with chapters leaves a quiz chapter unmatched (``grade serve`` and ``grade
        release`` call it): every quiz chapter is held by exactly the course chapter :meth:`chapter_of_quiz`
        names, never guessed from a similar name. A course without chapters has no dates to match."""
        if not self.chapters:
            return
        names = ", ".join(c.name for c in self.chapters)
        for quiz in quizzes:
            if self.chapter_of_quiz(quiz) is None:
                raise CourseError(
                    f"quiz chapter '{quiz}' matches no chapter of the course ({names}): rename the "
                    f"chapter to '{quiz}', or add quiz = \"{quiz}\" to the [[chapter]] that holds it"
                )

    def scaffolding_levels(self, default: str | None = None) -> dict[str, str]:
        """Every exercise's stub level: its override, else ``default`` (``grade release --level``), else the
        course's."""
        base = default if default is not None else self.scaffolding_level
        return {e: self.scaffolding_exercises.get(e, base) for e in catalogue.EXERCISES}

    def chapter_of(self, exercise_id: str, student: str | None = None) -> Chapter | None:
        """The chapter whose policy covers an exercise (None: no deadline), as it applies to ``student``.

        Without a student: the chapter's own dates. With one: their extension's
        dates when they have one (:meth:`extension_for`).
        """
        chapter = self.by_exercise.get(exercise_id)
        if chapter is None or student is None or not self.extensions:
            return chapter
        extension = self.extension_for(chapter.name, student)
        return chapter if extension is None else chapter.extended(extension)

    def extension_for(self, chapter: str, student: str) -> Extension | None:
        """The extension in force for a student and chapter: their own (the last written), else their group's."""
        own = group = None
        for extension in self.extensions:
            if extension.chapter != chapter:
                continue
            if extension.student == student:
                own = extension
            elif extension.group is not None and student in self.groups.get(extension.group, ()):
                group = extension
        return own or group

    def with_extensions(self, extra: Iterable[Extension | tuple[str | None, str | None, str]]) -> "Course":
        """This course with more extensions after its own (the dashboard's log, oldest first).

        An item ``(student, group, chapter)`` instead of an Extension withdraws
        the extensions of that student (or group) and chapter written before it
        (the course file's included).
        """
        extensions = list(self.extensions)
        for item in extra:
            if isinstance(item, Extension):
                extensions.append(item)
            else:
                student, group, chapter = item
                extensions = [
                    e for e in extensions if not (e.student == student and e.group == group and e.chapter == chapter)
                ]
        return replace(self, extensions=tuple(extensions))

    def student_dates(self, student: str) -> list[dict[str, Any]]:
        """The chapters' dates as they apply to ``student`` (what ``grade progress`` shows them).

        One dict per chapter: name, due, late_penalty, closes (ISO text or
        None), and ``extension`` (the reason, or None for the course's dates).
        """
        dates = []
        for chapter in self.chapters:
            extension = self.extension_for(chapter.name, student) if self.extensions else None
            own = chapter if extension is None else chapter.extended(extension)
            dates.append(
                {
                    "name": chapter.name,
                    "due": _iso(own.due),
                    "late_penalty": own.late_penalty,
                    "closes": _iso(own.closes_at()),
                    "extension": None if extension is None else extension.reason,
                    "opens": _iso(own.opens),
                    "release_feedback": _iso(own.release_feedback),
                }
            )
        return dates

    def closed_exercises(self, ids: Iterable[str], when: datetime, student: str | None = None) -> dict[str, Chapter]:
        """The exercises among ``ids`` whose chapter no longer accepts uploads at ``when`` (from ``student``)."""
        closed = {}
        for exercise_id in ids:
            chapter = self.chapter_of(exercise_id, student)
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
                    "opens": _iso(c.opens),
                    "release_feedback": _iso(c.release_feedback),
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

    score: float  # the counted (effective) score
    max_score: float
    best_raw: float  # the best score ever graded, penalties aside
    latest: float  # the latest attempt's graded score
    late: bool  # the counted attempt was late
    last_status: str
    attempts: int


def late_exercises(
    course: Course, results: Iterable[Any], when: datetime, student: str | None = None
) -> list[dict[str, Any]]:
    """The exercise results (anything with ``id``, ``score``, ``max_score``) of an upload at ``when`` that missed
    their chapter's due date, for ``student`` (their extensions): each with the share of its score that counts
    (``counts``: 1 - late_penalty, 0 past late_until) and the counted score. The course server sends this list
    with a graded upload (``late``); the student's report and the dashboard's copy note it beside the scores."""
    out = []
    for result in results:
        chapter = course.chapter_of(result.id, student)
        if chapter is None:
            continue
        counted, late = chapter.effective(float(result.score), when)
        if late:
            share = 0.0 if chapter.late_until is not None and when > chapter.late_until else 1.0 - chapter.late_penalty
            out.append(
                {
                    "exercise": result.id,
                    "chapter": chapter.name,
                    "score": result.score,
                    "max_score": result.max_score,
                    "counts": round(share, 4),
                    "counted_score": round(counted, 2),
                    "due": chapter.due.isoformat(timespec="minutes") if chapter.due else None,
                }
            )
    return out


def counted_score(rows: Sequence[Mapping[str, Any]], chapter: Chapter | None, rule: str) -> Counted:
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
    fields = (
        "name",
        "exercises",
        "due",
        "late_penalty",
        "late_until",
        "opens",
        "release_feedback",
        "show_score",
        "quiz",
    )
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise CourseError(f"{path}: {where} has an unknown field '{unknown[0]}': use {', '.join(fields)}")
    selectors = raw.get("exercises", [name])
    if not isinstance(selectors, list) or not all(isinstance(s, str) for s in selectors):
        raise CourseError(f"{path}: {where}: exercises must be a list of topics or exercise ids")
    try:
        ids = tuple(catalogue.resolve(selectors)) if selectors else ()
    except GraderError as exc:
        raise CourseError(f"{path}: {where}: {exc}") from exc
    if not ids and not (selectors == [] and "quiz" in raw):  # exercises = [] with a quiz: a chapter of its quiz alone
        raise CourseError(
            f"{path}: {where}: exercises is empty: list topics or exercise ids (or, for a chapter "
            'of a quiz alone, give its quiz = "...")'
        )
    due = _time(raw["due"], f"{where} due", path) if "due" in raw else None
    penalty = raw.get("late_penalty", 1.0)
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not 0 <= penalty <= 1:
        raise CourseError(f"{path}: {where}: late_penalty must be a number from 0 to 1 (the fraction lost)")
    late_until = _time(raw["late_until"], f"{where} late_until", path) if "late_until" in raw else None
    if late_until is not None and (due is None or late_until < due):
        raise CourseError(f"{path}: {where}: late_until needs a due date before it")
    opens = _time(raw["opens"], f"{where} opens", path) if "opens" in raw else None
    closes = late_until if late_until is not None else (due if float(penalty) >= 1.0 else None)
    if opens is not None and closes is not None and opens >= closes:
        raise CourseError(f"{path}: {where}: opens must be before the chapter closes for uploads")
    release = _time(raw["release_feedback"], f"{where} release_feedback", path) if "release_feedback" in raw else None
    show_score = raw.get("show_score", False)
    if not isinstance(show_score, bool):
        raise CourseError(f"{path}: {where}: show_score is true or false")
    if "show_score" in raw and release is None:
        raise CourseError(f"{path}: {where}: show_score needs release_feedback = DATE-TIME (exam mode)")
    quiz = raw.get("quiz", "")
    if not isinstance(quiz, str):
        raise CourseError(f'{path}: {where}: quiz = "NAME" names its quiz chapter (quizzes/NAME.json)')
    return Chapter(name, ids, due, float(penalty), late_until, opens, release, show_score, quiz)


def _scaffolding(raw: Any, path: Path) -> tuple[str, dict[str, str]]:
    """(default level, exercise id -> level) of a [scaffolding] table."""
    if not isinstance(raw, dict) or set(raw) - {"level", "exercises"}:
        raise CourseError(f'{path}: [scaffolding] takes level = "derive" and a table [scaffolding.exercises]')
    level = raw.get("level", DEFAULT_LEVEL)
    if level not in LEVELS:
        raise CourseError(f"{path}: scaffolding.level = {level!r} is not a level: use {', '.join(LEVELS)}")
    overrides = raw.get("exercises", {})
    if not isinstance(overrides, dict):
        raise CourseError(
            f"{path}: [scaffolding.exercises] maps exercise ids to levels, like"
            ' "normalization.BatchNorm1d" = "contract"'
        )
    resolved: list[tuple[list[str], str]] = []
    for selector, value in overrides.items():
        if value not in LEVELS:
            raise CourseError(
                f'{path}: scaffolding.exercises."{selector}" = {value!r} is not a level: use {", ".join(LEVELS)}'
            )
        try:
            resolved.append((catalogue.resolve([selector]), value))
        except GraderError as exc:
            raise CourseError(f"{path}: scaffolding.exercises: {exc}") from exc
    by_exercise: dict[str, str] = {}
    for ids, value in sorted(resolved, key=lambda pair: -len(pair[0])):  # a topic first, its exercises override it
        by_exercise.update({e: value for e in ids})
    return level, by_exercise


def _groups(raw: Any, path: Path) -> dict[str, tuple[str, ...]]:
    """A [groups] table: group name -> list of student ids."""
    if not isinstance(raw, dict):
        raise CourseError(f'{path}: [groups] maps a group name to its students, like team-3 = ["alice", "bob"]')
    groups = {}
    for name, members in raw.items():
        if not isinstance(members, list) or not members or not all(isinstance(m, str) and m for m in members):
            raise CourseError(f"{path}: groups.{name} must be a non-empty list of student ids")
        groups[str(name)] = tuple(members)
    return groups


EXTENSION_FIELDS = ("student", "group", "chapter", "due", "late_penalty", "late_until", "reason")


def check_extension(
    extension: Extension, chapters: Mapping[str, Chapter], groups: Mapping[str, Any], where: str
) -> Extension:
    """Validate an extension against the course (CourseError naming ``where``); also used for the dashboard's."""
    chapter = chapters.get(extension.chapter)
    if chapter is None:
        known = ", ".join(chapters) or "none: the course file has no [[chapter]]"
        raise CourseError(f"{where}: chapter '{extension.chapter}' is not a chapter of the course (chapters: {known})")
    if chapter.due is None:
        raise CourseError(f"{where}: chapter '{extension.chapter}' has no due date to extend")
    if (extension.student is None) == (extension.group is None):
        raise CourseError(f'{where}: give either student = "ID" or group = "NAME"')
    if extension.group is not None and extension.group not in groups:
        raise CourseError(f"{where}: group '{extension.group}' is not in [groups]")
    if not extension.reason.strip():
        raise CourseError(f'{where}: an extension needs a reason = "..." (it is logged)')
    penalty = extension.late_penalty
    if penalty is not None and (isinstance(penalty, bool) or not 0 <= penalty <= 1):
        raise CourseError(f"{where}: late_penalty must be a number from 0 to 1 (the fraction lost)")
    if extension.late_until is not None and extension.late_until < extension.due:
        raise CourseError(f"{where}: late_until must not be before the extension's due date")
    return extension


def _extension(
    raw: Any, index: int, path: Path, chapters: Mapping[str, Chapter], groups: Mapping[str, Any]
) -> Extension:
    where = f"{path}: extension {index}"
    if not isinstance(raw, dict):
        raise CourseError(f"{where}: write extensions as [[extension]] tables")
    unknown = sorted(set(raw) - set(EXTENSION_FIELDS))
    if unknown:
        raise CourseError(f"{where} has an unknown field '{unknown[0]}': use {', '.join(EXTENSION_FIELDS)}")
    for key in ("student", "group", "chapter", "reason"):
        if key in raw and not isinstance(raw[key], str):
            raise CourseError(f"{where}: {key} must be a string")
    if "chapter" not in raw or "due" not in raw:
        raise CourseError(f'{where} needs chapter = "NAME" and due = DATE-TIME')
    penalty = raw.get("late_penalty")
    if penalty is not None and (isinstance(penalty, bool) or not isinstance(penalty, (int, float))):
        raise CourseError(f"{where}: late_penalty must be a number from 0 to 1 (the fraction lost)")
    extension = Extension(
        chapter=raw["chapter"],
        due=_time(raw["due"], f"extension {index} due", path),
        reason=raw.get("reason", ""),
        student=raw.get("student"),
        group=raw.get("group"),
        late_penalty=None if penalty is None else float(penalty),
        late_until=_time(raw["late_until"], f"extension {index} late_until", path) if "late_until" in raw else None,
    )
    return check_extension(extension, chapters, groups, where)


def _server(doc: Mapping[str, Any], path: Path) -> tuple[str | None, str]:
    """([server] url or None, hand_in) of a course file."""
    raw = doc.get("server", {})
    if not isinstance(raw, dict) or set(raw) - {"url"}:
        raise CourseError(f'{path}: [server] takes url = "https://..." (the course server\'s address)')
    url = raw.get("url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise CourseError(f'{path}: server.url = {url!r} is not a URL: write it like "https://grader.example.org"')
    if url is not None:
        from urllib.parse import urlsplit

        try:
            _ = urlsplit(url).port  # reading the port raises ValueError on a bad one
        except ValueError:
            raise CourseError(
                f'{path}: server.url = {url!r} has no valid port: write it like "http://127.0.0.1:8000"'
            ) from None
    hand_in = doc.get("hand_in", "server" if url else "gradescope")
    if hand_in not in HAND_IN:
        raise CourseError(f'{path}: hand_in = {hand_in!r} is not a path: use "server", "gradescope" or "both"')
    if hand_in != "gradescope" and not url:
        raise CourseError(
            f'{path}: hand_in = {hand_in!r} needs the server\'s address: add [server] url = "https://..."'
        )
    return (url.rstrip("/") if url else None), hand_in


def parse_course(doc: Mapping[str, Any], path: Path) -> Course:
    """Validate a parsed TOML document into a Course (CourseError on the first problem)."""
    unknown = sorted(
        set(doc)
        - {
            "name",
            "score",
            "rate_limit",
            "chapter",
            "scaffolding",
            "groups",
            "extension",
            "lti",
            "server",
            "hand_in",
            "quiz",
        }
    )
    if unknown:
        raise CourseError(
            f"{path}: unknown field '{unknown[0]}': use name, score, rate_limit, hand_in, [server],"
            " [[chapter]], [scaffolding], [groups], [[extension]], [lti]"
        )
    name = doc.get("name", DEFAULT_COURSE.name)
    if not isinstance(name, str):
        raise CourseError(f"{path}: name must be a string")
    rule = doc.get("score", "best")
    if rule not in RULES:
        raise CourseError(f'{path}: score = {rule!r} is not a rule: use "best" or "latest"')
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
    by_quiz: dict[str, str] = {}
    for chapter in chapters:
        if chapter.quiz_chapter in by_quiz:
            raise CourseError(
                f"{path}: chapters '{by_quiz[chapter.quiz_chapter]}' and '{chapter.name}' both hold quiz "
                f"'{chapter.quiz_chapter}': give each quiz chapter to one chapter (quiz = \"...\")"
            )
        by_quiz[chapter.quiz_chapter] = chapter.name
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
    groups = _groups(doc.get("groups", {}), path)
    raw_extensions = doc.get("extension", [])
    if not isinstance(raw_extensions, list):
        raise CourseError(f"{path}: extensions are written [[extension]] (an array of tables)")
    named = {c.name: c for c in chapters}
    extensions = tuple(_extension(raw, i, path, named, groups) for i, raw in enumerate(raw_extensions, 1))
    lti = doc.get("lti", {})
    if not isinstance(lti, dict):
        raise CourseError(f"{path}: [lti] must be a table (see docs/lti.md)")
    url, hand_in = _server(doc, path)
    quiz = doc.get("quiz", {})
    attempts = quiz.get("attempts") if isinstance(quiz, dict) else None
    if (
        not isinstance(quiz, dict)
        or set(quiz) - {"attempts"}
        or ("attempts" in quiz and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1))
    ):
        raise CourseError(f"{path}: [quiz] takes attempts = N, a whole number of at least 1")
    return Course(
        name,
        rule,
        chapters,
        submissions,
        float(minutes),
        by_exercise,
        level,
        levels,
        groups,
        extensions,
        lti=lti,
        server_url=url,
        hand_in=hand_in,
        quiz_attempts=attempts,
    )


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


def handout_settings() -> dict[str, Any]:
    """The course settings written into a handout by `grade release --course` ({} elsewhere, or when unreadable)."""
    try:
        doc = json.loads(HANDOUT_SETTINGS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
