"""Hidden checks of ``blocks.MLPBlock`` and ``blocks.fold_batchnorm``.

MLPBlock (Linear without bias -> BatchNorm1d -> GELU -> Dropout, the student's
own layers): W is set explicitly after construction so the numbers do not
depend on how the rng was used.

- with p = 0 the block is deterministic: forward, dx, dW, dgamma, dbeta against the reference;
- with p > 0 the mask is read off the student's own output (y != 0) and the
  reference block is run in the parent with its Dropout replaced by that fixed
  mask: y, dx and dW must match it (a known mistake is named when its block,
  run with the same mask, reproduces them); live only (grader/course/live_checks.py);
- running statistics after two training steps (dropout does not affect them);
- eval(): output and dx against the reference (running statistics, dropout off)
  and the training flag of all four sub-layers; train() restores them.

fold_batchnorm: a biased Linear and a BatchNorm1d with small running variances
(1e-5 to 1e-3, the size of eps, so eps placement matters), non-trivial gamma,
beta and running mean; a Linear without bias (the folded one has a bias); a
non-default eps; the arguments left unchanged. Tolerances: rtol 1e-6 and
atol 1e-8 * max(1, max|expected|) as for every float64 layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.student.engine.checks.context import ATOL, RTOL, Context, error_text
from grader.student.engine.checks.kinds import Compare, Custom, live_check, Outcome
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.engine.compare import compare, scale_of
from grader.student.engine.ops import Case
from grader.student.feedback import figures

FLAGS = ("training", "linear.training", "bn.training", "act.training", "drop.training")


def block_ops(in_f: int, out_f: int, p: float, seed: int) -> list[dict[str, Any]]:
    return [
        {
            "op": "new",
            "var": "blk",
            "cls": "blocks.MLPBlock",
            "args": [in_f, out_f],
            "kwargs": {"p": p, "rng": {"rng": seed}},
        },
        {"op": "set", "var": "blk", "attr": "linear.W", "value": {"array": "W"}},
    ]


def call(method: str, arg: str | None = None, out: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "call", "var": "blk", "method": method, "args": [] if arg is None else [{"array": arg}]}
    if out:
        op["out"] = out
    return op


def get(attr: str, out: str) -> dict[str, Any]:
    return {"op": "get", "var": "blk", "attr": attr, "out": out}


def flag_ops(suffix: str) -> list[dict[str, Any]]:
    return [get(attr, key) for attr, key in zip(FLAGS, flag_keys(suffix), strict=True)]


def flag_keys(suffix: str) -> list[str]:
    return [f"{attr.replace('.', '_')}_{suffix}" for attr in FLAGS]


class MLPBlockChecks(ExerciseChecks):
    """blocks.MLPBlock: deterministic p = 0 pass, dropout structure, backward through the mask, eval."""

    id = "blocks.MLPBlock"
    uses = ("linear.Linear", "normalization.BatchNorm1d", "activations.GELU", "dropout.Dropout")

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        in_f, out_f, n = int(rng.integers(5, 9)), int(rng.integers(9, 13)), int(rng.integers(12, 17))
        p = float(rng.choice([0.25, 0.3, 0.4]))
        seeds = [int(s) for s in rng.integers(0, 2**31, size=3)]
        W = rng.uniform(-1.0, 1.0, (out_f, in_f))
        arrays = {
            "W": W,
            "x1": 2.0 * rng.standard_normal((n, in_f)) + 0.5,
            "x2": rng.standard_normal((n, in_f)) - 0.3,
            "x3": rng.standard_normal((n, in_f)),
            "dout": rng.standard_normal((n, out_f)),
        }
        plan = Plan()
        plan.add_case(
            Case(
                "train_p0",
                block_ops(in_f, out_f, 0.0, seeds[0])
                + [
                    call("forward", "x1", "y"),
                    call("backward", "dout", "dx"),
                    get("linear.dW", "dW"),
                    get("bn.dgamma", "dgamma"),
                    get("bn.dbeta", "dbeta"),
                ],
                arrays,
            )
        )
        plan.add_case(
            Case(
                "train_dropout",
                block_ops(in_f, out_f, p, seeds[1])
                + [
                    call("forward", "x1", "y"),
                    call("backward", "dout", "dx"),
                    get("linear.dW", "dW"),
                ],
                arrays,
            )
        )
        plan.add_case(
            Case(
                "eval",
                block_ops(in_f, out_f, p, seeds[2])
                + [
                    call("forward", "x1"),
                    call("forward", "x2"),
                    get("bn.running_mean", "running_mean"),
                    get("bn.running_var", "running_var"),
                    call("eval"),
                    *flag_ops("eval"),
                    call("forward", "x3", "y"),
                    call("backward", "dout", "dx"),
                    get("linear.dW", "dW"),
                    call("train"),
                    *flag_ops("train"),
                ],
                arrays,
            )
        )
        shape = f"MLPBlock({in_f}, {out_f})"
        plan.add(
            Compare(
                "forward_train",
                2.0,
                case="train_p0",
                keys=["y"],
                what=f"{shape} with p=0 in training (batch statistics)",
            )
        )
        plan.add(
            Compare(
                "backward_train",
                2.0,
                case="train_p0",
                keys=["dx", "dW", "dgamma", "dbeta"],
                what=f"{shape} with p=0: backward through Dropout, GELU, BatchNorm1d and Linear",
            )
        )
        # The two masked checks run the reference block with the student's own dropout mask: they are
        # implemented where the reference is (grader/course/live_checks.py) and run in hidden grading only.
        plan.add(
            Custom(
                "dropout_train",
                1.5,
                live_only=True,
                fn=live_check(
                    "blocks.masked", (in_f, out_f), p, ["y"], "each output must be 0 or GELU(BN(x W^T)) / (1 - p)"
                ),
            )
        )
        plan.add(
            Custom(
                "backward_dropout",
                1.0,
                live_only=True,
                fn=live_check(
                    "blocks.masked",
                    (in_f, out_f),
                    p,
                    ["dx", "dW"],
                    "the backward of dout * mask / (1 - p), with the mask of your forward",
                ),
            )
        )
        plan.add(
            Compare(
                "running_stats",
                1.0,
                case="eval",
                keys=["running_mean", "running_var"],
                what="bn running statistics after two training forwards",
            )
        )
        plan.add(Custom("eval", 1.5, fn=eval_outputs))
        plan.add(
            Compare(
                "modes",
                1.0,
                case="eval",
                keys=flag_keys("eval") + flag_keys("train"),
                what="the training flag of the block and its four layers after eval() and train()",
                check_dtype=False,
            )
        )
        return plan


def eval_outputs(ctx: Context) -> Outcome:
    """In eval: y and dx against the reference; a failure is explained by the layers' training flags."""
    s = ctx.student_result("eval")
    for key in ("y", "dx", "dW"):
        got = s.outputs.get(key)
        if got is None:
            return False, f"eval mode: {error_text(s.error)}", None
        expected = ctx.reference_output("eval", key)
        cmp = compare(got, expected, RTOL, ATOL * scale_of(expected))
        if not cmp.ok:
            still = [
                attr.split(".")[0]
                for attr, k in zip(FLAGS, flag_keys("eval"), strict=True)
                if attr != "training" and bool(np.all(s.outputs.get(k, np.array(False))))
            ]
            note = (
                f" After eval() these layers are still in training mode: {', '.join(still)}"
                " (eval() must reach all four layers)."
                if still
                else ""
            )
            mistake = ctx.diagnose("eval", ["y", "dx"]) or ctx.diagnose("eval", flag_keys("eval"))
            figure = (
                figures.elements_figure(
                    got, expected, RTOL, ATOL * scale_of(expected), title=f"eval mode: {key}", key=key
                )
                if got.shape == expected.shape
                else figures.shapes_figure(got.shape, expected.shape, title=f"eval mode: {key}", key=key)
            )
            return False, f"eval mode: {key}: {cmp.message}.{note}", mistake, figure
    return True, "", None


