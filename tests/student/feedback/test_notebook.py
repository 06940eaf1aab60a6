"""The notebook front end: %load_ext grader, %grade, %quiz, as a student uses them.

A handout-like folder is laid out in a temporary directory (a complete
exercises/ folder with one known mistake, the case pack of the exercise, a
practice quiz); the chapter's shipped notebook is executed there with
nbclient (a real kernel), and the HTML report it rendered is opened in the
browser at 1280 and 390 px (screenshots in tests/artifacts/). The magics, the
quiz forms (ipywidgets, their buttons clicked) and the text fallback without
ipywidgets are also driven in-process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from grader.course.packs import write_pack
from grader.course.solution import write_solution
from grader.student.feedback import notebook
from grader.student.quiz.answers import canonical_answers
from grader.student.quiz.practice import Choice, PracticeQuestion, PracticeQuiz, new_salt, seal
from grader.student.store import Store

from test_dashboard_browser import ARTIFACTS, WIDTHS, Watched, browser  # noqa: F401  (the browser fixture)

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = REPO / "notebooks"
CHAPTERS = ("activations", "normalization", "initialisation", "dropout-weight-decay", "universal-approximation")


def practice_quiz(chapter: str) -> PracticeQuiz:
    """A two-question practice quiz: one choice (the right one is the second), one number (0.25 +- 0.01)."""
    single = PracticeQuestion(
        "momentum",
        "single",
        "Which variance updates BatchNorm's running_var?",
        (Choice("a", "the biased one (1/m)"), Choice("b", "the unbiased one (1/(m-1))")),
        salt=new_salt(),
    )
    single.sealed = seal("m/(m-1) turns the biased batch variance into the unbiased one.", ["choice:b"], single.salt)
    number = PracticeQuestion(
        "keep", "numeric", "Dropout with p = 0.75 keeps which fraction?", tolerance=0.01, salt=new_salt()
    )
    bins = canonical_answers(number, "0.25")  # the bins around 0.25; the middle one is 0.25's own
    number.sealed = seal("1 - p of the elements are kept.", [bins[len(bins) // 2]], number.salt)
    return PracticeQuiz(chapter, f"Checkpoint: {chapter}", [single, number])


@pytest.fixture(scope="module")
def handout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder as a student has it: exercises/ (running_var biased: a known mistake), packs, quizzes/, notebooks."""
    folder = tmp_path_factory.mktemp("handout")
    write_solution(folder / "exercises")
    code = folder / "exercises" / "normalization.py"
    text = code.read_text()
    assert "bn.momentum * var * m / (m - 1)" in text
    code.write_text(text.replace("bn.momentum * var * m / (m - 1)", "bn.momentum * var"))
    (folder / "packs").mkdir()
    write_pack(folder / "packs", "normalization.BatchNorm1d")
    (folder / "quizzes").mkdir()
    (folder / "quizzes" / "normalization.json").write_text(json.dumps(practice_quiz("normalization").to_json()))
    for chapter in CHAPTERS:
        shutil.copyfile(NOTEBOOKS / f"{chapter}.ipynb", folder / f"{chapter}.ipynb")
    return folder


def test_one_notebook_per_chapter_each_loading_the_extension_grading_and_quizzing() -> None:
    nbformat = pytest.importorskip("nbformat")
    quizzes = sorted(p.stem for p in (REPO / "quizzes").glob("*.json"))
    assert sorted(CHAPTERS) == quizzes
    for chapter in CHAPTERS:
        nb = nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)
        nbformat.validate(nb)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        assert code[0] == "%load_ext grader"
        assert any(c.startswith("%grade ") for c in code) and f"%quiz {chapter}" in code
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # shipped clean


# --------------------------------------------------------------------------- the magics in-process


@pytest.fixture()
def shell(monkeypatch: pytest.MonkeyPatch, handout: Path) -> Any:
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    monkeypatch.chdir(handout)
    ip = interactive.InteractiveShell.instance()
    ip.run_line_magic("load_ext", "grader")
    return ip


def test_grade_magic_grades_through_the_pipeline_records_and_renders(shell: Any, handout: Path) -> None:
    feedback = shell.run_line_magic("grade", "normalization.BatchNorm1d --packs packs --student ada")
    assert isinstance(feedback, notebook.Feedback)
    ex = feedback.report.exercises[0]
    assert ex.id == "normalization.BatchNorm1d" and ex.status == "failed" and not feedback.full_marks
    check = next(c for c in ex.checks if c.name == "running_var")
    assert check.figure is not None
    assert check.misconception == "bn-biased-running-var" and check.figure["kind"] == "trajectory"
    assert check.figure["hidden"] is False  # public checks: the pack's expected values are the student's already
    html = feedback._repr_html_()
    assert "<style>" in html and "<html" not in html and 'role="img"' in html and "bn-biased-running-var" in html
    assert "FAILED" in str(feedback) and "running_var" in str(feedback)
    assert str(feedback).splitlines()[0] == (
        "Graded here on the public checks: nothing handed in (not logged in to a course server)."
    )
    assert html.startswith("<p><strong>Graded here on the public checks")
    with Store.open(handout / ".grade" / "progress.db") as store:  # recorded as grade submit records
        rows = store.db.execute("select exercise, score from submissions where student = 'ada'").fetchall()
    assert rows and rows[-1][0] == "normalization.BatchNorm1d"
    assert (handout / ".grade" / "last-report.json").exists()


