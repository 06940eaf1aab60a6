"""Reference fit_function: one hidden layer of 32 units fits sin(2 pi x) on [0, 1] (Cybenko made concrete)."""

from __future__ import annotations

import numpy as np
import pytest

from reference.approximation import fit_function

GRID = np.linspace(0.0, 1.0, 1001).reshape(-1, 1)


def sine(x: np.ndarray) -> np.ndarray:
    return np.sin(2.0 * np.pi * x)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_fits_sine_with_32_hidden_units(seed: int) -> None:
    g = fit_function(sine, 32, np.random.default_rng(seed))
    y = g(GRID)
    assert y.shape == (1001, 1) and y.dtype == np.float64
    assert np.max(np.abs(y - sine(GRID))) < 0.05


def test_f_is_called_with_column_inputs_in_unit_interval() -> None:
    seen: list[np.ndarray] = []

    def f(x: np.ndarray) -> np.ndarray:
        seen.append(x.copy())
        return x**2

    g = fit_function(f, 16, np.random.default_rng(5), steps=300)
    assert seen and all(x.ndim == 2 and x.shape[1] == 1 for x in seen)
    assert all(x.min() >= 0.0 and x.max() <= 1.0 for x in seen)
    assert g(np.array([[0.25], [0.75]])).shape == (2, 1)
    assert np.max(np.abs(g(GRID) - GRID**2)) < 0.05
