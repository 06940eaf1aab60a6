"""The course's rules as every view applies them: one function per rule, shared by the handout and the server.

A chapter's **state** at a time ``now`` (:func:`chapter_state`) is one of

- ``not open yet``  before its ``opens`` (exam mode): "opens at T";
- ``open``          uploads count in full (until its due date, when it has one);
- ``late``          after its due date, still taking uploads: "late: counts S%" where S = 1 - late_penalty;
- ``closed``        no upload is taken any more: "closed at T".

An exam chapter (``release_feedback`` set) also holds its feedback until T:
its exercises are shown as "received, feedback at T" (:func:`held_label`), with
no score unless the chapter says ``show_score = true``, and count in no total
until T (:func:`counted`).

**Totals** (:func:`totals`): the counted score is the sum over the exercises whose
score a student may see of score x share (the late share, 1 on time); the
maximum is the sum of the same exercises' ``max_score``. An exercise not graded
(the grader's machine) or held (exam mode) is in neither. Every report, page and
progress view prints these numbers and no others.

**Scaffolding** (:func:`withhold_fixes`): below the ``guided`` level a named
mistake is said with its level-neutral hint and never with its fix
(:meth:`grader.student.engine.diagnosis.KnownMistake.said`); a report graded at
another level is rewritten to the level of the exercise's stub.

Times are shown one way everywhere (:func:`format_time`): ``2026-03-01 23:59 UTC``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport

if TYPE_CHECKING:
    from grader.student.course import Chapter, Course

NOT_OPEN, OPEN, LATE, CLOSED = "not open yet", "open", "late", "closed"


def format_time(when: datetime | None) -> str:
    """THE way a time is shown to anyone: ``YYYY-MM-DD HH:MM UTC`` (empty for None)."""
    if when is None:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return f"{when.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC"


@dataclass(frozen=True)
class ChapterState:
    """A chapter at one moment: its state word, the time that state names, the late share and the exam hold."""

    chapter: str
    state: str  # NOT_OPEN, OPEN, LATE or CLOSED
    at: datetime | None = None  # NOT_OPEN: when it opens; CLOSED: when it closed; OPEN/LATE: when it closes
    share: float = 1.0  # LATE: the share of a score that counts
    exam: bool = False  # the chapter holds its feedback until ``release``
    release: datetime | None = None  # exam: when the feedback is shown
    held: bool = False  # exam: the feedback is held now
    show_score: bool = False  # exam: the score is shown while the feedback is held

    def message(self) -> str:
        """One line a student reads: "chapter 'x' opens at T", "... closed at T", "... is late: counts 70%"."""
        name = f"chapter '{self.chapter}'"
        if self.state == NOT_OPEN:
            text = f"{name} opens at {format_time(self.at)}"
        elif self.state == CLOSED:
            text = f"{name} closed at {format_time(self.at)}" if self.at else f"{name} is closed"
        elif self.state == LATE:
            text = f"{name} is past its due date: late uploads count {100.0 * self.share:g}%"
            if self.at:
                text += f" until {format_time(self.at)}"
        else:
            text = f"{name} is open" + (f" until {format_time(self.at)}" if self.at else "")
        if self.exam:
            text += f"; exam: feedback at {format_time(self.release)}"
        return text


def late_work(chapter: "Chapter") -> str:
    """What work after the due date counts, in the words of the README and the course page: "counts 70%",
    "counts nothing", "-" (no due date)."""
    if chapter.due is None:
        return "-"
    if chapter.late_penalty >= 1.0:
        return "counts nothing"
    return f"counts {100 * (1 - chapter.late_penalty):g}%"


def chapter_state(chapter: "Chapter", now: datetime) -> ChapterState:
    """The state of ``chapter`` (already extended for the student, when they have an extension) at ``now``."""
    closes = chapter.closes_at()
    at: datetime | None
    if chapter.opens is not None and now < chapter.opens:
        state, at, share = NOT_OPEN, chapter.opens, 1.0
    elif not chapter.is_open(now):
        state, at, share = CLOSED, closes, 0.0
    elif chapter.due is not None and now > chapter.due:
        state, at, share = LATE, closes, 1.0 - chapter.late_penalty
    else:
        state, at, share = OPEN, chapter.due or closes, 1.0
    return ChapterState(
        chapter.name,
        state,
        at,
        share,
        exam=chapter.release_feedback is not None,
        release=chapter.release_feedback,
        held=chapter.feedback_hidden(now),
        show_score=chapter.show_score,
    )


def held_label(release: datetime | None) -> str:
    """What a held exercise shows in place of its score: "received, feedback at T"."""
    return f"received, feedback at {format_time(release)}"


def held_from_student(release: datetime | None, show_score: bool = False) -> str:
    """What the instructor reads beside a held exercise's score (they see it; the student does not until T):
    "held from the student until T", or "feedback held from the student until T" when the score is shown."""
    return f"{'feedback ' if show_score else ''}held from the student until {format_time(release)}"


def held_exercise(ex: ExerciseResult, release: datetime | None, show_score: bool) -> ExerciseResult:
    """An exercise's result as a student sees it before the release: "received, feedback at T", no checks (status
    ``received``, no score) or, with ``show_score``, its score with that line (status ``graded``)."""
    label = held_label(release)
    if show_score:
        return dataclasses.replace(ex, status="graded", checks=[], message=label, output="")
    return dataclasses.replace(ex, status="received", score=0.0, checks=[], message=label, output="")


def as_seen(report: GradeReport, course: "Course", now: datetime, levels: Mapping[str, str]) -> GradeReport:
    """THE report a student may see at ``now``: the exercises of chapters whose exam feedback is held
    (:func:`held_exercise`), every message said at its exercise's scaffolding level (``levels``,
    :func:`withhold_fixes`). The server's answers and pages and Gradescope's results.json render this."""
    exercises = []
    for ex in report.exercises:
        chapter = course.chapter_of(ex.id, report.student)
        if chapter is not None and chapter.feedback_hidden(now) and ex.graded:
            ex = held_exercise(ex, chapter.release_feedback, chapter.show_score)
        exercises.append(ex)
    return withhold_fixes(dataclasses.replace(report, exercises=exercises), levels)


def counted(report: GradeReport) -> list[ExerciseResult]:
    """The exercises the totals count (:attr:`GradeReport.counted_exercises`): graded, and not held."""
    return report.counted_exercises


@dataclass(frozen=True)
class Totals:
    """The totals of a report as the course counts them (see the module docstring)."""

    counted: float  # sum of score x share over the counted exercises
    graded: float  # sum of score over the counted exercises (before late shares)
    maximum: float  # sum of max_score over the counted exercises
    full: int  # counted exercises at full marks
    shown: int  # counted exercises
    held: int  # exercises held by exam mode

    @property
    def percent(self) -> float:
        return 100.0 * self.counted / self.maximum if self.maximum else 0.0


def totals(report: GradeReport, late_shares: Mapping[str, float] | None = None) -> Totals:
    """THE totals of ``report``: ``late_shares`` maps a late exercise's id to the share of its score that counts."""
    shares = late_shares or {}
    shown = counted(report)
    return Totals(
        counted=sum(e.score * shares.get(e.id, 1.0) for e in shown),
        graded=sum(e.score for e in shown),
        maximum=sum(e.max_score for e in shown),
        full=sum(1 for e in shown if e.full_marks),
        shown=len(shown),
        held=sum(1 for e in report.exercises if e.score_hidden),
    )


