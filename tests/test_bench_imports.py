"""The benches import nothing from tests/ (a static walk of each bench/ script's imports, those inside functions
too): what they share with the tests lives in bench/ (the tests import it from there) or in the library.

With tests/ on sys.path, its folders that mirror the packages (tests/reference/, no ``__init__.py``) shadow
them, and a bench run from a fresh clone breaks; a bench also must not depend on test helpers' churn.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def modules_of_tests() -> set[str]:
    """The module names that only tests/ provides: its files' stems (helpers, test modules) and ``tests``."""
    return {p.stem for p in TESTS.rglob("*.py") if p.stem != "__init__"} | {"tests"}


def offences(script: Path, names: set[str]) -> list[str]:
    """Each import of a tests/ module in ``script``, and each sys.path entry naming tests/, as 'file:line: what'."""
    found = []
    for node in ast.walk(ast.parse(script.read_text(), str(script))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        line = getattr(node, "lineno", 0)
        found += [f"{script.name}:{line}: imports {m}" for m in modules if m.split(".")[0] in names]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append")
        ):
            target = ast.unparse(node.func.value)
            if target == "sys.path" and any(
                '"tests"' in ast.unparse(a) or "'tests'" in ast.unparse(a) for a in node.args
            ):
                found.append(f"{script.name}:{line}: puts tests/ on sys.path")
    return found


def test_no_bench_imports_from_tests() -> None:
    names = modules_of_tests()
    assert {"checks_util", "figures_util", "test_mistake_audit", "server_util"} <= names
    found = [o for script in sorted((ROOT / "bench").glob("*.py")) for o in offences(script, names)]
    assert found == []


def test_the_walk_finds_an_import_inside_a_function_and_a_path_entry(tmp_path: Path) -> None:
    script = tmp_path / "bench_x.py"
    script.write_text(
        'import sys\nsys.path.insert(0, str(ROOT / "tests"))\n\n\n'
        "def run():\n    import test_mistake_audit as audit\n    from checks_util import SEEDS\n"
    )
    assert offences(script, modules_of_tests()) == [
        "bench_x.py:2: puts tests/ on sys.path",
        "bench_x.py:6: imports test_mistake_audit",
        "bench_x.py:7: imports checks_util",
    ]
