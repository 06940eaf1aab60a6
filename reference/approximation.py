"""Universal approximation made concrete (reference): fit f on [0, 1] with one hidden layer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .activations import Tanh
from .linear import Linear
from .optim import AdamW


def fit_function(
    f: Callable[[np.ndarray], np.ndarray],
    n_hidden: int,
    rng: np.random.Generator,
    steps: int = 2000,
) -> Callable[[np.ndarray], np.ndarray]:
    """Train g(x) = W2 tanh(W1 x + b1) + b2 on the mean squared error against f over a grid of [0, 1].

    Full-batch AdamW (no weight decay) on 256 evenly spaced points, with a cosine
    learning-rate decay from 0.02. The inputs are mapped to [-1, 1] (x -> 2x - 1),
    the first layer's weights are scaled by 3 and its biases drawn from U(-3, 3), so
    that the tanh units' transitions spread over the whole interval from the start.
    Returns g: (N, 1) -> (N, 1).
    """
    x_train = np.linspace(0.0, 1.0, 256).reshape(-1, 1)
    y_train = np.asarray(f(x_train), dtype=np.float64).reshape(-1, 1)
    hidden = Linear(1, n_hidden, rng=rng)
    act = Tanh()
    out = Linear(n_hidden, 1, rng=rng)
    hidden.W *= 3.0
    hidden.b = rng.uniform(-3.0, 3.0, size=n_hidden)
    assert out.b is not None  # Linear has a bias by default
    params = {"W1": hidden.W, "b1": hidden.b, "W2": out.W, "b2": out.b}
    lr_max = 0.02
    optimizer = AdamW(lr=lr_max, weight_decay=0.0)

    def g(x: np.ndarray) -> np.ndarray:
        """The trained network, x (N, 1) in [0, 1] -> (N, 1)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, 1)
        return out.forward(act.forward(hidden.forward(2.0 * x - 1.0)))

    for step in range(steps):
        optimizer.lr = 0.5 * lr_max * (1.0 + np.cos(np.pi * step / steps)) + 1e-4
        pred = g(x_train)
        dpred = 2.0 * (pred - y_train) / len(x_train)
        hidden.backward(act.backward(out.backward(dpred)))
        assert hidden.dW is not None and hidden.db is not None and out.dW is not None and out.db is not None
        optimizer.step(params, {"W1": hidden.dW, "b1": hidden.db, "W2": out.dW, "b2": out.db})
    return g
