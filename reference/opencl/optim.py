"""Optimisers on the OpenCL device (float32), same semantics as ``reference.optim``.

``step(params, grads)`` updates every ``params[key]`` in place from
``grads[key]``. A parameter may be a ``pyopencl.array.Array`` (float32,
contiguous: updated on the device, nothing is copied to the host) or a NumPy
array (uploaded, updated in float32, and written back into the same array).
Gradients may be either kind. The state (momentum buffer, Adam moments) stays
on the device, one set per key. Kernels: ``optim.cl``, one work-item per element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .host import empty, launch_elementwise, to_device


class ParameterError(ValueError):
    """A parameter or gradient that the device optimisers cannot update."""


def _device_param(param: Any) -> Any:
    """The device array that the kernel updates: ``param`` itself when on the device, else a float32 copy."""
    import pyopencl.array as cl_array

    if isinstance(param, cl_array.Array):
        if param.dtype != np.float32 or not param.flags.c_contiguous or param.offset != 0:
            raise ParameterError(
                f"a device parameter must be a contiguous float32 array with no offset, got {param.dtype}"
                " (update it in place: make it with cl_array.to_device(queue, a.astype(np.float32)))"
            )
        return param
    if not isinstance(param, np.ndarray):
        raise ParameterError(
            f"a parameter must be a NumPy or pyopencl array (updated in place), got {type(param).__name__}"
        )
    return to_device(param)[0]


def _write_back(param: Any, updated: Any) -> None:
    """Copy the updated values into a NumPy parameter (a device parameter was updated in place)."""
    if isinstance(param, np.ndarray):
        param[...] = updated.get().reshape(param.shape)


def _gradient(grad: Any, param: Any, key: str) -> Any:
    """grads[key] on the device as float32, with the parameter's shape checked."""
    g, _ = to_device(grad)
    if tuple(g.shape) != tuple(param.shape):
        raise ParameterError(
            f"grads[{key!r}] has shape {tuple(g.shape)}, expected {tuple(param.shape)} (params[{key!r}]'s)"
        )
    return g


def _launch(name: str, n: int, *args: Any) -> None:
    """optim.cl:name(*args, n), one work-item per element."""
    launch_elementwise("optim.cl", name, n, *args)


def _zeros_like(a: Any) -> Any:
    """A float32 device array of zeros shaped like ``a``."""
    z = empty(tuple(a.shape))
    z.fill(np.float32(0.0))
    return z


class SGD:
    """PyTorch's SGD: g = grad + weight_decay * param; b = g (first step) or momentum * b + g; param -= lr * b.

    Without momentum the step is param -= lr * g.
    """

    def __init__(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        self.lr = lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.buffers: dict[str, Any] = {}  # momentum buffers, device arrays

    def step(self, params: dict[str, Any], grads: dict[str, Any]) -> None:
        """Update every params[key] in place (sgd_step or sgd_momentum_step); grads are not modified."""
        for key, param in params.items():
            p = _device_param(param)
            g = _gradient(grads[key], p, key)
            if self.momentum != 0.0:
                first = key not in self.buffers
                if first:
                    self.buffers[key] = empty(tuple(p.shape))
                _launch(
                    "sgd_momentum_step",
                    p.size,
                    p,
                    g,
                    self.buffers[key],
                    float(self.lr),
                    float(self.momentum),
                    float(self.weight_decay),
                    int(first),
                )
            else:
                _launch("sgd_step", p.size, p, g, float(self.lr), float(self.weight_decay))
            _write_back(param, p)


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
        self.m: dict[str, Any] = {}  # first moments, device arrays
        self.v: dict[str, Any] = {}  # second moments, device arrays
        self.t: dict[str, int] = {}

    def step(self, params: dict[str, Any], grads: dict[str, Any]) -> None:
        """Update every params[key] in place (adamw_step); the bias corrections 1 - beta^t are computed in float64."""
        beta1, beta2 = self.betas
        for key, param in params.items():
            p = _device_param(param)
            g = _gradient(grads[key], p, key)
            if key not in self.t:
                self.m[key] = _zeros_like(p)
                self.v[key] = _zeros_like(p)
                self.t[key] = 0
            self.t[key] += 1
            t = self.t[key]
            _launch(
                "adamw_step",
                p.size,
                p,
                g,
                self.m[key],
                self.v[key],
                float(self.lr),
                beta1,
                beta2,
                float(self.eps),
                1.0 - self.lr * self.weight_decay,
                1.0 - beta1**t,
                1.0 - beta2**t,
            )
            _write_back(param, p)
