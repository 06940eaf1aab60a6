"""The course server as an LTI 1.3 tool: platforms, the tool's keys, the OIDC login and the launch.

An LMS (Canvas, Moodle, ...) is a *platform*; the course server is the *tool*.
A launch is three requests (IMS LTI Core 1.3 and IMS Security Framework 1.0):

1. **Third-party login initiation** (``GET|POST /lti/login``): the platform
   sends ``iss``, ``login_hint``, ``target_link_uri`` (and ``client_id``,
   ``lti_message_hint``, ``lti_deployment_id``). We find the registration,
   store a fresh ``state`` and ``nonce`` with that registration (table
   ``lti_states``), set the state in a cookie, and redirect the browser to
   the platform's auth URL with ``scope=openid, response_type=id_token,
   response_mode=form_post, prompt=none``.
2. **The platform's answer** (``POST /lti/launch``, form ``id_token``,
   ``state``): :func:`validate_launch` is one chain of named checks, each
   refusing with one sentence (:class:`LaunchRefused`): the state cookie
   matches the form; the token is a JWT signed by a key of the platform's
   JWKS (chosen by ``kid``, RS256 only); ``iss`` is a configured platform and
   ``aud`` holds its client id (``azp`` must be it when present, and must be
   present when ``aud`` lists several); ``exp``/``iat`` within
   :data:`LEEWAY_S`; the ``nonce`` is the one stored with this state and was
   never used before (table ``lti_nonces``); the registration (issuer and
   client id) is the one the login was started for; the deployment id is one
   configured; message type ``LtiResourceLinkRequest``, version ``1.3.0``, a
   resource link id, a ``sub``, and a ``target_link_uri`` on this tool.
3. **Admission** (:func:`admit`): the user's role is read from the *context*
   roles alone (:func:`context_role`: Instructor and its sub-roles, or
   Learner; an institution or system Administrator role says nothing about
   this course), and the launch's course context must be one this course is
   bound to (:func:`check_context`): those listed in the platform's
   ``contexts``, else the one its first instructor launch bound
   (``lti_bindings``). A tool deployed at site or account level shares one
   deployment id among every course of the LMS: the context, not the
   deployment, says which course a launch comes from.
4. **Landing** (:func:`land`, the one place that decides where a launch
   lands): a learner is matched to the roster by ``(iss, sub)``, else by
   e-mail (:func:`match_member`, the same code as ``grade roster sync``), given a
   fresh token (it replaces the one the previous launch made) and sent to
   their own page, ``/student/``, logged in (:func:`student_landing`; the page
   shows the token once with the ``grade login`` command); an instructor gets a
   dashboard session (an instructor token made for that LMS user, the
   dashboard's session cookie derived from it) and is sent to
   ``/instructor/``. The launch's service endpoints (NRPS memberships, AGS
   line items, its scopes) are kept per context (``lti_contexts``) for the
   roster sync and the score posting.

A refusal is a page with the reason (status 400/403) and a warning in the log
``normgrade.lti`` (and a row in ``lti_refusals``, shown on the dashboard's LTI page).

**In a frame of the LMS.** Canvas's course navigation and Moodle's embedded
launch show the tool in an iframe. Only the launch and the pages it lands on
(:data:`FRAMED_PATHS`) may be framed, and only by the configured platforms'
web origins (:meth:`LtiConfig.frame_origins`: each platform's
``frame_origins``, by default its issuer's origin); every other answer keeps
``frame-ancestors 'none'`` (grader/server/headers.py). Over https the launch's
cookies (the state, the dashboard session) are ``SameSite=None; Secure;
Partitioned`` so that they come with the requests of a cross-site frame
(:func:`set_launch_cookie`).

**The tool's keys** (``lti_keys``): an RSA 2048 key pair made by the server
at its first start and kept in the course database; ``GET /lti/jwks``
publishes the public keys not retired (``Cache-Control: max-age`` =
:data:`JWKS_MAX_AGE_S`). :func:`rotate_key` publishes a next key at once and
signs with it only :data:`JWKS_MAX_AGE_S` later (``signs_from``): a platform
holding a cached copy of our JWKS has fetched the new key by the time it
meets a token signed with it. The previous key stays published, older ones
are retired.

**Platforms** come from ``course.toml`` (:func:`platforms_of`)::

    [lti]
    tool_url = "https://grader.example.edu"     # optional: the public URL (default: as requested)

    [[lti.platform]]
    name = "Canvas"
    issuer = "https://canvas.instructure.com"
    client_id = "10000000000042"
    auth_url = "https://sso.canvaslms.com/api/lti/authorize_redirect"
    token_url = "https://sso.canvaslms.com/login/oauth2/token"
    jwks_url = "https://sso.canvaslms.com/api/lti/security/jwks"
    deployments = ["12:8865aa05b4b79b64a91a86042e43af5ea8ae79eb"]
    contexts = ["4dde05e8ca1973bcca9bffc13e1548820eee93a3"]    # optional: bound at the first instructor launch
    frame_origins = ["https://school.instructure.com"]          # optional: default the issuer's origin

JWTs are made and checked with joserfc, never by hand.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode, urlparse

import httpx
import sqlite_utils
from joserfc import errors as jose_errors
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from grader.server import auth, instructor, limits, student_sessions
from grader.server.api_schema import takes
from grader.term import class_report
from grader.server.roster import ID_RE, RosterEntry, import_roster
from grader.server.text_input import refuse_unsafe_text
from grader.student.course import Course
from grader.student.errors import GraderError
from grader.student.store import Store, utc_now

LOG = logging.getLogger("normgrade.lti")
TEMPLATES = Jinja2Templates(env=class_report.environment())  # the one environment: every template autoescaped

LEEWAY_S = 60            # clock difference allowed on exp/iat
MAX_TOKEN_AGE_S = 600    # an id_token issued longer ago than this is refused (with exp in the future or not)
STATE_TTL_S = 600        # a login must be completed within this time
JWKS_TTL_S = 600         # a platform's JWKS is fetched again after this long (or when a kid is unknown)
JWKS_REFETCH_S = 30      # ... but for an unknown kid at most once per this many seconds (forged kids cost nothing)
JWKS_MAX_AGE_S = 300     # our JWKS's Cache-Control max-age; a rotated key signs only this long after it is published
MAX_STATES = 10_000      # logins in progress at once (each unauthenticated login initiation stores one);
                         # a new login beyond them evicts the oldest
LOGINS_PER_CLIENT = 60   # login initiations one source address may start per LOGIN_WINDOW_S (more: 429 to it alone)
LOGIN_WINDOW_S = 60.0
MAX_REFUSALS = 1_000     # refusal rows kept for the dashboard (the log keeps every one)
MAX_FORM_BYTES = 64 * 1024
STATE_COOKIE = "normgrade_lti_state"
ALGORITHMS = ["RS256"]

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
RESOURCE_LINK = "LtiResourceLinkRequest"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"


class LtiConfigError(GraderError):
    """The [lti] table of course.toml is invalid (one line naming the field)."""


class LaunchRefused(GraderError):
    """A login or launch we refuse: ``reason`` is the sentence shown and logged."""

    def __init__(self, reason: str, status: int = 400, issuer: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.issuer = issuer


# --- platforms (course.toml) -----------------------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    """One registration of the tool in a platform: its issuer, our client id there, its endpoints."""

    name: str
    issuer: str
    client_id: str
    auth_url: str
    token_url: str
    jwks_url: str
    deployments: tuple[str, ...]
    token_audience: str = ""  # the `aud` of our client assertion (default: token_url)
    contexts: tuple[str, ...] = ()  # the LMS course contexts of this course (empty: bound at the first launch)
    frame_origins: tuple[str, ...] = ()  # who may frame the launch (empty: the issuer's origin)

    @property
    def assertion_audience(self) -> str:
        return self.token_audience or self.token_url

    @property
    def framing(self) -> tuple[str, ...]:
        """The origins that may frame the launch: ``frame_origins``, else the issuer's (Moodle's site)."""
        if self.frame_origins:
            return self.frame_origins
        parts = urlparse(self.issuer)
        return (f"{parts.scheme}://{parts.netloc}",) if parts.scheme in ("http", "https") and parts.netloc else ()


@dataclass(frozen=True)
class LtiConfig:
    """The tool's LTI settings: its public URL (optional) and the platforms."""

    platforms: tuple[Platform, ...] = ()
    tool_url: str = ""

    def find(self, issuer: str, client_id: str | None) -> Platform:
        """The registration of ``issuer`` (and ``client_id`` when given); LaunchRefused when none or ambiguous."""
        matches = [p for p in self.platforms if p.issuer == issuer and (not client_id or p.client_id == client_id)]
        if not matches:
            known = [p for p in self.platforms if p.issuer == issuer]
            if known:
                raise LaunchRefused(f"the platform {issuer!r} has no registration with client id {client_id!r} in "
                                    "this course: add it to [[lti.platform]] in course.toml", 403, issuer)
            raise LaunchRefused(f"the platform {issuer!r} is not registered with this course: the instructor adds "
                                "it to [[lti.platform]] in course.toml (docs/lti.md)", 403, issuer)
        if len(matches) > 1:
            raise LaunchRefused(f"the platform {issuer!r} has several registrations and the login named no "
                                "client_id: configure the platform to send client_id", 400, issuer)
        return matches[0]

    def frame_origins(self) -> tuple[str, ...]:
        """Every platform's framing origins, once each (the launch's ``frame-ancestors``)."""
        return tuple(dict.fromkeys(o for p in self.platforms for o in p.framing))


