"""Normalisation layers (topic ``normalization``): Batch, Layer, RMS, Group, Instance.

Follows the course text, chapter ``normalization``: BatchNorm's forward
(§normalization.batchnorm-forward), running statistics
(§normalization.batchnorm-running-stats) and backward
(§normalization.batchnorm-backward), §normalization.layernorm,
§normalization.rmsnorm (with its backward derivation) and
§normalization.groupnorm (which axes each layer reduces over).

Conventions for every layer here:
- eps is inside the square root: x_hat = (x - mu) / sqrt(var + eps).
- The variance used to normalise is the biased one (divide by m, not m - 1).
- gamma and beta have the shapes given in the constructors; backward sets
  dgamma (and dbeta) with the same shapes, summed over every other axis.

Grade it with ``.venv/bin/grade submit normalization`` (one exercise:
``.venv/bin/grade submit normalization.BatchNorm1d``).
"""

from __future__ import annotations

import numpy as np

from .base import Module


class BatchNorm1d(Module):
    """Batch normalisation of x (N, C) or (N, C, L), per channel (Ioffe & Szegedy, 2015)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.gamma = np.ones(num_features, dtype=np.float64)
        self.beta = np.zeros(num_features, dtype=np.float64)
        self.running_mean = np.zeros(num_features, dtype=np.float64)
        self.running_var = np.ones(num_features, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = gamma * x_hat + beta, x_hat = (x - mu) / sqrt(var + eps), per channel.

        Statistics over axis 0 for x (N, C), over axes 0 and 2 for x (N, C, L);
        m = number of values per channel (N or N * L). gamma, beta and the
        statistics have shape (C,): reshape them to (1, C) or (1, C, 1).

        Training (self.training True): mu, var = batch mean and biased batch
        variance; then update running_mean and running_var as exponential
        moving averages of mu and var (the running variance takes the UNBIASED
        batch variance; §normalization.batchnorm-running-stats):
        [guided]
            running_mean = (1 - momentum) * running_mean + momentum * mu
            running_var  = (1 - momentum) * running_var  + momentum * var * m / (m - 1)
        [/guided]
        momentum is the weight of the NEW batch statistic (PyTorch's
        convention; 0.1 moves the running value 10% of the way). CS231n's notes use the opposite
        (momentum = 0.9 keeps 90% of the old value): not here. With m = 1
        the unbiased variance is undefined: raise ValueError like PyTorch.
        Eval: mu, var = running_mean, running_var; update nothing. Eval is
        graded with running statistics set beforehand (as after loading a
        model), so read self.running_mean / self.running_var there.
        The input x is never modified (x - mu, never x -= mu), and backward
        leaves dout and the parameters alone.
        [derive]
        Cache x_hat and 1 / sqrt(var + eps) (and the mode) for backward.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("normalization.BatchNorm1d.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dL/dx for the last forward, shape of x; works in both modes.

        In training mu and var depend on x (derive dx through them:
        §normalization.batchnorm-backward); in eval the running statistics are constants.
        [guided]
        Training mode (sums over the statistics axes, m values per channel):
            dx = gamma / (m * sqrt(var + eps)) * (m * dout - sum(dout) - x_hat * sum(dout * x_hat))
        Eval mode (the statistics are constants): dx = dout * gamma / sqrt(running_var + eps).
        [/guided]

        Set self.dgamma = dL/dgamma and self.dbeta = dL/dbeta, shape (C,)
        (summed over the statistics axes).
        [guided]
        self.dgamma = sum(dout * x_hat), self.dbeta = sum(dout).
        [/guided]
        Must not change gamma, beta or the running statistics.
        """
        # TODO: implement
        raise NotImplementedError("normalization.BatchNorm1d.backward")


