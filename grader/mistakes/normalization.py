"""Known mistakes in the normalisation layers, each a wrong subclass of the reference layer.

BatchNorm variants share one parameterised forward/backward (:func:`_bn_forward`,
:func:`_bn_backward`) with exactly one flag turned on per mistake.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.mistakes import Mistake, flagged, make
from reference import normalization as ref

_view = ref._channel_view
_normalized_grad = ref._normalized_grad


# --------------------------------------------------------------------------- BatchNorm


def _bn_forward(bn: Any, x: np.ndarray, **flag: bool) -> np.ndarray:
    """Reference BatchNorm forward, with one mistake switched on by a flag.

    Flags: biased_running, count_n, momentum_inverted, momentum_default, no_update,
    eps_outside, no_eps, eval_no_eps, eval_batch_stats, eval_updates, unbiased_norm, stats_axis0,
    stats_axis0_update (axis-0 statistics also feed the running update), no_affine,
    affine_last_axis (gamma, beta of shape (C,) used without reshaping: they broadcast on the last axis),
    train_running (training normalises with the just-updated running statistics),
    inplace (x -= mean on the caller's array), no_keepdims (statistics of shape (C,) subtracted from x as is),
    eval_no_affine (eval returns x_hat: gamma and beta dropped), eval_eps_outside (eval divides by
    sqrt(running_var) + eps), running_plus_eps (the running variance accumulates var + eps),
    eval_double_mean (eval subtracts running_mean twice), stats_no_axis (mean and var of the whole batch, no
    axis: one scalar each), eps_subtracted (1 / sqrt(var - eps)).
    """
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(a for a in range(x.ndim) if a != 1)
    m = x.size // x.shape[1]
    if bn.training and m <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {x.shape}")
    if flag.get("no_keepdims"):
        return _bn_forward_no_keepdims(bn, x, axes, m)
    axes_b: tuple[int, ...] | None
    if flag.get("stats_axis0_update"):
        axes_b = (0,)
    elif flag.get("stats_no_axis"):
        axes_b = None
    else:
        axes_b = axes
    mean_b, var_b = x.mean(axis=axes_b), x.var(axis=axes_b)

    def update() -> None:
        if flag.get("no_update"):
            return
        count = x.shape[0] if flag.get("count_n") else m
        unbiased = var_b if flag.get("biased_running") else var_b * count / (count - 1)
        if flag.get("running_plus_eps"):
            unbiased = unbiased + bn.eps
        momentum = 0.1 if flag.get("momentum_default") else bn.momentum
        if flag.get("momentum_inverted"):
            bn.running_mean = momentum * bn.running_mean + (1.0 - momentum) * mean_b
            bn.running_var = momentum * bn.running_var + (1.0 - momentum) * unbiased
        else:
            bn.running_mean = (1.0 - momentum) * bn.running_mean + momentum * mean_b
            bn.running_var = (1.0 - momentum) * bn.running_var + momentum * unbiased

    stat_axes = axes
    if flag.get("train_running") and bn.training:
        update()
        mean = _view(bn.running_mean, x.ndim)
        var = _view(bn.running_var, x.ndim)
    elif bn.training or flag.get("eval_batch_stats"):
        if flag.get("stats_axis0") or flag.get("stats_axis0_update"):
            stat_axes = (0,)
        elif flag.get("stats_no_axis"):
            stat_axes = tuple(range(x.ndim))
        mean = x.mean(axis=stat_axes, keepdims=True)
        var = x.var(axis=stat_axes, keepdims=True, ddof=1 if flag.get("unbiased_norm") else 0)
        if bn.training:
            update()
    else:
        mean = _view(bn.running_mean, x.ndim)
        var = _view(bn.running_var, x.ndim)
    if flag.get("eps_outside") or (flag.get("eval_eps_outside") and not bn.training):
        inv_std = 1.0 / (np.sqrt(var) + bn.eps)
    elif flag.get("no_eps") or (flag.get("eval_no_eps") and not bn.training):
        inv_std = 1.0 / np.sqrt(var)
    elif flag.get("eps_subtracted"):
        inv_std = 1.0 / np.sqrt(var - bn.eps)
    else:
        inv_std = 1.0 / np.sqrt(var + bn.eps)
    if flag.get("eval_double_mean") and not bn.training:
        mean = 2.0 * mean  # x - running_mean, then - running_mean again
    if flag.get("inplace"):
        x -= mean
        x_hat = x * inv_std
    else:
        x_hat = (x - mean) * inv_std
    training_grad = bn.training or bool(flag.get("eval_batch_stats"))
    bn.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes, "stat_axes": stat_axes, "training": training_grad}
    if flag.get("no_affine") or (flag.get("eval_no_affine") and not bn.training):
        y = x_hat
    elif flag.get("affine_last_axis"):
        y = bn.gamma * x_hat + bn.beta
    else:
        y = _view(bn.gamma, x.ndim) * x_hat + _view(bn.beta, x.ndim)
    if not bn.training and flag.get("eval_updates"):
        update()
    return y


def _bn_forward_no_keepdims(bn: Any, x: np.ndarray, axes: tuple[int, ...], m: int) -> np.ndarray:
    """BatchNorm forward with (C,) statistics and parameters used without reshaping: x - mu.

    Right for (N, C); for (N, C, L) the subtraction broadcasts (C,) against the last axis
    and raises (or silently mixes axes when L == C).
    """
    if bn.training:
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        bn.running_mean = (1.0 - bn.momentum) * bn.running_mean + bn.momentum * mean
        bn.running_var = (1.0 - bn.momentum) * bn.running_var + bn.momentum * var * m / (m - 1)
    else:
        mean, var = bn.running_mean, bn.running_var
    inv_std = 1.0 / np.sqrt(var + bn.eps)
    x_hat = (x - mean) * inv_std
    bn.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes, "stat_axes": axes, "training": bn.training}
    return bn.gamma * x_hat + bn.beta


def _bn_backward(bn: Any, dout: np.ndarray, **flag: bool) -> np.ndarray:
    """Reference BatchNorm backward with one mistake switched on by a flag.

    Flags: ignore_stats, missing_mean_term, missing_xhat_term, eval_stats_grad, dgamma_axis0, dx_missing_gamma,
    count_batch (the compact formula with N = dout.shape[0] in place of m values per channel),
    no_eps (1 / sqrt(var) in place of forward's 1 / sqrt(var + eps); x_hat as forward cached it).
    """
    dout = np.asarray(dout, dtype=np.float64)
    c = bn.cache
    sum_axes = (0,) if flag.get("dgamma_axis0") else c["axes"]
    bn.dgamma = (dout * c["x_hat"]).sum(axis=sum_axes)
    bn.dbeta = dout.sum(axis=sum_axes)
    g = dout if flag.get("dx_missing_gamma") else dout * _view(bn.gamma, dout.ndim)
    x_hat, inv_std, axes = c["x_hat"], c["inv_std"], c.get("stat_axes", c["axes"])
    if flag.get("no_eps"):
        inv_std = 1.0 / np.sqrt(1.0 / inv_std**2 - bn.eps)  # 1 / sqrt(var) from 1 / sqrt(var + eps)
    if (not c["training"] and not flag.get("eval_stats_grad")) or flag.get("ignore_stats"):
        return g * inv_std
    if flag.get("missing_mean_term"):
        return inv_std * (g - x_hat * (g * x_hat).mean(axis=axes, keepdims=True))
    if flag.get("missing_xhat_term"):
        return inv_std * (g - g.mean(axis=axes, keepdims=True))
    if flag.get("count_batch"):
        n = dout.shape[0]
        return (
            inv_std / n * (n * g - g.sum(axis=axes, keepdims=True) - x_hat * (g * x_hat).sum(axis=axes, keepdims=True))
        )
    return _normalized_grad(g, x_hat, inv_std, axes)


def _bn_flagged(base: type, flags: dict[str, set[str]], name: str | None = None) -> type:
    """A subclass of a reference BatchNorm with the forward flags ``flags["forward"]`` and backward flags
    ``flags["backward"]`` on (several at once: a student with two mistakes, see grader.mistakes.compose)."""
    return flagged(base, _BN_IMPL, flags, name)


_BN_IMPL: dict[str, Any] = {"forward": _bn_forward, "backward": _bn_backward}  # the type of flagged's impl


def _bn_variant(base: type, name: str, forward_flag: str | None = None, backward_flag: str | None = None) -> type:
    """A subclass of a reference BatchNorm with one forward or backward flag on."""
    flags = {
        "forward": {forward_flag} if forward_flag else set(),
        "backward": {backward_flag} if backward_flag else set(),
    }
    return _bn_flagged(base, flags, name)


# --------------------------------------------------------------------------- LayerNorm


class LNBatchAxis(ref.LayerNorm):
    """Statistics over axis 0 (the batch) instead of the trailing feature axes."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=0, keepdims=True)
        var = x.var(axis=0, keepdims=True)
        inv_std = 1.0 / np.sqrt(var + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {
            "x_hat": x_hat,
            "inv_std": inv_std,
            "axes": tuple(range(x.ndim - len(self.normalized_shape), x.ndim)),
        }
        self._stat_axes = (0,)
        return self.gamma * x_hat + self.beta

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, axes = self.cache["x_hat"], self.cache["inv_std"], self.cache["axes"]
        leading = tuple(range(dout.ndim - len(axes)))
        self.dgamma = (dout * x_hat).sum(axis=leading)
        self.dbeta = dout.sum(axis=leading)
        return _normalized_grad(dout * self.gamma, x_hat, inv_std, (0,))


class LNEpsOutsideSqrt(ref.LayerNorm):
    """x_hat = (x - mu) / (sqrt(var) + eps)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        inv_std = 1.0 / (np.sqrt(x.var(axis=axes, keepdims=True)) + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes}
        return self.gamma * x_hat + self.beta


class LNEpsMissing(ref.LayerNorm):
    """x_hat = (x - mu) / sqrt(var): no eps at all."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True))
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes}
        return self.gamma * x_hat + self.beta


class LNUnbiasedVar(ref.LayerNorm):
    """Normalises with the unbiased variance (ddof=1)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        axes = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True, ddof=1) + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes}
        return self.gamma * x_hat + self.beta


class LNLastAxisOnly(ref.LayerNorm):
    """Statistics over the last axis only, even when normalized_shape has several dims."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=-1, keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {
            "x_hat": x_hat,
            "inv_std": inv_std,
            "axes": tuple(range(x.ndim - len(self.normalized_shape), x.ndim)),
        }
        return self.gamma * x_hat + self.beta

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, axes = self.cache["x_hat"], self.cache["inv_std"], self.cache["axes"]
        leading = tuple(range(dout.ndim - len(axes)))
        self.dgamma = (dout * x_hat).sum(axis=leading)
        self.dbeta = dout.sum(axis=leading)
        return _normalized_grad(dout * self.gamma, x_hat, inv_std, (-1,))


class LNDgammaAxis0(ref.LayerNorm):
    """dgamma, dbeta summed over axis 0 only (wrong shape on 3-D input)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dx = super().backward(dout)
        self.dgamma = (dout * self.cache["x_hat"]).sum(axis=0)
        self.dbeta = np.asarray(dout).sum(axis=0)
        return dx


class LNBackwardIgnoresStats(ref.LayerNorm):
    """dx = dout gamma / sqrt(var + eps): the dependence of mu and var on x is ignored."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        return np.asarray(dout) * self.gamma * self.cache["inv_std"]


def _ln_backward(ln: Any, dout: np.ndarray, **flag: bool) -> np.ndarray:
    """Reference LayerNorm backward with mistakes switched on by flags (several combine).

    Flags: dgamma_feature_axis (dgamma, dbeta summed over the normalised feature axes: one per sample),
    dgamma_axes01 (summed over axes (0, 1): right for 3-D input only),
    mean_over_batch (the - mean(g) term averaged over axis 0, the batch), gamma_outside (gamma multiplies the
    whole bracket: dx = gamma inv_std (dout - mean(dout) - x_hat mean(dout x_hat))), diagonal_only (only the
    Jacobian's diagonal: dx = g inv_std (1 - 1/D - x_hat^2 / D)).
    """
    dout = np.asarray(dout, dtype=np.float64)
    x_hat, inv_std, axes = ln.cache["x_hat"], ln.cache["inv_std"], ln.cache["axes"]
    sum_axes = axes if flag.get("dgamma_feature_axis") else tuple(range(dout.ndim - len(axes)))
    if flag.get("dgamma_axes01"):
        sum_axes = (0, 1)
    ln.dgamma = (dout * x_hat).sum(axis=sum_axes)
    ln.dbeta = dout.sum(axis=sum_axes)
    g = dout if flag.get("gamma_outside") else dout * ln.gamma
    count = int(np.prod([dout.shape[a] for a in axes]))
    if flag.get("diagonal_only"):
        dx = g * inv_std * (1.0 - 1.0 / count - x_hat**2 / count)
    else:
        mean_g = g.mean(axis=0, keepdims=True) if flag.get("mean_over_batch") else g.mean(axis=axes, keepdims=True)
        dx = inv_std * (g - mean_g - x_hat * (g * x_hat).mean(axis=axes, keepdims=True))
    return ln.gamma * dx if flag.get("gamma_outside") else dx


def _ln_flagged(name: str, *flags: str) -> type:
    """A LayerNorm whose backward has ``flags`` on (combinable with other flags and with forward mistakes)."""
    return flagged(ref.LayerNorm, _LN_IMPL, {"backward": set(flags)}, name)


_LN_IMPL = {"backward": _ln_backward}


# --------------------------------------------------------------------------- RMSNorm


def _rms_backward(rms_layer: Any, dout: np.ndarray, **flag: bool) -> np.ndarray:
    """Reference RMSNorm backward with mistakes switched on by flags (several combine).

    Flags: term_doubled (the x sum(g x) term twice as large: the 1/2 of d sqrt(u)/du dropped), term_2rms (that
    term off by a factor 2 RMS: divided by RMS^2 and doubled), diagonal_only (only the Jacobian's diagonal:
    dx = g (1 / RMS - x^2 / (D RMS^3))), dgamma_axes01 (dgamma summed over axes (0, 1): a scalar for 2-D input).
    """
    dout = np.asarray(dout, dtype=np.float64)
    x, rms, x_norm = rms_layer.cache["x"], rms_layer.cache["rms"], rms_layer.cache["x_norm"]
    if flag.get("dgamma_axes01"):
        rms_layer.dgamma = (dout * x_norm).sum(axis=(0, 1))
    else:
        rms_layer.dgamma = (dout * x_norm).reshape(-1, rms_layer.dim).sum(axis=0)
    g = dout * rms_layer.gamma
    d = rms_layer.dim
    if flag.get("diagonal_only"):
        return g * (1.0 / rms - x**2 / (d * rms**3))
    term = x / (d * rms**3) * np.sum(g * x, axis=-1, keepdims=True)
    if flag.get("term_doubled"):
        term = 2.0 * term
    if flag.get("term_2rms"):
        term = term * 2.0 * rms
    return g / rms - term


def _rms_flagged(name: str, *flags: str) -> type:
    """An RMSNorm whose backward has ``flags`` on (combinable with other flags and with forward mistakes)."""
    return flagged(ref.RMSNorm, _RMS_IMPL, {"backward": set(flags)}, name)


_RMS_IMPL = {"backward": _rms_backward}


class RMSSubtractsMean(ref.RMSNorm):
    """Centres x like LayerNorm: (x - mu) / sqrt(var + eps) * gamma."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64)
        xc = x - x.mean(axis=-1, keepdims=True)
        rms = np.sqrt(np.mean(xc**2, axis=-1, keepdims=True) + self.eps)
        self.cache = {"x": xc, "rms": rms, "x_norm": xc / rms, "x_raw": x}
        return xc / rms * self.gamma

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_norm, rms = self.cache["x_norm"], self.cache["rms"]
        self.dgamma = (dout * x_norm).reshape(-1, self.dim).sum(axis=0)
        return _normalized_grad(dout * self.gamma, x_norm, 1.0 / rms, (-1,))


class RMSDgammaAxis0(ref.RMSNorm):
    """dgamma = sum(dout x_norm, axis=0): right on 2-D input, shape (T, D) on 3-D (a common slip)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dx = super().backward(dout)
        self.dgamma = np.sum(np.asarray(dout) * self.cache["x_norm"], axis=0)
        return dx


class RMSEpsOutsideSqrt(ref.RMSNorm):
    """RMS = sqrt(mean(x^2)) + eps."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64)
        rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True)) + self.eps
        x_norm = x / rms
        self.cache = {"x": x, "rms": rms, "x_norm": x_norm}
        return x_norm * self.gamma


class RMSGradMissingTerm(ref.RMSNorm):
    """dx = dout gamma / RMS: the dependence of RMS on x is ignored."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        return np.asarray(dout) * self.gamma / self.cache["rms"]


# --------------------------------------------------------------------------- GroupNorm, InstanceNorm


class GNGroupsStrided(ref.GroupNorm):
    """Channel c put in group c % G (strided) instead of c // (C / G) (contiguous)."""

    def _perm(self) -> np.ndarray:
        per = self.num_channels // self.num_groups
        return np.array([g + self.num_groups * i for g in range(self.num_groups) for i in range(per)])

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        perm = self._perm()
        inverse = np.argsort(perm)
        xp = x[:, perm]
        grouped = xp.reshape(x.shape[0], self.num_groups, -1)
        mean = grouped.mean(axis=2, keepdims=True)
        inv_std = 1.0 / np.sqrt(grouped.var(axis=2, keepdims=True) + self.eps)
        x_hat = ((grouped - mean) * inv_std).reshape(x.shape)[:, inverse]
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "shape": x.shape, "perm": perm}
        return _view(self.gamma, x.ndim) * x_hat + _view(self.beta, x.ndim)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dout = np.asarray(dout, dtype=np.float64)
        c = self.cache
        assert c is not None  # set by forward
        perm, shape = c["perm"], c["shape"]
        axes = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * c["x_hat"]).sum(axis=axes)
        self.dbeta = dout.sum(axis=axes)
        g = (dout * _view(self.gamma, dout.ndim))[:, perm].reshape(shape[0], self.num_groups, -1)
        x_hat = c["x_hat"][:, perm].reshape(g.shape)
        dx = _normalized_grad(g, x_hat, c["inv_std"], (2,)).reshape(shape)
        return dx[:, np.argsort(perm)]


