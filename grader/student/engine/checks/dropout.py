"""Hidden checks of inverted dropout (``dropout.Dropout``).

The mask comes from the student's own generator, so the training output is
graded by structure and statistics, never elementwise against the reference:

- values (3.25): every output is exactly 0 or x / (1 - p) (p drawn from the seed,
  never 0.5, so keep/drop and 1/p versus 1/(1 - p) mix-ups show), shape and dtype
  kept. The 1/(1 - p) rescaling is what makes dropout inverted, hence the weight;
- no_mutation (0.5): neither x (after forward and after backward) nor dout is modified;
- zero_fraction (1.25): the fraction of zeros over n = 40000 elements lies within
  p +- t, t = sqrt(ln(2 / 1e-9) / (2 n)) = 0.0164 (Hoeffding: false failure < 1e-9),
  and over the 4500 elements of the 3-D case within p3 +- 0.0488;
- seeded (0.5): two layers given generators seeded alike drop the same elements, and a third, seeded
  otherwise, drops others (a mask drawn from np.random, or from a generator of the layer's own, ignores the
  rng the layer was given: a seeded run is not reproducible);
- fresh_mask (0.75): a second call draws another mask, and the mask is drawn per
  element (rows differ); two independent masks of 40000 elements coincide with
  probability (p^2 + (1-p)^2)^40000 < 1e-2600, two rows of 250 with probability < 1e-40;
- backward (1.25): dx = dout * y / x, the mask and scale of the forward just run
  (judged against the student's own forward, so a forward bug costs once);
- eval (1): identity forward and backward, also right after a training forward;
- p_edges (0.75): p = 0 is the identity; p = 1 gives exact zeros, no NaN, no warning;
- value_error (0.75): ValueError for p = -0.1 and p = 1.5.

p is one of 0.2, 0.25, 0.3, 0.4 (not 0.35, where a Gaussian mask's zero fraction
1 - Phi(p) = 0.363 would lie within t of p).

Known mistakes are named when their variant fails the same check the same way
(same scale, a zero fraction within 2t, the same kind of backward), see
``grader.student.engine.checks.init.StatCheck``.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import numpy as np

from grader.student.feedback import figures
from grader.student.engine.checks.context import UNDIAGNOSED_ERRORS, error_text
from grader.student.engine.checks.kinds import own_figure
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.engine.checks.init import StatCheck, Verdict, hoeffding_halfwidth, link_peers, same_value
from grader.student.engine.diagnosis import error_signature
from grader.student.engine.ops import Case, ScriptResult

CLS = "dropout.Dropout"
TRAIN_SHAPE = (160, 250)  # n = 40000 for the zero fraction
SHAPE_3D = (6, 25, 30)
XS_SHAPE = (20, 30)  # eval, edges and seeded cases
EXACT = 1e-9  # relative tolerance of "exactly x / (1 - p)" (float64 rounding is 1e-16)

Results = Callable[[str], ScriptResult]


def nonzero_input(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values with |x| in [0.5, 2] and random signs: no zeros, so y == 0 means dropped."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 2.0, size=shape)


def layer_ops(p: float, seed: int, mode: str | None = None) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = [{"op": "new", "var": "d", "cls": CLS, "kwargs": {"p": p, "rng": {"rng": seed}}}]
    if mode == "eval":
        ops.append({"op": "call", "var": "d", "method": "eval"})
    return ops


def forward(x: str, out: str | None) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "call", "var": "d", "method": "forward", "args": [{"array": x}]}
    if out:
        op["out"] = out
    return op


def backward(dout: str, out: str) -> dict[str, Any]:
    return {"op": "call", "var": "d", "method": "backward", "args": [{"array": dout}], "out": out}


def get(res: Results, case: str, *keys: str) -> tuple[list[np.ndarray] | None, str]:
    """The outputs ``keys`` of ``case``, or None and the reason."""
    r = res(case)
    values = [v for v in (r.outputs.get(k) for k in keys) if v is not None]
    if len(values) != len(keys):
        return None, f"case {case}: {error_text(r.error)}"
    return values, ""


class DropoutChecks(ExerciseChecks):
    # Every check is a StatCheck: a case pack stores their verdicts on the variants, not the variants' samples.
    pack_outputs = False
    """dropout.Dropout: structure and statistics of the training output, backward, eval, edges."""

    id = CLS

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        p = float(rng.choice([0.2, 0.25, 0.3, 0.4]))
        p3 = float(rng.choice([0.15, 0.6, 0.7]))
        seeds = [int(s) for s in rng.integers(0, 2**31, size=7)]
        x = nonzero_input(rng, TRAIN_SHAPE)
        dout = nonzero_input(rng, TRAIN_SHAPE)
        x3 = nonzero_input(rng, SHAPE_3D)
        dout3 = nonzero_input(rng, SHAPE_3D)
        xs = rng.standard_normal(XS_SHAPE)
        douts = rng.standard_normal((20, 30))
        plan = Plan()
        plan.add_case(
            Case(
                "train",
                layer_ops(p, seeds[0])
                + [
                    {"op": "let", "var": "x0", "value": {"array": "x"}},
                    {"op": "call", "var": "d", "method": "forward", "args": [{"var": "x0"}], "out": "y1"},
                    {"op": "output", "value": {"var": "x0"}, "out": "x_after"},
                    {"op": "let", "var": "dout0", "value": {"array": "dout"}},
                    {"op": "call", "var": "d", "method": "backward", "args": [{"var": "dout0"}], "out": "dx1"},
                    {"op": "output", "value": {"var": "x0"}, "out": "x_after_backward"},
                    {"op": "output", "value": {"var": "dout0"}, "out": "dout_after"},
                    forward("x", "y2"),
                ],
                {"x": x, "dout": dout},
            )
        )
        plan.add_case(
            Case(
                "train_3d",
                layer_ops(p3, seeds[1]) + [forward("x", "y"), backward("dout", "dx")],
                {"x": x3, "dout": dout3},
            )
        )
        plan.add_case(
            Case(
                "eval",
                layer_ops(p, seeds[2], "eval") + [forward("x", "y"), backward("dout", "dx")],
                {"x": xs, "dout": douts},
            )
        )
        plan.add_case(
            Case(
                "train_then_eval",
                layer_ops(p, seeds[3])
                + [
                    forward("x", None),
                    {"op": "call", "var": "d", "method": "eval"},
                    forward("x", "y"),
                    backward("dout", "dx"),
                ],
                {"x": xs, "dout": douts},
            )
        )
        plan.add_case(
            Case("p0", layer_ops(0.0, seeds[4]) + [forward("x", "y"), backward("dout", "dx")], {"x": xs, "dout": douts})
        )
        plan.add_case(
            Case("p1", layer_ops(1.0, seeds[5]) + [forward("x", "y"), backward("dout", "dx")], {"x": xs, "dout": douts})
        )
        seeded: list[dict[str, Any]] = []
        for var, seed_of in (("a", seeds[6]), ("b", seeds[6]), ("c", seeds[6] + 1)):
            seeded += [
                {"op": "new", "var": var, "cls": CLS, "kwargs": {"p": p, "rng": {"rng": seed_of}}},
                {"op": "call", "var": var, "method": "forward", "args": [{"array": "x"}], "out": f"y_{var}"},
            ]
        plan.add_case(Case("seeded", seeded, {"x": xs}))
        plan.add_case(Case("p_negative", [{"op": "new", "var": "d", "cls": CLS, "kwargs": {"p": -0.1}}]))
        plan.add_case(Case("p_above_one", [{"op": "new", "var": "d", "cls": CLS, "kwargs": {"p": 1.5}}]))

        training = [("train", "y1", p), ("train_3d", "y", p3)]
        plan.add(StatCheck("values", 3.25, judge=self.judge_values(plan, training), same=same_scale))
        plan.add(StatCheck("no_mutation", 0.5, judge=self.judge_mutation(plan), same=same_value))
        plan.add(StatCheck("zero_fraction", 1.25, judge=self.judge_fraction(training), same=same_fraction))
        plan.add(StatCheck("fresh_mask", 0.75, judge=self.judge_fresh(), same=same_value))
        plan.add(StatCheck("seeded", 0.5, judge=judge_seeded, same=same_value))
        plan.add(StatCheck("backward", 1.25, judge=self.judge_backward(plan), same=same_value))
        plan.add(StatCheck("eval", 1.0, judge=self.judge_eval(plan), same=same_value))
        plan.add(StatCheck("p_edges", 0.75, judge=self.judge_edges(plan), same=same_edges))
        plan.add(StatCheck("value_error", 0.75, judge=judge_value_error, same=same_value))
        return link_peers(plan)

    # ------------------------------------------------------------------ judges

    @staticmethod
    def judge_values(plan: Plan, training: list[tuple[str, str, float]]) -> Callable[[Results], Verdict]:
        """Every y is 0 or x / (1 - p) (relative 1e-9); the fingerprint is the scale(s) found."""
        arrays = {c.name: c.arrays for c in plan.cases}

        def judge(res: Results) -> Verdict:
            for case, key, p in training:
                got, why = get(res, case, key)
                if got is None:
                    return Verdict(False, why, crash(res, case))
                y, x = got[0], arrays[case]["x"]
                if y.shape != x.shape or y.dtype != np.float64:
                    return Verdict(
                        False,
                        f"case {case}: forward returned shape {y.shape} dtype {y.dtype}; expected {x.shape} float64",
                        ("shape", y.shape, str(y.dtype)),
                        partial(
                            figures.shapes_figure,
                            y.shape,
                            x.shape,
                            title=f"case {case}: forward",
                            key="y",
                            received_dtype=str(y.dtype),
                            expected_dtype="float64",
                        ),
                    )
                if not np.all(np.isfinite(y)):
                    return Verdict(False, f"case {case} (p = {p}): forward returned NaN or inf", ("nan",))
                kept = y != 0
                if kept.all():
                    return Verdict(
                        False,
                        f"case {case} (p = {p}): no element was dropped (no output is 0), so the"
                        " scale cannot be judged: check how the mask is built",
                        ("nothing-dropped",),
                        partial(scale_figure, case, y, x, p),
                    )
                scale = 1.0 / (1.0 - p)
                ratios = y[kept] / x[kept]
                bad = np.abs(ratios - scale) > EXACT * scale
                if bad.any():
                    found = np.unique(np.round(ratios, 9))
                    shown = ", ".join(f"{r:.6g}" for r in found[:4]) + (" ..." if found.size > 4 else "")
                    return Verdict(
                        False,
                        f"case {case} (p = {p}): every output must be 0 or x / (1 - p) = x * {scale:.6g};"
                        f" {int(bad.sum())} of {y.size} outputs are not (y / x = {shown})",
                        (case, tuple(found[:4]) if found.size <= 4 else "many"),
                        partial(scale_figure, case, y, x, p),
                    )
            return Verdict(True)

        return judge

    @staticmethod
    def judge_mutation(plan: Plan) -> Callable[[Results], Verdict]:
        """x is unchanged after the training forward and after backward; dout is unchanged after backward."""
        arrays = next(c for c in plan.cases if c.name == "train").arrays
        items = [
            ("x_after", "x", "forward modified its input array x: compute y = x * mask (a new array), never x *= mask"),
            (
                "x_after_backward",
                "x",
                "backward modified the x that forward was given (an alias of the caller's array kept in self?)",
            ),
            (
                "dout_after",
                "dout",
                "backward modified its input array dout: return dout * self.mask (a new array), never dout *= mask",
            ),
        ]

        def judge(res: Results) -> Verdict:
            r = res("train")
            for key, array, message in items:
                after = r.outputs.get(key)
                if after is None:
                    if key == "x_after":
                        return Verdict(False, f"case train: {error_text(r.error)}")
                    continue  # backward crashed: charged by the backward check
                if not (after.shape == arrays[array].shape and np.array_equal(after, arrays[array])):
                    return Verdict(
                        False,
                        message,
                        ("mutated", key),
                        partial(
                            own_figure,
                            after,
                            arrays[array],
                            0.0,
                            0.0,
                            f"case train: {array} after your code ran",
                            array,
                            f"{array} as it was handed to your code",
                            f"{array} after your code ran",
                        ),
                    )
            return Verdict(True)

        return judge

    @staticmethod
    def judge_fraction(training: list[tuple[str, str, float]]) -> Callable[[Results], Verdict]:
        """|fraction of zeros - p| <= t in each training case (Hoeffding, false failure < 1e-9).

        The fingerprint is (case, fraction, t), or (case, "gaussian") when the fraction
        is that of a mask drawn from a standard normal (Phi(p) or 1 - Phi(p)) instead of
        a uniform, or the crash.
        """

        def judge(res: Results) -> Verdict:
            for case, key, p in training:
                got, why = get(res, case, key)
                if got is None:
                    return Verdict(False, why, crash(res, case))
                y = got[0]
                n = int(np.prod(TRAIN_SHAPE if case == "train" else SHAPE_3D))
                t = hoeffding_halfwidth(n)
                if y.size != n:
                    return Verdict(False, f"case {case}: forward returned {y.size} values for an input of {n}")
                frac = float(np.mean(y == 0))
                if abs(frac - p) <= t:
                    continue
                message = (
                    f"case {case}: with p = {p}, {frac:.4f} of the {n} outputs are zero; expected"
                    f" p = {p} +- {t:.4f} (each element is dropped with probability p)"
                )
                phi = normal_cdf(p)
                if min(abs(frac - phi), abs(frac - (1.0 - phi))) <= t:
                    return Verdict(
                        False,
                        message + f": {frac:.4f} is what a mask drawn from a standard normal gives"
                        f" (Phi({p}) = {phi:.4f}); draw uniforms, self.rng.random(x.shape)",
                        (case, "gaussian"),
                        partial(fraction_figure, case, y, p, t, frac),
                    )
                return Verdict(False, message, (case, frac, t), partial(fraction_figure, case, y, p, t, frac))
            return Verdict(True)

        return judge

    @staticmethod
    def judge_fresh() -> Callable[[Results], Verdict]:
        """A second call gives another zero pattern, and rows do not all share one pattern."""

        def judge(res: Results) -> Verdict:
            got, why = get(res, "train", "y1", "y2")
            if got is None:
                return Verdict(False, why)
            y1, y2 = got
            if y1.shape != TRAIN_SHAPE or y2.shape != TRAIN_SHAPE:
                return Verdict(False, f"forward returned shape {y1.shape}, expected {TRAIN_SHAPE}")
            if not (np.all(np.isfinite(y1)) and np.all(np.isfinite(y2))):
                return Verdict(False, "forward returned NaN or inf, so no mask can be seen", ("nan",))
            m1, m2 = y1 == 0, y2 == 0
            same_twice = bool(np.array_equal(m1, m2))
            rows_alike = bool(np.all(m1 == m1[0]))

            def picture() -> dict[str, Any]:
                seen = (
                    "nothing was dropped."
                    if not m1.any()
                    else "everything was dropped."
                    if m1.all()
                    else "the two masks are identical."
                    if same_twice
                    else "every row drops the same columns (vertical stripes)."
                )
                return figures.masks_figure(
                    [("first forward", m1), ("second forward", m2)],
                    title="the elements each training call dropped",
                    summary=f"Which elements of the {TRAIN_SHAPE} output your two training calls dropped, as the"
                    f" share dropped in each block: {seen}",
                )

            if not m1.any() or m1.all():
                return Verdict(
                    False,
                    f"{'no' if not m1.any() else 'every'} element was dropped in training",
                    ("none" if not m1.any() else "all",),
                    picture,
                )

            if same_twice:
                return Verdict(
                    False,
                    "two training calls dropped exactly the same elements: draw a fresh mask"
                    " from self.rng on every forward",
                    (same_twice, rows_alike),
                    picture,
                )
            if rows_alike:
                return Verdict(
                    False,
                    f"every row of the {TRAIN_SHAPE} output drops the same columns: draw the"
                    " mask with the full shape of x",
                    (same_twice, rows_alike),
                    picture,
                )
            return Verdict(True)

        return judge

    @staticmethod
    def judge_backward(plan: Plan) -> Callable[[Results], Verdict]:
        """dx == dout * y / x (relative 1e-9): the forward's own mask and scale."""
        arrays = {c.name: c.arrays for c in plan.cases}

        def judge(res: Results) -> Verdict:
            for case, ykey, dxkey in (("train", "y1", "dx1"), ("train_3d", "y", "dx")):
                got, why = get(res, case, ykey, dxkey)
                if got is None:
                    return Verdict(False, why, crash(res, case))
                y, dx = got
                x, dout = arrays[case]["x"], arrays[case]["dout"]
                if y.shape != x.shape:
                    return Verdict(False, f"case {case}: forward returned shape {y.shape}, expected {x.shape}")
                if not np.all(np.isfinite(y)):
                    return Verdict(
                        False,
                        f"case {case}: forward returned NaN or inf, so backward cannot be judged"
                        " against it (fix forward first)",
                        ("nan",),
                    )
                if dx.shape != x.shape:
                    return Verdict(
                        False, f"case {case}: backward returned shape {dx.shape}, expected {x.shape}", ("shape",)
                    )
                expected = dout * (y / x)
                if np.all(np.abs(dx - expected) <= EXACT * np.abs(expected) + 1e-300):
                    continue
                kind = backward_kind(dx, dout, y)

                def picture(case: str = case, dx: np.ndarray = dx, expected: np.ndarray = expected) -> Any:
                    return own_figure(
                        dx,
                        expected,
                        EXACT,
                        1e-300,
                        f"case {case}: dx",
                        "dx",
                        "dout × y / x (the mask and scale of your forward)",
                        "your dx",
                    )

                hint = {
                    "identity": "backward returned dout unchanged: multiply by the mask",
                    "unscaled": "backward used the 0/1 mask without the 1/(1 - p) scale",
                    "other-mask": "backward zeroed other elements than the forward dropped (a new mask?)",
                    "mask-only": "backward returned the mask itself: multiply it by dout",
                    "zeros": "backward returned zeros everywhere",
                }.get(kind, "dx differs from dout * mask")
                bad = int(np.sum(np.abs(dx - expected) > EXACT * np.abs(expected)))
                return Verdict(
                    False,
                    f"case {case}: dx must be dout times the scaled mask of the last forward (y / x): {hint};"
                    f" {bad} of {dx.size} values differ",
                    kind,
                    picture,
                )
            return Verdict(True)

        return judge

    @staticmethod
    def judge_eval(plan: Plan) -> Callable[[Results], Verdict]:
        """In eval mode y == x and dx == dout (also right after a training forward)."""
        arrays = {c.name: c.arrays for c in plan.cases}

        def judge(res: Results) -> Verdict:
            pattern = []
            message = ""
            picture = None
            for case in ("eval", "train_then_eval"):
                got, why = get(res, case, "y", "dx")
                if got is None:
                    return Verdict(False, why)
                y, dx = got
                x, dout = arrays[case]["x"], arrays[case]["dout"]
                y_ok = same_values(y, x)
                dx_ok = same_values(dx, dout)
                pattern.append((y_ok, dx_ok, bool(y.shape == x.shape and np.any(y == 0))))
                if not message and not y_ok:
                    zeros = int(np.sum(y == 0)) if y.shape == x.shape else 0
                    message = (
                        f"case {case}: in eval mode forward must return x unchanged;"
                        f" {zeros} of {x.size} outputs are zero (still dropping?)"
                    )
                    picture = identity_picture(case, "y", y, x, "x (eval returns its input)")
                elif not message and not dx_ok:
                    message = (
                        f"case {case}: in eval mode backward must return dout unchanged"
                        " (a mask left over from a training forward?)"
                    )
                    picture = identity_picture(case, "dx", dx, dout, "dout (eval passes it back)")
            if message:
                return Verdict(False, message, tuple(pattern), picture)
            return Verdict(True)

        return judge

    @staticmethod
    def judge_edges(plan: Plan) -> Callable[[Results], Verdict]:
        """p = 0: y == x, dx == dout; p = 1: zeros everywhere, finite, no warning."""
        arrays = {c.name: c.arrays for c in plan.cases}

        def judge(res: Results) -> Verdict:
            got0, why0 = get(res, "p0", "y", "dx")
            got1, why1 = get(res, "p1", "y", "dx")
            r1 = res("p1")
            x, dout = arrays["p0"]["x"], arrays["p0"]["dout"]
            p0_ok = got0 is not None and same_values(got0[0], x) and same_values(got0[1], dout)
            p1_nan = got1 is not None and not all(np.all(np.isfinite(v)) for v in got1)
            p1_ok = got1 is not None and not p1_nan and all(v.shape == x.shape and not np.any(v) for v in got1)
            warned = bool(r1.warnings)
            fingerprint = (edge_kind(got0, x, dout, p0_ok), edge_kind(got1, x, dout, p1_ok and not warned))
            if got0 is None:
                return Verdict(False, f"p = 0: {why0}")
            if got1 is None:
                return Verdict(False, f"p = 1: {why1}")
            if not p0_ok:
                assert got0 is not None
                y0_ok = same_values(got0[0], x)
                picture = (
                    identity_picture("p0", "y", got0[0], x, "x (p = 0 drops nothing)")
                    if not y0_ok
                    else identity_picture("p0", "dx", got0[1], dout, "dout (p = 0 drops nothing)")
                )
                return Verdict(
                    False,
                    "with p = 0 nothing is dropped: forward must return x and backward dout",
                    fingerprint,
                    picture,
                )
            assert got1 is not None
            y1 = got1[0] if got1[0].shape != x.shape or np.any(got1[0]) else got1[1]
            zeros_picture = identity_picture(
                "p1", "y" if y1 is got1[0] else "dx", y1, np.zeros_like(x), "0 (p = 1 drops everything)"
            )
            if p1_nan:
                return Verdict(
                    False,
                    "with p = 1 the output contains NaN or inf (0 / (1 - p) = 0/0?):"
                    " everything is dropped, return zeros",
                    fingerprint,
                    zeros_picture,
                )
            if not p1_ok:
                return Verdict(
                    False, "with p = 1 every output and every gradient must be exactly 0", fingerprint, zeros_picture
                )
            if warned:
                return Verdict(
                    False,
                    f"with p = 1 your values are right; only the warning costs this check's points: {r1.warnings[0]}",
                    fingerprint,
                )
            return Verdict(True)

        return judge


