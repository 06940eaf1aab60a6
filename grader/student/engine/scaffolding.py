"""Which scaffolding level each exercise's stub was released at, as the student side reads it.

``grade release`` renders the handout's stubs at a level per exercise
(``contract``, ``derive`` or ``guided``: :mod:`grader.course.scaffold`) and writes
the levels next to this module, in ``scaffolding.json``
(``{"exercises": {"normalization.BatchNorm1d": "derive", ...}}``), in the
handout and in the Gradescope bundle. Reports read it with :func:`level_of`:
below ``guided`` a named mistake's hint replaces the fix that pastes the
formula (:meth:`grader.student.engine.diagnosis.KnownMistake.advice`). In the
instructor repository there is no such file: every exercise is ``guided``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

LEVELS = ("contract", "derive", "guided")  # from least to most given away
DEFAULT_LEVEL = "guided"
LEVELS_FILE = Path(__file__).resolve().parent / "scaffolding.json"
_IN_FORCE: dict[str, str] = {}  # the course server's levels (levels_in_force), in place of scaffolding.json


@cache
def released_levels() -> dict[str, str]:
    """The levels written by ``grade release`` (empty where none was written: every exercise guided)."""
    if not LEVELS_FILE.exists():
        return {}
    document = json.loads(LEVELS_FILE.read_text(encoding="utf-8"))
    return {str(k): str(v) for k, v in document.get("exercises", {}).items() if v in LEVELS}


def level_of(exercise_id: str) -> str:
    """The level ``exercise_id``'s stub was released at: the course server's (:func:`levels_in_force`), else
    scaffolding.json's, else ``guided``."""
    return _IN_FORCE.get(exercise_id) or released_levels().get(exercise_id, DEFAULT_LEVEL)


@contextlib.contextmanager
def levels_in_force(levels: Mapping[str, str]) -> Iterator[None]:
    """While the course server serves a course: its levels (course.toml's ``[scaffolding]``, as ``grade release``
    writes them into the handout) in place of scaffolding.json, so that a report it renders says a known mistake
    at the level the student's stub was released at."""
    before = dict(_IN_FORCE)
    _IN_FORCE.clear()
    _IN_FORCE.update(levels)
    try:
        yield
    finally:
        _IN_FORCE.clear()
        _IN_FORCE.update(before)
