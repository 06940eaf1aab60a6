"""Normalisation layers on the OpenCL device (float32), same contract as ``reference.normalization``.

Each class has the CPU reference's name and constructor, ``forward(x)``,
``backward(dout)``, ``train()``/``eval()``, parameters ``gamma`` (and ``beta``)
and their gradients ``dgamma`` (``dbeta``) as NumPy float32 arrays.
``forward``/``backward`` take NumPy arrays (any float dtype, converted to
float32) and return NumPy float32 arrays, or take ``pyopencl.array.Array``
and return device arrays (nothing leaves the device but the small parameter
gradients and BatchNorm's running statistics).

The kernels are in ``rmsnorm.cl``, ``layernorm.cl`` and ``normalization.cl``:
one work-group per row for the row statistics, two-step column reductions
for BatchNorm statistics and for every dgamma/dbeta. BatchNorm updates its
running statistics on the device (unbiased variance, momentum) and copies
them back into ``running_mean``/``running_var``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..base import Module
from .host import (
    COLUMN_LOCAL,
    COLUMN_ROWS,
    ROW_BLOCK,
    Uploads,
    check_dout,
    empty,
    kernel,
    local_memory,
    param,
    result,
    round_up,
    row_local_size,
    run,
    to_device,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pyopencl as cl
    import pyopencl.array as cl_array


def _column_layout(N: int, C: int) -> tuple[int, int, int, int]:
    """(P, R, global width, local width) for the (c, p) partial kernels: P blocks of R rows.

    R = COLUMN_ROWS keeps the rows a work-group walks within a few pages and in
    cache for the neighbouring work-items that read the same lines.
    """
    R = COLUMN_ROWS
    P = max(1, -(-N // R))
    local = min(COLUMN_LOCAL, 1 << max(0, (C - 1).bit_length()))
    return P, R, round_up(max(C, 1), local), local


def _row_blocks(N: int) -> tuple[int, int]:
    """(P, R) for the *_rows4 partial kernels: P work-groups of R = ROW_BLOCK rows."""
    return max(1, -(-N // ROW_BLOCK)), ROW_BLOCK


def _one_group(kernel: "cl.Kernel", C: int, *args: Any) -> None:
    """Launch a finalize kernel as one work-group whose work-items share C columns."""
    L = row_local_size(C)
    run(kernel, (L,), (L,), *args)


def _channel_grads(
    x: "cl_array.Array",
    dy: "cl_array.Array",
    mean: "cl_array.Array | None",
    rstd: "cl_array.Array",
    N: int,
    C: int,
    S: int,
    Cg: int,
    stat_n: int,
) -> tuple["cl_array.Array", "cl_array.Array"]:
    """dgamma[c] = sum(dy * xhat), dbeta[c] = sum(dy) over n and s, xhat = (x - mean[k]) * rstd[k],
    k = n stat_n + c // Cg.

    S = 1 and C % 4 == 0 with statistics per row (stat_n = 1, Cg = C) or per
    column (stat_n = 0, Cg = 1) use the row-block float4 kernel.
    """
    stats = (rstd if mean is None else mean, rstd)
    per_row = stat_n == 1 and Cg == C
    per_column = stat_n == 0 and Cg == 1
    if S == 1 and C % 4 == 0 and (per_row or per_column):
        P, R = _row_blocks(N)
        part_g, part_b = empty((P, C)), empty((P, C))
        L = row_local_size(C // 4)
        run(
            kernel("normalization.cl", "column_grad_rows4"),
            (P * L,),
            (L,),
            x,
            dy,
            *stats,
            part_g,
            part_b,
            N,
            C // 4,
            R,
            per_row,
            mean is not None,
        )
    else:
        P, R, width, local = _column_layout(N, C)
        part_g, part_b = empty((P, C)), empty((P, C))
        run(
            kernel("normalization.cl", "channel_grad_partial"),
            (width, P),
            (local, 1),
            x,
            dy,
            *stats,
            part_g,
            part_b,
            N,
            C,
            S,
            R,
            Cg,
            stat_n,
            mean is not None,
        )
    dgamma, dbeta = empty((C,)), empty((C,))
    _one_group(kernel("normalization.cl", "channel_grad_finalize"), C, part_g, part_b, dgamma, dbeta, P, C)
    return dgamma, dbeta


class RMSNorm(Module):
    """y = x / RMS(x) * gamma, RMS(x) = sqrt(mean(x^2) + eps) over the last axis (rmsnorm.cl).

    backward: dx = rstd (g - xhat mean(g xhat)), g = dout gamma, xhat = x rstd; dgamma = sum(dout xhat).
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        self.dim = dim
        self.eps = eps
        self.gamma = np.ones(dim, dtype=np.float32)
        self.dgamma: np.ndarray | None = None
        self.cache: dict | None = None
        self._uploads = Uploads()

    def forward(self, x: Any) -> Any:
        """One work-group per row: sum of squares in one pass over x, then y = x rstd gamma."""
        if len(x.shape) < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"RMSNorm({self.dim}) expects input (*, {self.dim}), got shape {tuple(x.shape)}")
        xd, on_device = to_device(x)
        rows = xd.size // self.dim
        L = row_local_size(self.dim)
        y, rstd = empty(xd.shape), empty((rows,))
        if rows:
            run(
                kernel("rmsnorm.cl", "rmsnorm_forward"),
                (rows * L,),
                (L,),
                xd,
                self._uploads.get("gamma", self.gamma),
                y,
                rstd,
                self.dim,
                float(self.eps),
                local_memory(L),
            )
        self.cache = {"x": xd, "rstd": rstd, "rows": rows}
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dx per row (rmsnorm_backward); dgamma by a column reduction over the rows."""
        assert self.cache is not None  # set by forward
        xd, rstd, rows = self.cache["x"], self.cache["rstd"], self.cache["rows"]
        dy, on_device = to_device(dout)
        check_dout(dy, xd)
        dx = empty(xd.shape)
        L = row_local_size(self.dim)
        if rows:
            run(
                kernel("rmsnorm.cl", "rmsnorm_backward"),
                (rows * L,),
                (L,),
                xd,
                self._uploads.get("gamma", self.gamma),
                dy,
                rstd,
                dx,
                self.dim,
                local_memory(L),
            )
        dgamma, _ = _channel_grads(xd, dy, None, rstd, rows, self.dim, 1, self.dim, 1)
        self.dgamma = dgamma.get().reshape(self.gamma.shape)
        return result(dx, on_device)


class LayerNorm(Module):
    """y = (x - mean) rstd gamma + beta over the trailing dims ``normalized_shape`` (layernorm.cl).

    backward: dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dout gamma; dgamma = sum(dout xhat), dbeta = sum(dout).
    """

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5) -> None:
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps = eps
        self.gamma = np.ones(self.normalized_shape, dtype=np.float32)
        self.beta = np.zeros(self.normalized_shape, dtype=np.float32)
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None
        self.cache: dict | None = None
        self._uploads = Uploads()

    def forward(self, x: Any) -> Any:
        """One work-group per row of D = prod(normalized_shape): mean, centred variance, then y."""
        k = len(self.normalized_shape)
        if len(x.shape) < k or tuple(x.shape[len(x.shape) - k :]) != self.normalized_shape:
            raise ValueError(
                f"LayerNorm{self.normalized_shape} expects input (*, {', '.join(map(str, self.normalized_shape))}), "
                f"got shape {tuple(x.shape)}"
            )
        xd, on_device = to_device(x)
        D = math.prod(self.normalized_shape)
        rows = xd.size // D
        L = row_local_size(D)
        y, mean, rstd = empty(xd.shape), empty((rows,)), empty((rows,))
        if rows:
            run(
                kernel("layernorm.cl", "layernorm_forward"),
                (rows * L,),
                (L,),
                xd,
                self._uploads.get("gamma", self.gamma),
                self._uploads.get("beta", self.beta),
                y,
                mean,
                rstd,
                D,
                float(self.eps),
                local_memory(L),
            )
        self.cache = {"x": xd, "mean": mean, "rstd": rstd, "rows": rows, "D": D}
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dx per row (layernorm_backward); dgamma, dbeta by column reductions over the rows."""
        c = self.cache
        assert c is not None  # set by forward
        xd, rows, D = c["x"], c["rows"], c["D"]
        dy, on_device = to_device(dout)
        check_dout(dy, xd)
        dx = empty(xd.shape)
        L = row_local_size(D)
        if rows:
            run(
                kernel("layernorm.cl", "layernorm_backward"),
                (rows * L,),
                (L,),
                xd,
                self._uploads.get("gamma", self.gamma),
                dy,
                c["mean"],
                c["rstd"],
                dx,
                D,
                local_memory(2 * L),
            )
        dgamma, dbeta = _channel_grads(xd, dy, c["mean"], c["rstd"], rows, D, 1, D, 1)
        self.dgamma = dgamma.get().reshape(self.normalized_shape)
        self.dbeta = dbeta.get().reshape(self.normalized_shape)
        return result(dx, on_device)


