"""The launch chain: a platform's key set, the named checks of an id_token (:func:`validate_launch`), and
admission (the role in this course, and this course's contexts)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx
from joserfc import errors as jose_errors
from joserfc import jwt
from joserfc.jwk import KeySet

from grader.server.lti.platforms import LaunchRefused, LtiConfig, Platform
from grader.student.store import Store, lti_courses, lti_launches, utc_now

LOG = logging.getLogger("normgrade.lti")

LEEWAY_S = 60  # clock difference allowed on exp/iat
MAX_TOKEN_AGE_S = 600  # an id_token issued longer ago than this is refused (with exp in the future or not)
STATE_TTL_S = 600  # a login must be completed within this time
JWKS_TTL_S = 600  # a platform's JWKS is fetched again after this long (or when a kid is unknown)
JWKS_REFETCH_S = 30  # ... but for an unknown kid at most once per this many seconds (forged kids cost nothing)
ALGORITHMS = ["RS256"]

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
RESOURCE_LINK = "LtiResourceLinkRequest"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"


# --- platform JWKS ----------------------------------------------------------------------------------


class JwksCache:
    """Each platform's key set, fetched at first use, again after JWKS_TTL_S or when a ``kid`` is unknown."""

    def __init__(self) -> None:
        self.sets: dict[str, tuple[float, KeySet]] = {}

    async def key_set(self, url: str, kid: str | None) -> KeySet:
        cached = self.sets.get(url)
        if cached is not None:
            age = time.time() - cached[0]
            known = kid is None or any(k.kid == kid for k in cached[1].keys)
            if age < JWKS_TTL_S and (known or age < JWKS_REFETCH_S):
                return cached[1]  # an unknown kid shortly after a fetch: the signature check refuses it
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                answer = await client.get(url, headers={"Accept": "application/json"})
            answer.raise_for_status()
            key_set = KeySet.import_key_set(answer.json())
        except (httpx.HTTPError, ValueError, jose_errors.JoseError) as exc:
            raise LaunchRefused(
                f"the platform's key set at {url} could not be read ({type(exc).__name__}): try the launch again later",
                502,
            ) from exc
        self.sets[url] = (time.time(), key_set)
        return key_set


# --- the launch chain -------------------------------------------------------------------------------


def context_role(roles: list[str]) -> str | None:
    """``"instructor"``, ``"learner"`` or None, read from the LIS *context* roles alone.

    Instructor: ``membership#Instructor`` or one of its sub-roles
    (``membership/Instructor#TeachingAssistant``, ...), or the short name
    ``Instructor``; learner: ``membership#Learner``, its sub-roles, or
    ``Learner``; both: instructor. Institution and system roles
    (``institution/person#Administrator``, ``system/person#Administrator``,
    an institution's ``#Instructor`` faculty) say nothing about this course,
    and a context Administrator, Mentor or ContentDeveloper is neither.
    """

    def has(name: str) -> bool:
        return any(r in (f"{MEMBERSHIP}#{name}", name) or r.startswith(f"{MEMBERSHIP}/{name}#") for r in roles)

    if has("Instructor"):
        return "instructor"
    if has("Learner"):
        return "learner"
    return None


@dataclass
class Launch:
    """A validated resource-link launch."""

    platform: Platform
    claims: dict[str, Any]

    @property
    def sub(self) -> str:
        return str(self.claims["sub"])

    @property
    def deployment_id(self) -> str:
        return str(self.claims[CLAIM + "deployment_id"])

    @property
    def roles(self) -> list[str]:
        roles = self.claims.get(CLAIM + "roles", [])
        return [str(r) for r in roles] if isinstance(roles, list) else []

    @property
    def role(self) -> str | None:
        """The user's role in the launch's course: "instructor", "learner" or None (:func:`context_role`)."""
        return context_role(self.roles)

    @property
    def is_instructor(self) -> bool:
        return self.role == "instructor"

    @property
    def context(self) -> dict[str, Any]:
        value = self.claims.get(CLAIM + "context")
        return value if isinstance(value, dict) else {}

    @property
    def context_id(self) -> str:
        return str(self.context.get("id", ""))

    @property
    def context_title(self) -> str:
        return str(self.context.get("title") or self.context.get("label") or "")

    @property
    def context_key(self) -> str:
        return context_key(self.platform.issuer, self.deployment_id, self.context_id)


