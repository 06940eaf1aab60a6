"""Load a student's folder as the package ``exercises``, and scan it for forbidden imports.

The folder is found by path, never by an installed name. Its ``__init__.py`` is
not executed: the package object is built from the path alone and each topic
file (``normalization.py``) is imported on first attribute access
(``pkg.normalization``) or explicitly with :func:`load_topic`, so a syntax error
in one file does not break the others. Relative imports between the student's
files (``from .base import Module``) work as in the shipped package.

:func:`scan` is the static half of the import guard (the runtime half lives
in :mod:`grader.student.sandbox.worker`): it parses every ``.py`` file once with
:mod:`ast`, without running anything, and reports imports of ``reference`` or
``grader`` and syntax errors (:func:`scan_forbidden_imports`), and which
sibling files each file imports (``from .base import Module``,
:func:`local_dependencies`), so that a problem in a shared file is charged to
every exercise file that imports it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

_AST_LOCK = threading.Lock()

PACKAGE_NAME = "exercises"
FORBIDDEN_PACKAGES = ("reference", "grader")
# What a submission may import: NumPy and the Python standard library (``sys.stdlib_module_names``; the
# sandbox stops what its system modules would reach), and its own package. Every other package is
# refused by the static scan, the same in the handout, on the server and on Gradescope. SciPy is one of
# them: the exercises are what scipy.special would do for you (math.erfc through np.frompyfunc gives erf).
ALLOWED_PACKAGES = frozenset({"numpy", PACKAGE_NAME}) | frozenset(sys.stdlib_module_names)
ALLOWED_IMPORTS_TEXT = "numpy and the Python standard library (math, functools, ...)"


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
    pkg.__getattr__ = _make_getattr(name, folder)  # type: ignore[method-assign]  # PEP 562 (typeshed: a method)
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
    """'reference' for 'reference.normalization', 'scipy' for 'scipy.special' (not allowed), None for 'numpy'."""
    if not module:
        return None
    root = module.split(".")[0]
    return root if root in FORBIDDEN_PACKAGES or root not in ALLOWED_PACKAGES else None


def refusal(rel: str, line: int, root: str) -> str:
    """The one-line reason a file that imports ``root`` scores zero."""
    if root in FORBIDDEN_PACKAGES:
        return (
            f"{rel} line {line} imports {root!r}: a submission may not import the "
            f"reference solutions or the grader, so this file scores zero"
        )
    return (
        f"{rel} line {line} imports {root!r}: a submission may import only {ALLOWED_IMPORTS_TEXT}, "
        f"so this file scores zero; remove the import"
    )


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


def imports_in(tree: ast.AST) -> tuple[list[tuple[int, str]], set[str]]:
    """One walk over a parsed file: ((line, package) for each import of ``reference``/``grader`` or of a
    package not allowed (:data:`ALLOWED_PACKAGES`), sorted;
    the sibling files it imports relatively: ``from .base import X`` -> {'base.py'})."""
    found: list[tuple[int, str]] = []
    relative: set[str] = set()
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
            if node.level == 1:
                if node.module:
                    relative.add(node.module.split(".")[0] + ".py")
                else:  # from . import linear, base
                    relative.update(alias.name + ".py" for alias in node.names)
        elif isinstance(node, ast.Call):
            root = _forbidden_root(_literal_import_target(node))
            if root:
                found.append((node.lineno, root))
    return sorted(found), relative


def _parse(source: bytes, filename: str) -> ast.AST:
    """``ast.parse`` under a lock: CPython 3.11's ast.parse is not safe in concurrent threads."""
    with _AST_LOCK:
        return ast.parse(source, filename=filename)


def student_files(path: Path | str) -> list[Path]:
    """The ``.py`` files of a student's folder (recursively, caches skipped), sorted."""
    folder = Path(path)
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.relative_to(folder).parts and p.is_file())


Sources = Mapping[str, bytes]


def _python_sources(submission: Path | str | Sources) -> dict[str, bytes]:
    """Relative path -> source of each ``.py`` file: of an ingested hand-in, or read from a folder by ingest."""
    if not isinstance(submission, Mapping):
        from grader.student.sandbox.ingest import read_submission  # parent side only: the worker never scans

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


@dataclass(frozen=True)
class Scan:
    """What reading a hand-in's sources (without running them) found.

    problems: each offending file -> a one-line reason (see :func:`scan_forbidden_imports`);
    deps: each top-level file -> the sibling files it imports, transitively (see :func:`local_dependencies`).
    """

    problems: dict[str, str]
    deps: dict[str, set[str]]


def scan(submission: Path | str | Sources) -> Scan:
    """Parse each ``.py`` file of ``submission`` (a folder or an ingested hand-in's files) once, walk it once."""
    problems: dict[str, str] = {}
    direct: dict[str, set[str]] = {}
    for rel, source in sorted(_python_sources(submission).items()):
        top_level = "/" not in rel
        if top_level:
            direct[rel] = set()  # a file that does not parse has no dependencies
        tree, reason = _parse_or_reason(source, rel)
        if tree is None:
            problems[rel] = str(reason)
            continue
        try:
            found, relative = imports_in(tree)
        except (RecursionError, MemoryError):
            problems[rel] = f"{rel} is nested too deeply to be read as Python source"
            continue
        if found:
            problems[rel] = refusal(rel, *found[0])
        if top_level:
            direct[rel] = relative
    return Scan(problems, _transitive(direct))


def _transitive(direct: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each file -> every file it reaches through ``direct`` imports (itself excluded)."""
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


def scan_forbidden_imports(submission: Path | str | Sources) -> dict[str, str]:
    """Map each offending file (relative path, e.g. ``normalization.py``) to a one-line reason.

    ``submission`` is a folder or an ingested hand-in's files. Reported: an
    import of ``reference``, ``grader`` or a package not allowed (``import``, ``from ... import``,
    ``__import__("...")`` or ``importlib.import_module("...")`` with a literal
    name), and source that does not parse ("normalization.py line 12: invalid syntax").
    """
    return scan(submission).problems


def local_dependencies(submission: Path | str | Sources) -> dict[str, set[str]]:
    """Each top-level ``.py`` file of the hand-in -> every sibling file it imports, transitively.

    Files that do not parse have no dependencies here (``scan_forbidden_imports``
    reports them).
    """
    return scan(submission).deps
