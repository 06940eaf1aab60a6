"""docs/authoring.md's steps, followed in a temporary copy of the repository: they add an exercise and nothing else.

Each ```` ```python ```` block of the page opens with ``# PATH: WHERE``, WHERE being ``at the end``,
``before the line containing TEXT``, ``after the line containing TEXT`` or ``in place of the line containing
TEXT``; :func:`apply_block` does exactly that to the copy. The copy then grades a right implementation of the
new exercise (full marks) and a wrong one (its known mistake named), and ``grade release`` writes its stub into
a handout. A step missing from the page, or a list elsewhere that still needs the new name, fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "authoring.md"
EXERCISE = "activations.Softplus"
WHERE = re.compile(
    r"^# (?P<path>\S+): (?P<where>at the end|(?:before|after|in place of) the line containing (?P<text>.+))$"
)

pytestmark = pytest.mark.slow

RIGHT = """
    def forward(self, x):
        self.x = np.array(x, dtype=np.float64)
        return np.maximum(self.x, 0.0) + np.log1p(np.exp(-np.abs(self.x)))

    def backward(self, dout):
        return dout * np.exp(-np.logaddexp(0.0, -self.x))  # sigma(x), computed without overflow
"""
WRONG = """
    def forward(self, x):
        self.x = np.array(x, dtype=np.float64)
        return np.log(1.0 + np.exp(self.x))

    def backward(self, dout):
        return dout * np.exp(-np.logaddexp(0.0, -self.x))  # sigma(x), computed without overflow
"""


def page_blocks() -> list[str]:
    """The page's python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)


def apply_block(root: Path, block: str) -> str:
    """Put ``block`` (less its first line) where that line says, in the file under ``root`` it names; its path."""
    first, _, body = block.partition("\n")
    found = WHERE.match(first)
    assert found, f"docs/authoring.md: a python block opens with '# PATH: WHERE', not {first!r}"
    path = root / found["path"]
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if found["where"] == "at the end":
        lines.append(body)
    else:
        hits = [i for i, line in enumerate(lines) if found["text"] in line]
        assert len(hits) == 1, f"{found['path']}: {len(hits)} lines contain {found['text']!r} (one expected)"
        at = hits[0]
        if found["where"].startswith("before"):
            lines.insert(at, body)
        elif found["where"].startswith("after"):
            lines.insert(at + 1, body)
        else:
            lines[at] = body
    path.write_text("".join(lines), encoding="utf-8")
    return found["path"]


def copy_of_repository(to: Path) -> Path:
    """The repository's tracked files (git's list) under ``to``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    katex = ROOT / "text" / "node_modules"  # KaTeX, installed by `make text-deps` (ignored by git): release needs it
    if katex.is_dir():
        (to / "text" / "node_modules").symlink_to(katex, target_is_directory=True)
    return to


def grade(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``grade ARGS`` run from the copy, with the copy's grader and reference first on the path."""
    env = {**os.environ, "PYTHONPATH": str(copy), "GRADE_STUDENT": "author"}
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def implemented(copy: Path, folder: str, methods: str) -> Path:
    """A copy of the stubs whose Softplus has ``methods`` instead of the stub's."""
    target = copy / folder
    shutil.copytree(copy / "exercises", target)
    stub = (target / "activations.py").read_text(encoding="utf-8")
    head, _, _ = stub.partition("class Softplus(Module):")
    (target / "activations.py").write_text(head + "class Softplus(Module):\n" + methods, encoding="utf-8")
    return target


def test_the_page_names_the_five_places_of_an_exercise_and_nothing_else() -> None:
    places = {WHERE.match(block.partition("\n")[0])["path"] for block in page_blocks()}  # type: ignore[index]
    assert places == {
        "reference/activations.py",
        "exercises/activations.py",
        "grader/student/engine/catalogue.py",
        "grader/student/engine/checks/activations.py",
        "grader/mistakes/activations.py",
    }


def test_the_steps_add_an_exercise_that_grades_names_its_mistake_and_ships(tmp_path: Path) -> None:
    copy = copy_of_repository(tmp_path / "repo")
    for block in page_blocks():
        apply_block(copy, block)

    right = grade(
        copy,
        "submit",
        EXERCISE,
        "--path",
        str(implemented(copy, "right", RIGHT)),
        "--local",
        "--json",
        "--db",
        str(tmp_path / "right.db"),
    )
    report = json.loads(right.stdout)
    assert right.returncode == 0, right.stdout + right.stderr
    [softplus] = report["exercises"]
    assert softplus["id"] == EXERCISE and softplus["score"] == softplus["max_score"] == 10

    wrong = grade(
        copy,
        "submit",
        EXERCISE,
        "--path",
        str(implemented(copy, "wrong", WRONG)),
        "--local",
        "--json",
        "--db",
        str(tmp_path / "wrong.db"),
    )
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    [softplus] = json.loads(wrong.stdout)["exercises"]
    assert "softplus-overflow" in {c["misconception"] for c in softplus["checks"]}, softplus["checks"]

    released = grade(copy, "release", "--out", str(tmp_path / "release"))
    assert released.returncode == 0, released.stdout + released.stderr
    handout = tmp_path / "release" / "student"
    assert "class Softplus(Module):" in (handout / "exercises" / "activations.py").read_text(encoding="utf-8")
    assert (
        "class Softplus"
        not in (handout / "exercises" / "activations.py").read_text(encoding="utf-8").split("class Softplus", 1)[1]
    )  # the stub once, never the reference's body
    assert "np.log1p" not in (handout / "exercises" / "activations.py").read_text(encoding="utf-8")
