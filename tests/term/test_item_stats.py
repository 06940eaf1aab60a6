"""Item statistics come out as a simulated class was made (tests/classgen.py: known abilities and items)."""

from __future__ import annotations

import pytest

from classgen import simulated_quiz_class
from grader.term import item_stats
from grader.term.item_stats import Response, fit_2pl

A = [0.8, 1.2, 1.6, 2.0, 1.0, 1.4]
B = [-1.0, -0.3, 0.0, 0.5, 1.0, 0.2]


def test_the_2pl_fit_finds_the_simulated_items_within_their_standard_errors() -> None:
    responses, _ = simulated_quiz_class(1500, A, B, seed=3)
    fit = fit_2pl(responses)
    assert fit is not None and [f.question for f in fit] == [f"q{j}" for j in range(len(A))]
    for item, a, b in zip(fit, A, B, strict=True):
        assert 0 < item.se_a < 0.3 and 0 < item.se_b < 0.3
        assert abs(item.a - a) < 3 * item.se_a, (item, a)
        assert abs(item.b - b) < 3 * item.se_b, (item, b)


def test_no_irt_fit_for_a_small_class() -> None:
    responses, _ = simulated_quiz_class(item_stats.IRT_MIN_STUDENTS - 1, A[:2], B[:2])
    assert fit_2pl(responses) is None


def test_the_unfair_variant_is_the_one_flagged() -> None:
    responses, _ = simulated_quiz_class(900, A, B, seed=5, unfair=(2, "v1", 1.0))
    flagged = [(s.question, v.variant) for s in item_stats.item_stats(responses) for v in s.variants if v.unfair]
    assert flagged == [("q2", "v1")]


def test_negative_discrimination_is_flagged() -> None:
    responses, _ = simulated_quiz_class(600, [1.5, 1.5, 1.5, -1.5], [0.0, -0.5, 0.5, 0.0], seed=7)
    stats = {s.question: s for s in item_stats.item_stats(responses)}
    assert [q for q, s in stats.items() if s.negative_discrimination] == ["q3"]
    assert all(stats[q].discrimination > 0.2 for q in ("q0", "q1", "q2"))  # type: ignore[operator]


def test_facility_and_the_distractors_with_their_misconception() -> None:
    responses, _ = simulated_quiz_class(800, [1.0], [0.0], seed=9, misconception_share=0.7)
    (stats,) = item_stats.item_stats(responses, {("q0", "m"): "variance for standard deviation"})
    right = sum(r.correct for r in responses) / len(responses)
    assert stats.facility == pytest.approx(right) and stats.answers == 800
    assert [d.choice for d in stats.distractors] == ["m", "z"]
    assert stats.distractors[0].misconception == "variance for standard deviation"
    assert stats.distractors[1].misconception is None
    assert stats.distractors[0].share / (1 - right) == pytest.approx(0.7, abs=0.06)
    assert stats.discrimination is None  # one question: no rest score


def test_discrimination_is_the_correlation_with_the_rest_score() -> None:
    rows = {"s1": (1, 1), "s2": (1, 0), "s3": (0, 0), "s4": (0, 1)}
    responses = [Response(s, f"q{j}", bool(x)) for s, xs in rows.items() for j, x in enumerate(xs)]
    stats = item_stats.item_stats(responses)
    assert [s.facility for s in stats] == [0.5, 0.5]
    assert stats[0].discrimination == pytest.approx(0.0)
