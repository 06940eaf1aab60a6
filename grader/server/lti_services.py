"""LTI Advantage services: the service token, NRPS (the roster) and AGS (line items and scores).

**The service token** (:class:`ServiceConnector`): OAuth 2 client credentials
with a JWT client assertion (IMS Security Framework 4.1): ``iss`` = ``sub`` =
our client id, ``aud`` = the platform's token URL, a fresh ``jti``, signed by
the tool's current key (grader/server/lti.py); the access token is cached
per platform and scopes until a minute before it expires.

**Names and Role Provisioning** (:func:`sync_roster`, ``grade roster sync``
and the dashboard's button): for each course context a launch told us about,
the membership container is read (every page, ``Link: rel="next"``); each
member is matched to the roster by ``lti.match_member``: by ``(iss, sub)``,
else by e-mail (case-insensitive), else a new roster row (the id is the
e-mail when it is a valid id, else ``lti-<hash>``) with a token; members no
longer listed, or listed ``Inactive``/``Deleted``, are marked ``dropped`` in
``lti_members``. Nothing is deleted: their attempts, tokens and roster rows
stay.

**Assignment and Grade Services** (:class:`ScorePoster`, a thread of the
server beside the collector): one line item per gradebook column of the
class report (each chapter's exercises, each chapter's quiz: the columns of
the Canvas/Moodle CSV exports), found by its ``resourceId``
(``exercises:<chapter>``, ``quiz:<chapter>``) or created once, and kept in
``lti_line_items``. Each tick:

1. *scan*: when anything that counts changed (a recorded attempt, a quiz
   answer, an override, a new member: a cheap fingerprint of the tables),
   every learner's counted score per column is compared with the last one
   queued for them; a change becomes an outbox row in ``lti_scores``
   (``pending``, with its timestamp). A pending row not yet sent is
   ``superseded`` by a newer one for the same learner and line item.
2. *send*: each pending row due (``next_try``) gets its line item and a
   service token (here, in the server), then goes on the grading queue as
   the Huey task ``post_score`` (grader/server/jobs.py) with id
   ``score-<row>-try-<n>``; the worker POSTs it to ``<line item>/scores``.
   An LMS that cannot be reached leaves the row pending, with the error and
   a back-off (2^tries s, at most 5 minutes).
3. *collect*: a task's result marks its row ``posted`` (or pending again with
   the error); a row queued longer than ``lost_after`` seconds with no
   result and not waiting in the queue at two looks ``lost_after`` apart (a
   Redis restarted without persistence lost it, or a worker died with it)
   is sent again.
   The score is in the course database until the LMS has taken it: none is
   lost while the LMS or the queue is down. Sending a score twice is
   harmless: AGS keeps the one with the latest timestamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse, urlunparse

import httpx
from joserfc import jwt

from grader.term import class_report
from grader.server import auth, lti
from grader.server.jobs import Queue, open_queue
from grader.server import instructor
from grader.server.roster import RosterEntry
from grader.student.course import Course
from grader.student.errors import GraderError
from grader.student.store import Store, utc_now

LOG = logging.getLogger("normgrade.lti")

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
MEMBERSHIP_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 100           # NRPS pages followed at most
HTTP_TIMEOUT_S = 15.0
MAX_BACKOFF_S = 300.0


class ServiceError(GraderError):
    """An LMS service call failed (one line: which call, what came back, what to do)."""


# --- the service token ------------------------------------------------------------------------------


class ServiceConnector:
    """Access tokens from the platforms' token endpoints (client credentials, JWT assertion), cached."""

    def __init__(self, store: Store, client: httpx.Client | None = None) -> None:
        self.store = store
        self.client = client or httpx.Client(timeout=HTTP_TIMEOUT_S)
        self.cache: dict[tuple[str, str, str], tuple[float, str]] = {}

    def assertion(self, platform: lti.Platform) -> str:
        """The signed client assertion for one token request."""
        key = lti.signing_key(self.store)
        now = int(time.time())
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
        raise ServiceError(f"{what} answered {answer.status_code}: {' '.join(answer.text[:200].split())}")
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


def contexts(store: Store) -> list[dict[str, Any]]:
    """The course contexts launches told us about, oldest first."""
    return list(store.db.query("SELECT * FROM lti_contexts ORDER BY rowid"))


