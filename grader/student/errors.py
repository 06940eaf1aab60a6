"""The grader's named exceptions; the CLI turns each into a one-line message.

Messages follow one pattern: what was given, what was expected, what to do
("'BatchNorm' is not an exercise. Did you mean 'normalization.BatchNorm1d'?").
"""

from __future__ import annotations


class GraderError(Exception):
    """Base class: a problem the user can fix, reported in one line."""


class UsageError(GraderError):
    """The command was asked for something that does not exist (exit 2)."""


class SetupError(GraderError):
    """The environment cannot grade (missing folder, no OpenCL device...) (exit 2)."""


class StoreError(GraderError):
    """The progress database is unusable (corrupt, foreign, locked); it is never overwritten."""
