"""The notebook front end: ``%load_ext grader``, ``%grade EXERCISE``, ``%quiz CHAPTER``, and plain functions.

In Jupyter (or any IPython)::

    %load_ext grader
    %grade normalization.BatchNorm1d        # the exercises/ folder beside the notebook
    %quiz normalization                     # the chapter's checkpoint questions, with widgets

``%grade`` takes what ``grade submit`` takes (exercise ids or topics, and
``--path DIR``, ``--student NAME``, ``--packs DIR``, ``--no-sandbox``,
``--local``) and ``--hand-in``. Running a notebook end to end never hands in
by itself (it would spend an upload of the rate limit): only a cell that says
``%grade ... --hand-in``, logged in to a course server (``grade login``),
**hands in**: the exercise files are uploaded, the server grades
them with the hidden checks and records the attempt, and the report is the
server's (late notes and the counted total included), as the terminal's
``grade submit``. Otherwise it grades here (logged in, the first line says
that ``--hand-in`` would hand in), through the
very pipeline of ``grade submit``: the files are copied out of the folder and
run in the OS sandbox (bubblewrap, where it works) in worker processes, never
in the notebook's own kernel, on the public checks of the case packs
installed with the handout (``--packs`` for another folder); the attempt is
recorded in ``.grade/progress.db``. Either way the report is kept for
``grade view``, and its first line says which it was ("Handed in to URL:
submission 12 ..." or "Graded here on the public checks: nothing handed in
..."). The answer is a :class:`Feedback`, shown as the HTML report (pictures
included) and as the text report where no HTML is rendered. Other notebook
tools (VS Code, Colab, marimo, a plain script) call :func:`grade` directly.

``%quiz CHAPTER`` asks the chapter's questions. Logged in to a course server
(``grade login URL``), the server poses and judges every answer and records
it, exactly as the remote ``grade quiz``; otherwise the handout's practice
quiz (``quizzes/CHAPTER.json`` beside the notebook) checks answers offline
and records nothing, as the handout's ``grade quiz``. With ipywidgets
installed, each question is a form (radio buttons for one choice, check
boxes for several, a text box for a number or a formula) with a Check
button; without it, the questions are asked one by one in the cell's text
input, as ``grade quiz`` asks in a terminal.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grader.student.engine import catalogue
from grader.student.errors import GraderError
from grader.student.engine.model import GradeReport
from grader.student.feedback.report import format_text

if TYPE_CHECKING:
    from grader.student.sandbox.runner import Limits, Workspace

PACKS_DEFAULT: Path | None = None  # None: the packs installed with the handout (grader.student.engine.pack)


class NotebookError(GraderError):
    """A ``%grade`` / ``%quiz`` line that cannot be run: what was wrong and what to do, in one line."""


@dataclass
class Feedback:
    """A graded report as a notebook shows it: the HTML report inline, the text report elsewhere; ``where`` is
    its first line (handed in to the server, or graded here), ``late_shares`` the server's late notes."""

    report: GradeReport
    where: str = ""
    late_shares: dict[str, float] = field(default_factory=dict)

    def _repr_html_(self) -> str:
        import html

        from grader.student.feedback.report_html import format_html

        head = f"<p><strong>{html.escape(self.where)}</strong></p>" if self.where else ""
        return head + format_html(self.report, fragment=True, late_shares=self.late_shares)

    def __str__(self) -> str:
        text = format_text(self.report, late_shares=self.late_shares)
        return f"{self.where}\n{text}" if self.where else text

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    @property
    def full_marks(self) -> bool:
        return self.report.full_marks