# --------------------------------------------------------------------------- fold_batchnorm


def fold_case(name: str, rng: np.random.Generator, in_f: int, out_f: int, bias: bool, eps: float | None) -> Case:
    """linear (W, b), bn (gamma, beta, running stats) -> folded = fold_batchnorm(linear, bn); y = folded(x)."""
    arrays = {
        "W": rng.standard_normal((out_f, in_f)),
        "b": rng.standard_normal(out_f),
        "gamma": rng.uniform(0.5, 2.0, out_f),
        "beta": rng.standard_normal(out_f),
        "running_mean": rng.standard_normal(out_f),
        "running_var": 10.0 ** rng.uniform(-5.0, -3.0, out_f),
        "x": rng.standard_normal((7, in_f)),
    }
    bn_kwargs = {} if eps is None else {"eps": eps}
    script: list[dict[str, Any]] = [
        {
            "op": "new",
            "var": "lin",
            "cls": "linear.Linear",
            "args": [in_f, out_f],
            "kwargs": {"bias": bias, "rng": {"rng": 0}},
        },
        {"op": "set", "var": "lin", "attr": "W", "value": {"array": "W"}},
    ]
    if bias:
        script.append({"op": "set", "var": "lin", "attr": "b", "value": {"array": "b"}})
    script.append({"op": "new", "var": "bn", "cls": "normalization.BatchNorm1d", "args": [out_f], "kwargs": bn_kwargs})
    for attr in ("gamma", "beta", "running_mean", "running_var"):
        script.append({"op": "set", "var": "bn", "attr": attr, "value": {"array": attr}})
    script += [
        {"op": "func", "fn": "blocks.fold_batchnorm", "args": [{"var": "lin"}, {"var": "bn"}], "to": "folded"},
        {"op": "is_none", "var": "folded", "attr": "b", "out": "b_is_none"},
        {"op": "get", "var": "folded", "attr": "W", "out": "folded_W"},
        {"op": "call", "var": "folded", "method": "forward", "args": [{"array": "x"}], "out": "y"},
        {"op": "get", "var": "lin", "attr": "W", "out": "linear_W_after"},
        {"op": "get", "var": "bn", "attr": "running_mean", "out": "running_mean_after"},
        {"op": "get", "var": "bn", "attr": "running_var", "out": "running_var_after"},
        {"op": "get", "var": "bn", "attr": "gamma", "out": "gamma_after"},
    ]
    if bias:
        script.insert(-4, {"op": "get", "var": "folded", "attr": "b", "out": "folded_b"})
        script.append({"op": "get", "var": "lin", "attr": "b", "out": "linear_b_after"})
    return Case(name, script, arrays)


