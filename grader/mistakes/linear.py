"""Known mistakes in ``linear.Linear``, each a wrong subclass of the reference layer."""

from __future__ import annotations

import numpy as np

from grader.mistakes import Mistake, make
from reference import linear as ref


class DWTransposed(ref.Linear):
    """dW = x^T dout, shape (in, out) instead of (out, in)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        dx = super().backward(dout)
        self.dW = self.x.T @ dout
        return dx


class DWMean(ref.Linear):
    """dW = dout^T x / N: averaged over the batch instead of summed."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = super().backward(dout)
        self.dW = dout.T @ self.x / dout.shape[0]
        return dx


class DbNotSummed(ref.Linear):
    """db = dout, shape (N, out) instead of its sum over the batch."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = super().backward(dout)
        if self.b is not None:
            self.db = np.array(dout, dtype=np.float64)
        return dx


class DbMean(ref.Linear):
    """db = mean of dout over the batch instead of its sum."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = super().backward(dout)
        if self.b is not None:
            self.db = dout.mean(axis=0)
        return dx


class ForwardNoBias(ref.Linear):
    """y = x W^T: b forgotten in forward."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return self.x @ self.W.T


class BiasFalseKeepsB(ref.Linear):
    """bias=False still creates b = zeros."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, rng: np.random.Generator | None = None
    ) -> None:
        super().__init__(in_features, out_features, True, rng)


class DxUsesWT(ref.Linear):
    """dx = dout W^T: a shape error unless in_features == out_features."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        super().backward(dout)
        return dout @ self.W.T


class ForwardNoTranspose(ref.Linear):
    """y = x W: a shape error unless in_features == out_features."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        y = self.x @ self.W
        return y if self.b is None else y + self.b


class DbWrongAxis(ref.Linear):
    """db = dout summed over axis 1 (the features), shape (N,), instead of over the batch axis 0."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dx = super().backward(dout)
        if self.b is not None:
            self.db = np.asarray(dout, dtype=np.float64).sum(axis=1)
        return dx


L = "linear.Linear"

MISTAKES: list[Mistake] = [
    make(
        "linear-dx-uses-WT",
        L,
        "dx was computed as dout @ W.T; with W of shape (out, in) the input gradient is dout @ W.",
        "Use dx = dout @ W: (N, out) @ (out, in) -> (N, in).",
        DxUsesWT,
    ),
    make(
        "linear-forward-no-transpose",
        L,
        "forward computes x @ W; W has shape (out_features, in_features), so y = x @ W.T + b.",
        "Use y = x @ self.W.T + self.b.",
        ForwardNoTranspose,
    ),
    make(
        "linear-dW-transposed",
        L,
        "dW is x^T dout, shape (in_features, out_features); W has shape (out_features, in_features).",
        "Use dW = dout.T @ x so that dW has W's shape.",
        DWTransposed,
    ),
    make(
        "linear-dW-mean",
        L,
        "dW is divided by the batch size; the gradient of a sum over the batch is a sum.",
        "Use dW = dout.T @ x without dividing by N (the loss already averages if it wants to).",
        DWMean,
    ),
    make(
        "linear-db-not-summed",
        L,
        "db is dout itself, shape (N, out_features), instead of its sum over the batch.",
        "Use db = dout.sum(axis=0), shape (out_features,).",
        DbNotSummed,
    ),
    make(
        "linear-db-mean",
        L,
        "db is the mean of dout over the batch; b is added to every row, so its gradient is the sum.",
        "Use db = dout.sum(axis=0).",
        DbMean,
    ),
    make(
        "linear-forward-no-bias",
        L,
        "forward returns x W^T without adding b.",
        "Return x @ W.T + b (when b is not None).",
        ForwardNoBias,
    ),
    make(
        "linear-bias-false-keeps-b",
        L,
        "With bias=False, b still exists (zeros); the contract says b is None.",
        "Set self.b = None when bias is False, and skip b in forward and db in backward.",
        BiasFalseKeepsB,
    ),
    make(
        "linear-db-wrong-axis",
        L,
        "db is summed over axis 1 (the output features), shape (N,), instead of over the batch axis 0.",
        "Use db = dout.sum(axis=0), shape (out_features,).",
        DbWrongAxis,
    ),
]
