"""Optimisers (topic ``optim``): SGD with momentum and AdamW.

Follows the course text, §dropout-weight-decay.weight-decay (L2 and decoupled
weight decay), with PyTorch's definitions of torch.optim.SGD and
torch.optim.AdamW. Both update a dict of
parameter arrays IN PLACE (``p -= ...`` changes the caller's array;
``params[k] = p - ...`` does not) from a dict of gradients with the same
keys, and never modify the gradients. State (momentum buffers, moments, step
counts) is kept per key.

Grade it with ``.venv/bin/grade submit optim`` (one exercise: ``.venv/bin/grade submit optim.SGD``).
"""

from __future__ import annotations

import numpy as np


class SGD:
    """Stochastic gradient descent with momentum and coupled L2 weight decay.

    momentum multiplies the running buffer (PyTorch's convention): b = momentum * b + g,
    and p -= lr * b. CS231n's sgd_momentum keeps a velocity v = momentum * v - lr * g
    with p += v: the same trajectory when lr is fixed, but here the buffer b holds
    gradients, not steps (it is what weight decay and the first step b = g act on).
    """

    def __init__(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.buffers: dict[str, np.ndarray] = {}

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        """One step of PyTorch's torch.optim.SGD on every key k, p = params[k] updated in place.

        Weight decay is coupled (L2: added to the gradient, before the
        momentum buffer); the buffer holds gradients and is g itself on the
        first step for k.
        [guided]
            g = grads[k] + weight_decay * p          (coupled L2)
            b = g on the first step for k, else b = momentum * b + g
            p -= lr * b                              (in place)

        With momentum = 0 this is plain p -= lr * g.
        [/guided]
        Keep b per key in self.buffers.
        """
        # TODO: implement
        raise NotImplementedError("optim.SGD.step")


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019)."""

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
        """One step of PyTorch's torch.optim.AdamW on every key k, p = params[k] updated in place.

        Decoupled weight decay (applied to p before the Adam update, not added
        to the gradient); bias-corrected moments, t = this key's step count
        (1, 2, ...); m, v start at zeros.
        [guided]
            p *= 1 - lr * weight_decay               (decoupled decay, before the Adam update)
            m = beta1 * m + (1 - beta1) * g          (m, v start at zeros)
            v = beta2 * v + (1 - beta2) * g^2
            m_hat = m / (1 - beta1^t),  v_hat = v / (1 - beta2^t)
            p -= lr * m_hat / (sqrt(v_hat) + eps)    (in place)
        [/guided]

        Keep m, v and t per key in self.m, self.v and self.t.
        """
        # TODO: implement
        raise NotImplementedError("optim.AdamW.step")
