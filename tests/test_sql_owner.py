"""The database has one owner: no module outside the store (grader/student/store) issues SQL.

Every module under ``grader/`` and ``reference/`` is parsed, never imported. It issues SQL when it calls
``.execute(``, ``.executemany(``, ``.executescript(`` or ``.query(`` with a statement (sqlite3's and sqlite-utils'
ways in: the statement comes first, or as ``sql=``; a ``query(sort=...)`` of keywords alone builds no SQL),
reads a table as ``db["name"]`` or ``db.table("name")`` (sqlite-utils), or holds a string that is a statement (``SELECT ... FROM``,
``INSERT INTO``, ``UPDATE ... SET``, ``DELETE FROM``, ``CREATE TABLE``/``INDEX``, ``ALTER TABLE``, ``PRAGMA``).

None does (issue 42 moved the last of them behind the store's functions): a handler calls a named function of
the table's module, e.g. ``store.tokens.lookup(db, digest)``, and the test fails on any module that issues SQL.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWNER = "grader/student/store"  # the store package

SQL_CALLS = frozenset({"execute", "executemany", "executescript", "query"})
STATEMENT = re.compile(
    r"^\s*(SELECT\b.+\bFROM\b|INSERT\s+(OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b"
    r"|CREATE\s+(UNIQUE\s+)?(TABLE|INDEX)\b|ALTER\s+TABLE\b|DROP\s+TABLE\b|PRAGMA\b)",
    re.IGNORECASE | re.DOTALL,
)


def sql_lines(source: str) -> list[int]:
    """The lines of ``source`` that issue SQL (see the module's docstring), in order."""
    found: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_CALLS
            and (node.args or any(k.arg == "sql" for k in node.keywords))
        ):
            found.add(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "table"
            and _names_a_database(node.func.value)
        ):
            found.add(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and STATEMENT.match(node.value):
            found.add(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and _names_a_database(node.value)
        ):
            found.add(node.lineno)
    return sorted(found)


def _names_a_database(node: ast.expr) -> bool:
    """``db`` or ``something.db``: sqlite-utils' Database, whose ``[name]`` is a table."""
    return (isinstance(node, ast.Name) and node.id == "db") or (isinstance(node, ast.Attribute) and node.attr == "db")


def modules_issuing_sql() -> dict[str, list[int]]:
    """Every module of grader/ and reference/ outside the store that issues SQL -> its lines."""
    found: dict[str, list[int]] = {}
    for path in sorted([*ROOT.joinpath("grader").rglob("*.py"), *ROOT.joinpath("reference").rglob("*.py")]):
        name = path.relative_to(ROOT).as_posix()
        if name == OWNER + ".py" or name.startswith(OWNER + "/"):
            continue
        lines = sql_lines(path.read_text(encoding="utf-8"))
        if lines:
            found[name] = lines
    return found


def test_no_module_outside_the_store_issues_sql() -> None:
    found = modules_issuing_sql()
    assert not found, f"SQL outside the store (call a function of {OWNER} instead): {found}"


def test_the_scan_sees_each_way_sql_is_issued() -> None:
    assert sql_lines("def f(store):\n    store.conn.execute('x', ())\n") == [2]
    assert sql_lines("rows = db.query(sql)\n") == [1]
    assert sql_lines("db['attempts'].insert({})\n") == [1]
    assert sql_lines("self.db['jobs'].update(1, {})\n") == [1]
    assert sql_lines("db.table('score_overrides').insert({})\nstore.db.table('jobs').upsert({})\n") == [1, 2]
    assert sql_lines('Q = """\n  select id from jobs where x = ?"""\n') == [1]
    assert sql_lines("S = 'CREATE TABLE IF NOT EXISTS t (a)'\nU = 'update jobs set a = 1'\n") == [1, 2]
    assert sql_lines("rows = db.query(sql=s)\n") == [1]
    assert sql_lines("text = 'Select the rows you want'\nd = {}\nd['a'] = 1\nx.run(1)\n") == []
    assert sql_lines("link = self.query(sort='name', order='asc')\n") == []  # the dashboard's URL query
