"""The mistake audit's class: independent student submissions with classic mistakes, for the audit's tests
(tests/mistakes/test_mistake_audit.py) and the benches (bench/audit.py, bench/diagnosis_time.py).

Each submission is the source text of one class as a student writes it in the
exercise file: a subclass of the shipped stub (whose ``__init__`` the stub
provides) with ``forward`` and ``backward`` written from scratch (never
derived from the reference classes), in varied styles (staged graphs,
compact formulas, reshapes, transposes). ``BUGGY`` entries carry one classic
mistake each (CS231n-style) and the misconception id the grader must name on
at least one failing check (None: the bug must cost points but is no
catalogued classic); ``CORRECT`` entries are correct alternatives that must
keep full marks; ``ROUND2``/``ROUND2_CORRECT`` more of each, and ``ROUND3``
two and three mistakes at once. ``grade_student`` grades one in-process
(bench/in_process.py).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.in_process import grade_in_process, stub_namespace, variant_ns


@dataclass(frozen=True)
class Student:
    """One submission: ``key`` names it, ``exercise`` is the id, ``source`` defines class ``Student(Stub)``."""

    key: str
    exercise: str
    source: str
    named: str | None = None
    failing: tuple[str, ...] | None = None  # round 2: exactly these checks fail (one bug costs once)
    also: tuple[str, ...] = ()  # round 2: a second bug's mistake, named in its own checks


BN1, BN2 = "normalization.BatchNorm1d", "normalization.BatchNorm2d"
LN, RMS, GN, IN = (
    "normalization.LayerNorm",
    "normalization.RMSNorm",
    "normalization.GroupNorm",
    "normalization.InstanceNorm2d",
)
LIN = "linear.Linear"
ACT = "activations."

BUGGY: list[Student] = [
    # ------------------------------------------------------------------ BatchNorm1d
    Student(
        "bn1-running-var-biased",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        ax = (0,) if x.ndim == 2 else (0, 2)
        sh = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m < 2:
                raise ValueError("need more than one value per channel")
            mu = x.mean(axis=ax)
            var = x.var(axis=ax)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mu, var = self.running_mean, self.running_var
        self.ax, self.sh, self.mode = ax, sh, self.training
        self.istd = 1.0 / np.sqrt(var.reshape(sh) + self.eps)
        self.xh = (x - mu.reshape(sh)) * self.istd
        return self.gamma.reshape(sh) * self.xh + self.beta.reshape(sh)

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.ax)
        self.dbeta = dout.sum(axis=self.ax)
        g = dout * self.gamma.reshape(self.sh)
        if not self.mode:
            return g * self.istd
        m = dout.size // dout.shape[1]
        return self.istd / m * (m * g - g.sum(axis=self.ax, keepdims=True)
                                - self.xh * (g * self.xh).sum(axis=self.ax, keepdims=True))
""",
        "bn-biased-running-var",
    ),
    Student(
        "bn1-momentum-swapped",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(i for i in range(x.ndim) if i != 1)
        if self.training:
            n = int(np.prod([x.shape[i] for i in axes]))
            if n == 1:
                raise ValueError("batch of one")
            mean = np.mean(x, axis=axes, keepdims=True)
            var = np.var(x, axis=axes, keepdims=True)
            self.running_mean = self.momentum * self.running_mean + (1 - self.momentum) * mean.ravel()
            self.running_var = self.momentum * self.running_var + (1 - self.momentum) * var.ravel() * n / (n - 1)
        else:
            shape = [1] * x.ndim
            shape[1] = -1
            mean = self.running_mean.reshape(shape)
            var = self.running_var.reshape(shape)
        self.cache = (x, mean, var, axes, self.training)
        xhat = (x - mean) / np.sqrt(var + self.eps)
        shape = [1] * x.ndim
        shape[1] = -1
        return self.gamma.reshape(shape) * xhat + self.beta.reshape(shape)

    def backward(self, dout):
        x, mean, var, axes, training = self.cache
        shape = [1] * x.ndim
        shape[1] = -1
        std = np.sqrt(var + self.eps)
        xhat = (x - mean) / std
        self.dgamma = np.sum(dout * xhat, axis=axes)
        self.dbeta = np.sum(dout, axis=axes)
        dxhat = dout * self.gamma.reshape(shape)
        if not training:
            return dxhat / std
        n = x.size // x.shape[1]
        return (n * dxhat - dxhat.sum(axis=axes, keepdims=True)
                - xhat * np.sum(dxhat * xhat, axis=axes, keepdims=True)) / (n * std)
""",
        "bn-momentum-inverted",
    ),
    Student(
        "bn1-eps-outside-sqrt",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.std = (np.sqrt(var) + self.eps).reshape(view)
        self.xhat = (x - mu.reshape(view)) / self.std
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g / self.std
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) / self.std
""",
        "bn-eps-outside-sqrt",
    ),
    Student(
        "bn1-eps-missing",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.std = np.sqrt(var).reshape(view)
        self.xhat = (x - mu.reshape(view)) / self.std
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g / self.std
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) / self.std
""",
        "bn-eps-missing",
    ),
    Student(
        "bn1-train-normalises-with-running-stats",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        self.istd = 1.0 / np.sqrt(self.running_var.reshape(view) + self.eps)
        self.xhat = (x - self.running_mean.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-train-uses-running-stats",
    ),
    Student(
        "bn1-eval-updates-running",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training and m == 1:
            raise ValueError("one value per channel")
        batch_mu = x.mean(axis=axes)
        batch_var = x.var(axis=axes)
        if self.training:
            mu, var = batch_mu, batch_var
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * batch_mu
        self.running_var = (1 - self.momentum) * self.running_var + self.momentum * batch_var * m / (m - 1)
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-eval-updates-running",
    ),
    Student(
        "bn1-eval-uses-batch-stats",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if m == 1:
            raise ValueError("one value per channel")
        mu = x.mean(axis=axes)
        var = x.var(axis=axes)
        if self.training:
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view = axes, view
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-eval-uses-batch-stats",
    ),
    Student(
        "bn1-3d-dgamma-axis0",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = np.sum(dout * self.xhat, axis=0)
        self.dbeta = np.sum(dout, axis=0)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-3d-dgamma-axis0",
    ),
    Student(
        "bn1-backward-missing-mean-term",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.xc = x - mu.reshape(view)
        self.var = var.reshape(view)
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xc / np.sqrt(self.var + self.eps) + self.beta.reshape(view)

    def backward(self, dout):
        std = np.sqrt(self.var + self.eps)
        xhat = self.xc / std
        self.dgamma = (dout * xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        dxhat = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return dxhat / std
        m = dout.size // dout.shape[1]
        dvar = np.sum(dxhat * self.xc * -0.5 * (self.var + self.eps) ** -1.5, axis=self.axes, keepdims=True)
        # dx = dxhat / std + dvar * 2 (x - mu) / m   (the path through mu is forgotten)
        return dxhat / std + dvar * 2.0 * self.xc / m
""",
        "bn-backward-missing-mean-term",
    ),
    Student(
        "bn1-backward-missing-var-term",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.xc = x - mu.reshape(view)
        self.var = var.reshape(view)
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xc / np.sqrt(self.var + self.eps) + self.beta.reshape(view)

    def backward(self, dout):
        std = np.sqrt(self.var + self.eps)
        xhat = self.xc / std
        self.dgamma = (dout * xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        dxhat = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return dxhat / std
        m = dout.size // dout.shape[1]
        dmu = -np.sum(dxhat / std, axis=self.axes, keepdims=True)
        # the variance is treated as a constant: only the path through mu is kept
        return dxhat / std + dmu / m
""",
        "bn-backward-missing-xhat-term",
    ),
    Student(
        "bn1-unbiased-normalisation",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes, ddof=1)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-unbiased-normalisation",
    ),
    Student(
        "bn1-dx-missing-gamma",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        if not self.was_training:
            return dout * self.istd
        m = dout.size // dout.shape[1]
        return self.istd / m * (m * dout - dout.sum(axis=self.axes, keepdims=True)
                                - self.xhat * (dout * self.xhat).sum(axis=self.axes, keepdims=True))
""",
        "bn-dx-missing-gamma",
    ),
    Student(
        "bn1-3d-stats-over-axis0",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        m = x.shape[0]
        if self.training:
            if x.size // x.shape[1] == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=0)
            var = x.var(axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
            if x.ndim == 3:
                mu, var = mu[:, None], var[:, None]
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        self.was_training = self.training
        g, b = (self.gamma, self.beta) if x.ndim == 2 else (self.gamma[:, None], self.beta[:, None])
        return g * self.xhat + b

    def backward(self, dout):
        axes = (0,) if dout.ndim == 2 else (0, 2)
        self.dgamma = (dout * self.xhat).sum(axis=axes)
        self.dbeta = dout.sum(axis=axes)
        g = dout * (self.gamma if dout.ndim == 2 else self.gamma[:, None])
        if not self.was_training:
            return g * self.istd
        return self.istd * (g - g.mean(axis=0) - self.xhat * (g * self.xhat).mean(axis=0))
""",
        "bn-3d-running-stats-axis0",
    ),
    Student(
        "bn1-running-var-count-batch",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        N = x.shape[0]
        if self.training:
            if x.size // x.shape[1] == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * N / (N - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-running-var-count-batch",
    ),
    Student(
        "bn1-backward-count-batch",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        N = dout.shape[0]
        self.dgamma = np.sum(dout * self.xhat, axis=self.axes)
        self.dbeta = np.sum(dout, axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        return (1.0 / N) * self.istd * (N * g - np.sum(g, axis=self.axes, keepdims=True)
                                         - self.xhat * np.sum(g * self.xhat, axis=self.axes, keepdims=True))
""",
        "bn-backward-count-batch",
    ),
    Student(
        "bn1-inplace-centering",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        x -= mu.reshape(view)
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = x * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-inplace-centering",
    ),
    Student(
        "bn1-eval-backward-through-stats",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view = axes, view
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-eval-backward-through-stats",
    ),
    Student(
        "bn1-eval-eps-missing",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
            self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        else:
            mu = self.running_mean
            self.istd = 1.0 / np.sqrt(self.running_var.reshape(view))
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-eval-eps-missing",
    ),
    Student(
        "bn1-3d-mean-without-keepdims",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes, self.was_training = axes, self.training
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma
        if not self.was_training:
            return g * self.istd
        return self.istd * (g - g.mean(axis=self.axes) - self.xhat * (g * self.xhat).mean(axis=self.axes))
""",
        "bn-3d-no-keepdims",
    ),
    Student(
        "bn1-batch-of-one-not-refused",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            unbiased = var * m / max(m - 1, 1)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * unbiased
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        None,
    ),
    # ------------------------------------------------------------------ BatchNorm2d
    Student(
        "bn2-reshape-without-transpose",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        N, C, H, W = x.shape
        x2 = x.reshape(-1, C)
        m = x2.shape[0]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x2.mean(axis=0)
            var = x2.var(axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x2 - mu) * self.istd
        self.was_training = self.training
        return (self.gamma * self.xhat + self.beta).reshape(N, C, H, W)

    def backward(self, dout):
        shape = dout.shape
        d2 = dout.reshape(-1, shape[1])
        self.dgamma = (d2 * self.xhat).sum(axis=0)
        self.dbeta = d2.sum(axis=0)
        g = d2 * self.gamma
        if not self.was_training:
            return (g * self.istd).reshape(shape)
        dx = self.istd * (g - g.mean(axis=0) - self.xhat * (g * self.xhat).mean(axis=0))
        return dx.reshape(shape)
""",
        "bn2d-reshape-without-transpose",
    ),
    Student(
        "bn2-stats-over-axis0",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        if self.training:
            if x.shape[0] * x.shape[2] * x.shape[3] == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=0, keepdims=True)
            var = x.var(axis=0, keepdims=True)
            m = x.shape[0] * x.shape[2] * x.shape[3]
            bmu, bvar = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * bmu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * bvar * m / (m - 1)
        else:
            mu = self.running_mean.reshape(1, -1, 1, 1)
            var = self.running_var.reshape(1, -1, 1, 1)
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        self.was_training = self.training
        return self.gamma.reshape(1, -1, 1, 1) * self.xhat + self.beta.reshape(1, -1, 1, 1)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * self.gamma.reshape(1, -1, 1, 1)
        if not self.was_training:
            return g * self.istd
        return self.istd * (g - g.mean(axis=0, keepdims=True)
                            - self.xhat * (g * self.xhat).mean(axis=0, keepdims=True))
""",
        "bn-stats-axis0-2d",
    ),
    Student(
        "bn2-dgamma-axis0",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        ax = (0, 2, 3)
        m = x.shape[0] * x.shape[2] * x.shape[3]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu, var = x.mean(axis=ax), x.var(axis=ax)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var[None, :, None, None] + self.eps)
        self.xhat = (x - mu[None, :, None, None]) * self.istd
        self.was_training = self.training
        return self.gamma[None, :, None, None] * self.xhat + self.beta[None, :, None, None]

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=0)
        self.dbeta = dout.sum(axis=0)
        g = dout * self.gamma[None, :, None, None]
        if not self.was_training:
            return g * self.istd
        ax = (0, 2, 3)
        return self.istd * (g - g.mean(axis=ax, keepdims=True)
                            - self.xhat * (g * self.xhat).mean(axis=ax, keepdims=True))
""",
        "bn-dgamma-wrong-axes",
    ),
    Student(
        "bn2-dgamma-axes-0-2",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        ax = (0, 2, 3)
        m = x.shape[0] * x.shape[2] * x.shape[3]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu, var = x.mean(axis=ax), x.var(axis=ax)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var[None, :, None, None] + self.eps)
        self.xhat = (x - mu[None, :, None, None]) * self.istd
        self.was_training = self.training
        return self.gamma[None, :, None, None] * self.xhat + self.beta[None, :, None, None]

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2))
        self.dbeta = dout.sum(axis=(0, 2))
        g = dout * self.gamma[None, :, None, None]
        if not self.was_training:
            return g * self.istd
        ax = (0, 2, 3)
        return self.istd * (g - g.mean(axis=ax, keepdims=True)
                            - self.xhat * (g * self.xhat).mean(axis=ax, keepdims=True))
