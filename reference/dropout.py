"""Inverted dropout (reference, NumPy float64)."""

from __future__ import annotations

import numpy as np

from .base import Module


class Dropout(Module):
    """Training: y = x * r / (1 - p), r_j ~ Bernoulli(1 - p) (kept where u >= p, u ~ U[0, 1)); eval: y = x.

    A fresh mask is drawn from ``rng`` on every training forward; p = 1 gives zeros.
    backward: dx = dout * mask of the last forward (identity after an eval forward).
    """

    def __init__(self, p: float = 0.5, rng: np.random.Generator | None = None) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.rng = np.random.default_rng() if rng is None else rng
        self.keep: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x * [u >= p] / (1 - p) in training (zeros when p = 1), y = x in eval."""
        x = np.asarray(x, dtype=np.float64)
        if not self.training:
            self.keep = None
            return x.copy()
        self.keep = self.rng.random(x.shape) >= self.p
        if self.p == 1.0:
            return np.zeros_like(x)
        return x * self.keep / (1.0 - self.p)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * [u >= p] / (1 - p) with the mask of the last forward (dout itself after an eval forward)."""
        dout = np.asarray(dout, dtype=np.float64)
        if self.keep is None:
            return dout.copy()
        if self.p == 1.0:
            return np.zeros_like(dout)
        return dout * self.keep / (1.0 - self.p)
