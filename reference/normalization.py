"""Normalisation layers (reference, NumPy float64).

All of them compute x_hat = (x - mu) / sqrt(var + eps) (RMSNorm: x / RMS) over
some axes with the biased (1/m) variance, then y = gamma * x_hat + beta. For
statistics over m values the input gradient is

    dx = (1 / sqrt(var + eps)) * (g - mean(g) - x_hat * mean(g * x_hat)),  g = dout * gamma,

with the means over the same axes.
"""

from __future__ import annotations

import numpy as np

from .base import Module


def _channel_view(v: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) vector shaped (1, C, 1, ...) to broadcast against an (N, C, ...) input."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _normalized_grad(g: np.ndarray, x_hat: np.ndarray, inv_std: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), means over axes."""
    mean_g = g.mean(axis=axes, keepdims=True)
    mean_gx = (g * x_hat).mean(axis=axes, keepdims=True)
    return inv_std * (g - mean_g - x_hat * mean_gx)


class BatchNorm1d(Module):
    """Batch normalisation over axis 0 of (N, C), or axes 0 and 2 of (N, C, L).

    Training: x_hat = (x - mu_B) / sqrt(var_B + eps) (biased var_B), y = gamma x_hat + beta,
    running_mean = (1 - momentum) running_mean + momentum mu_B,
    running_var = (1 - momentum) running_var + momentum * m / (m - 1) * var_B.
    Eval: the running statistics normalise and nothing is updated.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.gamma = np.ones(num_features)
        self.beta = np.zeros(num_features)
        self.running_mean = np.zeros(num_features)
        self.running_var = np.ones(num_features)
        self.cache: dict | None = None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = gamma (x - mu) / sqrt(var + eps) + beta, batch statistics in training, running ones in eval."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm1d({self.num_features}) expects input (N, {self.num_features}) or "
                f"(N, {self.num_features}, L), got shape {x.shape}"
            )
        return _batchnorm_forward(self, x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """Training: dx = inv_std (g - mean(g) - x_hat mean(g x_hat)), g = dout gamma; eval: dx = g inv_std.

        dgamma = sum(dout x_hat), dbeta = sum(dout), over every axis but the channel axis.
        """
        return _batchnorm_backward(self, np.asarray(dout, dtype=np.float64))


class BatchNorm2d(Module):
    """Batch normalisation of (N, C, H, W) over axes 0, 2, 3 (per channel); as BatchNorm1d otherwise."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.gamma = np.ones(num_features)
        self.beta = np.zeros(num_features)
        self.running_mean = np.zeros(num_features)
        self.running_var = np.ones(num_features)
        self.cache: dict | None = None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = gamma (x - mu) / sqrt(var + eps) + beta, statistics over N, H, W per channel."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 4 or x.shape[1] != self.num_features:
            raise ValueError(
                f"BatchNorm2d({self.num_features}) expects input (N, {self.num_features}, H, W), got shape {x.shape}"
            )
        return _batchnorm_forward(self, x)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """As BatchNorm1d.backward, with the sums over N, H, W."""
        return _batchnorm_backward(self, np.asarray(dout, dtype=np.float64))


def _batchnorm_forward(bn: BatchNorm1d | BatchNorm2d, x: np.ndarray) -> np.ndarray:
    """Shared BatchNorm forward for an (N, C, ...) input; caches x_hat and 1/sqrt(var + eps)."""
    axes = tuple(a for a in range(x.ndim) if a != 1)
    m = x.size // x.shape[1]
    if bn.training:
        if m <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {x.shape}")
        mean = x.mean(axis=axes)
        var = x.var(axis=axes)
        bn.running_mean = (1.0 - bn.momentum) * bn.running_mean + bn.momentum * mean
        bn.running_var = (1.0 - bn.momentum) * bn.running_var + bn.momentum * var * m / (m - 1)
    else:
        mean = bn.running_mean
        var = bn.running_var
    inv_std = _channel_view(1.0 / np.sqrt(var + bn.eps), x.ndim)
    x_hat = (x - _channel_view(mean, x.ndim)) * inv_std
    bn.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes, "training": bn.training}
    return _channel_view(bn.gamma, x.ndim) * x_hat + _channel_view(bn.beta, x.ndim)


def _batchnorm_backward(bn: BatchNorm1d | BatchNorm2d, dout: np.ndarray) -> np.ndarray:
    """Shared BatchNorm backward (training: through the batch statistics; eval: affine only)."""
    assert bn.cache is not None  # set by forward
    x_hat, inv_std, axes = bn.cache["x_hat"], bn.cache["inv_std"], bn.cache["axes"]
    bn.dgamma = (dout * x_hat).sum(axis=axes)
    bn.dbeta = dout.sum(axis=axes)
    g = dout * _channel_view(bn.gamma, dout.ndim)
    if not bn.cache["training"]:
        return g * inv_std
    return _normalized_grad(g, x_hat, inv_std, axes)