""",
        None,
    ),
    Student(
        "bn2-running-var-biased",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        N, C, H, W = x.shape
        xt = x.transpose(0, 2, 3, 1).reshape(-1, C)
        if self.training:
            if xt.shape[0] == 1:
                raise ValueError("one value per channel")
            mu, var = xt.mean(axis=0), xt.var(axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (xt - mu) * self.istd
        self.was_training = self.training
        y = self.gamma * self.xhat + self.beta
        return y.reshape(N, H, W, C).transpose(0, 3, 1, 2)

    def backward(self, dout):
        N, C, H, W = dout.shape
        d = dout.transpose(0, 2, 3, 1).reshape(-1, C)
        self.dgamma = (d * self.xhat).sum(axis=0)
        self.dbeta = d.sum(axis=0)
        g = d * self.gamma
        if self.was_training:
            dx = self.istd * (g - g.mean(axis=0) - self.xhat * (g * self.xhat).mean(axis=0))
        else:
            dx = g * self.istd
        return dx.reshape(N, H, W, C).transpose(0, 3, 1, 2)
""",
        "bn-biased-running-var-2d",
    ),
    Student(
        "bn2-running-var-count-batch",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        N, C, H, W = x.shape
        xt = x.transpose(0, 2, 3, 1).reshape(-1, C)
        if self.training:
            if xt.shape[0] == 1:
                raise ValueError("one value per channel")
            mu, var = xt.mean(axis=0), xt.var(axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * N / (N - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (xt - mu) * self.istd
        self.was_training = self.training
        y = self.gamma * self.xhat + self.beta
        return y.reshape(N, H, W, C).transpose(0, 3, 1, 2)

    def backward(self, dout):
        N, C, H, W = dout.shape
        d = dout.transpose(0, 2, 3, 1).reshape(-1, C)
        self.dgamma = (d * self.xhat).sum(axis=0)
        self.dbeta = d.sum(axis=0)
        g = d * self.gamma
        if self.was_training:
            dx = self.istd * (g - g.mean(axis=0) - self.xhat * (g * self.xhat).mean(axis=0))
        else:
            dx = g * self.istd
        return dx.reshape(N, H, W, C).transpose(0, 3, 1, 2)
""",
        "bn-running-var-count-batch-2d",
    ),
    Student(
        "bn2-gamma-on-last-axis",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        ax = (0, 2, 3)
        m = x.shape[0] * x.shape[2] * x.shape[3]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=ax, keepdims=True)
            var = x.var(axis=ax, keepdims=True)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu.ravel()
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var.ravel() * m / (m - 1)
        else:
            mu = self.running_mean.reshape(1, -1, 1, 1)
            var = self.running_var.reshape(1, -1, 1, 1)
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        self.was_training = self.training
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        ax = (0, 2, 3)
        self.dgamma = (dout * self.xhat).sum(axis=ax)
        self.dbeta = dout.sum(axis=ax)
        g = dout * self.gamma
        if not self.was_training:
            return g * self.istd
        return self.istd * (g - g.mean(axis=ax, keepdims=True)
                            - self.xhat * (g * self.xhat).mean(axis=ax, keepdims=True))
""",
        "bn-affine-last-axis-2d",
    ),
    # ------------------------------------------------------------------ LayerNorm
    Student(
        "ln-batch-axis",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        self.mu = x.mean(axis=0, keepdims=True)
        self.var = x.var(axis=0, keepdims=True)
        self.xhat = (x - self.mu) / np.sqrt(self.var + self.eps)
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.normalized_shape)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        n = dout.shape[0]
        istd = 1.0 / np.sqrt(self.var + self.eps)
        return istd / n * (n * g - g.sum(axis=0, keepdims=True)
                           - self.xhat * (g * self.xhat).sum(axis=0, keepdims=True))
""",
        "ln-batch-axis",
    ),
    Student(
        "ln-last-axis-only",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        mu = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.normalized_shape)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        return self.istd * (g - g.mean(axis=-1, keepdims=True)
                            - self.xhat * (g * self.xhat).mean(axis=-1, keepdims=True))
""",
        "ln-last-axis-only",
    ),
    Student(
        "ln-mean-without-keepdims",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = np.mean(x, axis=axes)
        var = np.var(x, axis=axes)
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        return self.istd * (g - g.mean(axis=self.axes) - self.xhat * (g * self.xhat).mean(axis=self.axes))
""",
        "ln-no-keepdims",
    ),
    Student(
        "ln-eps-outside-sqrt",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.std = np.sqrt(x.var(axis=axes, keepdims=True)) + self.eps
        self.xhat = (x - mu) / self.std
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        a = self.axes
        return (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True)) / self.std
""",
        "ln-eps-outside-sqrt",
    ),
    Student(
        "ln-unbiased-variance",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        D = int(np.prod(self.normalized_shape))
        mu = x.mean(axis=axes, keepdims=True)
        var = ((x - mu) ** 2).sum(axis=axes, keepdims=True) / (D - 1)
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        a = self.axes
        return self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
""",
        "ln-unbiased-var",
    ),
    Student(
        "ln-dgamma-axis0",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        self.dgamma = np.sum(dout * self.xhat, axis=0)
        self.dbeta = np.sum(dout, axis=0)
        g = dout * self.gamma
        a = self.axes
        return self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
""",
        "ln-dgamma-axis0",
    ),
    Student(
        "ln-backward-missing-var-term",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        return self.istd * (g - g.mean(axis=self.axes, keepdims=True))
""",
        "ln-backward-missing-xhat-term",
    ),
    Student(
        "ln-backward-missing-mean-term",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        return self.istd * (g - self.xhat * (g * self.xhat).mean(axis=self.axes, keepdims=True))
""",
        "ln-backward-missing-mean-term",
    ),
    Student(
        "ln-dx-missing-gamma",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        D = int(np.prod(self.normalized_shape))
        a = self.axes
        return self.istd / D * (D * dout - dout.sum(axis=a, keepdims=True)
                                - self.xhat * (dout * self.xhat).sum(axis=a, keepdims=True))
""",
        "ln-dx-missing-gamma",
    ),
    Student(
        "ln-backward-ignores-stats",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        return dout * self.gamma * self.istd
""",
        "ln-backward-ignores-stats",
    ),
    Student(
        "ln-inplace-centering",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        x -= mu
        self.xhat = x * self.istd
        self.axes = axes
        return self.gamma * self.xhat + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        a = self.axes
        return self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
""",
        "ln-inplace-centering",
    ),
    # ------------------------------------------------------------------ RMSNorm
    Student(
        "rms-subtracts-mean",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        xc = x - x.mean(axis=-1, keepdims=True)
        self.r = np.sqrt((xc ** 2).mean(axis=-1, keepdims=True) + self.eps)
        self.n = xc / self.r
        return self.n * self.gamma

    def backward(self, dout):
        self.dgamma = (dout * self.n).reshape(-1, self.dim).sum(axis=0)
        g = dout * self.gamma
        return (g - g.mean(axis=-1, keepdims=True) - self.n * (g * self.n).mean(axis=-1, keepdims=True)) / self.r
""",
        "rms-subtracts-mean",
    ),
    Student(
        "rms-eps-outside-sqrt",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) + self.eps
        return x / self.rms * self.gamma

    def backward(self, dout):
        x, r = self.x, self.rms
        self.dgamma = np.sum((dout * x / r).reshape(-1, self.dim), axis=0)
        s = np.sum(dout * self.gamma * x, axis=-1, keepdims=True)
        return dout * self.gamma / r - x * s / (self.dim * r ** 3)
""",
        "rms-eps-outside-sqrt",
    ),
    Student(
        "rms-dgamma-axis0",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        self.x_norm = x / self.rms
        return self.x_norm * self.gamma

    def backward(self, dout):
        D = self.x.shape[-1]
        self.dgamma = np.sum(dout * self.x_norm, axis=0)
        dx_norm = dout * self.gamma
        return (dx_norm - self.x_norm * np.mean(dx_norm * self.x_norm, axis=-1, keepdims=True)) / self.rms
""",
        "rms-dgamma-axis0",
    ),
    Student(
        "rms-grad-missing-term",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return x / self.rms * self.gamma

    def backward(self, dout):
        self.dgamma = np.sum((dout * self.x / self.rms).reshape(-1, self.dim), axis=0)
        return dout * self.gamma / self.rms
""",
        "rms-grad-missing-term",
    ),
    Student(
        "rms-eps-missing",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True))
        return x / self.rms * self.gamma

    def backward(self, dout):
        x, r = self.x, self.rms
        self.dgamma = np.sum((dout * x / r).reshape(-1, self.dim), axis=0)
        s = np.sum(dout * self.gamma * x, axis=-1, keepdims=True)
        return dout * self.gamma / r - x * s / (self.dim * r ** 3)
""",
        "rms-eps-missing",
    ),
    Student(
        "rms-grad-missing-1-over-D",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return x / self.rms * self.gamma

    def backward(self, dout):
        x, r = self.x, self.rms
        self.dgamma = np.sum((dout * x / r).reshape(-1, self.dim), axis=0)
        s = np.sum(dout * self.gamma * x, axis=-1, keepdims=True)
        return dout * self.gamma / r - x * s / r ** 3
""",
        "rms-grad-missing-1-over-d",
    ),
    # ------------------------------------------------------------------ GroupNorm
    Student(
        "gn-groups-strided",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        G = self.num_groups
        xs = x.reshape((N, C // G, G) + x.shape[2:])
        ax = (1,) + tuple(range(3, xs.ndim))
        mu = xs.mean(axis=ax, keepdims=True)
        self.istd = 1.0 / np.sqrt(xs.var(axis=ax, keepdims=True) + self.eps)
        self.xhat = ((xs - mu) * self.istd).reshape(x.shape)
        self.ax, self.shape = ax, xs.shape
        view = (1, C) + (1,) * (x.ndim - 2)
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        C = dout.shape[1]
        view = (1, C) + (1,) * (dout.ndim - 2)
        rest = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * self.xhat).sum(axis=rest)
        self.dbeta = dout.sum(axis=rest)
        g = (dout * self.gamma.reshape(view)).reshape(self.shape)
        xh = self.xhat.reshape(self.shape)
        ax = self.ax
        dx = self.istd * (g - g.mean(axis=ax, keepdims=True) - xh * (g * xh).mean(axis=ax, keepdims=True))
        return dx.reshape(dout.shape)
""",
        "gn-groups-strided",
    ),
    Student(
        "gn-per-channel",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        xs = x.reshape(N, C, -1)
        mu = xs.mean(axis=2, keepdims=True)
        self.istd = 1.0 / np.sqrt(xs.var(axis=2, keepdims=True) + self.eps)
        self.xhat = (xs - mu) * self.istd
        self.shape = x.shape
        return (self.gamma[None, :, None] * self.xhat + self.beta[None, :, None]).reshape(x.shape)

    def backward(self, dout):
        N, C = dout.shape[:2]
        d = dout.reshape(N, C, -1)
        self.dgamma = (d * self.xhat).sum(axis=(0, 2))
        self.dbeta = d.sum(axis=(0, 2))
        g = d * self.gamma[None, :, None]
        dx = self.istd * (g - g.mean(axis=2, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=2, keepdims=True))
        return dx.reshape(self.shape)
""",
        "gn-per-channel",
    ),
    Student(
        "gn-single-group",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N = x.shape[0]
        xs = x.reshape(N, -1)
        mu = xs.mean(axis=1, keepdims=True)
        self.istd = 1.0 / np.sqrt(xs.var(axis=1, keepdims=True) + self.eps)
        self.xhat = ((xs - mu) * self.istd).reshape(x.shape)
        view = (1, -1) + (1,) * (x.ndim - 2)
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        N, C = dout.shape[:2]
        view = (1, -1) + (1,) * (dout.ndim - 2)
        rest = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * self.xhat).sum(axis=rest)
        self.dbeta = dout.sum(axis=rest)
        g = (dout * self.gamma.reshape(view)).reshape(N, -1)
        xh = self.xhat.reshape(N, -1)
        dx = self.istd * (g - g.mean(axis=1, keepdims=True) - xh * (g * xh).mean(axis=1, keepdims=True))
        return dx.reshape(dout.shape)
""",
        "gn-single-group",
    ),
    Student(
        "gn-gamma-tiled",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        G = self.num_groups
        S = x[0, 0].size
        xs = x.reshape(N, G, -1)
        mu = xs.mean(axis=2, keepdims=True)
        self.istd = 1.0 / np.sqrt(xs.var(axis=2, keepdims=True) + self.eps)
        self.xhat = (xs - mu) * self.istd
        # per-channel gamma laid out along the grouped axis
        self.g_full = np.tile(self.gamma, S).reshape(1, G, -1)
        b_full = np.tile(self.beta, S).reshape(1, G, -1)
        self.shape = x.shape
        return (self.g_full * self.xhat + b_full).reshape(x.shape)

    def backward(self, dout):
        N, C = dout.shape[:2]
        G = self.num_groups
        d = dout.reshape(N, G, -1)
        S = dout[0, 0].size
        self.dgamma = (d * self.xhat).sum(axis=0).reshape(-1, C).sum(axis=0)
        self.dbeta = d.sum(axis=0).reshape(-1, C).sum(axis=0)
        g = d * self.g_full
        xh = self.xhat
        dx = self.istd * (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True))
        return dx.reshape(self.shape)