class LNBackwardWrongAxis(ref.LayerNorm):
    """backward's means run over axis 0 (the batch) instead of the normalised trailing axes."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, axes = self.cache["x_hat"], self.cache["inv_std"], self.cache["axes"]
        leading = tuple(range(dout.ndim - len(axes)))
        self.dgamma = (dout * x_hat).sum(axis=leading)
        self.dbeta = dout.sum(axis=leading)
        return _normalized_grad(dout * self.gamma, x_hat, inv_std, (0,))


class LNBackwardNoEps(ref.LayerNorm):
    """backward divides by sqrt(var) where forward divided by sqrt(var + eps)."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, axes = self.cache["x_hat"], self.cache["inv_std"], self.cache["axes"]
        leading = tuple(range(dout.ndim - len(axes)))
        self.dgamma = (dout * x_hat).sum(axis=leading)
        self.dbeta = dout.sum(axis=leading)
        no_eps = 1.0 / np.sqrt(1.0 / inv_std**2 - self.eps)
        return _normalized_grad(dout * self.gamma, x_hat, no_eps, axes)


class GNPerLocation(ref.GroupNorm):
    """Statistics over the channels of each group at each location (x viewed (N, G, C/G, *), axis 2 only):
    a per-location LayerNorm over the group; right only without spatial axes."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        grouped = x.reshape((x.shape[0], self.num_groups, -1) + x.shape[2:])
        mean = grouped.mean(axis=2, keepdims=True)
        inv_std = 1.0 / np.sqrt(grouped.var(axis=2, keepdims=True) + self.eps)
        x_hat = (grouped - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "shape": x.shape}
        return _view(self.gamma, x.ndim) * x_hat.reshape(x.shape) + _view(self.beta, x.ndim)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, shape = self.cache["x_hat"], self.cache["inv_std"], self.cache["shape"]
        axes = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * x_hat.reshape(shape)).sum(axis=axes)
        self.dbeta = dout.sum(axis=axes)
        g = (dout * _view(self.gamma, dout.ndim)).reshape(x_hat.shape)
        return _normalized_grad(g, x_hat, inv_std, (2,)).reshape(shape)


class GNPerChannel(ref.GroupNorm):
    """Statistics per channel (InstanceNorm), ignoring num_groups."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        grouped = x.reshape(x.shape[0], self.num_channels, -1)
        mean = grouped.mean(axis=2, keepdims=True)
        inv_std = 1.0 / np.sqrt(grouped.var(axis=2, keepdims=True) + self.eps)
        x_hat = (grouped - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "shape": x.shape}
        return _view(self.gamma, x.ndim) * x_hat.reshape(x.shape) + _view(self.beta, x.ndim)


