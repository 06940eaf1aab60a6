"""Known mistakes in the optimisers, each a self-contained wrong ``SGD`` or ``AdamW``.

The variants subclass the reference classes only for their constructors and
keep their own state, so they do not depend on the reference's internals.
"""

from __future__ import annotations

import numpy as np

from grader.mistakes import Mistake, make
from reference import optim as ref


class PlainSGD(ref.SGD):
    """A correct SGD in pieces: ``direction`` (momentum buffer) and ``apply`` (the update)."""

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        if not hasattr(self, "state"):
            self.state: dict[str, np.ndarray] = {}
        for key in params:
            g = np.asarray(grads[key], dtype=np.float64)
            params[key] = self.apply(params[key], self.direction(key, self.decayed(params[key], g)))

    def decayed(self, param: np.ndarray, g: np.ndarray) -> np.ndarray:
        """g + weight_decay * param (coupled L2)."""
        return g + self.weight_decay * param

    def direction(self, key: str, g: np.ndarray) -> np.ndarray:
        """b = g on the first step, then momentum * b + g."""
        if self.momentum == 0.0:
            return g
        b = self.state.get(key)
        b = g.copy() if b is None else self.momentum * b + g
        self.state[key] = b
        return b

    def apply(self, param: np.ndarray, d: np.ndarray) -> np.ndarray:
        """param -= lr * d, in place; returns param."""
        param -= self.lr * d
        return param


class SGDDampened(PlainSGD):
    """b = momentum * b + (1 - momentum) * g: an exponential average instead of PyTorch's buffer."""

    def direction(self, key: str, g: np.ndarray) -> np.ndarray:
        if self.momentum == 0.0:
            return g
        b = self.state.get(key)
        b = (1.0 - self.momentum) * g if b is None else self.momentum * b + (1.0 - self.momentum) * g
        self.state[key] = b
        return b


class SGDDecoupled(PlainSGD):
    """Weight decay applied to the parameter directly (param *= 1 - lr * wd), outside the momentum buffer."""

    def decayed(self, param: np.ndarray, g: np.ndarray) -> np.ndarray:
        param *= 1.0 - self.lr * self.weight_decay
        return g


class SGDWeightDecayIgnored(PlainSGD):
    """weight_decay is stored but never used."""

    def decayed(self, param: np.ndarray, g: np.ndarray) -> np.ndarray:
        return g


class SGDNotInPlace(PlainSGD):
    """params[key] = param - lr * d: a new array, the caller's array never changes."""

    def apply(self, param: np.ndarray, d: np.ndarray) -> np.ndarray:
        return param - self.lr * d


class SGDNesterov(PlainSGD):
    """Nesterov's update g + momentum * b where plain momentum (b) is asked."""

    def direction(self, key: str, g: np.ndarray) -> np.ndarray:
        b = super().direction(key, g)
        return g + self.momentum * b if self.momentum != 0.0 else g


class SGDMomentumNotKept(PlainSGD):
    """The momentum buffer is recomputed from zero on every step: plain SGD whatever momentum says."""

    def direction(self, key: str, g: np.ndarray) -> np.ndarray:
        self.state.pop(key, None)
        return super().direction(key, g)


class PlainAdamW(ref.AdamW):
    """A correct AdamW in pieces that the variants below override."""

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        if not hasattr(self, "state"):
            self.state: dict[str, list] = {}
            self.count = 0
        self.count += 1
        for key in params:
            g = np.asarray(grads[key], dtype=np.float64)
            if key not in self.state:
                self.state[key] = [np.zeros_like(g), np.zeros_like(g), 0]
            st = self.state[key]
            st[2] += 1
            params[key] = self.update(params[key], g, st, self.t_of(st))

    def t_of(self, st: list) -> int:
        """The step count used in the bias corrections (per parameter)."""
        return st[2]

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        param *= 1.0 - self.lr * self.weight_decay
        st[0] = b1 * st[0] + (1.0 - b1) * g
        st[1] = b2 * st[1] + (1.0 - b2) * g * g
        m_hat = st[0] / (1.0 - b1**t)
        v_hat = st[1] / (1.0 - b2**t)
        param -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return param


class AdamWCoupled(PlainAdamW):
    """Adam with L2: weight_decay * param added to the gradient instead of decoupled decay."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        wd, self.weight_decay = self.weight_decay, 0.0
        try:
            return super().update(param, g + wd * param, st, t)
        finally:
            self.weight_decay = wd


class AdamWNoBiasCorrection(PlainAdamW):
    """m and v used without dividing by 1 - beta^t."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        param *= 1.0 - self.lr * self.weight_decay
        st[0] = b1 * st[0] + (1.0 - b1) * g
        st[1] = b2 * st[1] + (1.0 - b2) * g * g
        param -= self.lr * st[0] / (np.sqrt(st[1]) + self.eps)
        return param


