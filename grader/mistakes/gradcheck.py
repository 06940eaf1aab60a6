"""Known mistakes in numerical_gradient and rel_error, each a wrong version of the reference function."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grader.mistakes import Mistake, make

NG, RE = "gradcheck.numerical_gradient", "gradcheck.rel_error"
Fn = Callable[[np.ndarray], np.ndarray]


def one_sided(f: Fn, x: np.ndarray, dout: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """(L(x + h e_i) - L(x)) / h: a forward difference, error O(h)."""
    grad = np.zeros(x.shape)
    base = np.sum(f(x) * dout)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        plus = np.sum(f(x) * dout)
        x[idx] = old
        grad[idx] = (plus - base) / h
    return grad


def not_restored(f: Fn, x: np.ndarray, dout: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """x[i] += h, then x[i] -= 2h, and never put back: x ends shifted by -h."""
    grad = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        x[idx] += h
        plus = np.sum(f(x) * dout)
        x[idx] -= 2 * h
        minus = np.sum(f(x) * dout)
        grad[idx] = (plus - minus) / (2 * h)
    return grad


def ignores_dout(f: Fn, x: np.ndarray, dout: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Central differences of sum(f(x)), as if dout were all ones."""
    return central(f, x, np.ones_like(np.asarray(f(x), dtype=np.float64)), h)


def no_two(f: Fn, x: np.ndarray, dout: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """(L(x + h) - L(x - h)) / h: the central difference not divided by 2h."""
    return 2.0 * central(f, x, dout, h)


def diagonal_only(f: Fn, x: np.ndarray, dout: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Only output i's change times dout[i]: misses outputs that depend on several inputs."""
    grad = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        plus = np.asarray(f(x))[idx]
        x[idx] = old - h
        minus = np.asarray(f(x))[idx]
        x[idx] = old
        grad[idx] = (plus - minus) * dout[idx] / (2 * h)
    return grad


def h_ignored(f: Fn, x: np.ndarray, dout: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Always uses h = 1e-5 whatever h says."""
    return central(f, x, dout, 1e-5)


def central(f: Fn, x: np.ndarray, dout: np.ndarray, h: float) -> np.ndarray:
    """The correct central differences of sum(f(x) * dout)."""
    grad = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        plus = np.sum(f(x) * dout)
        x[idx] = old - h
        minus = np.sum(f(x) * dout)
        x[idx] = old
        grad[idx] = (plus - minus) / (2 * h)
    return grad


def rel_no_floor(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / (|a| + |b|): 0/0 = NaN on zeros (with a warning)."""
    with np.errstate(invalid="warn", divide="warn"):
        return float(np.max(np.abs(a - b) / (np.abs(a) + np.abs(b))))


def rel_mean(a: np.ndarray, b: np.ndarray) -> float:
    """The mean over elements instead of the maximum."""
    return float(np.mean(np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))))


def rel_abs_of_sum(a: np.ndarray, b: np.ndarray) -> float:
    """Denominator |a + b| instead of |a| + |b|: huge for values of opposite signs."""
    return float(np.max(np.abs(a - b) / np.maximum(1e-8, np.abs(a + b))))


def rel_signed(a: np.ndarray, b: np.ndarray) -> float:
    """max (a - b) / max(1e-8, |a| + |b|): the numerator's absolute value forgotten."""
    return float(np.max((a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))))


def rel_global_ratio(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max(1e-8, max(|a| + |b|)): the maximum of the numerators over the maximum of the denominators."""
    return float(np.max(np.abs(a - b)) / max(1e-8, float(np.max(np.abs(a) + np.abs(b)))))


def rel_elementwise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The elementwise errors, not their maximum."""
    return np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))


MISTAKES: list[Mistake] = [
    make(
        "numgrad-one-sided",
        NG,
        "A one-sided difference (f(x + h) - f(x)) / h is used: its error is O(h), not O(h^2).",
        "Use central differences: (L(x + h e_i) - L(x - h e_i)) / (2h).",
        one_sided,
    ),
    make(
        "numgrad-x-not-restored",
        NG,
        "x[i] is left shifted after its two evaluations, so later elements are evaluated at the wrong point"
        " and x is changed when the function returns.",
        "Save old = x[i], evaluate at old + h and old - h, then set x[i] = old.",
        not_restored,
    ),
    make(
        "numgrad-ignores-dout",
        NG,
        "dout is ignored: the differences are of sum(f(x)) instead of sum(f(x) * dout).",
        "Evaluate L = np.sum(f(x) * dout) at x + h e_i and x - h e_i.",
        ignores_dout,
    ),
    make(
        "numgrad-no-2h",
        NG,
        "The central difference is divided by h instead of 2h, doubling the gradient.",
        "grad[i] = (L(x + h e_i) - L(x - h e_i)) / (2 * h).",
        no_two,
    ),
    make(
        "numgrad-diagonal-only",
        NG,
        "Only output i's change is used for x[i], missing outputs that depend on several inputs.",
        "Sum over all outputs: L = np.sum(f(x) * dout).",
        diagonal_only,
    ),
    make(
        "numgrad-h-ignored",
        NG,
        "The step h argument is ignored (a fixed step is used).",
        "Use the h you are given.",
        h_ignored,
    ),
    make(
        "rel-error-no-floor",
        RE,
        "The denominator has no floor, so two zeros give 0/0 = NaN.",
        "Divide by np.maximum(1e-8, np.abs(a) + np.abs(b)).",
        rel_no_floor,
    ),
    make(
        "rel-error-mean",
        RE,
        "The mean over elements is returned instead of the maximum.",
        "Return np.max(...) of the elementwise relative errors.",
        rel_mean,
    ),
    make(
        "rel-error-abs-of-sum",
        RE,
        "The denominator is |a + b| instead of |a| + |b|, which vanishes for values of opposite signs.",
        "Use np.abs(a) + np.abs(b).",
        rel_abs_of_sum,
    ),
    make(
        "rel-error-signed",
        RE,
        "The numerator is a - b instead of |a - b|, so errors where b > a are ignored.",
        "Use np.abs(a - b) in the numerator.",
        rel_signed,
    ),
    make(
        "rel-error-global-ratio",
        RE,
        "The largest difference is divided by the largest denominator, not elementwise.",
        "Divide elementwise, then take the maximum: np.max(np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))).",
        rel_global_ratio,
    ),
    make(
        "rel-error-elementwise",
        RE,
        "The elementwise errors are returned instead of their maximum (one number).",
        "Return float(np.max(...)).",
        rel_elementwise,
    ),
]
