"""Known mistakes in the OpenCL exercises, each a NumPy emulation of a wrong kernel.

A mistake's namespace is a ``grader.student.engine.ops_opencl.EmulatedKernels``: the reference's
(``reference.opencl.emulation``) with one kernel replaced, so the ``cl_kernel`` op runs it in the grader's own process
without an OpenCL context, on the same float32 inputs as the student's kernel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grader.mistakes import Mistake
from reference.opencl.emulation import EMULATIONS, phi_cdf
from grader.student.engine.ops_opencl import EmulatedKernels, Emulation, launched_rows, sentinel


def kernel_mistake(mistake_id: str, kernel: str, sentence: str, fix: str, emulation: Emulation) -> Mistake:
    """A Mistake of exercise ``kernels.<kernel>`` whose namespace runs ``emulation`` for that kernel."""
    return Mistake(
        mistake_id, f"kernels.{kernel}", sentence, fix, namespace=EmulatedKernels({**EMULATIONS, kernel: emulation})
    )


def relu_grad_at_zero(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """dx = dy where x >= 0: derivative 1 at 0."""
    x, dy, dx, n = args
    out = sentinel(dx.size)
    out[:n] = np.where(x[:n] >= 0.0, dy[:n], 0.0)
    return {dx.name: out}


def relu_backward_sign_of_dy(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """dx = dy where dy > 0: the sign of the gradient tested instead of the input's."""
    x, dy, dx, n = args
    out = sentinel(dx.size)
    out[:n] = np.where(dy[:n] > 0.0, dy[:n], 0.0)
    return {dx.name: out}


