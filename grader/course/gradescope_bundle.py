"""Gradescope's bundle (``DIR/autograder/autograder.zip`` of ``grade release``): how it is written.

``setup.sh`` installs ``source/`` (the full grader, the reference, the stubs as the handout has them and the
locked quizzes) once per image; ``run_autograder`` runs :mod:`grader.course.gradescope`, the bundle's
run-time, for every submission.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.course.scaffold import render_stub
from grader.student.course import HANDOUT_SETTINGS
from grader.course.release_files import ROOT, STUDENT_DIR, levels_json, tree_files

# Files of the repository that the Gradescope bundle's source/ holds (the full grader and the reference).
AUTOGRADER_TREES = ("grader", "reference", "exercises")
AUTOGRADER_FILES = ("pyproject.toml", "README.md")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image (choose the Ubuntu 24.04 base image:
# the grader needs Python 3.11 or newer). Everything goes into a virtual environment (PEP 668).
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
apt-get update -qq
apt-get install -y -qq python3 python3-venv >/dev/null
apt-get install -y -qq bubblewrap >/dev/null  # the OS sandbox: every upload is graded inside it
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install --quiet "$ROOT/source[pocl]"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grade the upload, write results/results.json.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
cd "$ROOT/source" && exec "${PYTHON:-$ROOT/venv/bin/python}" -m grader.course.gradescope --root "$ROOT"{flags}
"""


def write_autograder(
    out: Path, sandbox: bool = True, levels: dict[str, str] | None = None, course_file: Path | None = None
) -> list[str]:
    """``out/autograder/autograder.zip``; returns its member names.

    ``sandbox`` False: ``run_autograder`` grades with ``--no-sandbox`` (for an
    image where bubblewrap cannot create namespaces; the results say so).
    ``course_file``: the course.toml, kept as ``source/course.toml`` (its quiz
    attempts and due dates decide what a graded quiz answer is told).
    """
    target = out / "autograder"
    target.mkdir(parents=True)
    zip_path = target / "autograder.zip"
    members: list[str] = []
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        run_autograder = RUN_AUTOGRADER.replace("{flags}", "" if sandbox else " --no-sandbox")
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", run_autograder)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text)
            members.append(name)
        levels = levels or {}
        for tree in AUTOGRADER_TREES:
            for path in tree_files(ROOT / tree):
                if path.is_relative_to(STUDENT_DIR / "packs") or path in (
                    STUDENT_DIR / "engine" / "scaffolding.json",
                    STUDENT_DIR / HANDOUT_SETTINGS.name,
                ):
                    continue
                name = "source/" + path.relative_to(ROOT).as_posix()
                if tree == "exercises" and path.suffix in (".py", ".cl"):  # the stubs, as the handout has them
                    relative = path.relative_to(ROOT / "exercises").as_posix()
                    zf.writestr(name, render_stub(relative, path.read_text(encoding="utf-8"), levels))
                else:
                    zf.write(path, name)
                members.append(name)
        name = "source/grader/student/engine/scaffolding.json"
        zf.writestr(name, levels_json(levels))
        members.append(name)
        if course_file is not None:
            zf.write(course_file, "source/course.toml")
            members.append("source/course.toml")
        for path in sorted((ROOT / "quizzes").glob("*.json")):  # locked quizzes: the answers file is scored with them
            name = "source/" + path.relative_to(ROOT).as_posix()
            zf.write(path, name)
            members.append(name)
        for file in AUTOGRADER_FILES:
            zf.write(ROOT / file, f"source/{file}")
            members.append(f"source/{file}")
    return members
