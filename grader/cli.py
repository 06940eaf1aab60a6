"""The `grade` command line: thin click commands over the grader library.

Each command parses its options, calls one library function and turns the
library's named exceptions into one-line errors (exit 2 for usage/setup
errors, as the exercise contract says).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

# Only what every command needs is imported here (grader.student.cli loads the grading pipeline, NumPy
# included). Each command imports its own modules inside its function, so that `grade submit` does not
# load the batch's process pool, the quizzes (Jinja2), the class report or the server.
from grader.server import cli as remote_cli
from grader.term import cli as term_cli
from grader.student.engine import catalogue
from grader.student.course import load_course
from grader.student.errors import StoreError
from grader.student.feedback.report import write_text
from grader.student import cli as student_cli
from grader.student.commands.edition import Edition, QuizRequest
from grader.student.commands.options import (
    F,
    db_option,
    json_option,
    no_sandbox_option,
    path_option,
    run_console_script,
    student_option,
)
from grader.student.commands.work import remote_quiz
from grader.student.submit import CommandError, default_student, one_line_errors
from grader.student.submit import sandbox_setting
from grader.student.sandbox.runner import Limits, Workspace
from grader.student.store import Store, default_db_path

if TYPE_CHECKING:
    from grader.student.engine.model import GradeReport
    from grader.student.feedback.progress import Progress
    from grader.term import batch as batch_lib
    from grader import quiz as quiz_lib

QUIZ_DIR_ENV = "GRADE_QUIZ_DIR"  # grader.quiz.QUIZ_DIR_ENV, named here without importing grader.quiz


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="normgrade")
def cli() -> None:
    """Grade your implementations of deep-network building blocks and track your progress."""


# --- shared options and helpers (grader/student/cli.py, shared with the handout's grade), submit, progress


def grade_live(folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace) -> GradeReport:
    """The instructor's grading here: the live reference (hidden checks, per-student seeds)."""
    from grader.course import grading  # the live source (hidden checks), loaded once the workers are starting

    return grading.grade(folder, ids, name, limits, workspace)


def live_progress(store: Store | None, student: str, hint: str, course_file: Path | None) -> Progress:
    """The instructor's `grade progress` here: every exercise and the locked quizzes, with the score rule and
    due dates of ``course_file`` (None: the best score ever)."""
    from grader.term import progress  # loads grader.quiz (Jinja2): only this command needs it

    return progress.summarize(
        store,
        student,
        progress.course_exercises(),
        progress.course_quizzes(),
        hint,
        load_course(course_file) if course_file is not None else None,
    )


# --- quiz ---------------------------------------------------------------------


def quiz_dir_option(func: F) -> F:
    """``--quiz-dir DIR`` (or $GRADE_QUIZ_DIR); None means the checkout's quizzes/ folder."""
    return click.option(
        "--quiz-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar=QUIZ_DIR_ENV,
        default=None,
        help="Folder of locked quizzes [default: $GRADE_QUIZ_DIR, else quizzes/].",
    )(func)


def _quiz_lock(quiz_dir: Path, check: bool, as_json: bool) -> int:
    """``grade quiz lock [--check]``: print one line per locked file; 1 when --check finds a stale one."""
    from grader import quiz as quiz_lib

    outcomes = quiz_lib.lock_all(quiz_dir, check=check)
    bad = [o for o in outcomes if o.status in ("stale", "orphan")]
    if as_json:
        click.echo(
            json.dumps([{"file": str(o.path), "status": o.status, "detail": o.detail} for o in outcomes], indent=2)
        )
    else:
        for o in outcomes:
            click.echo(f"{o.status:9} {o.path}" + (f" ({o.detail})" if o.detail else ""))
        if check and bad:
            click.echo("Run `grade quiz lock` to regenerate the locked files.", err=True)
    return 1 if check and bad else 0


def _quiz_list(quiz_dir: Path, db_path: Path, student: str, as_json: bool) -> None:
    """``grade quiz``: each chapter, its questions and the student's completion."""
    from grader import quiz as quiz_lib

    quizzes = quiz_lib.load_all(quiz_dir)
    attempts: list[dict[str, Any]] = []
    if db_path.exists():
        with Store.open(db_path) as store:
            attempts = store.quiz_attempts(student)
    standings = [quiz_lib.chapter_progress(q, attempts) for q in quizzes]
    if as_json:
        click.echo(json.dumps({"student": student, "chapters": [s.to_json() for s in standings]}, indent=2))
        return
    click.echo(quiz_lib.format_listing(student, standings))


