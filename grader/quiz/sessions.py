"""Sessions and standings: the interactive quiz in a terminal, what it prints, and a chapter's
standing from the recorded attempts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from grader.quiz import params as params_lib
from grader.quiz.errors import AnswerFormatError, ReferenceUnavailableError
from grader.quiz.judging import judge, pose
from grader.quiz.model import ChapterProgress, Posed, Question, Quiz, QuizResult, Verdict
from grader.student.quiz.quiz_text import (  # noqa: F401  (what a session shows: shared with the handout)
    format_listing,
    answer_hint,
    show_question,
    attempt_label,
    feedback_line,
    session_intro,
    summary_text,
)


def chapter_progress(quiz: Quiz, attempts: Iterable[Mapping[str, Any]]) -> ChapterProgress:
    """A chapter's standing from store rows (keys chapter, question, correct)."""
    ids = {q.id for q in quiz.questions}
    correct: set[str] = set()
    count = 0
    for row in attempts:
        if row["chapter"] != quiz.chapter or row["question"] not in ids:
            continue
        count += 1
        if row["correct"]:
            correct.add(row["question"])
    checkpoints = {q.id for q in quiz.checkpoints}
    return ChapterProgress(
        chapter=quiz.chapter,
        title=quiz.title,
        questions=len(quiz.questions),
        checkpoints=len(checkpoints),
        checkpoints_correct=len(checkpoints & correct),
        questions_correct=len(correct),
        attempts=count,
    )


# --- the interactive session -----------------------------------------------------

AnswerHook = Callable[[Question, Verdict], None]


def _read_answer(posed: Posed, prompt_text: str) -> Verdict:
    """Prompt until the answer is readable (an unreadable one is a one-line reason and costs nothing)."""

    def read(raw: str) -> Verdict:
        try:
            return judge(posed, raw, shown=True)
        except AnswerFormatError as exc:
            raise click.UsageError(str(exc)) from None

    return click.prompt(prompt_text, value_proc=read)


def ask_question(posed: Posed, number: int, total: int, on_answer: AnswerHook | None = None) -> Verdict:
    """Show one posed question and judge up to ``attempts`` answers; the explanation follows a
    correct answer or the last wrong one. Every judged answer goes to ``on_answer``."""
    question = posed.question
    show_question(number, total, question.id, posed.prompt, (c.text for c in posed.choices), question.checkpoint)
    hint = answer_hint(question.kind, question.tolerance)  # a drawn question's answer is a number: no names
    verdict = None
    for attempt in range(1, question.attempts + 1):
        verdict = _read_answer(posed, attempt_label(attempt, question.attempts, hint))
        if on_answer is not None:
            on_answer(question, verdict)
        click.echo(feedback_line(verdict.correct, question.attempts - attempt))
        if verdict.correct:
            break
    assert verdict is not None  # attempts >= 1, validated on load
    click.echo(f"Explanation: {posed.explanation(verdict.expected)}")
    return verdict


def run_session(
    quiz: Quiz,
    student: str = "",
    on_answer: AnswerHook | None = None,
    skip: Iterable[str] = (),
) -> QuizResult:
    """Ask the questions of ``quiz`` not in ``skip`` (those already answered correctly), posed for
    ``student``, through click; call ``on_answer`` for every judged answer; print a summary."""
    skipped = set(skip)
    todo = [q for q in quiz.questions if q.id not in skipped]
    done = len(quiz.questions) - len(todo)
    session_intro(quiz.title, len(quiz.questions), len(quiz.checkpoints), done)
    result = QuizResult(quiz)
    for number, question in enumerate(todo, 1):
        posed = pose(question, student)
        result.posed[question.id] = posed
        result.verdicts[question.id] = ask_question(posed, number, len(todo), on_answer)
    click.echo("")
    before = f" ({done} answered correctly before.)" if done else ""
    click.echo(summary_line(result) + before)
    return result


def summary_line(result: QuizResult) -> str:
    """One line: questions right, points, checkpoints right in this pass."""
    cps = result.quiz.checkpoints
    return summary_text(
        result.quiz.chapter,
        result.correct_count,
        len(result.quiz.questions),
        result.score,
        result.max_score,
        sum(1 for q in cps if result._correct(q.id)),
        len(cps),
    )


def correct_questions(quiz: Quiz, attempts: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ids of ``quiz``'s questions with at least one correct row in ``attempts`` (store rows)."""
    ids = {q.id for q in quiz.questions}
    return {
        row["question"]
        for row in attempts
        if row["chapter"] == quiz.chapter and row["question"] in ids and row["correct"]
    }


def needs_reference(quiz: Quiz) -> None:
    """ReferenceUnavailableError (one line) when the chapter has parameterised questions and the
    reference implementation cannot be imported here; nothing otherwise."""
    if any(q.parameterised for q in quiz.questions):
        try:
            params_lib.import_reference()
        except ReferenceUnavailableError as exc:
            raise ReferenceUnavailableError(f"chapter '{quiz.chapter}': {exc}") from None
