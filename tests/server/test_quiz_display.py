"""The instructor's quiz items page shows parameterised prompts with their ranges, never a raw template."""

from __future__ import annotations

from pathlib import Path

from grader.term import class_report
from grader import quiz as quiz_lib
from grader.server import dashboard_html
from grader.student.store import Store

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"


def test_display_prompts_show_ranges_not_templates() -> None:
    quizzes = quiz_lib.load_all(QUIZ_DIR)
    question = next(q for z in quizzes for q in z.questions if q.id == "swish-derivative")
    assert "{{" in question.prompt
    assert question.display_prompt.startswith("Swish with β = [beta: {0.5, 1.5, 2, 2.5}]")
    assert "at x = [x: -2.5 … 3]?" in question.display_prompt
    fixed = next(q for z in quizzes for q in z.questions if q.id == "gelu-why")
    assert fixed.display_prompt == fixed.prompt


def test_the_items_page_renders_every_prompt_without_a_template(tmp_path: Path) -> None:
    quizzes = quiz_lib.load_all(QUIZ_DIR)
    with Store.open(tmp_path / "course.db") as store:
        store.record_quiz_answer("ann", "activations", "swish-derivative", "0.5", False, {"x": 1.0, "beta": 1.0})
        store.record_quiz_answer("ann", "activations", "gelu-why", "c", True)
        items = class_report.item_stats(store.quiz_answer_rows(), quizzes)
        report = class_report.build(store, quizzes=quizzes)
        html = dashboard_html.offline_html(report, store, "items")
    parameterised = [i for i in items if i.question in {q.id for z in quizzes for q in z.questions if q.parameterised}]
    assert parameterised and all("{{" not in i.prompt for i in items)
    assert "{{" not in html and "[beta: {0.5, 1.5, 2, 2.5}]" in html


def test_the_quiz_package_is_split_by_concern() -> None:
    package = Path(quiz_lib.__file__).parent
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in package.glob("*.py")}
    assert {"bank.py", "locking.py", "params.py", "judging.py", "graded.py", "sessions.py"} <= set(sizes)
    assert max(sizes.values()) <= 400, sizes
