"""The course text (text/*.md): its structure, its checkpoints as the quiz bank's one structure, its citations.

grader/student/coursetext.py parses the chapters; grader/course/text.py checks them against the quiz bank
and finds every citation (§chapter.section) in what a student reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.course import text as course_text
from grader.student.coursetext import (
    TextError,
    citations,
    find_section,
    latex_to_text,
    load_chapters,
    markdown_to_text,
    parse_chapter,
    section_text,
)

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = {
    "universal-approximation",
    "activations",
    "normalization",
    "initialisation",
    "dropout-weight-decay",
    "kernels",
}


@pytest.fixture(scope="module")
def chapters() -> dict:
    return load_chapters(ROOT / "text")


def test_every_chapter_parses_into_addressed_sections(chapters: dict) -> None:
    assert set(chapters) == CHAPTERS
    for chapter in chapters.values():
        assert chapter.sections, chapter.name
        assert all(s.address == f"{chapter.name}.{s.id}" for s in chapter.sections)
    assert find_section(chapters, "normalization.batchnorm-backward").title == "BatchNorm backward"
    assert find_section(chapters, "§activations.gelu").chapter == "activations"


def test_the_text_and_the_quiz_bank_are_one_structure(chapters: dict) -> None:
    banks = course_text.quiz_banks()
    assert course_text.structure_problems(chapters, banks) == []
    # every checkpoint=true question of the bank sits in exactly one section of its chapter
    from grader import quiz as quiz_lib

    for path in sorted((ROOT / "quizzes" / "source").glob("*.toml")):
        source = quiz_lib.load_source(path)
        for q in source.questions:
            if q.data.get("checkpoint"):
                places = [s.address for s in chapters[source.chapter].sections if q.id in s.checkpoint]
                assert len(places) == 1, (q.id, places)


def test_structure_problems_name_each_break(chapters: dict) -> None:
    banks = {name: list(ids) for name, ids in course_text.quiz_banks().items()}
    banks["activations"].append("a-new-question")  # in the bank, in no section
    banks["normalization"].remove("bn-dgamma")  # in a section, not in the bank
    banks["extra"] = ["q"]  # a bank without a chapter
    problems = course_text.structure_problems(chapters, banks)
    assert any("'a-new-question'" in p and "in no section" in p for p in problems)
    assert any("normalization.batchnorm-backward: checkpoint question 'bn-dgamma' is not in" in p for p in problems)
    assert any("quiz chapter 'extra' has no chapter" in p for p in problems)
    twice = dict(chapters)
    twice["activations"] = parse_chapter(
        (ROOT / "text" / "activations.md")
        .read_text(encoding="utf-8")
        .replace(
            "<!-- checkpoint: dead-relu-cause dead-relu-remedies -->",
            "<!-- checkpoint: dead-relu-cause dead-relu-remedies gelu-why -->",
        ),
        "activations",
    )
    assert any(
        "'gelu-why' is the checkpoint of 2 sections" in p
        for p in course_text.structure_problems(twice, course_text.quiz_banks())
    )


@pytest.mark.parametrize(
    "markdown, message",
    [
        ("# T {#other}\n", "not the file's name"),
        ("# T {#c}\n## No id\n", "needs a stable id"),
        ("# T {#c}\n## A {#a}\ntext\n## B {#a}\n", "two sections have this id"),
        ("# T {#c}\n## A {#a}\n<!-- checkpoint: q -->\nmore text\n", "must end its section"),
        ("# T {#c}\n## A {#a}\n<!-- a note -->\n", "only comments"),
        ("# T {#c}\n## A {#a}\nfive<!-- claim: x -->\n", "does not follow a piece of maths"),
    ],
)
def test_a_broken_chapter_is_refused_in_one_line(markdown: str, message: str) -> None:
    with pytest.raises(TextError, match=message):
        parse_chapter(markdown, "c")


def test_a_claim_is_the_maths_it_follows() -> None:
    chapter = parse_chapter(
        "# T {#c}\n## A {#a}\nbetween $-0.8$<!-- claim: lo --> and\n$$x^2$$\n<!-- claim: sq -->\n", "c"
    )
    assert [(c.id, c.latex) for c in chapter.sections[0].claims] == [("lo", "-0.8"), ("sq", "x^2")]


def test_an_unknown_address_suggests_the_nearest(chapters: dict) -> None:
    with pytest.raises(TextError, match="Did you mean 'normalization.batchnorm-backward'"):
        find_section(chapters, "normalization.batchnorm-backwards")


def test_every_citation_resolves_to_a_section(chapters: dict) -> None:
    found = list(course_text.citations())
    assert course_text.unresolved(chapters, found) == []
    cited = {c.address for c in found}
    # the stubs, ERRATA and the reports (each exercise's and each family of mistakes' section, which the mistakes'
    # hints cite too) cite sections (the links back from what a student reads)
    paths = {c.path for c in found}
    assert {"exercises/normalization.py", "quizzes/errata.md", "grader/student/coursetext.py"} <= paths
    assert "normalization.batchnorm-backward" in cited


def test_a_citation_of_nothing_is_found(chapters: dict, tmp_path: Path) -> None:
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "stub.py").write_text('"""See §normalization.batchnorm-backward and §norm.nothing."""\n')
    found = list(course_text.citations(tmp_path))
    assert [c.address for c in course_text.unresolved(chapters, found)] == ["norm.nothing"]
    assert citations("(§a.b-c.) and §d.e") == ["a.b-c", "d.e"]


def test_what_a_student_reads_cites_sections_not_a_vague_course_text() -> None:
    assert course_text.vague_citations() == []


@pytest.mark.parametrize(
    "line, phrase",
    [
        ("gives x ≈ -0.7518; the course text rounds it to -0.75.", "course text rounds"),
        ("remedies for dead ReLUs given in the course text?", "given in the course text"),
        ("The chapter says ReLU halves the variance.", "The chapter says"),
        ("# Errata: where the source material and the papers disagree", "the source material"),
        ("the second moment (ERRATA.md, item 10).", "ERRATA.md, item 10"),
        ("right on 2-D input (the course code's bug).", "the course code"),
    ],
)
def test_a_vague_citation_is_found(tmp_path: Path, line: str, phrase: str) -> None:
    (tmp_path / "quizzes").mkdir()
    (tmp_path / "quizzes" / "errata.md").write_text(f"Fine: §activations.gelu.\n{line}\n", encoding="utf-8")
    found = course_text.vague_citations(tmp_path)
    assert [(c.path, c.line, c.address) for c in found] == [("quizzes/errata.md", 2, phrase)]


def test_each_errata_entry_cites_its_section_and_says_what_is_often_written() -> None:
    errata = (ROOT / "quizzes" / "errata.md").read_text(encoding="utf-8")
    entries = re.split(r"\n(?=\d+\. \*\*)", errata)[1:]
    assert len(entries) >= 12
    for entry in entries:
        assert citations(entry) and "Often written:" in entry and "Correct" in entry, entry[:60]


def test_the_stubs_cite_sections_not_the_old_numbering() -> None:
    for path in sorted((ROOT / "exercises").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        assert "Neural Network Components & Regularization" not in source, path.name
        assert "section 4" not in source and "section 7" not in source, path.name


def test_maths_reads_as_plain_text() -> None:
    assert latex_to_text(r"\frac{1}{2} - \frac{1}{2\pi}") == "1/2 - 1/(2π)"
    assert latex_to_text(r"\sqrt{\sigma_B^2 + \varepsilon}") == "√(σ_B^2 + ε)"
    assert latex_to_text(r"\operatorname{GELU}'(x) = \Phi(x) + x\,\varphi(x)") == "GELU'(x) = Φ(x) + x φ(x)"
    assert latex_to_text(r"\hat{x}_i") == "x̂_i"
    assert markdown_to_text("**A** `b` $x^{2}$<!-- claim: c -->") == "A b x^2\n"


def test_a_section_reads_in_the_terminal_with_its_checkpoint(chapters: dict) -> None:
    text = section_text(find_section(chapters, "normalization.batchnorm-backward"))
    assert text.startswith("BatchNorm backward  (§normalization.batchnorm-backward)")
    assert "Checkpoint: bn-dgamma, bn-dx-constant. Answer them with `grade quiz normalization`" in text
    assert "<!--" not in text and "\\frac" not in text


# --- no answer leaks: the leak audit reads the text ---------------------------------------------------


def _audit(text_dir: Path):
    from grader import quiz as quiz_lib
    from grader.course import leaks

    quizzes = quiz_lib.load_all(ROOT / "quizzes")
    sources = [quiz_lib.load_source(p) for p in sorted((ROOT / "quizzes" / "source").glob("*.toml"))]
    return leaks.audit(
        leaks.course_texts(text_dir), quizzes, leaks.source_keys(sources), leaks.contract_texts(ROOT / "exercises")
    )


def test_the_text_prints_no_graded_answer() -> None:
    result = _audit(ROOT / "text")
    assert result.texts > 25, "every section is read"
    assert not result.leaks, "\n".join(map(str, result.leaks))


def test_a_graded_answer_printed_in_a_section_is_a_leak(tmp_path: Path) -> None:
    for path in (ROOT / "text").glob("*.md"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    gelu = tmp_path / "activations.md"
    gelu.write_text(
        gelu.read_text(encoding="utf-8")
        .replace("the checkpoint asks for\nboth more precisely.", "the minimum is at $x \\approx -0.7518$.")
        .replace("(find its maximum at the checkpoint)", "(at most $\\frac{1}{4}$)"),
        encoding="utf-8",
    )
    init = tmp_path / "initialisation.md"
    init.write_text(
        init.read_text(encoding="utf-8").replace(
            "Solve it for the variance at the checkpoint", "So $\\operatorname{Var}(W) = 2/n_\\text{in}$"
        ),
        encoding="utf-8",
    )
    found = {(leak.question, leak.source) for leak in _audit(tmp_path).leaks}
    assert ("activations/gelu-min-x", "text/activations.md#gelu") in found
    assert ("initialisation/kaiming-variance", "text/initialisation.md#kaiming") in found


def test_a_report_naming_a_known_mistake_sends_the_student_to_the_mistake_s_section(chapters: dict) -> None:
    """A biased running variance is a matter of §normalization.batchnorm-running-stats, not of BatchNorm's backward
    (the exercise's own section, where the report sent every BatchNorm1d failure)."""
    from grader.mistakes.hints import HINTS
    from grader.student.coursetext import mistake_section
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
    from grader.student.feedback.report import format_text
    from grader.student.feedback.report_html import format_html

    def failing(*mistakes: str | None) -> GradeReport:
        checks = [CheckResult(f"c{i}", False, 0.0, 1.0, "differs", misconception=m) for i, m in enumerate(mistakes)]
        return GradeReport("ada", [ExerciseResult("normalization.BatchNorm1d", "failed", 0.0, 2.0, checks)], "abc")

    named = failing(None, "bn-biased-running-var")
    assert "Read §normalization.batchnorm-running-stats (grade read normalization.batchnorm-running-stats)." in (
        format_text(named)
    )
    assert 'href="text/normalization.html#batchnorm-running-stats"' in format_html(named, text_href="text/")
    assert HINTS["bn-biased-running-var"].endswith("See §normalization.batchnorm-running-stats.")  # the same
    assert "Read §normalization.batchnorm-forward " in format_text(failing(None))  # no mistake named
    known = {s.address for c in chapters.values() for s in c.sections}
    assert {mistake_section(m) for m in HINTS} - {None} <= known


def test_a_practice_question_names_its_section_and_a_last_wrong_try_sends_the_student_there(chapters: dict) -> None:
    from grader.student.coursetext import checkpoint_sections
    from grader.student.quiz.answers import canonical_answers
    from grader.student.quiz.practice import PracticeQuestion, PracticeQuiz, new_salt, run_practice, seal

    sections = checkpoint_sections(chapters)
    assert sections["gelu-value"] == "activations.gelu" and sections["bn-dgamma"] == "normalization.batchnorm-backward"
    question = PracticeQuestion(id="gelu-value", kind="numeric", prompt="2 + 2?", tolerance=0.1, salt=new_salt())
    bins = canonical_answers(question, 4.0)
    question.sealed = seal("Four.", [bins[len(bins) // 2]], question.salt)
    said: list[str] = []
    typed = iter(["5", "6"])
    run_practice(PracticeQuiz("activations", "A", [question]), lambda _: next(typed), said.append, sections=sections)
    assert "Question 1/1 gelu-value [numeric] (§activations.gelu): 2 + 2?" in said[1]
    assert "  Not this one. Re-read §activations.gelu (grade read activations.gelu) and come back." in said