def test_grade_magic_submits_through_the_one_submit_of_both_command_lines(
    shell: Any,
    handout: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """%grade decides and grades as `grade submit` does: through grader.student.submit.submit (no copy of its
    local or remote path), asked to return the report rather than print it."""
    from grader.student import submit as submit_module

    calls: list[dict[str, Any]] = []
    real = submit_module.submit

    def recorded(*args: Any, **kwargs: Any) -> submit_module.Submitted:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(submit_module, "submit", recorded)
    feedback = shell.run_line_magic("grade", "normalization.BatchNorm1d --packs packs")
    assert isinstance(feedback, notebook.Feedback), feedback
    assert feedback.report.exercises[0].id == "normalization.BatchNorm1d"
    assert len(calls) == 1 and calls[0]["show"] is False and calls[0]["local"] is True  # no --hand-in: here


@pytest.mark.parametrize(
    "line, words",
    [
        ("BatchNorm --packs packs", "Did you mean"),
        ("normalization.BatchNorm1d --packs", "--packs needs a value"),
        ("normalization.BatchNorm1d --fast", "unknown option '--fast'"),
        (
            "normalization.BatchNorm1d --local --fast",
            "takes --path, --student, --packs, --no-sandbox, --local and --hand-in",
        ),
        ("normalization.BatchNorm1d --path nowhere --packs packs", "no exercises folder"),
        ('normalization.BatchNorm1d "unclosed', "cannot read"),
    ],
)
def test_bad_grade_lines_are_one_line_problems(shell: Any, line: str, words: str) -> None:
    answer = shell.run_line_magic("grade", line)
    assert isinstance(answer, notebook.Problem) and words in answer.message and "\n" not in answer.message
    assert answer._repr_html_().startswith('<p style="color:#8a1c0c"><strong>Error:</strong>')


def test_quiz_magic_without_a_chapter_file_names_the_chapters(shell: Any) -> None:
    answer = shell.run_line_magic("quiz", "nosuch")
    assert isinstance(answer, notebook.Problem) and "choose one of normalization" in answer.message
    assert isinstance(shell.run_line_magic("quiz", ""), notebook.Problem)


# --------------------------------------------------------------------------- quizzes


def test_quiz_form_checks_answers_with_widgets(handout: Path) -> None:
    pytest.importorskip("ipywidgets")
    form = notebook.quiz("normalization", handout / "quizzes")
    assert isinstance(form, notebook.QuizForm) and not form.judge.recorded
    radio = form.controls["momentum"]
    radio.value = "1"  # wrong: one try left
    verdict = form.check("momentum")
    assert verdict.correct is False and verdict.more_tries and "Try again" in form.outputs["momentum"].value
    radio.value = "2"
    form.buttons["momentum"].click()  # the Check button, as a student clicks it
    assert "✔ Right. m/(m-1)" in form.outputs["momentum"].value and form.buttons["momentum"].disabled
    text = form.controls["keep"]
    text.value = "a quarter"  # unreadable: said, and no try spent
    assert isinstance(form.judge, notebook.PracticeJudge)
    assert form.check("keep").correct is None and form.judge.tries["keep"] == 0
    text.value = "0.25"
    assert form.check("keep").correct is True


def test_quiz_without_ipywidgets_asks_in_text(handout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notebook, "widgets_available", lambda: False)
    answers = iter(["1", "2", "0.5", "0.3"])
    said: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    monkeypatch.setattr("builtins.print", lambda *a, **k: said.append(" ".join(map(str, a))))
    assert notebook.quiz("normalization", handout / "quizzes") is None
    text = "\n".join(said)
    assert "practice: nothing is recorded" in text and "Right. m/(m-1)" in text
    assert "Re-read the chapter" in text and "1/2 right." in text


# --------------------------------------------------------------------------- a real kernel


def test_the_chapter_notebook_runs_in_a_kernel_and_its_report_reads_in_the_browser(
    handout: Path,
    browser: Any,  # noqa: F811
) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(handout / "normalization.ipynb", as_version=4)
    # the handout's packs are installed with its grader; here they lie in packs/ beside the notebook
    setup = nbformat.v4.new_code_cell(
        "import grader.student.feedback.notebook as _nb, pathlib\n_nb.PACKS_DEFAULT = pathlib.Path('packs')"
    )
    nb.cells.insert(1, setup)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(handout)}}
    ).execute()
    cells = {c.source: c for c in nb.cells if c.cell_type == "code"}
    graded = cells["%grade normalization.BatchNorm1d"]
    assert not [o for o in graded.outputs if o.output_type == "error"]
    html = next(o.data["text/html"] for o in graded.outputs if "text/html" in o.get("data", {}))
    assert "bn-biased-running-var" in html and 'role="img"' in html
    quiz = cells["%quiz normalization"]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in quiz.outputs)
    page = handout / "notebook-output.html"
    page.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport"'
        ' content="width=device-width, initial-scale=1"><title>notebook output</title></head>'
        f"<body>{html}</body></html>"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900})
        watched = Watched(context.new_page())
        try:
            watched.page.goto(page.as_uri())
            watched.page.screenshot(path=str(ARTIFACTS / f"notebook-report-{width}.png"), full_page=True)
            assert watched.overflow() <= 0
            assert watched.page.get_by_role("img").count() >= 1
            assert watched.problems == []
        finally:
            context.close()