def fraction_figure(case: str, y: np.ndarray, p: float, t: float, frac: float) -> dict[str, Any]:
    """Each row's fraction of zeros over the Binomial(cols, p) / cols density (normal approximation), and the whole
    output's fraction against p +- t."""
    rows = y.reshape(y.shape[0], -1) if y.ndim > 1 else y.reshape(1, -1)
    cols = rows.shape[1]
    per_row = np.mean(rows == 0, axis=1)
    return figures.histogram_figure(
        per_row,
        title=f"case {case}: dropped fraction per row, p = {p}",
        value_label="fraction of zeros in a row",
        density={"kind": "normal", "mean": p, "std": math.sqrt(p * (1 - p) / cols)},
        statistic={
            "name": f"fraction of zeros over all {y.size} outputs",
            "value": frac,
            "expected": p,
            "low": p - t,
            "high": p + t,
        },
    )


def scale_figure(case: str, y: np.ndarray, x: np.ndarray, p: float) -> dict[str, Any]:
    """y / x of every output kept (not 0) as a histogram, against the one value it must take, 1 / (1 - p)."""
    kept = y != 0
    scale = 1.0 / (1.0 - p)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = y[kept] / x[kept]
    found = np.unique(np.round(ratios[np.isfinite(ratios)], 6))
    shown = ", ".join(f"{r:.4g}" for r in found[:4]) + (" ..." if found.size > 4 else "")
    return figures.histogram_figure(
        ratios,
        title=f"case {case}: y / x of the outputs kept, p = {p}",
        density=None,
        bounds=[scale],
        bound_label="1/(1 - p)",
        value_label="y / x of an output kept (not 0)",
        summary=f"Histogram of y / x over the {int(kept.sum())} outputs your forward kept (case {case}, p = {p}):"
        f" each must be exactly 1 / (1 - p) = {scale:.4g}; yours are {shown}.",
    )


