"""The LTI Advantage service calls: the service token, reading a container page by page, and their errors.

**The service token** (:class:`ServiceConnector`): OAuth 2 client credentials
with a JWT client assertion (IMS Security Framework 4.1): ``iss`` = ``sub`` =
our client id, ``aud`` = the platform's token URL, a fresh ``jti``, signed by
the tool's current key (grader/server/lti/keys.py); the access token is cached
per platform and scopes until a minute before it expires. Only scopes the
launch's AGS claim granted are asked for.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import httpx
from joserfc import jwt

from grader.server import lti
from grader.student.errors import GraderError
from grader.student.store import Store, lti_courses

LOG = logging.getLogger("normgrade.lti")

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_LINEITEM_READONLY = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
MEMBERSHIP_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 100  # pages of a container (NRPS members, AGS line items) followed at most
RETRIED_4XX = (401, 408, 429)  # client errors that sending again can cure (a token expired, a timeout, a rate limit)
TOTAL = "total"  # the resourceId of the course total (a context with a single line item)
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

    def __init__(
        self, store: Store, client: httpx.Client | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.client = client or httpx.Client(timeout=HTTP_TIMEOUT_S)
        self.clock = clock
        self.cache: dict[tuple[str, str, str], tuple[float, str]] = {}

    def assertion(self, platform: lti.Platform) -> str:
        """The signed client assertion for one token request (signed by the key that signs now)."""
        key = lti.signing_key(self.store, self.clock())
        now = int(self.clock())
        claims = {
            "iss": platform.client_id,
            "sub": platform.client_id,
            "aud": platform.assertion_audience,
            "iat": now,
            "exp": now + 300,
            "jti": secrets.token_urlsafe(16),
        }
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)

    def token(self, platform: lti.Platform, scopes: list[str]) -> str:
        """An access token for ``scopes`` (cached until a minute before it expires); ServiceError on failure."""
        scope = " ".join(sorted(scopes))
        key = (platform.issuer, platform.client_id, scope)
        cached = self.cache.get(key)
        if cached is not None and cached[0] > time.time() + 60:
            return cached[1]
        try:
            answer = self.client.post(
                platform.token_url,
                data={
                    "grant_type": "client_credentials",
                    "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    "client_assertion": self.assertion(platform),
                    "scope": scope,
                },
            )
        except httpx.HTTPError as exc:
            raise ServiceError(
                f"the token endpoint of {platform.name} ({platform.token_url}) cannot be reached ({type(exc).__name__})"
            ) from exc
        doc = json_of(answer, f"the token endpoint of {platform.name}")
        token = doc.get("access_token")
        if not isinstance(token, str) or not token:
            raise ServiceError(
                f"the token endpoint of {platform.name} gave no access_token: check the tool's "
                "JWKS URL and scopes in the LMS"
            )
        expires = doc.get("expires_in", 3600)
        self.cache[key] = (time.time() + (float(expires) if isinstance(expires, (int, float)) else 3600.0), token)
        return token

    def close(self) -> None:
        self.client.close()


def json_of(answer: httpx.Response, what: str) -> dict[str, Any]:
    if answer.status_code >= 400:
        raise ServiceError(
            f"{what} answered {answer.status_code}: {' '.join(answer.text[:200].split())}", answer.status_code
        )
    try:
        doc = answer.json()
    except ValueError as exc:
        raise ServiceError(f"{what} did not answer JSON") from exc
    if not isinstance(doc, (dict, list)):
        raise ServiceError(f"{what} answered JSON that is not an object")
    return doc if isinstance(doc, dict) else {"items": doc}


def platform_of(config: lti.LtiConfig, context: dict[str, Any]) -> lti.Platform:
    try:
        return config.find(context["issuer"], context["client_id"])
    except lti.LaunchRefused as exc:
        raise ServiceError(
            f"the context '{context['title']}' belongs to a platform no longer in course.toml ({exc.reason})"
        ) from exc


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


def paged(connector: ServiceConnector, url: str, token: str, accept: str, key: str, what: str) -> list[dict[str, Any]]:
    """Every item of a container, following ``Link: rel="next"`` (NRPS members, AGS line items)."""
    items: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        try:
            answer = connector.client.get(url, headers={"Authorization": f"Bearer {token}", "Accept": accept})
        except httpx.HTTPError as exc:
            raise ServiceError(f"{what} cannot be reached ({type(exc).__name__})") from exc
        doc = json_of(answer, what)
        page = doc.get(key, [])
        items += [m for m in page if isinstance(m, dict)] if isinstance(page, list) else []
        following = answer.links.get("next", {}).get("url")
        if not following:
            return items
        url = following
    raise ServiceError(f"{what} gave more than {MAX_PAGES} pages")