PLATFORM_FIELDS = ("name", "issuer", "client_id", "auth_url", "token_url", "jwks_url", "deployments",
                   "token_audience", "contexts", "frame_origins")
# a CSP source for frame-ancestors: scheme://host[:port], the host optionally starting with "*." (Canvas's
# *.instructure.com); nothing that could end the directive or start another (no quote, space, ';' or ',')
ORIGIN_RE = re.compile(r"https?://(\*\.)?[A-Za-z0-9.-]+(:[0-9]{1,5})?|https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def _url(value: Any, where: str) -> str:
    if not isinstance(value, str) or urlparse(value).scheme not in ("http", "https") or not urlparse(value).netloc:
        raise LtiConfigError(f"course.toml: {where} must be an http(s) URL, not {value!r}")
    return value


def _strings(item: dict[str, Any], key: str, where: str, hint: str) -> tuple[str, ...]:
    value = item.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LtiConfigError(f"course.toml: {where}.{key} must be a list of strings ({hint})")
    return tuple(value)


def parse_lti(raw: Mapping[str, Any]) -> LtiConfig:
    """Validate the [lti] table (Course.lti) into an LtiConfig; LtiConfigError on the first problem."""
    unknown = sorted(set(raw) - {"tool_url", "platform"})
    if unknown:
        raise LtiConfigError(f"course.toml: unknown field lti.{unknown[0]}: use tool_url and [[lti.platform]] "
                             "(contexts and frame_origins go in each [[lti.platform]])")
    tool_url = raw.get("tool_url", "")
    if tool_url:
        tool_url = _url(tool_url, "lti.tool_url").rstrip("/")
    items = raw.get("platform", [])
    if not isinstance(items, list):
        raise LtiConfigError("course.toml: platforms are written [[lti.platform]] (an array of tables)")
    platforms: list[Platform] = []
    for number, item in enumerate(items, 1):
        where = f"lti.platform #{number}"
        if not isinstance(item, dict):
            raise LtiConfigError(f"course.toml: {where} must be a table")
        extra = sorted(set(item) - set(PLATFORM_FIELDS))
        if extra:
            raise LtiConfigError(f"course.toml: {where} has an unknown field '{extra[0]}': use "
                                 + ", ".join(PLATFORM_FIELDS))
        for key in ("issuer", "client_id", "auth_url", "token_url", "jwks_url"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise LtiConfigError(f"course.toml: {where} needs {key} (a string; docs/lti.md lists the values)")
        deployments = item.get("deployments")
        if (not isinstance(deployments, list) or not deployments
                or not all(isinstance(d, str) and d for d in deployments)):
            raise LtiConfigError(f"course.toml: {where} needs deployments = [\"<deployment id>\", ...] "
                                 "(the LMS shows it when the tool is deployed)")
        contexts = _strings(item, "contexts", where, "the LMS course ids of this course; docs/lti.md")
        origins = _strings(item, "frame_origins", where, "like \"https://school.instructure.com\"")
        for origin in origins:
            if not ORIGIN_RE.fullmatch(origin):
                raise LtiConfigError(f"course.toml: {where}.frame_origins: {origin!r} is not an origin: write "
                                     "scheme://host[:port] with no path, like \"https://school.instructure.com\"")
        platform = Platform(
            str(item.get("name") or item["issuer"]), item["issuer"], item["client_id"],
            _url(item["auth_url"], f"{where}.auth_url"), _url(item["token_url"], f"{where}.token_url"),
            _url(item["jwks_url"], f"{where}.jwks_url"), tuple(deployments), str(item.get("token_audience", "")),
            contexts, origins,
        )
        if any(p.issuer == platform.issuer and p.client_id == platform.client_id for p in platforms):
            raise LtiConfigError(f"course.toml: {where} repeats issuer {platform.issuer!r} with client id "
                                 f"{platform.client_id!r}: list its deployments in one table")
        platforms.append(platform)
    return LtiConfig(tuple(platforms), tool_url)


def platforms_of(course: Course) -> LtiConfig:
    """The course's LTI configuration (no platforms when course.toml has no [lti])."""
    return parse_lti(course.lti)


# --- the tables: created by the store's migration 11 (grader.student.store.m11_lti) -----------------------------


# --- the tool's keys --------------------------------------------------------------------------------


def _new_key(db: sqlite_utils.Database, signs_from: float) -> str:
    kid = secrets.token_hex(8)
    key = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})
    db.table("lti_keys").insert({"kid": kid, "private_pem": key.as_pem(private=True).decode(),
                           "created_at": utc_now(), "retired": 0, "signs_from": signs_from})
    return kid