def test_quiz_is_posed_judged_and_recorded_by_the_server_when_logged_in(tmp_path: Path) -> None:
    pytest.importorskip("ipywidgets")
    from grader.student.client.connection import Login, save_login
    from server_util import Server, issue_tokens

    db = tmp_path / "course.db"
    tokens, _ = issue_tokens(db, ["ann"])
    server = Server(db, f"sqlite:///{tmp_path / 'queue.db'}", workers=0).start()
    try:
        save_login(Login(server.url, tokens["ann"], "ann"))  # $GRADE_CONFIG: a test's own file (conftest)
        form = notebook.quiz("activations", tmp_path / "no-quizzes-needed")
        assert isinstance(form, notebook.QuizForm) and form.judge.recorded
        single = next(q for q in form.judge.questions() if q.kind == "single")
        form.controls[single.id].value = "1"
        verdict = form.check(single.id)
        assert verdict.correct in (True, False) and "(recorded)" in verdict.text
        with Store.open(db) as store:
            rows = store.quiz_attempts("ann")
        assert [(r["chapter"], r["question"]) for r in rows] == [("activations", single.id)]
        assert bool(rows[0]["correct"]) is verdict.correct
    finally:
        server.stop()
    other = next(q for q in form.judge.questions() if q.id != single.id and q.kind == "single")
    form.controls[other.id].value = "1"
    down = form.check(other.id)  # the server is gone: one line in the form, nothing raised
    assert down.correct is None and "cannot reach the course server" in form.outputs[other.id].value


def test_grade_magic_hands_in_when_logged_in_and_says_so_first(shell: Any, handout: Path) -> None:
    """Logged in, %grade ... --hand-in does what the terminal's `grade submit` does: it hands in (the server's
    hidden checks, recorded there), and its first line says so. Issue 43: running a notebook end to end handed
    in; a plain %grade now grades here and says how to hand in; --local grades here too."""
    from grader.student.client.connection import Login, save_login
    from server_util import Server, issue_tokens

    db = handout / "server" / "course.db"
    db.parent.mkdir(exist_ok=True)
    tokens, _ = issue_tokens(db, ["ann"])
    server = Server(db, f"sqlite:///{db.parent / 'queue.db'}", workers=1).start()
    try:
        save_login(Login(server.url, tokens["ann"], "ann"))  # $GRADE_CONFIG: a test's own file (conftest)
        plain = shell.run_line_magic("grade", "normalization.BatchNorm1d --packs packs")
        assert isinstance(plain, notebook.Feedback), plain
        assert str(plain).splitlines()[0] == (
            "Graded here on the public checks: nothing handed in (logged in: add "
            "--hand-in to the %grade line to hand in)."
        )
        with Store.open(db) as store:
            assert store.submissions(student="ann") == []  # running the notebook handed nothing in
        handed = shell.run_line_magic("grade", "activations.ReLU --hand-in")
        assert isinstance(handed, notebook.Feedback), handed
        first = str(handed).splitlines()[0]
        assert first.startswith(f"Handed in to {server.url}: submission ") and "recorded as ann" in first
        assert handed.report.exercises[0].id == "activations.ReLU" and handed.full_marks
        with Store.open(db) as store:
            assert [r["exercise"] for r in store.submissions(student="ann")] == ["activations.ReLU"]
        here = shell.run_line_magic("grade", "normalization.BatchNorm1d --local --packs packs")
        assert isinstance(here, notebook.Feedback)
        assert str(here).splitlines()[0] == "Graded here on the public checks: nothing handed in (--local)."
        mixed = shell.run_line_magic("grade", "activations.ReLU --student bob --hand-in")
        assert isinstance(mixed, notebook.Problem) and "leave --hand-in out to grade here" in mixed.message
        with Store.open(db) as store:
            assert len(store.submissions(student="ann")) == 1  # neither --local nor the refused line handed in
    finally:
        server.stop()
