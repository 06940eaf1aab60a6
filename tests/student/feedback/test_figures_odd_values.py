"""No student output crashes a check's statistics or its picture (found with Hypothesis).

A student's output reaches the grader as any bool, int or float array
(grader/student/engine/ops.py turns anything else into BadOutputError): a
scalar, an empty array, a wrong shape, inf, NaN, 1e308, a value a few ulps from
another. Whatever it is, the figure builders (figures.py) and their drawings
(drawing.py) return a figure, and the statistical checks of dropout and init
(their judges and pictures) return a failing verdict about the student's value:
never an exception inside the grader ("Too many bins for data range", found by
the mutant ``dropout:21``: ``self.rng.random(None)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checks_util import SEEDS, by_name, grade_in_process, reference_runs, variant_ns
from grader.student.engine.checks import CHECKS
from grader.student.engine.checks.init import StatCheck
from grader.student.engine.ops import ScriptResult
from grader.student.feedback import drawing, figures
from reference.dropout import Dropout

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, 2.0, 2.0000000000000004, 1e308, -1e308, 5e-324, np.nextafter(1.0, 2.0)]),
)
DTYPES = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int8, np.uint8, np.bool_])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


@st.composite
def odd_arrays(draw: Any) -> np.ndarray:
    """Any numeric array a student's code may return: scalars, empty, inf/NaN, huge, near-equal values."""
    dtype = np.dtype(draw(DTYPES))
    shape = draw(SHAPES)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return draw(hnp.arrays(np.float64, shape, elements=FLOATS)).astype(dtype)
    return draw(hnp.arrays(dtype, shape))


def drawn(figure: dict[str, Any] | None) -> None:
    """The figure drawn as the report draws it, hidden and not (no exception)."""
    if figure is not None:
        assert figure["summary"]
        drawing.figure_html(figure)
        drawing.figure_html(figures.hidden_view(figure))


@SETTINGS
@given(
    samples=odd_arrays(),
    bound=FLOATS,
    mean=FLOATS,
    std=FLOATS,
    kind=st.sampled_from(["normal", "uniform"]),
    with_density=st.booleans(),
)
def test_histogram_of_any_samples(
    samples: np.ndarray, bound: float, mean: float, std: float, kind: str, with_density: bool
) -> None:
    density = {"kind": kind, "mean": mean, "std": std} if with_density else None
    with np.errstate(all="ignore"):
        statistic = {
            "name": "mean",
            "value": float(np.mean(samples)) if samples.size else 0.0,
            "expected": mean,
            "low": mean - 1,
            "high": mean + 1,
        }
        drawn(figures.histogram_figure(samples, title="t", density=density, bounds=[bound], statistic=statistic))


@SETTINGS
@given(received=odd_arrays(), expected=odd_arrays())
def test_elements_and_shapes_of_any_arrays(received: np.ndarray, expected: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        drawn(figures.elements_figure(received, expected, 1e-6, 1e-9, title="t", key="y"))
        drawn(figures.elements_figure(received, np.zeros(received.shape), 1e-6, 1e-9, title="t", key="y"))
        drawn(figures.shapes_figure(received.shape, expected.shape, title="t", key="y"))


@SETTINGS
@given(received=odd_arrays())
def test_masks_fit_and_trajectory_of_any_arrays(received: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        drawn(figures.masks_figure([("a", received == 0), ("b", received)], title="t", summary="s"))
        grid = np.linspace(0.0, 1.0, received.size)
        drawn(figures.fit_figure(grid, received, np.sin(grid), title="t", full_marks_error=1e-3))
        drawn(figures.fit_figure(np.linspace(0.0, 1.0, 7), received, np.zeros(7), title="t", full_marks_error=1e-3))
        steps = {"m_1": received, "m_2": received}
        drawn(
            figures.trajectory_figure(
                steps,
                {k: np.zeros(received.shape) for k in steps},
                list(steps),
                1e-6,
                1e-9,
                title="t",
                carry=0.9,
                starts={"m": np.ones(received.shape)},
            )
        )


def test_histogram_of_values_a_few_ulps_apart() -> None:
    """The mutant dropout:21's y / x: every ratio 1 / (1 - p) give or take an ulp (the range 4e-16 wide)."""
    ratios = np.array([2.0, np.nextafter(2.0, 3.0), 2.0])
    figure = figures.histogram_figure(ratios, title="t", density=None, bounds=[2.0])
    assert sum(figure["counts"]) == 3 and figure["edges"][0] < 2.0 < figure["edges"][-1]


@pytest.mark.parametrize("exercise", ["dropout.Dropout", "init.kaiming_normal", "init.xavier_uniform"])
def test_statistical_checks_judge_any_output(exercise: str) -> None:
    """One output of every case replaced by an odd array, or by the case's input over a factor (a scalar mask:
    dropout:21's x * True / (1 - p)): each statistical check passes, or fails with a message and its picture is
    drawn."""
    plan = CHECKS[exercise].checked_plan(SEEDS[0])
    checks = [c for c in plan.checks if isinstance(c, StatCheck)]
    reference = reference_runs(exercise, SEEDS[0])
    inputs = {c.name: c.arrays for c in plan.cases}
    keys = sorted({k for r in reference.values() for k in r.outputs})

    @SETTINGS
    @given(value=odd_arrays(), factor=st.one_of(st.none(), FLOATS), which=st.integers(min_value=0))
    @example(value=np.zeros(()), factor=0.85, which=keys.index("y") if "y" in keys else 0)  # dropout:21, p = 0.15
    def judged(value: np.ndarray, factor: float | None, which: int) -> None:
        key = keys[which % len(keys)]

        def res(case: str) -> ScriptResult:
            r = reference[case]
            x = inputs[case].get("x")
            odd = value if factor is None or x is None else x / factor
            return ScriptResult({k: odd if k == key else v for k, v in r.outputs.items()}, r.error, r.warnings)

        for check in checks:
            assert check.judge is not None
            with np.errstate(all="ignore"):
                verdict = check.judge(res)
                if not verdict.ok:
                    assert verdict.message
                    drawn(verdict.figure() if verdict.figure is not None else None)

    judged()


class ScalarMask(Dropout):
    """The mutant dropout:21: the mask drawn as ``self.rng.random(None)``, one number for the whole array."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not self.training:
            self.keep = None
            return np.asarray(x, dtype=np.float64).copy()
        self.keep = np.asarray(self.rng.random(None) >= self.p)  # a 0-d mask: one draw for every element
        return x * self.keep / (1.0 - self.p)


def test_a_scalar_mask_fails_the_checks_and_the_report_stands() -> None:
    results = by_name(grade_in_process("dropout.Dropout", variant_ns("dropout", Dropout=ScalarMask)))
    assert not results["values"].passed and "no element was dropped" in results["values"].message
    assert results["values"].figure is not None and results["values"].figure["kind"] == "histogram"
    assert results["eval"].passed


def test_a_constant_ratio_near_the_largest_float_is_said_not_crashed_on() -> None:
    """Ratios of 1.7e308 at every step (the class the fuzzing above found): their mean as (lo + hi) / 2 overflowed
    to inf, which two digits cannot say, and the constant-factor sentence formatted None."""
    from grader.student.feedback.figures import ratio_reading

    said = ratio_reading({"series": [{"label": "w", "ratio": [1.7e308, 1.7e308]}], "ratio_of": "the step"})
    assert "one constant factor 1.7e+308 at every step" in said
