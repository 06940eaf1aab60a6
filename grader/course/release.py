"""``grade release --out DIR``: the student handout and the Gradescope autograder, built from this repository.

- ``DIR/student/``: what students get. The exercise stubs (``exercises/``), a
  README with its own Quick start, the handout quizzes (``quizzes/``:
  questions and choices, and in practice mode explanations sealed under keys
  derived from the right answers, :mod:`grader.student.quiz.practice`), and an
  installable package: ``grader/__init__.py`` and the whole student-side
  subpackage ``grader/student/`` (copied as a folder, not filtered by name:
  the layout is the trust boundary, tests/test_boundary.py) with the case packs
  in ``grader/student/packs/``, and a ``pyproject.toml`` whose ``grade`` is
  :mod:`grader.student.cli`.
- ``DIR/autograder/autograder.zip``: Gradescope's bundle. ``setup.sh``
  installs ``source/`` (the full grader, the reference and the locked
  quizzes); ``run_autograder`` runs :mod:`grader.course.gradescope`, which grades the
  upload with the hidden checks and writes ``results.json``.
- ``DIR/manifest.json``: what went where (every file with its sha256), the
  version, the sha256 of the reference it was built from, the packs' sizes,
  and the scaffolding level of every exercise.

The stubs (in the handout and the bundle) are rendered from ``exercises/`` at
each exercise's scaffolding level (:mod:`grader.course.scaffold`: ``--level`` and the
course file's ``[scaffolding]``), and the levels are written to
``grader/student/engine/scaffolding.json`` for the reports (hints below ``guided``).

The handout is written by :mod:`grader.course.student_handout`, the bundle by
:mod:`grader.course.gradescope_bundle`, over the shared helpers of
:mod:`grader.course.release_files`; this module drives them and writes the manifest.

Refuses a non-empty DIR without ``force``; stops with a one-line reason
(:class:`ReleaseError`) when the reference fails its own public checks.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import quiz as quiz_lib
from grader.student.course import Course
from grader.student.engine.scaffolding import DEFAULT_LEVEL, LEVELS
from grader.course.gradescope_bundle import write_autograder
from grader.course.release_files import ROOT, ReleaseError, sha256_file, tree_files
from grader.course.student_handout import write_student

# The pseudo-student whose drawn values the handout's parameterised quiz questions show (and Gradescope judges).
PRACTICE_STUDENT = "(practice)"
# Folders of the repository that --out (possibly with --force) must never be, or be inside.
PROTECTED = {"grader", "reference", "exercises", "quizzes", "tests", "docs", "bench", "scripts", ".git", ".venv"}


@dataclass
class Release:
    """What ``build_release`` wrote."""

    out: Path
    version: str
    reference_sha256: str
    pack_sizes: dict[str, int] = field(default_factory=dict)
    levels: dict[str, str] = field(default_factory=dict)  # exercise id -> scaffolding level of its stub
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def packs_bytes(self) -> int:
        return sum(self.pack_sizes.values())


def reference_sha256() -> str:
    """sha256 over the reference package's files (relative path and content of each, in order)."""
    digest = hashlib.sha256()
    folder = ROOT / "reference"
    for path in tree_files(folder):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def project_version() -> str:
    """The version in pyproject.toml (the release's version)."""
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        return str(tomllib.load(fh)["project"]["version"])


def prepare_out(out: Path, force: bool) -> None:
    """Create ``out``; ReleaseError when it is not empty and not ``force``, or when it holds this repository."""
    out = out.resolve()
    if out == ROOT or out in ROOT.parents:
        raise ReleaseError(f"--out {out} holds this repository: choose a folder outside it, e.g. --out ../release")
    if out.is_relative_to(ROOT) and out.relative_to(ROOT).parts[0] in PROTECTED:
        raise ReleaseError(
            f"--out {out} is inside the repository's {out.relative_to(ROOT).parts[0]}/: choose a"
            " folder outside it, e.g. --out ../release"
        )
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"--out {out} is a file: choose a folder")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ReleaseError(f"'{out}' is not empty: pass --force to replace its contents, or choose another --out")
        for child in out.iterdir():
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)


# --- the whole release -----------------------------------------------------------------------------


def release_levels(level: str | None, course: Course | None) -> dict[str, str]:
    """Every exercise's scaffolding level: the course's override, else ``level``, else the course's level (guided)."""
    if level is not None and level not in LEVELS:
        raise ReleaseError(f"--level {level!r} is not a scaffolding level: use one of {', '.join(LEVELS)}")
    return (course or Course()).scaffolding_levels(level)


def build_release(
    out: Path | str,
    force: bool = False,
    practice: bool = True,
    sandbox: bool = True,
    level: str | None = None,
    course: Course | None = None,
    course_file: Path | None = None,
) -> Release:
    """Write the handout, the Gradescope bundle and the manifest into ``out`` (see the module docstring).

    ``level`` (``grade release --level``) is the stubs' scaffolding level, ``course``'s
    ``[scaffolding]`` the default level (when ``level`` is None) and the per-exercise overrides;
    ``course_file`` (the file ``course`` was read from) goes into the Gradescope bundle.
    """
    out = Path(out).resolve()
    levels = release_levels(level, course)
    if course is not None:  # every quiz chapter's due date comes from the chapter that holds it, named, never guessed
        course.check_quizzes(quiz_lib.chapter_ids(ROOT / "quizzes"))
    prepare_out(out, force)
    version = project_version()
    release = Release(out, version, reference_sha256(), levels=levels)
    release.pack_sizes = write_student(out, version, practice, levels, course)
    members = write_autograder(out, sandbox, levels, course_file)
    release.files = {
        "student": [
            {"path": p.relative_to(out).as_posix(), "sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in tree_files(out / "student")
        ],
        "autograder": [
            {
                "path": "autograder/autograder.zip",
                "sha256": sha256_file(out / "autograder" / "autograder.zip"),
                "members": members,
            }
        ],
    }
    manifest = {
        "format": "normgrade-release-1",
        "version": version,
        "reference_sha256": release.reference_sha256,
        "practice_quizzes": practice,
        "packs": {"bytes": release.packs_bytes, "by_exercise": release.pack_sizes},
        "scaffolding": {
            "level": level or (course.scaffolding_level if course else DEFAULT_LEVEL),
            "by_exercise": release.levels,
        },
        "where": {
            "student/": "the handout: stubs, README, quizzes (no answers), the student-side grader and its case packs",
            "autograder/autograder.zip": "Gradescope: setup.sh, run_autograder, source/ (full grader and reference)",
        },
        "files": release.files,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return release


__all__ = ["PRACTICE_STUDENT", "Release", "ReleaseError", "build_release", "reference_sha256"]