class _BatchNorm(Module):
    """Shared BatchNorm over an (N, C, S) view: statistics per channel over N and S (m = N S values).

    Training: xhat = (x - mean_B) / sqrt(var_B + eps) with the biased var_B;
    running = (1 - momentum) running + momentum stat, var as m/(m-1) var_B.
    Eval: the running statistics normalise; nothing is updated.
    backward: dx = gamma rstd (dout - dbeta/m - xhat dgamma/m) in training,
    dx = gamma rstd dout in eval; dgamma = sum(dout xhat), dbeta = sum(dout).
    """

    ndims: tuple[int, ...] = ()
    expected: str = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.gamma = np.ones(num_features, dtype=np.float32)
        self.beta = np.zeros(num_features, dtype=np.float32)
        self.running_mean = np.zeros(num_features, dtype=np.float32)
        self.running_var = np.ones(num_features, dtype=np.float32)
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None
        self.cache: dict | None = None
        self._uploads = Uploads()

    def forward(self, x: Any) -> Any:
        """y = gamma (x - mean) rstd + beta, batch statistics (training) or running ones (eval)."""
        C = self.num_features
        if len(x.shape) not in self.ndims or x.shape[1] != C:
            raise ValueError(
                f"{type(self).__name__}({C}) expects input {self.expected.format(C=C)}, got shape {tuple(x.shape)}"
            )
        N = int(x.shape[0])
        S = math.prod(int(d) for d in x.shape[2:])
        m = N * S
        if self.training and m <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(x.shape)}")
        xd, on_device = to_device(x)
        mean, rstd = empty((C,)), empty((C,))
        if self.training:
            running_mean, running_var = param(self.running_mean), param(self.running_var)
            if S == 1 and C % 4 == 0:
                P, R = _row_blocks(N)
                part_s1, part_s2 = empty((P, C)), empty((P, C))
                L = row_local_size(C // 4)
                run(
                    kernel("normalization.cl", "batchnorm_stats_rows4"),
                    (P * L,),
                    (L,),
                    xd,
                    part_s1,
                    part_s2,
                    N,
                    C // 4,
                    R,
                )
            else:
                P, R, width, local = _column_layout(N, C)
                part_s1, part_s2 = empty((P, C)), empty((P, C))
                run(
                    kernel("normalization.cl", "batchnorm_stats_partial"),
                    (width, P),
                    (local, 1),
                    xd,
                    part_s1,
                    part_s2,
                    N,
                    C,
                    S,
                    R,
                )
            _one_group(
                kernel("normalization.cl", "batchnorm_stats_finalize"),
                C,
                xd,
                part_s1,
                part_s2,
                mean,
                rstd,
                running_mean,
                running_var,
                P,
                C,
                S,
                m,
                float(self.eps),
                float(self.momentum),
            )
            self.running_mean = running_mean.get()
            self.running_var = running_var.get()
        else:
            _, _, width, local = _column_layout(1, C)
            run(
                kernel("normalization.cl", "batchnorm_eval_stats"),
                (width,),
                (local,),
                param(self.running_mean),
                param(self.running_var),
                mean,
                rstd,
                C,
                float(self.eps),
            )
        y = empty(xd.shape)
        self._elementwise(
            "forward",
            N,
            C,
            S,
            xd,
            mean,
            rstd,
            self._uploads.get("gamma", self.gamma),
            self._uploads.get("beta", self.beta),
            y,
        )
        self.cache = {"x": xd, "mean": mean, "rstd": rstd, "N": N, "S": S, "training": self.training}
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dgamma, dbeta by column reduction, then dx elementwise (through the batch statistics in training)."""
        c = self.cache
        assert c is not None  # set by forward
        xd, N, S = c["x"], c["N"], c["S"]
        C = self.num_features
        dy, on_device = to_device(dout)
        check_dout(dy, xd)
        dgamma, dbeta = _channel_grads(xd, dy, c["mean"], c["rstd"], N, C, S, 1, 0)
        dx = empty(xd.shape)
        self._elementwise(
            "backward",
            N,
            C,
            S,
            xd,
            dy,
            c["mean"],
            c["rstd"],
            self._uploads.get("gamma", self.gamma),
            dgamma,
            dbeta,
            dx,
            extra=(N * S, c["training"]),
        )
        self.dgamma = dgamma.get()
        self.dbeta = dbeta.get()
        return result(dx, on_device)

    def _elementwise(self, which: str, N: int, C: int, S: int, *arrays: Any, extra: tuple = ()) -> None:
        """Launch batchnorm_<which>_rows (a work-group per row, S = 1) or _planes (per (n, c) plane)."""
        if N * C * S == 0:
            return
        if S == 1:
            L = row_local_size(C)
            run(kernel("normalization.cl", f"batchnorm_{which}_rows"), (N * L,), (L,), *arrays, C, *extra)
        else:
            L = row_local_size(S)
            run(kernel("normalization.cl", f"batchnorm_{which}_planes"), (N * C * L,), (L,), *arrays, C, S, *extra)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) over axis 0, or (N, C, L) over axes 0 and 2."""

    ndims = (2, 3)
    expected = "(N, {C}) or (N, {C}, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) over axes 0, 2, 3 (per channel)."""

    ndims = (4,)
    expected = "(N, {C}, H, W)"


class GroupNorm(Module):
    """x (N, C, *): per sample, mean and var over each group of C / num_groups channels and all of *.

    y = gamma[c] xhat + beta[c]; backward per group as LayerNorm with g = dout gamma[c];
    dgamma, dbeta summed over every axis but 1.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5) -> None:
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.gamma = np.ones(num_channels, dtype=np.float32)
        self.beta = np.zeros(num_channels, dtype=np.float32)
        self.dgamma: np.ndarray | None = None
        self.dbeta: np.ndarray | None = None
        self.cache: dict | None = None
        self._uploads = Uploads()

    def _check(self, x: Any) -> None:
        if len(x.shape) < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm expects input (N, {self.num_channels}, *), got shape {tuple(x.shape)}")

    def forward(self, x: Any) -> Any:
        """One work-group per (sample, group): a contiguous row of (C / G) S values."""
        self._check(x)
        xd, on_device = to_device(x)
        N, C, G = int(x.shape[0]), self.num_channels, self.num_groups
        S = math.prod(int(d) for d in x.shape[2:])
        Cg = C // G
        M = Cg * S
        rows = N * G
        L = row_local_size(M)
        y, mean, rstd = empty(xd.shape), empty((rows,)), empty((rows,))
        if rows and M:
            run(
                kernel("normalization.cl", "groupnorm_forward"),
                (rows * L,),
                (L,),
                xd,
                self._uploads.get("gamma", self.gamma),
                self._uploads.get("beta", self.beta),
                y,
                mean,
                rstd,
                M,
                S,
                Cg,
                G,
                float(self.eps),
                local_memory(L),
            )
        self.cache = {"x": xd, "mean": mean, "rstd": rstd, "N": N, "S": S}
        return result(y, on_device)

    def backward(self, dout: Any) -> Any:
        """dx per (sample, group) (groupnorm_backward); dgamma, dbeta per channel by column reduction."""
        c = self.cache
        assert c is not None  # set by forward
        xd, N, S = c["x"], c["N"], c["S"]
        C, G = self.num_channels, self.num_groups
        Cg = C // G
        M = Cg * S
        dy, on_device = to_device(dout)
        check_dout(dy, xd)
        dx = empty(xd.shape)
        L = row_local_size(M)
        if N * G and M:
            run(
                kernel("normalization.cl", "groupnorm_backward"),
                (N * G * L,),
                (L,),
                xd,
                self._uploads.get("gamma", self.gamma),
                dy,
                c["mean"],
                c["rstd"],
                dx,
                M,
                S,
                Cg,
                G,
                local_memory(2 * L),
            )
        dgamma, dbeta = _channel_grads(xd, dy, c["mean"], c["rstd"], N, C, S, Cg, G)
        self.dgamma = dgamma.get()
        self.dbeta = dbeta.get()
        return result(dx, on_device)


class InstanceNorm2d(GroupNorm):
    """x (N, C, H, W): mean and var over H, W per sample and channel; GroupNorm with one channel per group."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__(num_features, num_features, eps)
        self.num_features = num_features

    def _check(self, x: Any) -> None:
        if len(x.shape) != 4 or x.shape[1] != self.num_features:
            raise ValueError(
                f"InstanceNorm2d({self.num_features}) expects input (N, {self.num_features}, H, W), "
                f"got shape {tuple(x.shape)}"
            )
