"""NumPy float64 emulations of the reference kernels (spec section 5): instructor side only.

They compute what the reference kernels compute (so they state the answers of
the OpenCL exercises, and of the CPU layers those kernels implement): the
parent runs kernel cases on the ``reference`` package through them, without an
OpenCL context, and the known wrong kernels (``grader.mistakes.kernels``) are
this table with one kernel replaced. Importing this module registers the table
with :mod:`grader.student.engine.ops_opencl` (``use_reference_kernels``);
``grader.mistakes`` imports it, so every live reference run has it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grader.student.engine.ops_opencl import EmulatedKernels, Emulation, launched_rows, sentinel, use_reference_kernels


def phi_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, elementwise, float64."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * (1.0 + erf(np.asarray(x, dtype=np.float64) / math.sqrt(2.0)))


def phi_pdf(x: np.ndarray) -> np.ndarray:
    """phi(x) = exp(-x^2 / 2) / sqrt(2 pi)."""
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def emulate_relu_forward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """y[i] = max(0, x[i]) for i < n."""
    x, y, n = args
    out = sentinel(y.size)
    out[:n] = np.maximum(x[:n], 0.0)
    return {y.name: out}


def emulate_relu_backward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """dx[i] = dy[i] if x[i] > 0 else 0 (derivative 0 at 0), for i < n."""
    x, dy, dx, n = args
    out = sentinel(dx.size)
    out[:n] = np.where(x[:n] > 0.0, dy[:n], 0.0)
    return {dx.name: out}


def emulate_gelu_forward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """y[i] = x[i] * Phi(x[i]) (exact, erf), for i < n."""
    x, y, n = args
    out = sentinel(y.size)
    out[:n] = x[:n] * phi_cdf(x[:n])
    return {y.name: out}


def emulate_gelu_backward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """dx[i] = dy[i] * (Phi(x[i]) + x[i] * phi(x[i])), for i < n."""
    x, dy, dx, n = args
    out = sentinel(dx.size)
    v = x[:n]
    out[:n] = dy[:n] * (phi_cdf(v) + v * phi_pdf(v))
    return {dx.name: out}


def emulate_dropout_forward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """y[i] = x[i] / (1 - p) where u[i] >= p, else 0; p = 1 gives zeros; for i < n."""
    x, u, y, p, n = args
    out = sentinel(y.size)
    if p >= 1.0:
        out[:n] = 0.0
    else:
        out[:n] = np.where(u[:n] >= p, x[:n] / (1.0 - p), 0.0)
    return {y.name: out}


def emulate_rmsnorm_forward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """Per row: rstd = 1 / sqrt(mean(x^2) + eps); y = x * rstd * gamma."""
    x, gamma, y, rstd, D, eps, _scratch = args
    rows = launched_rows(global_size, local_size)
    xr = x[: rows * D].reshape(rows, D)
    r = 1.0 / np.sqrt(np.mean(xr * xr, axis=1) + eps)
    y_out, r_out = sentinel(y.size), sentinel(rstd.size)
    y_out[: rows * D] = (xr * r[:, None] * gamma[:D]).ravel()
    r_out[:rows] = r
    return {y.name: y_out, rstd.name: r_out}


def emulate_layernorm_forward(args: list[Any], global_size: int, local_size: int | None) -> dict[str, np.ndarray]:
    """Per row: mean, rstd = 1 / sqrt(var + eps) (biased var); y = (x - mean) * rstd * gamma + beta."""
    x, gamma, beta, y, mean, rstd, D, eps, _scratch = args
    rows = launched_rows(global_size, local_size)
    xr = x[: rows * D].reshape(rows, D)
    mu = xr.mean(axis=1)
    var = np.mean((xr - mu[:, None]) ** 2, axis=1)
    r = 1.0 / np.sqrt(var + eps)
    y_out, m_out, r_out = sentinel(y.size), sentinel(mean.size), sentinel(rstd.size)
    y_out[: rows * D] = ((xr - mu[:, None]) * r[:, None] * gamma[:D] + beta[:D]).ravel()
    m_out[:rows] = mu
    r_out[:rows] = r
    return {y.name: y_out, mean.name: m_out, rstd.name: r_out}


EMULATIONS: dict[str, Emulation] = {
    "relu_forward": emulate_relu_forward,
    "relu_backward": emulate_relu_backward,
    "gelu_forward": emulate_gelu_forward,
    "gelu_backward": emulate_gelu_backward,
    "dropout_forward": emulate_dropout_forward,
    "rmsnorm_forward": emulate_rmsnorm_forward,
    "layernorm_forward": emulate_layernorm_forward,
}


use_reference_kernels(EmulatedKernels(EMULATIONS))


def reference_namespace() -> Any:
    """The ``reference`` package with every CPU topic module imported as an attribute (this module's emulation
    registered)."""
    import importlib

    from grader.student.engine.catalogue import CPU_TOPICS

    package = importlib.import_module("reference")
    for topic in CPU_TOPICS:
        importlib.import_module(f"reference.{topic}")
    return package
