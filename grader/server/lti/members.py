"""An LMS user in the roster: matched by ``(iss, sub)``, else by e-mail, added when new (a launch, and
``grade roster sync``), and the token a launch shows them."""

from __future__ import annotations

import logging

from grader.server import auth
from grader.server.lti.launch import Launch, context_key
from grader.server.roster import ID_RE, RosterEntry, import_roster
from grader.student.store import Store, lti_courses, utc_now
from grader.student.store import roster as store_roster

LOG = logging.getLogger("normgrade.lti")


def new_student_id(store: Store, issuer: str, sub: str, email: str) -> str:
    """A roster id for a new LMS member: the e-mail when it is a valid id and free, else ``lti-<hash>``."""
    if email and ID_RE.fullmatch(email) and not store_roster.listed(store.db, email):
        return email
    return "lti-" + context_key(issuer, "", sub)[:16]


def match_member(
    store: Store, issuer: str, context_key: str, sub: str, email: str, name: str, role: str, issue_token: bool = True
) -> str:
    """The roster id of an LMS user, adding them to the roster when new; records the membership (active).

    Matched by ``(iss, sub)`` first, then by e-mail (case-insensitive) among
    roster rows no LMS user has claimed yet. A new student gets a roster row
    and (``issue_token``) a token, as ``grade roster import`` gives one. A
    membership already recorded as it is stays untouched (no write: a sync
    that changes nothing changes no row).
    """
    student = lti_courses.student_of_user(store.db, issuer, sub)
    if student is None and email:
        student = lti_courses.unclaimed_by_email(store.db, email)
    if student is None and role == "learner":
        student = new_student_id(store, issuer, sub, email)
        if issue_token:
            import_roster(store, [RosterEntry(student, name, email)])
        else:
            with store.transaction() as db:
                store_roster.add_if_missing(db, student, name, email, utc_now())
        LOG.info("LTI: new student %r (%r) from %r", student, sub, issuer)
    if student is None:
        student = "instructor"
    with store.transaction() as db:
        lti_courses.link_user(db, issuer, sub, student)
        if context_key:
            lti_courses.set_active_member(db, context_key, sub, student, role, utc_now())
    return student


def launch_token(store: Store, student: str, launch: Launch) -> str:
    """A fresh token for ``student``, replacing the one an earlier launch of this LMS user showed."""
    with store.transaction() as db:
        role = auth.INSTRUCTOR if launch.is_instructor else "student"
        token = auth.issue(db, student, role)
        lti_courses.replace_launch_token(
            db, launch.platform.issuer, launch.sub, auth.hash_token(token), student, utc_now()
        )
    return token
