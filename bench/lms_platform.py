"""A small LMS on a loopback port that plays the platform's side of LTI 1.3 for the tests.

From the IMS specifications (LTI Core 1.3, Security Framework 1.0, NRPS 2.0,
AGS 2.0), only what a tool meets:

- ``GET /start?user=U[&context=C][&client=K]``: a course page's link: an
  auto-submitting form that starts the third-party login at the tool's
  ``/lti/login`` (from course C, for the registration with client id K);
- ``GET /course?user=U[&context=C]``: the LMS's course page showing the tool
  *inside an iframe* (``/start`` in the frame), as Canvas's course navigation
  and Moodle's embedded launch do;
- ``GET /auth``: the OIDC authorization endpoint: checks ``client_id`` (one of
  the registrations), the registered ``redirect_uri``,
  ``response_type``/``response_mode``/``scope``/``prompt``, then answers with
  an auto-submitting form that POSTs the signed ``id_token`` and the ``state``
  to the redirect URI;
- ``GET /jwks``: the platform's public keys;
- ``POST /token``: client credentials with a JWT client assertion, checked
  against the tool's JWKS (``aud`` = this URL, ``iss`` = ``sub`` = client id).
  With ``jwks_cache_s`` the tool's JWKS is fetched once and kept that long on
  the platform's ``clock`` (an unknown ``kid`` does not refetch it), as LMSs
  cache it;
- ``GET /nrps/{context}``: the membership container of that course (pages of
  ``page_size``, ``Link: rel="next"``);
- ``GET|POST /ags/{context}/lineitems`` (pages of ``page_size`` with
  ``Link: rel="next"``; ``filter_line_items = False`` ignores the
  ``resource_id`` filter, as some platforms do),
  ``POST /ags/{context}/lineitems/{n}/scores``: a score older than the last one
  taken for that user and line item is refused with 409 (scores out of order);
  ``score_status`` answers every score with that status instead.

The launch's AGS claim follows ``ags_scopes`` and ``grade_sync_only`` (Moodle's
"grade sync only": the ``score`` scope and one ``lineitem``, no line items
container). ``down = True`` makes every service endpoint answer 503 (an LMS
that is down). It runs in a thread of the test process (uvicorn), on
127.0.0.1 only; :meth:`start_tls` adds a second, https listener for the
browser's pages (the service endpoints stay on plain http).
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, KeySetSerialization, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from bench.procs import HOST, free_port, wait_for

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
INSTITUTION_ADMIN = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"
SYSTEM_ADMIN = "http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/scope/"
AGS_SCOPES = [AGS + "lineitem", AGS + "score"]


@dataclass
class User:
    sub: str
    name: str
    email: str
    roles: list[str]
    status: str = "Active"
    contexts: tuple[str, ...] = ()  # the courses they are a member of (empty: the platform's first course)


def autosubmit(action: str, fields: dict[str, str]) -> HTMLResponse:
    """A page whose form POSTs ``fields`` to ``action`` as soon as it loads (what LMSs do)."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items()
    )
    return HTMLResponse(
        f'<!doctype html><html><body><form id="f" method="post" action="{html.escape(action)}">'
        f"{inputs}<noscript><button>Continue</button></noscript></form>"
        '<script>document.getElementById("f").submit()</script></body></html>'
    )


