"""Lay out the reference solutions as a complete, correct student folder.

Used by tests and benches: ``write_solution(dest)`` produces what a student who
solved everything would hand in. The reference topic files are copied as they
are (they import each other only relatively, never ``reference`` by name, so
the grader accepts them), ``base.py`` and an ``__init__.py`` like the shipped
``exercises/__init__.py``, and the reference exercise kernels into ``kernels/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import reference
from grader.student.engine.catalogue import CPU_TOPICS

EXERCISE_KERNELS = ("activations.cl", "dropout.cl", "rmsnorm.cl", "layernorm.cl")
"""The ``.cl`` files of the OpenCL exercises (spec section 5), as named in ``exercises/kernels/``."""


def reference_folder() -> Path:
    """The folder of the installed ``reference`` package."""
    return Path(reference.__file__).resolve().parent


def write_solution(dest: Path | str) -> Path:
    """Write the reference solutions into ``dest`` as a student folder; returns ``dest``.

    ``dest`` is created when missing; files already there are overwritten.
    """
    target = Path(dest)
    source = reference_folder()
    target.mkdir(parents=True, exist_ok=True)
    for name in ["__init__", "base"] + CPU_TOPICS:
        shutil.copyfile(source / f"{name}.py", target / f"{name}.py")
    kernels = target / "kernels"
    kernels.mkdir(exist_ok=True)
    for name in EXERCISE_KERNELS:
        shutil.copyfile(source / "opencl" / name, kernels / name)
    return target
