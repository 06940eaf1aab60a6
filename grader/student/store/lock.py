"""Who writes a database: the one process serving it (``grade serve``), or, while none does, a command.

The lock is a BSD ``flock`` on ``<database>-serving``, a file of its own, so SQLite's POSIX locks on the database
are never touched by it (see :class:`Serving`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.student.errors import StoreError
from grader.student.store.clock import utc_now

SERVING_SUFFIX = "-serving"  # <database>-serving: the server's lock file (pid and URL), see serve()


def serving_file(path: Path) -> Path:
    """``<database>-serving``: the file a server's lock sits on, holding its pid and URL."""
    return path.with_name(path.name + SERVING_SUFFIX)


@dataclass
class _Hold:
    """This process's ``flock`` on one database's serving file: one descriptor, shared by its users."""

    fd: int
    serving: int = 0  # Serving claims of this process (exclusive lock while > 0)
    writers: int = 0  # stores opened by a writing command (shared lock while > 0 and not serving)


_HOLDS: dict[str, _Hold] = {}
_HOLDS_LOCK = threading.Lock()


def _key(path: Path) -> str:
    return str(path.resolve())


def _record(path: Path) -> dict[str, Any]:
    """What a server wrote in the serving file ({"pid", "url", "since"}; {} when there is nothing readable)."""
    try:
        doc = json.loads(serving_file(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _owner_text(path: Path) -> str:
    """Who serves ``path``, from its serving file: "pid N at URL" (empty when unreadable)."""
    doc = _record(path)
    if "pid" not in doc:
        return ""
    return f"pid {doc['pid']}" + (f" at {doc['url']}" if doc.get("url") else "")


def _held_exclusively(path: Path) -> bool:
    """Whether another process holds the serving file's lock exclusively (a server), not shared or not at all."""
    import fcntl

    try:
        fd = os.open(serving_file(path), os.O_RDONLY)
    except OSError:
        return False  # never served
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # the serving file, never the database: no SQLite lock is dropped; our probe ends


def served_by(path: Path | str) -> dict[str, Any] | None:
    """The serving file's record (pid, url) when *another* process serves ``path`` now, else None."""
    path = Path(path)
    with _HOLDS_LOCK:
        if _key(path) in _HOLDS:
            return None  # this process holds it: it serves it, or a command of ours writes it
        if not _held_exclusively(path):
            return None
    return _record(path)


def _open_serving_file(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # a new database's folder, as Store.open makes it
        return os.open(serving_file(path), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create {serving_file(path)} ({exc.strerror}): pass another --db") from exc


class DatabaseServed(StoreError):
    """A command would write a database that a running server owns (one line: who serves it, what to do)."""

    def __init__(self, path: Path, command: str, owner: str) -> None:
        super().__init__(
            f"{path} is served by grade serve ({owner or 'another process'}): `{command}` does not write a "
            "database a server owns; use the server (its dashboard or API), or stop it and run this again"
        )
        self.path = path
        self.owner = owner


def hold_for_writer(path: Path, command: str) -> str:
    """A shared lock on the serving file for a writing command: refused while another process serves."""
    import fcntl

    key = _key(path)
    with _HOLDS_LOCK:
        hold = _HOLDS.get(key)
        if hold is None:
            fd = _open_serving_file(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise DatabaseServed(path, command, _owner_text(path)) from None
            hold = _HOLDS[key] = _Hold(fd)
        hold.writers += 1
    return key


def release_hold(key: str, serving: bool) -> None:
    import fcntl

    with _HOLDS_LOCK:
        hold = _HOLDS.get(key)
        if hold is None:
            return
        if serving:
            hold.serving -= 1
        else:
            hold.writers -= 1
        if serving and hold.serving <= 0:
            os.ftruncate(hold.fd, 0)  # no stale pid or URL is ever shown for a server that is gone
        if hold.serving <= 0 and hold.writers <= 0:
            del _HOLDS[key]
            os.close(hold.fd)  # closing the descriptor ends its flock
        elif hold.serving <= 0:
            fcntl.flock(hold.fd, fcntl.LOCK_SH)  # back to a writing command's shared lock


def serving_here(path: Path) -> bool:
    with _HOLDS_LOCK:
        hold = _HOLDS.get(_key(path))
        return hold is not None and hold.serving > 0


class Serving:
    """This process serves a database: it alone writes it until :meth:`release` (``grade serve``).

    :func:`serve` takes an exclusive ``flock`` on ``<database>-serving`` and
    writes the process's pid and URL there; a writing command in another
    process (:meth:`Store.open` with ``writer``) is refused in one line while
    it is held, and a server does not start while such a command runs. The
    lock is a BSD ``flock`` on a file of its own, so SQLite's POSIX locks on
    the database are never touched by it; the kernel drops it when the
    process ends, however it ends.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self._key: str | None = key

    def release(self) -> None:
        if self._key is not None:
            release_hold(self._key, serving=True)
            self._key = None


def serve(path: Path | str, url: str = "") -> Serving:
    """Claim ``path`` for this process (the server); StoreError in one line when another holds it."""
    import fcntl

    path = Path(path)
    key = _key(path)
    with _HOLDS_LOCK:
        hold = _HOLDS.get(key)
        fd = hold.fd if hold is not None else _open_serving_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if hold is None:
                os.close(fd)
            else:  # a command of this process still writes: keep its shared lock (a conversion may drop it)
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if _held_exclusively(path):
                raise StoreError(
                    f"{path} is already served by another grade serve ({_owner_text(path) or 'another process'})"
                ) from None
            raise StoreError(
                f"{path} is open in another grade command: wait for it to finish, then start the server again"
            ) from None
        if hold is None:
            hold = _HOLDS[key] = _Hold(fd)
        hold.serving += 1
        record = json.dumps({"pid": os.getpid(), "url": url, "since": utc_now()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
    return Serving(path, key)
