"""The ``tokens`` table: the course server's tokens, kept only as their sha256 (grader/server/auth.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def insert(db: sqlite_utils.Database, digest: str, student: str, role: str, when: str) -> None:
    """Store a new token's hash for ``student`` with ``role``."""
    db.table("tokens").insert({"hash": digest, "student": student, "role": role, "created_at": when, "revoked": 0})


def revoke_all(db: sqlite_utils.Database, student: str, role: str) -> None:
    """Revoke every token of ``student`` with ``role``."""
    db.execute("UPDATE tokens SET revoked = 1 WHERE student = ? AND role = ?", [student, role])


def lookup(db: sqlite_utils.Database, digest: str) -> dict[str, Any] | None:
    """The row (hash, student, role, revoked) with this hash, or None."""
    rows = list(db.query("SELECT hash, student, role, revoked FROM tokens WHERE hash = ?", [digest]))
    return rows[0] if rows else None


def live_hashes(db: sqlite_utils.Database, role: str) -> list[str]:
    """The hashes of the tokens of ``role`` not revoked."""
    return [r["hash"] for r in db.query("SELECT hash FROM tokens WHERE role = ? AND revoked = 0", [role])]


def revoke(db: sqlite_utils.Database, digest: str) -> None:
    """Revoke the token with this hash."""
    db.execute("UPDATE tokens SET revoked = 1 WHERE hash = ?", [digest])
