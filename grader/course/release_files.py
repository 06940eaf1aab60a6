"""What every part of a release shares: where the repository is, a tree's files without caches, copying and
hashing them, the scaffolding levels' file, and :class:`ReleaseError`.

The release driver (grader/course/release.py), the handout (student_handout.py) and the Gradescope bundle
(gradescope_bundle.py) all build on these; none of them imports another sideways.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from grader.student.errors import GraderError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # grader/
STUDENT_DIR = PACKAGE_DIR / "student"
SKIPPED_PARTS = {"__pycache__", ".grade", ".pytest_cache"}


class ReleaseError(GraderError):
    """A release cannot be written (one line: what is wrong and what to do)."""


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_files(folder: Path) -> list[Path]:
    """Every regular file under ``folder``, sorted, without caches (``__pycache__``, ``.grade``...)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not SKIPPED_PARTS & set(p.relative_to(folder).parts))


def copy_tree(source: Path, target: Path) -> None:
    """Copy the files of ``source`` into ``target`` (caches left out)."""
    for path in tree_files(source):
        dest = target / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)


def levels_json(levels: dict[str, str]) -> str:
    """``grader/student/engine/scaffolding.json``: the level of every exercise's stub (read by the reports)."""
    return json.dumps({"exercises": levels}, indent=1) + "\n"
