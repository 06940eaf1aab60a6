"""Universal approximation made concrete (topic ``approximation``).

Follows the course text, §universal-approximation.theorem (Cybenko's
theorem: one hidden layer of a sigmoidal activation approximates any
continuous function on [0, 1] as closely as you like) and
§universal-approximation.constructive (how units build such functions). Build the network from your own
modules (linear.py, activations.py) and train it with your own optimiser
(optim.py).

Grade it with ``.venv/bin/grade submit approximation`` (or
``.venv/bin/grade submit approximation.fit_function``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def fit_function(
    f: Callable[[np.ndarray], np.ndarray],
    n_hidden: int,
    rng: np.random.Generator,
    steps: int = 2000,
) -> Callable[[np.ndarray], np.ndarray]:
    """Train F(x) = Linear(n_hidden, 1)(act(Linear(1, n_hidden)(x))) to match f on [0, 1].

    f maps an (N, 1) array to an (N, 1) array. Draw every random number from ``rng``.
    [guided]
    Suggested recipe: inputs x on a
    grid of [0, 1] (shape (N, 1)), targets t = f(x); for ``steps`` steps:
    forward, loss = mean((F(x) - t)^2), dout = 2 * (F(x) - t) / N, backward,
    optimiser step on {W1, b1, W2, b2} (Adam-style steps with lr around 1e-2
    converge quickly; weight_decay 0).
    [/guided]

    Returns a callable g: x (N, 1) -> (N, 1) that evaluates the trained
    network. Graded by the largest abs(g(x) - f(x)) on a dense grid of [0, 1].
    """
    # TODO: implement
    raise NotImplementedError("approximation.fit_function")
