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
from grader.student.store import Store, jobs, overrides, regrades, results, utc_now

REASON_MAX = 1000
REPLY_MAX = 2000
MAX_OPEN = 10


def instructor_score(text: str, max_score: float, when_empty: str) -> float:
    """A score an instructor typed (an override, a regrade's answer): a finite number from 0 to ``max_score``.
    ValueError with the one-line reason otherwise (``when_empty`` says what leaving it empty does)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"the score '{text[:20]}' is not a number: write one from 0 to {round_score(max_score, 4)}, "
            f"or leave it empty to {when_empty}"
        ) from None
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
    rows = [r for r in jobs.done_of(store.db, student, job_id) if exercise in json.loads(r["selectors"])][:1]
    if not rows:
        if job_id is not None:
            raise RegradeError(
                f"there is no graded submission {job_id} of yours holding {exercise}: list yours with `grade progress`",
                404,
            )
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
        raise RegradeError('say why you ask for a regrade: `grade regrade EXERCISE "why"`')
    if len(reason) > REASON_MAX:
        raise RegradeError(f"the reason is {len(reason)} characters; keep it under {REASON_MAX}")
    with store.transaction() as db:  # BEGIN IMMEDIATE: two requests at once cannot both pass the checks
        upload = _upload(store, student, exercise, job_id)
        open_rows = regrades.open_exercises(db, student)
        if exercise in open_rows:
            raise RegradeError(
                f"you already have an open regrade request for {exercise}: wait for the answer "
                "(`grade progress` shows it)",
                409,
            )
        if len(open_rows) >= MAX_OPEN:
            raise RegradeError(f"you have {len(open_rows)} open regrade requests: wait for answers first", 429)
        found = results.in_force_id(db, upload["attempt_id"], exercise)
        if found is None:
            raise RegradeError(f"submission {upload['id']} did not grade {exercise}: name another", 404)
        row = {
            "student": student,
            "exercise": exercise,
            "job_id": upload["id"],
            "submission_id": found,
            "reason": reason,
            "created_at": utc_now(),
            "status": "open",
            "reply": None,
            "override": None,
            "answered_by": None,
            "answered_at": None,
        }
        row["id"] = regrades.insert(db, row)
    return row


def answer(store: Store, request_id: int, reply: str, score: str, author: str) -> dict[str, Any]:
    """Answer an open request with a reply and, when ``score`` is given, an override; the updated row."""
    reply = " ".join(str(reply).split())
    if not reply:
        raise RegradeError("an answer needs a reply to the student: write one and submit again")
    if len(reply) > REPLY_MAX:
        raise RegradeError(f"the reply is {len(reply)} characters; keep it under {REPLY_MAX}")
    with store.transaction() as db:
        request = regrades.get(db, request_id)
        if request is None:
            raise RegradeError(f"there is no regrade request {request_id}", 404)
        if request["status"] != "open":
            raise RegradeError(f"regrade request {request_id} was answered already", 409)
        value: float | None = None
        if str(score).strip():
            max_score = results.max_score_of(db, request["submission_id"])
            try:
                value = instructor_score(str(score), max_score, "reply only")
            except ValueError as exc:
                raise RegradeError(str(exc)) from None
            overrides.add(
                db,
                request["student"],
                request["exercise"],
                value,
                f"regrade request #{request_id}: {reply}",
                author,
                utc_now(),
            )
        regrades.mark_answered(db, request_id, reply, value, author, utc_now())
        answered = regrades.get(db, request_id)
        assert answered is not None  # the row read above, in this transaction
        return answered


def requests(store: Store, student: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
    """Regrade requests (of one student, or all; of one status, or all), oldest first."""
    return regrades.listed(store.db, student, status)


def public(row: dict[str, Any]) -> dict[str, Any]:
    """What the student sees of a request: everything but who answered."""
    return {
        k: row[k]
        for k in ("id", "exercise", "job_id", "reason", "created_at", "status", "reply", "override", "answered_at")
    }