def _key_of(row: Mapping[str, Any]) -> RSAKey:
    return RSAKey.import_key(row["private_pem"], {"kid": row["kid"], "use": "sig", "alg": "RS256"})


def signing_key(store: Store, now: float | None = None) -> RSAKey:
    """The key that signs now: the newest published one whose ``signs_from`` has come (made at the first call)."""
    now = time.time() if now is None else now
    query = ("SELECT kid, private_pem FROM lti_keys WHERE retired = 0 AND signs_from <= ? "
             "ORDER BY signs_from DESC, rowid DESC LIMIT 1")
    rows = list(store.db.query(query, [now]))
    if not rows:
        with store.transaction() as db:
            if not list(db.query(query, [now])):
                _new_key(db, 0.0)
            rows = list(db.query(query, [now]))
    return _key_of(rows[0])


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
        waiting = list(db.query("SELECT kid, signs_from FROM lti_keys WHERE retired = 0 AND signs_from > ?", [now]))
        if waiting:
            starts = datetime.fromtimestamp(waiting[0]["signs_from"], timezone.utc).isoformat(timespec="seconds")
            raise RotationWaiting(f"the next key {waiting[0]['kid']} is published and signs from {starts}: "
                                  "rotate again after that")
        kid = _new_key(db, now + JWKS_MAX_AGE_S)
        keep = {kid, current.kid}
        previous = list(db.query("SELECT kid FROM lti_keys WHERE retired = 0 AND kid != ? AND signs_from <= ? "
                                 "ORDER BY signs_from DESC, rowid DESC", [current.kid, now]))
        for row in previous:  # the current key is still the one that signs: those before it go
            if row["kid"] not in keep:
                db.execute("UPDATE lti_keys SET retired = 1 WHERE kid = ?", [row["kid"]])
    return kid


