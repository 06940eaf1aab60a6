"""How a quiz question is posed for one student, shared by the handout and the graders: the
numbers drawn for its parameters, the order of its choices, and the prompt filled in.

No answer is involved: the handout poses a student's own questions (``grade quiz
--student``) exactly as the course server and Gradescope judge them.

- values: ``random.Random(exercise_seed(student, "quiz.<chapter>.<id>"))`` picks
  one value per parameter, in name order; a student whose pick equals the
  practice instance (the numbers the handout's offline practice shows, checked
  offline) draws again from the same generator, so practising never hands
  anyone their graded numbers;
- choices: shuffled by ``random.Random(exercise_seed(student, "quiz.<chapter>.<id>.choices"))``;
- prompts: ``{{ name }}`` and ``{{ name | signed }}`` (``+ 2`` / ``- 3``) replaced by values.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from grader.student.engine.model import exercise_seed

PRACTICE_STUDENT = "(practice)"  # whose numbers the handout's offline practice shows
MAX_REDRAWS = 64

T = TypeVar("T")
_FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\|\s*signed\s*)?\}\}")


def _pick(grid: Mapping[str, Sequence[Any]], rng: random.Random) -> dict[str, Any]:
    return {name: rng.choice(list(grid[name])) for name in sorted(grid)}


def draw_values(
    grid: Mapping[str, Sequence[Any]],
    student: str,
    chapter: str,
    question_id: str,
    practice: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The student's values (name -> value) from each parameter's list of possible values. ``practice``: the
    practice instance the author chose (one whose answer no other instance shares), else the practice
    student's own draw."""
    if student == PRACTICE_STUDENT and practice:
        return dict(practice)
    rng = random.Random(exercise_seed(student, f"quiz.{chapter}.{question_id}"))
    values = _pick(grid, rng)
    if student == PRACTICE_STUDENT:
        return values
    practice = dict(practice) if practice else draw_values(grid, PRACTICE_STUDENT, chapter, question_id)
    for _ in range(MAX_REDRAWS):
        if values != practice:
            break
        values = _pick(grid, rng)
    return values


def choice_order(items: Sequence[T], student: str, chapter: str, question_id: str) -> list[T]:
    """The choices in the order ``student`` sees them."""
    shown = list(items)
    random.Random(exercise_seed(student, f"quiz.{chapter}.{question_id}.choices")).shuffle(shown)
    return shown


def signed(value: Any) -> str:
    """``+ 2`` or ``- 3``, to write ``w·x {{ b | signed }}``."""
    return f"- {-value}" if value < 0 else f"+ {abs(value)}"


def render_prompt(template: str, values: Mapping[str, Any]) -> str:
    """A prompt template with ``{{ name }}`` / ``{{ name | signed }}`` filled in (KeyError: unknown name)."""
    return _FIELD.sub(lambda m: signed(values[m.group(1)]) if m.group(2) else str(values[m.group(1)]), template)