def gelu_erf_unscaled(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """0.5 x (1 + erf(x)): the division by sqrt(2) forgotten."""
    x, y, n = args
    out = sentinel(y.size)
    out[:n] = x[:n] * phi_cdf(x[:n] * math.sqrt(2.0))
    return {y.name: out}


def gelu_backward_no_dy(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """dx = Phi(x) + x phi(x): the local derivative, not multiplied by dy."""
    x, dy, dx, n = args
    v = x[:n]
    out = sentinel(dx.size)
    out[:n] = phi_cdf(v) + v * np.exp(-0.5 * v * v) / math.sqrt(2.0 * math.pi)
    return {dx.name: out}


def gelu_tanh(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the approximation, not the exact erf GELU."""
    x, y, n = args
    v = x[:n]
    out = sentinel(y.size)
    out[:n] = 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))
    return {y.name: out}


def gelu_backward_cdf_only(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """dx = dy * Phi(x): the x * phi(x) term of the product rule forgotten."""
    x, dy, dx, n = args
    out = sentinel(dx.size)
    out[:n] = dy[:n] * phi_cdf(x[:n])
    return {dx.name: out}


def gelu_backward_tanh(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """The derivative of the tanh approximation where the exact GELU's is asked."""
    x, dy, dx, n = args
    v = x[:n]
    k = math.sqrt(2.0 / math.pi)
    u = k * (v + 0.044715 * v**3)
    t = np.tanh(u)
    grad = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * v * v)
    out = sentinel(dx.size)
    out[:n] = dy[:n] * grad
    return {dx.name: out}


def dropout_no_rescale(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """y = x where u >= p: no 1 / (1 - p)."""
    x, u, y, p, n = args
    out = sentinel(y.size)
    out[:n] = np.where(u[:n] >= p, x[:n], 0.0) if p < 1.0 else 0.0
    return {y.name: out}


def dropout_keep_below(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """Keeps where u < p: p used as the keep probability."""
    x, u, y, p, n = args
    out = sentinel(y.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        out[:n] = np.where(u[:n] < p, x[:n] / np.float64(1.0 - p), 0.0)
    return {y.name: out}


def dropout_strict(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """Keeps where u > p: drops the elements with u == p that should be kept."""
    x, u, y, p, n = args
    out = sentinel(y.size)
    out[:n] = np.where(u[:n] > p, x[:n] / (1.0 - p), 0.0) if p < 1.0 else 0.0
    return {y.name: out}


def dropout_p1_nan(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """y = x * keep / (1 - p) computed unconditionally: p = 1 gives 0 / 0 = NaN."""
    x, u, y, p, n = args
    out = sentinel(y.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        out[:n] = x[:n] * (u[:n] >= p) / np.float64(1.0 - p)
    return {y.name: out}


def row_view(x: np.ndarray, rows: int, D: int) -> np.ndarray:
    return x[: rows * D].reshape(rows, D)


def rms_variant(
    centre: bool = False,
    eps_outside: bool = False,
    tail: bool = False,
    by_local: bool = False,
    gamma: bool = True,
    rms_out: bool = False,
    no_rstd: bool = False,
    no_eps: bool = False,
) -> Emulation:
    """An RMSNorm emulation with one of the classic kernel bugs switched on."""

    def emulate(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
        x, g, y, rstd, D, eps, _scratch = args
        rows = launched_rows(global_size, local_size)
        xr = row_view(x, rows, D)
        L = local_size or D
        used = xr[:, : (D // L) * L] if tail else xr
        src = used - used.mean(axis=1, keepdims=True) if centre else used
        ms = np.sum(src * src, axis=1) / (L if by_local else D)
        with np.errstate(divide="ignore", invalid="ignore"):
            if no_eps:
                r = 1.0 / np.sqrt(ms)
            else:
                r = 1.0 / (np.sqrt(ms) + eps) if eps_outside else 1.0 / np.sqrt(ms + eps)
        base = xr - xr.mean(axis=1, keepdims=True) if centre else xr
        y_out, r_out = sentinel(y.size), sentinel(rstd.size)
        with np.errstate(invalid="ignore"):
            y_out[: rows * D] = (base * r[:, None] * (g[:D] if gamma else 1.0)).ravel()
        if not no_rstd:
            r_out[:rows] = 1.0 / r if rms_out else r
        return {y.name: y_out, rstd.name: r_out}

    return emulate


def ln_variant(
    eps_outside: bool = False,
    unbiased: bool = False,
    tail: bool = False,
    beta: bool = True,
    std_out: bool = False,
    no_mean: bool = False,
    uncentred_var: bool = False,
    one_pass: bool = False,
) -> Emulation:
    """A LayerNorm emulation with one of the classic kernel bugs switched on."""

    def emulate(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
        x, g, b, y, mean, rstd, D, eps, _scratch = args
        rows = launched_rows(global_size, local_size)
        xr = row_view(x, rows, D)
        L = local_size or D
        used = xr[:, : (D // L) * L] if tail else xr
        mu = used.sum(axis=1) / D
        var = np.sum((xr - mu[:, None]) ** 2, axis=1) / (D - 1 if unbiased else D)
        if uncentred_var:
            var = np.mean(xr * xr, axis=1)
        if one_pass:  # var = E[x^2] - mean^2 with float32 sums, as the kernel computes it
            x32 = xr.astype(np.float32)
            mean32 = x32.sum(axis=1, dtype=np.float32) / np.float32(D)
            var = (np.float32(1.0 / D) * (x32 * x32).sum(axis=1, dtype=np.float32) - mean32 * mean32).astype(np.float64)
            var = np.maximum(var, 0.0)
        r = 1.0 / (np.sqrt(var) + eps) if eps_outside else 1.0 / np.sqrt(var + eps)
        y_out, m_out, r_out = sentinel(y.size), sentinel(mean.size), sentinel(rstd.size)
        y_out[: rows * D] = ((xr - mu[:, None]) * r[:, None] * g[:D] + (b[:D] if beta else 0.0)).ravel()
        if not no_mean:
            m_out[:rows] = mu
        r_out[:rows] = 1.0 / r if std_out else r
        return {y.name: y_out, mean.name: m_out, rstd.name: r_out}

    return emulate


MISTAKES: list[Mistake] = [
    kernel_mistake(
        "kernel-relu-grad-at-zero",
        "relu_backward",
        "The kernel passes the gradient where x >= 0: ReLU's derivative at 0 is 0.",
        "Use dx[i] = x[i] > 0.0f ? dy[i] : 0.0f (strictly greater than 0).",
        relu_grad_at_zero,
    ),
    kernel_mistake(
        "kernel-relu-backward-sign-of-dy",
        "relu_backward",
        "The kernel tests the sign of dy instead of the sign of x.",
        "dx[i] = x[i] > 0.0f ? dy[i] : 0.0f.",
        relu_backward_sign_of_dy,
    ),
    kernel_mistake(
        "kernel-gelu-erf-unscaled",
        "gelu_forward",
        "The kernel computes erf(x) instead of erf(x / sqrt(2)).",
        "Phi(x) = 0.5f * (1.0f + erf(x * M_SQRT1_2_F)).",
        gelu_erf_unscaled,
    ),
    kernel_mistake(
        "kernel-gelu-tanh",
        "gelu_forward",
        "The kernel computes the tanh approximation of GELU where the exact one (with erf) is asked.",
        "y = 0.5f * x * (1.0f + erf(x * 0.70710678f)).",
        gelu_tanh,
    ),
    kernel_mistake(
        "kernel-gelu-backward-cdf-only",
        "gelu_backward",
        "The derivative misses the x * phi(x) term: d/dx [x Phi(x)] = Phi(x) + x phi(x).",
        "dx = dy * (Phi(x) + x * exp(-x*x/2) / sqrt(2 pi)).",
        gelu_backward_cdf_only,
    ),
    kernel_mistake(
        "kernel-gelu-backward-tanh",
        "gelu_backward",
        "The kernel uses the derivative of the tanh approximation where the exact GELU's is asked.",
        "dx = dy * (Phi(x) + x * phi(x)) with Phi from erf.",
        gelu_backward_tanh,
    ),
    kernel_mistake(
        "kernel-gelu-backward-no-dy",
        "gelu_backward",
        "The kernel writes GELU's derivative but forgets to multiply it by dy.",
        "dx[i] = dy[i] * (Phi(x) + x * phi(x)).",
        gelu_backward_no_dy,
    ),
    kernel_mistake(
        "kernel-dropout-no-rescale",
        "dropout_forward",
        "Kept elements are not divided by 1 - p.",
        "Write y[i] = keep ? x[i] / (1.0f - p) : 0.0f.",
        dropout_no_rescale,
    ),
    kernel_mistake(
        "kernel-dropout-keep-below",
        "dropout_forward",
        "Elements are kept where u < p: p is the probability of dropping, so keep where u >= p.",
        "Keep where u[i] >= p.",
        dropout_keep_below,
    ),
    kernel_mistake(
        "kernel-dropout-strict-compare",
        "dropout_forward",
        "Elements with u exactly equal to p are dropped: the rule is keep where u >= p.",
        "Compare with >=, not >.",
        dropout_strict,
    ),
    kernel_mistake(
        "kernel-dropout-p1-nan",
        "dropout_forward",
        "With p = 1 the kernel divides by 1 - p = 0 and writes NaN.",
        "Write 0 when the element is dropped, and never divide when p == 1.",
        dropout_p1_nan,
    ),
    kernel_mistake(
        "kernel-rmsnorm-mean-centred",
        "rmsnorm_forward",
        "The kernel subtracts the row mean like LayerNorm; RMSNorm does not centre.",
        "rstd = rsqrt(sum(x*x) / D + eps); y = x * rstd * gamma.",
        rms_variant(centre=True),
    ),
    kernel_mistake(
        "kernel-rmsnorm-eps-outside",
        "rmsnorm_forward",
        "eps is added outside the square root: 1 / (sqrt(ms) + eps).",
        "rstd = 1.0f / sqrt(ms + eps) (or rsqrt(ms + eps)).",
        rms_variant(eps_outside=True),
    ),
    kernel_mistake(
        "kernel-rmsnorm-tail-skipped",
        "rmsnorm_forward",
        "The reduction only covers the first (D / L) * L elements of a row: the tail is skipped when"
        " D is not a multiple of L.",
        "Loop for (int i = lid; i < D; i += L) so every element is summed.",
        rms_variant(tail=True),
    ),
    kernel_mistake(
        "kernel-rmsnorm-divides-by-L",
        "rmsnorm_forward",
        "The sum of squares is divided by the work-group size L instead of the row length D.",
        "ms = sum / D.",
        rms_variant(by_local=True),
    ),
    kernel_mistake(
        "kernel-rmsnorm-gamma-ignored",
        "rmsnorm_forward",
        "gamma is not applied.",
        "y[i] = x[i] * rstd * gamma[i].",
        rms_variant(gamma=False),
    ),
    kernel_mistake(
        "kernel-rmsnorm-rms-written",
        "rmsnorm_forward",
        "The rstd output holds RMS = sqrt(mean(x^2) + eps) instead of its inverse.",
        "rstd[row] = 1.0f / sqrt(ms + eps) (rsqrt).",
        rms_variant(rms_out=True),
    ),
    kernel_mistake(
        "kernel-rmsnorm-rstd-missing",
        "rmsnorm_forward",
        "The kernel never writes rstd[row].",
        "Let one work-item per row (lid == 0) write rstd[row] = 1 / sqrt(ms + eps).",
        rms_variant(no_rstd=True),
    ),
    kernel_mistake(
        "kernel-rmsnorm-eps-missing",
        "rmsnorm_forward",
        "eps is left out, so an all-zero row gives 0 / 0 = NaN.",
        "rstd = rsqrt(sum(x*x) / D + eps).",
        rms_variant(no_eps=True),
    ),
    kernel_mistake(
        "kernel-layernorm-eps-outside",
        "layernorm_forward",
        "eps is added outside the square root: 1 / (sqrt(var) + eps).",
        "rstd = 1.0f / sqrt(var + eps).",
        ln_variant(eps_outside=True),
    ),
    kernel_mistake(
        "kernel-layernorm-unbiased-var",
        "layernorm_forward",
        "The variance is divided by D - 1; LayerNorm uses the biased variance (divide by D).",
        "var = sum((x - mean)^2) / D.",
        ln_variant(unbiased=True),
    ),
    kernel_mistake(
        "kernel-layernorm-tail-skipped",
        "layernorm_forward",
        "The mean's reduction only covers the first (D / L) * L elements of a row.",
        "Loop for (int i = lid; i < D; i += L) in every reduction.",
        ln_variant(tail=True),
    ),
    kernel_mistake(
        "kernel-layernorm-beta-ignored",
        "layernorm_forward",
        "beta is not added.",
        "y = (x - mean) * rstd * gamma + beta.",
        ln_variant(beta=False),
    ),
    kernel_mistake(
        "kernel-layernorm-mean-missing",
        "layernorm_forward",
        "The kernel never writes mean[row].",
        "Let one work-item per row (lid == 0) write mean[row] and rstd[row].",
        ln_variant(no_mean=True),
    ),
    kernel_mistake(
        "kernel-layernorm-var-not-centred",
        "layernorm_forward",
        "The variance is the mean of x^2, without subtracting the mean first.",
        "var = sum((x - mean)^2) / D.",
        ln_variant(uncentred_var=True),
    ),
    kernel_mistake(
        "kernel-layernorm-std-written",
        "layernorm_forward",
        "The rstd output holds the standard deviation sqrt(var + eps) instead of its inverse.",
        "rstd[row] = 1.0f / sqrt(var + eps).",
        ln_variant(std_out=True),
    ),
    kernel_mistake(
        "kernel-layernorm-one-pass-var",
        "layernorm_forward",
        "The variance is taken in one pass as E[x^2] - mean^2 in float32: on rows whose mean is large"
        " beside their spread the two terms cancel and the variance loses most of its digits.",
        "Subtract the mean first (a second pass: var = sum((x - mean)^2) / D), or shift the sums by the"
        " row's first value.",
        ln_variant(one_pass=True),
    ),
]
