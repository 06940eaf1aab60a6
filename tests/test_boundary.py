"""The trust boundary is the layout: ``grader/student/`` (what a handout ships) imports nothing instructor-only.

Every module under ``grader/student/`` is parsed (never imported) and each of its
imports, relative ones resolved, and each ``importlib.import_module("...")``
literal must be the standard library, a third-party package, or
``grader.student`` itself: never the rest of ``grader`` (checks that need the
reference, mistake variants, the solution writer, quiz keys, batch, server) and
never ``reference``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDENT = ROOT / "grader" / "student"


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path`` (a file under ``root``), and of import_module("...")
    literals."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]  # from grader import x
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def forbidden(name: str) -> bool:
    """Whether importing ``name`` from the student side would cross the boundary."""
    top = name.split(".")[0]
    if top == "reference":
        return True
    if top != "grader":
        return False
    return not (name in ("grader", "grader.student") or name.startswith("grader.student."))


def student_modules() -> list[Path]:
    return sorted(STUDENT.rglob("*.py"))


def test_the_student_side_exists_and_is_walked() -> None:
    names = {p.relative_to(STUDENT).as_posix() for p in student_modules()}
    assert {
        "engine/ops.py",
        "engine/ops_opencl.py",
        "engine/loader.py",
        "sandbox/worker.py",
        "sandbox/runner.py",
        "engine/grading.py",
        "engine/checks/context.py",
    } <= names
    assert any(
        forbidden(n) for _, n in imported_names(ROOT / "grader" / "course" / "grading.py")
    )  # the walker sees imports


@pytest.mark.parametrize("path", student_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_student_module_imports_nothing_instructor_only(path: Path) -> None:
    bad = [f"line {line}: {name}" for line, name in imported_names(path) if forbidden(name)]
    assert not bad, f"{path.relative_to(ROOT)} crosses the boundary: {bad}"


def test_ops_and_ops_opencl_form_no_cycle() -> None:
    opencl = {name for _, name in imported_names(STUDENT / "engine" / "ops_opencl.py")}
    assert not any(n == "grader.student.engine.ops" or n.startswith("grader.student.engine.ops.") for n in opencl)


def test_the_package_root_imports_nothing() -> None:
    """``grader/__init__.py`` ships with the handout (the student package lives under it): importing it imports
    nothing. Its one function, the IPython extension hook (``%load_ext grader``), loads the notebook front end
    of the student side when it is called, and nothing else."""
    tree = ast.parse((ROOT / "grader" / "__init__.py").read_text(encoding="utf-8"))
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert top_level == []
    names = [name for _, name in imported_names(ROOT / "grader" / "__init__.py")]
    assert names in (
        [],
        ["grader.student.feedback.notebook", "grader.student.feedback.notebook.load_ipython_extension"],
    )


def test_the_handout_reads_no_locked_quiz_and_no_key() -> None:
    """The handout's `grade progress` and `grade quiz` read the server's answers or the practice files alone:
    no module of the student side knows the locked quizzes' format, their digests or where they live."""
    from grader.quiz import FORMAT as LOCKED_FORMAT

    for path in student_modules():
        text = path.read_text(encoding="utf-8")
        for marker in (LOCKED_FORMAT, '"digests"', "'digests'", "default_quiz_dir", "QUIZ_DIR_ENV"):
            assert marker not in text, f"{path.relative_to(ROOT)} names {marker}"
    assert {"remote.py", "progress.py", "quiz_text.py", "cli.py"} <= {p.name for p in student_modules()}