def published_keys(store: Store) -> list[dict[str, Any]]:
    """The keys not retired, newest first: kid, created_at, signs_from."""
    signing_key(store)
    return list(store.db.query("SELECT kid, created_at, signs_from FROM lti_keys WHERE retired = 0 "
                               "ORDER BY signs_from DESC, rowid DESC"))


def public_jwks(store: Store) -> dict[str, Any]:
    """The tool's JWKS: the public halves of the keys not retired (newest first, the next key included)."""
    signing_key(store)
    rows = store.db.query("SELECT kid, private_pem FROM lti_keys WHERE retired = 0 "
                          "ORDER BY signs_from DESC, rowid DESC")
    return {"keys": [_key_of(row).as_dict(private=False) for row in rows]}


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
            raise LaunchRefused(f"the platform's key set at {url} could not be read ({type(exc).__name__}): "
                                "try the launch again later", 502) from exc
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
            raise LaunchRefused("the id_token's audience names several of this tool's registrations and its azp "
                                "none of them: launch again from the LMS", 403, issuer)
    if not named:
        raise LaunchRefused(f"the id_token is for audience {auds!r}, not this tool's client id "
                            f"({', '.join(p.client_id for p in candidates)}): check the client id in "
                            "course.toml", 403, issuer)
    return named[0]


def same_origin(url: str, base: str) -> bool:
    """Whether ``url`` is on the server at ``base`` (scheme, host and port)."""
    a, b = urlparse(url), urlparse(base)
    return bool(a.scheme) and (a.scheme, a.netloc.lower()) == (b.scheme, b.netloc.lower())


async def validate_launch(store: Store, config: LtiConfig, jwks: JwksCache, id_token: str, state: str,
                          cookie_state: str | None, tool: str, now: float | None = None) -> Launch:
    """The launch chain (module docstring, step 2); LaunchRefused with the first check that fails.

    ``tool`` is this tool's base URL: the token's ``target_link_uri`` must be on it.
    """
    now = time.time() if now is None else now
    if not state or not cookie_state or not secrets.compare_digest(state, cookie_state):
        raise LaunchRefused("the launch's state does not match this browser's login (the cookie is missing or "
                            "another login replaced it): launch again from the LMS; if the tool opens inside "
                            "a frame, let it open in a new window")
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
        raise LaunchRefused(f"the id_token's signature does not verify with the platform's keys "
                            f"({type(exc).__name__}): it was not made by {issuer}", 403, issuer) from exc
    claims = dict(token.claims)
    azp = claims.get("azp")
    if (len(auds) > 1 or azp is not None) and azp != platform.client_id:
        raise LaunchRefused(f"the id_token's authorized party (azp) is {azp!r}, not this tool's client id "
                            f"{platform.client_id!r}", 403, issuer)
    registry = jwt.JWTClaimsRegistry(now=int(now), leeway=LEEWAY_S, exp={"essential": True},
                                     iat={"essential": True}, sub={"essential": True},
                                     nonce={"essential": True})
    try:
        registry.validate(claims)
    except jose_errors.ExpiredTokenError as exc:
        raise LaunchRefused("the id_token has expired: launch again from the LMS (if this repeats, check the "
                            "server's clock)", 403, issuer) from exc
    except jose_errors.JoseError as exc:
        raise LaunchRefused(f"the id_token's claims are not valid ({exc.description or type(exc).__name__}): "
                            "launch again from the LMS", 403, issuer) from exc
    iat = claims["iat"]
    if not isinstance(iat, (int, float)) or iat > now + LEEWAY_S or iat < now - MAX_TOKEN_AGE_S:
        raise LaunchRefused("the id_token was issued at a time too far from now (iat): launch again from the "
                            "LMS (if this repeats, check the server's clock)", 403, issuer)
    nonce = str(claims["nonce"])
    with store.transaction() as db:
        db.execute("DELETE FROM lti_nonces WHERE used < ?", [now - 2 * MAX_TOKEN_AGE_S])
        if list(db.query("SELECT 1 FROM lti_nonces WHERE nonce = ?", [nonce])):
            raise LaunchRefused("this launch was already used (its nonce was seen before): a replayed launch "
                                "is refused; launch again from the LMS", 403, issuer)
        rows = list(db.query("SELECT nonce, issuer, client_id, created FROM lti_states WHERE state = ?", [state]))
        if not rows or rows[0]["created"] < now - STATE_TTL_S:
            raise LaunchRefused("this login is unknown or too old (state): launch again from the LMS", 400, issuer)
        if not secrets.compare_digest(rows[0]["nonce"], nonce):
            raise LaunchRefused("the id_token's nonce is not the one this login sent: launch again from the LMS",
                                403, issuer)
        if (rows[0]["issuer"], rows[0]["client_id"]) != (issuer, platform.client_id):
            raise LaunchRefused(f"the id_token is for the registration {platform.client_id!r} of {issuer}, but this "
                                f"login was started for {rows[0]['client_id']!r} of {rows[0]['issuer']}: "
                                "launch again from the LMS", 403, issuer)
        db.execute("INSERT INTO lti_nonces (nonce, issuer, used) VALUES (?, ?, ?)", [nonce, issuer, now])
        db.execute("DELETE FROM lti_states WHERE state = ? OR created < ?", [state, now - STATE_TTL_S])
    deployment = claims.get(CLAIM + "deployment_id")
    if deployment not in platform.deployments:
        raise LaunchRefused(f"the deployment {deployment!r} of {platform.name} is not one of this course's "
                            f"({', '.join(platform.deployments)}): add it to deployments in course.toml",
                            403, issuer)
    if claims.get(CLAIM + "message_type") != RESOURCE_LINK:
        raise LaunchRefused(f"the message type {claims.get(CLAIM + 'message_type')!r} is not supported: this tool "
                            f"takes {RESOURCE_LINK}", 400, issuer)
    if claims.get(CLAIM + "version") != "1.3.0":
        raise LaunchRefused(f"the LTI version {claims.get(CLAIM + 'version')!r} is not supported: 1.3.0 is",
                            400, issuer)
    link = claims.get(CLAIM + "resource_link")
    if not isinstance(link, dict) or not link.get("id"):
        raise LaunchRefused("the launch has no resource link id: launch from a link in the course", 400, issuer)
    target = claims.get(CLAIM + "target_link_uri")
    if not isinstance(target, str) or not same_origin(target, tool):
        raise LaunchRefused(f"the launch's target link {target!r} is not this tool ({tool}): set the tool's "
                            "launch URL in the LMS to this server's /lti/launch", 400, issuer)
    if not isinstance(claims.get(CLAIM + "roles"), list):
        raise LaunchRefused("the launch has no roles claim: launch again from the LMS", 400, issuer)
    if not str(claims["sub"]).strip():
        raise LaunchRefused("the launch has an empty user id (sub): anonymous launches are not accepted",
                            400, issuer)
    return Launch(platform, claims)


