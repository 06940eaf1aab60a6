"""Inverted dropout (topic ``dropout``).

Follows the course text, §dropout-weight-decay.dropout (inverted dropout and
why dividing by 1 - p keeps the expectation) and
§dropout-weight-decay.dropout-ensemble (the ensemble view).
The constructor is written for you; implement ``forward`` and ``backward``.

Grade it with ``.venv/bin/grade submit dropout`` (or ``.venv/bin/grade submit dropout.Dropout``).
"""

from __future__ import annotations

import numpy as np

from .base import Module


class Dropout(Module):
    """Zero each element with probability p in training; identity in eval.

    p is the probability of DROPPING an element (PyTorch's convention):
    p = 0.2 keeps 80%. CS231n's assignment uses p as the probability of
    keeping (mask = rand < p, then / p): not here. 0 <= p <= 1, else ValueError.
    """

    def __init__(self, p: float = 0.5, rng: np.random.Generator | None = None) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability p must be between 0 and 1, got {p}")
        self.p = p
        self.rng = rng if rng is not None else np.random.default_rng()

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Training: inverted dropout, each element kept with probability 1 - p.

        [guided]
        y = x * r / (1 - p), r ~ Bernoulli(1 - p) elementwise.
        [/guided]

        Draw a fresh mask from self.rng on every call, uniforms of the full
        shape of x (keep where self.rng.random(x.shape) >= p; any x.ndim).
        Kept elements are rescaled so that E[y] = x (inverted dropout).
        p = 1 drops everything: return zeros with no NaN and no warning (do
        not divide by 1 - p = 0); p = 0 returns x. Never modify x in place.
        [derive]
        Cache the scaled mask r / (1 - p) for backward.
        [/derive]
        Eval (self.training False): y = x, and backward is the identity.
        """
        # TODO: implement
        raise NotImplementedError("dropout.Dropout.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dL/dx through the mask of the last forward (dx = dout in eval); dout is not modified.

        [guided]
        dx = dout * r / (1 - p).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("dropout.Dropout.backward")
