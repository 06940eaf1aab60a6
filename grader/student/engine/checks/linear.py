"""Hidden checks of ``linear.Linear``: y = x W^T + b; dx = dout W, dW = dout^T x, db = sum_n dout.

W and b are set to random values drawn from the exercise seed before each
case (the constructor's own draw is checked separately: shapes, the bound
1/sqrt(in_features), b zeros, b None with bias=False). The main cases have
in_features != out_features, so transposing W raises a shape error there; a
square case (in = out = 4) gives such a transposition wrong values instead, so
that the known mistake can be named whatever expression raised elsewhere.
Tolerances: rtol 1e-6, atol 1e-8 * max(1, max|expected|) (grader.student.engine.checks.context).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.engine.checks.context import Context, error_text
from grader.student.engine.checks.kinds import Custom
from grader.student.engine.checks.plans import ExerciseChecks, LayerPlan, Plan
from grader.student.engine.diagnosis import KnownMistake as Mistake
from grader.student.engine.ops import Case

IN, OUT = 5, 3
SQUARE = 4  # in_features = out_features of the square case


def _constructor(ctx: Context) -> tuple[bool, str, Mistake | None]:
    """W (out, in) within U(-k, k), k = 1/sqrt(in), not constant; b zeros (out,); rng=None works."""
    s = ctx.student_result("constructor")
    W, b, W_default = (s.outputs.get(k) for k in ("W", "b", "W_default"))
    if W is None or b is None or W_default is None:
        return False, f"Linear({IN + 1}, {OUT + 1}, rng=...): {error_text(s.error)}", None
    k = 1.0 / np.sqrt(IN + 1)
    if W.shape != (OUT + 1, IN + 1):
        return False, f"W has shape {W.shape}, expected (out_features, in_features) = {(OUT + 1, IN + 1)}", None
    if W.dtype != np.float64 or not np.all(np.abs(W) <= k):
        message = f"W must be float64 drawn from U(-k, k), k = 1/sqrt(in_features) = {k:.4f}"
        return False, f"{message}; max |W| = {np.max(np.abs(W)):.4f}", None
    if np.ptp(W) == 0.0:
        return False, "every entry of W is the same: draw W from U(-k, k) with rng", None
    if b.shape != (OUT + 1,) or np.any(b != 0.0):
        return False, f"b must be zeros of shape (out_features,) = ({OUT + 1},); got shape {b.shape}", None
    if W_default.shape != (2, 3):
        return False, f"Linear(3, 2) (no rng) gave W of shape {W_default.shape}, expected (2, 3)", None
    return True, "", None


def _bias_none(ctx: Context) -> tuple[bool, str, Mistake | None]:
    """Linear(..., bias=False).b is None."""
    s = ctx.student_result("constructor")
    flag = s.outputs.get("b_none")
    if flag is None:
        return False, f"Linear(..., bias=False): {error_text(s.error)}", None
    if bool(flag):
        return True, "", None
    return False, "with bias=False, self.b must be None", ctx.diagnose("constructor", ["b_none"])


class LinearChecks(ExerciseChecks):
    id = "linear.Linear"

    def plan(self, seed: int) -> Plan:
        p = LayerPlan(self.id, seed)
        rng = p.rng
        kwargs = {"in_features": IN, "out_features": OUT, "rng": {"rng": 7}}

        def params(bias: bool = True) -> dict[str, np.ndarray]:
            out = {"W": rng.uniform(-1.0, 1.0, size=(OUT, IN))}
            if bias:
                out["b"] = rng.uniform(-1.0, 1.0, size=OUT)
            return out

        def dout(n: int) -> np.ndarray:
            return rng.standard_normal((n, OUT))

        p.layer(
            "mat",
            rng.standard_normal((4, IN)),
            kwargs=kwargs,
            params=params(),
            grads=["W", "b"],
            numgrad=["x", "W", "b"],
            dout=dout(4),
            twice=True,
        )
        p.layer("batch1", rng.standard_normal((1, IN)), kwargs=kwargs, params=params(), grads=["W", "b"], dout=dout(1))
        zeros = rng.standard_normal((3, IN))
        zeros[1] = 0.0
        zeros[:, 0] = 0.0
        p.layer("zeros", zeros, kwargs=kwargs, params=params(), grads=["W", "b"], dout=dout(3))
        p.layer(
            "nobias",
            rng.standard_normal((6, IN)),
            kwargs=dict(kwargs, bias=False),
            params=params(False),
            grads=["W"],
            dout=dout(6),
        )
        script: list[dict[str, Any]] = [
            {
                "op": "new",
                "var": "m",
                "cls": self.id,
                "args": [IN + 1, OUT + 1],
                "kwargs": {"rng": {"rng": seed % 2**32}},
            },
            {"op": "get", "var": "m", "attr": "W", "out": "W"},
            {"op": "get", "var": "m", "attr": "b", "out": "b"},
            {"op": "new", "var": "d", "cls": self.id, "args": [3, 2]},
            {"op": "get", "var": "d", "attr": "W", "out": "W_default"},
            {"op": "new", "var": "n", "cls": self.id, "args": [IN, OUT], "kwargs": {"bias": False, "rng": {"rng": 1}}},
            {"op": "is_none", "var": "n", "attr": "b", "out": "b_none"},
        ]
        p.add_case(Case("constructor", script, {}))
        # in_features == out_features: dx = dout @ W.T and y = x @ W raise no shape error here, so their
        # values can be compared (and the mistake named, whatever expression raised on the other cases).
        p.layer(
            "square",
            rng.standard_normal((3, SQUARE)),
            kwargs={"in_features": SQUARE, "out_features": SQUARE, "rng": {"rng": 7}},
            params={"W": rng.uniform(-1.0, 1.0, size=(SQUARE, SQUARE)), "b": rng.uniform(-1.0, 1.0, size=SQUARE)},
            grads=["W", "b"],
            dout=rng.standard_normal((3, SQUARE)),
        )

        p.add(Custom("constructor", 1.0, requires="mat", fn=_constructor))
        p.add(Custom("bias_false_b_none", 0.5, requires="mat", fn=_bias_none))
        p.forward_check("forward", 1.25, "mat", f"forward on x of shape (4, {IN}) with random W, b")
        p.forward_check("forward_batch1", 0.5, "batch1", f"forward on a batch of one, shape (1, {IN})")
        p.forward_check("forward_zeros", 0.5, "zeros", "forward on an input with zero rows and columns")
        p.forward_check("forward_no_bias", 0.5, "nobias", "forward with bias=False")
        p.backward_check("backward", 2.0, "mat", f"backward (dx, dW, db) on x of shape (4, {IN})", ["W", "b"])
        p.backward_check(
            "backward_batch1", 0.5, "batch1", "backward on a batch of one (db keeps shape (out,))", ["W", "b"]
        )
        p.backward_check("backward_zeros", 0.5, "zeros", "backward on an input with zero rows and columns", ["W", "b"])
        p.backward_check("backward_no_bias", 0.5, "nobias", "backward (dx, dW) with bias=False", ["W"])
        p.forward_check(
            "forward_square", 0.25, "square", f"forward with a square W ({SQUARE}, {SQUARE}) (y = x @ W.T, not x @ W)"
        )
        p.backward_check(
            "backward_square",
            0.5,
            "square",
            f"backward with a square W ({SQUARE}, {SQUARE}) (dx = dout @ W, not dout @ W.T)",
            ["W", "b"],
        )
        p.consistency_check("numgrad", 0.5, "mat", f"x of shape (4, {IN})")
        p.no_mutation_check("no_mutation", 0.5)
        p.shape_dtype_check("shape_dtype", 0.25)
        p.backward_twice_check("backward_twice", 0.25, "mat")
        return p


CHECKS: list[ExerciseChecks] = [LinearChecks()]