def context_key(issuer: str, deployment_id: str, context_id: str) -> str:
    """The key of one course context of one deployment: sha256 of its three parts (short, URL-safe)."""
    return hashlib.sha256(json.dumps([issuer, deployment_id, context_id]).encode()).hexdigest()[:24]


def unverified_header_and_claims(id_token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a compact JWS, read without checking anything (only to find the platform)."""
    parts = id_token.split(".")
    if len(parts) != 3 or len(id_token) > 32 * 1024:
        raise LaunchRefused("the id_token is not a JWT (three dot-separated parts): launch again from the LMS")
    try:
        decoded = [json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in parts[:2]]
    except (ValueError, UnicodeDecodeError) as exc:
        raise LaunchRefused("the id_token is not a readable JWT: launch again from the LMS") from exc
    if not all(isinstance(d, dict) for d in decoded):
        raise LaunchRefused("the id_token is not a readable JWT: launch again from the LMS")
    return decoded[0], decoded[1]


def _registration(config: LtiConfig, issuer: str, auds: list[str], azp: Any) -> Platform:
    """The registration a token is for: the one client id of ours in ``aud``; of several, the one ``azp`` names."""
    candidates = [p for p in config.platforms if p.issuer == issuer]
    if not candidates:
        config.find(issuer, None)  # raises: not registered
    named = [p for p in candidates if p.client_id in auds]
    if len(named) > 1:
        named = [p for p in named if p.client_id == azp]
        if not named:
            raise LaunchRefused(
                "the id_token's audience names several of this tool's registrations and its azp "
                "none of them: launch again from the LMS",
                403,
                issuer,
            )
    if not named:
        raise LaunchRefused(
            f"the id_token is for audience {auds!r}, not this tool's client id "
            f"({', '.join(p.client_id for p in candidates)}): check the client id in "
            "course.toml",
            403,
            issuer,
        )
    return named[0]


def same_origin(url: str, base: str) -> bool:
    """Whether ``url`` is on the server at ``base`` (scheme, host and port)."""
    a, b = urlparse(url), urlparse(base)
    return bool(a.scheme) and (a.scheme, a.netloc.lower()) == (b.scheme, b.netloc.lower())


async def validate_launch(
    store: Store,
    config: LtiConfig,
    jwks: JwksCache,
    id_token: str,
    state: str,
    cookie_state: str | None,
    tool: str,
    now: float | None = None,
) -> Launch:
    """The launch chain (module docstring, step 2); LaunchRefused with the first check that fails.

    ``tool`` is this tool's base URL: the token's ``target_link_uri`` must be on it.
    """
    now = time.time() if now is None else now
    if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
        raise LaunchRefused(
            "the launch's state does not match this browser's login (the cookie is missing or "
            "another login replaced it): launch again from the LMS; if the tool opens inside "
            "a frame, let it open in a new window"
        )
    header, unverified = unverified_header_and_claims(id_token)
    issuer = unverified.get("iss")
    if not isinstance(issuer, str):
        raise LaunchRefused("the id_token has no issuer (iss): launch again from the LMS")
    aud = unverified.get("aud")
    auds = [aud] if isinstance(aud, str) else [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []
    platform = _registration(config, issuer, auds, unverified.get("azp"))
    if header.get("alg") not in ALGORITHMS:
        raise LaunchRefused(f"the id_token is signed with {header.get('alg')!r}; LTI requires RS256", 400, issuer)
    key_set = await jwks.key_set(platform.jwks_url, header.get("kid"))
    try:
        token = jwt.decode(id_token, key_set, algorithms=ALGORITHMS)
    except (jose_errors.JoseError, ValueError) as exc:
        raise LaunchRefused(
            f"the id_token's signature does not verify with the platform's keys "
            f"({type(exc).__name__}): it was not made by {issuer}",
            403,
            issuer,
        ) from exc
    claims = dict(token.claims)
    azp = claims.get("azp")
    if (len(auds) > 1 or azp is not None) and azp != platform.client_id:
        raise LaunchRefused(
            f"the id_token's authorized party (azp) is {azp!r}, not this tool's client id {platform.client_id!r}",
            403,
            issuer,
        )
    registry = jwt.JWTClaimsRegistry(
        now=int(now),
        leeway=LEEWAY_S,
        exp={"essential": True},
        iat={"essential": True},
        sub={"essential": True},
        nonce={"essential": True},
    )
    try:
        registry.validate(claims)
    except jose_errors.ExpiredTokenError as exc:
        raise LaunchRefused(
            "the id_token has expired: launch again from the LMS (if this repeats, check the server's clock)",
            403,
            issuer,
        ) from exc
    except jose_errors.JoseError as exc:
        raise LaunchRefused(
            f"the id_token's claims are not valid ({exc.description or type(exc).__name__}): launch again from the LMS",
            403,
            issuer,
        ) from exc
    iat = claims["iat"]
    if not isinstance(iat, (int, float)) or iat > now + LEEWAY_S or iat < now - MAX_TOKEN_AGE_S:
        raise LaunchRefused(
            "the id_token was issued at a time too far from now (iat): launch again from the "
            "LMS (if this repeats, check the server's clock)",
            403,
            issuer,
        )
    nonce = str(claims["nonce"])
    with store.transaction() as db:
        lti_launches.forget_nonces(db, now - 2 * MAX_TOKEN_AGE_S)
        if lti_launches.nonce_seen(db, nonce):
            raise LaunchRefused(
                "this launch was already used (its nonce was seen before): a replayed launch "
                "is refused; launch again from the LMS",
                403,
                issuer,
            )
        login = lti_launches.state(db, state)
        if login is None or login["created"] < now - STATE_TTL_S:
            raise LaunchRefused("this login is unknown or too old (state): launch again from the LMS", 400, issuer)
        if not secrets.compare_digest(login["nonce"], nonce):
            raise LaunchRefused(
                "the id_token's nonce is not the one this login sent: launch again from the LMS", 403, issuer
            )
        if (login["issuer"], login["client_id"]) != (issuer, platform.client_id):
            raise LaunchRefused(
                f"the id_token is for the registration {platform.client_id!r} of {issuer}, but this "
                f"login was started for {login['client_id']!r} of {login['issuer']}: "
                "launch again from the LMS",
                403,
                issuer,
            )
        lti_launches.use_nonce(db, nonce, issuer, now)
        lti_launches.drop_states(db, state, now - STATE_TTL_S)
    deployment = claims.get(CLAIM + "deployment_id")
    if deployment not in platform.deployments:
        raise LaunchRefused(
            f"the deployment {deployment!r} of {platform.name} is not one of this course's "
            f"({', '.join(platform.deployments)}): add it to deployments in course.toml",
            403,
            issuer,
        )
    if claims.get(CLAIM + "message_type") != RESOURCE_LINK:
        raise LaunchRefused(
            f"the message type {claims.get(CLAIM + 'message_type')!r} is not supported: this tool "
            f"takes {RESOURCE_LINK}",
            400,
            issuer,
        )
    if claims.get(CLAIM + "version") != "1.3.0":
        raise LaunchRefused(
            f"the LTI version {claims.get(CLAIM + 'version')!r} is not supported: 1.3.0 is", 400, issuer
        )
    link = claims.get(CLAIM + "resource_link")
    if not isinstance(link, dict) or not link.get("id"):
        raise LaunchRefused("the launch has no resource link id: launch from a link in the course", 400, issuer)
    target = claims.get(CLAIM + "target_link_uri")
    if not isinstance(target, str) or not same_origin(target, tool):
        raise LaunchRefused(
            f"the launch's target link {target!r} is not this tool ({tool}): set the tool's "
            "launch URL in the LMS to this server's /lti/launch",
            400,
            issuer,
        )
    if not isinstance(claims.get(CLAIM + "roles"), list):
        raise LaunchRefused("the launch has no roles claim: launch again from the LMS", 400, issuer)
    if not str(claims["sub"]).strip():
        raise LaunchRefused("the launch has an empty user id (sub): anonymous launches are not accepted", 400, issuer)
    return Launch(platform, claims)


# --- admission: the role in this course, and this course's contexts ------------------------------------


def bound_contexts(store: Store, platform: Platform) -> dict[str, str]:
    """The LMS course contexts of this course on one registration: context id -> title.

    The platform's ``contexts`` in course.toml when it lists any, else the
    one its first instructor launch bound (``lti_bindings``).
    """
    if platform.contexts:
        return {c: "" for c in platform.contexts}
    return {r["context_id"]: r["title"] for r in lti_courses.bindings(store.db, platform.issuer, platform.client_id)}


def _course_name(context_id: str, title: str) -> str:
    return f"'{title}' ({context_id})" if title else f"{context_id!r}"


def check_context(store: Store, launch: Launch) -> None:
    """The launch comes from a course context of this course, or binds the first one (an instructor's).

    LaunchRefused otherwise: a launch from another course of the same LMS
    (a tool deployed at site or account level shares one deployment id among
    them all), or a learner's launch before any instructor's.
    """
    platform, issuer, context_id = launch.platform, launch.platform.issuer, launch.context_id
    if not context_id:
        raise LaunchRefused(
            "the launch has no course context: add the tool to a course and launch it from there", 400, issuer
        )
    with store.transaction() as db:  # read and bind in one transaction: two first launches bind one context
        bound = bound_contexts(store, platform)
        if context_id in bound:
            return
        here = _course_name(context_id, launch.context_title)
        if bound:
            ours = ", ".join(_course_name(c, t) for c, t in bound.items())
            raise LaunchRefused(
                f"this launch comes from the LMS course {here} of {platform.name}, but this course "
                f"is bound to {ours}: add the tool to that course, or run a server of its own for "
                "this one (a tool set up for the whole LMS shares one deployment among its courses)",
                403,
                issuer,
            )
        if not launch.is_instructor:
            raise LaunchRefused(
                f"this course is not bound to an LMS course yet: its instructor launches the tool "
                f"once from the LMS course (yours is {here}), then launch again",
                403,
                issuer,
            )
        lti_courses.bind(
            db, issuer, platform.client_id, context_id, launch.context_title[:200], utc_now(), launch.sub[:200]
        )
    LOG.warning(
        "LTI: this course is now bound to the LMS course %r of %s (first instructor launch, %r)",
        here,
        platform.name,
        launch.sub,
    )


def admit(store: Store, launch: Launch) -> None:
    """The launch's user may enter: a teacher or a student of this course (LaunchRefused otherwise)."""
    if launch.role is None:
        shown = ", ".join(r.rsplit("/", 1)[-1] for r in launch.roles[:5]) or "none"
        raise LaunchRefused(
            f"your role in this LMS course ({shown}) is neither a teacher's nor a student's: "
            "ask to be enrolled in the course as one",
            403,
            launch.platform.issuer,
        )
    check_context(store, launch)


def save_context(store: Store, launch: Launch) -> str:
    """Keep the launch's context and its service endpoints (NRPS; AGS: line items, one line item, scopes).

    A launch without the NRPS or AGS claim leaves what an earlier launch told us.
    """
    nrps = launch.claims.get(NRPS_CLAIM) if isinstance(launch.claims.get(NRPS_CLAIM), dict) else None
    ags = launch.claims.get(AGS_CLAIM) if isinstance(launch.claims.get(AGS_CLAIM), dict) else None
    key = launch.context_key
    with store.transaction() as db:
        old = lti_courses.context(db, key)
        row = {
            "key": key,
            "issuer": launch.platform.issuer,
            "client_id": launch.platform.client_id,
            "deployment_id": launch.deployment_id,
            "context_id": launch.context_id,
            "title": launch.context_title,
            "updated_at": utc_now(),
            "memberships_url": old.get("memberships_url", ""),
            "lineitems_url": old.get("lineitems_url", ""),
            "lineitem_url": old.get("lineitem_url", ""),
            "scopes": old.get("scopes", "[]"),
        }
        if nrps is not None:
            row["memberships_url"] = str(nrps.get("context_memberships_url") or "")
        if ags is not None:
            scopes = ags.get("scope")
            row.update(
                lineitems_url=str(ags.get("lineitems") or ""),
                lineitem_url=str(ags.get("lineitem") or ""),
                scopes=json.dumps([str(x) for x in scopes] if isinstance(scopes, list) else []),
            )
        lti_courses.save_context(db, row)
    return key
