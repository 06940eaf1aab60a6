"""Known mistakes in MLPBlock and fold_batchnorm, each a wrong variant of the reference."""

from __future__ import annotations

import numpy as np

from grader.mistakes import Mistake, make
from reference import blocks as ref
from reference.linear import Linear
from reference.normalization import BatchNorm1d


class EvalNotPropagated(ref.MLPBlock):
    """eval() switches only the block itself: BatchNorm keeps batch statistics, Dropout keeps dropping."""

    def eval(self) -> "EvalNotPropagated":
        self.training = False
        return self


class EvalSkipsDropout(ref.MLPBlock):
    """eval() reaches linear, bn and act but not the dropout layer."""

    def eval(self) -> "EvalSkipsDropout":
        self.training = False
        for layer in (self.linear, self.bn, self.act):
            layer.eval()
        return self


class EvalSkipsNorm(ref.MLPBlock):
    """eval() reaches linear, act and drop but not the BatchNorm layer."""

    def eval(self) -> "EvalSkipsNorm":
        self.training = False
        for layer in (self.linear, self.act, self.drop):
            layer.eval()
        return self


class TrainNotPropagated(ref.MLPBlock):
    """train() switches only the block itself: after eval() the layers stay in eval mode."""

    def train(self) -> "TrainNotPropagated":
        self.training = True
        return self


class ActBeforeNorm(ref.MLPBlock):
    """Linear -> GELU -> BatchNorm1d -> Dropout: the activation before the normalisation."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.drop.forward(self.bn.forward(self.act.forward(self.linear.forward(x))))

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return self.linear.backward(self.act.backward(self.bn.backward(self.drop.backward(dout))))


class DropoutBeforeAct(ref.MLPBlock):
    """Linear -> BatchNorm1d -> Dropout -> GELU: dropout before the activation."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.act.forward(self.drop.forward(self.bn.forward(self.linear.forward(x))))

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return self.linear.backward(self.bn.backward(self.drop.backward(self.act.backward(dout))))


class BackwardSkipsDropout(ref.MLPBlock):
    """backward starts at GELU: the dropout mask (and its scale) never reaches the gradient."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return self.linear.backward(self.bn.backward(self.act.backward(dout)))


def _scale(bn: BatchNorm1d) -> np.ndarray:
    return bn.gamma / np.sqrt(bn.running_var + bn.eps)


def _new_linear(W: np.ndarray, b: np.ndarray) -> Linear:
    out_f, in_f = W.shape
    folded = Linear(in_f, out_f, bias=True, rng=np.random.default_rng(0))
    folded.W, folded.b = W, b
    return folded


def _bias(linear: Linear) -> np.ndarray:
    return np.zeros(linear.W.shape[0]) if linear.b is None else linear.b


def fold_ignores_bias(linear: Linear, bn: BatchNorm1d) -> Linear:
    """b' = beta - s * running_mean: the Linear's own bias dropped."""
    s = _scale(bn)
    return _new_linear(s[:, None] * linear.W, bn.beta - s * bn.running_mean)


def fold_eps_missing(linear: Linear, bn: BatchNorm1d) -> Linear:
    """s = gamma / sqrt(running_var): eps forgotten."""
    s = bn.gamma / np.sqrt(bn.running_var)
    return _new_linear(s[:, None] * linear.W, s * (_bias(linear) - bn.running_mean) + bn.beta)


def fold_var_not_sqrt(linear: Linear, bn: BatchNorm1d) -> Linear:
    """s = gamma / (running_var + eps): the variance used where the standard deviation is needed."""
    s = bn.gamma / (bn.running_var + bn.eps)
    return _new_linear(s[:, None] * linear.W, s * (_bias(linear) - bn.running_mean) + bn.beta)


def fold_mean_not_scaled(linear: Linear, bn: BatchNorm1d) -> Linear:
    """b' = s * b - running_mean + beta: the running mean not multiplied by s."""
    s = _scale(bn)
    return _new_linear(s[:, None] * linear.W, s * _bias(linear) - bn.running_mean + bn.beta)


def fold_eps_hardcoded(linear: Linear, bn: BatchNorm1d) -> Linear:
    """eps = 1e-5 written in, whatever bn.eps is."""
    s = bn.gamma / np.sqrt(bn.running_var + 1e-5)
    return _new_linear(s[:, None] * linear.W, s * (_bias(linear) - bn.running_mean) + bn.beta)


def fold_gamma_ignored(linear: Linear, bn: BatchNorm1d) -> Linear:
    """s = 1 / sqrt(running_var + eps): gamma left out of the scale."""
    s = 1.0 / np.sqrt(bn.running_var + bn.eps)
    return _new_linear(s[:, None] * linear.W, s * (_bias(linear) - bn.running_mean) + bn.beta)


def fold_beta_ignored(linear: Linear, bn: BatchNorm1d) -> Linear:
    """b' = s * (b - running_mean): beta not added."""
    s = _scale(bn)
    return _new_linear(s[:, None] * linear.W, s * (_bias(linear) - bn.running_mean))


