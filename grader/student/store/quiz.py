"""The ``quiz_attempts`` table: one row per answered quiz question."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite_utils


def record_answer(
    db: sqlite_utils.Database,
    student: str,
    chapter: str,
    question: str,
    answer: str,
    correct: bool,
    params: dict[str, Any] | None,
    when: str,
) -> bool:
    """Insert one judged answer with its parameters (inside the caller's transaction); return whether it was the
    student's first answer to that question (stored as ``first_try``)."""
    earlier = db.execute(
        "SELECT 1 FROM quiz_attempts WHERE student = ? AND chapter = ? AND question = ? LIMIT 1",
        [student, chapter, str(question)],
    ).fetchone()
    db.table("quiz_attempts").insert(
        {
            "student": student,
            "chapter": chapter,
            "question": str(question),
            "answer": str(answer),
            "correct": int(bool(correct)),
            "answered_at": when,
            "params": json.dumps(params, sort_keys=True) if params else "",
            "first_try": int(earlier is None),
        }
    )
    return earlier is None


def attempts(db: sqlite_utils.Database, student: str | None = None) -> list[dict[str, Any]]:
    """Quiz answer rows, oldest first; ``correct`` as bool."""
    where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
    rows = list(db.query(f"SELECT * FROM quiz_attempts {where} ORDER BY id", params))
    for row in rows:
        row["correct"] = bool(row["correct"])
    return rows


def answer_summary(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Per student and quiz chapter: answers given (``answers``), the questions answered right at
    least once (``right``, a set) and the time of the latest answer (``last_at``)."""
    rows = list(
        db.query(
            "SELECT student, chapter, COUNT(*) AS answers, MAX(answered_at) AS last_at, "
            "GROUP_CONCAT(CASE WHEN correct THEN question END, char(31)) AS right "
            "FROM quiz_attempts GROUP BY student, chapter"
        )
    )
    for row in rows:
        row["right"] = set(row["right"].split("\x1f")) if row["right"] else set()
    return rows


def answer_rows(db: sqlite_utils.Database) -> list[dict[str, Any]]:
    """Every quiz answer's student, chapter, question, answer, correct (bool) and params (the drawn values'
    JSON, "" for a fixed question), oldest first."""
    rows = list(db.query("SELECT student, chapter, question, answer, correct, params FROM quiz_attempts ORDER BY id"))
    for row in rows:
        row["correct"] = bool(row["correct"])
    return rows