@dataclass
class Problem:
    """A one-line error shown in the notebook instead of a traceback (bad exercise name, no folder, ...)."""

    message: str

    def _repr_html_(self) -> str:
        import html

        return f'<p style="color:#8a1c0c"><strong>Error:</strong> {html.escape(self.message)}</p>'

    def __str__(self) -> str:
        return f"Error: {self.message}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def grade(
    *selectors: str,
    path: str | Path | None = None,
    student: str | None = None,
    packs: str | Path | None = None,
    no_sandbox: bool = False,
    local: bool = False,
    hand_in: bool = False,
) -> Feedback:
    """Grade the exercises (ids or topics; all when none) of ``path`` (default: exercises/ here) as ``grade submit``.

    With ``hand_in`` (``%grade ... --hand-in``), logged in: hand them in to the course server and wait for its
    report (not logged in: a one-line error naming `grade login`). Otherwise the
    same steps as the local ``grade submit``: workers started in the sandbox, the pipeline on the case packs,
    the attempt recorded: :func:`grader.student.submit.submit`, as both command lines. The report is kept for
    ``grade view``. GraderError or click.ClickException (one line) when it cannot grade.
    """
    from grader.student.client.remote import remote_login
    from grader.student.submit import DEFAULT_EXERCISES_DIR, exercises_dir, submit

    folder = exercises_dir(Path(path) if path is not None else DEFAULT_EXERCISES_DIR)
    if not folder.is_dir():
        raise NotebookError(
            f"no exercises folder at '{folder.resolve()}': put the notebook beside exercises/ or pass --path DIR"
        )
    catalogue.resolve(list(selectors) or None)  # (an unknown name: one line, before anything starts)
    if hand_in and local:
        raise NotebookError("--hand-in and --local contradict each other: --hand-in uploads to the course server")
    if hand_in and remote_login(None, False, None) is None:
        raise NotebookError(
            "--hand-in needs a course server: run `grade login URL` first (or leave --hand-in out to grade here)"
        )
    if hand_in and (student is not None or packs is not None or no_sandbox):
        raise NotebookError(
            "--student, --packs and --no-sandbox are for grading here: the course server grades"
            " what you hand in as you (leave --hand-in out to grade here)"
        )

    def grade_on_packs(
        folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace
    ) -> GradeReport:
        from grader.student.engine.grading import grade as grade_with
        from grader.student.engine.pack import PackSource

        source = (
            PackSource(Path(packs))
            if packs is not None
            else (PackSource(PACKS_DEFAULT) if PACKS_DEFAULT is not None else PackSource())
        )
        return grade_with(folder, ids, name, limits, source, workspace)

    done = submit(
        list(selectors), folder, grade_on_packs, student=student, local=not hand_in, no_sandbox=no_sandbox, show=False
    )
    if done.report is None:  # (submit shows no report itself when asked not to)
        raise NotebookError("the grader returned no report")
    if hand_in:
        return Feedback(done.report, done.where, done.late_shares)
    why = "--local" if local else "not logged in to a course server"
    if not local and saved_login() is not None:
        why = "logged in: add --hand-in to the %grade line to hand in"
    return Feedback(done.report, f"Graded here on the public checks: nothing handed in ({why}).")


def saved_login() -> Any:
    """The saved login (``grade login``), or None: none, or one that cannot be read (grading here needs none)."""
    from grader.student.client import connection as client_lib

    try:
        return client_lib.load_login()
    except client_lib.ClientError:
        return None


def parse_grade_line(line: str) -> tuple[list[str], dict[str, Any]]:
    """``%grade`` arguments -> (selectors, keyword arguments of :func:`grade`)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise NotebookError(f"cannot read '{line}' ({exc}): write %grade EXERCISE [--path DIR]") from exc
    selectors: list[str] = []
    options: dict[str, Any] = {}
    valued = {"--path": "path", "--student": "student", "--packs": "packs"}
    i = 0
    while i < len(words):
        word = words[i]
        if word in valued:
            if i + 1 >= len(words):
                raise NotebookError(f"{word} needs a value: %grade EXERCISE {word} VALUE")
            options[valued[word]] = words[i + 1]
            i += 2
            continue
        if word == "--no-sandbox":
            options["no_sandbox"] = True
        elif word == "--local":
            options["local"] = True
        elif word == "--hand-in":
            options["hand_in"] = True
        elif word.startswith("-"):
            raise NotebookError(
                f"unknown option '{word}': %grade takes --path, --student, --packs, --no-sandbox, --local and --hand-in"
            )
        else:
            selectors.append(word)
        i += 1
    return selectors, options


def grade_magic(line: str) -> Feedback | Problem:
    """``%grade ...``: the Feedback, or a one-line Problem (never a traceback for a usage or setup error)."""
    import click

    try:
        selectors, options = parse_grade_line(line)
        return grade(*selectors, **options)
    except GraderError as exc:
        return Problem(str(exc))
    except click.ClickException as exc:  # a saved login that cannot be read (grader.student.client.remote)
        return Problem(exc.format_message())


# --------------------------------------------------------------------------- quizzes


@dataclass
class Asked:
    """One question as the notebook shows it: id, kind, prompt, the choices' texts (numbered from 1)."""

    id: str
    kind: str
    prompt: str
    choices: list[str]


@dataclass
class Judged:
    """The verdict on one answer: right (None: unreadable, no try spent), what to show, whether more tries remain."""

    correct: bool | None
    text: str
    more_tries: bool


