"""Hidden checks of the eight activations (elementwise layers of any input shape).

Every activation gets the same plan (10 points), with inputs drawn from the
exercise seed:

- forward on a 1-D, 2-D, 3-D and 4-D input (distinct sizes on every axis) and
  on a batch of one; backward (dx) on the 2-D, 3-D and 4-D inputs;
- exact zeros (the derivative convention at 0) and tiny values (+-1e-8);
- large magnitudes (|x| up to 1e4): finite values and no overflow warning;
- a non-default hyper-parameter (LeakyReLU slope, ELU alpha, SiLU beta, GELU
  approximate="tanh", per-channel PReLU alpha), or a wide input range for
  the activations without one;
- the student's dx against central differences of the student's forward;
- input not mutated; outputs float64 of the input's shape;
- PReLU only: its constructor, and a per-channel case of shape (2, 4, 4) whose
  last axis also has C entries, where alpha broadcast on the last axis gives
  wrong values instead of a broadcast error (so the mistake can be named).

Tolerances: rtol 1e-6 and atol 1e-8 * max(1, max|expected|) (grader.student.engine.checks.context),
which a float64 implementation meets by six orders of magnitude; inputs fed to
central differences stay 0.05 away from the kinks at 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.engine.checks.kinds import Compare
from grader.student.engine.checks.plans import ExerciseChecks, LayerPlan, Plan, away_from_zero
from grader.student.engine.ops import Case

# Points per check; the activations with a constructor check (PReLU) take them
# from forward_1d and forward_batch1.
POINTS: dict[str, float] = {
    "forward_1d": 0.5,
    "forward_2d": 1.0,
    "forward_3d": 0.5,
    "forward_4d": 0.5,
    "forward_batch1": 0.5,
    "backward_2d": 1.0,
    "backward_3d": 0.5,
    "backward_4d": 0.5,
    "forward_zeros": 0.5,
    "backward_zeros": 0.5,
    "forward_large": 0.75,
    "backward_large": 0.25,
    "forward_hyper": 0.75,
    "backward_hyper": 0.5,
    "numgrad": 0.75,
    "no_mutation": 0.5,
    "shape_dtype": 0.25,
    "backward_twice": 0.25,
}


class ActivationChecks(ExerciseChecks):
    """The shared plan of an elementwise activation; subclasses set the class and hyper-parameters."""

    cls: str = ""
    hyper_what: str = "a wide input range (x ~ N(0, 6^2))"
    hyper_scale: float = 6.0  # standard deviation of the hyper case's input
    zero_note: str = ""  # the derivative convention at 0, for piecewise activations
    hyper_kwargs: dict[str, Any] = {}  # constructor kwargs of the hyper-parameter case
    grads: list[str] = []
    points: dict[str, float] = POINTS

    def __init__(self, cls: str) -> None:
        self.cls = cls
        self.id = cls

    def base_params(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Parameters set on every default-constructed layer (PReLU: a random alpha)."""
        return {}

    def hyper(self, rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Constructor kwargs and parameters of the hyper-parameter case (default: ``hyper_kwargs``, no parameters)."""
        return dict(self.hyper_kwargs), {}

    def extra(self, plan: LayerPlan) -> None:
        """Exercise-specific cases and checks (PReLU's constructor)."""

    def plan(self, seed: int) -> Plan:
        p = LayerPlan(self.cls, seed)
        rng = p.rng
        pts = self.points
        grads = self.grads
        base = self.base_params(rng)

        def case(name: str, x: np.ndarray, **kw: Any) -> str:
            params = kw.pop("params", base)
            return p.layer(name, x, params=params, grads=grads, **kw)

        case("vec", away_from_zero(rng, (7,)), backward=False)
        case("mat", away_from_zero(rng, (4, 5)), numgrad=["x"] + grads, twice=True)
        # Central differences on the backward cases away from the kinks: where the forward is wrong, a
        # gradient that is right for it passes its backward check (one bug costs once).
        case("cube", away_from_zero(rng, (2, 3, 4)), numgrad=["x"] + grads)
        case("t4", away_from_zero(rng, (2, 3, 4, 5)), numgrad=["x"] + grads)
        case("batch1", away_from_zero(rng, (1, 6)), backward=False)
        zeros = rng.standard_normal((3, 8))
        zeros[:, :3] = 0.0
        zeros[0, 3:5] = [1e-8, -1e-8]
        zeros[1, 3:5] = [-3e-9, 2e-9]
        case("zeros", zeros)
        large = rng.uniform(-1e4, 1e4, size=(3, 6))
        large[0, :2] = [1e4, -1e4]
        large[1, :3] = [-745.5, 710.0, -40.0]
        case("large", large)
        shape = (3, 4, 5)
        kwargs, params = self.hyper(rng, shape)
        hyper_params = dict(base)
        hyper_params.update(params)
        case(
            "hyper",
            self.hyper_scale * away_from_zero(rng, shape),
            kwargs=kwargs,
            params=hyper_params,
            numgrad=["x"] + grads,
        )

        p.forward_check("forward_1d", pts["forward_1d"], "vec", "forward on a 1-D input of shape (7,)")
        p.forward_check("forward_2d", pts["forward_2d"], "mat", "forward on x of shape (4, 5)")
        p.forward_check("forward_3d", pts["forward_3d"], "cube", "forward on x of shape (2, 3, 4)")
        p.forward_check("forward_4d", pts["forward_4d"], "t4", "forward on x of shape (2, 3, 4, 5)")
        p.forward_check("forward_batch1", pts["forward_batch1"], "batch1", "forward on a batch of one, shape (1, 6)")
        p.backward_check("backward_2d", pts["backward_2d"], "mat", "backward on x of shape (4, 5)", grads)
        p.backward_check("backward_3d", pts["backward_3d"], "cube", "backward on x of shape (2, 3, 4)", grads)
        p.backward_check("backward_4d", pts["backward_4d"], "t4", "backward on x of shape (2, 3, 4, 5)", grads)
        p.forward_check("forward_zeros", pts["forward_zeros"], "zeros", "forward on exact zeros and tiny values (1e-8)")
        p.backward_check(
            "backward_zeros",
            pts["backward_zeros"],
            "zeros",
            f"backward at exact zeros and tiny values (1e-8){self.zero_note}",
            grads,
        )
        p.forward_check(
            "forward_large",
            pts["forward_large"],
            "large",
            "forward on large magnitudes (|x| up to 1e4), which must neither overflow nor warn",
            match_warnings=("forward",),
        )
        p.backward_check(
            "backward_large",
            pts["backward_large"],
            "large",
            "backward on large magnitudes (|x| up to 1e4), which must neither overflow nor warn",
            grads,
            match_warnings=("backward",),
        )
        p.forward_check("forward_hyper", pts["forward_hyper"], "hyper", f"forward with {self.hyper_what}")
        p.backward_check("backward_hyper", pts["backward_hyper"], "hyper", f"backward with {self.hyper_what}", grads)
        p.consistency_check("numgrad", pts["numgrad"], "mat", "x of shape (4, 5)")
        p.no_mutation_check("no_mutation", pts["no_mutation"])
        p.shape_dtype_check("shape_dtype", pts["shape_dtype"])
        p.backward_twice_check("backward_twice", pts["backward_twice"], "mat")
        self.extra(p)
        return p


PIECEWISE_NOTE = " (at x = 0 the derivative is the one of the x <= 0 branch)"


class PiecewiseChecks(ActivationChecks):
    """ReLU and friends: the derivative at exactly 0 is the x <= 0 branch's."""

    zero_note = PIECEWISE_NOTE


class LeakyReLUChecks(PiecewiseChecks):
    hyper_what = "negative_slope = 0.2 (not the default 0.01)"
    hyper_scale = 1.0
    hyper_kwargs = {"negative_slope": 0.2}


class ELUChecks(PiecewiseChecks):
    hyper_what = "alpha = 1.7 (not the default 1.0)"
    hyper_scale = 1.0
    hyper_kwargs = {"alpha": 1.7}


class SiLUChecks(ActivationChecks):
    hyper_what = "beta = 1.8 (Swish; not the default 1.0)"
    hyper_scale = 1.0
    hyper_kwargs = {"beta": 1.8}


class GELUChecks(ActivationChecks):
    hyper_what = 'approximate="tanh"'
    hyper_scale = 1.0
    hyper_kwargs = {"approximate": "tanh"}
    # The tanh form is half of the exercise: its backward weighs as much as the exact form's main case.
    points = dict(POINTS, forward_1d=0.25, forward_batch1=0.25, backward_hyper=1.0)


class PReLUChecks(PiecewiseChecks):
    """PReLU: a random shared alpha everywhere; a per-channel alpha (axis 1) in the hyper case; dalpha."""

    hyper_what = "one alpha per channel (num_parameters = 4, axis 1 of a (3, 4, 5) input)"
    hyper_scale = 1.0
    grads = ["alpha"]
    points = dict(
        POINTS,
        forward_batch1=0.25,
        no_mutation=0.25,
        constructor=0.5,
        forward_hyper=0.5,
        backward_hyper=0.25,
        forward_square=0.25,
        backward_square=0.25,
    )
    # A per-channel input whose last axis also has C entries: alpha (C,) broadcast on the last axis
    # instead of axis 1 raises nothing there, so its wrong values can be compared and the mistake named.
    square_shape = (2, 4, 4)

    def base_params(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"alpha": rng.uniform(0.05, 0.6, size=1)}

    def hyper(self, rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        channels = shape[1]
        return {"num_parameters": channels}, {"alpha": rng.uniform(0.05, 0.6, size=channels)}

    def extra(self, plan: LayerPlan) -> None:
        rng = plan.rng
        channels = self.square_shape[1]
        plan.layer(
            "square",
            away_from_zero(rng, self.square_shape),
            kwargs={"num_parameters": channels},
            params={"alpha": rng.uniform(0.05, 0.6, size=channels)},
            grads=self.grads,
        )
        what = f"one alpha per channel on x of shape {self.square_shape} (alpha on axis 1, not on the last axis)"
        plan.forward_check("forward_square", self.points["forward_square"], "square", f"forward with {what}")
        plan.backward_check(
            "backward_square", self.points["backward_square"], "square", f"backward with {what}", self.grads
        )
        script: list[dict[str, Any]] = [
            {"op": "new", "var": "m", "cls": self.cls, "kwargs": {"num_parameters": 3, "init": 0.1}},
            {"op": "get", "var": "m", "attr": "alpha", "out": "alpha"},
        ]
        plan.add_case(Case("constructor", script, {}))
        plan.add(
            Compare(
                "constructor",
                self.points["constructor"],
                case="constructor",
                keys=["alpha"],
                what="PReLU(num_parameters=3, init=0.1).alpha",
                diagnose=False,
                requires="mat",
            )
        )


CHECKS: list[ExerciseChecks] = [
    ActivationChecks("activations.Sigmoid"),
    ActivationChecks("activations.Tanh"),
    PiecewiseChecks("activations.ReLU"),
    LeakyReLUChecks("activations.LeakyReLU"),
    PReLUChecks("activations.PReLU"),
    ELUChecks("activations.ELU"),
    GELUChecks("activations.GELU"),
    SiLUChecks("activations.SiLU"),
]
