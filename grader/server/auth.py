"""Tokens: issued at random, stored only as their SHA-256, compared in constant time.

A token is ``secrets.token_urlsafe(32)`` (256 random bits). The database keeps
``sha256(token)`` and the role (``student`` or ``instructor``); a stolen copy of
the database gives no usable token. A request presents ``Authorization:
Bearer <token>``; :func:`lookup` hashes it, fetches the row with that hash
and confirms it with ``hmac.compare_digest``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

import sqlite_utils

from grader.student.store import tokens, utc_now

ROLES = ("student", "instructor")
INSTRUCTOR = "instructor"  # the role, and the name instructor tokens carry (never a roster id: roster.py)


@dataclass(frozen=True)
class Principal:
    """Who a request is from: a student (``student`` is their roster id) or the instructor."""

    student: str
    role: str

    @property
    def is_instructor(self) -> bool:
        return self.role == INSTRUCTOR


def hash_token(token: str) -> str:
    """The stored form of a token: sha256 hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token (43 URL-safe characters)."""
    return secrets.token_urlsafe(32)


def issue(db: sqlite_utils.Database, student: str, role: str) -> str:
    """Store a new token for ``student`` with ``role`` (call inside a transaction); return the token."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    token = new_token()
    tokens.insert(db, hash_token(token), student, role, utc_now())
    return token


def revoke_all(db: sqlite_utils.Database, student: str, role: str = "student") -> None:
    """Revoke every token of ``student`` with ``role`` (call inside a transaction).

    The role is part of the identity: revoking a student's tokens never
    touches an instructor token, whatever the names.
    """
    tokens.revoke_all(db, student, role)


def lookup(db: sqlite_utils.Database, token: str | None) -> Principal | None:
    """The principal of a presented token, or None (missing, unknown or revoked)."""
    if not token or len(token) > 200:
        return None
    return lookup_hash(db, hash_token(token))


def lookup_hash(db: sqlite_utils.Database, digest: str) -> Principal | None:
    """The principal of the token with this stored hash (a browser session keeps only the hash), or None
    (unknown or revoked)."""
    row = tokens.lookup(db, digest)
    if row is None or row["revoked"]:
        return None
    if not hmac.compare_digest(row["hash"], digest):
        return None
    return Principal(row["student"], row["role"])


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None