class AdamWTFromZero(PlainAdamW):
    """The bias corrections use the step count before it is incremented (t = 0 on the first step)."""

    def t_of(self, st: list) -> int:
        return st[2] - 1

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return super().update(param, g, st, t)


class AdamWBetasSwapped(PlainAdamW):
    """m averages with beta2 and v with beta1."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        self.betas = (b2, b1)
        try:
            return super().update(param, g, st, t)
        finally:
            self.betas = (b1, b2)


class AdamWUnweightedAverages(PlainAdamW):
    """m = beta1 m + g and v = beta2 v + g^2: the (1 - beta) weights forgotten."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        param *= 1.0 - self.lr * self.weight_decay
        st[0] = b1 * st[0] + g
        st[1] = b2 * st[1] + g * g
        m_hat = st[0] / (1.0 - b1**t)
        v_hat = st[1] / (1.0 - b2**t)
        param -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
        return param


class AdamWNoSqrt(PlainAdamW):
    """m_hat / (v_hat + eps): the square root of v_hat forgotten."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        param *= 1.0 - self.lr * self.weight_decay
        st[0] = b1 * st[0] + (1.0 - b1) * g
        st[1] = b2 * st[1] + (1.0 - b2) * g * g
        m_hat = st[0] / (1.0 - b1**t)
        v_hat = st[1] / (1.0 - b2**t)
        param -= self.lr * m_hat / (v_hat + self.eps)
        return param


class AdamWEpsInsideSqrt(PlainAdamW):
    """sqrt(v_hat + eps) instead of sqrt(v_hat) + eps."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        param *= 1.0 - self.lr * self.weight_decay
        st[0] = b1 * st[0] + (1.0 - b1) * g
        st[1] = b2 * st[1] + (1.0 - b2) * g * g
        m_hat = st[0] / (1.0 - b1**t)
        v_hat = st[1] / (1.0 - b2**t)
        param -= self.lr * m_hat / np.sqrt(v_hat + self.eps)
        return param


class AdamWEpsUnscaled(PlainAdamW):
    """The Adam paper's shortcut: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), step m / (sqrt(v) + eps)."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        b1, b2 = self.betas
        param *= 1.0 - self.lr * self.weight_decay
        st[0] = b1 * st[0] + (1.0 - b1) * g
        st[1] = b2 * st[1] + (1.0 - b2) * g * g
        lr_t = self.lr * np.sqrt(1.0 - b2**t) / (1.0 - b1**t)
        param -= lr_t * st[0] / (np.sqrt(st[1]) + self.eps)
        return param


class AdamWDecayWithoutLr(PlainAdamW):
    """param *= 1 - weight_decay: the decay not multiplied by the learning rate."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        param *= 1.0 - self.weight_decay
        lr_wd, self.weight_decay = self.weight_decay, 0.0
        try:
            return super().update(param, g, st, t)
        finally:
            self.weight_decay = lr_wd


class AdamWDecayAfterUpdate(PlainAdamW):
    """Weight decay applied after the Adam step, to the already updated parameter."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        wd, self.weight_decay = self.weight_decay, 0.0
        try:
            param = super().update(param, g, st, t)
        finally:
            self.weight_decay = wd
        param *= 1.0 - self.lr * wd
        return param


class AdamWStepPerKey(PlainAdamW):
    """One step counter for the optimiser, incremented once per parameter (t grows twice as fast)."""

    def t_of(self, st: list) -> int:
        self.shared_t = getattr(self, "shared_t", 0) + 1
        return self.shared_t


class AdamWNotInPlace(PlainAdamW):
    """params[key] = new array: the caller's array never changes."""

    def update(self, param: np.ndarray, g: np.ndarray, st: list, t: int) -> np.ndarray:
        return super().update(param.copy(), g, st, t)


SGD, ADAMW = "optim.SGD", "optim.AdamW"

