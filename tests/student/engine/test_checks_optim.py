"""Hidden checks of optim.SGD and optim.AdamW: several steps against the reference, in place."""

from __future__ import annotations

import numpy as np
import pytest

from checks_util import SEEDS, assert_full_marks, assert_named, by_name, failed, grade_in_process, variant_ns
from grader.mistakes import CATALOGUE
from grader.mistakes.optim import PlainAdamW, PlainSGD

EXERCISES = ["optim.SGD", "optim.AdamW"]
MISTAKES = [(m.exercise, m.id) for m in CATALOGUE.values() if m.exercise in EXERCISES]


@pytest.mark.parametrize("exercise", EXERCISES)
@pytest.mark.parametrize("seed", SEEDS)
def test_reference_full_marks_and_stable(exercise: str, seed: int) -> None:
    first = assert_full_marks(exercise, seed=seed)
    second = assert_full_marks(exercise, seed=seed)
    assert [r.to_json() for r in first] == [r.to_json() for r in second]


def test_correct_variants_written_differently_pass() -> None:
    assert_full_marks("optim.SGD", variant_ns("optim", SGD=PlainSGD))
    assert_full_marks("optim.AdamW", variant_ns("optim", AdamW=PlainAdamW))


@pytest.mark.parametrize("exercise,mistake_id", MISTAKES)
def test_every_mistake_is_named(exercise: str, mistake_id: str) -> None:
    for seed in SEEDS:
        assert_named(exercise, mistake_id, seed)


def test_sgd_checks_separate_momentum_and_weight_decay() -> None:
    dampened = failed(grade_in_process("optim.SGD", CATALOGUE["sgd-momentum-dampened"].namespace))
    assert set(dampened) == {"momentum", "momentum_wd"}
    assert "first significant difference" in dampened["momentum"].message
    decoupled = failed(grade_in_process("optim.SGD", CATALOGUE["sgd-decoupled-wd"].namespace))
    assert set(decoupled) == {"momentum_wd"}


def test_not_in_place_only_fails_in_place() -> None:
    result = failed(grade_in_process("optim.SGD", CATALOGUE["sgd-not-in-place"].namespace))
    assert set(result) == {"in_place"}
    assert "rebound" in result["in_place"].message


def test_tiny_gradients_make_eps_matter() -> None:
    inside = failed(grade_in_process("optim.AdamW", CATALOGUE["adamw-eps-inside-sqrt"].namespace))
    assert "tiny_grads" in inside
    unscaled = failed(grade_in_process("optim.AdamW", CATALOGUE["adamw-eps-unscaled"].namespace))
    assert "tiny_grads" in unscaled and "1e-10" in unscaled["tiny_grads"].message


def test_decay_after_update_is_caught_at_float64_tolerance() -> None:
    result = failed(grade_in_process("optim.AdamW", CATALOGUE["adamw-decay-after-update"].namespace))
    assert {"defaults", "weight_decay"} <= set(result)


class GradMutatingSGD(PlainSGD):
    """Correct updates, but scales the caller's gradients in place."""

    def step(self, params, grads):
        super().step(params, grads)
        for g in grads.values():
            g *= 0.5


def test_gradients_must_not_change() -> None:
    result = failed(grade_in_process("optim.SGD", variant_ns("optim", SGD=GradMutatingSGD)))
    assert set(result) == {"in_place"} and "modified the gradient" in result["in_place"].message


class HalfLrAdamW(PlainAdamW):
    """Uses lr / 2: no known mistake."""

    def update(self, param, g, st, t):
        lr, self.lr = self.lr, self.lr / 2
        try:
            return super().update(param, g, st, t)
        finally:
            self.lr = lr


def test_unrelated_wrong_update_names_no_catalogued_mistake() -> None:
    """lr halved: no catalogue entry, but the generic family that reruns the reference finds the setting."""
    result = failed(grade_in_process("optim.AdamW", variant_ns("optim", AdamW=HalfLrAdamW)))
    assert result and {r.misconception for r in result.values()} <= {None, "generic-param"}
    assert any("as if lr were halved" in r.message for r in result.values())


class StubSGD(PlainSGD):
    def step(self, params, grads):
        raise NotImplementedError("optim.SGD.step")


def test_not_implemented() -> None:
    results = grade_in_process("optim.SGD", variant_ns("optim", SGD=StubSGD))
    assert sum(r.score for r in results) == 0
    assert "not implemented" in by_name(results)["plain"].message
    assert np.isfinite(sum(r.max_score for r in results))


ODD_OUTPUTS = [
    lambda p: 0.0,
    lambda p: np.zeros(3),
    lambda p: p[:1],
    lambda p: p.astype(int),
    lambda p: np.full(p.shape, np.nan),
    lambda p: p.T,
]


@pytest.mark.parametrize("odd", range(len(ODD_OUTPUTS)))
def test_odd_updates_fail_cleanly(odd: int) -> None:
    f = ODD_OUTPUTS[odd]

    class Odd(PlainAdamW):
        def step(self, params, grads):
            for key in params:
                params[key] = f(params[key])

    results = grade_in_process("optim.AdamW", variant_ns("optim", AdamW=Odd))
    assert sum(r.score for r in results) == 0 and all(r.message for r in results)