def fold_bias_not_scaled(linear: Linear, bn: BatchNorm1d) -> Linear:
    """b' = b - s * running_mean + beta: the Linear's bias not multiplied by s."""
    s = _scale(bn)
    return _new_linear(s[:, None] * linear.W, _bias(linear) - s * bn.running_mean + bn.beta)


def fold_in_place(linear: Linear, bn: BatchNorm1d) -> Linear:
    """Scales the given Linear's W and b in place and returns it."""
    s = _scale(bn)
    b = s * (_bias(linear) - bn.running_mean) + bn.beta
    linear.W *= s[:, None]
    linear.b = b
    return linear


MLP, FOLD = "blocks.MLPBlock", "blocks.fold_batchnorm"

MISTAKES: list[Mistake] = [
    make(
        "mlp-eval-not-propagated",
        MLP,
        "eval() only sets the block's own flag: BatchNorm keeps using batch statistics and Dropout keeps dropping.",
        "Call eval() on linear, bn, act and drop too (and train() likewise).",
        EvalNotPropagated,
    ),
    make(
        "mlp-eval-skips-dropout",
        MLP,
        "eval() does not reach the dropout layer, which keeps dropping at evaluation.",
        "eval() must call eval() on linear, bn, act and drop.",
        EvalSkipsDropout,
    ),
    make(
        "mlp-eval-skips-bn",
        MLP,
        "eval() does not reach BatchNorm1d, which keeps using (and updating) batch statistics.",
        "eval() must call eval() on linear, bn, act and drop.",
        EvalSkipsNorm,
    ),
    make(
        "mlp-train-not-propagated",
        MLP,
        "train() only sets the block's own flag: after eval() the layers stay in eval mode.",
        "Call train() on linear, bn, act and drop too.",
        TrainNotPropagated,
    ),
    make(
        "mlp-act-before-bn",
        MLP,
        "The layers run in the wrong order: GELU before BatchNorm1d.",
        "forward is drop(act(bn(linear(x)))); backward runs the four backwards in reverse order.",
        ActBeforeNorm,
    ),
    make(
        "mlp-dropout-before-act",
        MLP,
        "Dropout is applied before GELU; the block is Linear -> BatchNorm1d -> GELU -> Dropout.",
        "forward is drop(act(bn(linear(x)))).",
        DropoutBeforeAct,
    ),
    make(
        "mlp-backward-skips-dropout",
        MLP,
        "backward does not go through the dropout layer, so dropped units still get gradient.",
        "Start backward with drop.backward(dout), then act, bn, linear.",
        BackwardSkipsDropout,
    ),
    make(
        "fold-bn-ignores-bias",
        FOLD,
        "The Linear's own bias is dropped: b' = beta - s * running_mean.",
        "b' = s * (b - running_mean) + beta, with b = 0 only when the Linear has no bias.",
        fold_ignores_bias,
    ),
    make(
        "fold-bn-eps-missing",
        FOLD,
        "eps is left out of the scale: s = gamma / sqrt(running_var).",
        "s = gamma / sqrt(running_var + eps), exactly as BatchNorm1d normalises in eval.",
        fold_eps_missing,
    ),
    make(
        "fold-bn-var-not-sqrt",
        FOLD,
        "The scale divides by the variance instead of the standard deviation.",
        "s = gamma / np.sqrt(running_var + eps).",
        fold_var_not_sqrt,
    ),
    make(
        "fold-bn-mean-not-scaled",
        FOLD,
        "The running mean is subtracted without being multiplied by the scale s.",
        "b' = s * (b - running_mean) + beta.",
        fold_mean_not_scaled,
    ),
    make(
        "fold-bn-eps-hardcoded",
        FOLD,
        "eps is hard-coded as 1e-5 instead of read from bn.eps.",
        "Use bn.eps.",
        fold_eps_hardcoded,
    ),
    make(
        "fold-bn-gamma-ignored",
        FOLD,
        "gamma is left out of the scale: s = 1 / sqrt(running_var + eps).",
        "s = gamma / sqrt(running_var + eps).",
        fold_gamma_ignored,
    ),
    make(
        "fold-bn-beta-ignored",
        FOLD,
        "beta is not added to the folded bias.",
        "b' = s * (b - running_mean) + beta.",
        fold_beta_ignored,
    ),
    make(
        "fold-bn-bias-not-scaled",
        FOLD,
        "The Linear's bias is added without being multiplied by the scale s.",
        "b' = s * (b - running_mean) + beta.",
        fold_bias_not_scaled,
    ),
    make(
        "fold-bn-in-place",
        FOLD,
        "The given Linear is modified and returned instead of a new one.",
        "Build a new Linear(in, out, bias=True) and set its W and b; leave linear and bn unchanged.",
        fold_in_place,
    ),
]
