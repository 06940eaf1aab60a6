"""Known mistakes in the activations, each a wrong subclass of the reference layer."""

from __future__ import annotations

import math

import numpy as np

from grader.mistakes import Mistake, make
from reference import activations as ref


class SigmoidOverflow(ref.Sigmoid):
    """The naive formula: e^-x overflows (with a warning) for x = -1e4."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.out = 1.0 / (1.0 + np.exp(-x))
        return self.out


class SigmoidGradOfInput(ref.Sigmoid):
    """dx = dout * x (1 - x): the derivative formula applied to x instead of y."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return super().forward(x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * self.x * (1.0 - self.x)


class TanhGradOfInput(ref.Tanh):
    """dx = dout * (1 - x^2) instead of 1 - y^2."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return super().forward(x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * (1.0 - self.x**2)


class ReLUGradAtZero(ref.ReLU):
    """Derivative 1 at x = 0 (x >= 0 instead of x > 0)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        return np.where(self.x >= 0, dout, 0.0)


class ReLUInPlace(ref.ReLU):
    """Clamps the caller's array in place."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        np.maximum(x, 0.0, out=x)
        return x


class ReLUBackwardWritesX(ref.ReLU):
    """Keeps the caller's x (no copy) and builds backward's mask in it: mask = self.x; mask[...] = 0 / 1."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = x
        return np.maximum(x, 0.0)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        mask = self.x
        assert mask is not None  # set by forward
        mask[mask > 0] = 1.0
        mask[mask < 0] = 0.0
        return dout * mask


class LeakySlopeIgnored(ref.LeakyReLU):
    """Uses the default slope 0.01 whatever negative_slope says."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, 0.01 * self.x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, 0.01 * dout)


class LeakyGradLikeReLU(ref.LeakyReLU):
    """Backward copied from ReLU: zero gradient for x <= 0."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, 0.0)


class PReLUDalphaNotSummed(ref.PReLU):
    """dalpha = dout * x elementwise (shape of x) instead of its sum over the shared axes."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        dx = super().backward(dout)
        self.dalpha = np.where(self.x > 0, 0.0, dout * self.x)
        return dx


class PReLUDalphaAllElements(ref.PReLU):
    """dalpha sums dout * x over every element, positive ones included."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        dx = super().backward(dout)
        full = dout * self.x
        if self.num_parameters > 1:
            axes = tuple(a for a in range(self.x.ndim) if a != 1)
            self.dalpha = full.sum(axis=axes)
        else:
            self.dalpha = np.array([full.sum()])
        return dx


class ELUGradMissingAlpha(ref.ELU):
    """dx = dout * e^x for x <= 0: alpha forgotten in the derivative."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, dout * np.exp(np.minimum(self.x, 0.0)))


class ELUExpOverflow(ref.ELU):
    """alpha (e^x - 1) evaluated on every element: e^x overflows (with a warning) for x = 1e4."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, self.alpha * (np.exp(self.x) - 1.0))


class ELUBackwardExpOverflow(ref.ELU):
    """backward evaluates alpha e^x on every element: e^x overflows (with a warning) for x = 1e4 although
    np.where then picks dout there (the forward is right)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, dout, dout * self.alpha * np.exp(self.x))


class GELUTanhApprox(ref.GELU):
    """The tanh approximation where the exact x Phi(x) is asked."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__("tanh")


class GELUApproximateIgnored(ref.GELU):
    """approximate="tanh" ignored: always the exact GELU."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__("none")


class GELUGradMissingPdf(ref.GELU):
    """dx = dout * Phi(x): the x phi(x) term of the product rule is missing."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        if self.approximate == "tanh":
            return super().backward(dout)
        cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in self.x.ravel()]).reshape(self.x.shape))
        return dout * cdf


class SiLUBetaIgnored(ref.SiLU):
    """x sigma(x) whatever beta says."""

    def __init__(self, beta: float = 1.0) -> None:
        super().__init__(1.0)


class SiLUGradProductRule(ref.SiLU):
    """dx = dout * sigma(beta x): the derivative of sigma(beta x) is forgotten."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * self.s


class SigmoidGradIncomplete(ref.Sigmoid):
    """dx = dout * y: the (1 - y) factor of the derivative is missing."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * self.out


class TanhGradNotSquared(ref.Tanh):
    """dx = dout * (1 - y) instead of 1 - y^2."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.out is not None  # set by forward
        return dout * (1.0 - self.out)


class ReLUBackwardIdentity(ref.ReLU):
    """dx = dout everywhere: the mask is forgotten."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return np.array(dout, dtype=np.float64)


