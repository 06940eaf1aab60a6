"""A small LMS on a loopback port that plays the platform's side of LTI 1.3 for the tests.

From the IMS specifications (LTI Core 1.3, Security Framework 1.0, NRPS 2.0,
AGS 2.0), only what a tool meets:

- ``GET /start?user=U[&context=C]``: a course page's link: an auto-submitting
  form that starts the third-party login at the tool's ``/lti/login``;
- ``GET /auth``: the OIDC authorization endpoint: checks ``client_id``, the
  registered ``redirect_uri``, ``response_type``/``response_mode``/``scope``/
  ``prompt``, then answers with an auto-submitting form that POSTs the signed
  ``id_token`` and the ``state`` to the redirect URI;
- ``GET /jwks``: the platform's public keys;
- ``POST /token``: client credentials with a JWT client assertion, checked
  against the tool's JWKS (``aud`` = this URL, ``iss`` = ``sub`` = client id);
- ``GET /nrps/{context}``: the membership container (pages of ``page_size``,
  ``Link: rel="next"``);
- ``GET|POST /ags/{context}/lineitems``, ``POST /ags/{context}/lineitems/{n}/scores``.

``down = True`` makes every service endpoint answer 503 (an LMS that is
down). It runs in a thread of the test process (uvicorn), on 127.0.0.1 only.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from server_util import HOST, free_port, wait_for

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"


@dataclass
class User:
    sub: str
    name: str
    email: str
    roles: list[str]
    status: str = "Active"


def autosubmit(action: str, fields: dict[str, str]) -> HTMLResponse:
    """A page whose form POSTs ``fields`` to ``action`` as soon as it loads (what LMSs do)."""
    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items())
    return HTMLResponse(f'<!doctype html><html><body><form id="f" method="post" action="{html.escape(action)}">'
                        f'{inputs}<noscript><button>Continue</button></noscript></form>'
                        '<script>document.getElementById("f").submit()</script></body></html>')


@dataclass
class LmsPlatform:
    """The platform: its keys, registration of one tool, users, line items and the scores it received."""

    tool_url: str = ""
    tool_jwks: Callable[[], dict[str, Any]] | None = None
    client_id: str = "normgrade-client-1"
    deployment_id: str = "deployment-1"
    context_id: str = "course-101"
    users: dict[str, User] = field(default_factory=dict)
    page_size: int = 2
    down: bool = False
    line_items: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)  # line item creation requests
    tokens: dict[str, list[str]] = field(default_factory=dict)
    port: int = 0
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(
        2048, parameters={"kid": "lms-key-1", "use": "sig", "alg": "RS256"}))
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    # -- addresses -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def issuer(self) -> str:
        return self.url

    def course_toml(self, extra_platforms: str = "") -> str:
        """The [lti] table a course.toml needs for this platform."""
        return (f'[lti]\n\n[[lti.platform]]\nname = "Test LMS"\nissuer = "{self.issuer}"\n'
                f'client_id = "{self.client_id}"\nauth_url = "{self.url}/auth"\ntoken_url = "{self.url}/token"\n'
                f'jwks_url = "{self.url}/jwks"\ndeployments = ["{self.deployment_id}"]\n' + extra_platforms)

    def lti_table(self) -> dict[str, Any]:
        """The same, as the parsed TOML table (Course.lti)."""
        return {"platform": [{"name": "Test LMS", "issuer": self.issuer, "client_id": self.client_id,
                              "auth_url": self.url + "/auth", "token_url": self.url + "/token",
                              "jwks_url": self.url + "/jwks", "deployments": [self.deployment_id]}]}

    # -- tokens ----------------------------------------------------------------------------------

    def claims(self, user: User, nonce: str, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer, "aud": self.client_id, "azp": self.client_id, "sub": user.sub,
            "iat": now, "exp": now + 300, "nonce": nonce, "name": user.name, "email": user.email,
            CLAIM + "message_type": "LtiResourceLinkRequest", CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": self.deployment_id, CLAIM + "target_link_uri": self.tool_url + "/lti/launch",
            CLAIM + "resource_link": {"id": "link-1", "title": "normgrade"}, CLAIM + "roles": user.roles,
            CLAIM + "context": {"id": self.context_id, "title": "Deep networks 101"},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": f"{self.url}/nrps/{self.context_id}", "service_versions": ["2.0"]},
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                          "https://purl.imsglobal.org/spec/lti-ags/scope/score"],
                "lineitems": f"{self.url}/ags/{self.context_id}/lineitems"},
        }
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}

    def id_token(self, claims: dict[str, Any], key: RSAKey | None = None) -> str:
        key = key or self.key
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)

    # -- the app -----------------------------------------------------------------------------------

    def app(self) -> Starlette:
        def start(request: Request) -> Response:
            q = request.query_params
            return autosubmit(self.tool_url + "/lti/login", {
                "iss": self.issuer, "login_hint": q["user"], "target_link_uri": self.tool_url + "/lti/launch",
                "lti_message_hint": "link-1", "client_id": self.client_id, "lti_deployment_id": self.deployment_id})

        def auth(request: Request) -> Response:
            q = request.query_params
            problems = []
            if q.get("client_id") != self.client_id:
                problems.append("client_id")
            if q.get("redirect_uri") != self.tool_url + "/lti/launch":
                problems.append("redirect_uri")
            if (q.get("response_type"), q.get("response_mode"), q.get("scope"), q.get("prompt")) != (
                    "id_token", "form_post", "openid", "none"):
                problems.append("response parameters")
            user = self.users.get(q.get("login_hint", ""))
            if user is None:
                problems.append("login_hint")
            if problems or not q.get("nonce") or not q.get("state"):
                return JSONResponse({"error": "invalid_request", "problems": problems}, 400)
            token = self.id_token(self.claims(user, q["nonce"]))
            return autosubmit(q["redirect_uri"], {"id_token": token, "state": q["state"]})

        def jwks(request: Request) -> Response:
            return JSONResponse({"keys": [self.key.as_dict(private=False)]})

        async def token(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            from urllib.parse import parse_qs

            form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
            if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != \
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
                return JSONResponse({"error": "unsupported_grant_type"}, 400)
            assert self.tool_jwks is not None
            try:
                decoded = jwt.decode(str(form.get("client_assertion")), KeySet.import_key_set(self.tool_jwks()),
                                     algorithms=["RS256"])
                jwt.JWTClaimsRegistry(iss={"essential": True, "value": self.client_id},
                                      sub={"essential": True, "value": self.client_id},
                                      aud={"essential": True, "value": self.url + "/token"},
                                      exp={"essential": True}, jti={"essential": True}).validate(decoded.claims)
            except Exception as exc:  # noqa: BLE001 - any bad assertion is invalid_client
                return JSONResponse({"error": "invalid_client", "detail": type(exc).__name__}, 401)
            access = secrets.token_urlsafe(16)
            self.tokens[access] = str(form.get("scope", "")).split()
            return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                                 "scope": form.get("scope", "")})

        def authorized(request: Request, scope: str) -> bool:
            header = request.headers.get("authorization", "")
            return header.startswith("Bearer ") and scope in self.tokens.get(header[7:], [])

        def nrps(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            if not authorized(request, "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"):
                return JSONResponse({"error": "unauthorized"}, 401)
            members = [{"user_id": u.sub, "name": u.name, "email": u.email, "roles": u.roles, "status": u.status}
                       for u in self.users.values()]
            start = int(request.query_params.get("from", 0))
            page = members[start:start + self.page_size]
            headers = {}
            if start + self.page_size < len(members):
                headers["Link"] = f'<{self.url}/nrps/{self.context_id}?from={start + self.page_size}>; rel="next"'
            return JSONResponse({"id": str(request.url), "context": {"id": self.context_id},
                                 "members": page}, headers=headers,
                                media_type="application/vnd.ims.lti-nrps.v2.membershipcontainer+json")

        async def lineitems(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            if not authorized(request, "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"):
                return JSONResponse({"error": "unauthorized"}, 401)
            if request.method == "GET":
                wanted = request.query_params.get("resource_id")
                return JSONResponse([i for i in self.line_items if wanted is None or i["resourceId"] == wanted],
                                    media_type="application/vnd.ims.lis.v2.lineitemcontainer+json")
            doc = json.loads(await request.body())
            self.created.append(doc)
            item = {**doc, "id": f"{self.url}/ags/{self.context_id}/lineitems/{len(self.line_items) + 1}"}
            self.line_items.append(item)
            return JSONResponse(item, 201, media_type="application/vnd.ims.lis.v2.lineitem+json")

        async def scores(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            if not authorized(request, "https://purl.imsglobal.org/spec/lti-ags/scope/score"):
                return JSONResponse({"error": "unauthorized"}, 401)
            if request.headers.get("content-type") != "application/vnd.ims.lis.v1.score+json":
                return JSONResponse({"error": "content type"}, 415)
            doc = json.loads(await request.body())
            item = int(request.path_params["n"])
            self.scores.append({**doc, "lineitem": item})
            return Response(status_code=204)

        return Starlette(routes=[
            Route("/start", start), Route("/auth", auth), Route("/jwks", jwks),
            Route("/token", token, methods=["POST"]), Route("/nrps/{ctx}", nrps),
            Route("/ags/{ctx}/lineitems", lineitems, methods=["GET", "POST"]),
            Route("/ags/{ctx}/lineitems/{n:int}/scores", scores, methods=["POST"]),
        ])

    # -- running -------------------------------------------------------------------------------------

    def start(self) -> "LmsPlatform":
        self.port = free_port()
        config = uvicorn.Config(self.app(), host=HOST, port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="lms-platform", daemon=True)
        self.thread.start()
        wait_for(lambda: self.server is not None and self.server.started, 30, "the LMS fixture to listen")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)

    def latest_score(self, sub: str, item: int) -> dict[str, Any] | None:
        found = [s for s in self.scores if s["userId"] == sub and s["lineitem"] == item]
        return found[-1] if found else None


def auth_url_params(location: str) -> dict[str, str]:
    from urllib.parse import parse_qs, urlparse

    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}


def form_fields(page: str) -> dict[str, str]:
    """The hidden fields of an auto-submitting form page."""
    import re

    return {html.unescape(m.group(1)): html.unescape(m.group(2))
            for m in re.finditer(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page)}


__all__ = ["LmsPlatform", "User", "LEARNER", "INSTRUCTOR", "CLAIM", "form_fields", "auth_url_params"]
