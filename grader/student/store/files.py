"""The database file: where it is, who may read it, and whether it is ours (checked without writing)."""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path

from grader.student.errors import StoreError
from grader.student.store.schema import APPLICATION_ID, SCHEMA_VERSION

SQLITE_NOTADB = 26  # SQLite's result code for a file whose header is not SQLite's
BUSY_TIMEOUT_MS = 5000
DB_ENV = "GRADE_DB"
DEFAULT_EXERCISES_DIR = Path("exercises")  # the handout's exercises folder; the default database sits beside it


def default_db_path(exercises_dir: Path) -> Path:
    """``$GRADE_DB`` when set, else ``<exercises_dir>/../.grade/progress.db``."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env)
    return Path(exercises_dir).resolve().parent / ".grade" / "progress.db"


def refuse(path: Path, reason: str) -> StoreError:
    reason = " ".join(reason.split())  # one line, whatever SQLite's message holds
    return StoreError(f"{path} is not a normgrade progress database ({reason}): pass another --db")


def write_owner_only(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (a file holding secrets: tokens, a saved login) with mode 0600, atomically.

    The text goes to a new temporary file beside ``path``, created by ``os.open`` with ``O_CREAT | O_EXCL`` and
    mode 0600 (the umask can only take bits away; no ``chmod`` after, so no moment where others may read it; a
    file or link already at that name is never reused or followed), then renamed over ``path``: a reader sees
    the old file or the whole new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def exposed(path: Path, holds: str = "token hashes and keys") -> str | None:
    """One line when a SQLite file or its ``-wal``/``-shm`` (the course database: token hashes, the LTI key;
    the embedded queue: ``holds`` the uploads) may be read or written by its group or others (any of the mode's
    bits 0o077), naming the first such file and the command that makes it owner-only; None when each is 0600
    or less (or missing)."""
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = file.stat().st_mode & 0o777
        except OSError:
            continue
        if mode & 0o077:
            return f"{file} is readable by other users (mode {mode:o}): it holds {holds}; run chmod 600 {file}"
    return None


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
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
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
        raise refuse(path, f"schema version {version} is newer than this grader's {SCHEMA_VERSION}; upgrade normgrade")
    return version
