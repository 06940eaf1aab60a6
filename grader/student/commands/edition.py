"""What each `grade` program brings to the commands both ship (:class:`Edition`): how it grades, shows progress,
poses a quiz, opens the text and checks the machine, its own options and its own help paragraphs. The handout's
edition is grader/student/cli.py's ``HANDOUT``; the instructor's, grader/cli.py's ``INSTRUCTOR``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from grader.student.store import Store
from grader.student.submit import GradeFunction
from grader.student.commands.options import Decorator

if TYPE_CHECKING:
    from grader.student.feedback.progress import Progress


@dataclass(frozen=True)
class QuizRequest:
    """`grade quiz`'s arguments as both programs read them; ``own``: the values of the options only this
    program has (:attr:`Edition.options`)."""

    chapter: str | None
    answers: Path | None
    ask_all: bool
    as_json: bool
    server: str | None
    local: bool
    own: dict[str, Any]


# `grade progress` here: (the store or None, the student, how to submit, --course) -> the summary to print.
ProgressFunction = Callable[[Store | None, str, str, "Path | None"], "Progress"]


@dataclass(frozen=True)
class Edition:
    """One `grade` program: what it brings to the commands both programs ship, each defined once (work.py,
    reading.py, account.py) and built for an edition by :func:`grader.student.cli.commands`.

    The handout's (:data:`grader.student.cli.HANDOUT`) grades here on its case packs, practises the quizzes offline and opens the
    text's built pages; the instructor's (``grader/cli.py``) grades with the live reference (hidden checks),
    records the locked quizzes' answers, builds the text's pages and checks the machine as an operator.
    Logged in to a course server, both hand in, take the server's quizzes and show its record.
    """

    grade: GradeFunction  # `grade submit` here
    progress: ProgressFunction  # `grade progress` here
    quiz: Callable[[QuizRequest], int]  # `grade quiz` (it calls remote_quiz itself when logged in): exit status
    text_pages: Callable[[Path], Path] | None  # `grade read --html`: build text/'s pages, where (None: built)
    doctor_role: str  # `grade doctor`: "student" (checks the course server) or "operator" (checks the queue)
    no_wait_hint: str  # how this program logs in, for `--no-wait` without a course server
    options: Mapping[str, Sequence[Decorator]] = field(default_factory=dict)  # command -> options only it has
    notes: Mapping[str, str] = field(default_factory=dict)  # command -> a paragraph its help adds


def command_help(text: str, edition: Edition, name: str) -> str:
    """A command's help: the text both programs show, then the edition's own paragraph."""
    note = edition.notes.get(name)
    return f"{inspect.cleandoc(text)}\n\n{inspect.cleandoc(note)}" if note else inspect.cleandoc(text)


# How a handout command is written in its README and messages: the course's commands run as `grade ...`.
LOGIN_HINT = "run `grade login` (it asks for the token your instructor gave you)"
