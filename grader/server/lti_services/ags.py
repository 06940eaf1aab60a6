"""Assignment and Grade Services: line items, the score outbox and its poster thread.

**Assignment and Grade Services** (:class:`ScorePoster`, a thread of the
server beside the collector). What a context may receive follows its AGS
claim (:func:`ags_mode`): with the ``score`` scope and the ``lineitem``
scope over a ``lineitems`` URL, one line item per gradebook column of the
class report (each chapter's exercises, each chapter's quiz: the columns of
the Canvas/Moodle CSV exports), found by its ``resourceId``
(``exercises:<chapter>``, ``quiz:<chapter>``, every page of the container
read) or created once, and kept in ``lti_line_items``; with the ``score``
scope and a single ``lineitem`` (Moodle's "grade sync only": the tool may not
make columns), the course total in that one line item; without the ``score``
scope, nothing. Each tick:

1. *scan*: when anything that counts changed (a recorded attempt, a quiz
   answer, an override, a new member: a cheap fingerprint of the tables),
   every learner's counted score per column is compared with the last one
   queued for them; a change becomes an outbox row in ``lti_scores``
   (``pending``, with its timestamp). A pending row not yet sent is
   ``superseded`` by a newer one for the same learner and line item.
2. *send*: each pending row due (``next_try``) gets its line item and a
   service token (here, in the server), then goes on the grading queue as
   the Huey task ``post_score`` (grader/queue/jobs.py) with id
   ``score-<row>-try-<n>``; the worker POSTs it to ``<line item>/scores``.
   One score per learner and line item is on its way at a time: a newer one
   waits until the older one's result is in, so the LMS always receives a
   learner's scores in order and the last one it receives is the newest.
   An LMS that cannot be reached, a 5xx, a 401, 408 or 429 leave the row
   pending, with the error and a back-off (2^tries s, at most 5 minutes).
3. *collect*: a task's result marks its row ``posted``; a refusal that
   sending again cannot change (any other 4xx: a score out of order, a line
   item gone, a scope not granted) marks it ``refused``, a final state the
   dashboard shows with the LMS's answer and never retries (its button
   **Send the refused scores again** does, once the cause is fixed); any
   other failure makes it pending again with the error. An older row that
   failed while a newer one waits is ``superseded`` instead. A row queued
   longer than ``lost_after`` seconds with no result and not waiting in the
   queue at two looks ``lost_after`` apart (a Redis restarted without
   persistence lost it, or a worker died with it) is sent again.
   The score is in the course database until the LMS has taken it: none is
   lost while the LMS or the queue is down.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse, urlunparse

import httpx

from grader.queue.jobs import Queue, open_queue
from grader.server import lti
from grader.server.lti_services.connector import (
    LINEITEM_TYPE,
    LINEITEMS_TYPE,
    MAX_BACKOFF_S,
    SCOPE_LINEITEM,
    SCOPE_SCORE,
    TOTAL,
    ServiceConnector,
    ServiceError,
    contexts,
    is_final,
    json_of,
    paged,
    platform_of,
)
from grader.student.course import Course
from grader.student.store import Store, lti_courses, lti_scores, utc_now
from grader.term import class_report, standing

LOG = logging.getLogger("normgrade.lti")


# --- line items and scores (AGS) --------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A gradebook column as one line item: its resourceId, label, points possible and points per student."""

    resource_id: str
    label: str
    maximum: float
    points: dict[str, float]


def columns(store: Store, course: Course, quizzes: list[Any]) -> list[Column]:
    """The class report's gradebook columns (the CSV exports'), each with a stable resourceId."""
    report = class_report.build(store, quizzes=quizzes, course=course, with_mistakes=False, with_items=False)
    ids = [f"exercises:{g.name}" for g in report.groups] + [f"quiz:{q.chapter}" for q in report.quizzes]
    found = class_report.gradebook_columns(report)
    assert len(ids) == len(found), "gradebook columns are the groups, then the quizzes"
    return [Column(rid, c.title, float(c.points_possible), dict(c.points)) for rid, c in zip(ids, found, strict=True)]


def total_column(course: Course, every: list[Column]) -> Column:
    """The course total as one column (the points of every column added): for a single line item."""
    points: dict[str, float] = {}
    for column in every:
        for student, value in column.points.items():
            points[student] = points.get(student, 0.0) + value
    return Column(TOTAL, course.name, sum(c.maximum for c in every), points)


