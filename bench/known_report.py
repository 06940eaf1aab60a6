"""Known submissions graded in-process, for bench/figures.py and the pictures' tests (tests/figures_util.py
re-exports them): the reference, and one mistake of each kind.

``graded(exercise_id, ns)`` grades a namespace live (hidden checks: expected
values computed here) or, with ``pack_dir``, on a case pack written from the
reference at the public seed (the handout's public checks), and returns the
ExerciseResult a report holds. ``KNOWN`` names the submissions the tests
draw: a correct one and a mistake for each kind of picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grader.mistakes import CATALOGUE, patched_namespace, reference_namespace
from grader.course.packs import public_seed, write_pack
from grader.student.engine.checks import CHECKS
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.engine.pack import PackExpected, load_pack, pack_path

from bench.in_process import grade_in_process, run_cases

# (exercise, mistake id or None for the reference, the picture kind its first failing check draws)
KNOWN: list[tuple[str, str | None, str]] = [
    ("normalization.BatchNorm1d", None, ""),
    ("normalization.LayerNorm", "ln-batch-axis", "elements"),  # 2-D: heat map, the error follows an axis
    ("normalization.BatchNorm1d", "bn-3d-stats-axis0", "elements"),  # 3-D: per-axis summary
    ("normalization.BatchNorm1d", "bn-biased-running-var", "trajectory"),
    ("optim.AdamW", "adamw-no-bias-correction", "trajectory"),
    ("init.kaiming_normal", "init-kaiming-variance-as-std", "histogram"),
    ("init.xavier_uniform", "init-uniform-bound-std", "histogram"),
    ("dropout.Dropout", "dropout-gaussian-mask", "histogram"),
    ("approximation.fit_function", "(a straight line)", "fit"),
    ("dropout.Dropout", "dropout-no-rescale", "histogram"),  # values: y / x against 1 / (1 - p)
    ("dropout.Dropout", "dropout-mask-reused", "masks"),  # fresh_mask: the two masks side by side
    ("linear.Linear", "linear-dW-transposed", "shapes"),  # dW of the other shape
    ("activations.Sigmoid", "sigmoid-grad-incomplete", "elements"),  # numgrad: your dx against your own forward
    ("activations.ReLU", "relu-inplace", "elements"),  # no_mutation: x after the call against before
]


def straight_line_fit(f: Any, n_hidden: int, rng: np.random.Generator, **_kw: Any) -> Any:
    """A fit_function that ignores the target's shape: the least-squares straight line through it."""
    x = np.linspace(0.0, 1.0, 101).reshape(-1, 1)
    slope, intercept = np.polyfit(x.ravel(), np.asarray(f(x)).ravel(), 1)
    return lambda z: slope * np.asarray(z, dtype=np.float64) + intercept


def namespace(exercise_id: str, mistake: str | None) -> Any:
    if mistake is None:
        return reference_namespace()
    if mistake == "(a straight line)":
        return patched_namespace("approximation", {"fit_function": straight_line_fit})
    return CATALOGUE[mistake].namespace


def exercise_result(exercise_id: str, checks: list[Any]) -> ExerciseResult:
    score = sum(c.score for c in checks)
    status = "passed" if all(c.passed for c in checks) else "failed"
    return ExerciseResult(exercise_id, status, score, sum(c.max_score for c in checks), checks)


def graded(exercise_id: str, mistake: str | None, pack_dir: Path | None = None) -> ExerciseResult:
    """The exercise graded live (hidden), or with ``pack_dir`` on its public case pack (written there once)."""
    ns = namespace(exercise_id, mistake)
    if pack_dir is None:
        return exercise_result(exercise_id, grade_in_process(exercise_id, ns))
    path = pack_path(pack_dir, exercise_id)
    if not path.exists():
        pack_dir.mkdir(parents=True, exist_ok=True)
        write_pack(pack_dir, exercise_id)
    seed = public_seed(exercise_id)
    student = run_cases(exercise_id, ns, seed)
    checks = CHECKS[exercise_id].evaluate(student, PackExpected(load_pack(path)), seed)
    return exercise_result(exercise_id, checks)


def known_report(pack_dir: Path | None = None, student: str = "ada") -> GradeReport:
    """One report holding every KNOWN submission (the same exercise may appear twice: different submissions)."""
    return GradeReport(student, [graded(e, m, pack_dir) for e, m, _ in KNOWN])
