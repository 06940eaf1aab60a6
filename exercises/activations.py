"""Activation functions (topic ``activations``): eight elementwise layers.

Follows the course text, chapter ``activations`` (``grade read
activations.sigmoid-tanh``): §activations.sigmoid-tanh, §activations.relu,
§activations.relu-family, §activations.gelu and §activations.silu. Every layer works on an input of any shape and returns
an array of the same shape. ``forward`` caches what ``backward`` needs;
``backward(dout)`` returns ``dx = dout * f'(x)`` for the last ``forward``.
Never modify an array you are given in place: not x (in forward, nor later
in backward through a reference kept in self: mask = self.x; mask[...] = ...
overwrites the caller's x), not dout in backward. Keep a copy or a boolean
mask (self.mask = x > 0) instead.

Grade it with ``.venv/bin/grade submit activations`` (one exercise:
``.venv/bin/grade submit activations.GELU``).
"""

from __future__ import annotations

import numpy as np

from .base import Module


class Sigmoid(Module):
    """sigmoid(x) = 1 / (1 + e^-x)."""

    def __init__(self) -> None:
        pass

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = 1 / (1 + e^-x), range (0, 1).

        Must not overflow (and must not warn) for abs(x) up to 1e4: e^-x
        overflows for x = -1e4.
        [guided]
        Hint: with z = e^-|x| (always <= 1),
        sigmoid(x) = 1 / (1 + z) for x >= 0 and z / (1 + z) for x < 0.
        [/guided]
        [derive]
        Cache y for backward.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.Sigmoid.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward; never modify dout.

        [guided]
        dx = dout * y * (1 - y), with y = sigmoid(x) from forward.
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.Sigmoid.backward")


class Tanh(Module):
    """tanh(x) = (e^x - e^-x) / (e^x + e^-x)."""

    def __init__(self) -> None:
        pass

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = tanh(x), range (-1, 1) (np.tanh is stable).

        [derive]
        Cache y.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.Tanh.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward; never modify dout.

        [guided]
        dx = dout * (1 - y^2), with y = tanh(x) from forward.
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.Tanh.backward")


class ReLU(Module):
    """ReLU(x) = max(0, x)."""

    def __init__(self) -> None:
        pass

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = max(0, x).

        [derive]
        Cache what backward needs (x, or the mask x > 0).
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.ReLU.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward. The derivative at x = 0 is 0.

        [guided]
        dx = dout where x > 0, else 0.
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.ReLU.backward")


class LeakyReLU(Module):
    """LeakyReLU(x) = x if x > 0 else negative_slope * x."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        self.negative_slope = negative_slope

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x where x > 0, else negative_slope * x.

        [derive]
        Cache x.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.LeakyReLU.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward; never modify dout.

        [guided]
        dx = dout where x > 0, else negative_slope * dout.
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.LeakyReLU.backward")


class PReLU(Module):
    """Parametric ReLU: LeakyReLU with a learned slope alpha (He et al., 2015)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25) -> None:
        self.num_parameters = num_parameters
        self.alpha = np.full(num_parameters, init, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x where x > 0, else alpha * x.

        With num_parameters = 1 the single alpha is shared by every element.
        With num_parameters = C, x has shape (N, C, ...) and alpha[c] applies
        to channel c (axis 1).
        [derive]
        Reshape alpha to (1, C, 1, ..., 1) to broadcast. Cache x.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.PReLU.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * dy/dx for the x of the last forward.

        [guided]
        dx = dout where x > 0, else alpha * dout.
        [/guided]

        Also set self.dalpha = dL/dalpha, shape (num_parameters,) (summed over
        everything when num_parameters = 1, over every axis but axis 1 when
        num_parameters = C).
        [guided]
        dalpha is the sum of dout * x over the elements where x <= 0.
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.PReLU.backward")


class ELU(Module):
    """ELU(x) = x if x > 0 else alpha * (e^x - 1)."""

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x where x > 0, else alpha * (e^x - 1), range (-alpha, inf).

        No overflow warning for x up to 1e4.
        [derive]
        Evaluate e^x only where x <= 0, e.g. np.expm1(np.minimum(x, 0))
        (expm1 is also exact near 0). Cache x.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.ELU.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward; never modify dout.

        [guided]
        dx = dout where x > 0, else dout * alpha * e^x (= dout * (y + alpha)).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.ELU.backward")


class GELU(Module):
    """GELU(x) = x * Phi(x), Phi the standard normal CDF (Hendrycks & Gimpel, 2016)."""

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Exact ("none"): y = x * Phi(x), Phi(x) = 0.5 * (1 + erf(x / sqrt(2))).

        "tanh": y = 0.5 * x * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 x^3).

        [derive]
        numpy has no erf: math.erf works elementwise (np.vectorize(math.erf),
        or np.frompyfunc(math.erf, 1, 1) then .astype(np.float64)); write
        Phi with it. Cache x (and Phi or tanh(u)).
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.GELU.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward, f the exact or the tanh form.

        [guided]
        Exact: dx = dout * (Phi(x) + x * phi(x)), phi(x) = e^(-x^2/2) / sqrt(2 pi).

        "tanh": with t = tanh(u),
        dx = dout * (0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2/pi) * (1 + 3 * 0.044715 x^2)).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.GELU.backward")


class SiLU(Module):
    """Swish / SiLU: x * sigmoid(beta * x) (beta = 1 is SiLU)."""

    def __init__(self, beta: float = 1.0) -> None:
        self.beta = beta

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x * s, s = sigmoid(beta * x).

        Compute the sigmoid without overflow for abs(x) up to 1e4 (see
        Sigmoid.forward).
        [derive]
        Cache x and s.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("activations.SiLU.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout * f'(x) for the x of the last forward; never modify dout.

        [guided]
        dx = dout * (s + beta * x * s * (1 - s)), s = sigmoid(beta * x).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("activations.SiLU.backward")
