"""The tool's signing keys (``lti_keys``): made at the first start, published in our JWKS, rotated with a
delay so that a platform's cached copy of the JWKS meets a new key only after it has expired."""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import sqlite_utils
from joserfc.jwk import RSAKey

from grader.student.errors import GraderError
from grader.student.store import Store, lti_keys, utc_now

JWKS_MAX_AGE_S = 300  # our JWKS's Cache-Control max-age; a rotated key signs only this long after it is published


# --- the tool's keys --------------------------------------------------------------------------------


def _new_key(db: sqlite_utils.Database, signs_from: float) -> str:
    kid = secrets.token_hex(8)
    key = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})
    lti_keys.add(db, kid, key.as_pem(private=True).decode(), utc_now(), signs_from)
    return kid


def _key_of(row: Mapping[str, Any]) -> RSAKey:
    return RSAKey.import_key(row["private_pem"], {"kid": row["kid"], "use": "sig", "alg": "RS256"})


def signing_key(store: Store, now: float | None = None) -> RSAKey:
    """The key that signs now: the newest published one whose ``signs_from`` has come (made at the first call)."""
    now = time.time() if now is None else now
    row = lti_keys.signing(store.db, now)
    if row is None:
        with store.transaction() as db:
            if lti_keys.signing(db, now) is None:
                _new_key(db, 0.0)
            row = lti_keys.signing(db, now)
    assert row is not None  # made above when there was none
    return _key_of(row)


class RotationWaiting(GraderError):
    """A rotation asked for while the previous one's next key is not signing yet."""


def rotate_key(store: Store, now: float | None = None) -> str:
    """Publish a next key that signs from :data:`JWKS_MAX_AGE_S` on; returns its kid.

    Until then the current key keeps signing, so a platform that cached our
    JWKS (for up to the max-age we publish) meets the new key only after its
    copy has expired. The current key stays published after that, keys older
    than it are retired. RotationWaiting while a next key already waits.
    """
    now = time.time() if now is None else now
    current = signing_key(store, now)
    with store.transaction() as db:
        waiting = lti_keys.waiting(db, now)
        if waiting:
            starts = datetime.fromtimestamp(waiting[0]["signs_from"], timezone.utc).isoformat(timespec="seconds")
            raise RotationWaiting(
                f"the next key {waiting[0]['kid']} is published and signs from {starts}: rotate again after that"
            )
        kid = _new_key(db, now + JWKS_MAX_AGE_S)
        keep = {kid, current.kid}
        previous = lti_keys.signed_before(db, current.kid, now)
        for old in previous:  # the current key is still the one that signs: those before it go
            if old not in keep:
                lti_keys.retire(db, old)
    return kid


def published_keys(store: Store) -> list[dict[str, Any]]:
    """The keys not retired, newest first: kid, created_at, signs_from."""
    signing_key(store)
    return lti_keys.published(store.db)


def public_jwks(store: Store) -> dict[str, Any]:
    """The tool's JWKS: the public halves of the keys not retired (newest first, the next key included)."""
    signing_key(store)
    return {"keys": [_key_of(row).as_dict(private=False) for row in lti_keys.published_pems(store.db)]}