def _quiz_recorder(store: Store, student: str, chapter: str) -> quiz_lib.AnswerHook:
    """A hook that records each answer; a store failure is a warning line, the quiz goes on."""

    def record(question: quiz_lib.Question, verdict: quiz_lib.Verdict) -> None:
        try:
            store.record_quiz_answer(student, chapter, question.id, verdict.answer, verdict.correct, verdict.values)
        except StoreError as exc:
            click.echo(f"Warning: answer not recorded: {exc}", err=True)

    return record


def _quiz_file_report(result: quiz_lib.QuizResult) -> None:
    """The human report of a graded answers file: one block per question, then the summary."""
    from grader import quiz as quiz_lib

    total = len(result.quiz.questions)
    for number, q in enumerate(result.quiz.questions, 1):
        tag = " [checkpoint]" if q.checkpoint else ""
        verdict = result.verdicts.get(q.id)
        if verdict is None:
            click.echo(f"Q{number}/{total} {q.id}{tag}: not answered")
            continue
        state = "correct" if verdict.correct else "wrong"
        if verdict.error:
            state = f"wrong ({verdict.error})"
        click.echo(f"Q{number}/{total} {q.id}{tag}: {state}")
        if verdict.values:
            click.echo("  Your numbers: " + ", ".join(f"{k} = {v}" for k, v in verdict.values.items()))
        click.echo(f"  Explanation: {result.explanation(q)}")
    click.echo(quiz_lib.summary_line(result))


def recorded_quiz(request: QuizRequest) -> int:
    """The instructor's `grade quiz`: ``lock`` the quizzes (authors), else the course server's quiz when logged
    in, else the locked quizzes here, every answer recorded; the exit status.

    For a chapter: 0 when every question has been answered correctly (now or before), 1 otherwise.
    """
    chapter, answers, ask_all, as_json = request.chapter, request.answers, request.ask_all, request.as_json
    check: bool = request.own["check"]
    quiz_dir: Path | None = request.own["quiz_dir"]
    student: str | None = request.own["student"]
    db: Path | None = request.own["db"]
    path: Path = request.own["path"]
    from grader import quiz as quiz_lib  # Jinja2 (the questions' numbers): only the quiz commands need it

    quiz_dir = quiz_dir if quiz_dir is not None else quiz_lib.default_quiz_dir()
    if chapter == "lock":
        if answers is not None:
            raise CommandError("`grade quiz lock` takes no --answers: it locks quizzes/source/*.toml")
        with one_line_errors():
            return _quiz_lock(quiz_dir, check, as_json)
    if check:
        raise CommandError("--check goes with `grade quiz lock --check`")
    if ask_all and (chapter is None or answers is not None):
        raise CommandError("--all goes with an interactive quiz: grade quiz CHAPTER --all")
    handed = remote_quiz(request, db)
    if handed is not None:
        return handed
    student = student or default_student()
    db_path = db if db is not None else default_db_path(path)
    if chapter is None:
        if answers is not None:
            raise CommandError("--answers needs a chapter: grade quiz CHAPTER --answers FILE")
        with one_line_errors():
            _quiz_list(quiz_dir, db_path, student, as_json)
        return 0
    if as_json and answers is None:
        raise CommandError("--json needs --answers FILE (the interactive quiz talks to the terminal)")
    with one_line_errors():
        quiz = quiz_lib.resolve_chapter(chapter, quiz_dir)
        quiz_lib.needs_reference(quiz)
        given = quiz_lib.load_answers(answers) if answers is not None else None
        store = Store.open(db_path)
    with store:
        record = _quiz_recorder(store, student, quiz.chapter)
        if given is None:
            with one_line_errors():
                done = set() if ask_all else quiz_lib.correct_questions(quiz, store.quiz_attempts(student))
            if len(done) == len(quiz.questions):
                click.echo(
                    f"Every question of {quiz.chapter} is answered correctly already. "
                    f"Practise them again: grade quiz {quiz.chapter} --all"
                )
                result = quiz_lib.QuizResult(quiz)
            else:
                result = quiz_lib.run_session(quiz, student, on_answer=record, skip=done)
        else:
            with one_line_errors():  # a flat file, or the Gradescope file's [chapter] table
                table, shown = quiz_lib.answers_for(given, quiz.chapter, student, str(answers))
                result = quiz_lib.grade_answers(quiz, table, source=str(answers), student=student, shown=shown)
            for q in quiz.questions:
                if q.id in result.verdicts and result.verdicts[q.id].error is None:
                    record(q, result.verdicts[q.id])
        with one_line_errors():
            attempts = store.quiz_attempts(student)
            standing = quiz_lib.chapter_progress(quiz, attempts)
            all_right = len(quiz_lib.correct_questions(quiz, attempts)) == len(quiz.questions)
    if as_json:
        click.echo(json.dumps(result.to_json(student, standing.complete), indent=2, ensure_ascii=False))
    else:
        if given is not None:
            _quiz_file_report(result)
        click.echo(standing.completion_line)
    return 0 if all_right else 1