class INOverChannels(ref.InstanceNorm2d):
    """Statistics over (C, H, W) per sample (LayerNorm) instead of (H, W) per sample and channel."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=(1, 2, 3), keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var(axis=(1, 2, 3), keepdims=True) + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std}
        return _view(self.gamma, 4) * x_hat + _view(self.beta, 4)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std = self.cache["x_hat"], self.cache["inv_std"]
        self.dgamma = (dout * x_hat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        return _normalized_grad(dout * _view(self.gamma, 4), x_hat, inv_std, (1, 2, 3))


class INBatchStats(ref.InstanceNorm2d):
    """Statistics over (N, H, W) per channel (BatchNorm) instead of (H, W) per sample."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=(0, 2, 3), keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var(axis=(0, 2, 3), keepdims=True) + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std}
        return _view(self.gamma, 4) * x_hat + _view(self.beta, 4)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std = self.cache["x_hat"], self.cache["inv_std"]
        self.dgamma = (dout * x_hat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        return _normalized_grad(dout * _view(self.gamma, 4), x_hat, inv_std, (0, 2, 3))


class LNAffineMissing(ref.LayerNorm):
    """forward returns x_hat: gamma and beta are not applied."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        super().forward(x)
        assert self.cache is not None  # set by forward
        return self.cache["x_hat"].copy()


class LNBackwardMissingXhatTerm(ref.LayerNorm):
    """dx = inv_std (g - mean(g)): the variance's dependence on x is ignored."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        g = np.asarray(dout) * self.gamma
        axes = self.cache["axes"]
        return self.cache["inv_std"] * (g - g.mean(axis=axes, keepdims=True))


class LNDxMissingGamma(ref.LayerNorm):
    """dx computed with g = dout instead of dout * gamma."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        return _normalized_grad(
            np.asarray(dout, dtype=np.float64), self.cache["x_hat"], self.cache["inv_std"], self.cache["axes"]
        )


class RMSDxMissingGamma(ref.RMSNorm):
    """dx = dout / RMS - x / (D RMS^3) sum(dout x): gamma is missing."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        dout = np.asarray(dout, dtype=np.float64)
        x, rms = self.cache["x"], self.cache["rms"]
        return dout / rms - x / (self.dim * rms**3) * np.sum(dout * x, axis=-1, keepdims=True)


class RMSEpsMissing(ref.RMSNorm):
    """RMS = sqrt(mean(x^2)): no eps at all."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64)
        rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True))
        self.cache = {"x": x, "rms": rms, "x_norm": x / rms}
        return x / rms * self.gamma


class GNSingleGroup(ref.GroupNorm):
    """One group of all C channels (LayerNorm over (C, *)), whatever num_groups says."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5) -> None:
        super().__init__(num_groups, num_channels, eps)
        self.num_groups = 1


class RMSL2Norm(ref.RMSNorm):
    """Divides by sqrt(sum(x^2) + eps), the L2 norm, instead of the root mean square."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64)
        rms = np.sqrt(np.sum(x**2, axis=-1, keepdims=True) + self.eps)
        self.cache = {"x": x, "rms": rms, "x_norm": x / rms}
        return x / rms * self.gamma

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x, rms, x_norm = self.cache["x"], self.cache["rms"], self.cache["x_norm"]
        self.dgamma = (dout * x_norm).reshape(-1, self.dim).sum(axis=0)
        sum_term = np.sum(dout * self.gamma * x, axis=-1, keepdims=True)
        return dout * self.gamma / rms - x / rms**3 * sum_term


class RMSNoSqrt(ref.RMSNorm):
    """Divides by mean(x^2) + eps, the mean square, without the square root."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64)
        ms = np.mean(x**2, axis=-1, keepdims=True) + self.eps
        self.cache = {"x": x, "rms": ms, "x_norm": x / ms}
        return x / ms * self.gamma


class GNGroupsCountSwapped(ref.GroupNorm):
    """Reshapes to (N, C // G, -1): C // G groups of G channels instead of G groups of C // G."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5) -> None:
        super().__init__(num_groups, num_channels, eps)
        self.num_groups = num_channels // num_groups


class BN2dReshapeWithoutTranspose(ref.BatchNorm2d):
    """x (N, C, H, W) reshaped straight to (-1, C) (no transpose to (N, H, W, C) first): rows mix channels."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        flat = x.reshape(-1, x.shape[1])
        m = flat.shape[0]
        if self.training:
            if m <= 1:
                raise ValueError(f"Expected more than 1 value per channel when training, got input size {x.shape}")
            mean, var = flat.mean(axis=0), flat.var(axis=0)
            self.running_mean = (1.0 - self.momentum) * self.running_mean + self.momentum * mean
            self.running_var = (1.0 - self.momentum) * self.running_var + self.momentum * var * m / (m - 1)
        else:
            mean, var = self.running_mean, self.running_var
        inv_std = 1.0 / np.sqrt(var + self.eps)
        x_hat = (flat - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "training": self.training}
        return (self.gamma * x_hat + self.beta).reshape(x.shape)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        flat = dout.reshape(-1, dout.shape[1])
        x_hat, inv_std = self.cache["x_hat"], self.cache["inv_std"]
        self.dgamma = (flat * x_hat).sum(axis=0)
        self.dbeta = flat.sum(axis=0)
        g = flat * self.gamma
        dx = g * inv_std if not self.cache["training"] else _normalized_grad(g, x_hat, inv_std, (0,))
        return dx.reshape(dout.shape)


def _ln_axes(ln: Any, x: np.ndarray) -> tuple[int, ...]:
    """The trailing len(normalized_shape) axes of x."""
    return tuple(range(x.ndim - len(ln.normalized_shape), x.ndim))


class LNNoKeepdims(ref.LayerNorm):
    """mean and var without keepdims: x - mu broadcasts (N,) against (N, D) and raises (right only when N == 1)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        axes = _ln_axes(self, x)
        mean = x.mean(axis=axes)
        var = x.var(axis=axes)
        x_hat = (x - mean) / np.sqrt(var + self.eps)
        self.cache = {"x_hat": x_hat, "inv_std": 1.0 / np.sqrt(var + self.eps), "axes": axes}
        return self.gamma * x_hat + self.beta


class LNBackwardMissingMeanTerm(ref.LayerNorm):
    """dx = inv_std (g - x_hat mean(g x_hat)): the mean's dependence on x is ignored."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        g = np.asarray(dout, dtype=np.float64) * self.gamma
        x_hat, axes = self.cache["x_hat"], self.cache["axes"]
        return self.cache["inv_std"] * (g - x_hat * (g * x_hat).mean(axis=axes, keepdims=True))


class LNInplaceCentering(ref.LayerNorm):
    """x -= mu on the caller's array (the statistics are right, the input is destroyed)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        axes = _ln_axes(self, x)
        mean = x.mean(axis=axes, keepdims=True)
        inv_std = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + self.eps)
        x -= mean
        x_hat = x * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes}
        return self.gamma * x_hat + self.beta


class RMSGradMissingOneOverD(ref.RMSNorm):
    """dx = dout gamma / RMS - x / RMS^3 * sum(dout gamma x): the 1/D from d mean(x^2) / dx is missing."""

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        super().backward(dout)
        dout = np.asarray(dout, dtype=np.float64)
        x, rms = self.cache["x"], self.cache["rms"]
        return dout * self.gamma / rms - x / rms**3 * np.sum(dout * self.gamma * x, axis=-1, keepdims=True)


class GNGammaTiled(ref.GroupNorm):
    """gamma, beta laid out on the grouped (N, G, -1) view with np.tile (channel order c0 c1 ... c0 c1 ...)
    where np.repeat (c0 c0 ... c1 c1 ...) was needed: right only without spatial axes."""

    def _tiled(self, v: np.ndarray, spatial: int) -> np.ndarray:
        return np.tile(v, spatial).reshape(1, self.num_groups, -1)

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        super().forward(x)
        assert self.cache is not None  # set by forward
        spatial = int(np.prod(x.shape[2:], dtype=np.int64))
        x_hat = self.cache["x_hat"]
        return (self._tiled(self.gamma, spatial) * x_hat + self._tiled(self.beta, spatial)).reshape(x.shape)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, shape = self.cache["x_hat"], self.cache["inv_std"], self.cache["shape"]
        spatial = int(np.prod(shape[2:], dtype=np.int64))
        grouped = dout.reshape(x_hat.shape)
        self.dgamma = (grouped * x_hat).sum(axis=0).reshape(-1, self.num_channels).sum(axis=0)
        self.dbeta = grouped.sum(axis=0).reshape(-1, self.num_channels).sum(axis=0)
        g = grouped * self._tiled(self.gamma, spatial)
        return _normalized_grad(g, x_hat, inv_std, (2,)).reshape(shape)


class INEpsOutsideSqrt(ref.InstanceNorm2d):
    """x_hat = (x - mu) / (sqrt(var) + eps)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=(2, 3), keepdims=True)
        inv_std = 1.0 / (np.sqrt(x.var(axis=(2, 3), keepdims=True)) + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std}
        return _view(self.gamma, 4) * x_hat + _view(self.beta, 4)