def identity_picture(case: str, key: str, got: np.ndarray, want: np.ndarray, label: str) -> Callable[[], Any]:
    """A picture of an output that must equal a given array exactly (eval, the edges p = 0 and p = 1)."""
    return lambda: own_figure(got, want, EXACT, 0.0, f"case {case}: {key}", key, label, f"your {key}")


def judge_seeded(res: Results) -> Verdict:
    """Generators seeded alike give the same output, generators seeded otherwise another one."""
    got, why = get(res, "seeded", "y_a", "y_b", "y_c")
    if got is None:
        return Verdict(False, why, crash(res, "seeded"))
    y_a, y_b, y_c = got
    if y_a.shape != XS_SHAPE:
        return Verdict(False, f"forward returned shape {y_a.shape}, expected {XS_SHAPE}", ("shape",))
    if not all(np.all(np.isfinite(y)) for y in got):
        return Verdict(False, "forward returned NaN or inf, so no mask can be seen", ("nan",))

    def picture() -> dict[str, Any]:
        return figures.masks_figure(
            [("seed s", y_a == 0), ("seed s again", y_b == 0), ("seed s + 1", y_c == 0)],
            title="the elements three layers dropped",
            summary="Which elements three layers dropped, given generators seeded s, s again and s + 1: the first"
            " two must match, the third differ.",
        )

    if not (y_a.shape == y_b.shape and np.array_equal(y_a, y_b)):
        return Verdict(
            False,
            "two layers given generators with the same seed dropped different elements: draw the"
            " mask from self.rng (the generator the layer was given), never from np.random,"
            " so that a seeded run can be repeated",
            ("unseeded",),
            picture,
        )
    if y_a.shape == y_c.shape and np.array_equal(y_a, y_c) and np.any(y_a == 0):
        # (a layer that drops nothing at all is charged by the values check, not here)
        return Verdict(
            False,
            "layers given generators with different seeds dropped exactly the same elements:"
            " draw the mask from self.rng, not from a generator of your own",
            ("seed-ignored",),
            picture,
        )
    return Verdict(True)


