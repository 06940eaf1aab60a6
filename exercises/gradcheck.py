"""Numerical gradient checking (topic ``gradcheck``).

Follows the course text, §dropout-weight-decay.gradcheck (central
differences and the relative error), and checks backward passes such as
§normalization.batchnorm-backward. Use these
two functions to test your own ``backward`` methods: a correct float64
backward gives rel_error below about 1e-7.

Grade it with ``.venv/bin/grade submit gradcheck`` (one exercise:
``.venv/bin/grade submit gradcheck.numerical_gradient``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def numerical_gradient(
    f: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    dout: np.ndarray,
    h: float = 1e-5,
) -> np.ndarray:
    """Central differences of L(x) = sum(f(x) * dout) with respect to every element of x, step h.

    [guided]
        grad[i] = (L(x + h e_i) - L(x - h e_i)) / (2 h)
    [/guided]

    Returns an array shaped like x; x is unchanged when the function returns.
    [derive]
    Perturb x in place one element at a time (np.ndindex(x.shape) visits
    every index) and put the original value back after each element.
    [/derive]
    """
    # TODO: implement
    raise NotImplementedError("gradcheck.numerical_gradient")


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    """max over elements of abs(a - b) / max(1e-8, abs(a) + abs(b)), as a float.

    The 1e-8 floor keeps two zeros from dividing 0 by 0 (rel_error of two zero
    arrays is 0.0).
    """
    # TODO: implement
    raise NotImplementedError("gradcheck.rel_error")
