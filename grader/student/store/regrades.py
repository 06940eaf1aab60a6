"""The ``regrade_requests`` table: a student's request about one upload's result and the instructor's answer
(grader/term/regrade.py holds the rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def open_exercises(db: sqlite_utils.Database, student: str) -> list[str]:
    """The exercise of each open request of a student."""
    return [
        r["exercise"]
        for r in db.query("SELECT exercise FROM regrade_requests WHERE student = ? AND status = 'open'", [student])
    ]


def insert(db: sqlite_utils.Database, row: dict[str, Any]) -> int:
    """File a request row; its id."""
    request_id = db.table("regrade_requests").insert(row).last_pk
    assert request_id is not None  # an insert sets last_pk
    return int(request_id)


def get(db: sqlite_utils.Database, request_id: int) -> dict[str, Any] | None:
    """One request row, or None."""
    rows = list(db.query("SELECT * FROM regrade_requests WHERE id = ?", [request_id]))
    return rows[0] if rows else None


def mark_answered(
    db: sqlite_utils.Database, request_id: int, reply: str, override: float | None, author: str, when: str
) -> None:
    """Record the answer to a request (``override``: the score it set, None when the graded score stands)."""
    db.execute(
        "UPDATE regrade_requests SET status = 'answered', reply = ?, override = ?, answered_by = ?, "
        "answered_at = ? WHERE id = ?",
        [reply, override, author, when, request_id],
    )


def listed(db: sqlite_utils.Database, student: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
    """Requests (of one student, or all; of one status, or all), oldest first."""
    clauses, params = [], []
    if student is not None:
        clauses.append("student = ?")
        params.append(student)
    if status is not None:
        clauses.append("status = ?")
        params.append(status)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return list(db.query(f"SELECT * FROM regrade_requests {where} ORDER BY id", params))
