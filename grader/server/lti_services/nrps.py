"""Names and Role Provisioning: the roster sync.

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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from grader.server import auth, lti
from grader.server.lti_services.connector import (
    MEMBERSHIP_TYPE,
    SCOPE_NRPS,
    ServiceConnector,
    ServiceError,
    contexts,
    paged,
    platform_of,
)
from grader.server.roster import RosterEntry
from grader.student.store import Store, lti_courses, utc_now
from grader.student.store import roster as store_roster

LOG = logging.getLogger("normgrade.lti")


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
        changes = (
            f"{len(self.new_students)} new student(s), {len(self.dropped)} dropped"
            + (f", {len(self.returned)} back" if self.returned else "")
            if self.new_students or self.dropped or self.returned
            else "no change"
        )
        return f"{self.members} members in {self.contexts} course(s): {changes}" + (
            f"; {len(self.errors)} error(s): " + "; ".join(self.errors) if self.errors else ""
        )

    def to_json(self) -> dict[str, Any]:
        """The API's answer (``POST /api/v1/roster/sync``): the counts, the lists, the new tokens."""
        return {
            "contexts": self.contexts,
            "members": self.members,
            "new_students": self.new_students,
            "dropped": self.dropped,
            "returned": self.returned,
            "errors": self.errors,
            "summary": self.summary(),
            "tokens": [{"id": e.id, "name": e.name, "email": e.email, "token": t} for e, t in self.tokens],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SyncResult":
        def strings(key: str) -> list[str]:
            value = doc.get(key)
            return [str(v) for v in value] if isinstance(value, list) else []

        tokens = [
            (
                RosterEntry(str(t.get("id", "")), str(t.get("name", "")), str(t.get("email", ""))),
                str(t.get("token", "")),
            )
            for t in doc.get("tokens", [])
            if isinstance(t, dict)
        ]
        return cls(
            int(doc.get("contexts", 0)),
            int(doc.get("members", 0)),
            strings("new_students"),
            strings("dropped"),
            strings("returned"),
            tokens,
            strings("errors"),
        )


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
                platform = platform_of(config, context)
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


def _sync_context(
    store: Store, platform: lti.Platform, key: str, members: list[dict[str, Any]], result: SyncResult
) -> None:
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