def paged(
    request: Request, url: str, items: list[dict[str, Any]], size: int
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One page of ``items`` from ``?from=N`` and the ``Link: rel="next"`` header when more follow."""
    start = int(request.query_params.get("from", 0))
    headers = {}
    if start + size < len(items):
        query = [(k, v) for k, v in request.query_params.items() if k != "from"] + [("from", str(start + size))]
        from urllib.parse import urlencode

        headers["Link"] = f'<{url}?{urlencode(query)}>; rel="next"'
    return items[start : start + size], headers


@dataclass
class LmsPlatform:
    """The platform: its keys, registrations of one tool, courses, users, line items and the scores it received."""

    tool_url: str = ""
    tool_jwks: Callable[[], dict[str, Any]] | None = None
    client_id: str = "normgrade-client-1"
    other_clients: tuple[str, ...] = ()  # more registrations of the tool (same issuer, other client ids)
    deployment_id: str = "deployment-1"
    context_id: str = "course-101"
    titles: dict[str, str] = field(default_factory=lambda: {"course-101": "Deep networks 101"})
    users: dict[str, User] = field(default_factory=dict)
    page_size: int = 2
    down: bool = False
    ags_scopes: list[str] = field(default_factory=lambda: list(AGS_SCOPES))
    grade_sync_only: bool = False
    filter_line_items: bool = True
    score_status: int | None = None
    jwks_cache_s: float | None = None
    clock: Callable[[], float] = time.time
    line_items: list[dict[str, Any]] = field(default_factory=list)
    scores: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)  # scores answered with a 4xx
    created: list[dict[str, Any]] = field(default_factory=list)  # line item creation requests
    tokens: dict[str, list[str]] = field(default_factory=dict)
    token_requests: list[str] = field(default_factory=list)  # "ok" or the error of each token request
    port: int = 0
    tls_port: int = 0
    tls_host: str = ""
    key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "lms-key-1", "use": "sig", "alg": "RS256"})
    )
    servers: list[tuple[uvicorn.Server, threading.Thread]] = field(default_factory=list)
    cached_jwks: tuple[float, dict[str, Any]] | None = None

    # -- addresses -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def browser_url(self) -> str:
        """Where the browser reaches the LMS's pages: the https listener when there is one."""
        return f"https://{self.tls_host}:{self.tls_port}" if self.tls_port else self.url

    @property
    def issuer(self) -> str:
        return self.url

    def platform_table(self, client_id: str | None = None, **extra: Any) -> dict[str, Any]:
        """One [[lti.platform]] table for this platform (a registration), as parsed TOML."""
        return {
            "name": "Test LMS",
            "issuer": self.issuer,
            "client_id": client_id or self.client_id,
            "auth_url": self.browser_url + "/auth",
            "token_url": self.url + "/token",
            "jwks_url": self.url + "/jwks",
            "deployments": [self.deployment_id],
            **extra,
        }

    def lti_table(self, **extra: Any) -> dict[str, Any]:
        """The [lti] table (Course.lti) with one registration per client id; ``extra`` goes into each."""
        return {"platform": [self.platform_table(c, **extra) for c in (self.client_id, *self.other_clients)]}

    def course_toml(self, tool_url: str = "", **extra: Any) -> str:
        """The same [lti] table as course.toml text."""
        lines = ["[lti]"] + ([f'tool_url = "{tool_url}"'] if tool_url else [])
        for table in self.lti_table(**extra)["platform"]:
            lines.append("\n[[lti.platform]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
        return "\n".join(lines) + "\n"

    # -- tokens ----------------------------------------------------------------------------------

    def claims(
        self, user: User, nonce: str, context: str | None = None, client_id: str | None = None, **changes: Any
    ) -> dict[str, Any]:
        now = int(time.time())
        context = context or (user.contexts[0] if user.contexts else self.context_id)
        client = client_id or self.client_id
        ags: dict[str, Any] = {"scope": list(self.ags_scopes)}
        if self.grade_sync_only:
            ags["lineitem"] = f"{self.url}/ags/{context}/lineitems/1"
        else:
            ags["lineitems"] = f"{self.url}/ags/{context}/lineitems"
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": client,
            "azp": client,
            "sub": user.sub,
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            "name": user.name,
            "email": user.email,
            CLAIM + "message_type": "LtiResourceLinkRequest",
            CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": self.deployment_id,
            CLAIM + "target_link_uri": self.tool_url + "/lti/launch",
            CLAIM + "resource_link": {"id": "link-1", "title": "normgrade"},
            CLAIM + "roles": user.roles,
            CLAIM + "context": {"id": context, "title": self.titles.get(context, context)},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": f"{self.url}/nrps/{context}",
                "service_versions": ["2.0"],
            },
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": ags,
        }
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}

    def id_token(self, claims: dict[str, Any], key: RSAKey | None = None) -> str:
        key = key or self.key
        return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)

    def tool_keys(self) -> dict[str, Any]:
        """The tool's JWKS as this platform sees it: fetched, or its cached copy (``jwks_cache_s``)."""
        assert self.tool_jwks is not None
        if self.jwks_cache_s is None:
            return self.tool_jwks()
        if self.cached_jwks is None or self.clock() - self.cached_jwks[0] > self.jwks_cache_s:
            self.cached_jwks = (self.clock(), self.tool_jwks())
        return self.cached_jwks[1]

    def members_of(self, context: str) -> list[User]:
        return [u for u in self.users.values() if context in (u.contexts or (self.context_id,))]

    # -- the app -----------------------------------------------------------------------------------

    def app(self) -> Starlette:
        def start(request: Request) -> Response:
            q = request.query_params
            context = q.get("context", "")
            return autosubmit(
                self.tool_url + "/lti/login",
                {
                    "iss": self.issuer,
                    "login_hint": q["user"],
                    "target_link_uri": self.tool_url + "/lti/launch",
                    "lti_message_hint": f"link-1|{context}",
                    "client_id": q.get("client", self.client_id),
                    "lti_deployment_id": self.deployment_id,
                },
            )

        def course(request: Request) -> Response:
            q = request.query_params
            source = f"/start?user={q['user']}&context={q.get('context', '')}"
            return HTMLResponse(
                '<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">'
                '<link rel="icon" href="data:,"><title>Deep networks 101 - Test LMS</title></head><body style="margin:0;font-family:sans-serif">'
                '<h1 style="margin:.5rem">Deep networks 101</h1><p style="margin:.5rem">The course tool, inside the '
                f'LMS:</p><iframe id="tool" title="normgrade" src="{html.escape(source)}" '
                'style="display:block;width:100%;height:760px;border:1px solid #888;box-sizing:border-box">'
                "</iframe></body></html>"
            )

        def auth(request: Request) -> Response:
            q = request.query_params
            problems = []
            if q.get("client_id") not in (self.client_id, *self.other_clients):
                problems.append("client_id")
            if q.get("redirect_uri") != self.tool_url + "/lti/launch":
                problems.append("redirect_uri")
            if (q.get("response_type"), q.get("response_mode"), q.get("scope"), q.get("prompt")) != (
                "id_token",
                "form_post",
                "openid",
                "none",
            ):
                problems.append("response parameters")
            user = self.users.get(q.get("login_hint", ""))
            if user is None:
                problems.append("login_hint")
            if problems or not q.get("nonce") or not q.get("state"):
                return JSONResponse({"error": "invalid_request", "problems": problems}, 400)
            context = q.get("lti_message_hint", "").partition("|")[2] or None
            assert user is not None  # problems holds login_hint otherwise
            token = self.id_token(self.claims(user, q["nonce"], context=context, client_id=q["client_id"]))
            return autosubmit(q["redirect_uri"], {"id_token": token, "state": q["state"]})

        def jwks(request: Request) -> Response:
            return JSONResponse({"keys": [self.key.as_dict(private=False)]})

        async def token(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            from urllib.parse import parse_qs

            form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
            if (
                form.get("grant_type") != "client_credentials"
                or form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            ):
                return JSONResponse({"error": "unsupported_grant_type"}, 400)
            try:
                decoded = jwt.decode(
                    str(form.get("client_assertion")),
                    KeySet.import_key_set(cast(KeySetSerialization, self.tool_keys())),
                    algorithms=["RS256"],
                )
                client = decoded.claims.get("iss")
                if client not in (self.client_id, *self.other_clients):
                    raise ValueError("unknown client")
                jwt.JWTClaimsRegistry(
                    now=int(self.clock()),
                    sub={"essential": True, "value": client},
                    aud={"essential": True, "value": self.url + "/token"},
                    exp={"essential": True},
                    jti={"essential": True},
                ).validate(decoded.claims)
            except Exception as exc:  # noqa: BLE001 - any bad assertion is invalid_client
                self.token_requests.append(f"invalid_client: {type(exc).__name__}")
                return JSONResponse({"error": "invalid_client", "detail": type(exc).__name__}, 401)
            scopes = str(form.get("scope", "")).split()
            if any(s.startswith(AGS) and s not in self.ags_scopes for s in scopes):
                self.token_requests.append("invalid_scope")
                return JSONResponse({"error": "invalid_scope"}, 400)
            self.token_requests.append("ok")
            access = secrets.token_urlsafe(16)
            self.tokens[access] = scopes
            return JSONResponse(
                {"access_token": access, "token_type": "Bearer", "expires_in": 3600, "scope": form.get("scope", "")}
            )

        def authorized(request: Request, *scopes: str) -> bool:
            header = request.headers.get("authorization", "")
            return header.startswith("Bearer ") and any(s in self.tokens.get(header[7:], []) for s in scopes)

        def nrps(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            if not authorized(request, "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"):
                return JSONResponse({"error": "unauthorized"}, 401)
            context = request.path_params["ctx"]
            members = [
                {"user_id": u.sub, "name": u.name, "email": u.email, "roles": u.roles, "status": u.status}
                for u in self.members_of(context)
            ]
            page, headers = paged(request, f"{self.url}/nrps/{context}", members, self.page_size)
            return JSONResponse(
                {"id": str(request.url), "context": {"id": context}, "members": page},
                headers=headers,
                media_type="application/vnd.ims.lti-nrps.v2.membershipcontainer+json",
            )

        async def lineitems(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            context = request.path_params["ctx"]
            if request.method == "GET":
                if not authorized(request, AGS + "lineitem", AGS + "lineitem.readonly"):
                    return JSONResponse({"error": "unauthorized"}, 401)
                wanted = request.query_params.get("resource_id") if self.filter_line_items else None
                found = [
                    i
                    for i in self.line_items
                    if i["context"] == context and (wanted is None or i["resourceId"] == wanted)
                ]
                page, headers = paged(request, f"{self.url}/ags/{context}/lineitems", found, self.page_size)
                return JSONResponse(
                    page, headers=headers, media_type="application/vnd.ims.lis.v2.lineitemcontainer+json"
                )
            if not authorized(request, AGS + "lineitem"):
                return JSONResponse({"error": "unauthorized"}, 401)
            doc = json.loads(await request.body())
            self.created.append(doc)
            item = {**doc, "id": f"{self.url}/ags/{context}/lineitems/{len(self.line_items) + 1}", "context": context}
            self.line_items.append(item)
            return JSONResponse(item, 201, media_type="application/vnd.ims.lis.v2.lineitem+json")

        async def scores(request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            if not authorized(request, AGS + "score"):
                return JSONResponse({"error": "unauthorized"}, 401)
            if request.headers.get("content-type") != "application/vnd.ims.lis.v1.score+json":
                return JSONResponse({"error": "content type"}, 415)
            doc = json.loads(await request.body())
            item = int(request.path_params["n"])
            if self.score_status is not None:
                self.refused.append({**doc, "lineitem": item, "status": self.score_status})
                return JSONResponse({"error": "refused by the test"}, self.score_status)
            last = self.latest_score(str(doc.get("userId")), item)
            if last is not None and str(doc.get("timestamp")) < str(last["timestamp"]):
                self.refused.append({**doc, "lineitem": item, "status": 409})
                return JSONResponse({"error": "a newer score was already received"}, 409)
            self.scores.append({**doc, "lineitem": item})
            return Response(status_code=204)

        return Starlette(
            routes=[
                Route("/start", start),
                Route("/course", course),
                Route("/auth", auth),
                Route("/jwks", jwks),
                Route("/token", token, methods=["POST"]),
                Route("/nrps/{ctx}", nrps),
                Route("/ags/{ctx}/lineitems", lineitems, methods=["GET", "POST"]),
                Route("/ags/{ctx}/lineitems/{n:int}/scores", scores, methods=["POST"]),
            ]
        )

    # -- running -------------------------------------------------------------------------------------

    def _serve(self, port: int, **ssl: Any) -> None:
        config = uvicorn.Config(self.app(), host=HOST, port=port, log_level="warning", lifespan="off", **ssl)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="lms-platform", daemon=True)
        thread.start()
        self.servers.append((server, thread))
        wait_for(lambda: server.started, 30, "the LMS fixture to listen")

    def start(self) -> "LmsPlatform":
        self.port = free_port()
        self._serve(self.port)
        return self

    def start_tls(self, certfile: str, keyfile: str, host_name: str) -> "LmsPlatform":
        """A second listener over https for the browser's pages; the browser resolves ``host_name`` to 127.0.0.1."""
        self.tls_port, self.tls_host = free_port(), host_name
        self._serve(self.tls_port, ssl_certfile=certfile, ssl_keyfile=keyfile)
        return self

    def stop(self) -> None:
        for server, _ in self.servers:
            server.should_exit = True
        for _, thread in self.servers:
            thread.join(timeout=10)

    def latest_score(self, sub: str, item: int) -> dict[str, Any] | None:
        found = [s for s in self.scores if s["userId"] == sub and s["lineitem"] == item]
        return found[-1] if found else None


def login_redirect(client: Any, lms: LmsPlatform, user: str = "ada", **changes: str) -> Any:
    """The platform's login initiation at the tool (``client``: an httpx.Client on the tool's URL)."""
    params = {
        "iss": lms.issuer,
        "login_hint": user,
        "target_link_uri": lms.tool_url + "/lti/launch",
        "client_id": lms.client_id,
        "lti_deployment_id": lms.deployment_id,
        **changes,
    }
    return client.post("/lti/login", data=params)


def launch(client: Any, lms: LmsPlatform, user: str = "ada", **changes: str) -> Any:
    """The whole launch as a browser does it: login initiation, the platform's auth, the form POST back."""
    import httpx

    redirect = login_redirect(client, lms, user, **changes)
    assert redirect.status_code == 302, redirect.text
    answer = httpx.get(redirect.headers["location"], timeout=10)
    assert answer.status_code == 200, answer.text
    return client.post("/lti/launch", data=form_fields(answer.text))


def auth_url_params(location: str) -> dict[str, str]:
    from urllib.parse import parse_qs, urlparse

    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}


def form_fields(page: str) -> dict[str, str]:
    """The hidden fields of an auto-submitting form page."""
    import re

    return {
        html.unescape(m.group(1)): html.unescape(m.group(2))
        for m in re.finditer(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page)
    }


__all__ = [
    "LmsPlatform",
    "User",
    "LEARNER",
    "INSTRUCTOR",
    "INSTITUTION_ADMIN",
    "SYSTEM_ADMIN",
    "CLAIM",
    "AGS",
    "form_fields",
    "auth_url_params",
    "launch",
    "login_redirect",
]