# --- admission: the role in this course, and this course's contexts ------------------------------------


def bound_contexts(store: Store, platform: Platform) -> dict[str, str]:
    """The LMS course contexts of this course on one registration: context id -> title.

    The platform's ``contexts`` in course.toml when it lists any, else the
    one its first instructor launch bound (``lti_bindings``).
    """
    if platform.contexts:
        return {c: "" for c in platform.contexts}
    return {r["context_id"]: r["title"] for r in store.db.query(
        "SELECT context_id, title FROM lti_bindings WHERE issuer = ? AND client_id = ? ORDER BY rowid",
        [platform.issuer, platform.client_id])}


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
        raise LaunchRefused("the launch has no course context: add the tool to a course and launch it from there",
                            400, issuer)
    with store.transaction() as db:  # read and bind in one transaction: two first launches bind one context
        bound = bound_contexts(store, platform)
        if context_id in bound:
            return
        here = _course_name(context_id, launch.context_title)
        if bound:
            ours = ", ".join(_course_name(c, t) for c, t in bound.items())
            raise LaunchRefused(f"this launch comes from the LMS course {here} of {platform.name}, but this course "
                                f"is bound to {ours}: add the tool to that course, or run a server of its own for "
                                "this one (a tool set up for the whole LMS shares one deployment among its courses)",
                                403, issuer)
        if not launch.is_instructor:
            raise LaunchRefused(f"this course is not bound to an LMS course yet: its instructor launches the tool "
                                f"once from the LMS course (yours is {here}), then launch again", 403, issuer)
        db.table("lti_bindings").insert({"issuer": issuer, "client_id": platform.client_id, "context_id": context_id,
                                   "title": launch.context_title[:200], "bound_at": utc_now(),
                                   "bound_by": launch.sub[:200]})
    LOG.warning("LTI: this course is now bound to the LMS course %r of %s (first instructor launch, %r)",
                here, platform.name, launch.sub)


def admit(store: Store, launch: Launch) -> None:
    """The launch's user may enter: a teacher or a student of this course (LaunchRefused otherwise)."""
    if launch.role is None:
        shown = ", ".join(r.rsplit("/", 1)[-1] for r in launch.roles[:5]) or "none"
        raise LaunchRefused(f"your role in this LMS course ({shown}) is neither a teacher's nor a student's: "
                            "ask to be enrolled in the course as one", 403, launch.platform.issuer)
    check_context(store, launch)


def save_context(store: Store, launch: Launch) -> str:
    """Keep the launch's context and its service endpoints (NRPS; AGS: line items, one line item, scopes).

    A launch without the NRPS or AGS claim leaves what an earlier launch told us.
    """
    nrps = launch.claims.get(NRPS_CLAIM) if isinstance(launch.claims.get(NRPS_CLAIM), dict) else None
    ags = launch.claims.get(AGS_CLAIM) if isinstance(launch.claims.get(AGS_CLAIM), dict) else None
    key = launch.context_key
    with store.transaction() as db:
        old = next(iter(db.query("SELECT * FROM lti_contexts WHERE key = ?", [key])), {})
        row = {"key": key, "issuer": launch.platform.issuer, "client_id": launch.platform.client_id,
               "deployment_id": launch.deployment_id, "context_id": launch.context_id,
               "title": launch.context_title, "updated_at": utc_now(),
               "memberships_url": old.get("memberships_url", ""), "lineitems_url": old.get("lineitems_url", ""),
               "lineitem_url": old.get("lineitem_url", ""), "scopes": old.get("scopes", "[]")}
        if nrps is not None:
            row["memberships_url"] = str(nrps.get("context_memberships_url") or "")
        if ags is not None:
            scopes = ags.get("scope")
            row.update(lineitems_url=str(ags.get("lineitems") or ""), lineitem_url=str(ags.get("lineitem") or ""),
                       scopes=json.dumps([str(x) for x in scopes] if isinstance(scopes, list) else []))
        db.table("lti_contexts").upsert(row, pk="key")
    return key


