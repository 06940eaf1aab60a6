"""Generate class folders for the batch and report tests: one subfolder per student.

A student's folder is the complete correct solution (``grader.course.solution``), then
changed according to its *kind*:

- ``correct``: as it is;
- ``partial``: ``activations.py`` replaced by the stub shipped in ``exercises/``;
- ``mistaken``: ``activations.ReLU`` clamps the caller's array in place (the
  known mistake ``relu-inplace``), everything else correct;
- ``syntax``: ``linear.py`` ends with a syntax error;
- ``loop``: ``activations.ReLU.forward`` never returns (a busy loop);
- ``crash``: ``activations.ReLU.forward`` aborts the process (SIGABRT);
- ``hostile-import``: ``linear.py`` re-exports the ``Linear`` of the ``reference`` package;
- ``hostile-numpy``: ``activations.py`` patches ``numpy.allclose`` & co. to
  always agree, and its ReLU returns zeros;
- ``held``: ``activations.ReLU.forward`` waits while a hold file exists (the
  test releases it by deleting the file), otherwise correct.

Half the students (every second one, by name) hand in a folder that
*contains* ``exercises/``; the others hand in the ``exercises/`` folder itself,
as ``grade batch`` accepts both.
"""

from __future__ import annotations

import shutil
from typing import Any
from pathlib import Path

from grader.course.solution import write_solution

REPO = Path(__file__).resolve().parent.parent
STUBS = REPO / "exercises"

KINDS = (
    "correct",
    "partial",
    "mistaken",
    "syntax",
    "loop",
    "crash",
    "hostile-import",
    "hostile-numpy",
    "held",
)

# Appended to activations.py: rebinding ReLU to a subclass of the correct one.
_OVERRIDES = {
    "mistaken": '''

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    """Correct values, but the caller's array is clamped in place."""

    def forward(self, x):
        y = super().forward(x)
        np.maximum(x, 0.0, out=x)
        return y
''',
    "loop": """

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        n = 0
        while True:
            n += 1
""",
    "crash": """

import os as _os

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        _os.abort()
""",
    "hostile-numpy": """

np.allclose = lambda *args, **kwargs: True
np.array_equal = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast(a, b).shape, dtype=bool)
np.testing.assert_allclose = lambda *args, **kwargs: None

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        super().forward(x)
        return np.zeros_like(np.asarray(x, dtype=np.float64))
""",
}

_HELD = """

import os as _os
import time as _time

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        while _os.path.exists({hold!r}):
            _time.sleep(0.02)
        return super().forward(x)
"""


def exercises_folder(student_dir: Path) -> Path:
    """The ``exercises`` folder of a generated student (the folder itself or its ``exercises/``)."""
    nested = student_dir / "exercises"
    return nested if nested.is_dir() else student_dir


def make_student(student_dir: Path, kind: str, nested: bool = False, hold: Path | None = None) -> Path:
    """Write one student's submission of ``kind`` into ``student_dir``; returns its exercises folder.

    ``hold`` is the hold file of a ``held`` student (required for that kind).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: expected one of {', '.join(KINDS)}")
    folder = student_dir / "exercises" if nested else student_dir
    write_solution(folder)
    activations = folder / "activations.py"
    linear = folder / "linear.py"
    if kind == "partial":
        shutil.copyfile(STUBS / "activations.py", activations)
    elif kind == "syntax":
        with open(linear, "a", encoding="utf-8") as fh:
            fh.write("\n\ndef broken(x:\n    return x\n")
    elif kind == "hostile-import":
        with open(linear, "a", encoding="utf-8") as fh:
            fh.write("\n\nimport reference.linear as _stolen\n\nLinear = _stolen.Linear\n")
    elif kind == "held":
        if hold is None:
            raise ValueError("a 'held' student needs a hold file")
        with open(activations, "a", encoding="utf-8") as fh:
            fh.write(_HELD.format(hold=str(hold)))
    elif kind in _OVERRIDES:
        with open(activations, "a", encoding="utf-8") as fh:
            fh.write(_OVERRIDES[kind])
    return folder


def make_class(root: Path, kinds: dict[str, str], hold: Path | None = None) -> dict[str, Path]:
    """Write a class folder: ``kinds`` maps student name -> kind; returns name -> exercises folder.

    Students are laid out alternately flat and nested (sorted by name).
    """
    root.mkdir(parents=True, exist_ok=True)
    folders: dict[str, Path] = {}
    for index, name in enumerate(sorted(kinds)):
        folders[name] = make_student(root / name, kinds[name], nested=index % 2 == 1, hold=hold)
    return folders


# A small class with one student of each kind that finishes on its own.
MIXED_CLASS: dict[str, str] = {
    "ada": "correct",
    "ben": "partial",
    "cy": "mistaken",
    "dee": "syntax",
    "eli": "loop",
    "fay": "crash",
    "gus": "hostile-import",
    "hal": "hostile-numpy",
}


# --- A simulated quiz class (item statistics, grader/term/item_stats.py) ------------------------------------


def simulated_quiz_class(
    students: int,
    a: list[float],
    b: list[float],
    seed: int = 0,
    unfair: tuple[int, str, float] | None = None,
    misconception_share: float = 0.7,
) -> tuple[list[Any], Any]:
    """Students with known abilities θ ~ N(0, 1) answering items ``q0..`` by the 2PL model P = σ(a (θ - b)).

    Each item has three parameterised variants ``v0..v2``, drawn uniformly; ``unfair = (item, variant,
    shift)`` makes that variant harder by ``shift`` in b. A wrong answer picks choice ``"m"`` (the planted
    misconception) with probability ``misconception_share``, else ``"z"``. Returns the responses and θ.
    """
    import numpy as np

    from grader.term.item_stats import Response

    rng = np.random.default_rng(seed)
    theta = rng.normal(size=students)
    responses = []
    for i in range(students):
        for j, (aj, bj) in enumerate(zip(a, b, strict=True)):
            variant = f"v{rng.integers(3)}"
            shift = unfair[2] if unfair and unfair[:2] == (j, variant) else 0.0
            right = rng.random() < 1.0 / (1.0 + np.exp(-aj * (theta[i] - bj - shift)))
            choice = "a" if right else ("m" if rng.random() < misconception_share else "z")
            responses.append(Response(f"s{i:04d}", f"q{j}", bool(right), choice, variant))
    return responses, theta


def simulated_upload_class(
    planted: dict[tuple[str, str], int], students: int, start: Any, seed: int = 0, fix_share: float = 0.5
) -> list[Any]:
    """Uploads of a class where ``planted[(exercise, mistake)]`` students (each student one mistake at most, drawn
    by seed) make that mistake; a share ``fix_share`` of them fix it on their next upload, 2 to 4 hours later."""
    import random
    from datetime import timedelta

    from grader.term.class_mistakes import Upload

    rng = random.Random(seed)
    names = rng.sample([f"s{i:03d}" for i in range(students)], sum(planted.values()))
    uploads: list[Any] = []
    for (exercise, mistake), count in planted.items():
        chosen, names = names[:count], names[count:]
        for n, student in enumerate(chosen):
            at = start + timedelta(hours=rng.uniform(0, 48))
            uploads.append(Upload(student, exercise, at, frozenset({mistake}), len(uploads)))
            fixed = n < round(fix_share * count)
            later = at + timedelta(hours=2 + 2 * (n % 2))
            uploads.append(
                Upload(student, exercise, later, frozenset() if fixed else frozenset({mistake}), len(uploads))
            )
    return uploads
