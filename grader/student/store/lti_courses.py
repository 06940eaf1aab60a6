"""Who comes from the LMS, and from which course: ``lti_contexts`` (LMS course contexts and their service
endpoints), ``lti_bindings`` (the contexts this course is bound to), ``lti_users`` (an LMS user's roster id),
``lti_members`` (a context's members and their status) and ``lti_tokens`` (the token a launch showed a user).
The rules are grader/server/lti's and lti_services'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.student.store import tokens

if TYPE_CHECKING:
    import sqlite_utils


def contexts(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every context launches told us about, oldest first."""
    return list(db.query("SELECT * FROM lti_contexts ORDER BY rowid"))


def context(db: sqlite_utils.Database, key: str) -> dict[str, Any]:
    """One context's row ({} when unknown)."""
    return next(iter(db.query("SELECT * FROM lti_contexts WHERE key = ?", [key])), {})


def save_context(db: sqlite_utils.Database, row: dict[str, Any]) -> None:
    """Write a context's row (keyed by ``key``)."""
    db.table("lti_contexts").upsert(row, pk="key")


def bindings(db: sqlite_utils.Database, issuer: str, client_id: str) -> list[dict[str, Any]]:
    """The contexts this course is bound to on one registration, in the order bound (whole rows)."""
    return list(
        db.query("SELECT * FROM lti_bindings WHERE issuer = ? AND client_id = ? ORDER BY rowid", [issuer, client_id])
    )


def bind(
    db: sqlite_utils.Database, issuer: str, client_id: str, context_id: str, title: str, when: str, by: str
) -> None:
    """Bind this course to an LMS context (``by``: the launching instructor's LMS user id)."""
    db.table("lti_bindings").insert(
        {
            "issuer": issuer,
            "client_id": client_id,
            "context_id": context_id,
            "title": title,
            "bound_at": when,
            "bound_by": by,
        }
    )


def student_of_user(db: sqlite_utils.Database, issuer: str, sub: str) -> str | None:
    """The roster id an LMS user was matched to, or None."""
    return next(
        (r["student"] for r in db.query("SELECT student FROM lti_users WHERE issuer = ? AND sub = ?", [issuer, sub])),
        None,
    )


def unclaimed_by_email(db: sqlite_utils.Database, email: str) -> str | None:
    """The first roster id (by id) with this e-mail (case-insensitive) that no LMS user has claimed, or None."""
    return next(
        (
            r["student"]
            for r in db.query(
                "SELECT student FROM roster WHERE lower(email) = lower(?) AND student NOT IN "
                "(SELECT student FROM lti_users) ORDER BY student LIMIT 1",
                [email],
            )
        ),
        None,
    )


def link_user(db: sqlite_utils.Database, issuer: str, sub: str, student: str) -> None:
    """Match an LMS user to a roster id (the first match stays)."""
    db.execute("INSERT OR IGNORE INTO lti_users (issuer, sub, student) VALUES (?, ?, ?)", [issuer, sub, student])


def set_active_member(
    db: sqlite_utils.Database, context_key: str, sub: str, student: str, role: str, when: str
) -> None:
    """Record an active membership; a row already as it is stays untouched (no write)."""
    db.execute(
        "INSERT INTO lti_members (context_key, sub, student, role, status, updated_at) "
        "VALUES (?, ?, ?, ?, 'active', ?) ON CONFLICT (context_key, sub) DO UPDATE SET "
        "student = excluded.student, role = excluded.role, status = 'active', "
        "updated_at = excluded.updated_at WHERE (student, role, status) IS NOT "
        "(excluded.student, excluded.role, 'active')",
        [context_key, sub, student, role, when],
    )


def learner_statuses(db: sqlite_utils.Database, context_key: str) -> dict[str, str]:
    """A context's learners as recorded: LMS user id -> status (active, dropped)."""
    return {
        r["sub"]: r["status"]
        for r in db.query(
            "SELECT sub, status FROM lti_members WHERE context_key = ? AND role = 'learner'", [context_key]
        )
    }


def active_learners(db: sqlite_utils.Database, context_key: str | None = None) -> list[dict[str, Any]]:
    """The active learners (context_key, sub, student) of one context, or of all."""
    where, params = (" AND context_key = ?", [context_key]) if context_key is not None else ("", [])
    return list(
        db.query(
            f"SELECT context_key, sub, student FROM lti_members WHERE status = 'active' AND role = 'learner'{where}",
            params,
        )
    )


def drop_member(db: sqlite_utils.Database, context_key: str, sub: str, when: str) -> None:
    """Mark a member no longer listed by the LMS as dropped."""
    db.execute(
        "UPDATE lti_members SET status = 'dropped', updated_at = ? WHERE context_key = ? AND sub = ?",
        [when, context_key, sub],
    )


def dropped_students(db: sqlite_utils.Database) -> set[str]:
    """Students with no active membership in any context."""
    return {
        r["student"]
        for r in db.query("SELECT student FROM lti_members GROUP BY student HAVING sum(status = 'active') = 0")
    }


def learner_members(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every learner membership with its context's title (student, sub, status, role, title), active first."""
    return list(
        db.query(
            "SELECT m.student, m.sub, m.status, m.role, c.title FROM lti_members m JOIN lti_contexts c "
            "ON c.key = m.context_key WHERE m.role = 'learner' ORDER BY m.status DESC, m.student"
        )
    )


def replace_launch_token(
    db: sqlite_utils.Database, issuer: str, sub: str, digest: str, student: str, when: str
) -> None:
    """The token (its hash ``digest``) a launch showed an LMS user; the ones earlier launches showed are revoked."""
    for row in list(db.query("SELECT hash FROM lti_tokens WHERE issuer = ? AND sub = ?", [issuer, sub])):
        tokens.revoke(db, row["hash"])
    db.execute("DELETE FROM lti_tokens WHERE issuer = ? AND sub = ?", [issuer, sub])
    db.table("lti_tokens").insert(
        {"hash": digest, "student": student, "issuer": issuer, "sub": sub, "created_at": when}
    )
