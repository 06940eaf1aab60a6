"""A guessing audit over the single-choice questions as displayed (each student's own order): no
surface rule scores more than chance + 10 points."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import quiz as quiz_lib
from grader.quiz.model import Choice

QUIZ_DIR = Path(__file__).resolve().parent.parent / "quizzes"
SOURCES = [quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))]
SINGLE = [(s.chapter, q) for s in SOURCES for q in s.questions if q.kind == "single"]
STUDENTS = [f"student{i}" for i in range(40)]
NOTATION = re.compile(r"[=+−\-*/^²³√∑∏∂σφΦμβγλεαπθ()\[\]|≤≥<>·×∞]|\b(?:exp|log|sqrt|tanh|erf|Var|E)\b|\d")
ABSOLUTES = re.compile(r"\b(?:always|never|every|all|none|only|exactly|cannot|must|any|no)\b", re.I)

Rule = Callable[[list[Choice]], int]


def _by(key: Callable[[Choice], float], rank: int = 0) -> Rule:
    """Pick the choice at ``rank`` when sorted by ``key`` descending (ties: the first shown)."""
    return lambda shown: sorted(range(len(shown)), key=lambda i: (-key(shown[i]), i))[rank]


RULES: dict[str, Rule] = {
    "longest": _by(lambda c: len(c.text)),
    "second longest": _by(lambda c: len(c.text), 1),
    "most notation": _by(lambda c: len(NOTATION.findall(c.text))),
    "fewest absolutes": _by(lambda c: -len(ABSOLUTES.findall(c.text))),
    "always b": lambda shown: 1,
    "first choice": lambda shown: 0,
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_no_surface_rule_beats_chance_by_more_than_ten_points(rule: str) -> None:
    hits = trials = 0
    chance = 0.0
    for chapter, source in SINGLE:
        locked = quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(source.id)
        for student in STUDENTS:
            shown = list(quiz_lib.pose(locked, student).choices)
            hits += shown[RULES[rule](shown)].id == source.answer
            chance += 1 / len(shown)
            trials += 1
    assert hits / trials <= chance / trials + 0.10, f"'{rule}' scores {hits / trials:.0%} (chance {chance / trials:.0%})"
