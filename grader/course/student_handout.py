"""The student handout (``DIR/student/`` of ``grade release``): what students get.

:func:`write_student` writes the folder: the exercise stubs at their scaffolding levels, the student-side
grader (``grader/student/``, copied whole) with fresh case packs, the handout quizzes
(:func:`write_quizzes`), the notebooks, the course text (:func:`write_text`), a ``pyproject.toml`` whose
``grade`` is :mod:`grader.student.cli`, and a README (:func:`student_readme`) whose sections follow the
course file: how to hand in (:func:`hand_in_text`), the deadlines (:func:`deadlines_text`), the quizzes
(:func:`quizzes_text`) and the notebooks (:func:`notebooks_text`).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from grader import quiz as quiz_lib
from grader.course.packs import PackError, write_packs
from grader.course.scaffold import render_tree
from grader.student.standing import format_time, late_work
from grader.student.engine import catalogue
from grader.student.course import HANDOUT_SETTINGS, Course
from grader.course.text import PagePractice
from grader.quiz.handout import handout_quiz, practice_instance
from grader.student.quiz.answers import numeric_window
from grader.course.release_files import PACKAGE_DIR, ROOT, STUDENT_DIR, ReleaseError, copy_tree, levels_json

PACK_BUDGET = 5 * 1024 * 1024


# --- quizzes -------------------------------------------------------------------------------------


def write_quizzes(target: Path, practice: bool) -> list[str]:
    """The handout quiz of every chapter with a source in quizzes/source/; the chapters written."""
    sources = sorted((ROOT / "quizzes" / "source").glob("*.toml"))
    if not sources:
        raise ReleaseError(f"no quiz sources in {ROOT / 'quizzes' / 'source'}: the release needs the author sources")
    target.mkdir(parents=True, exist_ok=True)
    chapters = []
    for path in sources:
        source = quiz_lib.load_source(path)
        quiz = handout_quiz(source, practice)  # what may ship, and what may not: grader/quiz/handout.py
        (target / f"{source.chapter}.json").write_text(
            json.dumps(quiz.to_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        chapters.append(source.chapter)
    return chapters


# --- the course text -----------------------------------------------------------------------------


def write_text(target: Path, practice: bool = True) -> None:
    """The course text into the handout: its Markdown sources (``grade read`` prints them) and its pages (one
    per chapter, ``index.html``, KaTeX's files in ``assets/``), each section's checkpoint listing its questions'
    prompts (with ``practice``, its questions with practice numbers answered in the page); ReleaseError when
    the text is broken or KaTeX is not installed (``make text-deps``)."""
    from grader.course import text as course_text
    from grader.student.coursetext import TextError

    try:
        chapters = course_text.load()
        problems = course_text.structure_problems(chapters, course_text.quiz_banks())
        if problems:
            raise ReleaseError(f"the course text and the quiz bank disagree: {problems[0]}")
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(course_text.TEXT_DIR.glob("*.md")):
            shutil.copyfile(path, target / path.name)
        # each question's prompt, its drawn numbers shown as "…" (every student gets their own)
        prompts = {
            q.id: re.sub(r"\{\{.*?\}\}", "…", q.prompt)
            for quiz in quiz_lib.load_all(ROOT / "quizzes")
            for q in quiz.questions
        }
        course_text.build_pages(target, chapters, prompts, practice=page_practice() if practice else None)
    except (TextError, course_text.TextBuildError) as exc:
        raise ReleaseError(str(exc)) from exc


def page_practice() -> dict[str, PagePractice]:
    """Each checkpoint question with practice numbers, as the text's pages judge it offline (question id ->
    ``course_text.PagePractice``): its practice prompt, the interval of right answers to it and its explanation.
    A question with one key for everyone has none: its key never leaves the graders."""
    found: dict[str, PagePractice] = {}
    for path in sorted((ROOT / "quizzes" / "source").glob("*.toml")):
        source = quiz_lib.load_source(path)
        for question in source.questions:
            instance = practice_instance(question, source.chapter)
            if instance is not None and question.kind == "numeric" and question.tolerance:
                low, high = numeric_window(instance.answer, question.tolerance)
                found[question.id] = PagePractice(instance.prompt, low, high, instance.explanation)
    return found


# --- the handout ---------------------------------------------------------------------------------

# flit_core builds the wheel straight from the folder: `pip install .` leaves nothing in the handout (setuptools
# left build/ and an .egg-info beside the student's exercises), and it ships every file of grader/ (the packs).
STUDENT_PYPROJECT = """[build-system]
requires = ["flit_core>=3.9,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "normgrade-student"
version = "{version}"
description = "The student side of normgrade: grade your exercises, hand them in to the course server, take the quizzes."
requires-python = ">=3.11"
dependencies = [
    "numpy>=1.26",
    "click>=8.1",
    "sqlite-utils>=3.36",
    "sympy>=1.12",
    "cryptography>=42",
    "httpx>=0.27",
    "fsrs>=6,<7",
]

[project.optional-dependencies]
# the OpenCL exercises (kernels/*.cl): pyopencl, and PoCL as a CPU device where no GPU driver is installed
opencl = ["pyopencl>=2024.1", "pocl-binary-distribution>=3.0"]
# the notebooks: %load_ext grader, %grade, %quiz (ipywidgets: the quiz forms), and Jupyter to open them
# (`jupyter notebook`; `jupyter nbconvert --execute` runs one without a browser)
notebook = ["ipython>=8", "ipykernel>=6", "ipywidgets>=8", "notebook>=7"]

[project.scripts]
grade = "grader.student.cli:main"

[tool.flit.module]
name = "grader"
"""

STUDENT_README = """# {title}: the exercises

## Quick start

Python 3.11 or newer; from this folder:

```sh
python3 -m venv .venv && .venv/bin/pip install '.[opencl]'
.venv/bin/grade submit
```

The first line installs the grader into `.venv/`, OpenCL included (pyopencl,
and PoCL, a CPU device, for the kernel exercises); the second grades every
exercise in `exercises/` on the public checks. Fill in the stubs: each raises
`NotImplementedError` until you do. Every command below is written as it runs
from this folder (`.venv/bin/grade ...`); after `source .venv/bin/activate`,
once per terminal, plain `grade ...` is the same command.

```sh
.venv/bin/grade submit normalization            # one topic
.venv/bin/grade submit linear.Linear            # one exercise
.venv/bin/grade submit --json                   # one JSON document
.venv/bin/grade submit --html report.html       # the report as usual, and as a web page with a picture per failing check
.venv/bin/grade view --no-open                  # the last report as a web page: .grade/last-report.html (without --no-open: in your browser)
.venv/bin/grade --help                          # every command; grade COMMAND --help for its options
```

Exit status: 0 means full marks, 1 short of them, 2 a usage or setup error
(the message names the command that fixes it), or an exercise this machine
could not grade.

## The course text

The chapters the exercises follow are in `text/`: a web page per chapter
(open `text/index.html`; the maths is typeset in the page, nothing is fetched)
and its Markdown source. The stubs, the reports and `ERRATA.md` cite a section
as §chapter.section, e.g. §normalization.batchnorm-forward:

```sh
.venv/bin/grade read                                          # the chapters and their sections
.venv/bin/grade read normalization.batchnorm-forward          # one section, here in the terminal
.venv/bin/grade read normalization.batchnorm-forward --html --no-open   # where its page is (without --no-open: in your browser)
```

Each section ends with its **checkpoint**, the quiz questions that check it.
On the section's page a question with numbers is answered in the page, on
practice numbers (checked there, nothing recorded); `.venv/bin/grade quiz
CHAPTER` asks every question of the chapter (see Quizzes). `ERRATA.md` lists
what is often written about these layers and what the papers say instead, each
entry with its section.

## When the machine, not your work, is at fault: `grade doctor`

```sh
.venv/bin/grade doctor                          # Python, NumPy, each OpenCL device, the sandbox, the server
```

It prints one line an item with the fix beside each failure (`--json` for one
document), and exits 0 when everything the course needs works. The kernel
exercises run on the first OpenCL device that builds and runs a small probe
kernel: PoCL, a CPU device, from `.[opencl]` (the seven kernel exercises take
about a second). On a CPU newer than that PoCL's compiler (a Zen 5, say) it
builds nothing ("unknown target CPU 'generic'"); `grade doctor` then names the
fixes: Debian's `pocl-opencl-icd`, which an administrator installs, or, without
one, Intel's CPU runtime from PyPI (about 900 MB): `.venv/bin/pip install
intel-opencl-rt intel-cmplr-lib-rt`, then `export
OCL_ICD_VENDORS=$PWD/.venv/lib/libintelocl.so` in the shell you grade from. An exercise
the grader's machine cannot grade is `NOT_GRADED`, never a zero: no score,
nothing recorded; on the course server it is held and graded by itself once the
server is fixed, with no new upload.

## Notebooks

{notebooks}

## Handing in: {hand_in_title}

{hand_in}
## Deadlines and late work

{deadlines}

## Quizzes

{quizzes}

## Allowed imports

Your exercise files may import {allowed}, and each other (`from .base import
Module`). Nothing else: not SciPy (`scipy.special.erf` is what the exercises
ask you to build: `math.erfc` through `np.frompyfunc` gives erf on arrays),
and no other package. A file that imports one scores zero, with a one-line
reason naming the file, the line and the package; the same rule holds here,
{graders_rule}. Code that reaches outside (files, programs, the network) is
stopped by the sandbox.

## What is checked here, and what is checked when you hand in

`.venv/bin/grade submit` without a login (or with `--local`) runs the **public
checks**: the same checks the course grades with, on fixed inputs, compared
with expected results shipped in this folder (no reference code is in it).
When a check fails it names the known mistake your output matches, when there
is one, and says how to fix it. Your code runs in an OS sandbox where
bubblewrap is installed (Linux), else in plain child processes.

The **hidden checks** run when you hand in ({where}): the same checks on
inputs drawn for you alone, plus the checks that need the reference's code
({live_only}). Passing the public checks is a very good sign, not a guarantee.
"""

HAND_IN_SERVER = """The course server{server_at} grades your work with the hidden checks and keeps
the record that counts.

```sh
.venv/bin/grade login                 # asks for the token your instructor gave you{login_note}
.venv/bin/grade submit                # hand in: the hidden checks, the same report as here
.venv/bin/grade quiz                  # the quiz chapters; .venv/bin/grade quiz CHAPTER answers one
.venv/bin/grade progress              # the server's record: your counted scores and quizzes
.venv/bin/grade result ID             # the report of submission ID (graded later if you stopped waiting)
.venv/bin/grade regrade EXERCISE "why"  # ask your instructor to look again at your latest graded upload of it
.venv/bin/grade submit --local        # the public checks here, nothing handed in
.venv/bin/grade logout                # forget the login (kept in ~/.config/normgrade/, readable only by you)
```

Logged in, `submit`, `quiz` and `progress` use the server (and so does
`%grade ... --hand-in` in the notebooks); `--local` works on this machine instead (offline
quizzes are practice and nothing is recorded). A regrade request is tied to
your latest graded upload of that exercise (`--submission ID` names another);
the answer, and any new score, shows in `.venv/bin/grade progress`.

When a report names a mistake, `.venv/bin/grade practice` asks one practice question of the concept it shows
a gap in (not graded, no attempts spent), and brings the concept back when it is due: a day after a miss, then
at growing intervals; two right answers in a row master it. Logged in, the server keeps that schedule (your
page's "Practice" too); `grade login` merges this machine's into it.

**Your page in the browser**: {page}. Opening the course from the LMS logs you
in there by itself; otherwise log in with your token. It shows each chapter in
the course's order with the score that counts (and why: a late upload, an
override), your own due dates and extensions, and the quiz standing; every
upload ("Submission N") with where it waits (queued, running, retried, not
graded and why), then the same report and pictures as `grade submit --html`;
the quizzes, answered there with the same rules as `grade quiz` (a formula or
a number shows how it is read as you type); and your regrade requests, asked
from an upload's page, with the instructor's answers.
"""

HAND_IN_GRADESCOPE = """Upload your `exercises/` folder (or its `.py` files and `kernels/*.cl` files) to
the course's Gradescope assignment. To have quizzes scored there, answer them as
yourself and save the answers, then add that file to the upload:

```sh
.venv/bin/grade quiz activations --student you@example.org --save-answers quiz-answers.toml
```

Your numbers and choice order are your own, so the file is yours alone. Each
question counts a fixed number of attempts over all your uploads (changing an
answer uses one); before the due date a wrong answer says only "Not this one."
and how many attempts are left.
"""

NOTEBOOKS = """{intro}

```sh
.venv/bin/pip install '.[notebook]'             # Jupyter, IPython and the quiz forms, into .venv/
.venv/bin/jupyter notebook                      # opens the notebooks in your browser (Ctrl-C stops it)
.venv/bin/jupyter nbconvert --to html --execute activations.ipynb   # runs one: activations.html
```

{notebook_grade}
"""


def hand_in_text(course: Course) -> tuple[str, str, str, str]:
    """(title, text, where the hidden checks run, where the rule holds) of the handout's hand-in section."""
    server_at = f" at {course.server_url}" if course.server_url else ""
    login_note = "" if course.server_url else "; first time: .venv/bin/grade login URL"
    page = f"{course.server_url.rstrip('/')}/student/" if course.server_url else "`/student/` on the course server"
    server = HAND_IN_SERVER.format(server_at=server_at, login_note=login_note, page=page)
    if course.hand_in == "server":
        return ("the course server", server, "on the course server", "on the course server")
    if course.hand_in == "both":
        return (
            "the course server and Gradescope",
            server + "\nGradescope too:\n\n" + HAND_IN_GRADESCOPE,
            "on the course server and on Gradescope",
            "on the course server and on Gradescope",
        )
    return ("Gradescope", HAND_IN_GRADESCOPE, "on the course's Gradescope autograder", "on Gradescope")


def _date(value: Any) -> str:
    return "none" if value is None else format_time(value)


def deadlines_text(course: Course) -> str:
    """The handout's table of chapters: exercises, when uploads open, due date, what late work counts, when uploads
    close, and for an exam chapter when its feedback is shown (and a paragraph on exam mode)."""
    rule = (
        "the best score counts (late ones as the rules below say)"
        if course.rule == "best"
        else "the latest attempt counts (late ones as the rules below say)"
    )
    if not course.chapters:
        return f"No due dates: {rule}."
    lines = [
        f"Which score counts: {rule}. Times are UTC.",
        "",
        "| chapter | exercises | opens | due | late work | closes | feedback |",
        "|---|---|---|---|---|---|---|",
    ]
    for chapter in course.chapters:
        topics = sorted({catalogue.topic_of(e) for e in chapter.exercises}, key=catalogue.TOPICS.index)
        shown = ", ".join(
            t
            if set(catalogue.resolve([t])) <= set(chapter.exercises)
            else ", ".join(e for e in chapter.exercises if catalogue.topic_of(e) == t)
            for t in topics
        )
        late = late_work(chapter)
        opens = "-" if chapter.opens is None else _date(chapter.opens)
        feedback = "at once" if chapter.release_feedback is None else f"exam: {_date(chapter.release_feedback)}"
        lines.append(
            f"| {chapter.name} | {shown} | {opens} | {_date(chapter.due)} | {late} | "
            f"{_date(chapter.closes_at())} | {feedback} |"
        )
    lines += [
        "",
        "Before a chapter opens the server takes none of its exercises (`grade submit` says when it opens);"
        " after it closes, none either (`grade submit` says when it closed). Exercises in no chapter have no"
        " due date.",
    ]
    exams = [c for c in course.chapters if c.release_feedback is not None]
    if exams:
        lines += [
            "",
            "Exam chapters (" + ", ".join(c.name for c in exams) + "): an upload is graded at once, but its"
            ' report shows each exercise as "received, feedback at T" until the feedback time of the table:'
            " no checks' messages, no named mistakes, and no score unless the course shows it; those exercises"
            " count in no total until then. At that time the stored report is shown whole (nothing is graded"
            " again)."
            + (
                " On Gradescope the autograder's results hold them the same way; your instructor"
                " runs it again after the feedback time to show them."
                if course.graded_on_gradescope
                else ""
            ),
        ]
    mapped = [c for c in course.chapters if c.quiz]
    if mapped:
        lines += [
            "",
            "A chapter's quiz is due with it; these quizzes belong to a chapter of another name: "
            + ", ".join(f"{c.quiz} (chapter {c.name})" for c in mapped)
            + ".",
        ]
    lines += [
        "",
        'A report totals the exercises of one upload ("This upload: ..."); `.venv/bin/grade progress`'
        ' totals the course ("Course: ...", every exercise with the score that counts).',
    ]
    if course.graded_on_server:
        lines += [
            "",
            "After a fix to the grader your instructor may rescore: the server grades every stored upload"
            " again and counts the new result (the old one stays on record), while the server goes on"
            " taking uploads; the upload's report, `.venv/bin/grade progress` and your page show the score"
            " that counts now.",
        ]
    return "\n".join(lines)


def quizzes_text(course: Course) -> str:
    """The handout's quiz section: how graded attempts count, per chapter, and what offline practice is."""
    quizzes = quiz_lib.load_all(ROOT / "quizzes")
    lines = ["| chapter | questions | checkpoints | attempts per question |", "|---|---|---|---|"]
    for quiz in quizzes:
        if course.quiz_attempts is not None:  # the course's number, for every graded question
            attempts = str(course.quiz_attempts)
        else:
            checkpoint = {q.attempts for q in quiz.questions if q.checkpoint}
            other = {q.attempts for q in quiz.questions if not q.checkpoint}
            attempts = ", ".join(
                part
                for part in (
                    f"checkpoints {'/'.join(map(str, sorted(checkpoint)))}" if checkpoint else "",
                    f"others {'/'.join(map(str, sorted(other)))}" if other else "",
                )
                if part
            )
        lines.append(f"| {quiz.chapter} | {len(quiz.questions)} | {len(quiz.checkpoints)} | {attempts} |")
    table = "\n".join(lines)
    rules = (
        "Each question has the attempts below, and they never reset. Before the chapter's due date a"
        ' wrong answer says only "Not this one." and how many attempts are left; the explanation is shown'
        " after a right answer, the"
        " last attempt, or the due date. A question's points count once it is answered correctly; a"
        " chapter is complete when every checkpoint question is."
    )
    if course.graded_on_server:
        scored = (
            "Logged in, `.venv/bin/grade quiz CHAPTER` is posed, judged and recorded by the course server"
            " (your own numbers and choice order; the answers never leave it). " + rules
        )
    else:
        scored = (
            "Your course scores quizzes on Gradescope: the `quiz-answers.toml` of your upload (see"
            " Handing in), judged for you (your numbers and choice order), attempts counted over all"
            " your uploads. " + rules
        )
    return (
        f"{scored}\n\n{table}\n\nOffline (not logged in, or `--local`), `.venv/bin/grade quiz` lists the"
        " chapters and `.venv/bin/grade quiz activations` is **practice**: nothing is recorded, and each"
        " question is shown with its id (e.g. `gelu-why`). Questions with numbers are checked on practice"
        " numbers that no graded student gets (their explanation is encrypted under the practice answer);"
        " questions with one answer for everyone are graded only by the course, so they are asked here"
        " but not checked. What is often written wrong about these layers, `ERRATA.md` corrects, with the"
        " papers that say otherwise and the section that explains it.\n"
    )


def notebooks_text(course: Course) -> str:
    """The handout's notebook section: the shipped notebooks, how to open or run them, what ``%grade`` does."""
    import textwrap

    names = ", ".join(f"`{p.name}`" for p in sorted((ROOT / "notebooks").glob("*.ipynb")))
    intro = (
        f"One notebook per chapter lies beside `exercises/`: {names}. Each loads the grader (`%load_ext"
        " grader`), lets you try your code, grades it (`%grade`) with a picture of each failing check, and"
        " asks the chapter's quiz (`%quiz`). Set up Jupyter once, then open them or run one without a"
        " browser:"
    )
    if course.graded_on_server:
        does = (
            "`%grade` runs the public checks here, in the sandbox, and records the attempt on this machine:"
            " running a notebook end to end (`nbconvert --execute` too) never hands in. To hand in, logged in"
            " to the course server, write `%grade EXERCISE --hand-in`: the server grades with the hidden checks,"
            " records it, and the cell shows its report."
        )
    else:
        does = (
            "`%grade` does what `.venv/bin/grade submit` does: it runs the public checks here, in the sandbox,"
            " and records the attempt on this machine."
        )
    does += " Its first line says which it did."
    return NOTEBOOKS.format(intro=textwrap.fill(intro, 80), notebook_grade=textwrap.fill(does, 80)).rstrip("\n")


def student_readme(course: Course) -> str:
    """The handout's README: Quick start, notebooks, how to hand in, deadlines, quizzes, allowed imports, what is
    checked."""
    from grader.student.engine.loader import ALLOWED_IMPORTS_TEXT

    title, hand_in, where, rule_where = hand_in_text(course)
    return STUDENT_README.format(
        notebooks=notebooks_text(course),
        title=course.name,
        hand_in_title=title,
        hand_in=hand_in,
        deadlines=deadlines_text(course),
        quizzes=quizzes_text(course),
        allowed=ALLOWED_IMPORTS_TEXT,
        graders_rule=rule_where,
        where=where,
        live_only=live_only_checks(),
    )


def live_only_checks() -> str:
    """The checks a handout cannot run, for its README: 'blocks.MLPBlock: dropout_train, backward_dropout'."""
    from grader.course.packs import public_seed
    from grader.student.engine.checks import CHECKS

    parts = []
    for exercise_id, definition in CHECKS.items():
        names = [c.name for c in definition.checked_plan(public_seed(exercise_id)).checks if c.live_only]
        if names:
            parts.append(f"`{exercise_id}`: {', '.join(names)}")
    return "; ".join(parts) or "none"


def write_student(
    out: Path, version: str, practice: bool, levels: dict[str, str], course: Course | None = None
) -> dict[str, int]:
    """The handout folder, its stubs rendered at ``levels``, its README and settings from ``course``; the packs'
    sizes."""
    course = course or Course()
    student = out / "student"
    render_tree(ROOT / "exercises", student / "exercises", levels)
    (student / "grader").mkdir(parents=True)
    shutil.copyfile(PACKAGE_DIR / "__init__.py", student / "grader" / "__init__.py")
    copy_tree(STUDENT_DIR, student / "grader" / "student")
    (student / "grader" / "student" / "engine" / "scaffolding.json").write_text(levels_json(levels), encoding="utf-8")
    (student / "grader" / "student" / HANDOUT_SETTINGS.name).write_text(
        json.dumps(course.handout_json(), indent=1) + "\n", encoding="utf-8"
    )
    stale = student / "grader" / "student" / "packs"
    if stale.exists():
        shutil.rmtree(stale)  # never ship packs left in the source tree: the release writes fresh ones
    try:
        sizes = write_packs(student / "grader" / "student" / "packs")
    except PackError as exc:
        raise ReleaseError(str(exc)) from exc
    if sum(sizes.values()) > PACK_BUDGET:
        raise ReleaseError(
            f"the case packs take {sum(sizes.values())} bytes, over the {PACK_BUDGET}-byte budget:"
            " make the public cases smaller"
        )
    write_quizzes(student / "quizzes", practice)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):  # one per chapter, beside exercises/ (%grade, %quiz)
        shutil.copyfile(notebook, student / notebook.name)
    shutil.copyfile(ROOT / "quizzes" / "errata.md", student / "ERRATA.md")  # what is often written, corrected
    write_text(student / "text", practice)
    (student / "pyproject.toml").write_text(STUDENT_PYPROJECT.format(version=version), encoding="utf-8")
    (student / "README.md").write_text(student_readme(course), encoding="utf-8")
    return sizes
