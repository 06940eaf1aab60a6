"""Weight initialisers (reference): each returns a new float64 array (fan_out, fan_in) drawn from rng."""

from __future__ import annotations

import math

import numpy as np


def _kaiming_std(fan_in: int, fan_out: int, mode: str, negative_slope: float) -> float:
    """std = sqrt(2 / ((1 + negative_slope^2) * fan)), fan = fan_in or fan_out by mode."""
    if mode == "fan_in":
        fan = fan_in
    elif mode == "fan_out":
        fan = fan_out
    else:
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan))


def xavier_uniform(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """W ~ U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Var W = gain^2 * 2 / (fan_in + fan_out))."""
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in))


def xavier_normal(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """W ~ N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return rng.normal(0.0, std, size=(fan_out, fan_in))


def kaiming_uniform(
    fan_in: int,
    fan_out: int,
    rng: np.random.Generator,
    mode: str = "fan_in",
    negative_slope: float = 0.0,
) -> np.ndarray:
    """W ~ U(-b, b), b = sqrt(3) * std, std = sqrt(2 / ((1 + negative_slope^2) * fan))."""
    bound = math.sqrt(3.0) * _kaiming_std(fan_in, fan_out, mode, negative_slope)
    return rng.uniform(-bound, bound, size=(fan_out, fan_in))


def kaiming_normal(
    fan_in: int,
    fan_out: int,
    rng: np.random.Generator,
    mode: str = "fan_in",
    negative_slope: float = 0.0,
) -> np.ndarray:
    """W ~ N(0, std^2), std = sqrt(2 / ((1 + negative_slope^2) * fan)) (He: Var W = 2 / fan_in)."""
    std = _kaiming_std(fan_in, fan_out, mode, negative_slope)
    return rng.normal(0.0, std, size=(fan_out, fan_in))