""",
        "gn-gamma-tiled",
    ),
    # ------------------------------------------------------------------ InstanceNorm2d
    Student(
        "in-over-channels",
        IN,
        """
class Student(Stub):
    def forward(self, x):
        mu = x.mean(axis=(1, 2, 3), keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=(1, 2, 3), keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        return self.gamma[None, :, None, None] * self.xhat + self.beta[None, :, None, None]

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * self.gamma[None, :, None, None]
        a = (1, 2, 3)
        return self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
""",
        "in-over-channels",
    ),
    Student(
        "in-batch-stats",
        IN,
        """
class Student(Stub):
    def forward(self, x):
        mu = x.mean(axis=(0, 2, 3), keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=(0, 2, 3), keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        return self.gamma[None, :, None, None] * self.xhat + self.beta[None, :, None, None]

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * self.gamma[None, :, None, None]
        a = (0, 2, 3)
        return self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
""",
        "in-batch-stats",
    ),
    Student(
        "in-eps-outside-sqrt",
        IN,
        """
class Student(Stub):
    def forward(self, x):
        mu = x.mean(axis=(2, 3), keepdims=True)
        self.std = np.sqrt(x.var(axis=(2, 3), keepdims=True)) + self.eps
        self.xhat = (x - mu) / self.std
        return self.gamma[None, :, None, None] * self.xhat + self.beta[None, :, None, None]

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * self.gamma[None, :, None, None]
        a = (2, 3)
        return (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True)) / self.std
""",
        "in-eps-outside-sqrt",
    ),
    # ------------------------------------------------------------------ activations
    Student(
        "sigmoid-naive-overflow",
        ACT + "Sigmoid",
        """
class Student(Stub):
    def forward(self, x):
        self.y = 1.0 / (1.0 + np.exp(-x))
        return self.y

    def backward(self, dout):
        return dout * self.y * (1.0 - self.y)
""",
        "sigmoid-overflow",
    ),
    Student(
        "sigmoid-grad-of-input",
        ACT + "Sigmoid",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        z = np.exp(-np.abs(x))
        return np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))

    def backward(self, dout):
        return dout * self.x * (1.0 - self.x)
""",
        "sigmoid-grad-of-input",
    ),
    Student(
        "tanh-derivative-of-x",
        ACT + "Tanh",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return np.tanh(x)

    def backward(self, dout):
        return dout * (1 - self.x ** 2)
""",
        "tanh-grad-of-input",
    ),
    Student(
        "tanh-derivative-not-squared",
        ACT + "Tanh",
        """
class Student(Stub):
    def forward(self, x):
        self.t = np.tanh(x)
        return self.t

    def backward(self, dout):
        return dout * (1 - self.t)
""",
        "tanh-grad-not-squared",
    ),
    Student(
        "relu-grad-one-at-zero",
        ACT + "ReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.mask = x >= 0
        return x * self.mask

    def backward(self, dout):
        return dout * self.mask
""",
        "relu-grad-at-zero",
    ),
    Student(
        "relu-inplace-clamp",
        ACT + "ReLU",
        """
class Student(Stub):
    def forward(self, x):
        x[x < 0] = 0
        self.out = x
        return x

    def backward(self, dout):
        return dout * (self.out > 0)
""",
        "relu-inplace",
    ),
    Student(
        "leaky-slope-on-positive-side",
        ACT + "LeakyReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return np.where(x > 0, self.negative_slope * x, x)

    def backward(self, dout):
        return np.where(self.x > 0, self.negative_slope * dout, dout)
""",
        "leaky-branches-swapped",
    ),
    Student(
        "leaky-grad-like-relu",
        ACT + "LeakyReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return np.maximum(x, self.negative_slope * x)

    def backward(self, dout):
        return dout * (self.x > 0)
""",
        "leaky-grad-like-relu",
    ),
    Student(
        "elu-derivative-y-only",
        ACT + "ELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.y = np.where(x > 0, x, self.alpha * (np.exp(np.minimum(x, 0)) - 1))
        return self.y

    def backward(self, dout):
        return np.where(self.x > 0, dout, dout * self.y)
""",
        "elu-grad-uses-output",
    ),
    Student(
        "elu-exp-everywhere",
        ACT + "ELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return np.where(x > 0, x, self.alpha * (np.exp(x) - 1))

    def backward(self, dout):
        return np.where(self.x > 0, dout, dout * self.alpha * np.exp(np.minimum(self.x, 0)))
""",
        "elu-exp-overflow",
    ),
    Student(
        "elu-derivative-missing-alpha",
        ACT + "ELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return np.where(x > 0, x, self.alpha * np.expm1(np.minimum(x, 0)))

    def backward(self, dout):
        return np.where(self.x > 0, dout, dout * np.exp(np.minimum(self.x, 0)))
""",
        "elu-grad-missing-alpha",
    ),
    Student(
        "gelu-tanh-always",
        ACT + "GELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        c = math.sqrt(2 / math.pi)
        self.t = np.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * x * (1 + self.t)

    def backward(self, dout):
        x, t = self.x, self.t
        c = math.sqrt(2 / math.pi)
        return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x ** 2))
""",
        "gelu-tanh-approx",
    ),
    Student(
        "gelu-derivative-missing-x-pdf",
        ACT + "GELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        if self.approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            return 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3)))
        self.cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x.ravel()]).reshape(x.shape)
        return x * self.cdf

    def backward(self, dout):
        x = self.x
        if self.approximate == "tanh":
            c = math.sqrt(2 / math.pi)
            t = np.tanh(c * (x + 0.044715 * x ** 3))
            return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x ** 2))
        return dout * self.cdf
