"""The eight activations on the OpenCL device (float32), same contract as ``reference.activations``.

Each class has the CPU reference's name and constructor, ``forward(x)`` and
``backward(dout)``. They take NumPy arrays of any shape (any float dtype,
converted to float32) and return NumPy float32 arrays, or take
``pyopencl.array.Array`` and return device arrays. PReLU keeps ``alpha`` and
sets ``dalpha`` as NumPy float32 arrays. A device input is kept for backward
without a copy (as in ``reference.opencl.normalization``): do not modify it
between forward and backward.

The kernels are in ``activations.cl``: one work-item per element (global n
rounded up to a multiple of ``host.ELEMENTWISE_LOCAL``); PReLU's ``dalpha`` is one
work-group per channel with a tree reduction in local memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Module
from .host import check_dout, empty, kernel, launch_elementwise, local_memory, param, result, run, to_device
from .runtime import reduction_local_size


def _elementwise(name: str, n: int, *args: Any) -> None:
    """Launch ``activations.cl:name(*args, n)``, one work-item per element (floats go as float32, ints as int32)."""
    launch_elementwise("activations.cl", name, n, *args)


class _Elementwise(Module):
    """y = f(x) elementwise by ``<kernel>_forward``; dx = dout f'(x) by ``<kernel>_backward``.

    ``saves_output``: backward reads y (Sigmoid, Tanh) instead of x.
    """

    kernel = ""
    saves_output = False

    def __init__(self) -> None:
        self.saved: Any = None

    def _scalars(self) -> tuple[float, ...]:
        """The kernel's float hyper-parameters, in its argument order."""
        return ()

    def forward(self, x: Any) -> Any:
        """y = f(x), one work-item per element."""
        xd, on_device = to_device(x)
        y = empty(xd.shape)
        _elementwise(self.kernel + "_forward", xd.size, xd, y, *self._scalars())
        self.saved = y if self.saves_output else xd
        if self.saves_output and on_device:
            return y.copy()  # the caller may modify what it gets; backward needs y as it was
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dx = dout f'(x), from the saved x (or y)."""
        dy, on_device = to_device(dout)
        check_dout(dy, self.saved)
        dx = empty(dy.shape)
        _elementwise(self.kernel + "_backward", dy.size, self.saved, dy, dx, *self._scalars())
        return result(dx, on_device)


class Sigmoid(_Elementwise):
    """y = 1 / (1 + e^-x) (through e^-|x|: no overflow); dx = dout y (1 - y)."""

    kernel = "sigmoid"
    saves_output = True


class Tanh(_Elementwise):
    """y = tanh(x); dx = dout (1 - y^2)."""

    kernel = "tanh"
    saves_output = True


class ReLU(_Elementwise):
    """y = max(0, x); dx = dout [x > 0] (0 at x = 0)."""

    kernel = "relu"


class LeakyReLU(_Elementwise):
    """y = x if x > 0 else negative_slope x; dx = dout (1 if x > 0 else negative_slope)."""

    kernel = "leaky_relu"

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def _scalars(self) -> tuple[float, ...]:
        return (float(self.negative_slope),)


class ELU(_Elementwise):
    """y = x if x > 0 else alpha (e^x - 1); dx = dout (1 if x > 0 else alpha e^x)."""

    kernel = "elu"

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = alpha

    def _scalars(self) -> tuple[float, ...]:
        return (float(self.alpha),)


class GELU(_Elementwise):
    """y = x Phi(x) ("none", erf) or 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ("tanh").

    Exact derivative: Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi).
    """

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        super().__init__()
        self.approximate = approximate
        self.kernel = "gelu" if approximate == "none" else "gelu_tanh"


class SiLU(_Elementwise):
    """y = x sigma(beta x) (Swish; beta = 1 is SiLU); dx = dout (s + beta x s (1 - s)), s = sigma(beta x)."""

    kernel = "silu"

    def __init__(self, beta: float = 1.0) -> None:
        super().__init__()
        self.beta = beta

    def _scalars(self) -> tuple[float, ...]:
        return (float(self.beta),)


class PReLU(Module):
    """y = x if x > 0 else alpha x, alpha learned (one value, or one per channel on axis 1).

    dx = dout (1 if x > 0 else alpha); dalpha = sum of dout x over x <= 0
    (per channel when num_parameters > 1: a reduction over every axis but axis 1).
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25) -> None:
        self.num_parameters = num_parameters
        self.alpha = np.full(num_parameters, init, dtype=np.float32)
        self.dalpha: np.ndarray | None = None
        self.cache: dict | None = None

    def _layout(self, shape: tuple[int, ...]) -> tuple[int, int, int]:
        """x viewed as (outer, C, inner): C = num_parameters on axis 1, or C = 1 for a shared alpha."""
        size = int(np.prod(shape, dtype=np.int64))
        if self.num_parameters == 1:
            return size, 1, 1
        if len(shape) < 2 or shape[1] != self.num_parameters:
            raise ValueError(
                f"PReLU with num_parameters={self.num_parameters} expects input (N, "
                f"{self.num_parameters}, ...), got shape {tuple(shape)}"
            )
        inner = int(np.prod(shape[2:], dtype=np.int64))
        return shape[0], self.num_parameters, inner

    def forward(self, x: Any) -> Any:
        """y = x where x > 0, alpha[c] x elsewhere, c = (i / inner) % C."""
        outer, C, inner = self._layout(tuple(x.shape))
        xd, on_device = to_device(x)
        y = empty(xd.shape)
        _elementwise("prelu_forward", xd.size, xd, param(self.alpha), y, C, inner)
        self.cache = {"x": xd, "layout": (outer, C, inner)}
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dx = dout (1 if x > 0 else alpha[c]); dalpha[c] by one work-group per channel."""
        if self.cache is None:
            raise RuntimeError("backward called before forward")
        xd, (outer, C, inner) = self.cache["x"], self.cache["layout"]
        dy, on_device = to_device(dout)
        check_dout(dy, xd)
        dx = empty(xd.shape)
        dalpha = empty((C,))
        _elementwise("prelu_backward", xd.size, xd, param(self.alpha), dy, dx, C, inner)
        L = reduction_local_size(outer * inner)
        run(
            kernel("activations.cl", "prelu_dalpha"),
            (C * L,),
            (L,),
            xd,
            dy,
            dalpha,
            C,
            inner,
            outer,
            local_memory(L),
        )
        self.dalpha = dalpha.get().reshape(self.alpha.shape)
        return result(dx, on_device)