class BatchNorm2d(Module):
    """Batch normalisation of images x (N, C, H, W), per channel."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.gamma = np.ones(num_features, dtype=np.float64)
        self.beta = np.zeros(num_features, dtype=np.float64)
        self.running_mean = np.zeros(num_features, dtype=np.float64)
        self.running_var = np.ones(num_features, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """As BatchNorm1d, with statistics over axes 0, 2, 3 (m = N * H * W).

        gamma, beta and the statistics broadcast as shape (1, C, 1, 1).
        Training: batch statistics and the running-statistics update (unbiased
        running variance, momentum = weight of the new statistic, as in
        BatchNorm1d; with m = 1 raise ValueError); eval: running statistics,
        no update. Never modify x. Cache for backward.
        running_mean and running_var keep shape (C,).
        """
        # TODO: implement
        raise NotImplementedError("normalization.BatchNorm2d.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """As BatchNorm1d.backward with sums over axes 0, 2, 3 (dx = dL/dx, both modes).

        [guided]
        Training: dx = gamma / (m * sqrt(var + eps)) * (m * dout - sum(dout) - x_hat * sum(dout * x_hat));
        eval: dx = dout * gamma / sqrt(running_var + eps).
        [/guided]
        Set self.dgamma, self.dbeta, shape (C,). Must not change gamma, beta or
        the running statistics.
        """
        # TODO: implement
        raise NotImplementedError("normalization.BatchNorm2d.backward")


class LayerNorm(Module):
    """Layer normalisation over the trailing dims (Ba, Kiros & Hinton, 2016)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5) -> None:
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.gamma = np.ones(self.normalized_shape, dtype=np.float64)
        self.beta = np.zeros(self.normalized_shape, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = gamma * (x - mu) / sqrt(var + eps) + beta.

        mu and the biased var are taken over the trailing dims equal to
        normalized_shape (D = their product values), separately for every
        index of the leading dims (any number of them). Same in train and
        eval. Never modify x.
        [derive]
        Cache x_hat and rstd = 1 / sqrt(var + eps).
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("normalization.LayerNorm.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dL/dx for the last forward, shape of x (mu and var depend on x).

        [guided]
        With g = dout * gamma and sums over the normalised (trailing) dims:
            dx = rstd / D * (D * g - sum(g) - x_hat * sum(g * x_hat))
        [/guided]

        Set self.dgamma = dL/dgamma and self.dbeta = dL/dbeta, summed over ALL
        leading dims, shape normalized_shape.
        [guided]
        self.dgamma = sum(dout * x_hat), self.dbeta = sum(dout).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("normalization.LayerNorm.backward")


class RMSNorm(Module):
    """Root-mean-square normalisation over the last axis (Zhang & Sennrich, 2019)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        self.dim = dim
        self.eps = eps
        self.gamma = np.ones(dim, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = x / RMS(x) * gamma, RMS(x) = sqrt(mean(x^2 over the last axis) + eps).

        No mean subtraction and no beta. x (..., dim): any leading dims.
        Same in train and eval. Never modify x.
        [derive]
        Cache x and RMS (keepdims=True).
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("normalization.RMSNorm.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dL/dx for the last forward, shape of x (RMS depends on x).

        [guided]
        dx_i = gamma_i * dout_i / RMS - x_i / (D * RMS^3) * sum_j(dout_j * gamma_j * x_j).
        (Sum over the last axis, D = dim.)
        [/guided]
        Set self.dgamma = dL/dgamma over ALL leading axes, shape (dim,): the
        course's RMSNormScratch sums over axis 0 only, which is wrong for 3-D input.
        [guided]
        self.dgamma = sum(dout * x / RMS).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("normalization.RMSNorm.backward")


class GroupNorm(Module):
    """Group normalisation of x (N, C, *): per sample, per group of channels (Wu & He, 2018)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5) -> None:
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(
                f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.gamma = np.ones(num_channels, dtype=np.float64)
        self.beta = np.zeros(num_channels, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = gamma * x_hat + beta, gamma and beta per channel (axis 1).

        Split the C channels into num_groups groups of C / num_groups
        consecutive channels; mu and the biased var are taken per sample and
        per group, over the group's channels and all trailing axes.
        [derive]
        Hint: reshape x to (N, G, -1), normalise along the last axis, reshape back.
        Cache x_hat and rstd.
        [/derive]
        Same in train and eval. Never modify x.
        """
        # TODO: implement
        raise NotImplementedError("normalization.GroupNorm.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dL/dx for the last forward, shape of x (each group's mu and var depend on x).

        [guided]
        With g = dout * gamma (per channel), in the (N, G, m) view of each group:
            dx = rstd / m * (m * g - sum(g) - x_hat * sum(g * x_hat))
        [/guided]

        Set self.dgamma = dL/dgamma, self.dbeta = dL/dbeta, summed over every
        axis but axis 1, shape (C,).
        [guided]
        self.dgamma = sum(dout * x_hat), self.dbeta = sum(dout).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("normalization.GroupNorm.backward")


class InstanceNorm2d(Module):
    """Instance normalisation of x (N, C, H, W): per sample and channel (Ulyanov et al., 2016)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        self.num_features = num_features
        self.eps = eps
        self.gamma = np.ones(num_features, dtype=np.float64)
        self.beta = np.zeros(num_features, dtype=np.float64)

    def forward(self, x: np.ndarray) -> np.ndarray:
        """y = gamma * (x - mu) / sqrt(var + eps) + beta, statistics over axes 2, 3.

        One mu and biased var per (sample, channel); gamma, beta broadcast as
        (1, C, 1, 1). Same in train and eval. Never modify x.
        [derive]
        Cache x_hat and rstd.
        [/derive]
        """
        # TODO: implement
        raise NotImplementedError("normalization.InstanceNorm2d.forward")

    def backward(self, dout: np.ndarray) -> np.ndarray:
        """dx = dL/dx for the last forward, shape of x (mu and var depend on x).

        [guided]
        With g = dout * gamma, sums over axes 2, 3 and m = H * W:
            dx = rstd / m * (m * g - sum(g) - x_hat * sum(g * x_hat))
        [/guided]

        Set self.dgamma = dL/dgamma, self.dbeta = dL/dbeta, summed over axes
        0, 2, 3, shape (C,).
        [guided]
        self.dgamma = sum(dout * x_hat), self.dbeta = sum(dout).
        [/guided]
        """
        # TODO: implement
        raise NotImplementedError("normalization.InstanceNorm2d.backward")
