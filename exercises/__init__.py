"""Your exercises: the building blocks of a deep network, one topic per file.

Each file ships with its constructors written and ``raise NotImplementedError``
where your code goes. Commands run from the folder that holds ``exercises/``
and ``.venv/`` (the README's Quick start makes it); ``grade`` alone works once
``source .venv/bin/activate`` has run. Grade everything with ``.venv/bin/grade submit``,
one topic with ``.venv/bin/grade submit normalization``, one exercise with
``.venv/bin/grade submit normalization.BatchNorm1d``. The OpenCL exercises are the
``.cl`` files in ``kernels/`` (``.venv/bin/grade submit kernels``).

Do not edit ``base.py``. Import only numpy, the Python standard library and
these files: a file that imports anything else (``reference``, ``grader``,
``scipy``, ...) scores zero.

The contract every layer follows (checked for every exercise):
- inputs are float64 arrays; every output is a float64 array of the shape stated;
- never modify an array you are given (x in forward, dout in backward);
- backward(dout) returns dx = dL/dx for the most recent forward, and must not
  change the parameters, the running statistics or what forward cached (a
  second backward after the same forward gives the same dx);
- each learnable parameter ``name`` gets its gradient in ``d<name>``, with the
  parameter's shape (``gamma`` -> ``dgamma``).
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