def judge_value_error(res: Results) -> Verdict:
    """Dropout(p=-0.1) and Dropout(p=1.5) raise ValueError (counted once forward is implemented:
    the stub's constructor already validates p, so a stub earns nothing here)."""
    stub = res("p0").error
    if stub and stub.get("type") == "NotImplementedError":
        return Verdict(False, f"implement forward first: {error_text(stub)}")
    for case, p in (("p_negative", -0.1), ("p_above_one", 1.5)):
        error = res(case).error
        got = error["type"] if error else None
        if got != "ValueError":
            said = "nothing was raised" if got is None else f"got {error_text(error)}"
            return Verdict(False, f"Dropout(p={p}) must raise ValueError (0 <= p <= 1): {said}", (case, got))
    return Verdict(True)


def crash(res: Results, case: str) -> tuple[Any, ...] | None:
    """The fingerprint of a case that stopped on an error: ("error", case, type, call, message), or None."""
    signature = error_signature(res(case))
    if signature is None or signature[0] in UNDIAGNOSED_ERRORS:
        return None
    return ("error", case) + signature


def normal_cdf(z: float) -> float:
    """Phi(z) = (1 + erf(z / sqrt 2)) / 2."""
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def edge_kind(got: list[np.ndarray] | None, x: np.ndarray, dout: np.ndarray, ok: bool) -> str:
    """What forward/backward did at an edge p: 'ok', 'crash', 'nan', 'zeros', 'identity', 'some-dropped' or 'other'."""
    if ok:
        return "ok"
    if got is None:
        return "crash"
    y, dx = got
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(dx))):
        return "nan"
    if y.shape != x.shape:
        return "other"
    if not np.any(y):
        return "zeros"
    if same_values(y, x) and same_values(dx, dout):
        return "identity"
    if np.any(y == 0):
        return "some-dropped"
    return "other"


