"""A guessing audit over the choice questions as displayed (each student's own order): no surface rule
scores more than chance + 5 points. Single choice: the longest, second longest, most notation, fewest
absolute words, always b, the first shown. Multiple select: the longest half of the choices (⌊k/2⌋ or
⌈k/2⌉ of k), against the chance of a random non-empty subset."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import quiz as quiz_lib
from grader.quiz.model import Choice

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"
SOURCES = [quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))]
SINGLE = [(s.chapter, q) for s in SOURCES for q in s.questions if q.kind == "single"]
MULTIPLE = [(s.chapter, q) for s in SOURCES for q in s.questions if q.kind == "multiple"]
STUDENTS = [f"student{i}" for i in range(200)]
BAR = 0.05  # points above chance a rule may score
NOTATION = re.compile(r"[=+−\-*/^²³√∑∏∂σφΦμβγλεαπθ()\[\]|≤≥<>·×∞]|\b(?:exp|log|sqrt|tanh|erf|Var|E)\b|\d")
ABSOLUTES = re.compile(r"\b(?:always|never|every|all|none|only|exactly|cannot|must|any|no)\b", re.I)

Rule = Callable[[list[Choice]], int]
SubsetRule = Callable[[list[Choice]], set[str]]


def _by(key: Callable[[Choice], float], rank: int = 0) -> Rule:
    """Pick the choice at ``rank`` when sorted by ``key`` descending (ties: the first shown)."""
    return lambda shown: sorted(range(len(shown)), key=lambda i: (-key(shown[i]), i))[rank]


def _longest(count: Callable[[int], int]) -> SubsetRule:
    """Pick the ``count(k)`` longest of the k choices shown (ties: the first shown)."""
    return lambda shown: {
        c.id for _, c in sorted(enumerate(shown), key=lambda p: (-len(p[1].text), p[0]))[: count(len(shown))]
    }


RULES: dict[str, Rule] = {
    "longest": _by(lambda c: len(c.text)),
    "second longest": _by(lambda c: len(c.text), 1),
    "most notation": _by(lambda c: len(NOTATION.findall(c.text))),
    "fewest absolutes": _by(lambda c: -len(ABSOLUTES.findall(c.text))),
    "always b": lambda shown: 1,
    "first choice": lambda shown: 0,
}
SUBSET_RULES: dict[str, SubsetRule] = {
    "the longest ⌊k/2⌋": _longest(lambda k: k // 2),
    "the longest ⌈k/2⌉": _longest(lambda k: (k + 1) // 2),
}


def _locked(chapter: str, question_id: str) -> quiz_lib.Question:
    return quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_no_single_choice_rule_beats_chance_by_more_than_five_points(rule: str) -> None:
    hits = trials = 0
    chance = 0.0
    for chapter, source in SINGLE:
        locked = _locked(chapter, source.id)
        for student in STUDENTS:
            shown = list(quiz_lib.pose(locked, student).choices)
            hits += shown[RULES[rule](shown)].id == source.answer
            chance += 1 / len(shown)
            trials += 1
    assert hits / trials <= chance / trials + BAR, f"'{rule}' scores {hits / trials:.1%} (chance {chance / trials:.1%})"


@pytest.mark.parametrize("rule", sorted(SUBSET_RULES))
def test_no_multiple_select_length_rule_beats_chance_by_more_than_five_points(rule: str) -> None:
    hits = trials = 0
    chance = 0.0
    for chapter, source in MULTIPLE:
        locked = _locked(chapter, source.id)
        for student in STUDENTS:
            shown = list(quiz_lib.pose(locked, student).choices)
            hits += SUBSET_RULES[rule](shown) == set(source.answer)
            chance += 1 / (2 ** len(shown) - 1)  # a random non-empty subset
            trials += 1
    assert hits / trials <= chance / trials + BAR, f"'{rule}' scores {hits / trials:.1%} (chance {chance / trials:.1%})"


def test_the_length_rule_catches_a_keyed_longest_half() -> None:
    shown = [
        Choice("a", "a long and careful key"),
        Choice("b", "short"),
        Choice("c", "another long, careful key"),
        Choice("d", "tiny"),
    ]
    assert SUBSET_RULES["the longest ⌊k/2⌋"](shown) == {"a", "c"}
