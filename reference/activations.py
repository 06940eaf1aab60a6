"""Elementwise activations (reference, NumPy float64).

Each layer caches what its derivative needs in ``forward`` and returns
``dx = dout * f'(x)`` from ``backward``. All of them accept any input shape.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Module

_erfc = np.frompyfunc(math.erfc, 1, 1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """sigma(x) = 1 / (1 + e^-x), via e^-|x| so that no exponential overflows."""
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def _phi_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF Phi(x) = (1 + erf(x / sqrt(2))) / 2 = erfc(-x / sqrt(2)) / 2 (accurate in the left tail)."""
    return 0.5 * np.asarray(_erfc(-x / math.sqrt(2.0)), dtype=np.float64)


class Sigmoid(Module):
    """y = 1 / (1 + e^-x); dy/dx = y (1 - y)."""

    def __init__(self) -> None:
        self.out: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = sigma(x), computed without overflow for any finite x."""
        self.out = _sigmoid(np.asarray(x, dtype=np.float64))
        return self.out.copy()

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * y (1 - y)."""
        assert self.out is not None  # set by forward
        return dout * self.out * (1.0 - self.out)


class Tanh(Module):
    """y = tanh(x); dy/dx = 1 - y^2."""

    def __init__(self) -> None:
        self.out: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = tanh(x)."""
        self.out = np.tanh(np.asarray(x, dtype=np.float64))
        return self.out.copy()

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * (1 - y^2)."""
        assert self.out is not None  # set by forward
        return dout * (1.0 - self.out**2)


class ReLU(Module):
    """y = max(0, x); dy/dx = 1 where x > 0, else 0 (0 at x = 0)."""

    def __init__(self) -> None:
        self.x: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = max(0, x)."""
        self.x = np.array(x, dtype=np.float64)
        return np.maximum(self.x, 0.0)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * [x > 0]."""
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, 0.0)


class LeakyReLU(Module):
    """y = x if x > 0 else slope * x; dy/dx = 1 or slope (slope at x = 0)."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        self.negative_slope = negative_slope
        self.x: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x where x > 0, negative_slope * x elsewhere."""
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, self.negative_slope * self.x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * (1 if x > 0 else negative_slope)."""
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, self.negative_slope * dout)


class PReLU(Module):
    """y = x if x > 0 else alpha * x, alpha learned (one value, or one per channel on axis 1).

    dx = dout * (1 if x > 0 else alpha); dalpha = sum of dout * x over x <= 0
    (summed over every axis but the channel axis when num_parameters > 1).
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25) -> None:
        self.num_parameters = num_parameters
        self.alpha = np.full(num_parameters, init, dtype=np.float64)
        self.x: np.ndarray | None = None
        self.dalpha: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x where x > 0, alpha * x elsewhere (alpha broadcast on axis 1 when per channel)."""
        x = np.array(x, dtype=np.float64)
        if self.num_parameters > 1 and (x.ndim < 2 or x.shape[1] != self.num_parameters):
            raise ValueError(
                f"PReLU with num_parameters={self.num_parameters} expects input (N, "
                f"{self.num_parameters}, ...), got shape {x.shape}"
            )
        self.x = x
        alpha = self.alpha.reshape((1, -1) + (1,) * (x.ndim - 2)) if self.num_parameters > 1 else self.alpha[0]
        return np.where(x > 0, x, alpha * x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * (1 if x > 0 else alpha); sets dalpha = sum(dout * x * [x <= 0])."""
        assert self.x is not None  # set by forward
        x = self.x
        negative_part = np.where(x > 0, 0.0, dout * x)
        if self.num_parameters > 1:
            alpha = self.alpha.reshape((1, -1) + (1,) * (x.ndim - 2))
            axes = tuple(a for a in range(x.ndim) if a != 1)
            self.dalpha = negative_part.sum(axis=axes)
        else:
            alpha = self.alpha[0]
            self.dalpha = np.array([negative_part.sum()])
        return np.where(x > 0, dout, alpha * dout)


class ELU(Module):
    """y = x if x > 0 else alpha (e^x - 1); dy/dx = 1 or alpha e^x."""

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha
        self.x: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x where x > 0, alpha * expm1(x) elsewhere (expm1 of min(x, 0): no overflow)."""
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, self.alpha * np.expm1(np.minimum(self.x, 0.0)))

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * (1 if x > 0 else alpha * e^x)."""
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, dout * self.alpha * np.exp(np.minimum(self.x, 0.0)))


class GELU(Module):
    """y = x Phi(x) (exact, "none") or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ("tanh").

    Exact derivative: Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi).
    """

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate
        self.x: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x Phi(x), or the tanh approximation."""
        self.x = np.array(x, dtype=np.float64)
        x = self.x
        if self.approximate == "tanh":
            inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
            return 0.5 * x * (1.0 + np.tanh(inner))
        return x * _phi_cdf(x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * (Phi(x) + x phi(x)), or the derivative of the tanh form."""
        assert self.x is not None  # set by forward
        x = self.x
        if self.approximate == "tanh":
            c = math.sqrt(2.0 / math.pi)
            t = np.tanh(c * (x + 0.044715 * x**3))
            grad = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * c * (1.0 + 3.0 * 0.044715 * x**2)
            return dout * grad
        pdf = np.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi)
        return dout * (_phi_cdf(x) + x * pdf)


class SiLU(Module):
    """y = x sigma(beta x) (Swish; beta = 1 is SiLU); dy/dx = s + beta x s (1 - s), s = sigma(beta x)."""

    def __init__(self, beta: float = 1.0) -> None:
        self.beta = beta
        self.x: np.ndarray | None = None
        self.s: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x * sigma(beta x)."""
        self.x = np.array(x, dtype=np.float64)
        self.s = _sigmoid(self.beta * self.x)
        return self.x * self.s

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * (s + beta x s (1 - s))."""
        assert self.s is not None  # set by forward
        assert self.x is not None  # set by forward
        s = self.s
        return dout * (s + self.beta * self.x * s * (1.0 - s))
