"""Every known mistake leads to practice: a concept, and questions of the quiz sources that exercise it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from grader.mistakes import CATALOGUE
from grader.student import coursetext
from grader.student.engine.generic.claims import CRASH_ORDER, ORDER
from grader.student.engine.catalogue import EXERCISES
from grader.student.quiz import concepts

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "quizzes" / "source"


def _question_ids() -> set[str]:
    ids = set()
    for path in SOURCES.glob("*.toml"):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        ids |= {f"{data['chapter']}/{q['id']}" for q in data["questions"]}
    return ids


def test_every_catalogued_mistake_has_a_concept() -> None:
    missing = [m.id for m in CATALOGUE.values() if concepts.concept_of(m.id) is None]
    assert missing == []


def test_every_generic_family_has_a_concept() -> None:
    families = set(ORDER) | set(CRASH_ORDER)
    assert set(concepts.GENERIC) | set(concepts.CRASH_FAMILIES) == families
    for family in families:
        for exercise in EXERCISES:
            assert concepts.concept_of(family, exercise) is not None, (family, exercise)


def test_every_exercise_has_a_concept() -> None:
    assert set(concepts.EXERCISE_CONCEPTS) == set(EXERCISES)
    assert set(concepts.EXERCISE_CONCEPTS.values()) <= set(concepts.CONCEPTS)


def test_every_exercise_is_sent_to_a_section_of_the_text_by_its_concept() -> None:
    """The one table: an exercise's concept gives both its practice and the section its report links to."""
    chapters = coursetext.load_chapters(ROOT / "text")
    known = {s.address for c in chapters.values() for s in c.sections}
    for concept in concepts.CONCEPTS.values():
        assert set(concept.sections) <= known, (concept.id, concept.sections)
    for exercise in EXERCISES:
        address = coursetext.section_for(exercise)
        assert address in known, (exercise, address)
        assert address in concepts.concept_of_exercise(exercise).sections  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("exercise", "section"),
    [
        ("activations.ReLU", "activations.relu"),
        ("kernels.relu_forward", "kernels.elementwise"),  # the concept's section in the exercise's own chapter
        ("kernels.layernorm_forward", "kernels.one-pass"),
        ("normalization.LayerNorm", "normalization.layernorm"),
        ("linear.Linear", "universal-approximation.constructive"),  # none in its chapter: the concept's first
        ("linear.Linear2", "universal-approximation.constructive"),  # a course's new exercise: its topic's concept
    ],
)
def test_a_report_reads_its_concepts_section(exercise: str, section: str) -> None:
    assert coursetext.section_for(exercise) == section
    assert coursetext.read_line(exercise) == f"Read §{section} (grade read {section})."


def test_every_concept_has_a_question_of_the_sources() -> None:
    known = _question_ids()
    for concept in concepts.CONCEPTS.values():
        assert concept.questions, f"concept {concept.id} has no question"
        unknown = [q for q in concept.questions if q not in known]
        assert unknown == [], f"concept {concept.id} names questions not in quizzes/source: {unknown}"


def test_every_named_concept_exists_and_every_rule_is_used() -> None:
    named = {c for _, c in concepts.RULES} | set(concepts.GENERIC.values())
    assert named <= set(concepts.CONCEPTS)
    used = {next(p for p, _ in concepts.RULES if m.id.startswith(p)) for m in CATALOGUE.values()}
    assert [p for p, _ in concepts.RULES if p not in used] == []


@pytest.mark.parametrize(
    ("mistake", "concept"),
    [
        ("bn-biased-running-var", "normalization.batchnorm-running-stats"),
        ("bn-eval-uses-batch-stats", "normalization.train-vs-eval"),
        ("bn-backward-missing-mean-term", "normalization.batchnorm-backward"),
        ("ln-backward-wrong-axis", "normalization.layernorm-backward"),
        ("kernel-rmsnorm-eps-outside", "normalization.rmsnorm"),
        ("generic-terms", "backprop.chain-rule"),
        ("bn-eval-uses-batch-stats+bn-eps-missing", "normalization.train-vs-eval"),
    ],
)
def test_the_first_matching_rule_wins(mistake: str, concept: str) -> None:
    found = concepts.concept_of(mistake)
    assert found is not None and found.id == concept


def test_a_crash_family_leads_to_its_exercise_concept() -> None:
    assert concepts.concept_of("generic-none", "optim.AdamW").id == "optim.adamw"  # type: ignore[union-attr]
    assert concepts.concept_of("generic-none") is None
    assert concepts.questions_of("generic-key", "dropout.Dropout")[0].startswith("dropout-weight-decay/")
    assert concepts.sections_of("normalization.batchnorm-backward") == ("normalization.batchnorm-backward",)
    assert concepts.sections_of("no.such-concept") == ()