class PracticeJudge:
    """The handout's practice quiz: answers checked offline by opening their sealed explanation; nothing recorded."""

    recorded = False

    def __init__(self, quiz_file: Path) -> None:
        from grader.student.quiz.practice import TRIES, load_practice

        self.quiz = load_practice(quiz_file)
        if not self.quiz.practice:
            raise NotebookError(
                f"the quiz '{self.quiz.chapter}' has no practice keys: answer it on your course's"
                " server (grade login URL) or Gradescope"
            )
        self.title = self.quiz.title
        self.tries = {q.id: 0 for q in self.quiz.questions}
        self.limit = TRIES
        self.by_id = {q.id: q for q in self.quiz.questions}

    def questions(self) -> list[Asked]:
        return [Asked(q.id, q.kind, q.prompt, [c.text for c in q.choices]) for q in self.quiz.questions]

    def judge(self, question_id: str, raw: str) -> Judged:
        from grader.student.quiz.answers import AnswerFormatError
        from grader.student.quiz.practice import open_seal

        if self.tries[question_id] >= self.limit:
            return Judged(False, "No tries left: re-read the chapter and come back.", False)
        try:
            explanation = open_seal(self.by_id[question_id], raw)
        except AnswerFormatError as exc:
            return Judged(None, str(exc), True)
        self.tries[question_id] += 1
        more = self.tries[question_id] < self.limit
        if explanation is not None:
            return Judged(True, f"Right. {explanation}", False)
        return Judged(False, "Not this one." + (" Try again." if more else " Re-read the chapter and come back."), more)


class ServerJudge:
    """The course server's quiz: it poses the student's questions, judges and records every answer."""

    recorded = True

    def __init__(self, login: Any, chapter: str) -> None:
        self.login = login
        self.chapter = chapter
        _, doc = self.call("GET", f"/quizzes/{chapter}")
        self.doc = doc
        self.title = str(doc.get("title", chapter))

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """One request on a connection of its own (a form may wait for hours between two answers)."""
        from grader.student.client.connection import Client

        with Client(self.login.server, self.login.token) as client:
            return client.call(method, path, body, accept=(422,))

    def questions(self) -> list[Asked]:
        return [
            Asked(str(q["id"]), str(q["kind"]), str(q["prompt"]), [str(c["text"]) for c in q.get("choices", [])])
            for q in self.doc["questions"]
        ]

    def judge(self, question_id: str, raw: str) -> Judged:
        status, verdict = self.call(
            "POST", f"/quizzes/{self.chapter}/answers", {"question": question_id, "answer": raw, "shown": True}
        )
        if status == 422:
            return Judged(None, str(verdict.get("error", "that answer cannot be read")), True)
        left = verdict.get("attempts_left")
        explanation = verdict.get("explanation")
        if verdict.get("correct"):
            return Judged(True, "Right." + (f" {explanation}" if explanation else "") + " (recorded)", False)
        more = bool(left)
        text = "Not this one (recorded)." + (f" {left} tries left." if more else "")
        if explanation:
            text += f" {explanation}"
        return Judged(False, text, more)


def quiz_judge(chapter: str, quiz_dir: Path) -> PracticeJudge | ServerJudge:
    """The server's judge when logged in (``grade login``), else the handout's practice file for ``chapter``."""
    from grader.student.client.connection import load_login

    login = load_login()
    if login is not None:
        return ServerJudge(login, chapter)
    path = quiz_dir / f"{chapter}.json"
    if not path.exists():
        from grader.student.quiz.practice import chapters

        names = chapters(quiz_dir)
        if not names:
            raise NotebookError(f"no quizzes in '{quiz_dir.resolve()}': pass --quiz-dir to your handout's quizzes/")
        raise NotebookError(f"'{chapter}' is not a chapter: choose one of {', '.join(names)}")
    return PracticeJudge(path)


def widgets_available() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


