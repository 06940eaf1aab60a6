"""Load a student's folder as the package ``exercises``, and scan it for forbidden imports.

The folder is found by path, never by an installed name. Its ``__init__.py`` is
not executed: the package object is built from the path alone and each topic
file (``normalization.py``) is imported on first attribute access
(``pkg.normalization``) or explicitly with :func:`load_topic`, so a syntax error
in one file does not break the others. Relative imports between the student's
files (``from .base import Module``) work as in the shipped package.

:func:`scan_forbidden_imports` is the static half of the import guard (the
runtime half lives in :mod:`grader.student.worker`): it reads every ``.py`` file with
:mod:`ast` and reports imports of ``reference`` or ``grader`` and syntax errors,
without running anything. :func:`local_dependencies` tells which sibling files
each file imports (``from .base import Module``), so that a problem in a shared
file is charged to every exercise file that imports it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from collections.abc import Callable, Mapping

_AST_LOCK = threading.Lock()

PACKAGE_NAME = "exercises"
FORBIDDEN_PACKAGES = ("reference", "grader")


class TopicNotFound(AttributeError):
    """The student's folder has no ``<topic>.py`` file."""


def _make_getattr(pkg_name: str, folder: Path) -> Callable[[str], ModuleType]:
    """The package's module-level ``__getattr__``: import ``<folder>/<name>.py`` on first use."""

    def __getattr__(name: str) -> ModuleType:
        if name.startswith("_") or not name.isidentifier() or not (folder / f"{name}.py").is_file():
            raise TopicNotFound(f"module {pkg_name!r} has no attribute {name!r} (no file {name}.py in {folder})")
        return importlib.import_module(f"{pkg_name}.{name}")

    return __getattr__


def unload(name: str = PACKAGE_NAME) -> None:
    """Forget a previously loaded package ``name`` and all its submodules."""
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]


def load_exercises(path: Path | str, name: str = PACKAGE_NAME) -> ModuleType:
    """Build the package ``name`` (default ``exercises``) from the folder ``path``.

    Nothing of the student's code runs here: the package's ``__init__.py`` is
    skipped and topic modules are imported lazily (``pkg.normalization``) or with
    :func:`load_topic`. A package of the same name loaded before is replaced.
    """
    folder = Path(path).resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    unload(name)
    spec = importlib.machinery.ModuleSpec(name, loader=None, origin=str(folder / "__init__.py"), is_package=True)
    spec.submodule_search_locations = [str(folder)]
    pkg = importlib.util.module_from_spec(spec)
    pkg.__file__ = str(folder / "__init__.py")
    pkg.__getattr__ = _make_getattr(name, folder)  # type: ignore[attr-defined]  # PEP 562
    sys.modules[name] = pkg
    importlib.invalidate_caches()
    return pkg


def load_topic(pkg: ModuleType, topic: str) -> ModuleType:
    """Import the topic module ``<pkg>.<topic>`` now (its exceptions propagate to the caller)."""
    return getattr(pkg, topic)


def package_folder(pkg: ModuleType) -> Path:
    """The folder a package made by :func:`load_exercises` was loaded from."""
    return Path(list(pkg.__path__)[0])


# --- static scan ---------------------------------------------------------------


def _forbidden_root(module: str | None) -> str | None:
    """'reference' for 'reference.normalization', None for 'numpy'."""
    if not module:
        return None
    root = module.split(".")[0]
    return root if root in FORBIDDEN_PACKAGES else None


def _literal_import_target(node: ast.Call) -> str | None:
    """The module named by ``__import__("x")`` / ``importlib.import_module("x")`` / ``import_module("x")``."""
    func = node.func
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute):
        name = func.attr
    else:
        return None
    if name not in ("__import__", "import_module") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def forbidden_imports_in(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, package) for each import of ``reference``/``grader`` in a parsed file."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = _forbidden_root(alias.name)
                if root:
                    found.append((node.lineno, root))
        elif isinstance(node, ast.ImportFrom):
            root = _forbidden_root(node.module) if node.level == 0 else None
            if root:
                found.append((node.lineno, root))
        elif isinstance(node, ast.Call):
            root = _forbidden_root(_literal_import_target(node))
            if root:
                found.append((node.lineno, root))
    return sorted(found)