def scopes_of(context: dict[str, Any]) -> list[str]:
    try:
        scopes = json.loads(context.get("scopes") or "[]")
    except ValueError:
        return []
    return [str(s) for s in scopes] if isinstance(scopes, list) else []


def ags_mode(context: dict[str, Any]) -> str:
    """What a context may receive, from its AGS claim: "columns", "single" (the total in its one line item) or "none".

    "columns" needs the ``score`` and ``lineitem`` scopes and the
    ``lineitems`` URL (the tool makes and finds its columns); "single" the
    ``score`` scope and a ``lineitem`` URL (Moodle's grade sync only, or a
    platform granting no ``lineitem`` scope); "none" otherwise.
    """
    scopes = scopes_of(context)
    if SCOPE_SCORE not in scopes:
        return "none"
    if SCOPE_LINEITEM in scopes and context.get("lineitems_url"):
        return "columns"
    return "single" if context.get("lineitem_url") else "none"


def token_scopes(context: dict[str, Any]) -> list[str]:
    """The scopes a service token for posting to this context asks for: only what the claim granted."""
    return [SCOPE_LINEITEM, SCOPE_SCORE] if ags_mode(context) == "columns" else [SCOPE_SCORE]


def scores_url(lineitem_url: str) -> str:
    """``<line item>/scores``, the line item's query string kept (AGS 3.4)."""
    parts = urlparse(lineitem_url)
    return urlunparse(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def ensure_line_item(
    store: Store,
    connector: ServiceConnector,
    platform: lti.Platform,
    context: dict[str, Any],
    column_id: str,
    label: str,
    maximum: float,
) -> str:
    """The URL of the line item a score of this column goes to: the context's single one, or the column's own:
    kept, found on the platform (every page of the container), or created once."""
    if ags_mode(context) == "single":
        return str(context["lineitem_url"])
    kept = lti_scores.line_item_url(store.db, context["key"], column_id)
    if kept is not None:
        return kept
    token = connector.token(platform, [SCOPE_LINEITEM, SCOPE_SCORE])
    base = context["lineitems_url"]
    separator = "&" if urlparse(base).query else "?"
    items = paged(
        connector,
        base + separator + urlencode({"resource_id": column_id}),
        token,
        LINEITEMS_TYPE,
        "items",
        f"the line items of {platform.name}",
    )
    url = next((i["id"] for i in items if i.get("resourceId") == column_id and isinstance(i.get("id"), str)), None)
    if url is None:
        try:
            answer = connector.client.post(
                base,
                headers={"Authorization": f"Bearer {token}", "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE},
                content=json.dumps(
                    {"scoreMaximum": maximum, "label": label, "resourceId": column_id, "tag": "normgrade"}
                ),
            )
        except httpx.HTTPError as exc:
            raise ServiceError(f"the line items of {platform.name} cannot be reached ({type(exc).__name__})") from exc
        created = json_of(answer, f"creating a line item in {platform.name}")
        url = created.get("id")
        if not isinstance(url, str):
            raise ServiceError(f"{platform.name} created a line item without an id")
        LOG.info("LTI: line item %r created in %s: %r", column_id, platform.name, url)
    with store.transaction() as db:
        lti_scores.keep_line_item(db, context["key"], column_id, url, label, maximum)
    return url


def score_payload(row: dict[str, Any]) -> dict[str, Any]:
    """The AGS score of an outbox row (IMS AGS 2.0, score publish service)."""
    full = row["score_given"] >= row["score_maximum"] > 0
    return {
        "userId": row["sub"],
        "scoreGiven": row["score_given"],
        "scoreMaximum": row["score_maximum"],
        "activityProgress": "Completed" if full else "Submitted",
        "gradingProgress": "FullyGraded",
        "timestamp": row["timestamp"],
    }


def score_task_id(row_id: int, attempt: int) -> str:
    return f"score-{row_id}-try-{attempt}"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def fingerprint(store: Store) -> tuple[Any, ...]:
    """What a counted score depends on, cheaply: the newest attempt, answer, override and membership change."""
    return lti_scores.fingerprint(store.db)


def posted_columns(store: Store, course: Course, quizzes: list[Any], now: datetime) -> list[Column]:
    """The columns the LMS may receive at ``now``: every column but an exam chapter's whose score is held until
    its ``release_feedback`` (grader/term/standing.py: what its students may see, the LMS may receive)."""
    shown = standing.visible_chapters(course, now)
    held = {f"exercises:{c.name}" for c in course.chapters if c.name not in shown}
    return [c for c in columns(store, course, quizzes) if c.resource_id not in held]


def scan(store: Store, course: Course, quizzes: list[Any], config: lti.LtiConfig, now: datetime | None = None) -> int:
    """Queue an outbox row for each learner's line item whose counted score changed; returns how many.
    A held exam chapter's score is not sent before its release (:func:`posted_columns`)."""
    by_context = {c["key"]: c for c in contexts(store, config) if ags_mode(c) != "none"}
    learners = [r for r in lti_courses.active_learners(store.db) if r["context_key"] in by_context]
    if not learners:
        return 0
    every = posted_columns(store, course, quizzes, now or datetime.now(timezone.utc))
    per_mode = {"columns": every, "single": [total_column(course, every)]}
    made = 0
    stamp = now_iso()
    for learner in learners:
        for column in per_mode[ags_mode(by_context[learner["context_key"]])]:
            given = round(float(column.points.get(learner["student"], 0.0)), 6)
            last = lti_scores.last_sent(store.db, learner["context_key"], learner["sub"], column.resource_id)
            if last is None and given == 0:
                continue  # nothing earned, nothing sent yet: not a change
            if last is not None and last["score_given"] == given and last["score_maximum"] == column.maximum:
                continue
            with store.transaction() as db:
                lti_scores.add(
                    db,
                    {
                        "context_key": learner["context_key"],
                        "student": learner["student"],
                        "sub": learner["sub"],
                        "resource_id": column.resource_id,
                        "label": column.label,
                        "score_given": given,
                        "score_maximum": column.maximum,
                        "timestamp": stamp,
                        "status": "pending",
                        "tries": 0,
                        "next_try": 0.0,
                        "error": "",
                    },
                )
            made += 1
    return made


def pending_scores(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    """The scores not yet taken by the LMS (pending or queued), oldest first."""
    return lti_scores.pending(store.db, limit)


def refused_scores(store: Store, limit: int = 100) -> list[dict[str, Any]]:
    """The scores the LMS refused for good (final state), newest first, those a newer score replaced left out."""
    return lti_scores.refused(store.db, limit)


def send_refused_again(store: Store) -> int:
    """Make the refused scores (no newer one for their line item) pending again, due now; how many."""
    ids = [r["id"] for r in refused_scores(store, limit=100_000)]
    with store.transaction() as db:
        for row_id in ids:
            lti_scores.send_again(db, row_id)
    return len(ids)


def score_counts(store: Store) -> dict[str, int]:
    return lti_scores.counts(store.db)


class ScorePoster(threading.Thread):
    """The server's thread that turns counted-score changes into AGS posts through the queue (module docstring)."""

    def __init__(
        self,
        db_path: Path,
        queue_url: str,
        course: Course,
        quizzes: list[Any],
        interval: float = 1.0,
        lost_after: float = 120.0,
    ) -> None:
        super().__init__(name="normgrade-lti-scores", daemon=True)
        self.db_path = db_path
        self.queue_url = queue_url
        self.course = course
        self.config = lti.platforms_of(course)
        self.quizzes = quizzes
        self.interval = interval
        self.lost_after = lost_after
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.seen: tuple[Any, ...] | None = None
        self.tokens_refused = False  # an LMS answered 401 to a post: ask for fresh service tokens

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def run(self) -> None:
        store = Store.open(self.db_path)  # in the serving process: the one open path, no lock dropped
        queue = open_queue(self.queue_url)
        connector = ServiceConnector(store)
        try:
            while not self.stopping.is_set():
                try:
                    self.tick(store, queue, connector)
                except Exception:  # the next tick tries again; nothing is marked posted without a result
                    LOG.exception("LTI score tick failed; retrying")
                self.wake.wait(self.interval)
                self.wake.clear()
        finally:
            connector.close()
            store.close()

    def tick(self, store: Store, queue: Queue, connector: ServiceConnector, now: float | None = None) -> None:
        """One pass: scan for changes, collect results, send what is due."""
        now = time.time() if now is None else now
        mark = (fingerprint(store), frozenset(standing.visible_chapters(self.course, datetime.now(timezone.utc))))
        if mark != self.seen:
            scan(store, self.course, self.quizzes, self.config)
            self.seen = mark
        self.collect(store, queue, now)
        if self.tokens_refused:
            connector.cache.clear()
            self.tokens_refused = False
        self.send(store, queue, connector, now)

    def send(self, store: Store, queue: Queue, connector: ServiceConnector, now: float) -> None:
        """Each pending row due whose line item has no older score on its way: its line item, a token, the queue."""
        by_key = {c["key"]: c for c in contexts(store, self.config)}
        failed: set[str] = set()  # a context whose LMS failed this tick is not asked again until the next
        rows = lti_scores.due(store.db, now)
        for row in rows:
            context = by_key.get(row["context_key"])
            if context is None or row["context_key"] in failed:
                continue
            try:
                platform = platform_of(self.config, context)
                url = ensure_line_item(
                    store, connector, platform, context, row["resource_id"], row["label"], row["score_maximum"]
                )
                token = connector.token(platform, token_scopes(context))
            except ServiceError as exc:
                if not exc.final:
                    failed.add(row["context_key"])
                self._retry_later(store, row, str(exc), now, final=exc.final)
                continue
            attempt = int(row["tries"]) + 1
            tid = score_task_id(row["id"], attempt)
            queue.enqueue_score(tid, scores_url(url), token, score_payload(row))
            with store.transaction() as db:
                lti_scores.mark_queued(db, row["id"], attempt, tid, now)

    def collect(self, store: Store, queue: Queue, now: float) -> None:
        waiting: set[str] | None = None  # the queue's waiting tasks, read once a tick and only when needed
        for row in lti_scores.queued(store.db):
            result = queue.result(row["task_id"])
            if result is None:
                if now - float(row["queued_at"] or 0) > self.lost_after:
                    waiting = queue.pending_ids() if waiting is None else waiting
                    self._look_for_lost(store, row, row["task_id"] in waiting, now)
                continue
            if result.get("ok"):
                with store.transaction() as db:
                    lti_scores.mark_posted(db, row["id"], utc_now())
            else:
                status = result.get("status")
                self.tokens_refused = self.tokens_refused or status == 401
                self._retry_later(
                    store,
                    row,
                    str(result.get("error") or "the LMS refused the score"),
                    now,
                    final=is_final(status if isinstance(status, int) else None),
                )
            queue.forget(row["task_id"])

    def _look_for_lost(self, store: Store, row: dict[str, Any], waiting: bool, now: float) -> None:
        """A task queued long ago with no result: still waiting (look later), or gone (lost: send again).

        Gone means neither waiting nor done at two looks ``lost_after`` apart
        (a task a worker is posting right now is neither for a moment).
        """
        if waiting:
            with store.transaction() as db:
                lti_scores.still_waiting(db, row["id"], now)
        elif row["missing_since"] is None:
            with store.transaction() as db:
                lti_scores.missing(db, row["id"], now)
        elif now - float(row["missing_since"]) > self.lost_after:
            self._retry_later(store, row, "the queue lost the task (no result): sent again", now, backoff=False)

    def _retry_later(
        self, store: Store, row: dict[str, Any], error: str, now: float, backoff: bool = True, final: bool = False
    ) -> None:
        """A score not taken: superseded when a newer one for its line item waits, refused when final, else
        pending again after the back-off."""
        delay = min(MAX_BACKOFF_S, 2.0 ** max(int(row["tries"]), 0)) if backoff else 0.0
        with store.transaction() as db:
            status = "superseded" if lti_scores.newer_waiting(db, row) else "refused" if final else "pending"
            lti_scores.set_outcome(db, row["id"], status, error[:500], now + delay)
        if status == "refused":
            LOG.warning(
                "LTI score %s for %r refused by the LMS for good (%r): shown on the dashboard, not sent again",
                row["id"],
                row["student"],
                error,
            )
        elif status == "pending":
            LOG.warning(
                "LTI score %s for %r not posted (%r); retrying in %.0f s", row["id"], row["student"], error, delay
            )