N = "normalization."
BN1, BN2 = N + "BatchNorm1d", N + "BatchNorm2d"

_BN_SENTENCES: list[tuple[str, str | None, str | None, str, str]] = [
    (
        "bn-biased-running-var",
        "biased_running",
        None,
        "running_var is updated with the biased batch variance (1/m); it takes the unbiased one.",
        "Update running_var with var * m / (m - 1), m = values per channel (N, or N*L, or N*H*W).",
    ),
    (
        "bn-running-var-count-batch",
        "count_n",
        None,
        "The unbiased correction uses the batch size N instead of m, the number of values per channel.",
        "Use m = x.size // C (N*L for (N, C, L), N*H*W for (N, C, H, W)) in m / (m - 1).",
    ),
    (
        "bn-momentum-inverted",
        "momentum_inverted",
        None,
        "The running statistics keep momentum of the old value: running = m running + (1 - m) batch.",
        "Use running = (1 - momentum) * running + momentum * batch_stat (PyTorch's convention).",
    ),
    (
        "bn-eps-outside-sqrt",
        "eps_outside",
        None,
        "eps is added after the square root: (x - mu) / (sqrt(var) + eps).",
        "Put eps inside: (x - mu) / sqrt(var + eps).",
    ),
    (
        "bn-eval-uses-batch-stats",
        "eval_batch_stats",
        None,
        "In eval mode the batch statistics normalise instead of the running ones.",
        "When not self.training, normalise with running_mean and running_var.",
    ),
    (
        "bn-eval-updates-running",
        "eval_updates",
        None,
        "Eval mode still updates running_mean and running_var.",
        "Update the running statistics only when self.training is True.",
    ),
    (
        "bn-unbiased-normalisation",
        "unbiased_norm",
        None,
        "The batch is normalised with the unbiased variance (ddof=1); normalisation uses the biased one.",
        "Normalise with x.var(axis=...) (1/m); keep m/(m-1) for the running_var update only.",
    ),
    (
        "bn-momentum-ignored",
        "momentum_default",
        None,
        "The constructor's momentum is ignored: the running statistics always move by 0.1.",
        "Use self.momentum in running = (1 - momentum) * running + momentum * batch_stat.",
    ),
    (
        "bn-running-not-updated",
        "no_update",
        None,
        "Training never updates running_mean and running_var.",
        "In training, update both with momentum after computing the batch statistics.",
    ),
    (
        "bn-eval-eps-missing",
        "eval_no_eps",
        None,
        "Eval mode divides by sqrt(running_var) without eps.",
        "Normalise with (x - running_mean) / sqrt(running_var + eps) in eval too.",
    ),
    (
        "bn-eps-missing",
        "no_eps",
        None,
        "eps is missing: (x - mu) / sqrt(var) divides 0 by 0 on a constant channel.",
        "Normalise with (x - mu) / sqrt(var + eps).",
    ),
    (
        "bn-affine-missing",
        "no_affine",
        None,
        "gamma and beta are not applied: forward returns x_hat.",
        "Return gamma * x_hat + beta, with gamma and beta broadcast on the channel axis.",
    ),
    (
        "bn-backward-missing-mean-term",
        None,
        "missing_mean_term",
        "The training dx lacks the - mean(g) term that comes from mu depending on x.",
        "dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), g = dout * gamma, means over the statistic axes.",
    ),
    (
        "bn-backward-missing-xhat-term",
        None,
        "missing_xhat_term",
        "The training dx lacks the - x_hat mean(g x_hat) term that comes from var depending on x.",
        "dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), g = dout * gamma, means over the statistic axes.",
    ),
    (
        "bn-eval-backward-through-stats",
        None,
        "eval_stats_grad",
        "In eval mode backward still differentiates through batch statistics, but eval normalises with constants.",
        "In eval mode dx = dout * gamma / sqrt(running_var + eps).",
    ),
    (
        "bn-dx-missing-gamma",
        None,
        "dx_missing_gamma",
        "dx is computed from dout instead of g = dout * gamma: gamma is missing from the input gradient.",
        "Multiply dout by gamma (on the channel axis) before the normalisation's backward.",
    ),
    (
        "bn-backward-ignores-stats",
        None,
        "ignore_stats",
        "In training, backward treats mu and var as constants: dx = dout gamma / sqrt(var + eps).",
        "Include the batch statistics' gradient: dx = inv_std (g - mean(g) - x_hat mean(g x_hat)), g = dout gamma.",
    ),
    (
        "bn-train-uses-running-stats",
        "train_running",
        None,
        "In training the batch is normalised with the running statistics; they are only for eval.",
        "In training normalise with the batch mean and biased batch variance; update the running ones on the side.",
    ),
    (
        "bn-inplace-centering",
        "inplace",
        None,
        "forward subtracts the mean from the caller's array in place (x -= mu), destroying the input.",
        "Compute a new array: x_centered = x - mu (never x -= mu on the input).",
    ),
    (
        "bn-affine-last-axis",
        "affine_last_axis",
        None,
        "gamma and beta of shape (C,) are used without reshaping, so NumPy broadcasts them on the last axis"
        " instead of the channel axis 1.",
        "Reshape gamma and beta to (1, C, 1) or (1, C, 1, 1) before multiplying and adding.",
    ),
    (
        "bn-eval-no-affine",
        "eval_no_affine",
        None,
        "In eval mode gamma and beta are not applied: eval forward returns x_hat.",
        "In eval return gamma * x_hat + beta too, x_hat = (x - running_mean) / sqrt(running_var + eps).",
    ),
    (
        "bn-eval-eps-outside-sqrt",
        "eval_eps_outside",
        None,
        "In eval mode eps is added after the square root: (x - running_mean) / (sqrt(running_var) + eps).",
        "Put eps inside in eval too: (x - running_mean) / sqrt(running_var + eps).",
    ),
    (
        "bn-backward-eps-missing",
        None,
        "no_eps",
        "backward divides by sqrt(var) without eps, while forward divided by sqrt(var + eps).",
        "Use the same 1 / sqrt(var + eps) in backward as in forward (cache it in forward).",
    ),
    (
        "bn-running-var-plus-eps",
        "running_plus_eps",
        None,
        "running_var accumulates var + eps: eps belongs inside the square root when normalising, not in the"
        " running statistic.",
        "Update running_var with the unbiased batch variance alone; add eps only in sqrt(var + eps).",
    ),
    (
        "bn-eval-double-mean",
        "eval_double_mean",
        None,
        "In eval mode running_mean is subtracted twice (x - running_mean, then again when normalising).",
        "Subtract running_mean once: x_hat = (x - running_mean) / sqrt(running_var + eps).",
    ),
    (
        "bn-stats-no-axis",
        "stats_no_axis",
        None,
        "mean and var are taken over the whole batch with no axis (one number each) instead of per channel.",
        "Average per channel: x.mean(axis=0) for (N, C), axes (0, 2) or (0, 2, 3) for more axes.",
    ),
    (
        "bn-eps-subtracted",
        "eps_subtracted",
        None,
        "eps is subtracted from the variance: sqrt(var - eps) is NaN on a constant channel.",
        "Add eps inside the square root: (x - mu) / sqrt(var + eps).",
    ),
    (
        "bn-backward-count-batch",
        None,
        "count_batch",
        "backward's compact formula uses N = dout.shape[0] where m, the number of values per channel, is needed.",
        "Use m = dout.size // C (N*L or N*H*W) in dx = inv_std / m * (m g - sum(g) - x_hat sum(g x_hat)).",
    ),
]