def _parse(source: bytes, filename: str) -> ast.AST:
    """``ast.parse`` under a lock: CPython 3.11's ast.parse is not safe in concurrent threads."""
    with _AST_LOCK:
        return ast.parse(source, filename=filename)


def student_files(path: Path | str) -> list[Path]:
    """The ``.py`` files of a student's folder (recursively, caches skipped), sorted."""
    folder = Path(path)
    return sorted(
        p for p in folder.rglob("*.py") if "__pycache__" not in p.relative_to(folder).parts and p.is_file()
    )


Sources = Mapping[str, bytes]


def _python_sources(submission: Path | str | Sources) -> dict[str, bytes]:
    """Relative path -> source of each ``.py`` file: of an ingested hand-in, or read from a folder by ingest."""
    if not isinstance(submission, Mapping):
        from grader.student.ingest import read_submission  # parent side only: the worker never scans

        submission = read_submission(submission).files
    return {name: data for name, data in submission.items() if name.endswith(".py")}


def _parse_or_reason(source: bytes, rel: str) -> tuple[ast.AST | None, str | None]:
    """(tree, None), or (None, a one-line reason) for source that cannot be parsed."""
    try:
        return _parse(source, rel), None
    except SyntaxError as exc:
        return None, f"{rel} line {exc.lineno}: {exc.msg}"
    except (ValueError, UnicodeError) as exc:  # NUL bytes in the source, undecodable text
        return None, f"{rel} cannot be read as Python source: {exc}"
    except (RecursionError, MemoryError):
        return None, f"{rel} is nested too deeply to be read as Python source"


def scan_forbidden_imports(submission: Path | str | Sources) -> dict[str, str]:
    """Map each offending file (relative path, e.g. ``normalization.py``) to a one-line reason.

    ``submission`` is a folder or an ingested hand-in's files. Reported: an
    import of ``reference`` or ``grader`` (``import``, ``from ... import``,
    ``__import__("...")`` or ``importlib.import_module("...")`` with a literal
    name), and source that does not parse ("normalization.py line 12: invalid syntax").
    """
    problems: dict[str, str] = {}
    for rel, source in sorted(_python_sources(submission).items()):
        tree, reason = _parse_or_reason(source, rel)
        if tree is None:
            problems[rel] = str(reason)
            continue
        try:
            found = forbidden_imports_in(tree)
        except (RecursionError, MemoryError):
            problems[rel] = f"{rel} is nested too deeply to be read as Python source"
            continue
        if found:
            line, root = found[0]
            problems[rel] = (
                f"{rel} line {line} imports {root!r}: a submission may not import the "
                f"reference solutions or the grader, so this file scores zero"
            )
    return problems


def _relative_imports(tree: ast.AST) -> set[str]:
    """The sibling files a parsed file imports relatively: ``from .base import X`` -> {'base.py'}."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0] + ".py")
            else:  # from . import linear, base
                found.update(alias.name + ".py" for alias in node.names)
    return found


def local_dependencies(submission: Path | str | Sources) -> dict[str, set[str]]:
    """Each top-level ``.py`` file of the hand-in -> every sibling file it imports, transitively.

    Files that do not parse have no dependencies here (``scan_forbidden_imports``
    reports them).
    """
    direct: dict[str, set[str]] = {}
    for name, source in sorted(_python_sources(submission).items()):
        if "/" in name:
            continue
        tree, _ = _parse_or_reason(source, name)
        try:
            direct[name] = _relative_imports(tree) if tree is not None else set()
        except (RecursionError, MemoryError):
            direct[name] = set()
    closure: dict[str, set[str]] = {}
    for name in direct:
        seen: set[str] = set()
        todo = list(direct[name])
        while todo:
            dep = todo.pop()
            if dep in seen or dep == name:
                continue
            seen.add(dep)
            todo.extend(direct.get(dep, ()))
        closure[name] = seen
    return closure