# --- the Starlette side -----------------------------------------------------------------------------


def config_of(request: Request) -> LtiConfig:
    return request.app.state.lti_config


def store_of(request: Request) -> Store:
    store = request.app.state.normgrade.store
    assert store is not None, "the application has not started"
    return store


def tool_url(request: Request) -> str:
    """The tool's public base URL: [lti] tool_url, else the URL the request came to."""
    return config_of(request).tool_url or str(request.base_url).rstrip("/")


def page(request: Request, status: int, title: str, **context: Any) -> HTMLResponse:
    st = request.app.state.normgrade
    defaults = {"refused": None, "forward": None, "forward_text": None}  # (the environment refuses undefined names)
    return TEMPLATES.TemplateResponse(request, "lti_page.html.j2",
                                      {**defaults, "title": title, "course_name": st.config.course.name, **context},
                                      status_code=status, headers={"Cache-Control": "no-store"})


def refuse(request: Request, refused: LaunchRefused) -> HTMLResponse:
    """The refusal page, the log line and the row on the dashboard."""
    LOG.warning("LTI launch refused (%s): %r", repr(refused.issuer) if refused.issuer else "unknown issuer",
                refused.reason)  # quoted (%r): a request's newline cannot start a line of the log
    try:
        with store_of(request).transaction() as db:
            db.table("lti_refusals").insert({"at": utc_now(), "issuer": refused.issuer[:200], "reason": refused.reason[:500]})
            db.execute("DELETE FROM lti_refusals WHERE id <= (SELECT max(id) FROM lti_refusals) - ?", [MAX_REFUSALS])
    except Exception:  # the page is still shown; the log has the line
        LOG.exception("could not record the refusal")
    return page(request, refused.status, "Launch refused", refused=refused.reason)


async def read_params(request: Request) -> dict[str, str]:
    """The query string, plus a small urlencoded form body on POST (first value of each field)."""
    params = {k: v for k, v in request.query_params.items()}
    refuse_unsafe_text(params, "the query")
    if request.method == "POST":
        fields = await instructor.read_urlencoded(request, MAX_FORM_BYTES)
        if fields is None:
            raise LaunchRefused("the request is too large for a launch", 413)
        params.update((key, values[0]) for key, values in fields.items())
    return params


async def login_initiation(request: Request) -> Response:
    """GET|POST /lti/login: the platform's third-party login initiation -> redirect to its auth URL.

    Each stores a state row, unauthenticated: one source address may start at
    most LOGINS_PER_CLIENT of them per LOGIN_WINDOW_S (429 to it alone), and
    beyond MAX_STATES rows the oldest are evicted, so a flood delays only the
    flooder and a real launch started during it completes.
    """
    client = request.client.host if request.client else "unknown"
    logins: limits.PerClient = request.app.state.lti_logins
    if not logins.allow(client):
        wait = logins.retry_after(client)  # not logged nor recorded: the flood would fill both
        answer = page(request, 429, "Launch refused", refused=f"more than {logins.limit} logins from {client!r} "
                                                              f"within {logins.window_s:g} s: try again in {wait} s")
        answer.headers["Retry-After"] = str(wait)
        return answer
    try:
        params = await read_params(request)
        issuer = params.get("iss", "")
        if not issuer or not params.get("login_hint") or not params.get("target_link_uri"):
            raise LaunchRefused("a login initiation needs iss, login_hint and target_link_uri: start the launch "
                                "from the LMS", 400, issuer)
        platform = config_of(request).find(issuer, params.get("client_id"))
        deployment = params.get("lti_deployment_id")
        if deployment and deployment not in platform.deployments:
            raise LaunchRefused(f"the deployment {deployment!r} of {platform.name} is not one of this course's "
                                f"({', '.join(platform.deployments)}): add it to deployments in course.toml",
                                403, issuer)
        target = params["target_link_uri"]
        if not same_origin(target, tool_url(request)):
            raise LaunchRefused(f"the target link {target!r} is not on this server ({tool_url(request)}): set the "
                                "tool's launch URL in the LMS to this server", 400, issuer)
    except LaunchRefused as refused:
        return refuse(request, refused)
    state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    with store_of(request).transaction() as db:
        db.execute("DELETE FROM lti_states WHERE created < ?", [time.time() - STATE_TTL_S])
        db.execute("DELETE FROM lti_states WHERE state IN (SELECT state FROM lti_states ORDER BY created DESC "
                   "LIMIT -1 OFFSET ?)", [MAX_STATES - 1])  # the oldest beyond MAX_STATES - 1 make room
        db.table("lti_states").insert({"state": state, "nonce": nonce, "issuer": issuer,
                                 "client_id": platform.client_id, "created": time.time()})
    query = {
        "scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
        "client_id": platform.client_id, "redirect_uri": tool_url(request) + "/lti/launch",
        "login_hint": params["login_hint"], "state": state, "nonce": nonce,
    }
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if urlparse(platform.auth_url).query else "?"
    response = RedirectResponse(platform.auth_url + separator + urlencode(query), status_code=302)
    # the platform posts the launch back cross-site, maybe inside its frame: the cookie must come with it
    set_launch_cookie(request, response, STATE_COOKIE, state, STATE_TTL_S, "/lti", over_http="lax")
    return response


