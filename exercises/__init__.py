"""Your exercises: the building blocks of a deep network, one topic per file.

Each file ships with its constructors written and ``raise NotImplementedError``
where your code goes. Commands run from the repository root (the folder that
holds ``exercises/`` and ``.venv/``, made by ``make install``); ``grade`` alone
works once ``source .venv/bin/activate`` has run, and ``.venv/bin/python -m grader``
is the same command. Grade everything with ``.venv/bin/grade submit``, one topic with
``.venv/bin/grade submit normalization``, one exercise with
``.venv/bin/grade submit normalization.BatchNorm1d``. The OpenCL exercises are the
``.cl`` files in ``kernels/`` (``.venv/bin/grade submit kernels``).

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