# --- the roster (NRPS) ------------------------------------------------------------------------------


@dataclass
class SyncResult:
    """What a roster sync did."""

    contexts: int = 0
    members: int = 0
    new_students: list[str] | None = None
    dropped: list[str] | None = None
    tokens: list[tuple[RosterEntry, str]] | None = None
    errors: list[str] | None = None

    def summary(self) -> str:
        return (f"{self.members} members in {self.contexts} course(s): {len(self.new_students or [])} new "
                f"student(s), {len(self.dropped or [])} dropped" +
                (f"; {len(self.errors or [])} error(s): " + "; ".join(self.errors or []) if self.errors else ""))


def membership(connector: ServiceConnector, platform: lti.Platform, url: str) -> list[dict[str, Any]]:
    """Every member of a context (following ``Link: rel="next"`` pages)."""
    token = connector.token(platform, [SCOPE_NRPS])
    members: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        try:
            answer = connector.client.get(url, headers={"Authorization": f"Bearer {token}",
                                                        "Accept": MEMBERSHIP_TYPE})
        except httpx.HTTPError as exc:
            raise ServiceError(f"the membership service of {platform.name} cannot be reached "
                               f"({type(exc).__name__})") from exc
        doc = _json(answer, f"the membership service of {platform.name}")
        page = doc.get("members", [])
        members += [m for m in page if isinstance(m, dict)] if isinstance(page, list) else []
        following = answer.links.get("next", {}).get("url")
        if not following:
            return members
        url = following
    raise ServiceError(f"the membership service of {platform.name} gave more than {MAX_PAGES} pages")


def is_learner(roles: list[str]) -> bool:
    return any(r.endswith("#Learner") or r == "Learner" for r in roles) and not any(
        r in lti.INSTRUCTOR_ROLES for r in roles)


def sync_roster(store: Store, config: lti.LtiConfig, connector: ServiceConnector | None = None) -> SyncResult:
    """Pull every known context's membership into the roster (module docstring); errors per context are kept."""
    lti.ensure_tables(store)
    own = connector is None
    connector = connector or ServiceConnector(store)
    result = SyncResult(new_students=[], dropped=[], tokens=[], errors=[])
    try:
        for context in contexts(store):
            if not context["memberships_url"]:
                continue
            try:
                platform = _platform(config, context)
                members = membership(connector, platform, context["memberships_url"])
            except ServiceError as exc:
                result.errors.append(f"{context['title'] or context['context_id']}: {exc}")
                continue
            result.contexts += 1
            seen: set[str] = set()
            for member in members:
                sub = str(member.get("user_id", ""))
                roles = [str(r) for r in member.get("roles", []) if isinstance(r, str)]
                if not sub or not is_learner(roles):
                    continue
                result.members += 1
                status = str(member.get("status", "Active"))
                before = {r["student"] for r in store.db.query("SELECT student FROM roster")}
                email = str(member.get("email", "") or "")
                student = lti.match_member(store, platform.issuer, context["key"], sub, email,
                                       str(member.get("name", "") or ""), "learner", issue_token=False)
                if student not in before:
                    result.new_students.append(student)
                    entry = RosterEntry(student, str(member.get("name", "") or ""), email)
                    with store.transaction() as db:
                        result.tokens.append((entry, auth.issue(db, student, "student")))
                if status == "Active":
                    seen.add(sub)
            for row in list(store.db.query("SELECT sub, student FROM lti_members WHERE context_key = ? AND "
                                           "status = 'active' AND role = 'learner'", [context["key"]])):
                if row["sub"] not in seen:
                    with store.transaction() as db:
                        db.execute("UPDATE lti_members SET status = 'dropped', updated_at = ? WHERE context_key = ? "
                                   "AND sub = ?", [utc_now(), context["key"], row["sub"]])
                    result.dropped.append(row["student"])
    finally:
        if own:
            connector.close()
    return result


def dropped_students(store: Store) -> set[str]:
    """Students an LMS no longer lists in any of their contexts (marked by the roster sync)."""
    return {r["student"] for r in store.db.query(
        "SELECT student FROM lti_members GROUP BY student HAVING sum(status = 'active') = 0")}


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
    return [Column(rid, c.title, float(c.points_possible), dict(c.points)) for rid, c in zip(ids, found)]


