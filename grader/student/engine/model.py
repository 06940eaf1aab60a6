"""The grader's result types: what a check, an exercise and a whole submission produce.

They are plain data with a ``to_json`` that follows the ``--json`` schema of
the exercise contract (``shared/spec/exercise-api.md`` section 6).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


# A located check's message begins with this line (grader/student/engine/grading.py): "Where: FILE line N: `code`".
WHERE_PREFIX = "Where: "


@dataclass
class CheckResult:
    """One graded check of one exercise (partial credit: score out of max_score)."""

    name: str
    passed: bool
    score: float
    max_score: float
    message: str = ""
    misconception: str | None = None
    # What a picture of the failure needs (grader.student.feedback.figures): a bounded, JSON-safe dict, or None.
    # Left out of to_json() unless asked for (``grade submit --json --arrays``).
    figure: dict[str, Any] | None = None
    # Further known mistakes behind this check when two or three explain it together ("and also ..."):
    # ``misconception`` stays the first (main) one.
    also: list[str] = field(default_factory=list)
    # A hidden check's full picture, the expected values drawn (grading live: ``figure`` is then what the student may
    # see of it, figures.hidden_view). For the instructor's eyes only: never in to_json, never in the wire form a
    # student receives (grader.student.client.wire.report_to_dict leaves it out unless asked).
    instructor_figure: dict[str, Any] | None = None
    # Where the student's computation leaves the reference's (grader.course.align): {"file", "line", "code"}, or None.
    where: dict[str, Any] | None = None
    # The case whose outputs a failing comparison read (the one a location is sought on); not in to_json.
    case: str = ""

    def to_json(self, arrays: bool = False) -> dict[str, Any]:
        doc = {
            "name": self.name,
            "passed": self.passed,
            "score": round(self.score, 6),
            "max_score": self.max_score,
            "message": self.message,
            "misconception": self.misconception,
        }
        if self.also:
            doc["also"] = list(self.also)
        if self.where:
            doc["where"] = {key: self.where[key] for key in ("file", "line", "code") if key in self.where}
        if arrays:
            doc["figure"] = self.figure
        return doc


NOT_GRADED = "not_graded"


def at_full_marks(score: float, max_score: float) -> bool:
    """THE rule of full marks, for a result, a counted score or a class cell: ``score >= max_score`` (to 1e-9)."""
    return score >= max_score - 1e-9


@dataclass
class ExerciseResult:
    """The verdict on one exercise: status, score and the checks behind it.

    ``not_graded`` means the grader's own machine failed (no OpenCL device that builds
    a kernel, a worker that could not start): there is no verdict on the student's work,
    its score is null in ``--json``, it counts in no total and is never recorded as a score.
    """

    id: str
    status: str  # passed, failed, not_implemented, error, timeout or not_graded
    score: float
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)
    message: str = ""  # exercise-level reason (timeout, crash, forbidden import, what the grader lacks)
    duration: float = 0.0  # seconds spent grading it
    output: str = ""  # bounded captured stdout/stderr of the student's code

    @property
    def graded(self) -> bool:
        """False for ``not_graded``: the grader's machine, not the student's work, decided nothing."""
        return self.status != NOT_GRADED

    @property
    def score_hidden(self) -> bool:
        """True for ``received`` (exam mode, grader/term/standing.py): graded, but the course shows no score before
        its feedback release (its 0 of 0 is no score, and never full marks)."""
        return self.status == "received"

    @property
    def feedback_held(self) -> bool:
        """True for ``graded`` and ``received`` (exam mode): the checks' messages wait for the feedback release;
        the exercise's message is the one line "received, feedback at T" (grader/student/standing.py)."""
        return self.status in ("graded", "received")

    @property
    def full_marks(self) -> bool:
        """At full marks: graded, its score shown (not held by exam mode) and ``score >= max_score``."""
        return self.graded and not self.score_hidden and at_full_marks(self.score, self.max_score)

    def to_json(self, arrays: bool = False) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "score": round(self.score, 6) if self.graded and not self.score_hidden else None,
            "max_score": self.max_score,
            "checks": [c.to_json(arrays) for c in self.checks],
        }
        if not self.graded:
            doc["message"] = self.message
        return doc


@dataclass
class GradeReport:
    """Everything ``grade submit`` decided about one submission."""

    student: str
    exercises: list[ExerciseResult]
    files_hash: str = ""
    notices: list[str] = field(default_factory=list)  # one line each: files refused at ingest, sandbox off
    sandboxed: bool = True  # False: graded without the OS sandbox (--no-sandbox, or none available)

    @property
    def graded_exercises(self) -> list[ExerciseResult]:
        """The exercises with a verdict (every one but ``not_graded``): the totals count these alone."""
        return [e for e in self.exercises if e.graded]

    @property
    def not_graded(self) -> list[ExerciseResult]:
        """The exercises the grader's machine could not grade (exit status 2; graded again once it can)."""
        return [e for e in self.exercises if not e.graded]

    @property
    def counted_exercises(self) -> list[ExerciseResult]:
        """The exercises the totals count: graded, and not held by exam mode (``received``: no score shown)."""
        return [e for e in self.graded_exercises if not e.score_hidden]

    @property
    def score(self) -> float:
        return sum(e.score for e in self.counted_exercises)

    @property
    def max_score(self) -> float:
        """THE maximum of a report: the counted exercises' max_score (grader/student/standing.py)."""
        return sum(e.max_score for e in self.counted_exercises)

    @property
    def full_marks(self) -> bool:
        """Every graded exercise at full marks; an exercise whose score is hidden (exam mode) is not known to be."""
        return all(e.full_marks for e in self.graded_exercises)

    @property
    def exit_status(self) -> int:
        """The command's exit status (contract section 6): 2 when any exercise is not graded, else 0 at full marks,
        1 (also while a score is hidden by exam mode: 0 would tell the hidden verdict)."""
        if self.not_graded:
            return 2
        return 0 if self.full_marks else 1

    def to_json(self, arrays: bool = False) -> dict[str, Any]:
        """The ``--json`` document; with ``arrays`` each check also carries its ``figure`` (null when none)."""
        return {
            "student": self.student,
            "score": round(self.score, 6),
            "max_score": self.max_score,
            "exercises": [e.to_json(arrays) for e in self.exercises],
        }


def exercise_seed(student: str, exercise_id: str) -> int:
    """The seed of an exercise's inputs: the same student always sees the same numbers."""
    digest = hashlib.sha256(f"{student}\0{exercise_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")