# --- batch, report -------------------------------------------------------------


def _show_progress() -> bool:
    """A progress bar only on a terminal (stderr); a log or a pipe gets the summary line alone."""
    return sys.stderr.isatty()


def class_db_option(func: F) -> F:
    """``--db FILE`` (or $GRADE_DB), required: the class database of batch and report."""
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="GRADE_DB",
        required=True,
        help="The class database [or $GRADE_DB].",
    )(func)


@click.command("batch")
@click.argument("submissions_dir", type=click.Path(path_type=Path), metavar="SUBMISSIONS_DIR")
@click.argument("selectors", nargs=-1, metavar="[EXERCISE|TOPIC]...")
@class_db_option
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Students graded at once [default: the number of CPUs].",
)
@click.option("--force", is_flag=True, help="Regrade every student, also those unchanged since their last attempt.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Cap on each exercise's wall-clock time [default: each exercise's own limit].",
)
@click.option(
    "--queue",
    "queue_url",
    default=None,
    metavar="URL",
    help="Grade on the course server's queue (redis://HOST:PORT/DB: `grade worker --queue URL` on any machines).",
)
@click.option(
    "--job-timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="With --queue: seconds a grading try may run before it is tried again (then an error).",
)
@json_option
@no_sandbox_option
def batch_command(
    submissions_dir: Path,
    selectors: tuple[str, ...],
    db: Path,
    jobs: int | None,
    force: bool,
    timeout: float | None,
    queue_url: str | None,
    job_timeout: float,
    as_json: bool,
    no_sandbox: bool,
) -> None:
    """Grade every student in SUBMISSIONS_DIR into one database, as `grade submit` would.

    Each subfolder is a student, named after it: the student's exercises/
    folder, or a folder that contains one. Students whose files have not
    changed since their recorded attempt are skipped unless --force. Each
    student is recorded as soon as graded, so an interrupted run resumes.

    Exit status: 0 when every student was graded (or unchanged), 1 when any
    could not be graded, 2 for a usage or setup error and when the grader's
    machine could not grade some exercises (not_graded: nothing recorded for
    them; run it again once `grade doctor` passes and it grades just those).
    Every student runs in the OS sandbox; without bubblewrap the batch refuses
    to start unless --no-sandbox (then the recorded grader version says
    +no-sandbox).

    With --queue URL the students are graded by `grade worker --queue URL`
    processes (on this machine or many; each in its own sandbox) and recorded
    here, by this process alone.
    """
    from grader.term import batch as batch_lib  # the process pool: only this command needs it

    limits = Limits(wall_s=timeout, sandbox=sandbox_setting(no_sandbox, others_code=True))
    with one_line_errors():
        catalogue.resolve(list(selectors))  # an unknown selector stops here, before any grading
        if queue_url is None:
            limits.sandboxed()  # no sandbox and no --no-sandbox: stops here, before any grading
        total = len(batch_lib.find_submissions(submissions_dir))
        store = Store.open(db, writer="grade batch")
    with store:
        if queue_url is not None:
            click.echo(
                f"Grading on the queue {queue_url}: `grade worker --queue {queue_url}` processes grade it.", err=True
            )
            with one_line_errors():
                summary = batch_lib.run_batch_on_queue(
                    submissions_dir,
                    store,
                    live_grader_version(),
                    queue_url,
                    list(selectors) or None,
                    force=force,
                    job_timeout=job_timeout,
                )
        elif _show_progress():
            with click.progressbar(
                length=total,
                label="Grading",
                file=sys.stderr,
                show_pos=True,
                item_show_func=lambda name: name,
            ) as bar:
                summary = _run_batch(
                    submissions_dir, store, selectors, jobs, force, limits, lambda o: bar.update(1, o.student)
                )
        else:
            summary = _run_batch(submissions_dir, store, selectors, jobs, force, limits, None)
    failed = sorted((o for o in summary.outcomes if o.status in ("failed", "error")), key=lambda o: o.student)
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
        click.echo(summary.line(), err=True)
    else:
        for outcome in failed:
            click.echo(f"Not graded: {outcome.student}: {outcome.message}")
        click.echo(summary.line())
    if summary.not_graded:
        click.echo(f"Error: {summary.not_graded_line()}", err=True)
    click.get_current_context().exit(summary.exit_status)