def set_launch_cookie(request: Request, response: Response, name: str, value: str, max_age: int, path: str,
                      over_http: str) -> None:
    """A cookie the launch sets, made to work inside the LMS's frame.

    Over https: ``SameSite=None; Secure; Partitioned``: SameSite=None so that
    it comes with the platform's cross-site form POST and with the requests of
    a page framed by the LMS; Partitioned (CHIPS) so that a browser blocking
    third-party cookies still keeps it, in a jar of its own for the LMS's site
    (the same jar serves the launch in a new window: there the top-level site
    is ours). Over plain http a browser refuses SameSite=None (it needs
    Secure): ``over_http`` ("lax", "strict") applies, and the tool works in a
    new window only. Python's http.cookies writes Partitioned only from 3.14:
    the attribute is added to the header Starlette wrote.
    """
    secure = tool_url(request).startswith("https://")
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, secure=secure,
                        samesite="none" if secure else over_http)  # type: ignore[arg-type]
    if secure:
        index = max(i for i, (key, _) in enumerate(response.raw_headers) if key == b"set-cookie")
        response.raw_headers[index] = (b"set-cookie", response.raw_headers[index][1] + b"; Partitioned")


async def launch_endpoint(request: Request) -> Response:
    """POST /lti/launch: validate the id_token (the chain), admit the user, and land (student page or dashboard)."""
    try:
        params = await read_params(request)
        if "error" in params:
            raise LaunchRefused(f"the platform answered the login with an error: {params['error']} "
                                f"{params.get('error_description', '')}".strip(), 400)
        if request.method != "POST" or "id_token" not in params:
            raise LaunchRefused("a launch is a form POST with id_token and state: start it from the LMS", 400)
        launch = await validate_launch(store_of(request), config_of(request), request.app.state.lti_jwks,
                                       params["id_token"], params.get("state", ""), request.cookies.get(STATE_COOKIE),
                                       tool_url(request))
        admit(store_of(request), launch)
    except LaunchRefused as refused:
        return refuse(request, refused)
    return land(request, launch)


# The launch and the pages land() sends it to: only these may be framed, by the platforms' origins
# (grader/server/headers.py); a new landing page (the student's own page) is added here, beside land().
FRAMED_PATHS = ("/lti/login", "/lti/launch", "/instructor", "/student")


def land(request: Request, launch: Launch) -> Response:
    """Where an admitted launch lands: the one place that decides.

    An instructor: a dashboard session, then ``/instructor/``
    (:func:`instructor_session`). A learner: matched to the roster (added
    when new) and shown the page with their fresh token and the ``grade
    login`` command.
    """
    store = store_of(request)
    key = save_context(store, launch)
    if launch.is_instructor:
        return instructor_session(request, launch)
    member = match_member(store, launch.platform.issuer, key, launch.sub, str(launch.claims.get("email", "")),
                          str(launch.claims.get("name", "")), "learner", issue_token=False)
    token = launch_token(store, member, launch)
    LOG.info("LTI launch: %r (%r) from %r", member, launch.sub, launch.platform.issuer)
    return student_landing(request, token)


def student_landing(request: Request, token: str) -> Response:
    """Where a student's launch lands: their own page, ``/student/`` (grader/server/student_pages.py), logged
    in by a session made from the launch's fresh token, which that page shows once with the ``grade login``
    command. The page forwards with a same-site navigation, as an instructor's launch does, so the session
    cookie comes with it after the platform's cross-site POST."""
    response = page(request, 200, "Opening your page", forward="/student/", forward_text="your page")
    set_launch_cookie(request, response, student_sessions.COOKIE, student_sessions.open_session(request, token, True),
                      student_sessions.MAX_AGE_S, "/student", over_http="strict")
    return response


def new_student_id(store: Store, issuer: str, sub: str, email: str) -> str:
    """A roster id for a new LMS member: the e-mail when it is a valid id and free, else ``lti-<hash>``."""
    if email and ID_RE.fullmatch(email) and not list(store.db.query("SELECT 1 FROM roster WHERE student = ?", [email])):
        return email
    return "lti-" + context_key(issuer, "", sub)[:16]


