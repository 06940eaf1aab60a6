"""The errata page: every error of the course text that the audits found, with the correct statement
and its source; explanations that contradict the chapter point to an entry that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader import quiz as quiz_lib

ROOT = Path(__file__).resolve().parents[2]
ERRATA = (ROOT / "quizzes" / "errata.md").read_text(encoding="utf-8")
ENTRIES = dict(re.findall(r"^(\d+)\. \*\*(.+?)\*\*", ERRATA, flags=re.M))


def _entry(number: str) -> str:
    start = ERRATA.index(f"\n{number}. **")
    nxt = re.search(r"\n(\d+)\. \*\*|\n## ", ERRATA[start + 3 :])
    return ERRATA[start : start + 3 + nxt.start()] if nxt else ERRATA[start:]


@pytest.mark.parametrize(
    "words",
    [
        "ELU'(z) = α·e^z",
        "GELU''(x) = φ(x)(2 - x²)",
        "preserves the expectation only",
        "one pass",
        "batch size 1",
        "invert",
        "second moment",
        "n_in·Var(W) > 1",
        "σ(βz) + βz·σ(βz)(1 - σ(βz))",
        "not a polynomial",
        "GELU(x) = x·Φ(x) is the expectation",
    ],
)
def test_each_known_error_of_the_course_text_has_an_entry(words: str) -> None:
    assert words in ERRATA


def test_every_entry_says_what_is_correct_and_cites_a_source() -> None:
    assert len(ENTRIES) >= 12
    for number in ENTRIES:
        text = _entry(number)
        assert "Correct" in text and "Source" in text, number


def test_explanations_that_correct_what_is_often_written_cite_the_section_of_an_entry() -> None:
    cited_by_errata = set(re.findall(r"\(§([a-z0-9-]+\.[a-z0-9-]+)\)", ERRATA))
    pointed = 0
    for quiz in quiz_lib.load_all(ROOT / "quizzes"):
        for q in quiz.questions:
            if not re.search(r"\boften (?:written|said|given|rounded)\b", q.explanation):
                continue
            sections = re.findall(r"§([a-z0-9-]+\.[a-z0-9-]*[a-z0-9])", q.explanation)
            assert sections and set(sections) & cited_by_errata, (q.id, sections)
            pointed += 1
    assert pointed >= 4, "rmsnorm-why, ln-transformers, kaiming-vs-xavier and bn-identity say why"
