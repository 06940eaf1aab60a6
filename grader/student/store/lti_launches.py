"""The LTI launch chain's tables: ``lti_states`` (logins in progress), ``lti_nonces`` (id_tokens used) and
``lti_refusals`` (refused launches, for the dashboard). The rules are grader/server/lti's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def add_state(
    db: sqlite_utils.Database,
    state: str,
    nonce: str,
    issuer: str,
    client_id: str,
    created: float,
    expired_before: float,
    keep: int,
) -> None:
    """Store a login's state, first dropping the states created before ``expired_before`` and the oldest beyond
    the newest ``keep``."""
    db.execute("DELETE FROM lti_states WHERE created < ?", [expired_before])
    db.execute(
        "DELETE FROM lti_states WHERE state IN (SELECT state FROM lti_states ORDER BY created DESC LIMIT -1 OFFSET ?)",
        [keep],
    )
    db.table("lti_states").insert(
        {"state": state, "nonce": nonce, "issuer": issuer, "client_id": client_id, "created": created}
    )


def state(db: sqlite_utils.Database, state: str) -> dict[str, Any] | None:
    """A login's state row (nonce, issuer, client_id, created), or None."""
    rows = list(db.query("SELECT nonce, issuer, client_id, created FROM lti_states WHERE state = ?", [state]))
    return rows[0] if rows else None


def drop_states(db: sqlite_utils.Database, state: str, expired_before: float) -> None:
    """Drop a used state, and every state created before ``expired_before``."""
    db.execute("DELETE FROM lti_states WHERE state = ? OR created < ?", [state, expired_before])


def forget_nonces(db: sqlite_utils.Database, used_before: float) -> None:
    """Drop the nonces used before ``used_before`` (their id_tokens are too old to be accepted anyway)."""
    db.execute("DELETE FROM lti_nonces WHERE used < ?", [used_before])


def nonce_seen(db: sqlite_utils.Database, nonce: str) -> bool:
    """Whether an id_token with this nonce was used."""
    return bool(list(db.query("SELECT 1 FROM lti_nonces WHERE nonce = ?", [nonce])))


def use_nonce(db: sqlite_utils.Database, nonce: str, issuer: str, used: float) -> None:
    """Note a nonce as used."""
    db.execute("INSERT INTO lti_nonces (nonce, issuer, used) VALUES (?, ?, ?)", [nonce, issuer, used])


def add_refusal(db: sqlite_utils.Database, when: str, issuer: str, reason: str, keep: int) -> None:
    """Record a refused launch, keeping only the newest ``keep`` rows."""
    db.table("lti_refusals").insert({"at": when, "issuer": issuer, "reason": reason})
    db.execute("DELETE FROM lti_refusals WHERE id <= (SELECT max(id) FROM lti_refusals) - ?", [keep])


def recent_refusals(db: sqlite_utils.Database, limit: int) -> list[dict[str, Any]]:
    """The newest refused launches, newest first."""
    return list(db.query("SELECT * FROM lti_refusals ORDER BY id DESC LIMIT ?", [limit]))