# "Known mistake <id>: <what> Fix: <fix>" (KnownMistake.explain), possibly after "And also: "
_EXPLAINED = re.compile(r"(?P<lead>(?:And also: )?)Known mistake (?P<id>[^:\s]+):.*")
_FIX = re.compile(r"\s*\bFix: .*$")


def _withheld_line(line: str, level: str) -> str:
    """A report line at ``level``: a named mistake said as :meth:`KnownMistake.explain` says it there."""
    from grader.student.engine.diagnosis import known_mistake  # (NumPy): only when a report is rewritten

    match = _EXPLAINED.fullmatch(line)
    if match is not None:
        entry = known_mistake(match["id"])
        said = entry.explain(level) if entry is not None else f"Known mistake {match['id']}."
        return match["lead"] + said
    if line.startswith("Fix: "):
        return ""
    return _FIX.sub("", line) if "Fix: " in line else line


def withhold_check(check: CheckResult, level: str) -> CheckResult:
    """``check`` with its message as the ``level`` allows (unchanged at ``guided``)."""
    if level == "guided" or not check.message:
        return check
    lines = [_withheld_line(line, level) for line in check.message.splitlines()]
    return dataclasses.replace(check, message="\n".join(line for line in lines if line))


def withhold_fixes(report: GradeReport, levels: Mapping[str, str]) -> GradeReport:
    """``report`` with every check's message said at its exercise's scaffolding level (``levels``: id -> level,
    ``guided`` when absent): below ``guided`` no fix, formula or derivation of a named mistake."""
    exercises = []
    for ex in report.exercises:
        level = levels.get(ex.id, "guided")
        if level != "guided":
            ex = dataclasses.replace(
                ex,
                checks=[withhold_check(c, level) for c in ex.checks],
                message=withhold_check(CheckResult("", True, 0.0, 0.0, ex.message), level).message,
            )
        exercises.append(ex)
    return dataclasses.replace(report, exercises=exercises)
