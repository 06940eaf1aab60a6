"""Hidden checks of the six normalisation layers.

Inputs are drawn from the exercise seed with a different mean and spread per
channel (BatchNorm) or per row / group (the others), so that centring, the
axes and the affine parameters all matter; gamma and beta are set to random
values. Every layer is checked on:

- its constructor contract (parameter and buffer shapes and initial values);
- forward and backward (dx and every d<param>) on several shapes with distinct
  sizes on every axis, including a batch of one where it is defined, and for
  LayerNorm and RMSNorm (any leading axes, by the contract) 2-D, 3-D and 4-D input; for
  BatchNorm also a forward whose last axis has C entries, where (C,) vectors
  used without reshaping give wrong values instead of a broadcast error;
- "tiny" inputs whose spread is comparable to sqrt(eps), where eps outside the
  square root shows, with one normalised unit of exact zeros (var = 0, where a
  missing eps gives 0 / 0); large magnitudes (~1e4);
- the student's dx / d<param> against central differences of their forward;
- train versus eval: BatchNorm's running statistics over three training steps
  with momentum 0.3 (initial buffers zeros and ones, the unbiased m/(m-1)
  variance); the 3-D/4-D update against the student's own update on the same
  values laid out as (m, C); eval mode with running statistics set beforehand
  (so eval is judged on its own, whatever training did), using and not
  updating them, backward in eval; the other layers identical in both modes;
- no mutation of the input; float64 outputs of the right shape.

Tolerances: rtol 1e-6 and atol 1e-8 * max(1, max|expected|) (grader.student.engine.checks.context):
a float64 implementation is ~1e-12 off; eps outside the square root on the tiny
inputs, a biased/unbiased variance mix-up (factor m/(m-1) >= 1.05 here) or a
wrong axis are off by 1e-3 or more.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.engine.checks.context import ATOL, RTOL, Context, error_text
from grader.student.engine.checks.kinds import Compare, Custom, Raises, own_figure, Outcome
from grader.student.engine.checks.plans import ExerciseChecks, LayerPlan, Plan
from grader.student.engine.compare import compare, scale_of
from grader.student.engine.ops import Case

MOMENTUM = 0.3
TRAIN_STEPS = 3
TINY_SCALES = (1e-4, 1e-3, 1e-2, 1.0)


def _stat_shape(shape: tuple[int, ...], axis: int | None) -> tuple[int, ...]:
    """The shape of per-index statistics: ``shape`` kept on ``axis``, 1 elsewhere (None: every axis but the last)."""
    if axis is None:
        return shape[:-1] + (1,)
    return tuple(n if a == axis else 1 for a, n in enumerate(shape))


def spread(rng: np.random.Generator, shape: tuple[int, ...], axis: int | None) -> np.ndarray:
    """x = offset + scale * N(0, 1), one offset in U(-2, 2) and scale in U(0.5, 2) per index of ``axis``.

    ``axis=None``: per row, i.e. per index of every axis but the last.
    """
    z = rng.standard_normal(shape)
    stat_shape = _stat_shape(shape, axis)
    offset = rng.uniform(-2.0, 2.0, size=stat_shape)
    scale = rng.uniform(0.5, 2.0, size=stat_shape)
    return offset + scale * z


def shrink(x: np.ndarray, axis: int | None, scales: tuple[float, ...] = TINY_SCALES) -> np.ndarray:
    """x times ``scales`` (cycled) along ``axis`` (None: per row): tiny samples where eps matters."""
    stat_shape = _stat_shape(x.shape, axis)
    factors = np.resize(np.asarray(scales, dtype=np.float64), int(np.prod(stat_shape))).reshape(stat_shape)
    return x * factors


def affine(rng: np.random.Generator, shape: tuple[int, ...], beta: bool = True) -> dict[str, np.ndarray]:
    """gamma in +-U(0.5, 1.5) (random signs) and beta ~ N(0, 1)."""
    gamma = rng.uniform(0.5, 1.5, size=shape) * np.where(rng.random(shape) < 0.2, -1.0, 1.0)
    params = {"gamma": gamma}
    if beta:
        params["beta"] = rng.standard_normal(shape)
    return params


def constructor_case(
    cls: str, args: list[Any], kwargs: dict[str, Any], attrs: list[str], name: str = "constructor"
) -> Case:
    """new m = cls(*args, **kwargs); record each attr."""
    script: list[dict[str, Any]] = [{"op": "new", "var": "m", "cls": cls, "args": args, "kwargs": kwargs}]
    script += [{"op": "get", "var": "m", "attr": a, "out": a} for a in attrs]
    return Case(name, script, {})


# --------------------------------------------------------------------------- BatchNorm


class BatchNormChecks(ExerciseChecks):
    """BatchNorm1d / BatchNorm2d: shapes differ, the plan is the same."""

    def __init__(
        self,
        cls: str,
        main: tuple[int, ...],
        second: tuple[int, ...],
        batch1: tuple[int, ...],
        running_shape: tuple[int, ...],
        raise_shape: tuple[int, ...],
        second_what: str,
        square: tuple[int, ...],
    ) -> None:
        self.id = cls
        self.main, self.second, self.batch1 = main, second, batch1
        self.running_shape, self.raise_shape = running_shape, raise_shape
        self.second_what = second_what
        self.square = square  # last axis of size C: (C,) vectors broadcast on it raise nothing

    def plan(self, seed: int) -> Plan:
        p = LayerPlan(self.id, seed)
        rng = p.rng
        C = self.main[1]
        grads = ["gamma", "beta"]
        p.add_case(constructor_case(self.id, [C], {}, ["gamma", "beta", "running_mean", "running_var"]))

        def bn(name: str, x: np.ndarray, **kw: Any) -> str:
            kw.setdefault("kwargs", {"num_features": C})
            return p.layer(name, x, params=affine(rng, (C,)), grads=grads, **kw)

        bn("main", spread(rng, self.main, 1), numgrad=["x", "gamma", "beta"], twice=True)
        # The 3-D/4-D running update is judged against the student's own update on the same values laid out
        # as (m, C) (BatchNorm1d) or (m, C, 1, 1) (BatchNorm2d): the axes are tested here, the variance
        # convention and the momentum only by running_mean / running_var (one bug costs once).
        x_second = spread(rng, self.second, 1)
        tail = (1, 1) if len(self.second) == 4 else ()  # BatchNorm2d takes 4-D input only
        flat = np.moveaxis(x_second, 1, -1).reshape((-1, C) + tail)
        flat_ops = [
            {"op": "new", "var": "flat", "cls": self.id, "args": [C], "kwargs": {"momentum": MOMENTUM}},
            {"op": "call", "var": "flat", "method": "forward", "args": [{"array": "x_flat"}]},
            {"op": "get", "var": "flat", "attr": "running_mean", "out": "flat_running_mean"},
            {"op": "get", "var": "flat", "attr": "running_var", "out": "flat_running_var"},
        ]
        # Central differences on every backward case: where the forward is wrong, a gradient that is right
        # for it passes its backward check (one bug costs once).
        bn(
            "second",
            x_second,
            kwargs={"num_features": C, "momentum": MOMENTUM},
            after_forward=["running_mean", "running_var"],
            prelude=flat_ops,
            extra_arrays={"x_flat": flat},
            numgrad=["x", "gamma", "beta"],
        )
        bn("batch1", spread(rng, self.batch1, 1), numgrad=["x", "gamma", "beta"])
        tiny = shrink(spread(rng, self.main, 1), 1)
        tiny[:, -1] = 0.0  # one channel of exact zeros: var = 0, only eps keeps 0 / 0 away
        bn("tiny", tiny, backward=False)
        bn("large", 1e4 * spread(rng, self.main, 1), backward=False)

        # Running statistics over TRAIN_STEPS training steps with momentum 0.3.
        running: list[dict[str, Any]] = [
            {"op": "new", "var": "m", "cls": self.id, "args": [C], "kwargs": {"momentum": MOMENTUM}},
        ]
        arrays: dict[str, np.ndarray] = {}
        for step in range(1, TRAIN_STEPS + 1):
            arrays[f"x{step}"] = spread(rng, self.running_shape, 1)
            running += [
                {"op": "call", "var": "m", "method": "forward", "args": [{"array": f"x{step}"}]},
                {"op": "get", "var": "m", "attr": "running_mean", "out": f"running_mean_{step}"},
                {"op": "get", "var": "m", "attr": "running_var", "out": f"running_var_{step}"},
            ]
        p.add_case(Case("running", running, arrays))

        # Eval with running statistics set directly (as after loading a model): eval is judged on its own,
        # whatever the training updates did. One channel has a running variance of 1e-4, where eps matters.
        running_mean = rng.uniform(-2.0, 2.0, size=C)
        running_var = rng.uniform(0.5, 3.0, size=C)
        running_var[-1] = 1e-4
        buffers = [
            {"op": "set", "var": "m", "attr": "running_mean", "value": {"array": "set_running_mean"}},
            {"op": "set", "var": "m", "attr": "running_var", "value": {"array": "set_running_var"}},
        ]
        bn(
            "eval",
            spread(rng, self.running_shape, 1),
            kwargs={"num_features": C, "momentum": MOMENTUM},
            mode="eval",
            prelude=buffers,
            extra_arrays={"set_running_mean": running_mean, "set_running_var": running_var},
            after_forward=["running_mean", "running_var"],
            numgrad=["x", "gamma", "beta"],
        )

        raises: list[dict[str, Any]] = [
            {"op": "new", "var": "m", "cls": self.id, "args": [C]},
            {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}]},
        ]
        p.add_case(Case("batch_of_one_value", raises, {"x": rng.standard_normal(self.raise_shape)}))
        # The last axis has C entries too: statistics or gamma/beta of shape (C,) used without reshaping
        # broadcast on that axis without an error, so the wrong values show (and the mistake is named).
        bn("square", spread(rng, self.square, 1), backward=False)

        main_what = f"training forward on x of shape {self.main}"
        p.add(
            Compare(
                "constructor",
                0.5,
                case="constructor",
                keys=["gamma", "beta", "running_mean", "running_var"],
                what=f"gamma (ones), beta (zeros), running_mean (zeros), running_var (ones) of {self.id}({C})",
                diagnose=False,
                requires="main",
            )
        )
        p.forward_check("forward", 1.0, "main", main_what)
        p.forward_check("forward_second", 0.5, "second", f"training forward on {self.second_what}")
        p.forward_check(
            "forward_square",
            0.25,
            "square",
            f"training forward on x of shape {self.square} (last axis of size C: (C,) vectors must be"
            " reshaped to the channel axis 1)",
        )
        p.forward_check("forward_batch1", 0.25, "batch1", f"training forward on a batch of one, shape {self.batch1}")
        p.forward_check(
            "forward_tiny",
            0.75,
            "tiny",
            "training forward on channels of spread 1e-4 to 1e-2 and one of exact zeros (eps = 1e-5 matters there)",
        )
        p.forward_check("forward_large", 0.25, "large", "training forward on magnitudes around 1e4")
        p.backward_check("backward", 1.0, "main", f"training backward on x of shape {self.main}", grads)
        p.backward_check("backward_second", 0.75, "second", f"training backward on {self.second_what}", grads)
        p.consistency_check("numgrad", 0.25, "main", f"x of shape {self.main}")
        p.backward_twice_check("backward_twice", 0.25, "main")
        # their pictures show, per step, what the running average takes in (x_t - (1 - momentum) x_(t-1)),
        # yours over expected, from the buffers' initial zeros and ones
        p.add(
            Compare(
                "running_mean",
                0.75,
                case="running",
                keys=[f"running_mean_{s}" for s in range(1, TRAIN_STEPS + 1)],
                what=f"running_mean after each of {TRAIN_STEPS} training steps, momentum {MOMENTUM}",
                carry=1.0 - MOMENTUM,
                start={"running_mean": 0.0},
            )
        )
        p.add(
            Compare(
                "running_var",
                0.75,
                case="running",
                keys=[f"running_var_{s}" for s in range(1, TRAIN_STEPS + 1)],
                what=f"running_var (unbiased batch variance) after each of {TRAIN_STEPS} training steps,"
                f" momentum {MOMENTUM}",
                carry=1.0 - MOMENTUM,
                start={"running_var": 1.0},
            )
        )
        p.add(Custom("running_stats_second", 0.25, fn=lambda ctx: _second_stats(ctx, self.second_what)))
        p.forward_check(
            "eval_forward",
            0.75,
            "eval",
            "eval forward with running_mean and running_var set beforehand (it normalises with them,"
            " one channel has running_var 1e-4)",
        )
        p.add(
            Compare(
                "eval_no_update",
                0.5,
                case="eval",
                keys=["running_mean", "running_var"],
                what="running_mean and running_var after an eval forward (eval must leave them as they were)",
            )
        )
        p.backward_check("eval_backward", 0.5, "eval", "backward in eval mode", grads)
        p.add(
            Raises(
                "batch_of_one_value",
                0.25,
                case="batch_of_one_value",
                exc_type="ValueError",
                what=f"training forward on x of shape {self.raise_shape} (one value per channel:"
                " the unbiased variance is undefined)",
            )
        )
        p.no_mutation_check("no_mutation", 0.25)
        p.shape_dtype_check("shape_dtype", 0.25)
        return p


def _second_stats(ctx: Context, what: str) -> Outcome:
    """The running statistics after one step on a 3-D/4-D input, judged by their axes alone.

    Right when they equal the reference's, or the student's own running statistics
    after one step on the same values laid out as (m, C) (or (m, C, 1, 1)): then
    any difference from the reference is the update rule's, charged by
    running_mean / running_var, not the axes'.
    """
    s = ctx.student_result("second")
    keys = ["running_mean", "running_var"]
    got = [s.outputs.get(k) for k in keys]
    if any(g is None for g in got):
        return False, f"running statistics after one step on {what}: {error_text(s.error)}", None
    own = [s.outputs.get(f"flat_{k}") for k in keys]
    if all(o is not None for o in own) and all(
        compare(g, o, RTOL, ATOL * scale_of(o)).ok for g, o in zip(got, own, strict=True)
    ):
        return True, "", None
    for key, value, mine in zip(keys, got, own, strict=True):
        expected = ctx.reference_output("second", key)
        cmp = compare(value, expected, RTOL, ATOL * scale_of(expected))
        if not cmp.ok:
            # the picture: against the student's own update on the same values laid out as (m, C), which is what
            # the axes alone decide (the reference's values are hidden where this runs live)
            figure = (
                None
                if mine is None
                else own_figure(
                    value,
                    mine,
                    RTOL,
                    ATOL * scale_of(mine),
                    f"{key} after one step on {what}",
                    key,
                    f"your own {key} after the same values laid out as (m, C)",
                )
            )
            return (
                False,
                f"running statistics after one step on {what} (statistics over every axis but 1): {key}: {cmp.message}",
                ctx.diagnose("second", keys),
                figure,
            )
    return True, "", None


# --------------------------------------------------------------------------- per-sample norms


class SampleNormChecks(ExerciseChecks):
    """LayerNorm, RMSNorm, GroupNorm, InstanceNorm2d: per-sample statistics, same in train and eval.

    ``shapes`` is a list of (case name, shape, constructor kwargs, what, forward points,
    backward points); the first one also gets the central-difference check.
    """

    def __init__(
        self,
        cls: str,
        ctor: dict[str, Any],
        ctor_attrs: list[str],
        param_shape: tuple[int, ...],
        beta: bool,
        shapes: list[tuple[str, tuple[int, ...], dict[str, Any], str, float, float]],
        stat_axis: int | None,
        tiny_axis: int | None,
        points: dict[str, float],
        zero_unit: tuple[Any, ...],
        raises: tuple[dict[str, Any], str] | None = None,
        extra_ctor: tuple[dict[str, Any], list[str]] | None = None,
    ) -> None:
        self.id = cls
        self.ctor, self.ctor_attrs, self.param_shape, self.beta = ctor, ctor_attrs, param_shape, beta
        self.shapes, self.stat_axis, self.tiny_axis, self.points = shapes, stat_axis, tiny_axis, points
        self.raises, self.extra_ctor, self.zero_unit = raises, extra_ctor, zero_unit

    def plan(self, seed: int) -> Plan:
        p = LayerPlan(self.id, seed)
        rng = p.rng
        pts = self.points
        grads = ["gamma", "beta"] if self.beta else ["gamma"]
        constructor = constructor_case(self.id, [], self.ctor, self.ctor_attrs)
        ctor_keys = list(self.ctor_attrs)
        if self.extra_ctor is not None:
            kwargs, attrs = self.extra_ctor
            constructor.script.append({"op": "new", "var": "m2", "cls": self.id, "kwargs": kwargs})
            constructor.script += [{"op": "get", "var": "m2", "attr": a, "out": f"{a}_2"} for a in attrs]
            ctor_keys += [f"{a}_2" for a in attrs]
        p.add_case(constructor)
        first = self.shapes[0]
        p.add(
            Compare(
                "constructor",
                pts["constructor"],
                case="constructor",
                keys=ctor_keys,
                what=f"parameters of a new {self.id} (gamma ones" + (", beta zeros)" if self.beta else ")"),
                diagnose=False,
                requires=first[0],
            )
        )

        def case(name: str, shape: tuple[int, ...], kwargs: dict[str, Any], **kw: Any) -> str:
            params = affine(rng, tuple(kwargs.get("_param_shape", self.param_shape)), self.beta)
            ctor = {k: v for k, v in kwargs.items() if not k.startswith("_")}
            return p.layer(
                name,
                kw.pop("x") if "x" in kw else spread(rng, shape, self.stat_axis),
                kwargs=ctor,
                params=params,
                grads=grads,
                **kw,
            )

        for i, (name, shape, kwargs, what, fwd_pts, bwd_pts) in enumerate(self.shapes):
            # central differences on every backward case: a gradient right for a wrong forward passes
            case(name, shape, kwargs, numgrad=["x"] + grads if bwd_pts else None, twice=i == 0)
            p.forward_check(f"forward_{name}", fwd_pts, name, f"forward on {what}")
            if bwd_pts:
                p.backward_check(f"backward_{name}", bwd_pts, name, f"backward on {what}", grads)
        _, shape0, kwargs0, what0, _, _ = first
        tiny_x = shrink(spread(rng, shape0, self.stat_axis), self.tiny_axis)
        tiny_x[self.zero_unit] = 0.0  # one normalised unit of exact zeros: var = 0, only eps avoids 0 / 0
        case("tiny", shape0, kwargs0, x=tiny_x, backward=False)
        p.forward_check(
            "forward_tiny",
            pts["forward_tiny"],
            "tiny",
            "forward on samples of spread 1e-4 to 1e-2 and one of exact zeros (eps matters there)",
        )
        case("large", shape0, kwargs0, x=1e4 * spread(rng, shape0, self.stat_axis), backward=False)
        p.forward_check("forward_large", pts["forward_large"], "large", "forward on magnitudes around 1e4")
        p.consistency_check("numgrad", pts["numgrad"], first[0], first[3])
        case("eval", shape0, kwargs0, mode="eval", numgrad=["x"] + grads)
        p.add(
            Compare(
                "eval_same_as_train",
                pts["eval_same_as_train"],
                case="eval",
                keys=["y", "dx"] + [f"d{g}" for g in grads],
                what=f"eval mode on {what0} (it behaves exactly as in training)",
            )
        )
        if self.raises is not None:
            kwargs, what = self.raises
            p.add_case(Case("bad_groups", [{"op": "new", "var": "m", "cls": self.id, "kwargs": kwargs}], {}))
            p.add(
                Raises(
                    "bad_groups_raises",
                    pts["raises"],
                    case="bad_groups",
                    exc_type="ValueError",
                    what=what,
                    requires=first[0],
                )
            )
        p.no_mutation_check("no_mutation", pts["no_mutation"])
        p.shape_dtype_check("shape_dtype", pts["shape_dtype"])
        p.backward_twice_check("backward_twice", pts["backward_twice"], first[0])
        return p


LAYERNORM = SampleNormChecks(
    "normalization.LayerNorm",
    ctor={"normalized_shape": 6},
    ctor_attrs=["gamma", "beta"],
    param_shape=(6,),
    beta=True,
    extra_ctor=({"normalized_shape": {"tuple": [3, 4]}}, ["gamma", "beta"]),
    shapes=[
        ("2d", (4, 6), {"normalized_shape": 6}, "x of shape (4, 6)", 1.0, 1.0),
        (
            "3d",
            (2, 3, 6),
            {"normalized_shape": 6},
            "x of shape (2, 3, 6) (dgamma sums over both leading axes)",
            0.5,
            0.5,
        ),
        (
            "4d",
            (2, 2, 3, 6),
            {"normalized_shape": 6},
            "x of shape (2, 2, 3, 6) (any leading axes: dgamma sums over all three)",
            0.5,
            0.5,
        ),
        (
            "tuple",
            (2, 3, 4),
            {"normalized_shape": {"tuple": [3, 4]}, "_param_shape": (3, 4)},
            "x of shape (2, 3, 4) with normalized_shape (3, 4)",
            0.5,
            0.75,
        ),
        ("batch1", (1, 6), {"normalized_shape": 6}, "a batch of one, shape (1, 6)", 0.5, 0.25),
    ],
    stat_axis=None,
    tiny_axis=None,
    zero_unit=(-1, slice(None)),
    points={
        "constructor": 0.5,
        "forward_tiny": 0.75,
        "forward_large": 0.25,
        "numgrad": 0.75,
        "eval_same_as_train": 0.75,
        "no_mutation": 0.5,
        "shape_dtype": 0.25,
        "backward_twice": 0.25,
    },
)

RMSNORM = SampleNormChecks(
    "normalization.RMSNorm",
    ctor={"dim": 6},
    ctor_attrs=["gamma"],
    param_shape=(6,),
    beta=False,
    shapes=[
        ("2d", (4, 6), {"dim": 6}, "x of shape (4, 6)", 1.0, 1.25),
        ("3d", (2, 3, 6), {"dim": 6}, "x of shape (2, 3, 6) (dgamma sums over both leading axes)", 0.75, 0.75),
        (
            "4d",
            (2, 2, 3, 6),
            {"dim": 6},
            "x of shape (2, 2, 3, 6) (any leading axes: dgamma sums over all three)",
            0.5,
            0.5,
        ),
        ("batch1", (1, 6), {"dim": 6}, "a batch of one, shape (1, 6)", 0.25, 0.25),
    ],
    stat_axis=None,
    tiny_axis=None,
    zero_unit=(-1, slice(None)),
    points={
        "constructor": 0.5,
        "forward_tiny": 1.0,
        "forward_large": 0.5,
        "numgrad": 1.0,
        "eval_same_as_train": 0.75,
        "no_mutation": 0.5,
        "shape_dtype": 0.25,
        "backward_twice": 0.25,
    },
)

GROUPNORM = SampleNormChecks(
    "normalization.GroupNorm",
    ctor={"num_groups": 2, "num_channels": 6},
    ctor_attrs=["gamma", "beta"],
    param_shape=(6,),
    beta=True,
    shapes=[
        ("4d", (2, 6, 3, 4), {"num_groups": 2, "num_channels": 6}, "x of shape (2, 6, 3, 4), 2 groups", 1.0, 1.25),
        ("3d", (3, 6, 5), {"num_groups": 3, "num_channels": 6}, "x of shape (3, 6, 5), 3 groups", 0.75, 0.75),
        ("2d", (4, 6), {"num_groups": 2, "num_channels": 6}, "x of shape (4, 6), 2 groups", 0.75, 0.5),
        (
            "batch1",
            (1, 6, 2, 3),
            {"num_groups": 3, "num_channels": 6},
            "a batch of one, shape (1, 6, 2, 3)",
            0.25,
            0.25,
        ),
    ],
    stat_axis=1,
    tiny_axis=0,
    zero_unit=(-1, slice(0, 3)),
    points={
        "constructor": 0.5,
        "raises": 0.5,
        "forward_tiny": 0.75,
        "forward_large": 0.25,
        "numgrad": 0.75,
        "eval_same_as_train": 0.75,
        "no_mutation": 0.5,
        "shape_dtype": 0.25,
        "backward_twice": 0.25,
    },
    raises=({"num_groups": 4, "num_channels": 6}, "GroupNorm(num_groups=4, num_channels=6) (6 % 4 != 0)"),
)

INSTANCENORM = SampleNormChecks(
    "normalization.InstanceNorm2d",
    ctor={"num_features": 3},
    ctor_attrs=["gamma", "beta"],
    param_shape=(3,),
    beta=True,
    shapes=[
        ("4d", (2, 3, 4, 5), {"num_features": 3}, "x of shape (2, 3, 4, 5)", 1.5, 1.75),
        ("second", (4, 3, 2, 6), {"num_features": 3}, "x of shape (4, 3, 2, 6)", 0.75, 0.75),
        ("batch1", (1, 3, 4, 5), {"num_features": 3}, "a batch of one, shape (1, 3, 4, 5)", 0.5, 0.25),
    ],
    stat_axis=1,
    tiny_axis=1,
    zero_unit=(-1, -1),
    points={
        "constructor": 0.5,
        "forward_tiny": 0.75,
        "forward_large": 0.25,
        "numgrad": 1.0,
        "eval_same_as_train": 1.0,
        "no_mutation": 0.5,
        "shape_dtype": 0.25,
        "backward_twice": 0.25,
    },
)

CHECKS: list[ExerciseChecks] = [
    BatchNormChecks(
        "normalization.BatchNorm1d",
        main=(6, 4),
        second=(3, 4, 5),
        batch1=(1, 4, 6),
        running_shape=(5, 4),
        raise_shape=(1, 4),
        second_what="x of shape (3, 4, 5) (axes 0 and 2)",
        square=(3, 4, 4),
    ),
    BatchNormChecks(
        "normalization.BatchNorm2d",
        main=(2, 3, 4, 5),
        second=(4, 3, 5, 2),
        batch1=(1, 3, 4, 5),
        running_shape=(5, 3, 2, 4),
        raise_shape=(1, 3, 1, 1),
        second_what="x of shape (4, 3, 5, 2)",
        square=(2, 3, 2, 3),
    ),
    LAYERNORM,
    RMSNORM,
    GROUPNORM,
    INSTANCENORM,
]
