"""The ``lti_keys`` table: the LTI tool's signing keys (grader/server/lti: a key signs from ``signs_from`` on, a
retired one is no longer published)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils

NEWEST_FIRST = "ORDER BY signs_from DESC, rowid DESC"


def add(db: sqlite_utils.Database, kid: str, private_pem: str, when: str, signs_from: float) -> None:
    """Store a new key (published at once, signing from ``signs_from``)."""
    db.table("lti_keys").insert(
        {"kid": kid, "private_pem": private_pem, "created_at": when, "retired": 0, "signs_from": signs_from}
    )


def signing(db: sqlite_utils.Database, now: float) -> dict[str, Any] | None:
    """The key that signs at ``now`` (kid, private_pem): the newest published whose ``signs_from`` has come."""
    rows = list(
        db.query(
            f"SELECT kid, private_pem FROM lti_keys WHERE retired = 0 AND signs_from <= ? {NEWEST_FIRST} LIMIT 1", [now]
        )
    )
    return rows[0] if rows else None


def waiting(db: sqlite_utils.Database, now: float) -> list[dict[str, Any]]:
    """The published keys that sign only after ``now`` (kid, signs_from)."""
    return list(db.query("SELECT kid, signs_from FROM lti_keys WHERE retired = 0 AND signs_from > ?", [now]))


def signed_before(db: sqlite_utils.Database, kid: str | None, now: float) -> list[str]:
    """The published keys other than ``kid`` whose ``signs_from`` has come, newest first."""
    return [
        r["kid"]
        for r in db.query(
            f"SELECT kid FROM lti_keys WHERE retired = 0 AND kid != ? AND signs_from <= ? {NEWEST_FIRST}", [kid, now]
        )
    ]


def retire(db: sqlite_utils.Database, kid: str) -> None:
    """Stop publishing a key."""
    db.execute("UPDATE lti_keys SET retired = 1 WHERE kid = ?", [kid])


def published(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """The keys not retired, newest first: kid, created_at, signs_from."""
    return list(db.query(f"SELECT kid, created_at, signs_from FROM lti_keys WHERE retired = 0 {NEWEST_FIRST}"))


def published_pems(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """The keys not retired, newest first: kid, private_pem."""
    return list(db.query(f"SELECT kid, private_pem FROM lti_keys WHERE retired = 0 {NEWEST_FIRST}"))
