"""Composing layers (topic ``blocks``): a Linear-BatchNorm-GELU-Dropout block, and folding BatchNorm.

Follows the course text: §normalization.batchnorm-forward (why the Linear
before BatchNorm needs no bias) and §normalization.batchnorm-train-eval
(eval-mode BatchNorm is an affine map that can be fused into the preceding
layer). The block chains Linear without bias -> BatchNorm -> GELU -> Dropout. Uses your own Linear, BatchNorm1d, GELU and Dropout.

Grade it with ``.venv/bin/grade submit blocks`` (one exercise: ``.venv/bin/grade submit blocks.MLPBlock``).
"""

from __future__ import annotations

import numpy as np

from .activations import GELU
from .base import Module
from .dropout import Dropout
from .linear import Linear
from .normalization import BatchNorm1d


class MLPBlock(Module):
    """x (N, in_features) -> Dropout(GELU(BatchNorm1d(Linear(x)))), shape (N, out_features)."""

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
        """y = drop(act(bn(linear(x)))): call the four sub-layers in that order."""
        # TODO: implement
        raise NotImplementedError("blocks.MLPBlock.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx: the sub-layers' backward in reverse order (drop, act, bn, linear).

        Each sub-layer sets its own gradients (linear.dW, bn.dgamma, bn.dbeta).
        """
        # TODO: implement
        raise NotImplementedError("blocks.MLPBlock.backward")

    def train(self) -> "MLPBlock":
        """Training mode for the block AND its four sub-layers; returns self.

        Module.train only sets self.training: BatchNorm and Dropout read their
        own ``training`` flag, so forgetting them leaves them in the old mode.
        """
        # TODO: implement
        raise NotImplementedError("blocks.MLPBlock.train")

    def eval(self) -> "MLPBlock":
        """Evaluation mode for the block AND its four sub-layers; returns self."""
        # TODO: implement
        raise NotImplementedError("blocks.MLPBlock.eval")


def fold_batchnorm(linear: Linear, bn: BatchNorm1d) -> Linear:
    """A new Linear (with bias) equal, on any input, to ``bn`` in eval mode after ``linear``.

    Eval BatchNorm is affine (§normalization.batchnorm-train-eval), so the composition is one affine
    map (b = 0 when ``linear`` has no bias).
    [guided]
    bn(z) = s * (z - running_mean) + beta with
    s = gamma / sqrt(running_var + eps). Substituting z = x W^T + b:
        W' = s[:, None] * W,    b' = s * (b - running_mean) + beta
    [/guided]
    [derive]
    Build the result with Linear(in_features, out_features, bias=True) and
    overwrite its W and b.
    [/derive]
    Do not modify ``linear`` or ``bn``.
    """
    # TODO: implement
    raise NotImplementedError("blocks.fold_batchnorm")
