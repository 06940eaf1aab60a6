"""Canonical CPU solutions (NumPy, float64); mirrors ``exercises/`` file by file.

``reference.opencl`` (the OpenCL kernels) is deliberately not imported here:
it needs pyopencl and a device.
"""

from . import activations, approximation, base, blocks, dropout, gradcheck, init, linear, normalization, optim

__all__ = [
    "activations",
    "approximation",
    "base",
    "blocks",
    "dropout",
    "gradcheck",
    "init",
    "linear",
    "normalization",
    "optim",
]
