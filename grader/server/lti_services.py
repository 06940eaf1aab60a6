"""LTI Advantage services: the service token, NRPS (the roster) and AGS (line items and scores).

**The service token** (:class:`ServiceConnector`): OAuth 2 client credentials
with a JWT client assertion (IMS Security Framework 4.1): ``iss`` = ``sub`` =
our client id, ``aud`` = the platform's token URL, a fresh ``jti``, signed by
the tool's current key (grader/server/lti.py); the access token is cached
per platform and scopes until a minute before it expires. Only scopes the
launch's AGS claim granted are asked for.

**Names and Role Provisioning** (:func:`sync_roster`, ``grade roster sync``,
``POST /api/v1/roster/sync`` and the dashboard's button): for each course
context this course is bound to (``lti.bound_contexts``), the membership
container is read (every page, ``Link: rel="next"``). A member's status comes
first: one listed ``Inactive`` (or ``Deleted``) is never matched nor added,
and is marked ``dropped`` when they were active. Each active learner (by the
context role alone, ``lti.context_role``) is matched to the roster by
``lti.match_member``: by ``(iss, sub)``, else by e-mail (case-insensitive),
else a new roster row (the id is the e-mail when it is a valid id, else
``lti-<hash>``) with a token; members no longer listed are marked ``dropped``
in ``lti_members``. A member recorded as they are is not written again, so a
sync that finds nothing new reports "no change" and touches no row (nor the
score poster's fingerprint). Nothing is deleted: attempts, tokens and roster
rows stay.

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

import asyncio
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse, urlunparse

import httpx
from joserfc import jwt

from grader.term import class_report, standing
from grader.server import auth, limits, lti
from grader.queue.jobs import Queue, open_queue
from grader.server import instructor
from grader.server.roster import RosterEntry
from grader.student.course import Course
from grader.student.errors import GraderError
from grader.student.store import Store, lti_courses, lti_launches, lti_scores, utc_now
from grader.student.store import roster as store_roster

LOG = logging.getLogger("normgrade.lti")

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_LINEITEM_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
MEMBERSHIP_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 100           # pages of a container (NRPS members, AGS line items) followed at most
RETRIED_4XX = (401, 408, 429)  # client errors that sending again can cure (a token expired, a timeout, a rate limit)
TOTAL = "total"           # the resourceId of the course total (a context with a single line item)
HTTP_TIMEOUT_S = 15.0
MAX_BACKOFF_S = 300.0


class ServiceError(GraderError):
    """An LMS service call failed (one line: which call, what came back, what to do); ``status`` when it answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def final(self) -> bool:
        """Whether sending the same request again cannot help (:func:`is_final`)."""
        return is_final(self.status)


def is_final(status: int | None) -> bool:
    """A 4xx answer that sending the same request again cannot change (not 401, 408 or 429)."""
    return status is not None and 400 <= status < 500 and status not in RETRIED_4XX


# --- the service token ------------------------------------------------------------------------------


