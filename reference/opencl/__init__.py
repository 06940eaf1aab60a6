"""Canonical OpenCL kernels (``*.cl`` beside this file) and thin NumPy/pyopencl wrappers.

Importing this package does not touch OpenCL; the first ``get_context()`` does.
"""

from __future__ import annotations

from .activations import ELU, GELU, PReLU, ReLU, LeakyReLU, Sigmoid, SiLU, Tanh
from .dropout import Dropout, SeedError
from .exercise import EXERCISE_KERNELS, ExerciseKernelError, KernelSpec, run_exercise_kernel
from .init import kaiming_normal, kaiming_uniform, philox4x32_10, xavier_normal, xavier_uniform
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm2d, LayerNorm, RMSNorm
from .optim import SGD, AdamW, ParameterError
from .runtime import (
    KernelBuildError,
    OpenCLUnavailable,
    build_program,
    get_context,
    get_queue,
    load_program,
    opencl_unavailable_reason,
    read_source,
    reduction_local_size,
)

__all__ = [
    "EXERCISE_KERNELS",
    "ExerciseKernelError",
    "KernelSpec",
    "run_exercise_kernel",
    "KernelBuildError",
    "OpenCLUnavailable",
    "build_program",
    "get_context",
    "get_queue",
    "load_program",
    "opencl_unavailable_reason",
    "read_source",
    "reduction_local_size",
    "Sigmoid",
    "Tanh",
    "ReLU",
    "LeakyReLU",
    "PReLU",
    "ELU",
    "GELU",
    "SiLU",
    "Linear",
    "BatchNorm1d",
    "BatchNorm2d",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm2d",
    "Dropout",
    "SeedError",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "philox4x32_10",
    "SGD",
    "AdamW",
    "ParameterError",
]
