"""The LTI grade passback's tables: ``lti_line_items`` (a column's line item on the LMS) and ``lti_scores`` (each
score to send, and its state: pending, queued, posted, refused, superseded). The rules are
grader/server/lti_services'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils

SAME_ITEM = "o.context_key = s.context_key AND o.sub = s.sub AND o.resource_id = s.resource_id"


def line_item_url(db: sqlite_utils.Database, context_key: str, resource_id: str) -> str | None:
    """The kept URL of a column's line item in a context, or None."""
    kept = next(
        iter(
            db.query(
                "SELECT url FROM lti_line_items WHERE context_key = ? AND resource_id = ?", [context_key, resource_id]
            )
        ),
        None,
    )
    return None if kept is None else str(kept["url"])


def keep_line_item(
    db: sqlite_utils.Database, context_key: str, resource_id: str, url: str, label: str, maximum: float
) -> None:
    """Keep a column's line item URL."""
    db.table("lti_line_items").upsert(
        {"context_key": context_key, "resource_id": resource_id, "url": url, "label": label, "score_maximum": maximum},
        pk=("context_key", "resource_id"),
    )


def fingerprint(db: sqlite_utils.Database) -> tuple[Any, ...]:
    """The newest attempt, quiz answer, override, membership and context change: what a counted score (and who
    gets one) depends on, read cheaply."""
    row = next(
        iter(
            db.query(
                "SELECT (SELECT max(id) FROM attempts) a, (SELECT max(id) FROM quiz_attempts) q, "
                "(SELECT max(id) FROM score_overrides) o, (SELECT count(*) FROM lti_members) n, "
                "(SELECT max(updated_at) FROM lti_members) m, (SELECT count(*) FROM lti_contexts) c, "
                "(SELECT max(updated_at) FROM lti_contexts) u"
            )
        )
    )
    return tuple(row.values())


def last_sent(db: sqlite_utils.Database, context_key: str, sub: str, resource_id: str) -> dict[str, Any] | None:
    """The latest score (score_given, score_maximum) of a line item for one user, not superseded; None."""
    return next(
        iter(
            db.query(
                "SELECT score_given, score_maximum FROM lti_scores WHERE context_key = ? AND sub = ? AND "
                "resource_id = ? AND status != 'superseded' ORDER BY id DESC LIMIT 1",
                [context_key, sub, resource_id],
            )
        ),
        None,
    )


def add(db: sqlite_utils.Database, row: dict[str, Any]) -> None:
    """A new score to send (``row``: pending), superseding the one still pending for the same line item and user."""
    db.execute(
        "UPDATE lti_scores SET status = 'superseded' WHERE context_key = ? AND sub = ? AND "
        "resource_id = ? AND status = 'pending'",
        [row["context_key"], row["sub"], row["resource_id"]],
    )
    db.table("lti_scores").insert(row)


def pending(db: sqlite_utils.Database, limit: int) -> list[dict[str, Any]]:
    """The scores not yet taken by the LMS (pending or queued), oldest first."""
    return list(db.query("SELECT * FROM lti_scores WHERE status IN ('pending', 'queued') ORDER BY id LIMIT ?", [limit]))


def refused(db: sqlite_utils.Database, limit: int) -> list[dict[str, Any]]:
    """The scores refused for good, newest first, those a newer score replaced left out."""
    return list(
        db.query(
            f"SELECT * FROM lti_scores s WHERE status = 'refused' AND NOT EXISTS (SELECT 1 FROM lti_scores o WHERE "
            f"{SAME_ITEM} AND o.id > s.id AND o.status != 'superseded') ORDER BY id DESC LIMIT ?",
            [limit],
        )
    )


def send_again(db: sqlite_utils.Database, score_id: int) -> None:
    """A refused score is pending again, due now."""
    db.execute(
        "UPDATE lti_scores SET status = 'pending', next_try = 0, missing_since = NULL "
        "WHERE id = ? AND status = 'refused'",
        [score_id],
    )


def counts(db: sqlite_utils.Database) -> dict[str, int]:
    """How many scores are in each status."""
    return {r["status"]: r["n"] for r in db.query("SELECT status, count(*) n FROM lti_scores GROUP BY status")}


def due(db: sqlite_utils.Database, now: float) -> list[dict[str, Any]]:
    """The pending scores due at ``now`` whose line item has no score on the queue, oldest first."""
    return list(
        db.query(
            f"SELECT * FROM lti_scores s WHERE status = 'pending' AND next_try <= ? AND NOT EXISTS "
            f"(SELECT 1 FROM lti_scores o WHERE {SAME_ITEM} AND o.status = 'queued') ORDER BY id",
            [now],
        )
    )


def mark_queued(db: sqlite_utils.Database, score_id: int, tries: int, task_id: str, now: float) -> None:
    """A pending score is on the queue as ``task_id`` (try ``tries``)."""
    db.execute(
        "UPDATE lti_scores SET status = 'queued', tries = ?, task_id = ?, queued_at = ? "
        "WHERE id = ? AND status = 'pending'",
        [tries, task_id, now, score_id],
    )


def queued(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """The scores on the queue, oldest first."""
    return list(db.query("SELECT * FROM lti_scores WHERE status = 'queued' ORDER BY id"))


def mark_posted(db: sqlite_utils.Database, score_id: int, when: str) -> None:
    """The LMS took a score."""
    db.execute("UPDATE lti_scores SET status = 'posted', posted_at = ?, error = '' WHERE id = ?", [when, score_id])


def still_waiting(db: sqlite_utils.Database, score_id: int, now: float) -> None:
    """A queued score's task is still waiting on the queue: counted as queued from ``now``."""
    db.execute("UPDATE lti_scores SET queued_at = ?, missing_since = NULL WHERE id = ?", [now, score_id])


def missing(db: sqlite_utils.Database, score_id: int, now: float) -> None:
    """A queued score's task is first seen missing from the queue at ``now``."""
    db.execute("UPDATE lti_scores SET missing_since = ? WHERE id = ?", [now, score_id])


def newer_waiting(db: sqlite_utils.Database, row: dict[str, Any]) -> bool:
    """Whether a newer score of the same line item and user waits (pending or queued)."""
    return bool(
        list(
            db.query(
                "SELECT 1 FROM lti_scores WHERE context_key = ? AND sub = ? AND resource_id = ? "
                "AND id > ? AND status IN ('pending', 'queued')",
                [row["context_key"], row["sub"], row["resource_id"], row["id"]],
            )
        )
    )


def set_outcome(db: sqlite_utils.Database, score_id: int, status: str, error: str, next_try: float) -> None:
    """A score not taken: ``status`` (pending again, refused, superseded), the error, when to try again."""
    db.execute(
        "UPDATE lti_scores SET status = ?, error = ?, next_try = ?, missing_since = NULL, "
        "tries = max(tries, 1) WHERE id = ? AND status IN ('pending', 'queued')",
        [status, error, next_try, score_id],
    )
