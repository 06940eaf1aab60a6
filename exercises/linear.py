"""The fully connected layer (topic ``linear``): y = x W^T + b.

Follows the course text, §universal-approximation.constructive (the affine
map between two activations) and §initialisation.variance-propagation (the
default initialisation here is PyTorch's U(-k, k), k = 1/sqrt(in_features)). The constructor is written for you; implement
``forward`` and ``backward``.

Grade it with ``.venv/bin/grade submit linear`` (or ``.venv/bin/grade submit linear.Linear``).
"""

from __future__ import annotations

import math

import numpy as np

from .base import Module


class Linear(Module):
    """Affine layer: x (N, in_features) -> x @ W.T + b, shape (N, out_features)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        rng: np.random.Generator | None = None,
    ) -> None:
        if rng is None:
            rng = np.random.default_rng()
        self.in_features = in_features
        self.out_features = out_features
        k = 1.0 / math.sqrt(in_features)
        self.W = rng.uniform(-k, k, size=(out_features, in_features))
        self.b = np.zeros(out_features) if bias else None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x @ W.T + b (no b when bias=False).

        x (N, in_features) -> y (N, out_features). Never modify x.
        [derive]
        Cache x for backward.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("linear.Linear.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dout (N, out_features) -> dx = dL/dx, shape (N, in_features).

        Set self.dW = dL/dW, shape (out_features, in_features), and, when the
        layer has a bias, self.db = dL/db, shape (out_features,) (no db when
        bias=False). Never modify dout.
        [guided]
        dx = dout @ W, self.dW = dout.T @ x, self.db = sum of dout over the batch axis.
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("linear.Linear.backward")
