"""Known mistakes in the initialisers, each a wrong version of a reference function.

They draw from the generator they are given, like a student's code, and are
recognised statistically (variance, bound, kurtosis, shape): see
``grader.student.engine.checks.init``.
"""

from __future__ import annotations

import math
from functools import partial
from collections.abc import Callable

import numpy as np

from grader.mistakes import Mistake, make


def _fan(fan_in: int, fan_out: int, mode: str) -> int:
    """fan_in or fan_out by mode; ValueError for any other mode (as required), so a variant has one mistake only."""
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


# --- xavier_uniform


def xavier_uniform_normal(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """N(0, gain^2 * 2 / (fan_in + fan_out)): the right variance, the wrong distribution."""
    return rng.normal(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), size=(fan_out, fan_in))


def xavier_uniform_bound_std(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """U(-std, std): the standard deviation used as the bound (sqrt(3) forgotten)."""
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return rng.uniform(-std, std, size=(fan_out, fan_in))


def xavier_uniform_not_centred(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """U(0, 2a): rng.random() * 2a without subtracting a."""
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return rng.random((fan_out, fan_in)) * 2.0 * a


def xavier_uniform_global_rng(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """Draws from a fresh unseeded generator instead of rng."""
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return np.random.default_rng().uniform(-a, a, size=(fan_out, fan_in))


def xavier_uniform_gain_in_sqrt(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """a = sqrt(gain * 6 / (fan_in + fan_out)): the gain put under the square root."""
    a = math.sqrt(gain * 6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in))


# --- xavier_normal


def xavier_normal_uniform(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """U(-a, a) with the right variance: a uniform where a normal is asked."""
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in))


def xavier_normal_kaiming(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """N(0, gain^2 * 2 / fan_in): Kaiming's variance where Xavier's is asked."""
    return rng.normal(0.0, gain * math.sqrt(2.0 / fan_in), size=(fan_out, fan_in))


def xavier_normal_variance_as_std(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """rng.normal(0, gain^2 * 2 / (fan_in + fan_out)): the variance passed as the scale (a standard deviation)."""
    return rng.normal(0.0, gain**2 * 2.0 / (fan_in + fan_out), size=(fan_out, fan_in))


def xavier_normal_gain_ignored(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """std = sqrt(2 / (fan_in + fan_out)) whatever the gain."""
    return rng.normal(0.0, math.sqrt(2.0 / (fan_in + fan_out)), size=(fan_out, fan_in))


def xavier_normal_transposed(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """Shape (fan_in, fan_out) instead of (fan_out, fan_in)."""
    return rng.normal(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), size=(fan_in, fan_out))


# --- kaiming_uniform


def kaiming_uniform_xavier(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """U(-a, a), a = sqrt(6 / (fan_in + fan_out)): Xavier's bound where Kaiming's is asked."""
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_out, fan_in))


def kaiming_uniform_mode_ignored(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """Always uses fan_in, whatever mode says."""
    b = math.sqrt(3.0) * math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan_in))
    return rng.uniform(-b, b, size=(fan_out, fan_in))


def kaiming_uniform_bound_std(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """U(-std, std): sqrt(3) forgotten in the bound."""
    std = math.sqrt(2.0 / ((1.0 + negative_slope**2) * _fan(fan_in, fan_out, mode)))
    return rng.uniform(-std, std, size=(fan_out, fan_in))


def kaiming_uniform_slope_not_squared(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """std = sqrt(2 / ((1 + a) * fan)): the negative slope not squared."""
    b = math.sqrt(3.0) * math.sqrt(2.0 / ((1.0 + negative_slope) * _fan(fan_in, fan_out, mode)))
    return rng.uniform(-b, b, size=(fan_out, fan_in))


def kaiming_uniform_normal(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """N(0, std^2): a normal where a uniform is asked."""
    std = math.sqrt(2.0 / ((1.0 + negative_slope**2) * _fan(fan_in, fan_out, mode)))
    return rng.normal(0.0, std, size=(fan_out, fan_in))


# --- kaiming_normal


def kaiming_normal_xavier(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """N(0, 2 / (fan_in + fan_out)): Xavier's variance where Kaiming's is asked."""
    return rng.normal(0.0, math.sqrt(2.0 / (fan_in + fan_out)), size=(fan_out, fan_in))


def kaiming_normal_mode_ignored(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """Always uses fan_in, whatever mode says."""
    std = math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan_in))
    return rng.normal(0.0, std, size=(fan_out, fan_in))


def kaiming_normal_slope_ignored(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """std = sqrt(2 / fan): the leaky slope ignored (plain He)."""
    return rng.normal(0.0, math.sqrt(2.0 / _fan(fan_in, fan_out, mode)), size=(fan_out, fan_in))


def kaiming_normal_variance_as_std(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """rng.normal(0, 2 / fan): the variance passed where numpy expects a standard deviation."""
    return rng.normal(0.0, 2.0 / ((1.0 + negative_slope**2) * _fan(fan_in, fan_out, mode)), size=(fan_out, fan_in))


def kaiming_normal_transposed(
    fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
) -> np.ndarray:
    """Shape (fan_in, fan_out) instead of (fan_out, fan_in)."""
    std = math.sqrt(2.0 / ((1.0 + negative_slope**2) * _fan(fan_in, fan_out, mode)))
    return rng.normal(0.0, std, size=(fan_in, fan_out))


XU, XN, KU, KN = "init.xavier_uniform", "init.xavier_normal", "init.kaiming_uniform", "init.kaiming_normal"
SQRT3 = "A uniform U(-a, a) has variance a^2 / 3, so a = sqrt(3) * std."

MISTAKES: list[Mistake] = [
    make(
        "init-normal-for-uniform",
        XU,
        "The weights are drawn from a normal distribution where a uniform U(-a, a) is asked.",
        "Use rng.uniform(-a, a, size=(fan_out, fan_in)) with a = gain * sqrt(6 / (fan_in + fan_out)).",
        xavier_uniform_normal,
    ),
    make(
        "init-uniform-bound-std",
        XU,
        "The standard deviation is used as the uniform bound, so the variance is 3 times too small.",
        SQRT3 + " Use a = gain * sqrt(6 / (fan_in + fan_out)).",
        xavier_uniform_bound_std,
    ),
    make(
        "init-uniform-not-centred",
        XU,
        "The uniform draw is not centred: rng.random() * 2a lies in [0, 2a] instead of [-a, a].",
        "Use rng.uniform(-a, a, size=...) (or subtract a).",
        xavier_uniform_not_centred,
    ),
    make(
        "init-ignores-rng",
        XU,
        "The values do not come from the rng argument, so the same seed does not give the same weights.",
        "Draw with the generator you are given: rng.uniform(...) / rng.normal(...).",
        xavier_uniform_global_rng,
    ),
    make(
        "init-gain-inside-sqrt",
        XU,
        "The gain is put under the square root, so the variance scales with gain instead of gain^2.",
        "a = gain * sqrt(6 / (fan_in + fan_out)): the gain multiplies the standard deviation.",
        xavier_uniform_gain_in_sqrt,
    ),
    make(
        "init-uniform-for-normal",
        XN,
        "The weights are drawn from a uniform distribution where a normal is asked.",
        "Use rng.normal(0, std, size=(fan_out, fan_in)).",
        xavier_normal_uniform,
    ),
    make(
        "init-kaiming-for-xavier",
        XN,
        "Kaiming's variance 2 / fan_in is used where Xavier's 2 / (fan_in + fan_out) is asked.",
        "std = gain * sqrt(2 / (fan_in + fan_out)) for Xavier.",
        xavier_normal_kaiming,
    ),
    make(
        "init-variance-as-std",
        XN,
        "The variance is passed to rng.normal, whose scale argument is the standard deviation.",
        "Take the square root: rng.normal(0, sqrt(variance), size=...).",
        xavier_normal_variance_as_std,
    ),
    make(
        "init-gain-ignored",
        XN,
        "The gain argument is ignored.",
        "Multiply the standard deviation by gain: std = gain * sqrt(2 / (fan_in + fan_out)).",
        xavier_normal_gain_ignored,
    ),
    make(
        "init-transposed-shape",
        XN,
        "The weights have shape (fan_in, fan_out); Linear's W is (fan_out, fan_in).",
        "Draw with size=(fan_out, fan_in).",
        xavier_normal_transposed,
    ),
    make(
        "init-xavier-for-kaiming-uniform",
        KU,
        "Xavier's bound sqrt(6 / (fan_in + fan_out)) is used where Kaiming's sqrt(3) * sqrt(2 / fan) is asked.",
        "b = sqrt(3) * sqrt(2 / ((1 + negative_slope^2) * fan)).",
        kaiming_uniform_xavier,
    ),
    make(
        "init-kaiming-uniform-mode-ignored",
        KU,
        "mode is ignored: fan_in is used even when mode='fan_out'.",
        "fan = fan_in if mode == 'fan_in' else fan_out.",
        kaiming_uniform_mode_ignored,
    ),
    make(
        "init-kaiming-uniform-bound-std",
        KU,
        "The standard deviation is used as the uniform bound, so the variance is 3 times too small.",
        SQRT3 + " Use b = sqrt(3) * std.",
        kaiming_uniform_bound_std,
    ),
    make(
        "init-leaky-slope-not-squared",
        KU,
        "The negative slope is not squared: the gain is 2 / (1 + a) instead of 2 / (1 + a^2).",
        "std = sqrt(2 / ((1 + negative_slope**2) * fan)).",
        kaiming_uniform_slope_not_squared,
    ),
    make(
        "init-kaiming-uniform-normal",
        KU,
        "kaiming_uniform draws from a normal distribution where a uniform U(-b, b) is asked.",
        "Use rng.uniform(-b, b, size=(fan_out, fan_in)), b = sqrt(3) * std.",
        kaiming_uniform_normal,
    ),
    make(
        "init-xavier-for-kaiming",
        KN,
        "Xavier's variance 2 / (fan_in + fan_out) is used where Kaiming's 2 / fan_in is asked.",
        "std = sqrt(2 / ((1 + negative_slope^2) * fan)) with fan = fan_in by default.",
        kaiming_normal_xavier,
    ),
    make(
        "init-kaiming-fan-out-ignored",
        KN,
        "mode is ignored: fan_in is used even when mode='fan_out'.",
        "fan = fan_in if mode == 'fan_in' else fan_out.",
        kaiming_normal_mode_ignored,
    ),
    make(
        "init-leaky-slope-ignored",
        KN,
        "negative_slope is ignored: the variance stays 2 / fan.",
        "std = sqrt(2 / ((1 + negative_slope**2) * fan)).",
        kaiming_normal_slope_ignored,
    ),
    make(
        "init-kaiming-variance-as-std",
        KN,
        "The variance 2 / fan is passed to rng.normal, whose scale argument is the standard deviation.",
        "Take the square root: std = sqrt(2 / ((1 + a^2) * fan)).",
        kaiming_normal_variance_as_std,
    ),
    make(
        "init-kaiming-transposed-shape",
        KN,
        "The weights have shape (fan_in, fan_out); Linear's W is (fan_out, fan_in).",
        "Draw with size=(fan_out, fan_in).",
        kaiming_normal_transposed,
    ),
]


# --- the same classic mistakes on the other initialisers, built from one drawing routine


def draw(
    kind: str,
    std: float,
    shape: tuple[int, int],
    rng: np.random.Generator,
    *,
    swap_dist: bool = False,
    bound_is_std: bool = False,
    variance_as_std: bool = False,
    transposed: bool = False,
    not_centred: bool = False,
    global_rng: bool = False,
) -> np.ndarray:
    """Draw like a student would, with one mistake switched on (std is what the student computed)."""
    if transposed:
        shape = (shape[1], shape[0])
    gen = np.random.default_rng() if global_rng else rng
    actual = ("normal" if kind == "uniform" else "uniform") if swap_dist else kind
    if actual == "uniform":
        a = std if bound_is_std else math.sqrt(3.0) * std
        return gen.random(shape) * 2.0 * a if not_centred else gen.uniform(-a, a, size=shape)
    return gen.normal(0.0, std * std if variance_as_std else std, size=shape)


XavierStd = Callable[[int, int, float], float]
KaimingStd = Callable[[int, int, str, float], float]


def xavier_variant(kind: str, std_of: XavierStd, **flags: bool) -> Callable[..., np.ndarray]:
    """A wrong xavier_<kind> with the student's std formula and drawing flags."""

    def initialiser(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
        return draw(kind, std_of(fan_in, fan_out, gain), (fan_out, fan_in), rng, **flags)

    return initialiser


def kaiming_variant(kind: str, std_of: KaimingStd, **flags: bool) -> Callable[..., np.ndarray]:
    """A wrong kaiming_<kind> with the student's std formula and drawing flags."""

    def initialiser(
        fan_in: int, fan_out: int, rng: np.random.Generator, mode: str = "fan_in", negative_slope: float = 0.0
    ) -> np.ndarray:
        return draw(kind, std_of(fan_in, fan_out, mode, negative_slope), (fan_out, fan_in), rng, **flags)

    return initialiser


def xavier_ok(fi: int, fo: int, gain: float) -> float:
    return gain * math.sqrt(2.0 / (fi + fo))


def kaiming_ok(fi: int, fo: int, mode: str, a: float) -> float:
    return math.sqrt(2.0 / ((1.0 + a * a) * _fan(fi, fo, mode)))


XAVIER_WRONG_STD: dict[str, tuple[XavierStd, str, str]] = {
    "gain-ignored": (
        lambda fi, fo, g: math.sqrt(2.0 / (fi + fo)),
        "The gain argument is ignored.",
        "Multiply the standard deviation (or the bound) by gain.",
    ),
    "gain-inside-sqrt": (
        lambda fi, fo, g: math.sqrt(g * 2.0 / (fi + fo)),
        "The gain is put under the square root, so the variance scales with gain, not gain^2.",
        "std = gain * sqrt(2 / (fan_in + fan_out)).",
    ),
    "kaiming-for-xavier": (
        lambda fi, fo, g: g * math.sqrt(2.0 / fi),
        "Kaiming's variance 2 / fan_in is used where Xavier's 2 / (fan_in + fan_out) is asked.",
        "std = gain * sqrt(2 / (fan_in + fan_out)).",
    ),
    "fan-in-only": (
        lambda fi, fo, g: g * math.sqrt(1.0 / fi),
        "LeCun's variance 1 / fan_in is used; Xavier averages the fans: 2 / (fan_in + fan_out).",
        "std = gain * sqrt(2 / (fan_in + fan_out)).",
    ),
    "missing-2": (
        lambda fi, fo, g: g * math.sqrt(1.0 / (fi + fo)),
        "The factor 2 is missing: the variance is 1 / (fan_in + fan_out) instead of 2 / (fan_in + fan_out).",
        "std = gain * sqrt(2 / (fan_in + fan_out)).",
    ),
}

KAIMING_WRONG_STD: dict[str, tuple[KaimingStd, str, str]] = {
    "xavier-for-kaiming": (
        lambda fi, fo, m, a: math.sqrt(2.0 / (fi + fo)),
        "Xavier's variance 2 / (fan_in + fan_out) is used where Kaiming's 2 / fan is asked.",
        "std = sqrt(2 / ((1 + negative_slope^2) * fan)).",
    ),
    "mode-ignored": (
        lambda fi, fo, m, a: math.sqrt(2.0 / ((1.0 + a * a) * fi)),
        "mode is ignored: fan_in is used even when mode='fan_out'.",
        "fan = fan_in if mode == 'fan_in' else fan_out.",
    ),
    "mode-swapped": (
        lambda fi, fo, m, a: math.sqrt(2.0 / ((1.0 + a * a) * (fo if m == "fan_in" else fi))),
        "The fans are swapped: mode='fan_in' uses fan_out and mode='fan_out' uses fan_in.",
        "fan = fan_in if mode == 'fan_in' else fan_out; W has shape (fan_out, fan_in).",
    ),
    "slope-ignored": (
        lambda fi, fo, m, a: math.sqrt(2.0 / _fan(fi, fo, m)),
        "negative_slope is ignored: the variance stays 2 / fan.",
        "std = sqrt(2 / ((1 + negative_slope**2) * fan)).",
    ),
    "slope-not-squared": (
        lambda fi, fo, m, a: math.sqrt(2.0 / ((1.0 + a) * _fan(fi, fo, m))),
        "The negative slope is not squared: 2 / ((1 + a) fan) instead of 2 / ((1 + a^2) fan).",
        "std = sqrt(2 / ((1 + negative_slope**2) * fan)).",
    ),
    "missing-2": (
        lambda fi, fo, m, a: math.sqrt(1.0 / ((1.0 + a * a) * _fan(fi, fo, m))),
        "The factor 2 (ReLU halves the variance) is missing: the variance is 1 / fan.",
        "std = sqrt(2 / ((1 + negative_slope^2) * fan)).",
    ),
}

DRAW_MISTAKES: dict[str, tuple[dict[str, bool], str, str]] = {
    "wrong-distribution": (
        {"swap_dist": True},
        "The wrong distribution is drawn: a normal where a uniform is asked, or the reverse.",
        "xavier_uniform / kaiming_uniform draw rng.uniform(-a, a); the _normal ones rng.normal(0, std).",
    ),
    "bound-std": (
        {"bound_is_std": True},
        "The standard deviation is used as the uniform bound, so the variance is 3 times too small.",
        "A uniform U(-a, a) has variance a^2 / 3: a = sqrt(3) * std.",
    ),
    "variance-as-std": (
        {"variance_as_std": True},
        "The variance is passed to rng.normal, whose scale argument is the standard deviation.",
        "Take the square root: rng.normal(0, std, size=...).",
    ),
    "transposed": (
        {"transposed": True},
        "The weights have shape (fan_in, fan_out); Linear's W is (fan_out, fan_in).",
        "Draw with size=(fan_out, fan_in).",
    ),
    "not-centred": (
        {"not_centred": True},
        "The uniform draw is not centred: rng.random() * 2a lies in [0, 2a] instead of [-a, a].",
        "Use rng.uniform(-a, a, size=...).",
    ),
    "ignores-rng": (
        {"global_rng": True},
        "The values do not come from the rng argument, so the same seed does not give the same weights.",
        "Draw with the generator you are given.",
    ),
}

SHORT = {XU: "xavier-uniform", XN: "xavier-normal", KU: "kaiming-uniform", KN: "kaiming-normal"}


def generated_mistakes(existing: list[Mistake]) -> list[Mistake]:
    """The std and drawing mistakes above on every initialiser they apply to, unless already catalogued.

    Ids: ``init-<initialiser>-<mistake>`` (e.g. ``init-xavier-uniform-gain-ignored``). A generated
    mistake is skipped when a hand-written one of the same exercise already has the same behaviour
    (listed in ``COVERED``).
    """
    mistakes: list[Mistake] = []
    for exercise, short in SHORT.items():
        family, kind = exercise.split(".")[1].split("_")
        # (slug, the variant's maker, sentence, fix): each family's wrong std formulas, then the drawing mistakes
        wrong: list[tuple[str, Callable[[], Callable[..., np.ndarray]], str, str]]
        if family == "xavier":
            wrong = [
                (slug, partial(xavier_variant, kind, std_of), sentence, fix)
                for slug, (std_of, sentence, fix) in XAVIER_WRONG_STD.items()
            ]
            wrong += [
                (slug, partial(xavier_variant, kind, xavier_ok, **flags), sentence, fix)
                for slug, (flags, sentence, fix) in DRAW_MISTAKES.items()
            ]
        else:
            wrong = [
                (slug, partial(kaiming_variant, kind, std_of), sentence, fix)
                for slug, (std_of, sentence, fix) in KAIMING_WRONG_STD.items()
            ]
            wrong += [
                (slug, partial(kaiming_variant, kind, kaiming_ok, **flags), sentence, fix)
                for slug, (flags, sentence, fix) in DRAW_MISTAKES.items()
            ]
        for slug, variant, sentence, fix in wrong:
            if (exercise, slug) in COVERED:
                continue
            if slug in DRAW_MISTAKES and (
                (slug == "bound-std" or slug == "not-centred")
                and kind != "uniform"
                or slug == "variance-as-std"
                and kind != "normal"
            ):
                continue
            mistakes.append(make(f"init-{short}-{slug}", exercise, sentence, fix, variant()))
    ids = {m.id for m in existing}
    return [m for m in mistakes if m.id not in ids]


# (exercise, generated slug) pairs that a hand-written mistake above already covers.
COVERED = {
    (XU, "wrong-distribution"),
    (XU, "bound-std"),
    (XU, "not-centred"),
    (XU, "ignores-rng"),
    (XU, "gain-inside-sqrt"),
    (XN, "wrong-distribution"),
    (XN, "kaiming-for-xavier"),
    (XN, "variance-as-std"),
    (XN, "gain-ignored"),
    (XN, "transposed"),
    (KU, "xavier-for-kaiming"),
    (KU, "mode-ignored"),
    (KU, "bound-std"),
    (KU, "slope-not-squared"),
    (KU, "wrong-distribution"),
    (KN, "xavier-for-kaiming"),
    (KN, "mode-ignored"),
    (KN, "slope-ignored"),
    (KN, "variance-as-std"),
    (KN, "transposed"),
}

MISTAKES += generated_mistakes(MISTAKES)