class PReLUSharedAlpha(ref.PReLU):
    """alpha[0] used for every channel even when num_parameters = C."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, self.alpha[0] * self.x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        negative = np.where(self.x > 0, 0.0, dout * self.x)
        self.dalpha = np.full(self.num_parameters, negative.sum())
        return np.where(self.x > 0, dout, self.alpha[0] * dout)


class ELUGradUsesOutput(ref.ELU):
    """dx = dout * y for x <= 0: the derivative alpha e^x = y + alpha is missing its + alpha."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        y = self.alpha * np.expm1(np.minimum(self.x, 0.0))
        return np.where(self.x > 0, dout, dout * y)


class ELUAlphaIgnored(ref.ELU):
    """alpha = 1 whatever the constructor got."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__(1.0)


def _exact_phi(x: np.ndarray, scale: float) -> np.ndarray:
    """0.5 (1 + erf(x / scale)) elementwise."""
    flat = [math.erf(v / scale) for v in np.ravel(x)]
    return 0.5 * (1.0 + np.array(flat, dtype=np.float64).reshape(np.shape(x)))


class GELUSigmoidApprox(ref.GELU):
    """x sigma(1.702 x) where the exact GELU is asked."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if self.approximate == "tanh":
            return super().forward(x)
        self.x = np.array(x, dtype=np.float64)
        z = np.exp(-np.abs(1.702 * self.x))
        self.s = np.where(self.x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))
        return self.x * self.s

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.s is not None  # set by forward
        assert self.x is not None  # set by forward
        if self.approximate == "tanh":
            return super().backward(dout)
        return dout * (self.s + 1.702 * self.x * self.s * (1.0 - self.s))


class GELUErfMissingSqrt2(ref.GELU):
    """Phi(x) = 0.5 (1 + erf(x)): the division by sqrt(2) is missing."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if self.approximate == "tanh":
            return super().forward(x)
        self.x = np.array(x, dtype=np.float64)
        return self.x * _exact_phi(self.x, 1.0)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if self.approximate == "tanh":
            return super().backward(dout)
        x = self.x
        assert x is not None  # set by forward
        return dout * (_exact_phi(x, 1.0) + x * np.exp(-(x**2)) / math.sqrt(math.pi))


class GELUTanhNoCubic(ref.GELU):
    """The tanh form without its 0.044715 x^3 term."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if self.approximate != "tanh":
            return super().forward(x)
        self.x = np.array(x, dtype=np.float64)
        return 0.5 * self.x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * self.x))

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        if self.approximate != "tanh":
            return super().backward(dout)
        c = math.sqrt(2.0 / math.pi)
        t = np.tanh(c * self.x)
        return dout * (0.5 * (1.0 + t) + 0.5 * self.x * (1.0 - t**2) * c)


class ReLUBackwardWritesDout(ref.ReLU):
    """dx = dout; dx[x <= 0] = 0: the mask is written into the caller's dout (dx is dout, not a copy)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        dx = dout
        dx[self.x <= 0] = 0.0
        return dx


class GELUGradHalfPdfTerm(ref.GELU):
    """The derivative with half its x phi(x) term: Phi(x) + x phi(x) / 2 (tanh form: the same half)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        x = self.x
        assert x is not None  # set by forward
        if self.approximate == "tanh":
            c = math.sqrt(2.0 / math.pi)
            t = np.tanh(c * (x + 0.044715 * x**3))
            return dout * (0.5 * (1.0 + t) + 0.25 * x * (1.0 - t**2) * c * (1.0 + 3.0 * 0.044715 * x**2))
        return dout * (ref._phi_cdf(x) + 0.5 * x * np.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi))


class GELUGradRoundedConstants(ref.GELU):
    """backward's constants rounded to six digits: 0.707107 for 1/sqrt(2), 0.398942 for 1/sqrt(2 pi), 0.797885 for
    sqrt(2/pi)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        x = self.x
        assert x is not None  # set by forward
        if self.approximate == "tanh":
            c = 0.797885
            t = np.tanh(c * (x + 0.044715 * x**3))
            return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * c * (1.0 + 3.0 * 0.044715 * x**2))
        cdf = 0.5 * (1.0 + np.array([math.erf(v * 0.707107) for v in np.ravel(x)]).reshape(np.shape(x)))
        return dout * (cdf + x * np.exp(-0.5 * x**2) * 0.398942)


class GELUTanhBackwardNoCubic(ref.GELU):
    """The tanh form's derivative without the cubic term's 3 * 0.044715 x^2 (the forward keeps it)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if self.approximate != "tanh":
            return super().backward(dout)
        x = self.x
        assert x is not None  # set by forward
        c = math.sqrt(2.0 / math.pi)
        t = np.tanh(c * (x + 0.044715 * x**3))
        return dout * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * c)