def scores_url(lineitem_url: str) -> str:
    """``<line item>/scores``, the line item's query string kept (AGS 3.4)."""
    parts = urlparse(lineitem_url)
    return urlunparse(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def ensure_line_item(store: Store, connector: ServiceConnector, platform: lti.Platform, context: dict[str, Any],
                     column_id: str, label: str, maximum: float) -> str:
    """The URL of the context's line item with this resourceId: kept, found on the platform, or created once."""
    kept = next(iter(store.db.query("SELECT url FROM lti_line_items WHERE context_key = ? AND resource_id = ?",
                                    [context["key"], column_id])), None)
    if kept is not None:
        return str(kept["url"])
    token = connector.token(platform, [SCOPE_LINEITEM, SCOPE_SCORE])
    headers = {"Authorization": f"Bearer {token}"}
    base = context["lineitems_url"]
    separator = "&" if urlparse(base).query else "?"
    try:
        answer = connector.client.get(base + separator + urlencode({"resource_id": column_id}),
                                      headers={**headers, "Accept": LINEITEMS_TYPE})
        doc = _json(answer, f"the line items of {platform.name}")
        items = doc.get("items", []) if "items" in doc else [doc]
        url = next((i["id"] for i in items if isinstance(i, dict) and i.get("resourceId") == column_id
                    and isinstance(i.get("id"), str)), None)
        if url is None:
            answer = connector.client.post(base, headers={**headers, "Content-Type": LINEITEM_TYPE,
                                                          "Accept": LINEITEM_TYPE},
                                           content=json.dumps({"scoreMaximum": maximum, "label": label,
                                                               "resourceId": column_id, "tag": "normgrade"}))
            created = _json(answer, f"creating a line item in {platform.name}")
            url = created.get("id")
            if not isinstance(url, str):
                raise ServiceError(f"{platform.name} created a line item without an id")
            LOG.info("LTI: line item %s created in %s: %s", column_id, platform.name, url)
    except httpx.HTTPError as exc:
        raise ServiceError(f"the line items of {platform.name} cannot be reached ({type(exc).__name__})") from exc
    with store.transaction() as db:
        db["lti_line_items"].upsert({"context_key": context["key"], "resource_id": column_id, "url": url,
                                     "label": label, "score_maximum": maximum}, pk=("context_key", "resource_id"))
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
    row = next(iter(store.db.query(
        "SELECT (SELECT max(id) FROM attempts) a, (SELECT max(id) FROM quiz_attempts) q, "
        "(SELECT max(id) FROM score_overrides) o, (SELECT count(*) FROM lti_members) n, "
        "(SELECT max(updated_at) FROM lti_members) m, (SELECT count(*) FROM lti_contexts) c")))
    return tuple(row.values())


def scan(store: Store, course: Course, quizzes: list[Any]) -> int:
    """Queue an outbox row for each learner's column whose counted score changed; returns how many."""
    learners = list(store.db.query(
        "SELECT m.context_key, m.sub, m.student FROM lti_members m JOIN lti_contexts c ON c.key = m.context_key "
        "WHERE m.status = 'active' AND m.role = 'learner' AND c.lineitems_url != ''"))
    if not learners:
        return 0
    made = 0
    stamp = now_iso()
    for column in columns(store, course, quizzes):
        for learner in learners:
            given = round(float(column.points.get(learner["student"], 0.0)), 6)
            last = next(iter(store.db.query(
                "SELECT score_given, score_maximum FROM lti_scores WHERE context_key = ? AND sub = ? AND "
                "resource_id = ? AND status != 'superseded' ORDER BY id DESC LIMIT 1",
                [learner["context_key"], learner["sub"], column.resource_id])), None)
            if last is None and given == 0:
                continue  # nothing earned, nothing sent yet: not a change
            if last is not None and last["score_given"] == given and last["score_maximum"] == column.maximum:
                continue
            with store.transaction() as db:
                db.execute("UPDATE lti_scores SET status = 'superseded' WHERE context_key = ? AND sub = ? AND "
                           "resource_id = ? AND status = 'pending'",
                           [learner["context_key"], learner["sub"], column.resource_id])
                db["lti_scores"].insert({
                    "context_key": learner["context_key"], "student": learner["student"], "sub": learner["sub"],
                    "resource_id": column.resource_id, "label": column.label, "score_given": given,
                    "score_maximum": column.maximum, "timestamp": stamp, "status": "pending", "tries": 0,
                    "next_try": 0.0, "error": "",
                })
            made += 1
    return made


def pending_scores(store: Store, limit: int = 200) -> list[dict[str, Any]]:
    """The scores not yet taken by the LMS (pending or queued), oldest first."""
    return list(store.db.query("SELECT * FROM lti_scores WHERE status IN ('pending', 'queued') ORDER BY id LIMIT ?",
                               [limit]))


def score_counts(store: Store) -> dict[str, int]:
    return {r["status"]: r["n"] for r in store.db.query("SELECT status, count(*) n FROM lti_scores GROUP BY status")}


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

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def run(self) -> None:
        store = Store.open(self.db_path, inspect=False)
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
        """One pass: scan for changes, send what is due, collect results."""
        now = time.time() if now is None else now
        mark = fingerprint(store)
        if mark != self.seen:
            scan(store, self.course, self.quizzes)
            self.seen = mark
        self.collect(store, queue, now)
        self.send(store, queue, connector, now)

    def send(self, store: Store, queue: Queue, connector: ServiceConnector, now: float) -> None:
        by_key = {c["key"]: c for c in contexts(store)}
        failed: set[str] = set()  # a context whose LMS failed this tick is not asked again until the next
        rows = list(store.db.query("SELECT * FROM lti_scores WHERE status = 'pending' AND next_try <= ? ORDER BY id",
                                   [now]))
        for row in rows:
            context = by_key.get(row["context_key"])
            if context is None or row["context_key"] in failed:
                continue
            try:
                platform = _platform(self.config, context)
                url = ensure_line_item(store, connector, platform, context, row["resource_id"], row["label"],
                                       row["score_maximum"])
                token = connector.token(platform, [SCOPE_LINEITEM, SCOPE_SCORE])
            except ServiceError as exc:
                failed.add(row["context_key"])
                self._retry_later(store, row, str(exc), now)
                continue
            attempt = int(row["tries"]) + 1
            tid = score_task_id(row["id"], attempt)
            queue.enqueue_score(tid, scores_url(url), token, score_payload(row))
            with store.transaction() as db:
                db.execute("UPDATE lti_scores SET status = 'queued', tries = ?, task_id = ?, queued_at = ? "
                           "WHERE id = ? AND status = 'pending'", [attempt, tid, now, row["id"]])

    def collect(self, store: Store, queue: Queue, now: float) -> None:
        waiting: set[str] | None = None  # the queue's waiting tasks, read once a tick and only when needed
        for row in list(store.db.query("SELECT * FROM lti_scores WHERE status = 'queued' ORDER BY id")):
            result = queue.result(row["task_id"])
            if result is None:
                if now - float(row["queued_at"] or 0) > self.lost_after:
                    waiting = queue.pending_ids() if waiting is None else waiting
                    self._look_for_lost(store, row, row["task_id"] in waiting, now)
                continue
            if result.get("ok"):
                with store.transaction() as db:
                    db.execute("UPDATE lti_scores SET status = 'posted', posted_at = ?, error = '' WHERE id = ?",
                               [utc_now(), row["id"]])
            else:
                self._retry_later(store, row, str(result.get("error") or "the LMS refused the score"), now)
            queue.forget(row["task_id"])

    def _look_for_lost(self, store: Store, row: dict[str, Any], waiting: bool, now: float) -> None:
        """A task queued long ago with no result: still waiting (look later), or gone (lost: send again).

        Gone means neither waiting nor done at two looks ``lost_after`` apart
        (a task a worker is posting right now is neither for a moment).
        """
        if waiting:
            with store.transaction() as db:
                db.execute("UPDATE lti_scores SET queued_at = ?, missing_since = NULL WHERE id = ?", [now, row["id"]])
        elif row["missing_since"] is None:
            with store.transaction() as db:
                db.execute("UPDATE lti_scores SET missing_since = ? WHERE id = ?", [now, row["id"]])
        elif now - float(row["missing_since"]) > self.lost_after:
            self._retry_later(store, row, "the queue lost the task (no result): sent again", now, backoff=False)

    def _retry_later(self, store: Store, row: dict[str, Any], error: str, now: float, backoff: bool = True) -> None:
        delay = min(MAX_BACKOFF_S, 2.0 ** max(int(row["tries"]), 0)) if backoff else 0.0
        LOG.warning("LTI score %s for %s not posted (%s); retrying in %.0f s", row["id"], row["student"], error, delay)
        with store.transaction() as db:
            db.execute("UPDATE lti_scores SET status = 'pending', error = ?, next_try = ?, missing_since = NULL, "
                       "tries = max(tries, 1) WHERE id = ? AND status IN ('pending', 'queued')",
                       [error[:500], now + delay, row["id"]])


# --- the application's side ---------------------------------------------------------------------------


def install(app: Any) -> None:
    """Give the application its LTI state and run the score poster while it runs (called by create_app)."""
    st = app.state.normgrade
    app.state.lti_config = lti.platforms_of(st.config.course)
    app.state.lti_jwks = lti.JwksCache()
    with Store.open(st.config.db_path) as store:
        lti.ensure_tables(store)
        lti.signing_key(store)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(application: Any) -> Any:
        poster = None
        if app.state.lti_config.platforms and getattr(app.state, "lti_poster_enabled", True):
            poster = ScorePoster(st.config.db_path, st.config.queue_url, st.config.course, st.quizzes)
            poster.start()
        app.state.lti_poster = poster
        try:
            async with inner(application) as value:
                yield value
        finally:
            if poster is not None:
                poster.stop()
                poster.join(timeout=10)

    app.router.lifespan_context = lifespan


# --- the dashboard's LMS page -------------------------------------------------------------------------


def dashboard_context(store: Store, config: lti.LtiConfig) -> dict[str, Any]:
    """What /instructor/lti shows: platforms, contexts, members (dropped marked), pending scores, refusals."""
    members = list(store.db.query(
        "SELECT m.student, m.sub, m.status, m.role, c.title FROM lti_members m JOIN lti_contexts c "
        "ON c.key = m.context_key WHERE m.role = 'learner' ORDER BY m.status DESC, m.student"))
    return {
        "platforms": config.platforms, "contexts": contexts(store), "members": members,
        "pending": pending_scores(store, 100), "counts": score_counts(store),
        "refusals": list(store.db.query("SELECT * FROM lti_refusals ORDER BY id DESC LIMIT 20")),
        "signing_keys": list(store.db.query("SELECT kid, created_at FROM lti_keys WHERE retired = 0 ORDER BY rowid DESC")),
    }


async def dashboard_page(request: Any, mode: str, notice: str = "", error: bool = False) -> Any:
    """GET /instructor/lti: the LMS connection: roster sync, scores waiting for the LMS, refused launches."""
    store = instructor.store_of(request)
    return instructor.page(request, "LMS (LTI 1.3)", page="lti", notice=notice, notice_error=error,
                           lti_view=dashboard_context(store, request.app.state.lti_config))


async def dashboard_sync(request: Any, mode: str) -> Any:
    """POST /instructor/lti/sync: pull the LMS's membership into the roster now (the roster sync)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    st = request.app.state.normgrade

    def run() -> SyncResult:
        with Store.open(st.config.db_path, inspect=False) as store:
            return sync_roster(store, request.app.state.lti_config)

    result = await asyncio.to_thread(run)  # the LMS may be slow: the event loop goes on serving
    LOG.warning("roster sync from the dashboard: %s", result.summary())
    return await dashboard_page(request, mode, "Roster sync: " + result.summary() +
                                (". New students get their token by launching from the LMS." if result.new_students
                                 else ""), bool(result.errors))


async def dashboard_rotate(request: Any, mode: str) -> Any:
    """POST /instructor/lti/rotate-key: a new signing key (the previous one stays published)."""
    instructor.check_csrf(request, await instructor.read_form(request), mode)
    kid = lti.rotate_key(instructor.store_of(request))
    LOG.warning("LTI signing key rotated: %s", kid)
    return await dashboard_page(request, mode, f"New signing key {kid}; the previous key stays in the JWKS.")


def routes() -> list[Any]:
    """The dashboard's LMS page and its two buttons (behind the dashboard's login)."""
    from starlette.routing import Route

    return [
        Route("/instructor/lti", instructor.guarded(dashboard_page), methods=["GET"]),
        Route("/instructor/lti/sync", instructor.guarded(dashboard_sync), methods=["POST"]),
        Route("/instructor/lti/rotate-key", instructor.guarded(dashboard_rotate), methods=["POST"]),
    ]