def live_grader_version() -> str:
    """The version a batch records: normgrade's and the digest of what judges (grader.course.grading)."""
    from grader.course.grading import grader_version as version

    return version()


def _run_batch(
    root: Path,
    store: Store,
    selectors: tuple[str, ...],
    jobs: int | None,
    force: bool,
    limits: Limits,
    on_outcome: Callable[[batch_lib.StudentOutcome], None] | None,
) -> batch_lib.BatchSummary:
    """run_batch with the command's options (library errors become one-line errors)."""
    from grader.term import batch as batch_lib

    with one_line_errors():
        return batch_lib.run_batch(
            root,
            store,
            live_grader_version(),
            list(selectors) or None,
            jobs=jobs,
            force=force,
            limits=limits,
            on_outcome=on_outcome,
        )


@click.command("report")
@class_db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "csv", "json", "canvas", "moodle"]),
    default="html",
    show_default=True,
    help="html: the dashboard's pages in one self-contained file; csv: one row per student; json: the same "
    "data; canvas, moodle: a gradebook import (CSV) of those systems.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to FILE [default: standard output].",
)
@quiz_dir_option
@click.option(
    "--course",
    "course_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Apply the score rule and due dates of this course.toml [default: best score ever, late work "
    "in full: a warning says so].",
)
@click.option(
    "--roster",
    "roster_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="ROSTER.csv",
    help="Names and e-mails of the students (columns id,name,email, as for `grade "
    "roster import`): a `grade batch` database has only the folder names.",
)
def report_command(
    db: Path, fmt: str, output: Path | None, quiz_dir: Path | None, course_file: Path | None, roster_file: Path | None
) -> None:
    """Write the class report from the database: summary, charts, mistakes, quiz items, students.

    The quiz chapters (CSV columns, item difficulty) are those of --quiz-dir.
    The score of each exercise is the one that counts under --course's rule
    (the same rule as the course server's). What a gradebook import cannot
    know (no --course, students without an e-mail) is said on stderr.
    """
    from grader.term import class_report  # Jinja2 and the templates: only this command needs them
    from grader import quiz as quiz_lib

    if not db.exists():
        raise CommandError(f"'{db}' does not exist: pass the --db FILE that `grade batch` wrote")
    quiz_dir = quiz_dir if quiz_dir is not None else quiz_lib.default_quiz_dir()
    with one_line_errors():
        quizzes = quiz_lib.load_all(quiz_dir) if quiz_dir.is_dir() else []
        course = load_course(course_file) if course_file is not None else None
        roster = None
        if roster_file is not None:
            from grader.server.roster import read_roster

            roster = {e.id: {"name": e.name, "email": e.email} for e in read_roster(roster_file)}
        with Store.open(db) as store:
            report = class_report.build(store, quizzes=quizzes, course=course, roster=roster)
            if fmt == "html":
                from grader.server.class_html import format_html  # the dashboard's views, in one file

                text = format_html(report, store)
            elif fmt == "csv":
                text = class_report.format_csv(report)
            elif fmt == "canvas":
                text = class_report.format_canvas(report)
            elif fmt == "moodle":
                text = class_report.format_moodle(report)
            else:
                text = class_report.format_json(report) + "\n"
    for warning in class_report.gradebook_warnings(report, course_file is not None):
        if fmt in ("canvas", "moodle") or warning.startswith("no --course"):
            click.echo(f"Warning: {warning}.", err=True)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        write_text(text, output)
    except OSError as exc:
        raise CommandError(f"cannot write {output} ({exc.strerror}): pass another -o FILE") from exc
    n = len(report.students)
    click.echo(f"Wrote the {fmt} report of {n} student{'s' if n != 1 else ''} to {output}", err=True)


