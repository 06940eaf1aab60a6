"""The handout's `grade` command: the commands both programs ship, gathered, and the handout's own edition.

In a handout (``pip install DIR/student``) this is the console script, a
complete student client: ``grade submit`` grades the public checks from the
case packs installed beside it (:class:`grader.student.engine.pack.PackSource`) or,
after ``grade login``, hands in to the course server, which runs the hidden
checks (:mod:`grader.student.client.remote`); ``grade quiz`` is practice offline and
judged by the server when logged in; ``grade progress`` shows the server's
record when logged in, this machine's record of public-check attempts
otherwise; ``grade result ID`` shows a stored submission. Both command lines
and the notebook submit through :func:`grader.student.submit.submit`.

Every command a handout ships is defined once, in grader/student/commands/: the shared options
(options.py), what each program brings (edition.py: :class:`Edition`), the commands of the work
(work.py: submit, progress, quiz, practice, doctor), of reading (reading.py: read, view) and of
the account (account.py: login, logout, result, regrade). :func:`commands` builds them for an edition,
the handout's (:data:`HANDOUT`, here) or the instructor's (``grader/cli.py``, with the live source: hidden
checks), which adds its own commands beside them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.student.engine import catalogue
from grader.student.engine.model import GradeReport
from grader.student.sandbox.runner import Limits, Workspace
from grader.student.store import Store
from grader.student.submit import CommandError, grader_version, one_line_errors
from grader.student.commands.account import login_command, logout_command, regrade_command, result_command
from grader.student.commands.edition import LOGIN_HINT, Edition, QuizRequest
from grader.student.commands.options import run_console_script
from grader.student.commands.reading import DEFAULT_TEXT_DIR, read_command, text_sections, view_command
from grader.student.commands.work import (
    DEFAULT_QUIZ_DIR,
    doctor_command,
    practice_command,
    progress_command,
    quiz_command,
    remote_quiz,
    submit_command,
)

if TYPE_CHECKING:
    from grader.student.feedback.progress import Progress


def commands(edition: Edition) -> list[click.Command]:
    """The commands both `grade` programs ship, built for ``edition``; the instructor's adds its own."""
    return [
        submit_command(edition),
        progress_command(edition),
        quiz_command(edition),
        read_command(edition),
        doctor_command(edition),
        view_command,
        login_command,
        logout_command,
        result_command,
        regrade_command,
        practice_command,
    ]


# --- the handout's program ---------------------------------------------------------------------------------


def grade_on_packs(folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace) -> GradeReport:
    """The handout's grading here: the public checks, with the expected results of the packs installed beside it."""
    from grader.student.engine.grading import grade as grade_with
    from grader.student.engine.pack import PackSource

    return grade_with(folder, ids, name, limits, PackSource(), workspace)


def practice_progress(store: Store | None, student: str, hint: str, course_file: Path | None) -> Progress:
    """The handout's `grade progress` here: the public-check attempts of this machine, without quizzes."""
    from grader.student.feedback import progress

    return progress.summarize(
        store,
        student,
        list(catalogue.EXERCISES),
        [],
        hint,
        None,
        "public checks on this machine; what counts is the course's record",
    )


def practice_quiz(request: QuizRequest) -> int:
    """The handout's `grade quiz`: the course server's when logged in, else practice from its quizzes/ folder
    (nothing recorded; ``--student`` and ``--save-answers`` add the answers to the file a Gradescope upload
    carries)."""
    import difflib

    from grader.student.quiz.practice import chapters, load_practice, run_practice
    from grader.student.quiz.practice import save_answers as save

    handed = remote_quiz(request)
    if handed is not None:
        return handed
    if request.answers is not None or request.ask_all or request.as_json:
        raise CommandError(
            f"--answers, --all and --json go with the course server: {LOGIN_HINT} (offline quizzes are practice)"
        )
    chapter, quiz_dir = request.chapter, request.own["quiz_dir"]
    student, save_answers = request.own["student"], request.own["save_answers"]
    with one_line_errors():
        names = chapters(quiz_dir)
        if not names:
            raise CommandError(
                f"no quizzes in '{quiz_dir}': run this from your handout's folder, or pass "
                "--quiz-dir to its quizzes/ folder"
            )
        if chapter is None:
            for name in names:
                click.echo(f"{name}: {load_practice(quiz_dir / f'{name}.json').title}")
            click.echo("Practise one: grade quiz CHAPTER")
            return 0
        if chapter not in names:
            guess = difflib.get_close_matches(chapter, names, n=1, cutoff=0.5)
            hint = f"Did you mean '{guess[0]}'?" if guess else f"Chapters: {', '.join(names)}."
            raise CommandError(f"'{chapter}' is not a quiz chapter. {hint}")
        if save_answers is not None and not (student or "").strip():
            raise CommandError(
                "--save-answers needs --student YOUR_GRADESCOPE_EMAIL: the numbers and the choice "
                "order you answer are your own"
            )
        quiz = load_practice(quiz_dir / f"{chapter}.json")
        try:
            _, _, given = run_practice(
                quiz,
                lambda prompt: click.prompt(prompt, prompt_suffix="", default="", show_default=False),
                click.echo,
                student=(student or "").strip() or None,
                sections=text_sections(quiz_dir.parent / DEFAULT_TEXT_DIR),
            )
        except click.Abort:
            click.echo("\nStopped.", err=True)
            sys.exit(1)
        if save_answers is not None and student:
            save(save_answers, student.strip(), chapter, given)
            click.echo(f"{len(given)} answer(s) of {chapter} saved in {save_answers}: upload it with your exercises.")
    return 0


HANDOUT = Edition(
    grade=grade_on_packs,
    progress=practice_progress,
    quiz=practice_quiz,
    text_pages=None,
    doctor_role="student",
    no_wait_hint=f"{LOGIN_HINT}, then `grade submit --no-wait`",
    options={
        "quiz": [
            click.option(
                "--quiz-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=DEFAULT_QUIZ_DIR,
                show_default=True,
                help="The handout's quizzes folder (practice).",
            ),
            click.option(
                "--student",
                default=None,
                metavar="ID",
                help="Practice: pose your own questions (your numbers, your choice order): your Gradescope email.",
            ),
            click.option(
                "--save-answers",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                metavar="FILE",
                help="Practice: add your answers to FILE (quiz-answers.toml) for your "
                "Gradescope upload; needs --student.",
            ),
        ]
    },
    notes={
        "submit": "In this handout, graded here means the public checks, with the expected results shipped in it.",
        "progress": "Here, this machine's record of your public-check attempts, labelled as such. Offline quizzes "
        "are practice and not recorded.",
        "quiz": "Otherwise (or with --local) it is practice from the handout's quizzes/ folder: nothing is "
        "recorded; with --student and --save-answers your answers go into the file your Gradescope "
        "upload carries.",
        "doctor": "It also checks the course server you logged in to.",
    },
)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version is looked up only when asked (importlib.metadata costs start-up time)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"grade, version {grader_version()}")
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Grade your implementations of deep-network building blocks, take the quizzes, follow your progress.

    Logged in to the course server (`grade login`), your work is graded there with the hidden checks and
    recorded; otherwise the public checks run here and the quizzes are practice.
    """


for _command in commands(HANDOUT):
    cli.add_command(_command)


def main(prog_name: str | None = None) -> None:
    """Console-script entry point of a handout's ``grade``."""
    run_console_script(cli, prog_name)


if __name__ == "__main__":
    main("python -m grader.student.cli")