class ServiceConnector:
    """Access tokens from the platforms' token endpoints (client credentials, JWT assertion), cached."""

    def __init__(self, store: Store, client: httpx.Client | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.client = client or httpx.Client(timeout=HTTP_TIMEOUT_S)
        self.clock = clock
        self.cache: dict[tuple[str, str, str], tuple[float, str]] = {}

    def assertion(self, platform: lti.Platform) -> str:
        """The signed client assertion for one token request (signed by the key that signs now)."""
        key = lti.signing_key(self.store, self.clock())
        now = int(self.clock())
        claims = {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.assertion_audience,
                  "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(16)}
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)

    def token(self, platform: lti.Platform, scopes: list[str]) -> str:
        """An access token for ``scopes`` (cached until a minute before it expires); ServiceError on failure."""
        scope = " ".join(sorted(scopes))
        key = (platform.issuer, platform.client_id, scope)
        cached = self.cache.get(key)
        if cached is not None and cached[0] > time.time() + 60:
            return cached[1]
        try:
            answer = self.client.post(platform.token_url, data={
                "grant_type": "client_credentials",
                "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                "client_assertion": self.assertion(platform), "scope": scope,
            })
        except httpx.HTTPError as exc:
            raise ServiceError(f"the token endpoint of {platform.name} ({platform.token_url}) cannot be reached "
                               f"({type(exc).__name__})") from exc
        doc = _json(answer, f"the token endpoint of {platform.name}")
        token = doc.get("access_token")
        if not isinstance(token, str) or not token:
            raise ServiceError(f"the token endpoint of {platform.name} gave no access_token: check the tool's "
                               "JWKS URL and scopes in the LMS")
        expires = doc.get("expires_in", 3600)
        self.cache[key] = (time.time() + (float(expires) if isinstance(expires, (int, float)) else 3600.0), token)
        return token

    def close(self) -> None:
        self.client.close()


def _json(answer: httpx.Response, what: str) -> dict[str, Any]:
    if answer.status_code >= 400:
        raise ServiceError(f"{what} answered {answer.status_code}: {' '.join(answer.text[:200].split())}",
                           answer.status_code)
    try:
        doc = answer.json()
    except ValueError as exc:
        raise ServiceError(f"{what} did not answer JSON") from exc
    if not isinstance(doc, (dict, list)):
        raise ServiceError(f"{what} answered JSON that is not an object")
    return doc if isinstance(doc, dict) else {"items": doc}


def _platform(config: lti.LtiConfig, context: dict[str, Any]) -> lti.Platform:
    try:
        return config.find(context["issuer"], context["client_id"])
    except lti.LaunchRefused as exc:
        raise ServiceError(f"the context '{context['title']}' belongs to a platform no longer in course.toml "
                           f"({exc.reason})") from exc


def contexts(store: Store, config: lti.LtiConfig | None = None) -> list[dict[str, Any]]:
    """The course contexts launches told us about, oldest first; with ``config``, only those this course is
    bound to (``lti.bound_contexts``: a context no longer listed gets no roster sync and no score)."""
    rows = lti_courses.contexts(store.db)
    if config is None:
        return rows
    bound: dict[tuple[str, str], set[str]] = {}
    for platform in config.platforms:
        bound[(platform.issuer, platform.client_id)] = set(lti.bound_contexts(store, platform))
    return [r for r in rows if r["context_id"] in bound.get((r["issuer"], r["client_id"]), set())]


def paged(connector: ServiceConnector, url: str, token: str, accept: str, key: str,
          what: str) -> list[dict[str, Any]]:
    """Every item of a container, following ``Link: rel="next"`` (NRPS members, AGS line items)."""
    items: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        try:
            answer = connector.client.get(url, headers={"Authorization": f"Bearer {token}", "Accept": accept})
        except httpx.HTTPError as exc:
            raise ServiceError(f"{what} cannot be reached ({type(exc).__name__})") from exc
        doc = _json(answer, what)
        page = doc.get(key, [])
        items += [m for m in page if isinstance(m, dict)] if isinstance(page, list) else []
        following = answer.links.get("next", {}).get("url")
        if not following:
            return items
        url = following
    raise ServiceError(f"{what} gave more than {MAX_PAGES} pages")


# --- the roster (NRPS) ------------------------------------------------------------------------------


@dataclass
class SyncResult:
    """What a roster sync did (the same for the command, the API and the dashboard)."""

    contexts: int = 0
    members: int = 0
    new_students: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)  # dropped before, active again
    tokens: list[tuple[RosterEntry, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        changes = (f"{len(self.new_students)} new student(s), {len(self.dropped)} dropped"
                   + (f", {len(self.returned)} back" if self.returned else "")
                   if self.new_students or self.dropped or self.returned else "no change")
        return (f"{self.members} members in {self.contexts} course(s): {changes}" +
                (f"; {len(self.errors)} error(s): " + "; ".join(self.errors) if self.errors else ""))

    def to_json(self) -> dict[str, Any]:
        """The API's answer (``POST /api/v1/roster/sync``): the counts, the lists, the new tokens."""
        return {"contexts": self.contexts, "members": self.members, "new_students": self.new_students,
                "dropped": self.dropped, "returned": self.returned, "errors": self.errors,
                "summary": self.summary(),
                "tokens": [{"id": e.id, "name": e.name, "email": e.email, "token": t} for e, t in self.tokens]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SyncResult":
        def strings(key: str) -> list[str]:
            value = doc.get(key)
            return [str(v) for v in value] if isinstance(value, list) else []

        tokens = [(RosterEntry(str(t.get("id", "")), str(t.get("name", "")), str(t.get("email", ""))),
                   str(t.get("token", ""))) for t in doc.get("tokens", []) if isinstance(t, dict)]
        return cls(int(doc.get("contexts", 0)), int(doc.get("members", 0)), strings("new_students"),
                   strings("dropped"), strings("returned"), tokens, strings("errors"))


def membership(connector: ServiceConnector, platform: lti.Platform, url: str) -> list[dict[str, Any]]:
    """Every member of a context (following ``Link: rel="next"`` pages)."""
    token = connector.token(platform, [SCOPE_NRPS])
    return paged(connector, url, token, MEMBERSHIP_TYPE, "members", f"the membership service of {platform.name}")


def sync_roster(store: Store, config: lti.LtiConfig, connector: ServiceConnector | None = None) -> SyncResult:
    """Pull every bound context's membership into the roster (module docstring); errors per context are kept."""
    own = connector is None
    connector = connector or ServiceConnector(store)
    result = SyncResult()
    try:
        for context in contexts(store, config):
            if not context["memberships_url"]:
                continue
            try:
                platform = _platform(config, context)
                members = membership(connector, platform, context["memberships_url"])
            except ServiceError as exc:
                result.errors.append(f"{context['title'] or context['context_id']}: {exc}")
                continue
            result.contexts += 1
            _sync_context(store, platform, context["key"], members, result)
    finally:
        if own:
            connector.close()
    return result


def _sync_context(store: Store, platform: lti.Platform, key: str, members: list[dict[str, Any]],
                  result: SyncResult) -> None:
    """One context's members into the roster: the status first, then the match (module docstring)."""
    recorded = lti_courses.learner_statuses(store.db, key)
    active: set[str] = set()
    for member in members:
        sub = str(member.get("user_id", ""))
        roles = [str(r) for r in member.get("roles", []) if isinstance(r, str)]
        if not sub or lti.context_role(roles) != "learner":
            continue
        result.members += 1
        if str(member.get("status", "Active")) != "Active":
            continue  # an inactive member is never added nor matched: below, they are dropped if they were active
        name, email = str(member.get("name", "") or ""), str(member.get("email", "") or "")
        known = store_roster.ids(store.db)
        student = lti.match_member(store, platform.issuer, key, sub, email, name, "learner", issue_token=False)
        if student not in known:
            result.new_students.append(student)
            with store.transaction() as db:
                result.tokens.append((RosterEntry(student, name, email), auth.issue(db, student, "student")))
        elif recorded.get(sub) == "dropped":
            result.returned.append(student)
        active.add(sub)
    for row in lti_courses.active_learners(store.db, key):
        if row["sub"] not in active:
            with store.transaction() as db:
                lti_courses.drop_member(db, key, row["sub"], utc_now())
            result.dropped.append(row["student"])


def dropped_students(store: Store) -> set[str]:
    """Students an LMS no longer lists in any of their contexts (marked by the roster sync)."""
    return lti_courses.dropped_students(store.db)


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


def ensure_line_item(store: Store, connector: ServiceConnector, platform: lti.Platform, context: dict[str, Any],
                     column_id: str, label: str, maximum: float) -> str:
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
    items = paged(connector, base + separator + urlencode({"resource_id": column_id}), token, LINEITEMS_TYPE,
                  "items", f"the line items of {platform.name}")
    url = next((i["id"] for i in items if i.get("resourceId") == column_id and isinstance(i.get("id"), str)), None)
    if url is None:
        try:
            answer = connector.client.post(base, headers={"Authorization": f"Bearer {token}",
                                                          "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE},
                                           content=json.dumps({"scoreMaximum": maximum, "label": label,
                                                               "resourceId": column_id, "tag": "normgrade"}))
        except httpx.HTTPError as exc:
            raise ServiceError(f"the line items of {platform.name} cannot be reached ({type(exc).__name__})") from exc
        created = _json(answer, f"creating a line item in {platform.name}")
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
        "userId": row["sub"], "scoreGiven": row["score_given"], "scoreMaximum": row["score_maximum"],
        "activityProgress": "Completed" if full else "Submitted", "gradingProgress": "FullyGraded",
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


def scan(store: Store, course: Course, quizzes: list[Any], config: lti.LtiConfig,
         now: datetime | None = None) -> int:
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
                lti_scores.add(db, {
                    "context_key": learner["context_key"], "student": learner["student"], "sub": learner["sub"],
                    "resource_id": column.resource_id, "label": column.label, "score_given": given,
                    "score_maximum": column.maximum, "timestamp": stamp, "status": "pending", "tries": 0,
                    "next_try": 0.0, "error": "",
                })
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

    def __init__(self, db_path: Path, queue_url: str, course: Course, quizzes: list[Any],
                 interval: float = 1.0, lost_after: float = 120.0) -> None:
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
                platform = _platform(self.config, context)
                url = ensure_line_item(store, connector, platform, context, row["resource_id"], row["label"],
                                       row["score_maximum"])
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
                self._retry_later(store, row, str(result.get("error") or "the LMS refused the score"), now,
                                  final=is_final(status if isinstance(status, int) else None))
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

    def _retry_later(self, store: Store, row: dict[str, Any], error: str, now: float, backoff: bool = True,
                     final: bool = False) -> None:
        """A score not taken: superseded when a newer one for its line item waits, refused when final, else
        pending again after the back-off."""
        delay = min(MAX_BACKOFF_S, 2.0 ** max(int(row["tries"]), 0)) if backoff else 0.0
        with store.transaction() as db:
            status = "superseded" if lti_scores.newer_waiting(db, row) else "refused" if final else "pending"
            lti_scores.set_outcome(db, row["id"], status, error[:500], now + delay)
        if status == "refused":
            LOG.warning("LTI score %s for %r refused by the LMS for good (%r): shown on the dashboard, not sent "
                        "again", row["id"], row["student"], error)
        elif status == "pending":
            LOG.warning("LTI score %s for %r not posted (%r); retrying in %.0f s", row["id"], row["student"], error,
                        delay)


# --- the application's side ---------------------------------------------------------------------------


def install(app: Any) -> None:
    """Give the application its LTI settings and signing key (called by create_app; the store made the tables)."""
    st = app.state.normgrade
    app.state.lti_config = lti.platforms_of(st.config.course)
    app.state.lti_jwks = lti.JwksCache()
    app.state.lti_logins = limits.PerClient(lti.LOGINS_PER_CLIENT, lti.LOGIN_WINDOW_S)
    with Store.open(st.config.db_path) as store:
        lti.signing_key(store)


def start_poster(app: Any) -> ScorePoster | None:
    """Start the score poster when [lti] names platforms (the lifespan stops it); None otherwise."""
    st = app.state.normgrade
    if not app.state.lti_config.platforms or not getattr(app.state, "lti_poster_enabled", True):
        app.state.lti_poster = None
        return None
    poster = ScorePoster(st.config.db_path, st.config.queue_url, st.config.course, st.quizzes)
    poster.start()
    app.state.lti_poster = poster
    return poster


async def sync_in_thread(app: Any) -> SyncResult:
    """The roster sync on a connection of its own in a worker thread (the LMS may be slow: the loop goes on)."""
    st = app.state.normgrade

    def run() -> SyncResult:
        with Store.open(st.config.db_path) as store:
            return sync_roster(store, app.state.lti_config)

    result = await asyncio.to_thread(run)
    LOG.warning("roster sync: %s", result.summary())
    return result


# --- the dashboard's LMS page -------------------------------------------------------------------------


def dashboard_context(store: Store, config: lti.LtiConfig) -> dict[str, Any]:
    """What /instructor/lti shows: platforms, bound courses, members, waiting and refused scores, keys, refusals."""
    members = lti_courses.learner_members(store.db)
    bindings = []
    for platform in config.platforms:
        rows = {r["context_id"]: r for r in lti_courses.bindings(store.db, platform.issuer, platform.client_id)}
        for context_id, title in lti.bound_contexts(store, platform).items():
            row = rows.get(context_id, {})
            how = ("listed in course.toml" if platform.contexts else
                   f"bound by the first instructor launch, {row.get('bound_at', '')}")
            bindings.append({"platform": platform.name, "context_id": context_id,
                             "title": title or next((c["title"] for c in contexts(store) if
                                                     c["context_id"] == context_id and c["issuer"] == platform.issuer),
                                                    ""), "how": how})
    now = time.time()
    keys = [{**k, "next": k["signs_from"] > now,
             "starts": datetime.fromtimestamp(k["signs_from"], timezone.utc).isoformat(timespec="seconds")}
            for k in lti.published_keys(store)]
    return {
        "platforms": config.platforms, "contexts": contexts(store, config), "bindings": bindings,
        "members": members, "pending": pending_scores(store, 100), "refused": refused_scores(store, 100),
        "counts": score_counts(store),
        "refusals": lti_launches.recent_refusals(store.db, 20),
        "signing_keys": keys, "signing": lti.signing_key(store).kid,
        "modes": {c["key"]: ags_mode(c) for c in contexts(store, config)},
    }


async def dashboard_page(request: Any, mode: str, notice: str = "", error: bool = False) -> Any:
    """GET /instructor/lti: the LMS connection: roster sync, scores waiting for the LMS, refused launches."""
    store = instructor.store_of(request)
    return instructor.page(request, "LMS (LTI 1.3)", page="lti", notice=notice, notice_error=error,
                           lti_view=dashboard_context(store, request.app.state.lti_config))


async def dashboard_sync(request: Any, mode: str) -> Any:
    """POST /instructor/lti/sync: pull the LMS's membership into the roster now (the roster sync)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    result = await sync_in_thread(request.app)
    return await dashboard_page(request, mode, "Roster sync: " + result.summary() +
                                (". New students get their token by launching from the LMS." if result.new_students
                                 else ""), bool(result.errors))


async def dashboard_rotate(request: Any, mode: str) -> Any:
    """POST /instructor/lti/rotate-key: publish a next signing key (it signs once platforms' copies expired)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    try:
        kid = lti.rotate_key(instructor.store_of(request))
    except lti.RotationWaiting as exc:
        return await dashboard_page(request, mode, f"Not rotated: {exc}", True)
    LOG.warning("LTI signing key rotated: %s is published and signs in %d s", kid, lti.JWKS_MAX_AGE_S)
    return await dashboard_page(request, mode, f"New signing key {kid} published; it signs from "
                                f"{lti.JWKS_MAX_AGE_S // 60} minutes from now (platforms' copies of the key set "
                                "have expired by then); the current key signs until then and stays published.")


async def dashboard_retry(request: Any, mode: str) -> Any:
    """POST /instructor/lti/retry: send the scores the LMS refused again (after fixing the cause in the LMS)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    count = send_refused_again(instructor.store_of(request))
    poster = getattr(request.app.state, "lti_poster", None)
    if poster is not None:
        poster.wake.set()
    return await dashboard_page(request, mode, f"{count} refused score(s) will be sent again.")


def routes() -> list[Any]:
    """The dashboard's LMS page and its buttons (behind the dashboard's login)."""
    from starlette.routing import Route

    return [
        Route("/instructor/lti", instructor.guarded(dashboard_page), methods=["GET"]),
        Route("/instructor/lti/sync", instructor.guarded(dashboard_sync), methods=["POST"]),
        Route("/instructor/lti/rotate-key", instructor.guarded(dashboard_rotate), methods=["POST"]),
        Route("/instructor/lti/retry", instructor.guarded(dashboard_retry), methods=["POST"]),
    ]