class QuizForm:
    """One ipywidgets form per question: the prompt, the answer input, a Check button and the verdict.

    ``single``: radio buttons; ``multiple``: check boxes; ``numeric``/``short``:
    a text box. The answer sent is what ``grade quiz`` reads: choice numbers as
    listed ("2", "1,3"), or the text typed.
    """

    def __init__(self, judge: PracticeJudge | ServerJudge) -> None:
        import ipywidgets as w

        self.judge = judge
        self.inputs: dict[str, Callable[[], str]] = {}
        self.buttons: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self.controls: dict[str, Any] = {}
        said = "Your answers are recorded by the course server." if judge.recorded else "Practice: nothing is recorded."
        boxes = [w.HTML(f"<h3>{_esc(judge.title)}</h3><p>{said}</p>")]
        for number, q in enumerate(judge.questions(), start=1):
            head = w.HTML(f"<p><strong>Question {number}</strong> [{_esc(q.kind)}]: {_esc(q.prompt)}</p>")
            if q.kind == "single" and q.choices:
                control = w.RadioButtons(
                    options=[(t, str(i)) for i, t in enumerate(q.choices, start=1)],
                    value=None,
                    layout=w.Layout(width="auto"),
                )

                def chosen(c: Any = control) -> str:
                    return c.value or ""

                self.inputs[q.id] = chosen
            elif q.kind == "multiple" and q.choices:
                checks = [w.Checkbox(description=t, value=False, indent=False) for t in q.choices]
                control = w.VBox(checks)

                def ticked(cs: list[Any] = checks) -> str:
                    return ",".join(str(i) for i, c in enumerate(cs, start=1) if c.value)

                self.inputs[q.id] = ticked
            else:
                control = w.Text(placeholder="your answer", layout=w.Layout(width="auto", max_width="420px"))

                def typed(c: Any = control) -> str:
                    return str(c.value)

                self.inputs[q.id] = typed
            button = w.Button(description="Check", button_style="primary")
            verdict = w.HTML("")
            button.on_click(lambda _b, qid=q.id: self.check(qid))
            self.buttons[q.id], self.outputs[q.id], self.controls[q.id] = button, verdict, control
            boxes.append(w.VBox([head, control, button, verdict]))
        self.widget = w.VBox(boxes)

    def check(self, question_id: str) -> Judged:
        raw = self.inputs[question_id]()
        if not raw.strip():
            self.outputs[question_id].value = "<p>Give an answer first.</p>"
            return Judged(None, "Give an answer first.", True)
        try:
            verdict = self.judge.judge(question_id, raw)
        except GraderError as exc:  # the server cannot be reached: said in one line, the answer can be sent again
            verdict = Judged(None, str(exc), True)
        mark = {True: "✔ ", False: "✘ ", None: ""}[verdict.correct]
        colour = {True: "#0b5d1e", False: "#8a1c0c", None: "#6b5200"}[verdict.correct]
        self.outputs[question_id].value = f'<p style="color:{colour}">{mark}{_esc(verdict.text)}</p>'
        if not verdict.more_tries:
            self.buttons[question_id].disabled = True
        return verdict

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _esc(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def quiz_in_text(judge: PracticeJudge | ServerJudge, read: Callable[[str], str], say: Callable[[str], None]) -> int:
    """Without ipywidgets: each question asked in the cell's text input, as ``grade quiz`` does; how many right."""
    questions = judge.questions()
    recorded = "recorded by the server" if judge.recorded else "practice: nothing is recorded"
    say(f"{judge.title} ({len(questions)} questions; {recorded})")
    right = 0
    for number, q in enumerate(questions, start=1):
        say(f"\nQuestion {number}/{len(questions)} [{q.kind}]: {q.prompt}")
        for i, text in enumerate(q.choices, start=1):
            say(f"  {i}. {text}")
        while True:
            raw = read("Your answer (empty to skip): ")
            if not raw.strip():
                say("  Skipped.")
                break
            verdict = judge.judge(q.id, raw)
            say(f"  {verdict.text}")
            if verdict.correct:
                right += 1
            if not verdict.more_tries:
                break
    say(f"\n{right}/{len(questions)} right.")
    return right


def quiz(chapter: str, quiz_dir: str | Path = "quizzes") -> QuizForm | None:
    """The chapter's questions: a widget form (ipywidgets), else asked in text with ``input()``."""
    judge = quiz_judge(chapter, Path(quiz_dir))
    if widgets_available():
        return QuizForm(judge)
    quiz_in_text(judge, input, print)
    return None


def quiz_magic(line: str) -> Any:
    """``%quiz CHAPTER [--quiz-dir DIR]``: the form, or a one-line Problem."""
    try:
        words = shlex.split(line)
        quiz_dir = "quizzes"
        if "--quiz-dir" in words:
            at = words.index("--quiz-dir")
            if at + 1 >= len(words):
                raise NotebookError("--quiz-dir needs a folder: %quiz CHAPTER --quiz-dir DIR")
            quiz_dir = words[at + 1]
            del words[at : at + 2]
        if len(words) != 1:
            raise NotebookError("name one chapter: %quiz CHAPTER [--quiz-dir DIR]")
        return quiz(words[0], quiz_dir)
    except (GraderError, ValueError) as exc:
        return Problem(str(exc))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext grader``: register ``%grade`` and ``%quiz``."""
    ipython.register_magic_function(grade_magic, magic_kind="line", magic_name="grade")
    ipython.register_magic_function(quiz_magic, magic_kind="line", magic_name="quiz")