""",
        "gelu-grad-missing-pdf",
    ),
    Student(
        "silu-derivative-missing-beta",
        ACT + "SiLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        z = self.beta * x
        e = np.exp(-np.abs(z))
        self.s = np.where(z >= 0, 1 / (1 + e), e / (1 + e))
        return x * self.s

    def backward(self, dout):
        s = self.s
        return dout * (s + self.x * s * (1 - s))
""",
        "silu-grad-missing-beta",
    ),
    Student(
        "prelu-dalpha-not-summed",
        ACT + "PReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        a = self.alpha if self.num_parameters == 1 else self.alpha.reshape((1, -1) + (1,) * (x.ndim - 2))
        self.a = a
        return np.where(x > 0, x, a * x)

    def backward(self, dout):
        self.dalpha = np.where(self.x > 0, 0.0, dout * self.x)
        return np.where(self.x > 0, dout, self.a * dout)
""",
        "prelu-dalpha-not-summed",
    ),
    Student(
        "prelu-dalpha-summed-over-axis0",
        ACT + "PReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        a = self.alpha if self.num_parameters == 1 else self.alpha.reshape((1, -1) + (1,) * (x.ndim - 2))
        self.a = a
        return np.where(x > 0, x, a * x)

    def backward(self, dout):
        neg = np.where(self.x > 0, 0.0, dout * self.x)
        if self.num_parameters == 1:
            self.dalpha = np.array([neg.sum()])
        else:
            self.dalpha = neg.sum(axis=0)
        return np.where(self.x > 0, dout, self.a * dout)
""",
        "prelu-dalpha-axis0",
    ),
    Student(
        "prelu-alpha-on-last-axis",
        ACT + "PReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return np.where(x > 0, x, self.alpha * x)

    def backward(self, dout):
        neg = np.where(self.x > 0, 0.0, dout * self.x)
        if self.num_parameters == 1:
            self.dalpha = np.array([neg.sum()])
        else:
            self.dalpha = neg.reshape(-1, self.num_parameters).sum(axis=0)
        return np.where(self.x > 0, dout, self.alpha * dout)
""",
        "prelu-alpha-last-axis",
    ),
    # ------------------------------------------------------------------ Linear
    Student(
        "linear-dW-transposed",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        out = x @ self.W.T
        return out if self.b is None else out + self.b

    def backward(self, dout):
        self.dW = self.x.T @ dout
        if self.b is not None:
            self.db = dout.sum(axis=0)
        return dout @ self.W
""",
        "linear-dW-transposed",
    ),
    Student(
        "linear-db-not-summed",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        out = np.dot(x, self.W.T)
        if self.b is not None:
            out = out + self.b
        return out

    def backward(self, dout):
        self.dW = np.dot(dout.T, self.x)
        if self.b is not None:
            self.db = dout
        return np.dot(dout, self.W)
""",
        "linear-db-not-summed",
    ),
    Student(
        "linear-db-wrong-axis",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        out = np.dot(x, self.W.T)
        if self.b is not None:
            out = out + self.b
        return out

    def backward(self, dout):
        self.dW = np.dot(dout.T, self.x)
        if self.b is not None:
            self.db = np.sum(dout, axis=1)
        return np.dot(dout, self.W)
""",
        "linear-db-wrong-axis",
    ),
    Student(
        "linear-dx-uses-W-transpose",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        out = np.dot(x, self.W.T)
        if self.b is not None:
            out = out + self.b
        return out

    def backward(self, dout):
        self.dW = np.dot(dout.T, self.x)
        if self.b is not None:
            self.db = np.sum(dout, axis=0)
        return np.dot(dout, self.W.T)
""",
        "linear-dx-uses-WT",
    ),
    Student(
        "linear-forward-x-at-W",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        out = x.dot(self.W)
        if self.b is not None:
            out = out + self.b
        return out

    def backward(self, dout):
        self.dW = dout.T.dot(self.x)
        if self.b is not None:
            self.db = dout.sum(axis=0)
        return dout.dot(self.W)
""",
        "linear-forward-no-transpose",
    ),
    Student(
        "linear-dW-averaged",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        out = x @ self.W.T
        return out if self.b is None else out + self.b

    def backward(self, dout):
        N = dout.shape[0]
        self.dW = dout.T @ self.x / N
        if self.b is not None:
            self.db = dout.sum(axis=0)
        return dout @ self.W
""",
        "linear-dW-mean",
    ),
    Student(
        "bn1-momentum-hard-coded",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = 0.9 * self.running_mean + 0.1 * mu
            self.running_var = 0.9 * self.running_var + 0.1 * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-momentum-ignored",
    ),
    Student(
        "bn1-running-stats-never-updated",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            pass
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-running-not-updated",
    ),
    Student(
        "bn1-affine-forgotten",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.xhat

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * self.istd
""",
        "bn-affine-missing",
    ),
    Student(
        "bn1-backward-treats-stats-as-constants",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        self.axes, self.view, self.was_training = axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return g * self.istd
        return g * self.istd
""",
        "bn-backward-ignores-stats",
    ),
    Student(
        "ln-affine-forgotten",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mu = x.mean(axis=axes, keepdims=True)
        self.istd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        self.xhat = (x - mu) * self.istd
        self.axes = axes
        return self.xhat

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.axes)))
        self.dgamma = (dout * self.xhat).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma
        a = self.axes
        return self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
""",
        "ln-affine-missing",
    ),
    Student(
        "rms-l2-norm",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.nrm = np.sqrt(np.sum(x ** 2, axis=-1, keepdims=True) + self.eps)
        return self.gamma * x / self.nrm

    def backward(self, dout):
        x, r = self.x, self.nrm
        self.dgamma = np.sum((dout * x / r).reshape(-1, self.dim), axis=0)
        g = dout * self.gamma
        return g / r - x * np.sum(g * x, axis=-1, keepdims=True) / r ** 3
""",
        "rms-l2-norm",
    ),
    Student(
        "gn-groups-count-swapped",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        xs = x.reshape(N, C // self.num_groups, -1)
        mu = xs.mean(axis=2, keepdims=True)
        self.istd = 1.0 / np.sqrt(xs.var(axis=2, keepdims=True) + self.eps)
        self.xhat = ((xs - mu) * self.istd).reshape(x.shape)
        self.gs = xs.shape
        view = (1, C) + (1,) * (x.ndim - 2)
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        C = dout.shape[1]
        view = (1, C) + (1,) * (dout.ndim - 2)
        rest = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * self.xhat).sum(axis=rest)
        self.dbeta = dout.sum(axis=rest)
        g = (dout * self.gamma.reshape(view)).reshape(self.gs)
        xh = self.xhat.reshape(self.gs)
        dx = self.istd * (g - g.mean(axis=2, keepdims=True) - xh * (g * xh).mean(axis=2, keepdims=True))
        return dx.reshape(dout.shape)
""",
        "gn-groups-count-swapped",
    ),
    Student(
        "gelu-approximate-ignored",
        ACT + "GELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x.ravel()]).reshape(x.shape)
        return x * self.cdf

    def backward(self, dout):
        pdf = np.exp(-0.5 * self.x ** 2) / math.sqrt(2 * math.pi)
        return dout * (self.cdf + self.x * pdf)
""",
        "gelu-approximate-ignored",
    ),
    Student(
        "silu-beta-forgotten",
        ACT + "SiLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        e = np.exp(-np.abs(x))
        self.s = np.where(x >= 0, 1 / (1 + e), e / (1 + e))
        return x * self.s

    def backward(self, dout):
        s = self.s
        return dout * (s + self.x * s * (1 - s))
""",
        "silu-beta-ignored",
    ),
    Student(
        "sigmoid-derivative-y-only",
        ACT + "Sigmoid",
        """
class Student(Stub):
    def forward(self, x):
        z = np.exp(-np.abs(x))
        self.y = np.where(x >= 0, 1 / (1 + z), z / (1 + z))
        return self.y

    def backward(self, dout):
        return dout * self.y
""",
        "sigmoid-grad-incomplete",
    ),
    Student(
        "relu-backward-no-mask",
        ACT + "ReLU",
        """
class Student(Stub):
    def forward(self, x):
        return np.maximum(x, 0)

    def backward(self, dout):
        return dout.copy()
""",
        "relu-backward-identity",
    ),
    Student(
        "linear-bias-forgotten",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        return x @ self.W.T

    def backward(self, dout):
        self.dW = dout.T @ self.x
        if self.b is not None:
            self.db = dout.sum(axis=0)
        return dout @ self.W
""",
        "linear-forward-no-bias",
    ),
    Student(
        "linear-db-averaged",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        y = x @ self.W.T
        return y + self.b if self.b is not None else y

    def backward(self, dout):
        self.dW = dout.T @ self.x
        if self.b is not None:
            self.db = np.mean(dout, axis=0)
        return dout @ self.W
""",
        "linear-db-mean",
    ),
]

