"""Regrade requests: a student asks about one upload's result; the instructor answers.

``grade regrade EXERCISE "why"`` (and ``POST /api/v1/regrades``) files a
request tied to the student's upload (the latest graded one holding that
exercise, or the one named): the server job, and the result in force for that
exercise (its ``submissions`` row). The dashboard lists the open requests with
that upload's report; the instructor answers with a reply, and optionally a
score, which is written as an override (the ``score_overrides`` log, comment
"regrade request #N: <reply>"), so the one counted-score rule counts it. The
student sees the answer in ``grade progress``.

Limits against a flood: one open request per student and exercise, at most
MAX_OPEN open requests per student, a reason of at most REASON_MAX characters.
"""

from __future__ import annotations

import json
import math
from typing import Any

from grader.student.engine import catalogue
from grader.student.errors import GraderError
from grader.student.feedback.report import round_score
from grader.student.store import Store, utc_now

REASON_MAX = 1000
REPLY_MAX = 2000
MAX_OPEN = 10


def instructor_score(text: str, max_score: float, when_empty: str) -> float:
    """A score an instructor typed (an override, a regrade's answer): a finite number from 0 to ``max_score``.
    ValueError with the one-line reason otherwise (``when_empty`` says what leaving it empty does)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"the score '{text[:20]}' is not a number: write one from 0 to {round_score(max_score, 4)}, "
                         f"or leave it empty to {when_empty}") from None
    if not math.isfinite(value) or not 0 <= value <= max_score:
        raise ValueError(f"the score must be from 0 to {round_score(max_score, 4)} (the exercise's max score)")
    return value


class RegradeError(GraderError):
    """A request that cannot be filed or answered (one line: what was wrong, what to do)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status the server answers with


def _upload(store: Store, student: str, exercise: str, job_id: int | None) -> dict[str, Any]:
    """The student's graded upload (job row) holding ``exercise``: the one named, else the latest."""
    params: list[Any] = [student]
    where = "student = ? AND status = 'done'"
    if job_id is not None:
        where += " AND id = ?"
        params.append(job_id)
    rows = [r for r in store.db.query(f"SELECT * FROM jobs WHERE {where} ORDER BY id DESC", params)
            if exercise in json.loads(r["selectors"])][:1]
    if not rows:
        if job_id is not None:
            raise RegradeError(f"there is no graded submission {job_id} of yours holding {exercise}: "
                               "list yours with `grade progress`", 404)
        raise RegradeError(f"you have no graded submission of {exercise} to ask about: submit it first", 404)
    return rows[0]


def file_request(store: Store, student: str, exercise: str, reason: str, job_id: int | None = None) -> dict[str, Any]:
    """File a regrade request about the student's upload of ``exercise``; the row written.

    RegradeError (with an HTTP status) for an unknown exercise, a missing or
    too long reason, no graded upload, an open request already filed for that
    exercise (409), or too many open requests (429).
    """
    if exercise not in catalogue.EXERCISES:
        try:
            ids = catalogue.resolve([str(exercise)[:100]])
        except GraderError as exc:
            raise RegradeError(str(exc)) from exc
        if len(ids) != 1:
            raise RegradeError(f"'{exercise}' names {len(ids)} exercises: ask about one, like {ids[0]}")
        exercise = ids[0]
    reason = " ".join(str(reason).split())
    if not reason:
        raise RegradeError("say why you ask for a regrade: `grade regrade EXERCISE \"why\"`")
    if len(reason) > REASON_MAX:
        raise RegradeError(f"the reason is {len(reason)} characters; keep it under {REASON_MAX}")
    with store.transaction() as db:  # BEGIN IMMEDIATE: two requests at once cannot both pass the checks
        upload = _upload(store, student, exercise, job_id)
        open_rows = list(db.query("SELECT exercise FROM regrade_requests WHERE student = ? AND status = 'open'",
                                  [student]))
        if any(r["exercise"] == exercise for r in open_rows):
            raise RegradeError(f"you already have an open regrade request for {exercise}: wait for the answer "
                               "(`grade progress` shows it)", 409)
        if len(open_rows) >= MAX_OPEN:
            raise RegradeError(f"you have {len(open_rows)} open regrade requests: wait for answers first", 429)
        found = list(db.query(
            "SELECT id FROM submissions WHERE attempt_id = ? AND exercise = ? AND superseded_by IS NULL",
            [upload["attempt_id"], exercise]))
        if not found:
            raise RegradeError(f"submission {upload['id']} did not grade {exercise}: name another", 404)
        row = {"student": student, "exercise": exercise, "job_id": upload["id"], "submission_id": found[0]["id"],
               "reason": reason, "created_at": utc_now(), "status": "open", "reply": None, "override": None,
               "answered_by": None, "answered_at": None}
        row["id"] = db.table("regrade_requests").insert(row).last_pk
    return row


def answer(store: Store, request_id: int, reply: str, score: str, author: str) -> dict[str, Any]:
    """Answer an open request with a reply and, when ``score`` is given, an override; the updated row."""
    reply = " ".join(str(reply).split())
    if not reply:
        raise RegradeError("an answer needs a reply to the student: write one and submit again")
    if len(reply) > REPLY_MAX:
        raise RegradeError(f"the reply is {len(reply)} characters; keep it under {REPLY_MAX}")
    with store.transaction() as db:
        rows = list(db.query("SELECT * FROM regrade_requests WHERE id = ?", [request_id]))
        if not rows:
            raise RegradeError(f"there is no regrade request {request_id}", 404)
        request = rows[0]
        if request["status"] != "open":
            raise RegradeError(f"regrade request {request_id} was answered already", 409)
        value: float | None = None
        if str(score).strip():
            max_score = next(iter(db.query("SELECT max_score FROM submissions WHERE id = ?",
                                           [request["submission_id"]])))["max_score"]
            try:
                value = instructor_score(str(score), max_score, "reply only")
            except ValueError as exc:
                raise RegradeError(str(exc)) from None
            db.table("score_overrides").insert({
                "student": request["student"], "exercise": request["exercise"], "score": value,
                "comment": f"regrade request #{request_id}: {reply}", "author": author, "created_at": utc_now(),
            })
        db.execute("UPDATE regrade_requests SET status = 'answered', reply = ?, override = ?, answered_by = ?, "
                   "answered_at = ? WHERE id = ?", [reply, value, author, utc_now(), request_id])
        return next(iter(db.query("SELECT * FROM regrade_requests WHERE id = ?", [request_id])))


def requests(store: Store, student: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
    """Regrade requests (of one student, or all; of one status, or all), oldest first."""
    clauses, params = [], []
    if student is not None:
        clauses.append("student = ?")
        params.append(student)
    if status is not None:
        clauses.append("status = ?")
        params.append(status)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return list(store.db.query(f"SELECT * FROM regrade_requests {where} ORDER BY id", params))


def public(row: dict[str, Any]) -> dict[str, Any]:
    """What the student sees of a request: everything but who answered."""
    return {k: row[k] for k in ("id", "exercise", "job_id", "reason", "created_at", "status", "reply", "override",
                                "answered_at")}
