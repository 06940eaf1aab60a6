"""The error a malformed case script raises, shared by :mod:`grader.student.engine.ops` and
:mod:`grader.student.engine.ops_opencl` (its own module so that neither imports the other's
module at load time: ops imports ops_opencl lazily for the ``cl_kernel`` op, and
ops_opencl needs only this class)."""

from __future__ import annotations


class ScriptError(Exception):
    """A malformed script (unknown op, missing field, duplicate output key): a grader bug."""
