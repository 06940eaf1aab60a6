"""Your exercises: the building blocks of a deep network, one topic per file.

Each file ships with its constructors written and ``raise NotImplementedError``
where your code goes. Grade everything with ``grade submit``, one topic with
``grade submit normalization``, one exercise with
``grade submit normalization.BatchNorm1d``. The OpenCL exercises are the
``.cl`` files in ``kernels/`` (``grade submit kernels``).

Do not edit ``base.py``; do not import ``reference`` or ``grader`` here (a file
that does scores zero).
"""

from . import activations, approximation, blocks, dropout, gradcheck, init, linear, normalization, optim

__all__ = [
    "activations",
    "approximation",
    "blocks",
    "dropout",
    "gradcheck",
    "init",
    "linear",
    "normalization",
    "optim",
]