def match_member(store: Store, issuer: str, context_key: str, sub: str, email: str, name: str, role: str,
                 issue_token: bool = True) -> str:
    """The roster id of an LMS user, adding them to the roster when new; records the membership (active).

    Matched by ``(iss, sub)`` first, then by e-mail (case-insensitive) among
    roster rows no LMS user has claimed yet. A new student gets a roster row
    and (``issue_token``) a token, as ``grade roster import`` gives one. A
    membership already recorded as it is stays untouched (no write: a sync
    that changes nothing changes no row).
    """
    student = next((r["student"] for r in store.db.query(
        "SELECT student FROM lti_users WHERE issuer = ? AND sub = ?", [issuer, sub])), None)
    if student is None and email:
        student = next((r["student"] for r in store.db.query(
            "SELECT student FROM roster WHERE lower(email) = lower(?) AND student NOT IN "
            "(SELECT student FROM lti_users) ORDER BY student LIMIT 1", [email])), None)
    if student is None and role == "learner":
        student = new_student_id(store, issuer, sub, email)
        if issue_token:
            import_roster(store, [RosterEntry(student, name, email)])
        else:
            with store.transaction() as db:
                db.execute("INSERT OR IGNORE INTO students (name, created_at) VALUES (?, ?)", [student, utc_now()])
                db.execute("INSERT OR IGNORE INTO roster (student, name, email, created_at) VALUES (?, ?, ?, ?)",
                           [student, name, email, utc_now()])
        LOG.info("LTI: new student %r (%r) from %r", student, sub, issuer)
    if student is None:
        student = "instructor"
    with store.transaction() as db:
        db.execute("INSERT OR IGNORE INTO lti_users (issuer, sub, student) VALUES (?, ?, ?)", [issuer, sub, student])
        if context_key:
            db.execute("INSERT INTO lti_members (context_key, sub, student, role, status, updated_at) "
                       "VALUES (?, ?, ?, ?, 'active', ?) ON CONFLICT (context_key, sub) DO UPDATE SET "
                       "student = excluded.student, role = excluded.role, status = 'active', "
                       "updated_at = excluded.updated_at WHERE (student, role, status) IS NOT "
                       "(excluded.student, excluded.role, 'active')",
                       [context_key, sub, student, role, utc_now()])
    return student


def launch_token(store: Store, student: str, launch: Launch) -> str:
    """A fresh token for ``student``, replacing the one an earlier launch of this LMS user showed."""
    with store.transaction() as db:
        for row in list(db.query("SELECT hash FROM lti_tokens WHERE issuer = ? AND sub = ?",
                                 [launch.platform.issuer, launch.sub])):
            db.execute("UPDATE tokens SET revoked = 1 WHERE hash = ?", [row["hash"]])
        db.execute("DELETE FROM lti_tokens WHERE issuer = ? AND sub = ?", [launch.platform.issuer, launch.sub])
        role = auth.INSTRUCTOR if launch.is_instructor else "student"
        token = auth.issue(db, student, role)
        db.table("lti_tokens").insert({"hash": auth.hash_token(token), "student": student, "issuer": launch.platform.issuer,
                                 "sub": launch.sub, "created_at": utc_now()})
    return token


def instructor_session(request: Request, launch: Launch) -> Response:
    """An instructor launch: a session of the dashboard, then on to it.

    The dashboard's session is derived from an instructor token
    (grader/server/instructor.py); the launch makes one for this LMS user
    (replacing the previous launch's) and never shows it. Its cookie is a
    launch cookie (:func:`set_launch_cookie`: SameSite=None; Secure;
    Partitioned over https, so the dashboard works inside the LMS's frame;
    SameSite=Strict over http, where the page's same-site navigation to the
    dashboard brings it along).
    """
    store = store_of(request)
    token = launch_token(store, "instructor", launch)
    LOG.info("LTI instructor launch: %r from %r", launch.sub, launch.platform.issuer)
    response = page(request, 200, "Opening the dashboard", forward="/instructor/")
    set_launch_cookie(request, response, instructor.COOKIE, instructor.new_session(request, auth.hash_token(token)),
                      instructor.SESSION_HOURS * 3600, "/instructor", over_http="strict")
    return response


@takes(public=True)
async def jwks_endpoint(request: Request) -> Response:
    """GET /lti/jwks: the tool's public keys (the platform checks our service-token requests with them)."""
    return JSONResponse(public_jwks(store_of(request)), headers={"Cache-Control": f"max-age={JWKS_MAX_AGE_S}"})


@takes(public=True)
async def tool_configuration(request: Request) -> Response:
    """GET /lti/config: the URLs and claims to enter in the LMS (JSON; docs/lti.md explains each)."""
    base = tool_url(request)
    return JSONResponse({
        "title": request.app.state.normgrade.config.course.name,
        "description": f"Hidden checks, quizzes and progress of {request.app.state.normgrade.config.course.name}",
        "oidc_initiation_url": base + "/lti/login", "target_link_uri": base + "/lti/launch",
        "redirect_uris": [base + "/lti/launch"], "public_jwk_url": base + "/lti/jwks",
        "scopes": [
            "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
            "https://purl.imsglobal.org/spec/lti-ags/scope/score",
            "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",
        ],
        "claims": ["iss", "sub", "name", "email"],
        "platforms": [{"name": p.name, "issuer": p.issuer, "client_id": p.client_id,
                       "deployments": list(p.deployments), "contexts": list(p.contexts),
                       "frame_origins": list(p.framing)} for p in config_of(request).platforms],
    })


def routes() -> list[BaseRoute]:
    """The LTI routes (mounted by grader/server/web.py)."""
    return [
        Route("/lti/login", login_initiation, methods=["GET", "POST"]),
        Route("/lti/launch", launch_endpoint, methods=["GET", "POST"]),
        Route("/lti/jwks", jwks_endpoint, methods=["GET"]),
        Route("/lti/config", tool_configuration, methods=["GET"]),
    ]