# --- bench ----------------------------------------------------------------------


@click.command("bench")
@click.option("--quick", is_flag=True, help="One small size (256x1024) and 3 repeats, for a smoke test.")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="Timed runs per measurement; the table shows the median.",
)
def bench_command(quick: bool, repeats: int) -> None:
    """Time the NumPy and OpenCL references against a plain device copy (GB/s), per kernel.

    Runs on the OpenCL device chosen by PYOPENCL_CTX, else the first one
    (PoCL's CPU device when nothing else is installed); unchanged on a GPU.
    """
    from reference.opencl import bench, runtime  # pyopencl is imported only for this command

    reason = runtime.opencl_unavailable_reason()
    if reason is not None:
        raise CommandError(
            f"no OpenCL device ({reason}): .venv/bin/pip install -e '.[pocl]' installs pyopencl and a CPU device (PoCL)"
        )
    sizes, repeats = (bench.QUICK_SIZES, min(repeats, 3)) if quick else (bench.DEFAULT_SIZES, repeats)
    click.echo(bench.format_table(bench.run_bench(sizes=sizes, repeats=repeats), bench.launch_latency_s()))


@click.command("release")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder to write: student/ (the handout), autograder/autograder.zip (Gradescope), manifest.json.",
)
@click.option("--force", is_flag=True, help="Replace the contents of a non-empty --out folder.")
@click.option(
    "--no-practice",
    is_flag=True,
    help="Quizzes with questions and choices only (no sealed explanations for offline practice).",
)
@click.option(
    "--gradescope-no-sandbox",
    is_flag=True,
    help="The Gradescope bundle grades without the OS sandbox (for an image where bubblewrap cannot run).",
)
@click.option(
    "--level",
    type=click.Choice(["contract", "derive", "guided"]),
    default=None,
    help="What the stubs give away: guided (the derived formulas), derive (definitions and contract),"
    " contract (signatures, shapes, conventions) [default: the course's level, else guided].",
)
@click.option(
    "--course",
    "course_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="course.toml: its [server] url, hand_in and chapters' dates go into the handout (README and"
    " `grade login`), its [scaffolding] sets the stubs' levels.",
)
def release_command(
    out: Path, force: bool, no_practice: bool, gradescope_no_sandbox: bool, level: str | None, course_file: Path | None
) -> None:
    """Write the student handout (no answers; public checks as case packs) and the Gradescope autograder."""
    from grader.course.release import build_release

    with one_line_errors():
        course = load_course(course_file) if course_file is not None else None
        release = build_release(
            out,
            force=force,
            practice=not no_practice,
            sandbox=not gradescope_no_sandbox,
            level=level,
            course=course,
            course_file=course_file,
        )
    student_files = len(release.files["student"])
    click.echo(f"Wrote release {release.version} to {release.out}")
    click.echo(
        f"  student/                    the handout: {student_files} files; students install it as its README"
        " says, in that folder: `python3 -m venv .venv && .venv/bin/pip install '.[opencl]'`"
    )
    click.echo(
        f"  case packs                  {release.packs_bytes / 1e6:.1f} MB for {len(release.pack_sizes)}"
        " exercises (public checks, fixed seeds)"
    )
    click.echo("  autograder/autograder.zip   Gradescope: setup.sh, run_autograder, the full grader and reference")
    click.echo(f"  manifest.json               reference sha256 {release.reference_sha256[:16]}...")
    counts = {lv: sum(v == lv for v in release.levels.values()) for lv in ("guided", "derive", "contract")}
    click.echo("  stubs                       " + ", ".join(f"{n} at {lv}" for lv, n in counts.items() if n))
    server = f"; `grade login` in the handout goes to {course.server_url}" if course and course.server_url else ""
    click.echo(f"  hand in                     {course.hand_in if course else 'gradescope'}{server}")


