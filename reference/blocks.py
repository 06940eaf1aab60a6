"""Composite blocks (reference): Linear -> BatchNorm1d -> GELU -> Dropout, and BatchNorm folding."""

from __future__ import annotations

import numpy as np

from .activations import GELU
from .base import Module
from .dropout import Dropout
from .linear import Linear
from .normalization import BatchNorm1d


class MLPBlock(Module):
    """y = Dropout(GELU(BatchNorm1d(x W^T))); backward runs the four backwards in reverse order."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        p: float = 0.2,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.linear = Linear(in_features, out_features, bias=False, rng=rng)
        self.bn = BatchNorm1d(out_features)
        self.act = GELU()
        self.drop = Dropout(p, rng=rng)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = drop(act(bn(linear(x))))."""
        return self.drop.forward(self.act.forward(self.bn.forward(self.linear.forward(x))))

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = linear.backward(bn.backward(act.backward(drop.backward(dout))))."""
        return self.linear.backward(self.bn.backward(self.act.backward(self.drop.backward(dout))))

    def train(self) -> "MLPBlock":
        """Training mode for the block and its four layers; returns self."""
        self.training = True
        for layer in (self.linear, self.bn, self.act, self.drop):
            layer.train()
        return self

    def eval(self) -> "MLPBlock":
        """Evaluation mode for the block and its four layers; returns self."""
        self.training = False
        for layer in (self.linear, self.bn, self.act, self.drop):
            layer.eval()
        return self


def fold_batchnorm(linear: Linear, bn: BatchNorm1d) -> Linear:
    """A new Linear equal to bn (eval) after linear: s = gamma / sqrt(running_var + eps),

    W' = s[:, None] * W, b' = s * (b - running_mean) + beta (b = 0 when linear has no bias).
    Neither argument is modified.
    """
    out_features, in_features = linear.W.shape
    s = bn.gamma / np.sqrt(bn.running_var + bn.eps)
    b = np.zeros(out_features) if linear.b is None else linear.b
    folded = Linear(in_features, out_features, bias=True, rng=np.random.default_rng(0))
    folded.W = s[:, None] * linear.W
    folded.b = s * (b - bn.running_mean) + bn.beta
    return folded
