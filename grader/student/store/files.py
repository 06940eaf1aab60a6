"""The database file: where it is, who may read it, and whether it is ours (checked without writing)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from grader.student.errors import StoreError
from grader.student.store.schema import APPLICATION_ID, SCHEMA_VERSION

SQLITE_NOTADB = 26  # SQLite's result code for a file whose header is not SQLite's
BUSY_TIMEOUT_MS = 5000
DB_ENV = "GRADE_DB"


def default_db_path(exercises_dir: Path) -> Path:
    """``$GRADE_DB`` when set, else ``<exercises_dir>/../.grade/progress.db``."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env)
    return Path(exercises_dir).resolve().parent / ".grade" / "progress.db"



def refuse(path: Path, reason: str) -> StoreError:
    reason = " ".join(reason.split())  # one line, whatever SQLite's message holds
    return StoreError(f"{path} is not a normgrade progress database ({reason}): pass another --db")


def exposed(path: Path) -> str | None:
    """One line when the database file (token hashes, the LTI key) may be read by its group or others, with
    the command that makes it owner-only; None when it is 0600 (or missing)."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return f"{path} is readable by other users (mode {mode:o}): it holds token hashes and keys; run chmod 600 {path}"


def inspect_file(path: Path) -> int:
    """Check, without writing, that ``path`` is ours or empty; return its schema version.

    Raises StoreError for a non-SQLite or corrupt file, a foreign database
    (tables we do not know and no application_id marker) or a newer schema.
    The file is read through SQLite alone, never with a plain ``open()``:
    closing any descriptor of a file drops every POSIX lock the process holds
    on it (SQLite's documented pitfall), and SQLite keeps its own descriptors
    open while one of its connections in the process holds a lock, so an
    inspection never takes a server's lock away from it.
    """
    try:
        if path.stat().st_size == 0:
            return 0  # an empty file is a new database
    except OSError as exc:
        raise StoreError(f"cannot read {path} ({exc.strerror}): pass another --db") from exc
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} ({exc}): pass another --db") from exc
    try:
        check = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if check != ["ok"]:
            raise refuse(path, "corrupt: " + "; ".join(str(c) for c in check[:3]))
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreError(f"{path} is locked by another process ({exc}): try again") from exc
        raise refuse(path, str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) == SQLITE_NOTADB:
            raise refuse(path, "not an SQLite file") from exc
        raise refuse(path, f"corrupt: {exc}") from exc
    finally:
        conn.close()
    if app_id != APPLICATION_ID:
        if tables or version:
            shown = ", ".join(sorted(tables)[:5]) or "none"
            raise refuse(path, f"it holds tables normgrade does not know: {shown}")
        return 0
    if version > SCHEMA_VERSION:
        raise refuse(
            path, f"schema version {version} is newer than this grader's {SCHEMA_VERSION}; upgrade normgrade"
        )
    return version
