"""Reference gradient checking: central differences and the relative error."""

from __future__ import annotations

import numpy as np
import pytest

from reference.gradcheck import numerical_gradient, rel_error


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)], ids=str)
def test_numerical_gradient_of_a_cube(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    x_before = x.copy()
    dout = rng.standard_normal(shape)
    grad = numerical_gradient(lambda v: v**3, x, dout)
    assert grad.shape == shape and grad.dtype == np.float64
    np.testing.assert_allclose(grad, 3 * x_before**2 * dout, rtol=1e-8, atol=1e-9)
    np.testing.assert_array_equal(x, x_before)


def test_numerical_gradient_uses_h() -> None:
    """((x + h)^3 - (x - h)^3) / (2h) = 3x^2 + h^2: the step h shows in the result."""
    x = np.array([1.0, 2.0])
    dout = np.array([1.0, -2.0])
    grad = numerical_gradient(lambda v: v**3, x, dout, h=1e-2)
    np.testing.assert_allclose(grad, (3 * x**2 + 1e-4) * dout, rtol=1e-10)


def test_numerical_gradient_of_a_matrix_product() -> None:
    """f(x) = x A mixes elements: d/dx sum(f(x) * dout) = dout A^T."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4))
    a = rng.standard_normal((4, 2))
    dout = rng.standard_normal((3, 2))
    grad = numerical_gradient(lambda v: v @ a, x, dout)
    np.testing.assert_allclose(grad, dout @ a.T, rtol=1e-7, atol=1e-9)


def test_numerical_gradient_restores_x_when_f_raises() -> None:
    x = np.array([1.0, 2.0])
    calls = []

    def f(v: np.ndarray) -> np.ndarray:
        calls.append(v.copy())
        if len(calls) == 2:
            raise RuntimeError("boom")
        return v

    with pytest.raises(RuntimeError):
        numerical_gradient(f, x, np.ones(2))
    np.testing.assert_array_equal(x, [1.0, 2.0])


def test_rel_error_values() -> None:
    assert rel_error(np.array([1.0]), np.array([1.1])) == pytest.approx(0.1 / 2.1, rel=1e-14)
    assert rel_error(np.array([1.0, 0.0]), np.array([1.0, 0.0])) == 0.0
    assert rel_error(np.zeros(3), np.zeros(3)) == 0.0
    assert rel_error(np.array([0.0]), np.array([1e-10])) == pytest.approx(1e-2)
    # the maximum over elements, not an average
    assert rel_error(np.array([1.0, 1.0]), np.array([1.0, 3.0])) == pytest.approx(0.5)
    assert isinstance(rel_error(np.ones(2), np.ones(2)), float)