class LayerNorm(Module):
    """y = gamma (x - mu) / sqrt(var + eps) + beta, statistics over the trailing dims normalized_shape."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5) -> None:
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.gamma = np.ones(self.normalized_shape)
        self.beta = np.zeros(self.normalized_shape)
        self.cache: dict | None = None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """mu, var over the trailing len(normalized_shape) axes of each sample."""
        x = np.asarray(x, dtype=np.float64)
        k = len(self.normalized_shape)
        if x.ndim < k or x.shape[x.ndim - k :] != self.normalized_shape:
            raise ValueError(
                f"LayerNorm{self.normalized_shape} expects input (*, {', '.join(map(str, self.normalized_shape))}), "
                f"got shape {x.shape}"
            )
        axes = tuple(range(x.ndim - k, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = x.var(axis=axes, keepdims=True)
        inv_std = 1.0 / np.sqrt(var + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "axes": axes}
        return self.gamma * x_hat + self.beta

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = inv_std (g - mean(g) - x_hat mean(g x_hat)), g = dout gamma; dgamma, dbeta summed over leading dims."""
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, axes = self.cache["x_hat"], self.cache["inv_std"], self.cache["axes"]
        leading = tuple(range(dout.ndim - len(axes)))
        self.dgamma = (dout * x_hat).sum(axis=leading)
        self.dbeta = dout.sum(axis=leading)
        return _normalized_grad(dout * self.gamma, x_hat, inv_std, axes)


class RMSNorm(Module):
    """y = x / RMS(x) * gamma, RMS(x) = sqrt(mean(x^2) + eps) over the last axis.

    dx = gamma dout / RMS - x / (D RMS^3) * sum(dout gamma x); dgamma = sum(dout x / RMS) over all leading axes.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        self.dim = dim
        self.eps = eps
        self.gamma = np.ones(dim)
        self.cache: dict | None = None
        self.dgamma: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x / sqrt(mean(x^2, last axis) + eps) * gamma."""
        x = np.array(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"RMSNorm({self.dim}) expects input (*, {self.dim}), got shape {x.shape}")
        rms = np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + self.eps)
        x_norm = x / rms
        self.cache = {"x": x, "rms": rms, "x_norm": x_norm}
        return x_norm * self.gamma

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dout gamma / RMS - x / (D RMS^3) sum(dout gamma x); dgamma = sum over leading axes of dout x / RMS."""
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x, rms, x_norm = self.cache["x"], self.cache["rms"], self.cache["x_norm"]
        self.dgamma = (dout * x_norm).reshape(-1, self.dim).sum(axis=0)
        sum_term = np.sum(dout * self.gamma * x, axis=-1, keepdims=True)
        return dout * self.gamma / rms - x / (self.dim * rms**3) * sum_term


class GroupNorm(Module):
    """x (N, C, *): per sample, mu and var over each group of C / num_groups channels (and all of *).

    y = gamma x_hat + beta with gamma, beta per channel.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5) -> None:
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.gamma = np.ones(num_channels)
        self.beta = np.zeros(num_channels)
        self.cache: dict | None = None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Statistics over axis 2 of x reshaped (N, num_groups, -1)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm expects input (N, {self.num_channels}, *), got shape {x.shape}")
        grouped = x.reshape(x.shape[0], self.num_groups, -1)
        mean = grouped.mean(axis=2, keepdims=True)
        var = grouped.var(axis=2, keepdims=True)
        inv_std = 1.0 / np.sqrt(var + self.eps)
        x_hat = (grouped - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std, "shape": x.shape}
        return _channel_view(self.gamma, x.ndim) * x_hat.reshape(x.shape) + _channel_view(self.beta, x.ndim)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx per group as for LayerNorm, g = dout gamma; dgamma, dbeta summed over all axes but 1."""
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std, shape = self.cache["x_hat"], self.cache["inv_std"], self.cache["shape"]
        axes = tuple(a for a in range(dout.ndim) if a != 1)
        self.dgamma = (dout * x_hat.reshape(shape)).sum(axis=axes)
        self.dbeta = dout.sum(axis=axes)
        g = (dout * _channel_view(self.gamma, dout.ndim)).reshape(x_hat.shape)
        return _normalized_grad(g, x_hat, inv_std, (2,)).reshape(shape)


class InstanceNorm2d(Module):
    """x (N, C, H, W): mu and var over H, W for each sample and channel; y = gamma x_hat + beta (affine, per
    channel)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        self.num_features = num_features
        self.eps = eps
        self.gamma = np.ones(num_features)
        self.beta = np.zeros(num_features)
        self.cache: dict | None = None
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        """x_hat = (x - mean_{H,W}) / sqrt(var_{H,W} + eps)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 4 or x.shape[1] != self.num_features:
            raise ValueError(
                f"InstanceNorm2d({self.num_features}) expects input (N, {self.num_features}, H, W), got shape {x.shape}"
            )
        mean = x.mean(axis=(2, 3), keepdims=True)
        var = x.var(axis=(2, 3), keepdims=True)
        inv_std = 1.0 / np.sqrt(var + self.eps)
        x_hat = (x - mean) * inv_std
        self.cache = {"x_hat": x_hat, "inv_std": inv_std}
        return _channel_view(self.gamma, 4) * x_hat + _channel_view(self.beta, 4)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx over (H, W) as for LayerNorm, g = dout gamma; dgamma, dbeta summed over N, H, W."""
        assert self.cache is not None  # set by forward
        dout = np.asarray(dout, dtype=np.float64)
        x_hat, inv_std = self.cache["x_hat"], self.cache["inv_std"]
        self.dgamma = (dout * x_hat).sum(axis=(0, 2, 3))
        self.dbeta = dout.sum(axis=(0, 2, 3))
        g = dout * _channel_view(self.gamma, 4)
        return _normalized_grad(g, x_hat, inv_std, (2, 3))
