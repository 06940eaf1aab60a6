"""The checks of every exercise: ``CHECKS[exercise_id] -> ExerciseChecks``.

Each topic module ``grader/student/engine/checks/<topic>.py`` defines ``CHECKS: list[ExerciseChecks]``
(instances); this package assembles them by id, in catalogue order. Parent side
only (the sandboxed worker never imports it). The checks hold no expected value:
they build cases from a seed and judge against an ``Expected`` (live reference
runs for the hidden checks, a case pack for the handout's public checks).
"""

from __future__ import annotations

from grader.student.engine.catalogue import EXERCISES
from grader.student.engine.checks import (
    activations,
    approximation,
    blocks,
    dropout,
    gradcheck,
    init,
    kernels,
    linear,
    normalization,
    optim,
)
from grader.student.engine.checks.plans import ExerciseChecks

_TOPIC_MODULES = [activations, linear, normalization, dropout, init, optim, gradcheck, blocks, approximation, kernels]


def _assemble() -> dict[str, ExerciseChecks]:
    """Every topic's checks by exercise id, in catalogue order; one definition per id."""
    found: dict[str, ExerciseChecks] = {}
    for module in _TOPIC_MODULES:
        for item in module.CHECKS:
            if item.id in found:
                raise ValueError(f"two check definitions for {item.id}")
            found[item.id] = item
    return {e: found[e] for e in EXERCISES if e in found}


CHECKS: dict[str, ExerciseChecks] = _assemble()

__all__ = ["CHECKS", "ExerciseChecks"]
