"""Fully connected layer (reference, NumPy float64)."""

from __future__ import annotations

import numpy as np

from .base import Module


class Linear(Module):
    """y = x W^T + b, W (out_features, in_features) ~ U(-k, k), k = 1 / sqrt(in_features).

    Backward: dx = dout W, dW = dout^T x, db = sum of dout over the batch
    (x may have any leading dims (*, in_features), as in PyTorch).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        rng: np.random.Generator | None = None,
    ) -> None:
        rng = np.random.default_rng() if rng is None else rng
        k = 1.0 / np.sqrt(in_features)
        self.in_features = in_features
        self.out_features = out_features
        self.W = rng.uniform(-k, k, size=(out_features, in_features))
        self.b = np.zeros(out_features) if bias else None
        self.x: np.ndarray | None = None
        self.dW: np.ndarray | None = None
        self.db: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x W^T + b."""
        x = np.array(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear expects input (N, {self.in_features}), got shape {x.shape}")
        self.x = x
        y = x @ self.W.T
        if self.b is not None:
            y = y + self.b
        return y

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout W; dW = dout^T x; db = sum(dout) over all leading axes."""
        assert self.x is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x2 = self.x.reshape(-1, self.in_features)
        d2 = dout.reshape(-1, self.out_features)
        self.dW = d2.T @ x2
        if self.b is not None:
            self.db = d2.sum(axis=0)
        return dout @ self.W