CORRECT: list[Student] = [
    Student(
        "bn1-cs231n-staged-graph",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        if x.ndim == 3:
            N, C, L = x.shape
            y = self._fwd2(x.transpose(0, 2, 1).reshape(-1, C))
            return y.reshape(N, L, C).transpose(0, 2, 1)
        return self._fwd2(x)

    def _fwd2(self, x):
        N = x.shape[0]
        if self.training:
            if N == 1:
                raise ValueError("Expected more than 1 value per channel")
            mu = 1.0 / N * np.sum(x, axis=0)
            xmu = x - mu
            sq = xmu ** 2
            var = 1.0 / N * np.sum(sq, axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * N / (N - 1)
        else:
            xmu = x - self.running_mean
            var = self.running_var
        sqrtvar = np.sqrt(var + self.eps)
        ivar = 1.0 / sqrtvar
        xhat = xmu * ivar
        self.cache = (xhat, xmu, ivar, sqrtvar, var, self.training)
        return self.gamma * xhat + self.beta

    def backward(self, dout):
        if dout.ndim == 3:
            N, C, L = dout.shape
            dx = self._bwd2(dout.transpose(0, 2, 1).reshape(-1, C))
            return dx.reshape(N, L, C).transpose(0, 2, 1)
        return self._bwd2(dout)

    def _bwd2(self, dout):
        xhat, xmu, ivar, sqrtvar, var, training = self.cache
        N = dout.shape[0]
        self.dbeta = np.sum(dout, axis=0)
        self.dgamma = np.sum(dout * xhat, axis=0)
        dxhat = dout * self.gamma
        if not training:
            return dxhat * ivar
        divar = np.sum(dxhat * xmu, axis=0)
        dxmu1 = dxhat * ivar
        dsqrtvar = -1.0 / (sqrtvar ** 2) * divar
        dvar = 0.5 * 1.0 / np.sqrt(var + self.eps) * dsqrtvar
        dsq = 1.0 / N * np.ones_like(dout) * dvar
        dxmu2 = 2 * xmu * dsq
        dx1 = dxmu1 + dxmu2
        dmu = -1 * np.sum(dx1, axis=0)
        dx2 = 1.0 / N * np.ones_like(dout) * dmu
        return dx1 + dx2
""",
    ),
    Student(
        "bn2-transpose-reshape",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        N, C, H, W = x.shape
        xt = x.transpose(0, 2, 3, 1).reshape(-1, C)
        m = xt.shape[0]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu, var = xt.mean(axis=0), xt.var(axis=0)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.istd = 1.0 / np.sqrt(var + self.eps)
        self.xhat = (xt - mu) * self.istd
        self.was_training = self.training
        return (self.gamma * self.xhat + self.beta).reshape(N, H, W, C).transpose(0, 3, 1, 2)

    def backward(self, dout):
        N, C, H, W = dout.shape
        d = dout.transpose(0, 2, 3, 1).reshape(-1, C)
        self.dgamma = (d * self.xhat).sum(axis=0)
        self.dbeta = d.sum(axis=0)
        g = d * self.gamma
        if self.was_training:
            dx = self.istd * (g - g.mean(axis=0) - self.xhat * (g * self.xhat).mean(axis=0))
        else:
            dx = g * self.istd
        return dx.reshape(N, H, W, C).transpose(0, 3, 1, 2)
""",
    ),
    Student(
        "ln-flatten-features",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        k = len(self.normalized_shape)
        lead = x.shape[: x.ndim - k]
        x2 = x.reshape(-1, int(np.prod(self.normalized_shape)))
        mu = x2.mean(axis=1, keepdims=True)
        self.istd = 1.0 / np.sqrt(((x2 - mu) ** 2).mean(axis=1, keepdims=True) + self.eps)
        self.xhat = (x2 - mu) * self.istd
        self.shape = x.shape
        return (self.gamma.ravel() * self.xhat + self.beta.ravel()).reshape(x.shape)

    def backward(self, dout):
        d = dout.reshape(self.xhat.shape)
        self.dgamma = (d * self.xhat).sum(axis=0).reshape(self.normalized_shape)
        self.dbeta = d.sum(axis=0).reshape(self.normalized_shape)
        g = d * self.gamma.ravel()
        D = g.shape[1]
        dx = self.istd / D * (D * g - g.sum(axis=1, keepdims=True)
                              - self.xhat * (g * self.xhat).sum(axis=1, keepdims=True))
        return dx.reshape(self.shape)
""",
    ),
    Student(
        "gn-reshape-groups-channels",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        G = self.num_groups
        xs = x.reshape((N, G, C // G) + x.shape[2:])
        ax = tuple(range(2, xs.ndim))
        mu = xs.mean(axis=ax, keepdims=True)
        self.istd = 1.0 / np.sqrt(xs.var(axis=ax, keepdims=True) + self.eps)
        self.xhat = (xs - mu) * self.istd
        self.ax = ax
        view = (1, G, C // G) + (1,) * (x.ndim - 2)
        return (self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)).reshape(x.shape)

    def backward(self, dout):
        N, C = dout.shape[:2]
        G = self.num_groups
        d = dout.reshape(self.xhat.shape)
        sum_axes = (0,) + tuple(range(3, d.ndim))
        self.dgamma = (d * self.xhat).sum(axis=sum_axes).reshape(C)
        self.dbeta = d.sum(axis=sum_axes).reshape(C)
        view = (1, G, C // G) + (1,) * (dout.ndim - 2)
        g = d * self.gamma.reshape(view)
        a = self.ax
        dx = self.istd * (g - g.mean(axis=a, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=a, keepdims=True))
        return dx.reshape(dout.shape)
""",
    ),
    Student(
        "rms-via-x-norm",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.r = np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + self.eps)
        self.n = x / self.r
        return self.gamma * self.n

    def backward(self, dout):
        self.dgamma = np.sum(dout * self.n, axis=tuple(range(dout.ndim - 1)))
        g = dout * self.gamma
        return (g - self.n * np.mean(g * self.n, axis=-1, keepdims=True)) / self.r
""",
    ),
    Student(
        "relu-grad-from-output",
        ACT + "ReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.out = np.maximum(0, x)
        return self.out

    def backward(self, dout):
        return dout * (self.out > 0)
""",
    ),
    Student(
        "elu-grad-y-plus-alpha",
        ACT + "ELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        self.y = np.where(x > 0, x, self.alpha * np.expm1(np.minimum(x, 0)))
        return self.y

    def backward(self, dout):
        return np.where(self.x > 0, dout, dout * (self.y + self.alpha))
""",
    ),
    Student(
        "sigmoid-tanh-identity",
        ACT + "Sigmoid",
        """
class Student(Stub):
    def forward(self, x):
        self.y = 0.5 * (1.0 + np.tanh(0.5 * x))
        return self.y

    def backward(self, dout):
        return dout * self.y * (1 - self.y)
""",
    ),
    Student(
        "prelu-per-channel-loop",
        ACT + "PReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x.copy()
        if self.num_parameters == 1:
            return np.where(x > 0, x, self.alpha[0] * x)
        y = x.copy()
        for c in range(self.num_parameters):
            xc = x[:, c]
            y[:, c] = np.where(xc > 0, xc, self.alpha[c] * xc)
        return y

    def backward(self, dout):
        x = self.x
        neg = x <= 0
        if self.num_parameters == 1:
            self.dalpha = np.array([np.sum(dout[neg] * x[neg])])
            return np.where(neg, self.alpha[0] * dout, dout)
        dx = dout.copy()
        self.dalpha = np.zeros(self.num_parameters)
        for c in range(self.num_parameters):
            m = neg[:, c]
            self.dalpha[c] = np.sum(dout[:, c][m] * x[:, c][m])
            dx[:, c] = np.where(m, self.alpha[c] * dout[:, c], dout[:, c])
        return dx
""",
    ),
    Student(
        "linear-einsum",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = np.array(x, dtype=float)
        y = np.einsum("ni,oi->no", self.x, self.W)
        return y if self.b is None else y + self.b[None, :]

    def backward(self, dout):
        self.dW = np.einsum("no,ni->oi", dout, self.x)
        if self.b is not None:
            self.db = dout.sum(axis=0)
        return np.einsum("no,oi->ni", dout, self.W)
""",
    ),
]


# ---------------------------------------------------------------------- round 2 (issue 13)
# Written from the issue's findings, as students write them: each must lose points in
# exactly the checks listed (``failing``), and name ``named`` and nothing else (None:
# no mistake named at all; a diagnosis is never misleading).

DROP = "dropout.Dropout"
KN = "init.kaiming_normal"

ROUND2: list[Student] = [
    # -- a false pass: mutation checked after every call on every array handed over
    Student(
        "r2-relu-backward-writes-x",
        ACT + "ReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = x
        out = x.copy()
        out[out < 0] = 0
        return out

    def backward(self, dout):
        mask = self.x
        mask[mask > 0] = 1
        mask[mask < 0] = 0
        return dout * mask
""",
        "relu-backward-writes-x",
        ("no_mutation",),
    ),
    Student(
        "r2-relu-backward-edits-dout",
        ACT + "ReLU",
        """
class Student(Stub):
    def forward(self, x):
        self.pos = x > 0
        return np.where(self.pos, x, 0.0)

    def backward(self, dout):
        dout[~self.pos] = 0.0
        return dout
""",
        "relu-backward-writes-dout",
        ("no_mutation",),
    ),
    Student(
        "r2-linear-forward-scales-W-in-place",
        LIN,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x
        y = x @ self.W.T
        return y if self.b is None else y + self.b

    def backward(self, dout):
        self.dW = dout.T @ self.x
        if self.b is not None:
            self.db = dout.sum(0)
            self.b -= 0.0 * self.db + 1e-3   # a stray optimiser step left in backward
        return dout @ self.W
""",
        None,
        ("no_mutation",),
    ),
    # -- one bug costs once: BatchNorm's eval and 3-D update judged on their own
    Student(
        "r2-bn1-biased-running-var-only",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        red = tuple(a for a in range(x.ndim) if a != 1)
        shp = [1] * x.ndim
        shp[1] = x.shape[1]
        if self.training:
            if x.size // x.shape[1] < 2:
                raise ValueError("need at least two values per channel")
            mean = x.mean(axis=red)
            var = ((x - mean.reshape(shp)) ** 2).mean(axis=red)
            self.running_mean = self.running_mean * (1 - self.momentum) + mean * self.momentum
            self.running_var = self.running_var * (1 - self.momentum) + var * self.momentum
        else:
            mean, var = self.running_mean, self.running_var
        self.train_mode, self.red, self.shp = self.training, red, shp
        self.inv = 1 / np.sqrt(var.reshape(shp) + self.eps)
        self.xn = (x - mean.reshape(shp)) * self.inv
        return self.xn * self.gamma.reshape(shp) + self.beta.reshape(shp)

    def backward(self, dout):
        self.dbeta = dout.sum(axis=self.red)
        self.dgamma = (dout * self.xn).sum(axis=self.red)
        dxn = dout * self.gamma.reshape(self.shp)
        if not self.train_mode:
            return dxn * self.inv
        m = dout.size / dout.shape[1]
        return (dxn - dxn.mean(axis=self.red, keepdims=True)
                - self.xn * (dxn * self.xn).mean(axis=self.red, keepdims=True)) * self.inv
""",
        "bn-biased-running-var",
        ("running_var",),
    ),
    Student(
        "r2-bn1-eval-forgets-affine",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        if not self.training:
            self.mode = "eval"
            self.istd = 1.0 / np.sqrt(self.running_var.reshape(view) + self.eps)
            self.view, self.axes = view, axes
            self.xhat = (x - self.running_mean.reshape(view)) * self.istd
            return self.xhat
        m = x.size // x.shape[1]
        if m < 2:
            raise ValueError("one value per channel")
        mu, var = x.mean(axis=axes), x.var(axis=axes)
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
        self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        self.mode, self.view, self.axes = "train", view, axes
        self.istd = 1.0 / np.sqrt(var.reshape(view) + self.eps)
        self.xhat = (x - mu.reshape(view)) * self.istd
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if self.mode == "eval":
            return g * self.istd
        return (g - g.mean(axis=self.axes, keepdims=True)
                - self.xhat * (g * self.xhat).mean(axis=self.axes, keepdims=True)) * self.istd
""",
        "bn-eval-no-affine",
        ("eval_forward",),
    ),
    Student(
        "r2-bn1-biased-var-and-eval-eps-outside",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(i for i in range(x.ndim) if i != 1)
        shape = [1] * x.ndim
        shape[1] = -1
        if self.training:
            if x.size == x.shape[1]:
                raise ValueError("batch of one")
            mu = np.mean(x, axis=axes)
            var = np.var(x, axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
            std = np.sqrt(var + self.eps)
        else:
            mu, var = self.running_mean, self.running_var
            std = np.sqrt(var) + self.eps
        self.c = (x, mu.reshape(shape), std.reshape(shape), axes, shape, self.training)
        xhat = (x - mu.reshape(shape)) / std.reshape(shape)
        return self.gamma.reshape(shape) * xhat + self.beta.reshape(shape)

    def backward(self, dout):
        x, mu, std, axes, shape, training = self.c
        xhat = (x - mu) / std
        self.dgamma = np.sum(dout * xhat, axis=axes)
        self.dbeta = np.sum(dout, axis=axes)
        dxhat = dout * self.gamma.reshape(shape)
        if not training:
            return dxhat / std
        n = x.size // x.shape[1]
        return (n * dxhat - dxhat.sum(axis=axes, keepdims=True)
                - xhat * (dxhat * xhat).sum(axis=axes, keepdims=True)) / (n * std)
""",
        "bn-biased-running-var",
        ("running_var", "eval_forward"),
        ("bn-eval-eps-outside-sqrt",),
    ),
    Student(
        "r2-bn2-momentum-keeps-90-percent",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        N, C, H, W = x.shape
        if self.training:
            if N * H * W == 1:
                raise ValueError("more than one value per channel needed")
            flat = x.transpose(0, 2, 3, 1).reshape(-1, C)
            mu = flat.mean(0)
            var = flat.var(0)
            m = flat.shape[0]
            # the course notes' convention: momentum is how much of the old value is kept
            self.running_mean = self.momentum * self.running_mean + (1 - self.momentum) * mu
            self.running_var = self.momentum * self.running_var + (1 - self.momentum) * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.tr = self.training
        self.inv = (1.0 / np.sqrt(var + self.eps))[None, :, None, None]
        self.xh = (x - mu[None, :, None, None]) * self.inv
        return self.gamma[None, :, None, None] * self.xh + self.beta[None, :, None, None]

    def backward(self, dout):
        ax = (0, 2, 3)
        self.dgamma = (dout * self.xh).sum(ax)
        self.dbeta = dout.sum(ax)
        g = dout * self.gamma[None, :, None, None]
        if not self.tr:
            return g * self.inv
        return self.inv * (g - g.mean(ax, keepdims=True) - self.xh * (g * self.xh).mean(ax, keepdims=True))
""",
        "bn-momentum-inverted-2d",
        ("running_mean", "running_var"),
    ),
    Student(
        "r2-bn1-backward-without-eps",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, -1) if x.ndim == 2 else (1, -1, 1)
        m = x.size // x.shape[1]
        if self.training:
            if m == 1:
                raise ValueError("one value per channel")
            mu = x.mean(axis=axes)
            var = x.var(axis=axes)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mu, var = self.running_mean, self.running_var
        self.var, self.axes, self.view, self.was_training = var.reshape(view), axes, view, self.training
        self.xhat = (x - mu.reshape(view)) / np.sqrt(self.var + self.eps)
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        istd = self.var ** -0.5
        if not self.was_training:
            return g * istd
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xhat).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xhat * mgx) * istd
""",
        "bn-backward-eps-missing",
        None,
    ),
    Student(
        "r2-ln-eps-outside-sqrt-with-its-own-exact-backward",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        xc = x - x.mean(axis=axes, keepdims=True)
        sd = np.sqrt((xc ** 2).mean(axis=axes, keepdims=True))
        s = sd + self.eps
        self.saved = (xc, sd, s, axes)
        return self.gamma * xc / s + self.beta

    def backward(self, dout):
        xc, sd, s, axes = self.saved
        d = int(np.prod([xc.shape[a] for a in axes]))
        lead = tuple(range(xc.ndim - len(axes)))
        self.dgamma = (dout * xc / s).sum(axis=lead)
        self.dbeta = dout.sum(axis=lead)
        g = dout * self.gamma                                # dL/dxhat, xhat = xc / s
        dxc = g / s
        ds = -(g * xc).sum(axis=axes, keepdims=True) / s ** 2
        dvar = ds / (2 * sd)                                 # s = sqrt(var) + eps
        dxc = dxc + dvar * 2 * xc / d
        return dxc - dxc.mean(axis=axes, keepdims=True)      # xc = x - mean(x)
""",
        "ln-eps-outside-sqrt",
        (
            "forward_2d",
            "forward_3d",
            "forward_4d",
            "forward_tuple",
            "forward_batch1",
            "forward_tiny",
            "eval_same_as_train",
        ),
    ),
    # -- names for bugs seen unnamed on real code
    Student(
        "r2-bn2-per-location-crashes-on-buffers",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        if self.training:
            if x.shape[0] * x.shape[2] * x.shape[3] < 2:
                raise ValueError("need two values per channel")
            mu = np.mean(x, axis=0)
            var = np.var(x, axis=0)
            m = x.shape[0]
            self.running_mean = self.momentum * mu + (1 - self.momentum) * self.running_mean
            self.running_var = self.momentum * var * m / (m - 1) + (1 - self.momentum) * self.running_var
        else:
            mu = self.running_mean[:, None, None]
            var = self.running_var[:, None, None]
        self.was_training = self.training
        self.std = np.sqrt(var + self.eps)
        self.xhat = (x - mu) / self.std
        return self.gamma[:, None, None] * self.xhat + self.beta[:, None, None]

    def backward(self, dout):
        self.dgamma = np.sum(dout * self.xhat, axis=(0, 2, 3))
        self.dbeta = np.sum(dout, axis=(0, 2, 3))
        g = dout * self.gamma[:, None, None]
        if not self.was_training:
            return g / self.std
        n = dout.shape[0]
        return (n * g - g.sum(0) - self.xhat * (g * self.xhat).sum(0)) / (n * self.std)
""",
        "bn2d-per-location",
        None,
    ),
    Student(
        "r2-bn2-per-location-keepdims-buffers",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        C = x.shape[1]
        if self.training:
            if x.size // C < 2:
                raise ValueError("need two values per channel")
            mu = x.mean(axis=0, keepdims=True)
            var = x.var(axis=0, keepdims=True)
            m = x.shape[0] * x.shape[2] * x.shape[3]
            self.running_mean = (1 - self.momentum) * self.running_mean.reshape(1, C, 1, 1) + self.momentum * mu
            self.running_var = ((1 - self.momentum) * self.running_var.reshape(1, C, 1, 1)
                                + self.momentum * var * m / (m - 1))
        else:
            mu = self.running_mean.reshape(1, C, 1, 1)
            var = self.running_var.reshape(1, C, 1, 1)
        self.training_step = self.training
        self.inv = 1 / np.sqrt(var + self.eps)
        self.xhat = (x - mu) * self.inv
        return self.gamma.reshape(1, C, 1, 1) * self.xhat + self.beta.reshape(1, C, 1, 1)

    def backward(self, dout):
        C = dout.shape[1]
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * self.gamma.reshape(1, C, 1, 1)
        if not self.training_step:
            return g * self.inv
        return self.inv * (g - g.mean(axis=0, keepdims=True) - self.xhat * (g * self.xhat).mean(axis=0, keepdims=True))
""",
        "bn-stats-axis0-2d",
        None,
    ),
    Student(
        "r2-ln-backward-sums-over-batch",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        k = len(self.normalized_shape)
        self.ax = tuple(range(x.ndim - k, x.ndim))
        mu = x.mean(axis=self.ax, keepdims=True)
        var = x.var(axis=self.ax, keepdims=True)
        self.r = 1.0 / np.sqrt(var + self.eps)
        self.xh = (x - mu) * self.r
        return self.gamma * self.xh + self.beta

    def backward(self, dout):
        lead = tuple(range(dout.ndim - len(self.ax)))
        self.dgamma = np.sum(dout * self.xh, axis=lead)
        self.dbeta = np.sum(dout, axis=lead)
        g = dout * self.gamma
        # the BatchNorm formula pasted over: means over the batch axis
        return self.r * (g - g.mean(axis=0, keepdims=True) - self.xh * (g * self.xh).mean(axis=0, keepdims=True))
""",
        "ln-backward-wrong-axis",
        None,
    ),
    Student(
        "r2-gn-per-location-layernorm",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        G = self.num_groups
        xg = x.reshape((N, G, C // G) + x.shape[2:])
        mu = xg.mean(axis=2, keepdims=True)
        var = xg.var(axis=2, keepdims=True)
        self.inv = 1.0 / np.sqrt(var + self.eps)
        self.xg_hat = (xg - mu) * self.inv
        shape = (1, C) + (1,) * (x.ndim - 2)
        self.shape, self.bshape = x.shape, shape
        return self.gamma.reshape(shape) * self.xg_hat.reshape(x.shape) + self.beta.reshape(shape)

    def backward(self, dout):
        red = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * self.xg_hat.reshape(self.shape)).sum(axis=red)
        self.dbeta = dout.sum(axis=red)
        g = (dout * self.gamma.reshape(self.bshape)).reshape(self.xg_hat.shape)
        return (self.inv * (g - g.mean(axis=2, keepdims=True)
                            - self.xg_hat * (g * self.xg_hat).mean(axis=2, keepdims=True))).reshape(self.shape)
""",
        "gn-per-location",
        None,
    ),
    # -- leniency: inverted dropout is the rescaling; Kaiming's ValueError is required
    Student(
        "r2-dropout-no-rescale",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.keep = None
            return x.copy()
        self.keep = (self.rng.random(x.shape) > self.p).astype(float)
        return x * self.keep

    def backward(self, dout):
        return dout.copy() if self.keep is None else dout * self.keep
""",
        "dropout-no-rescale",
        ("values",),
    ),
    Student(
        "r2-dropout-cs231n-keep-prob",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if self.training:
            self.mask = (self.rng.random(x.shape) < self.p) / self.p   # CS231n: p keeps
            return x * self.mask
        self.mask = None
        return x

    def backward(self, dout):
        if self.mask is None:
            return dout
        return dout * self.mask
""",
        "dropout-p-is-keep-prob",
        None,
    ),
    Student(
        "r2-dropout-gaussian-mask",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.m = None
            return x
        if self.p == 1:
            self.m = np.zeros_like(x)
        else:
            self.m = (self.rng.standard_normal(x.shape) < self.p) / (1 - self.p)
        return x * self.m

    def backward(self, dout):
        return dout if self.m is None else dout * self.m
""",
        "dropout-gaussian-mask",
        None,
    ),
    Student(
        "r2-dropout-precedence-drops-nothing",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.mask = None
            return x
        # meant: (u >= p) / (1 - p); the comparison binds last, so every element is kept
        self.mask = self.rng.random(x.shape) >= self.p / (1 - self.p) * 0
        return x * self.mask

    def backward(self, dout):
        return dout if self.mask is None else dout * self.mask
""",
        None,
        None,
    ),
    Student(
        "r2-dropout-p0-shortcut-leaves-no-mask",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training or self.p == 0:
            return x                       # nothing to drop... but backward needs self.mask
        keep = self.rng.random(x.shape) >= self.p
        self.mask = keep / (1 - self.p) if self.p < 1 else np.zeros_like(x)
        return x * self.mask

    def backward(self, dout):
        if not self.training:
            return dout
        return dout * self.mask
""",
        None,
        ("p_edges",),
    ),
    Student(
        "r2-dropout-2d-only",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.mask = None
            return x.copy()
        rows, cols = x.shape
        keep = self.rng.random((rows, cols)) >= self.p
        self.mask = keep / (1.0 - self.p) if self.p < 1 else np.zeros((rows, cols))
        return x * self.mask

    def backward(self, dout):
        return dout if self.mask is None else dout * self.mask
""",
        "dropout-mask-2d-only",
        None,
    ),
    Student(
        "r2-kaiming-normal-never-raises",
        KN,
        """
def student(fan_in, fan_out, rng, mode="fan_in", negative_slope=0.0):
    fan = fan_out if mode == "fan_out" else fan_in
    std = math.sqrt(2.0 / (1.0 + negative_slope ** 2) / fan)
    return rng.normal(0.0, std, size=(fan_out, fan_in))
""",
        None,
        ("mode_value_error",),
    ),
]

ROUND2_CORRECT: list[Student] = [
    Student(
        "r2-dropout-correct-where",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.scale_mask = None
            return np.array(x, dtype=float)
        u = self.rng.random(x.shape)
        keep = 1.0 / (1.0 - self.p) if self.p < 1 else 0.0
        self.scale_mask = np.where(u >= self.p, keep, 0.0)
        return x * self.scale_mask

    def backward(self, dout):
        return np.array(dout, dtype=float) if self.scale_mask is None else dout * self.scale_mask
""",
    ),
    Student(
        "r2-kaiming-normal-correct",
        KN,
        """
def student(fan_in, fan_out, rng, mode="fan_in", negative_slope=0.0):
    if mode == "fan_in":
        fan = fan_in
    elif mode == "fan_out":
        fan = fan_out
    else:
        raise ValueError("mode must be fan_in or fan_out")
    gain = math.sqrt(2.0 / (1 + negative_slope * negative_slope))
    return rng.standard_normal((fan_out, fan_in)) * (gain / math.sqrt(fan))
""",
    ),
]


BY_KEY = {s.key: s for s in BUGGY + CORRECT + ROUND2 + ROUND2_CORRECT}


def student_class(student: Student | Several) -> Any:
    """The submission's class, named as the exercise's class, built on the stub (nothing from reference).

    For a function exercise (``init.kaiming_normal``) the source defines ``student``, returned as is.
    """
    topic, name = student.exercise.split(".")
    stub = getattr(getattr(stub_namespace(), topic), name)
    scope: dict[str, Any] = {"np": np, "math": math, "Stub": stub}
    exec(compile(textwrap.dedent(student.source), f"<student {student.key}>", "exec"), scope)
    if "student" in scope:
        return scope["student"]
    return type(name, (scope["Student"],), {})


def catalogued(names: set) -> set:
    """The catalogued mistake ids among ``names`` (round 4's generic diagnoses, ``generic-*``, say what kind of wrong
    a result is: they are read in bench/audit.py --generic, never judged here as one of the student's mistakes)."""
    return {n for n in names if n and not n.startswith("generic-")}


def grade_student(student: Student, seed: int) -> list:
    topic, name = student.exercise.split(".")
    return grade_in_process(student.exercise, variant_ns(topic, **{name: student_class(student)}), seed)


# ---------------------------------------------------------------------- round 3: two and three mistakes at once
# Written from scratch as students write them (CS231n-style staged code, compact formulas), never from the
# catalogue's variants. ``named`` is the main mistake, ``also`` the others: every one of them must be named on
# some failing check, nothing else may be, and ``together`` says that some check names two at once ("and also").


@dataclass(frozen=True)
class Several:
    key: str
    exercise: str
    source: str
    mistakes: tuple[str, ...]
    together: bool = False


_BN_TRAIN_HEAD = """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[0], x.shape[1]
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, C) if x.ndim == 2 else (1, C, 1)
        m = x.size // C
"""

ROUND3: list[Several] = [
    Several(
        "r3-bn1-cs231n-biased-and-eps-on-std",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        C = x.shape[1]
        axes = (0,) if x.ndim == 2 else (0, 2)
        view = (1, C) if x.ndim == 2 else (1, C, 1)
        if self.training:
            if x.size // C < 2:
                raise ValueError("need two values per channel")
            sample_mean = x.mean(axis=axes)
            sample_var = x.var(axis=axes)
            self.running_mean = self.momentum * sample_mean + (1 - self.momentum) * self.running_mean
            self.running_var = self.momentum * sample_var + (1 - self.momentum) * self.running_var
            mu, var = sample_mean, sample_var
        else:
            mu, var = self.running_mean, self.running_var
        std = np.sqrt(var) + self.eps          # eps on the standard deviation
        self.xhat = (x - mu.reshape(view)) / std.reshape(view)
        self.std, self.axes, self.view, self.was_training = std.reshape(view), axes, view, self.training
        return self.gamma.reshape(view) * self.xhat + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = np.sum(dout * self.xhat, axis=self.axes)
        self.dbeta = np.sum(dout, axis=self.axes)
        dxhat = dout * self.gamma.reshape(self.view)
        if not self.was_training:
            return dxhat / self.std
        m = dout.size // dout.shape[1]
        return (m * dxhat - dxhat.sum(axis=self.axes, keepdims=True)
                - self.xhat * (dxhat * self.xhat).sum(axis=self.axes, keepdims=True)) / (m * self.std)
""",
        ("bn-biased-running-var", "bn-eps-outside-sqrt"),
    ),
    Several(
        "r3-bn1-biased-and-eval-drops-eps",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        ax = tuple(i for i in range(x.ndim) if i != 1)
        shape = [1] * x.ndim
        shape[1] = -1
        if self.training:
            if x.size // x.shape[1] <= 1:
                raise ValueError("batch too small")
            mean = x.mean(axis=ax, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=ax, keepdims=True)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean.ravel()
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var.ravel()
            inv = 1.0 / np.sqrt(var + self.eps)
        else:
            mean = self.running_mean.reshape(shape)
            inv = 1.0 / np.sqrt(self.running_var.reshape(shape))   # eps forgotten in eval
        self.cache = ((x - mean) * inv, inv, ax, shape, self.training)
        return self.gamma.reshape(shape) * self.cache[0] + self.beta.reshape(shape)

    def backward(self, dout):
        xh, inv, ax, shape, training = self.cache
        self.dgamma = (dout * xh).sum(axis=ax)
        self.dbeta = dout.sum(axis=ax)
        g = dout * self.gamma.reshape(shape)
        if not training:
            return g * inv
        return inv * (g - g.mean(axis=ax, keepdims=True) - xh * (g * xh).mean(axis=ax, keepdims=True))
""",
        ("bn-biased-running-var", "bn-eval-eps-missing"),
    ),
    Several(
        "r3-bn1-three-running-and-eval",
        BN1,
        """
class Student(Stub):
    def forward(self, x):
        if x.ndim == 3:
            flat = x.transpose(0, 2, 1).reshape(-1, x.shape[1])
        else:
            flat = x
        if self.training:
            if flat.shape[0] < 2:
                raise ValueError("one value per channel")
            mu = flat.mean(axis=0)
            var = flat.var(axis=0)
            # momentum weighs the old value, and the biased variance is accumulated
            self.running_mean = self.momentum * self.running_mean + (1 - self.momentum) * mu
            self.running_var = self.momentum * self.running_var + (1 - self.momentum) * var
            std = np.sqrt(var + self.eps)
        else:
            mu = self.running_mean
            std = np.sqrt(self.running_var) + self.eps      # eval: eps outside the root
        xh = (flat - mu) / std
        self.saved = (xh, std, x.shape, self.training)
        out = xh * self.gamma + self.beta
        if x.ndim == 3:
            out = out.reshape(x.shape[0], x.shape[2], x.shape[1]).transpose(0, 2, 1)
        return out

    def backward(self, dout):
        xh, std, shape, training = self.saved
        g = dout.transpose(0, 2, 1).reshape(-1, shape[1]) if len(shape) == 3 else dout
        self.dgamma = (g * xh).sum(axis=0)
        self.dbeta = g.sum(axis=0)
        gg = g * self.gamma
        if training:
            m = gg.shape[0]
            dx = (m * gg - gg.sum(axis=0) - xh * (gg * xh).sum(axis=0)) / (m * std)
        else:
            dx = gg / std
        if len(shape) == 3:
            dx = dx.reshape(shape[0], shape[2], shape[1]).transpose(0, 2, 1)
        return dx
""",
        ("bn-momentum-inverted", "bn-biased-running-var", "bn-eval-eps-outside-sqrt"),
        together=True,
    ),
    Several(
        "r3-bn1-biased-and-eval-centres-twice",
        BN1,
        _BN_TRAIN_HEAD
        + """
        if self.training:
            if m < 2:
                raise ValueError("too few values")
            mu = x.mean(axis=axes).reshape(view)
            var = x.var(axis=axes).reshape(view)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu.ravel()
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var.ravel()
            xc = x - mu
        else:
            xc = x - self.running_mean.reshape(view)
            var = self.running_var.reshape(view)
            xc = xc - self.running_mean.reshape(view)           # centred a second time
        self.ivar = 1.0 / np.sqrt(var + self.eps)
        self.xh = xc * self.ivar
        self.axes, self.view, self.tr = axes, view, self.training
        return self.xh * self.gamma.reshape(view) + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.tr:
            return g * self.ivar
        return self.ivar * (g - g.mean(axis=self.axes, keepdims=True)
                            - self.xh * (g * self.xh).mean(axis=self.axes, keepdims=True))
""",
        ("bn-biased-running-var", "bn-eval-double-mean"),
    ),
    Several(
        "r3-bn1-biased-and-backward-drops-eps",
        BN1,
        _BN_TRAIN_HEAD
        + """
        if self.training:
            if m < 2:
                raise ValueError("too few values")
            mu = x.mean(axis=axes, keepdims=True)
            var = x.var(axis=axes, keepdims=True)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu.ravel()
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var.ravel()
        else:
            mu = self.running_mean.reshape(view)
            var = self.running_var.reshape(view)
        self.var, self.xh = var, (x - mu) / np.sqrt(var + self.eps)
        self.axes, self.view, self.tr = axes, view, self.training
        return self.gamma.reshape(view) * self.xh + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        std = np.sqrt(self.var)                                 # eps forgotten here
        if not self.tr:
            return g / std
        m = dout.size // dout.shape[1]
        return (g - g.sum(axis=self.axes, keepdims=True) / m
                - self.xh * (g * self.xh).sum(axis=self.axes, keepdims=True) / m) / std
""",
        ("bn-biased-running-var", "bn-backward-eps-missing"),
    ),
    Several(
        "r3-bn1-var-plus-eps-accumulated",
        BN1,
        _BN_TRAIN_HEAD
        + """
        if self.training:
            if m < 2:
                raise ValueError("too few values")
            mu = x.mean(axis=axes, keepdims=True)
            var = x.var(axis=axes, keepdims=True) + self.eps      # CS231n: var + eps kept as "the variance"
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu.ravel()
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var.ravel()
            std = np.sqrt(var)
        else:
            mu = self.running_mean.reshape(view)
            std = np.sqrt(self.running_var.reshape(view) + self.eps)
        self.std, self.xh = std, (x - mu) / std
        self.axes, self.view, self.tr = axes, view, self.training
        return self.gamma.reshape(view) * self.xh + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.tr:
            return g / self.std
        return (g - g.mean(axis=self.axes, keepdims=True)
                - self.xh * (g * self.xh).mean(axis=self.axes, keepdims=True)) / self.std
""",
        ("bn-biased-running-var", "bn-running-var-plus-eps"),
        together=True,
    ),
    Several(
        "r3-bn1-no-axis-and-var-minus-eps",
        BN1,
        _BN_TRAIN_HEAD
        + """
        if self.training:
            if m < 2:
                raise ValueError("too few values")
            mu = np.mean(x)                                     # no axis: one number for the whole batch
            var = np.var(x)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
            self.tr_axes = tuple(range(x.ndim))
        else:
            mu = self.running_mean.reshape(view)
            var = self.running_var.reshape(view)
        self.inv = 1.0 / np.sqrt(var - self.eps)                # eps subtracted
        self.xh = (x - mu) * self.inv
        self.axes, self.view, self.tr = axes, view, self.training
        return self.gamma.reshape(view) * self.xh + self.beta.reshape(view)

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.axes)
        self.dbeta = dout.sum(axis=self.axes)
        g = dout * self.gamma.reshape(self.view)
        if not self.tr:
            return g * self.inv
        ax = self.tr_axes
        return self.inv * (g - g.mean(axis=ax, keepdims=True) - self.xh * (g * self.xh).mean(axis=ax, keepdims=True))
""",
        ("bn-stats-no-axis", "bn-eps-subtracted"),
    ),
    Several(
        "r3-bn2d-biased-and-eval-forgets-affine",
        BN2,
        """
class Student(Stub):
    def forward(self, x):
        N, C, H, W = x.shape
        if self.training:
            if N * H * W < 2:
                raise ValueError("too few values")
            mean = x.mean(axis=(0, 2, 3))
            var = x.var(axis=(0, 2, 3))
            self.running_mean = 0.9 * self.running_mean + 0.1 * mean if self.momentum == 0.1 else \\
                (1 - self.momentum) * self.running_mean + self.momentum * mean
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mean, var = self.running_mean, self.running_var
        self.inv = (1.0 / np.sqrt(var + self.eps)).reshape(1, C, 1, 1)
        self.xhat = (x - mean.reshape(1, C, 1, 1)) * self.inv
        self.mode = self.training
        if not self.training:
            return self.xhat                                   # gamma and beta forgotten in eval
        return self.gamma.reshape(1, C, 1, 1) * self.xhat + self.beta.reshape(1, C, 1, 1)

    def backward(self, dout):
        self.dgamma = (dout * self.xhat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * self.gamma.reshape(1, -1, 1, 1)
        if not self.mode:
            return g * self.inv
        mg = g.mean(axis=(0, 2, 3), keepdims=True)
        mgx = (g * self.xhat).mean(axis=(0, 2, 3), keepdims=True)
        return self.inv * (g - mg - self.xhat * mgx)
""",
        ("bn-biased-running-var-2d", "bn-eval-no-affine-2d"),
    ),
    Several(
        "r3-ln-eps-outside-and-dgamma-axis0",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        k = len(self.normalized_shape)
        self.axes = tuple(range(x.ndim - k, x.ndim))
        mu = np.mean(x, axis=self.axes, keepdims=True)
        sd = np.sqrt(np.mean((x - mu) ** 2, axis=self.axes, keepdims=True)) + self.eps
        self.xn = (x - mu) / sd
        self.sd = sd
        return self.xn * self.gamma + self.beta

    def backward(self, dout):
        self.dgamma = np.sum(dout * self.xn, axis=0)        # right for 2-D input only
        self.dbeta = np.sum(dout, axis=0)
        g = dout * self.gamma
        mg = g.mean(axis=self.axes, keepdims=True)
        mgx = (g * self.xn).mean(axis=self.axes, keepdims=True)
        return (g - mg - self.xn * mgx) / self.sd
""",
        ("ln-eps-outside-sqrt", "ln-dgamma-axis0"),
        together=True,
    ),
    Several(
        "r3-ln-backward-batch-mean-and-gamma-outside",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        k = len(self.normalized_shape)
        self.ax = tuple(range(x.ndim - k, x.ndim))
        self.lead = tuple(range(x.ndim - k))
        mu = x.mean(axis=self.ax, keepdims=True)
        self.rstd = 1.0 / np.sqrt(x.var(axis=self.ax, keepdims=True) + self.eps)
        self.xh = (x - mu) * self.rstd
        return self.gamma * self.xh + self.beta

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.lead)
        self.dbeta = dout.sum(axis=self.lead)
        term1 = dout
        term2 = dout.mean(axis=0, keepdims=True)                       # over the batch
        term3 = self.xh * (dout * self.xh).mean(axis=self.ax, keepdims=True)
        return self.gamma * self.rstd * (term1 - term2 - term3)        # gamma outside the sums
""",
        ("ln-dx-mean-over-batch", "ln-dx-gamma-outside"),
        together=True,
    ),
    Several(
        "r3-gn-c-over-g-groups-per-pixel",
        GN,
        """
class Student(Stub):
    def forward(self, x):
        N, C = x.shape[:2]
        G = C // self.num_groups                 # C/G groups ...
        xg = x.reshape((N, G, C // G) + x.shape[2:])
        mu = xg.mean(axis=2, keepdims=True)      # ... and statistics per pixel
        var = xg.var(axis=2, keepdims=True)
        self.inv = 1.0 / np.sqrt(var + self.eps)
        self.xh = (xg - mu) * self.inv
        self.shape = x.shape
        bshape = (1, C) + (1,) * (x.ndim - 2)
        self.bshape = bshape
        return self.gamma.reshape(bshape) * self.xh.reshape(x.shape) + self.beta.reshape(bshape)

    def backward(self, dout):
        axes = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * self.xh.reshape(self.shape)).sum(axis=axes)
        self.dbeta = dout.sum(axis=axes)
        g = (dout * self.gamma.reshape(self.bshape)).reshape(self.xh.shape)
        dx = self.inv * (g - g.mean(axis=2, keepdims=True) - self.xh * (g * self.xh).mean(axis=2, keepdims=True))
        return dx.reshape(self.shape)
""",
        ("gn-groups-count-swapped", "gn-per-location"),
        together=True,
    ),
    Several(
        "r3-rms-eps-outside-and-term-doubled",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = x
        self.r = np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) + self.eps
        return x / self.r * self.gamma

    def backward(self, dout):
        lead = tuple(range(dout.ndim - 1))
        self.dgamma = np.sum(dout * self.x / self.r, axis=lead)
        g = dout * self.gamma
        D = self.x.shape[-1]
        s = np.sum(g * self.x, axis=-1, keepdims=True)
        return g / self.r - 2 * self.x * s / (D * self.r ** 3)    # the 1/2 of d sqrt lost
""",
        ("rms-eps-outside-sqrt", "rms-grad-term-doubled"),
        together=True,
    ),
    # one new mistake each (round 3's catalogue additions), written independently
    Several(
        "r3-ln-dgamma-over-features",
        LN,
        """
class Student(Stub):
    def forward(self, x):
        k = len(self.normalized_shape)
        self.ax = tuple(range(x.ndim - k, x.ndim))
        mu = x.mean(axis=self.ax, keepdims=True)
        self.rstd = 1.0 / np.sqrt(x.var(axis=self.ax, keepdims=True) + self.eps)
        self.xh = (x - mu) * self.rstd
        return self.gamma * self.xh + self.beta

    def backward(self, dout):
        self.dgamma = (dout * self.xh).sum(axis=self.ax)      # over the features
        self.dbeta = dout.sum(axis=self.ax)
        g = dout * self.gamma
        return self.rstd * (g - g.mean(axis=self.ax, keepdims=True)
                            - self.xh * (g * self.xh).mean(axis=self.ax, keepdims=True))
""",
        ("ln-dgamma-feature-axis",),
    ),
    Several(
        "r3-rms-diagonal-jacobian",
        RMS,
        """
class Student(Stub):
    def forward(self, x):
        self.x = np.array(x, dtype=float)
        self.rms = np.sqrt((self.x ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return self.x / self.rms * self.gamma

    def backward(self, dout):
        self.dgamma = (dout * self.x / self.rms).reshape(-1, self.x.shape[-1]).sum(axis=0)
        D = self.x.shape[-1]
        # d y_i / d x_i only
        return dout * self.gamma * (1.0 / self.rms - self.x ** 2 / (D * self.rms ** 3))
""",
        ("rms-dx-diagonal-only",),
    ),
    Several(
        "r3-gelu-half-pdf-term",
        ACT + "GELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = np.array(x, dtype=float)
        if self.approximate == "tanh":
            self.t = np.tanh(np.sqrt(2 / np.pi) * (self.x + 0.044715 * self.x ** 3))
            return 0.5 * self.x * (1 + self.t)
        self.cdf = 0.5 * (1 + np.vectorize(math.erf)(self.x / np.sqrt(2)))
        return self.x * self.cdf

    def backward(self, dout):
        x = self.x
        if self.approximate == "tanh":
            c = np.sqrt(2 / np.pi)
            du = c * (1 + 3 * 0.044715 * x ** 2)
            return dout * (0.5 * (1 + self.t) + 0.25 * x * (1 - self.t ** 2) * du)
        pdf = np.exp(-x ** 2 / 2) / np.sqrt(2 * np.pi)
        return dout * (self.cdf + 0.5 * x * pdf)
""",
        ("gelu-grad-half-pdf-term",),
    ),
    Several(
        "r3-gelu-six-digit-constants",
        ACT + "GELU",
        """
class Student(Stub):
    def forward(self, x):
        self.x = np.array(x, dtype=float)
        if self.approximate == "tanh":
            return 0.5 * self.x * (1 + np.tanh(math.sqrt(2 / math.pi) * (self.x + 0.044715 * self.x ** 3)))
        return self.x * 0.5 * (1 + np.vectorize(math.erf)(self.x / math.sqrt(2)))

    def backward(self, dout):
        x = self.x
        if self.approximate == "tanh":
            t = np.tanh(0.797885 * (x + 0.044715 * x ** 3))
            return dout * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.797885 * (1 + 0.134145 * x * x))
        cdf = 0.5 * (1 + np.vectorize(math.erf)(x * 0.707107))
        return dout * (cdf + x * 0.398942 * np.exp(-0.5 * x * x))
""",
        ("gelu-grad-rounded-constants",),
    ),
    Several(
        "r3-dropout-global-random",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.mask = None
            return x
        if self.p == 1:
            self.mask = np.zeros_like(x)
        else:
            self.mask = (np.random.random(x.shape) >= self.p) / (1 - self.p)
        return x * self.mask

    def backward(self, dout):
        return dout if self.mask is None else dout * self.mask
""",
        ("dropout-ignores-rng",),
    ),
    Several(
        "r3-dropout-rand-below-p-over-p",
        DROP,
        """
class Student(Stub):
    def forward(self, x):
        if not self.training:
            self.mask = None
            return x
        self.mask = self.rng.random(x.shape) < self.p / self.p if self.p > 0 else np.ones(x.shape, dtype=bool)
        return x * self.mask

    def backward(self, dout):
        return dout if self.mask is None else dout * self.mask
""",
        ("dropout-mask-precedence",),
    ),
]
