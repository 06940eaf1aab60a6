"""Known mistakes in inverted dropout, each a wrong subclass of the reference ``Dropout``.

Dropout draws from the student's own generator, so these are recognised by
statistics and structure (which scale, which zero fraction, which mask), not
elementwise: see ``grader.student.engine.checks.dropout``.
"""

from __future__ import annotations

import numpy as np

from grader.mistakes import Mistake, make
from reference import dropout as ref

EXERCISE = "dropout.Dropout"


class Inverted(ref.Dropout):
    """A correct inverted dropout written in pieces (mask, scale) that the variants below override.

    Self-contained: it does not rely on the reference's private attributes.
    """

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        """True where an element is kept (u >= p)."""
        return self.rng.random(shape) >= self.p

    def scale(self) -> float:
        """1 / (1 - p), or 0 when p = 1."""
        return 0.0 if self.p == 1.0 else 1.0 / (1.0 - self.p)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if not self.training:
            self.mask = None
            return x.copy()
        self.mask = self.keep_mask(x.shape) * self.scale()
        return x * self.mask

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dout = np.asarray(dout, dtype=np.float64)
        if getattr(self, "mask", None) is None:
            return dout.copy()
        return dout * self.mask


class IgnoresRng(Inverted):
    """The mask is drawn from NumPy's global generator (np.random.random), not from the rng the layer was given."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.random.random(shape) >= self.p


class MaskPrecedence(Inverted):
    """mask = rng.random(shape) < p / p: the division binds first, every u < 1 is kept and nothing is scaled."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.random(shape) < (self.p / self.p if self.p > 0 else 1.0)

    def scale(self) -> float:
        return 1.0


class NoRescale(Inverted):
    """y = x * r: the kept values are not divided by 1 - p."""

    def scale(self) -> float:
        return 1.0


class ScaleByP(Inverted):
    """y = x * r / p: divides by the drop probability instead of the keep probability."""

    def scale(self) -> float:
        return 1.0 / self.p if self.p > 0 else 1.0


class MultiplyKeepProb(Inverted):
    """y = x * r * (1 - p): multiplies by the keep probability instead of dividing by it."""

    def scale(self) -> float:
        return 1.0 - self.p


