"""Weight initialisation (topic ``init``): Xavier/Glorot and Kaiming/He.

Follows the course text, §initialisation.variance-propagation,
§initialisation.xavier (the Xavier derivation) and §initialisation.kaiming
(the He derivation, gain and mode). Each function returns a NEW float64 array of
shape (fan_out, fan_in) (the shape of Linear.W), drawn from ``rng``, a
``np.random.Generator`` (``rng.uniform(low, high, size)``,
``rng.normal(mean, std, size)``).

Grade it with ``.venv/bin/grade submit init`` (one exercise: ``.venv/bin/grade submit init.kaiming_normal``).
"""

from __future__ import annotations

import numpy as np


def xavier_uniform(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """W ~ U(-a, a), shape (fan_out, fan_in): PyTorch's torch.nn.init.xavier_uniform_.

    [derive]
    a is chosen so that Var(W) is Glorot's variance (§initialisation.xavier: the
    compromise between the forward 1/fan_in and backward 1/fan_out
    conditions), times gain^2: gain multiplies the standard deviation.
    [/derive]
    [guided]
    a = gain * sqrt(6 / (fan_in + fan_out)). Its variance a^2 / 3 =
    gain^2 * 2 / (fan_in + fan_out) (Glorot's harmonic mean of the forward
    1/fan_in and backward 1/fan_out conditions).
    [/guided]
    """
    # TODO: implement
    raise NotImplementedError("init.xavier_uniform")


def xavier_normal(fan_in: int, fan_out: int, rng: np.random.Generator, gain: float = 1.0) -> np.ndarray:
    """W ~ N(0, std^2), shape (fan_out, fan_in): PyTorch's torch.nn.init.xavier_normal_.

    [derive]
    std gives Glorot's variance (§initialisation.xavier), times gain^2: gain multiplies std.
    [/derive]
    [guided]
    std = gain * sqrt(2 / (fan_in + fan_out)).
    [/guided]
    """
    # TODO: implement
    raise NotImplementedError("init.xavier_normal")


def kaiming_uniform(
    fan_in: int,
    fan_out: int,
    rng: np.random.Generator,
    mode: str = "fan_in",
    negative_slope: float = 0.0,
) -> np.ndarray:
    """W ~ U(-b, b), shape (fan_out, fan_in): PyTorch's torch.nn.init.kaiming_uniform_.

    fan = fan_in when mode == "fan_in" (preserves the forward variance),
    fan_out when mode == "fan_out" (preserves the backward variance); any
    other mode is a ValueError. negative_slope is the slope of a LeakyReLU
    (0 for ReLU).
    [derive]
    b is chosen so that Var(W) is He's variance for a LeakyReLU with that
    slope (§initialisation.kaiming: the variance that keeps the signal's variance from
    layer to layer through the activation), computed with fan.
    [/derive]
    [guided]
    b = sqrt(3) * std, std = sqrt(2 / ((1 + negative_slope^2) * fan)).
    [/guided]
    """
    # TODO: implement
    raise NotImplementedError("init.kaiming_uniform")


def kaiming_normal(
    fan_in: int,
    fan_out: int,
    rng: np.random.Generator,
    mode: str = "fan_in",
    negative_slope: float = 0.0,
) -> np.ndarray:
    """W ~ N(0, std^2), shape (fan_out, fan_in): PyTorch's torch.nn.init.kaiming_normal_.

    fan = fan_in or fan_out by mode (ValueError for any other mode).
    negative_slope is the slope of a LeakyReLU (0 for ReLU).
    [derive]
    std gives He's variance for a LeakyReLU with that slope (§initialisation.kaiming),
    computed with fan.
    [/derive]
    [guided]
    std = sqrt(2 / ((1 + negative_slope^2) * fan)). With ReLU
    (negative_slope = 0) its factor 2 makes up for ReLU halving the second
    moment of its input, E[ReLU(z)^2] = Var(z) / 2 (not its variance:
    §initialisation.kaiming).
    [/guided]
    """
    # TODO: implement
    raise NotImplementedError("init.kaiming_normal")