def same_edges(a: Any, b: Any) -> bool:
    """Two p_edges fingerprints (kind at p = 0, kind at p = 1) that fail alike.

    Alike where both fail; an edge one of them gets right is no contradiction
    (a second bug of the student's own, such as 0/0 at p = 1, may add a failure).
    """
    pairs = [(u, v) for u, v in zip(a, b, strict=False) if u != "ok" and v != "ok"]
    return bool(pairs) and all(u == v for u, v in pairs)


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape and equal to relative 1e-9 (NaN never equal)."""
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=EXACT, atol=0.0))


def backward_kind(dx: np.ndarray, dout: np.ndarray, y: np.ndarray) -> str:
    """What a wrong dropout backward did: 'identity', 'unscaled', 'zeros', 'mask-only', 'other-mask' or 'other'."""
    if same_values(dx, dout):
        return "identity"
    if same_values(dx, dout * (y != 0)):
        return "unscaled"
    kept = y != 0
    if not np.any(dx):
        return "zeros"  # (no mask in it: not "mask-only", whose constant is the scale)
    if (
        dx.shape == y.shape
        and kept.any()
        and not np.any(dx[~kept])
        and dx[kept][0] != 0
        and bool(np.allclose(dx[kept], dx[kept][0], rtol=EXACT, atol=0.0))
    ):
        return "mask-only"  # one constant (the scale) where kept, 0 elsewhere: dout never entered
    if np.any(dx == 0) and not np.array_equal(dx == 0, y == 0):
        return "other-mask"
    return "other"


def same_scale(a: Any, b: Any) -> bool:
    """Two wrong training outputs with the same case and the same scale(s) y / x."""
    if a == "many" or b == "many" or not (isinstance(a, tuple) and isinstance(b, tuple)):
        return a == b
    if len(a) != len(b) or a[:1] != b[:1]:
        return False
    if a[0] in ("shape", "nan", "error", "nothing-dropped"):
        return a == b
    ra, rb = a[1], b[1]
    if ra == "many" or rb == "many":
        return ra == rb
    return len(ra) == len(rb) and all(abs(u - v) <= 1e-6 * max(1.0, abs(v)) for u, v in zip(ra, rb, strict=True))


def same_fraction(a: Any, b: Any) -> bool:
    """Two zero fractions of the same case that agree within the sum of their Hoeffding half-widths
    (a Gaussian mask or a crash: the same tag)."""
    if len(a) != 3 or len(b) != 3 or a[0] != b[0] or isinstance(a[1], str) or isinstance(b[1], str):
        return a == b
    (_, fa, ta), (_, fb, tb) = a, b
    return abs(fa - fb) <= ta + tb


CHECKS: list[ExerciseChecks] = [DropoutChecks()]
