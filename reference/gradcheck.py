"""Numerical gradient checking (reference): central differences and the relative error."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def numerical_gradient(
    f: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    dout: np.ndarray,
    h: float = 1e-5,
) -> np.ndarray:
    """d/dx_i sum(f(x) * dout) ~ sum((f(x + h e_i) - f(x - h e_i)) * dout) / (2 h) for every element i.

    The two outputs are subtracted before the weighted sum (the same number as the
    difference of the two sums, with less round-off). x is perturbed in place one
    element at a time and every element is restored exactly, so x is unchanged
    when this returns.
    """
    dout = np.asarray(dout, dtype=np.float64)
    grad = np.zeros(x.shape, dtype=np.float64)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        try:
            x[idx] = old + h
            plus = np.array(f(x), dtype=np.float64)
            x[idx] = old - h
            minus = np.array(f(x), dtype=np.float64)
        finally:
            x[idx] = old
        grad[idx] = np.sum((plus - minus) * dout) / (2.0 * h)
    return grad


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    """max over elements of |a - b| / max(1e-8, |a| + |b|) (0.0 for two zero arrays)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    err = np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))
    return float(np.max(err)) if err.size else 0.0