def build_text_pages(text_dir: Path) -> Path:
    """`grade read --html` in the repository: the text's pages built from the Markdown (KaTeX from
    `make text-deps`) into .grade/text/ beside the text's folder; where they are."""
    from grader.course import text as course_text

    pages = text_dir.resolve().parent / ".grade" / "text"
    try:
        course_text.build_pages(pages, course_text.load(text_dir))
    except (course_text.TextBuildError, OSError) as exc:
        raise CommandError(str(exc)) from None
    return pages


INSTRUCTOR = Edition(
    grade=grade_live,
    progress=live_progress,
    quiz=recorded_quiz,
    text_pages=build_text_pages,
    doctor_role="operator",
    no_wait_hint="run `grade login URL` or pass --server URL",
    options={
        "submit": [
            click.option(
                "--format",
                "fmt",
                type=click.Choice(["text", "json", "gradescope"]),
                default=None,
                help="Report format [default: text]; gradescope writes Gradescope's results.json.",
            ),
            click.option(
                "-o",
                "--output",
                type=click.Path(dir_okay=False, path_type=Path),
                default=Path("results.json"),
                show_default=True,
                help="Where --format gradescope writes its results.",
            ),
        ],
        "progress": [
            click.option(
                "--course",
                "course_file",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                help="Apply the score rule and due dates of this course.toml [default: best score ever].",
            ),
        ],
        "quiz": [
            click.option(
                "--check", is_flag=True, help="With `lock`: write nothing; exit 1 when a locked file is stale."
            ),
            quiz_dir_option,
            student_option,
            db_option,
            path_option,
        ],
        "doctor": [
            click.option(
                "--queue", default=None, metavar="redis://HOST:PORT/DB", help="Also check the Redis queue at this URL."
            ),
        ],
    },
    notes={
        "submit": "Here, the hidden checks run on the live reference. Your own code runs in the OS sandbox where "
        "bubblewrap works, and with process isolation only (said once) where it does not; --format "
        "gradescope grades other people's code and requires the sandbox unless --no-sandbox.",
        "progress": "Here, this machine's record, over every exercise and the locked quizzes.",
        "quiz": """Otherwise the locked quizzes here, every answer recorded:

    \b
    grade quiz                          chapters and your completion
    grade quiz CHAPTER                  answer the questions not yet answered correctly
    grade quiz CHAPTER --all            answer every question again
    grade quiz CHAPTER --answers FILE   grade a file of answers
    grade quiz lock [--check]           authors: lock quizzes/source/*.toml

    Some questions use numbers drawn for you (always the same ones), judged by the reference implementation.
    A chapter is complete when every checkpoint question has been answered correctly at least once. Exit
    status for a chapter: 0 when every question has been answered correctly (now or before), 1 otherwise,
    2 for a usage error.""",
        "read": "With --html the pages are built from the Markdown first (KaTeX from `make text-deps`), into "
        ".grade/text/ beside the text's folder.",
        "doctor": "The instructor's and operator's checks: the sandbox is required (batch, the course server and "
        "Gradescope run other people's code); --queue checks Redis too.",
    },
)

# Every command of the instructor's `grade`, in one table: those a handout ships too (grader/student/cli.py, built
# for the instructor), the instructor's own (above), the term's (grader/term/cli.py) and the course server's
# (grader/server/cli.py).
for _command in (
    *student_cli.commands(INSTRUCTOR),
    batch_command,
    report_command,
    bench_command,
    release_command,
    *term_cli.COMMANDS,
    *remote_cli.COMMANDS,
):
    cli.add_command(_command)


def main(prog_name: str | None = None) -> None:
    """Console-script entry point (``grade``); also ``python -m grader`` and ``python -m grader.cli``."""
    run_console_script(cli, prog_name)


if __name__ == "__main__":  # also how `grade serve` starts its workers: `python -m grader.cli worker ...`
    main("python -m grader.cli")
