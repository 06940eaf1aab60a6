"""Optimisers (reference): update a dict of parameter arrays in place from a dict of gradients."""

from __future__ import annotations

import numpy as np


class SGD:
    """PyTorch's SGD: g = grad + weight_decay * param; b = g (first step) or momentum * b + g; param -= lr * b.

    Without momentum the step is param -= lr * g.
    """

    def __init__(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.buffers: dict[str, np.ndarray] = {}

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Update every params[key] in place (the caller's arrays change); grads are not modified."""
        for key, param in params.items():
            g = np.asarray(grads[key], dtype=np.float64)
            if self.weight_decay != 0.0:
                g = g + self.weight_decay * param
            if self.momentum != 0.0:
                if key not in self.buffers:
                    self.buffers[key] = np.array(g, dtype=np.float64)
                else:
                    self.buffers[key] = self.momentum * self.buffers[key] + g
                g = self.buffers[key]
            param -= self.lr * g


class AdamW:
    """PyTorch's AdamW (decoupled weight decay), per parameter key:

    param *= 1 - lr * weight_decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    m_hat = m / (1 - b1^t); v_hat = v / (1 - b2^t); param -= lr * m_hat / (sqrt(v_hat) + eps).
    """

    def __init__(
        self,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        self.lr = lr
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = eps
        self.weight_decay = weight_decay
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.t: dict[str, int] = {}

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """Update every params[key] in place (the caller's arrays change); grads are not modified."""
        beta1, beta2 = self.betas
        for key, param in params.items():
            g = np.asarray(grads[key], dtype=np.float64)
            if key not in self.t:
                self.m[key] = np.zeros_like(param, dtype=np.float64)
                self.v[key] = np.zeros_like(param, dtype=np.float64)
                self.t[key] = 0
            self.t[key] += 1
            t = self.t[key]
            param *= 1.0 - self.lr * self.weight_decay
            self.m[key] = beta1 * self.m[key] + (1.0 - beta1) * g
            self.v[key] = beta2 * self.v[key] + (1.0 - beta2) * g * g
            m_hat = self.m[key] / (1.0 - beta1**t)
            v_hat = self.v[key] / (1.0 - beta2**t)
            param -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
