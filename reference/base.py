"""The module contract every exercise layer follows (provided: do not edit).

A layer caches what its backward pass needs during ``forward`` and returns
``dx`` from ``backward(dout)``; each learnable parameter ``name`` receives its
gradient in ``d<name>`` (``gamma`` -> ``dgamma``).
"""

from __future__ import annotations

import numpy as np


class Module:
    """Base class of every layer: train/eval switch and ``__call__ = forward``."""

    training: bool = True

    def train(self) -> "Module":
        """Switch to training mode (batch statistics, dropout active); returns self."""
        self.training = True
        return self

    def eval(self) -> "Module":
        """Switch to evaluation mode (running statistics, dropout off); returns self."""
        self.training = False
        return self

    def forward(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError(type(self).__name__ + ".forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        raise NotImplementedError(type(self).__name__ + ".backward")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.forward(x)