MISTAKES: list[Mistake] = []
for _base_id, _base in ((BN1, ref.BatchNorm1d), (BN2, ref.BatchNorm2d)):
    for _mid, _ff, _bf, _sentence, _fix in _BN_SENTENCES:
        _suffix = "" if _base_id == BN1 else "-2d"
        MISTAKES.append(
            make(_mid + _suffix, _base_id, _sentence, _fix, _bn_variant(_base, _mid.title().replace("-", ""), _ff, _bf))
        )

MISTAKES += [
    make(
        "bn-3d-stats-axis0",
        BN1,
        "On (N, C, L) input the statistics are taken over axis 0 only (per position), not over axes 0 and 2.",
        "For 3-D input, average over axes (0, 2): x.mean(axis=(0, 2)).",
        _bn_variant(ref.BatchNorm1d, "BN3dStatsAxis0", "stats_axis0"),
    ),
    make(
        "bn-stats-axis0-2d",
        BN2,
        "BatchNorm2d takes statistics over axis 0 only (per pixel), not over N, H and W per channel.",
        "Average over axes (0, 2, 3).",
        _bn_variant(ref.BatchNorm2d, "BN2dStatsAxis0", "stats_axis0"),
    ),
    make(
        "bn-dgamma-wrong-axes",
        BN2,
        "dgamma and dbeta are summed over axis 0 only, giving shape (C, H, W) instead of (C,).",
        "Sum over every axis but the channel axis: axis=(0, 2, 3).",
        _bn_variant(ref.BatchNorm2d, "BNDgammaAxis0", None, "dgamma_axis0"),
    ),
    make(
        "ln-batch-axis",
        N + "LayerNorm",
        "LayerNorm's statistics are taken over axis 0 (the batch, as in BatchNorm) instead of each sample's features.",
        "Average over the trailing len(normalized_shape) axes with keepdims=True.",
        LNBatchAxis,
    ),
    make(
        "ln-eps-outside-sqrt",
        N + "LayerNorm",
        "eps is added after the square root: (x - mu) / (sqrt(var) + eps).",
        "Put eps inside: (x - mu) / sqrt(var + eps).",
        LNEpsOutsideSqrt,
    ),
    make(
        "ln-eps-missing",
        N + "LayerNorm",
        "eps is missing: (x - mu) / sqrt(var) divides 0 by 0 on a constant sample.",
        "Normalise with (x - mu) / sqrt(var + eps).",
        LNEpsMissing,
    ),
    make(
        "ln-unbiased-var",
        N + "LayerNorm",
        "The variance is the unbiased one (ddof=1); LayerNorm uses the biased 1/D variance.",
        "Use x.var(axis=..., keepdims=True) with the default ddof=0.",
        LNUnbiasedVar,
    ),
    make(
        "ln-last-axis-only",
        N + "LayerNorm",
        "With a tuple normalized_shape only the last axis is normalised.",
        "Average over all len(normalized_shape) trailing axes: axes = tuple(range(x.ndim - k, x.ndim)).",
        LNLastAxisOnly,
    ),
    make(
        "ln-dgamma-axis0",
        N + "LayerNorm",
        "dgamma and dbeta are summed over axis 0 only, which is wrong for 3-D input (shape (T, D)).",
        "Sum over every leading axis: dgamma has normalized_shape's shape.",
        LNDgammaAxis0,
    ),
    make(
        "ln-backward-ignores-stats",
        N + "LayerNorm",
        "backward treats mu and var as constants: dx = dout gamma / sqrt(var + eps).",
        "dx = inv_std (g - mean(g) - x_hat mean(g x_hat)) over the normalised axes, g = dout gamma.",
        LNBackwardIgnoresStats,
    ),
    make(
        "ln-affine-missing",
        N + "LayerNorm",
        "gamma and beta are not applied: forward returns x_hat.",
        "Return gamma * x_hat + beta.",
        LNAffineMissing,
    ),
    make(
        "ln-backward-missing-xhat-term",
        N + "LayerNorm",
        "dx lacks the - x_hat mean(g x_hat) term that comes from var depending on x.",
        "dx = inv_std (g - mean(g) - x_hat mean(g x_hat)) over the normalised axes, g = dout gamma.",
        LNBackwardMissingXhatTerm,
    ),
    make(
        "ln-dx-missing-gamma",
        N + "LayerNorm",
        "dx is computed from dout instead of g = dout * gamma: gamma is missing from the input gradient.",
        "Use g = dout * gamma in dx = inv_std (g - mean(g) - x_hat mean(g x_hat)).",
        LNDxMissingGamma,
    ),
    make(
        "rms-dx-missing-gamma",
        N + "RMSNorm",
        "dx is computed from dout instead of dout * gamma: gamma is missing from the input gradient.",
        "Use dx = dout gamma / RMS - x / (D RMS^3) * sum(dout gamma x).",
        RMSDxMissingGamma,
    ),
    make(
        "rms-eps-missing",
        N + "RMSNorm",
        "eps is missing: x / sqrt(mean(x^2)) divides 0 by 0 on an all-zero row.",
        "Use RMS = sqrt(mean(x^2) + eps).",
        RMSEpsMissing,
    ),
    make(
        "gn-single-group",
        N + "GroupNorm",
        "All channels are normalised together (one group, as LayerNorm does), ignoring num_groups.",
        "Reshape x to (N, num_groups, -1) and take the statistics over the last axis.",
        GNSingleGroup,
    ),
    make(
        "rms-l2-norm",
        N + "RMSNorm",
        "x is divided by its L2 norm sqrt(sum(x^2) + eps) instead of the root mean square sqrt(mean(x^2) + eps).",
        "Average the squares over the last axis: np.mean(x**2, axis=-1, keepdims=True).",
        RMSL2Norm,
    ),
    make(
        "rms-no-sqrt",
        N + "RMSNorm",
        "x is divided by the mean square mean(x^2) + eps; the square root is missing.",
        "Divide by RMS = sqrt(mean(x^2) + eps).",
        RMSNoSqrt,
    ),
    make(
        "gn-groups-count-swapped",
        N + "GroupNorm",
        "The channels are split into C // G groups of G channels instead of G groups of C // G channels.",
        "Reshape x to (N, num_groups, -1): num_groups groups, each of C // num_groups channels.",
        GNGroupsCountSwapped,
    ),
    make(
        "rms-subtracts-mean",
        N + "RMSNorm",
        "RMSNorm subtracts the mean like LayerNorm; it only divides by the root mean square.",
        "y = x / sqrt(mean(x^2) + eps) * gamma, without centring.",
        RMSSubtractsMean,
    ),
    make(
        "rms-dgamma-axis0",
        N + "RMSNorm",
        "dgamma is summed over axis 0 only: right for (N, D) input, shape (T, D) for (B, T, D) input.",
        "Sum over every leading axis: (dout * x_norm).reshape(-1, D).sum(axis=0).",
        RMSDgammaAxis0,
    ),
    make(
        "rms-eps-outside-sqrt",
        N + "RMSNorm",
        "eps is added after the square root: sqrt(mean(x^2)) + eps.",
        "Put eps inside: sqrt(mean(x^2) + eps).",
        RMSEpsOutsideSqrt,
    ),
    make(
        "rms-grad-missing-term",
        N + "RMSNorm",
        "backward treats RMS as a constant: dx = dout gamma / RMS.",
        "Subtract x / (D RMS^3) * sum(dout gamma x) over the last axis.",
        RMSGradMissingTerm,
    ),
    make(
        "gn-groups-strided",
        N + "GroupNorm",
        "Channels are grouped with a stride (c % G) instead of in contiguous blocks of C/G channels.",
        "Reshape x to (N, G, C // G, ...) so that group g holds channels g*C/G ... (g+1)*C/G - 1.",
        GNGroupsStrided,
    ),
    make(
        "gn-per-channel",
        N + "GroupNorm",
        "Statistics are taken per channel (InstanceNorm), ignoring num_groups.",
        "Average over each group of C/G channels together: x.reshape(N, G, -1).",
        GNPerChannel,
    ),
    make(
        "in-over-channels",
        N + "InstanceNorm2d",
        "InstanceNorm's statistics are taken over (C, H, W) per sample (LayerNorm) instead of (H, W) per channel.",
        "Average over axes (2, 3) only.",
        INOverChannels,
    ),
    make(
        "in-batch-stats",
        N + "InstanceNorm2d",
        "InstanceNorm's statistics are taken over the batch (N, H, W) per channel, as BatchNorm does.",
        "Average over axes (2, 3) of each sample separately.",
        INBatchStats,
    ),
    make(
        "bn-3d-dgamma-axis0",
        BN1,
        "On (N, C, L) input dgamma and dbeta are summed over axis 0 only, giving shape (C, L) instead of (C,).",
        "Sum over every axis but the channel axis: axis=(0, 2) for (N, C, L).",
        _bn_variant(ref.BatchNorm1d, "BN3dDgammaAxis0", None, "dgamma_axis0"),
    ),
    make(
        "bn-3d-running-stats-axis0",
        BN1,
        "On (N, C, L) input the statistics are taken over axis 0 only, so the running statistics get shape (C, L)"
        " and their update fails (or broadcasts wrongly).",
        "For 3-D input, average over axes (0, 2): x.mean(axis=(0, 2)), shape (C,).",
        _bn_variant(ref.BatchNorm1d, "BN3dRunningStatsAxis0", "stats_axis0_update"),
    ),
    make(
        "bn2d-per-location",
        BN2,
        "Statistics are taken over the batch axis only (per channel and pixel, shape (C, H, W)), and the running"
        " statistics are updated with them, which cannot fit buffers of shape (C,).",
        "Average over axes (0, 2, 3): x.mean(axis=(0, 2, 3)) has shape (C,), like the running buffers.",
        _bn_variant(ref.BatchNorm2d, "BN2dPerLocation", "stats_axis0_update"),
    ),
    make(
        "bn-3d-no-keepdims",
        BN1,
        "The (C,) statistics are subtracted from (N, C, L) input without reshaping, so they broadcast against L.",
        "Reshape the statistics, gamma and beta to (1, C, 1) (or use keepdims=True) for 3-D input.",
        _bn_variant(ref.BatchNorm1d, "BN3dNoKeepdims", "no_keepdims"),
    ),
    make(
        "bn2d-reshape-without-transpose",
        BN2,
        "x (N, C, H, W) was reshaped straight to (-1, C): each row then mixes channels and pixels.",
        "Move the channel axis last first: x.transpose(0, 2, 3, 1).reshape(-1, C), and undo it on the way back.",
        BN2dReshapeWithoutTranspose,
    ),
    make(
        "ln-backward-wrong-axis",
        N + "LayerNorm",
        "backward's sums (the mean(g) and mean(g x_hat) terms) run over axis 0, the batch, instead of each"
        " sample's normalised features.",
        "Take those means over the same trailing axes as forward's statistics, with keepdims=True.",
        LNBackwardWrongAxis,
    ),
    make(
        "ln-backward-eps-missing",
        N + "LayerNorm",
        "backward divides by sqrt(var) without eps, while forward divided by sqrt(var + eps).",
        "Use the same 1 / sqrt(var + eps) in backward as in forward (cache it in forward).",
        LNBackwardNoEps,
    ),
    make(
        "gn-per-location",
        N + "GroupNorm",
        "The statistics are taken over the channels of each group at each spatial location (a per-location"
        " LayerNorm over the group), not over the group's channels and all locations together.",
        "Reshape x to (N, num_groups, -1) so that one group's channels and every location are averaged together.",
        GNPerLocation,
    ),
    make(
        "ln-no-keepdims",
        N + "LayerNorm",
        "mean and var are taken without keepdims=True, so x - mu broadcasts (N,) against (N, D).",
        "Use x.mean(axis=axes, keepdims=True) and x.var(axis=axes, keepdims=True).",
        LNNoKeepdims,
    ),
    make(
        "ln-backward-missing-mean-term",
        N + "LayerNorm",
        "dx lacks the - mean(g) term that comes from mu depending on x.",
        "dx = inv_std (g - mean(g) - x_hat mean(g x_hat)) over the normalised axes, g = dout gamma.",
        LNBackwardMissingMeanTerm,
    ),
    make(
        "ln-inplace-centering",
        N + "LayerNorm",
        "forward subtracts the mean from the caller's array in place (x -= mu), destroying the input.",
        "Compute a new array: x_centered = x - mu (never x -= mu on the input).",
        LNInplaceCentering,
    ),
    make(
        "rms-grad-missing-1-over-d",
        N + "RMSNorm",
        "backward lacks the 1/D of d mean(x^2)/dx: dx = g / RMS - x sum(g x) / RMS^3.",
        "Use dx = g / RMS - x / (D RMS^3) * sum(g x), g = dout gamma, sums over the last axis.",
        RMSGradMissingOneOverD,
    ),
    make(
        "gn-gamma-tiled",
        N + "GroupNorm",
        "gamma and beta are laid out on the grouped view with np.tile, which interleaves channels;"
        " each channel's value must be repeated over its own spatial positions.",
        "Reshape x_hat back to (N, C, *) and multiply by gamma.reshape(1, C, 1, ...) (or use np.repeat).",
        GNGammaTiled,
    ),
    make(
        "in-eps-outside-sqrt",
        N + "InstanceNorm2d",
        "eps is added after the square root: (x - mu) / (sqrt(var) + eps).",
        "Put eps inside: (x - mu) / sqrt(var + eps).",
        INEpsOutsideSqrt,
    ),
    make(
        "ln-dgamma-feature-axis",
        N + "LayerNorm",
        "dgamma and dbeta are summed over the normalised feature axes (one value per sample) instead of over"
        " the leading batch axes.",
        "Sum over every leading axis: dgamma = (dout * x_hat).sum(axis=tuple(range(dout.ndim - k))), shape"
        " normalized_shape.",
        _ln_flagged("LNDgammaFeatureAxis", "dgamma_feature_axis"),
    ),
    make(
        "ln-dgamma-axes01",
        N + "LayerNorm",
        "dgamma and dbeta are summed over axes (0, 1): right for 3-D input only (a scalar for 2-D input, the wrong"
        " shape for 4-D).",
        "Sum over every leading axis, however many: axis=tuple(range(dout.ndim - len(normalized_shape))).",
        _ln_flagged("LNDgammaAxes01", "dgamma_axes01"),
    ),
    make(
        "ln-dx-mean-over-batch",
        N + "LayerNorm",
        "In dx the - mean(g) term is averaged over the batch axis 0 instead of each sample's features.",
        "Average both terms over the normalised feature axes: dx = inv_std (g - mean(g) - x_hat mean(g x_hat)).",
        _ln_flagged("LNDxMeanOverBatch", "mean_over_batch"),
    ),
    make(
        "ln-dx-gamma-outside",
        N + "LayerNorm",
        "gamma multiplies the whole dx bracket instead of entering the sums: mean(dout) and mean(dout x_hat)"
        " are taken without gamma.",
        "Multiply first, g = dout * gamma, then dx = inv_std (g - mean(g) - x_hat mean(g x_hat)).",
        _ln_flagged("LNDxGammaOutside", "gamma_outside"),
    ),
    make(
        "ln-dx-diagonal-only",
        N + "LayerNorm",
        "dx keeps only the diagonal of the Jacobian: each x_i's effect on the other features through mu and var"
        " is missing.",
        "Use the full Jacobian: dx = inv_std (g - mean(g) - x_hat mean(g x_hat)), g = dout * gamma.",
        _ln_flagged("LNDxDiagonalOnly", "diagonal_only"),
    ),
    make(
        "rms-grad-term-doubled",
        N + "RMSNorm",
        "The x sum(g x) term of dx is twice too large: the 1/2 of the square root's derivative is missing.",
        "Use dx = g / RMS - x / (D RMS^3) * sum(g x), g = dout * gamma.",
        _rms_flagged("RMSGradTermDoubled", "term_doubled"),
    ),
    make(
        "rms-grad-term-2rms",
        N + "RMSNorm",
        "The x sum(g x) term of dx is off by a factor 2 RMS: it divides by RMS^2 and keeps a factor 2.",
        "d RMS / dx = x / (D RMS): dx = g / RMS - x / (D RMS^3) * sum(g x), g = dout * gamma.",
        _rms_flagged("RMSGradTerm2Rms", "term_2rms"),
    ),
    make(
        "rms-dx-diagonal-only",
        N + "RMSNorm",
        "dx keeps only the diagonal of the Jacobian: each x_i's effect on the other outputs through RMS is missing.",
        "Use the full Jacobian: dx = g / RMS - x / (D RMS^3) * sum(g x) over the last axis.",
        _rms_flagged("RMSDxDiagonalOnly", "diagonal_only"),
    ),
    make(
        "rms-dgamma-axes01",
        N + "RMSNorm",
        "dgamma is summed over axes (0, 1): a scalar for 2-D input, right only for 3-D input.",
        "Sum over every leading axis: (dout * x_norm).reshape(-1, D).sum(axis=0).",
        _rms_flagged("RMSDgammaAxes01", "dgamma_axes01"),
    ),
]