MISTAKES: list[Mistake] = [
    make(
        "sgd-momentum-dampened",
        SGD,
        "The momentum buffer is an average b = m b + (1 - m) g; PyTorch's SGD uses b = m b + g.",
        "b = g on the first step, then b = momentum * b + g; param -= lr * b.",
        SGDDampened,
    ),
    make(
        "sgd-decoupled-wd",
        SGD,
        "Weight decay is applied to the parameter directly (decoupled) instead of being added to the gradient.",
        "SGD's weight decay is coupled L2: g = grad + weight_decay * param, before the momentum buffer.",
        SGDDecoupled,
    ),
    make(
        "sgd-wd-ignored",
        SGD,
        "weight_decay is never used.",
        "Add weight_decay * param to the gradient before the momentum buffer.",
        SGDWeightDecayIgnored,
    ),
    make(
        "sgd-not-in-place",
        SGD,
        "params[key] is rebound to a new array, so the caller's parameter arrays never change.",
        "Update in place: param -= lr * b (or params[key][...] = ...).",
        SGDNotInPlace,
    ),
    make(
        "sgd-nesterov",
        SGD,
        "Nesterov's update g + momentum * b is used where plain momentum b is asked.",
        "param -= lr * b with b = momentum * b + g.",
        SGDNesterov,
    ),
    make(
        "sgd-momentum-not-kept",
        SGD,
        "The momentum buffer is not kept between steps, so momentum has no effect.",
        "Store b per parameter (e.g. self.buffers[key]) and update it on every step: b = momentum * b + g.",
        SGDMomentumNotKept,
    ),
    make(
        "adamw-t-from-zero",
        ADAMW,
        "The bias corrections use t = 0 on the first step, dividing by 1 - beta^0 = 0.",
        "Increment the step count first, so the first step uses t = 1.",
        AdamWTFromZero,
    ),
    make(
        "adamw-betas-swapped",
        ADAMW,
        "beta1 and beta2 are swapped: m averages with beta2 and v with beta1.",
        "m = beta1 * m + (1 - beta1) * g; v = beta2 * v + (1 - beta2) * g * g.",
        AdamWBetasSwapped,
    ),
    make(
        "adamw-ema-unweighted",
        ADAMW,
        "The moving averages forget the (1 - beta) weight on the new gradient.",
        "m = beta1 * m + (1 - beta1) * g and v = beta2 * v + (1 - beta2) * g**2.",
        AdamWUnweightedAverages,
    ),
    make(
        "adamw-no-sqrt",
        ADAMW,
        "The update divides by v_hat + eps instead of sqrt(v_hat) + eps.",
        "param -= lr * m_hat / (np.sqrt(v_hat) + eps).",
        AdamWNoSqrt,
    ),
    make(
        "adamw-coupled-wd",
        ADAMW,
        "Weight decay is added to the gradient (Adam with L2), so it is rescaled by the adaptive denominator.",
        "AdamW decouples it: param *= 1 - lr * weight_decay before the Adam update, gradient untouched.",
        AdamWCoupled,
    ),
    make(
        "adamw-no-bias-correction",
        ADAMW,
        "m and v are used without the bias corrections 1 / (1 - beta^t).",
        "m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t), with t the step count from 1.",
        AdamWNoBiasCorrection,
    ),
    make(
        "adamw-eps-inside-sqrt",
        ADAMW,
        "eps is added inside the square root: sqrt(v_hat + eps) instead of sqrt(v_hat) + eps.",
        "param -= lr * m_hat / (np.sqrt(v_hat) + eps).",
        AdamWEpsInsideSqrt,
    ),
    make(
        "adamw-eps-unscaled",
        ADAMW,
        "The bias corrections are folded into the learning rate, so eps is not scaled like PyTorch's.",
        "Divide m_hat by sqrt(v_hat) + eps with m_hat, v_hat bias-corrected (PyTorch's form).",
        AdamWEpsUnscaled,
    ),
    make(
        "adamw-decay-without-lr",
        ADAMW,
        "The decay param *= 1 - weight_decay forgets the learning rate.",
        "param *= 1 - lr * weight_decay.",
        AdamWDecayWithoutLr,
    ),
    make(
        "adamw-decay-after-update",
        ADAMW,
        "Weight decay is applied after the Adam step, to the already updated parameter.",
        "Decay first: param *= 1 - lr * weight_decay, then the Adam update.",
        AdamWDecayAfterUpdate,
    ),
    make(
        "adamw-step-per-key",
        ADAMW,
        "One step counter is incremented once per parameter, so t grows faster than the number of steps.",
        "Count steps per parameter (or once per call to step) and use that t in the bias corrections.",
        AdamWStepPerKey,
    ),
    make(
        "adamw-not-in-place",
        ADAMW,
        "params[key] is rebound to a new array, so the caller's parameter arrays never change.",
        "Update in place: param *= ..., param -= ...",
        AdamWNotInPlace,
    ),
]