class FoldBatchNormChecks(ExerciseChecks):
    """blocks.fold_batchnorm: biased and unbiased Linear, small running variances, non-default eps."""

    id = "blocks.fold_batchnorm"
    uses = ("linear.Linear", "normalization.BatchNorm1d")

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        in_f, out_f = int(rng.integers(4, 8)), int(rng.integers(8, 12))
        plan = Plan()
        plan.add_case(fold_case("biased", rng, in_f, out_f, True, None))
        plan.add_case(fold_case("no_bias", rng, in_f, out_f, False, None))
        plan.add_case(fold_case("eps", rng, in_f, out_f, True, 1e-3))
        what = "folded(x) against bn.eval()(linear(x))"
        plan.add(
            Compare(
                "forward_biased",
                3.0,
                case="biased",
                keys=["y"],
                what=f"{what}, Linear with bias, running_var ~ 1e-5..1e-3",
            )
        )
        plan.add(
            Compare(
                "params_biased",
                1.5,
                case="biased",
                keys=["folded_W", "folded_b"],
                what="the folded W' = s W and b' = s (b - running_mean) + beta, s = gamma / sqrt(var + eps)",
            )
        )
        plan.add(
            Compare(
                "no_bias",
                2.0,
                case="no_bias",
                keys=["b_is_none", "y"],
                what=f"{what}, Linear(bias=False) (the folded Linear has a bias)",
                check_dtype=False,
            )
        )
        plan.add(Compare("eps", 1.5, case="eps", keys=["y"], what=f"{what}, BatchNorm1d(eps=1e-3)"))
        plan.add(
            Compare(
                "arguments_unchanged",
                2.0,
                case="biased",
                keys=["linear_W_after", "linear_b_after", "running_mean_after", "running_var_after", "gamma_after"],
                what="linear and bn after folding (return a new Linear, change neither argument)",
            )
        )
        return plan


CHECKS: list[ExerciseChecks] = [MLPBlockChecks(), FoldBatchNormChecks()]