class NonInverted(Inverted):
    """The original (non-inverted) dropout: no scale in training, x * (1 - p) in eval."""

    def scale(self) -> float:
        return 1.0

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not self.training:
            self.mask = None
            return np.asarray(x, dtype=np.float64) * (1.0 - self.p)
        return super().forward(x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if getattr(self, "mask", None) is None:
            return np.asarray(dout, dtype=np.float64) * (1.0 - self.p)
        return dout * self.mask


class EvalRescaled(Inverted):
    """Eval divides by 1 - p as well: y = x / (1 - p) (and dx = dout / (1 - p))."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not self.training:
            self.mask = np.full(np.shape(x), self.scale())
            return np.asarray(x, dtype=np.float64) * self.mask
        return super().forward(x)


class BackwardReturnsMask(Inverted):
    """backward returns the scaled mask and forgets to multiply by dout."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if getattr(self, "mask", None) is None:
            return np.array(dout, dtype=np.float64)
        return np.array(self.mask)


class InPlace(Inverted):
    """Multiplies the caller's array in place (x *= mask) and returns it."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not self.training:
            self.mask = None
            return x
        self.mask = self.keep_mask(x.shape) * self.scale()
        x *= self.mask
        return x


class KeepProbSwapped(Inverted):
    """Keeps each element with probability p (u < p) instead of 1 - p, scaled by 1/(1 - p)."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.random(shape) < self.p


class EvalActive(Inverted):
    """Ignores self.training: keeps dropping in eval mode."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.mask = self.keep_mask(np.shape(x)) * self.scale()
        return np.asarray(x, dtype=np.float64) * self.mask


class BackwardNewMask(Inverted):
    """backward draws a fresh mask instead of reusing the one of the last forward."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if getattr(self, "mask", None) is None:
            return np.array(dout, dtype=np.float64)
        return dout * self.keep_mask(np.shape(dout)) * self.scale()


class BackwardIgnoresMask(Inverted):
    """backward returns dout unchanged: the dropped elements still get gradient."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return np.array(dout, dtype=np.float64)


class BackwardUnscaled(Inverted):
    """backward multiplies by the 0/1 mask but forgets the 1/(1 - p) scale."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        if getattr(self, "mask", None) is None:
            return np.array(dout, dtype=np.float64)
        return dout * (self.mask != 0)


class MaskReused(Inverted):
    """Draws the mask once (first call) and reuses it on every later call of the same shape."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        saved = getattr(self, "saved_keep", None)
        if saved is None or saved.shape != shape:
            saved = self.rng.random(shape) >= self.p
            self.saved_keep = saved
        return saved


class MaskPerFeature(Inverted):
    """Draws one mask per feature (last axis) and shares it across the batch."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.broadcast_to(self.rng.random(shape[-1]) >= self.p, shape).copy()


class EvalStaleMask(Inverted):
    """Eval forward returns x but keeps the training mask, so the eval backward still applies it."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not self.training:
            return np.array(x, dtype=np.float64)
        return super().forward(x)


class DivideByZeroAtP1(Inverted):
    """Divides by 1 - p unconditionally: p = 1 gives 0/0 = NaN (with a RuntimeWarning)."""

    def scale(self) -> float:
        return float(np.float64(1.0) / np.float64(1.0 - self.p))


class KeepProbConvention(Inverted):
    """CS231n's convention: p is the probability of keeping; keeps where u < p and divides by p."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.random(shape) < self.p

    def scale(self) -> float:
        with np.errstate(divide="ignore"):
            return float(np.float64(1.0) / np.float64(self.p))  # p = 0: inf, and 0 * inf = NaN, as in numpy code


class GaussianMask(Inverted):
    """The mask compares standard normal draws with p (rng.standard_normal for rng.random): P(drop) = Phi(p)."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.rng.standard_normal(shape) >= self.p


class Mask2dOnly(Inverted):
    """The mask is built from two unpacked dimensions (rows, cols = x.shape): any other input crashes."""

    def keep_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        rows, cols = shape
        return self.rng.random((rows, cols)) >= self.p


MISTAKES: list[Mistake] = [
    make(
        "dropout-no-rescale",
        EXERCISE,
        "The kept activations are not divided by 1 - p, so the expected output shrinks to (1 - p) x in training.",
        "Return x * mask / (1 - p) (inverted dropout) so that E[y] = x.",
        NoRescale,
    ),
    make(
        "dropout-scale-by-p",
        EXERCISE,
        "The kept activations are divided by p (the drop probability) instead of 1 - p (the keep probability).",
        "Scale by 1 / (1 - p): an element survives with probability 1 - p.",
        ScaleByP,
    ),
    make(
        "dropout-multiply-keep-prob",
        EXERCISE,
        "The kept activations are multiplied by 1 - p instead of divided by it.",
        "Divide: y = x * mask / (1 - p).",
        MultiplyKeepProb,
    ),
    make(
        "dropout-non-inverted",
        EXERCISE,
        "This is the original dropout (scale by 1 - p at test time); the exercise asks for inverted dropout.",
        "Scale the kept activations by 1 / (1 - p) in training and return x unchanged in eval.",
        NonInverted,
    ),
    make(
        "dropout-eval-rescaled",
        EXERCISE,
        "In eval mode the input is still divided by 1 - p; inverted dropout makes eval the identity.",
        "Return x unchanged in eval mode (the 1/(1 - p) scale belongs to training only).",
        EvalRescaled,
    ),
    make(
        "dropout-backward-returns-mask",
        EXERCISE,
        "backward returns the mask instead of dout times the mask.",
        "Return dout * self.mask.",
        BackwardReturnsMask,
    ),
    make(
        "dropout-in-place",
        EXERCISE,
        "forward multiplies the caller's array in place (x *= mask), so the input is destroyed.",
        "Compute a new array: y = x * mask.",
        InPlace,
    ),
    make(
        "dropout-keep-prob-swapped",
        EXERCISE,
        "Elements are kept with probability p and dropped with probability 1 - p: p is the probability of dropping.",
        "Keep where rng.random(x.shape) >= p (so P(keep) = 1 - p).",
        KeepProbSwapped,
    ),
    make(
        "dropout-eval-active",
        EXERCISE,
        "Dropout still drops in eval mode.",
        "In forward, return x unchanged when self.training is False (and make backward the identity).",
        EvalActive,
    ),
    make(
        "dropout-backward-new-mask",
        EXERCISE,
        "backward draws a new random mask instead of using the mask of the last forward.",
        "Cache the scaled mask in forward (self.mask) and return dout * self.mask in backward.",
        BackwardNewMask,
    ),
    make(
        "dropout-backward-ignores-mask",
        EXERCISE,
        "backward returns dout unchanged, so dropped elements still receive gradient.",
        "Return dout * self.mask, the same scaled mask that forward applied.",
        BackwardIgnoresMask,
    ),
    make(
        "dropout-backward-unscaled",
        EXERCISE,
        "backward multiplies by the 0/1 mask but forgets the 1/(1 - p) scale that forward applied.",
        "Cache the scaled mask r / (1 - p) and multiply dout by it.",
        BackwardUnscaled,
    ),
    make(
        "dropout-mask-reused",
        EXERCISE,
        "The same mask is used on every call, so the same units are always dropped.",
        "Draw a fresh mask from self.rng inside every training forward.",
        MaskReused,
    ),
    make(
        "dropout-mask-per-feature",
        EXERCISE,
        "One mask is drawn per feature and shared by every row of the batch.",
        "Draw the mask with the full shape of x: self.rng.random(x.shape).",
        MaskPerFeature,
    ),
    make(
        "dropout-eval-stale-mask",
        EXERCISE,
        "In eval mode backward still multiplies by the mask of an earlier training forward.",
        "Clear the cached mask in an eval forward (or check self.training in backward): eval backward is dout.",
        EvalStaleMask,
    ),
    make(
        "dropout-p-is-keep-prob",
        EXERCISE,
        "p is used as the probability of keeping (CS231n's convention: keep where u < p, divide by p); here p is"
        " the probability of dropping, as in PyTorch.",
        "Keep where self.rng.random(x.shape) >= p and divide by 1 - p: both changes together (either alone makes"
        " it worse).",
        KeepProbConvention,
    ),
    make(
        "dropout-gaussian-mask",
        EXERCISE,
        "The mask compares standard normal draws with p, so an element is dropped with probability Phi(p), not p.",
        "Draw uniforms in [0, 1): keep = self.rng.random(x.shape) >= p.",
        GaussianMask,
    ),
    make(
        "dropout-mask-2d-only",
        EXERCISE,
        "The mask is built from two unpacked dimensions (rows, cols = x.shape), so any input that is not 2-D crashes.",
        "Draw the mask with the full shape: self.rng.random(x.shape) >= p, whatever x.ndim is.",
        Mask2dOnly,
    ),
    make(
        "dropout-p1-nan",
        EXERCISE,
        "With p = 1 the code divides by 1 - p = 0, giving NaN (0/0) instead of zeros.",
        "Special-case p = 1 (return zeros) or compute the scale as 0 when p == 1.",
        DivideByZeroAtP1,
    ),
    make(
        "dropout-ignores-rng",
        EXERCISE,
        "The mask is drawn from np.random instead of the generator the layer was given (self.rng): a run seeded"
        " for reproducibility drops different elements every time.",
        "Draw the mask with self.rng.random(x.shape) >= self.p.",
        IgnoresRng,
    ),
    make(
        "dropout-mask-precedence",
        EXERCISE,
        "The mask is written rand < p / p: the division binds before the comparison, so every element is kept and"
        " nothing is scaled.",
        "Compare first and scale after: mask = (self.rng.random(x.shape) >= p) / (1 - p).",
        MaskPrecedence,
    ),
]
