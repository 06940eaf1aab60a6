"""Graded attempts: how many tries a graded question has, and what a student is told after each.

Where quizzes count (the course server, Gradescope), each question allows a
fixed number of judged attempts, ``[quiz] attempts`` of the course file or
else the question's own ``attempts``, and the count never resets: every
judged answer is one attempt, until the first correct one; after that, or
once the attempts are spent, the question is closed and further answers are
refused (an unreadable or too complex answer is not judged and costs none).

What a judged answer shows:

- right: "Correct." and the explanation;
- wrong, attempts left, before the chapter's due date: "Not this one." and
  nothing more (no explanation, no number, no hint which choice is right);
- wrong with the last attempt, or after the due date: the explanation
  (a parameterised question's with the student's own numbers and answer).

The rules read only the recorded attempts (store rows, oldest first, or the
per-question records Gradescope keeps in earlier results), so the server and
Gradescope apply the same ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from grader.quiz.model import Question

NOT_THIS_ONE = "Not this one."


@dataclass(frozen=True)
class GradedStanding:
    """One student's standing on one graded question: judged attempts used, right or not, allowed."""

    used: int
    correct: bool
    allowed: int

    @property
    def left(self) -> int:
        """Attempts still allowed (0 once answered correctly)."""
        return 0 if self.correct else max(0, self.allowed - self.used)

    @property
    def closed(self) -> bool:
        """True when no more answers are judged: answered correctly or attempts spent."""
        return self.left == 0

    def after(self, correct: bool) -> "GradedStanding":
        """The standing after one more judged answer."""
        return GradedStanding(self.used + 1, correct, self.allowed)

    def to_json(self) -> dict[str, Any]:
        return {"used": self.used, "correct": self.correct, "allowed": self.allowed, "left": self.left}


def allowed_attempts(question: Question, course_attempts: int | None = None) -> int:
    """The judged attempts a graded question allows: the course's ``[quiz] attempts``, else its own."""
    return int(course_attempts) if course_attempts else question.attempts


def standing(
    question: Question, rows: Iterable[Mapping[str, Any]], course_attempts: int | None = None
) -> GradedStanding:
    """The standing from recorded answers (rows with chapter, question, correct; oldest first): every
    answer up to and including the first correct one counts; none after it."""
    used, correct = 0, False
    for row in rows:
        if row["chapter"] != question.chapter or row["question"] != question.id or correct:
            continue
        used += 1
        correct = bool(row["correct"])
    return GradedStanding(used, correct, allowed_attempts(question, course_attempts))


def past_due(due: datetime | None, now: datetime) -> bool:
    """Whether the chapter's due date (None: no due date) has passed."""
    return due is not None and now > due


def reveals_explanation(after: GradedStanding, due_passed: bool) -> bool:
    """Whether the explanation is shown after a judged answer: right, attempts spent, or past the due date."""
    return after.closed or due_passed


def feedback(after: GradedStanding) -> str:
    """The one line after a judged graded answer: never which choice or number is right."""
    if after.correct:
        return "Correct."
    if after.left:
        return f"{NOT_THIS_ONE} ({after.left} attempt(s) left)"
    return f"{NOT_THIS_ONE} No attempts left."


def closed_message(question: Question, st: GradedStanding) -> str:
    """The one-line refusal of an answer to a closed question."""
    if st.correct:
        return f"'{question.id}' is answered correctly already: it counts, and no more answers are judged"
    return (
        f"'{question.id}' has no attempts left ({st.used} of {st.allowed} used): "
        "attempts never reset, so this answer is not judged"
    )