class SiLUGradMissingBeta(ref.SiLU):
    """dx = dout * (s + x s (1 - s)): the chain rule's factor beta is missing."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        s = self.s
        assert s is not None  # set by forward
        return dout * (s + self.x * s * (1.0 - s))


class SigmoidBackwardInPlace(ref.Sigmoid):
    """backward overwrites the cached y in place (self.out *= 1 - self.out)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.out is not None  # set by forward
        self.out *= 1.0 - self.out
        return dout * self.out


class LeakyBranchesSwapped(ref.LeakyReLU):
    """The slope on the positive side: y = slope * x for x > 0 and x elsewhere."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.negative_slope * self.x, self.x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        return np.where(self.x > 0, self.negative_slope * dout, dout)


class PReLUDalphaAxis0(ref.PReLU):
    """Per-channel dalpha summed over axis 0 only: shape (C, ...) instead of (C,)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        dx = super().backward(dout)
        if self.num_parameters > 1:
            self.dalpha = np.where(self.x > 0, 0.0, dout * self.x).sum(axis=0)
        return dx


class PReLUAlphaLastAxis(ref.PReLU):
    """alpha of shape (C,) multiplied into x as is: NumPy broadcasts it on the last axis, not on axis 1."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = np.array(x, dtype=np.float64)
        return np.where(self.x > 0, self.x, self.alpha * self.x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.x is not None  # set by forward
        negative = np.where(self.x > 0, 0.0, dout * self.x)
        self.dalpha = negative.reshape(-1, self.num_parameters).sum(axis=0)
        return np.where(self.x > 0, dout, self.alpha * dout)


A = "activations."

MISTAKES: list[Mistake] = [
    make(
        "sigmoid-grad-incomplete",
        A + "Sigmoid",
        "The derivative of sigmoid is y (1 - y); the (1 - y) factor is missing.",
        "Return dout * y * (1 - y).",
        SigmoidGradIncomplete,
    ),
    make(
        "sigmoid-backward-inplace",
        A + "Sigmoid",
        "backward overwrites the cached y in place, so a second backward after the same forward is wrong.",
        "Compute dout * y * (1 - y) into a new array; never modify self.out in backward.",
        SigmoidBackwardInPlace,
    ),
    make(
        "tanh-grad-not-squared",
        A + "Tanh",
        "The derivative of tanh is 1 - y^2; 1 - y was used.",
        "Return dout * (1 - y**2).",
        TanhGradNotSquared,
    ),
    make(
        "relu-backward-identity",
        A + "ReLU",
        "backward returns dout unchanged: the gradient must be 0 where x <= 0.",
        "Return np.where(x > 0, dout, 0).",
        ReLUBackwardIdentity,
    ),
    make(
        "prelu-shared-alpha",
        A + "PReLU",
        "With num_parameters = C, alpha[0] is used for every channel instead of alpha[c] on axis 1.",
        "Reshape alpha to (1, C, 1, ...) and broadcast it over x; sum dalpha over every axis but 1.",
        PReLUSharedAlpha,
    ),
    make(
        "elu-grad-uses-output",
        A + "ELU",
        "For x <= 0 the derivative alpha e^x equals y + alpha; y alone was used.",
        "Return dout * (y + alpha) (or alpha * e^x) where x <= 0.",
        ELUGradUsesOutput,
    ),
    make(
        "elu-alpha-ignored",
        A + "ELU",
        "alpha is ignored: 1.0 is used whatever the constructor got.",
        "Use self.alpha in forward and backward.",
        ELUAlphaIgnored,
    ),
    make(
        "gelu-sigmoid-approx",
        A + "GELU",
        "The sigmoid approximation x sigma(1.702 x) is used where the exact GELU x Phi(x) is asked.",
        "Use Phi(x) = 0.5 (1 + erf(x / sqrt(2))) with math.erf elementwise.",
        GELUSigmoidApprox,
    ),
    make(
        "gelu-erf-missing-sqrt2",
        A + "GELU",
        "Phi(x) was computed as 0.5 (1 + erf(x)); the normal CDF is 0.5 (1 + erf(x / sqrt(2))).",
        "Divide x by sqrt(2) inside erf (and use phi(x) = e^(-x^2/2) / sqrt(2 pi) in backward).",
        GELUErfMissingSqrt2,
    ),
    make(
        "gelu-tanh-no-cubic",
        A + "GELU",
        "The tanh approximation lacks its cubic term: tanh(sqrt(2/pi) x) instead of"
        " tanh(sqrt(2/pi) (x + 0.044715 x^3)).",
        "Use 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).",
        GELUTanhNoCubic,
    ),
    make(
        "silu-grad-missing-beta",
        A + "SiLU",
        "The derivative of x sigma(beta x) is s + beta x s (1 - s); the factor beta is missing.",
        "Return dout * (s + beta * x * s * (1 - s)).",
        SiLUGradMissingBeta,
    ),
    make(
        "sigmoid-overflow",
        A + "Sigmoid",
        "1 / (1 + e^-x) overflows for large negative x: e^10000 is inf and NumPy warns.",
        "With z = e^-|x|, use 1 / (1 + z) for x >= 0 and z / (1 + z) for x < 0.",
        SigmoidOverflow,
    ),
    make(
        "sigmoid-grad-of-input",
        A + "Sigmoid",
        "The derivative y (1 - y) was computed with x in place of y = sigmoid(x).",
        "Cache y in forward and return dout * y * (1 - y).",
        SigmoidGradOfInput,
    ),
    make(
        "tanh-grad-of-input",
        A + "Tanh",
        "The derivative 1 - y^2 was computed with x in place of y = tanh(x).",
        "Cache y = tanh(x) in forward and return dout * (1 - y**2).",
        TanhGradOfInput,
    ),
    make(
        "relu-grad-at-zero",
        A + "ReLU",
        "The derivative at x = 0 is taken as 1 (x >= 0), but the convention is 0.",
        "Use the mask x > 0 in backward.",
        ReLUGradAtZero,
    ),
    make(
        "relu-inplace",
        A + "ReLU",
        "forward clamps the caller's array in place (np.maximum(x, 0, out=x) or x[x < 0] = 0).",
        "Return a new array: np.maximum(x, 0).",
        ReLUInPlace,
    ),
    make(
        "relu-backward-writes-x",
        A + "ReLU",
        "backward builds its mask inside the x that forward was given (mask = self.x; mask[...] = ...), so the"
        " caller's input is overwritten.",
        "Keep a copy or a boolean mask in forward (self.mask = x > 0) and return dout * self.mask.",
        ReLUBackwardWritesX,
    ),
    make(
        "leaky-slope-ignored",
        A + "LeakyReLU",
        "negative_slope is ignored: the default 0.01 is used whatever the constructor got.",
        "Use self.negative_slope in forward and backward.",
        LeakySlopeIgnored,
    ),
    make(
        "leaky-grad-like-relu",
        A + "LeakyReLU",
        "backward gives 0 for x <= 0, as ReLU's does, instead of negative_slope.",
        "Return dout where x > 0 and negative_slope * dout elsewhere.",
        LeakyGradLikeReLU,
    ),
    make(
        "prelu-dalpha-not-summed",
        A + "PReLU",
        "dalpha is dout * x element by element instead of a sum with alpha's shape (num_parameters,).",
        "Sum dout * x over x <= 0: over everything for one alpha, over every axis but 1 per channel.",
        PReLUDalphaNotSummed,
    ),
    make(
        "prelu-dalpha-all-elements",
        A + "PReLU",
        "dalpha sums dout * x over every element, but alpha only acts where x <= 0.",
        "Mask with x <= 0 before summing: np.where(x > 0, 0, dout * x).",
        PReLUDalphaAllElements,
    ),
    make(
        "elu-grad-missing-alpha",
        A + "ELU",
        "For x <= 0 the derivative is alpha e^x, but alpha was dropped (e^x).",
        "Return dout * alpha * e^x where x <= 0 (= dout * (y + alpha)).",
        ELUGradMissingAlpha,
    ),
    make(
        "elu-exp-overflow",
        A + "ELU",
        "alpha (e^x - 1) is evaluated on every element, so e^x overflows (with a warning) for large x.",
        "Evaluate the exponential only where x <= 0: alpha * np.expm1(np.minimum(x, 0)).",
        ELUExpOverflow,
    ),
    make(
        "gelu-tanh-approx",
        A + "GELU",
        "The tanh approximation is used where the exact GELU x Phi(x) is asked (approximate='none').",
        "Use Phi(x) = 0.5 (1 + erf(x / sqrt(2))) with math.erf elementwise; keep tanh for approximate='tanh'.",
        GELUTanhApprox,
    ),
    make(
        "gelu-approximate-ignored",
        A + "GELU",
        "approximate='tanh' is ignored: the exact GELU is returned.",
        "Branch on self.approximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for 'tanh'.",
        GELUApproximateIgnored,
    ),
    make(
        "gelu-grad-missing-pdf",
        A + "GELU",
        "The derivative of x Phi(x) is Phi(x) + x phi(x); the x phi(x) term is missing.",
        "Add x * exp(-x^2 / 2) / sqrt(2 pi) to Phi(x) in backward.",
        GELUGradMissingPdf,
    ),
    make(
        "silu-beta-ignored",
        A + "SiLU",
        "beta is ignored: x sigma(x) is returned whatever beta says.",
        "Use s = sigmoid(beta x) in forward and s + beta x s (1 - s) in backward.",
        SiLUBetaIgnored,
    ),
    make(
        "silu-grad-product-rule",
        A + "SiLU",
        "The derivative of x sigma(beta x) is s + beta x s (1 - s); only s is returned.",
        "Apply the product rule: dout * (s + beta * x * s * (1 - s)).",
        SiLUGradProductRule,
    ),
    make(
        "leaky-branches-swapped",
        A + "LeakyReLU",
        "The slope is applied on the wrong side: slope * x for x > 0 and x for x <= 0.",
        "Return x where x > 0 and negative_slope * x elsewhere (the same branches in backward).",
        LeakyBranchesSwapped,
    ),
    make(
        "prelu-dalpha-axis0",
        A + "PReLU",
        "With one alpha per channel, dalpha is summed over axis 0 only; it must be summed over every axis but 1.",
        "Sum dout * x over x <= 0 along axes (0, 2, 3, ...): dalpha has shape (num_parameters,).",
        PReLUDalphaAxis0,
    ),
    make(
        "prelu-alpha-last-axis",
        A + "PReLU",
        "alpha (C,) is multiplied into x without reshaping, so NumPy broadcasts it on the last axis instead of"
        " the channel axis 1.",
        "Reshape alpha to (1, C, 1, ...) before multiplying; sum dalpha over every axis but 1.",
        PReLUAlphaLastAxis,
    ),
    make(
        "relu-backward-writes-dout",
        A + "ReLU",
        "backward writes its mask into the dout it was given (dx = dout; dx[x <= 0] = 0): dx is the caller's"
        " array, not a copy, so the upstream gradient is overwritten.",
        "Make a new array: dx = dout * (x > 0), or dx = dout.copy() before zeroing.",
        ReLUBackwardWritesDout,
    ),
    make(
        "gelu-grad-half-pdf-term",
        A + "GELU",
        "The derivative has half its x phi(x) term: d/dx x Phi(x) = Phi(x) + x phi(x), with no factor 1/2.",
        "Use dx = dout * (Phi(x) + x phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).",
        GELUGradHalfPdfTerm,
    ),
    make(
        "gelu-grad-rounded-constants",
        A + "GELU",
        "backward's constants are rounded to six digits (0.707107, 0.398942, 0.797885): the gradient is off by"
        " about 1e-6"
        " relative, far more than float64 allows.",
        "Compute the constants in full precision: 1 / math.sqrt(2 * math.pi), math.sqrt(2 / math.pi).",
        GELUGradRoundedConstants,
    ),
    make(
        "elu-backward-exp-overflow",
        A + "ELU",
        "backward evaluates alpha * e^x on every element, so e^x overflows (with a warning) for large x, even"
        " though np.where then keeps dout there.",
        "Clip before the exponential in backward too: alpha * np.exp(np.minimum(x, 0)).",
        ELUBackwardExpOverflow,
    ),
    make(
        "gelu-tanh-backward-no-cubic",
        A + "GELU",
        "The tanh form's derivative drops the cubic term: d/dx of sqrt(2/pi) (x + 0.044715 x^3) is"
        " sqrt(2/pi) (1 + 3 * 0.044715 x^2), not sqrt(2/pi).",
        "Use dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 0.134145 x^2)), t = tanh(u).",
        GELUTanhBackwardNoCubic,
    ),
]
