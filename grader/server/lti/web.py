"""The Starlette side of the LTI tool: the login initiation, the launch endpoint and where a launch lands,
the JWKS and the tool's configuration, the refusal page."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any
from urllib.parse import urlencode, urlparse

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from grader.server import auth, instructor, limits, student_sessions
from grader.server.api_schema import takes
from grader.server.lti.keys import JWKS_MAX_AGE_S, public_jwks
from grader.server.lti.launch import STATE_TTL_S, Launch, admit, same_origin, save_context, validate_launch
from grader.server.lti.members import launch_token, match_member
from grader.server.lti.platforms import LaunchRefused, LtiConfig
from grader.server.text_input import refuse_unsafe_text
from grader.student.store import Store, lti_launches, utc_now
from grader.term import class_report

LOG = logging.getLogger("normgrade.lti")
TEMPLATES = Jinja2Templates(env=class_report.environment())  # the one environment: every template autoescaped

MAX_STATES = 10_000  # logins in progress at once (each unauthenticated login initiation stores one);
# a new login beyond them evicts the oldest
LOGINS_PER_CLIENT = 60  # login initiations one source address may start per LOGIN_WINDOW_S (more: 429 to it alone)
LOGIN_WINDOW_S = 60.0
MAX_REFUSALS = 1_000  # refusal rows kept for the dashboard (the log keeps every one)
MAX_FORM_BYTES = 64 * 1024
STATE_COOKIE = "normgrade_lti_state"


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
    return TEMPLATES.TemplateResponse(
        request,
        "lti_page.html.j2",
        {**defaults, "title": title, "course_name": st.config.course.name, **context},
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


def refuse(request: Request, refused: LaunchRefused) -> HTMLResponse:
    """The refusal page, the log line and the row on the dashboard."""
    LOG.warning(
        "LTI launch refused (%s): %r", repr(refused.issuer) if refused.issuer else "unknown issuer", refused.reason
    )  # quoted (%r): a request's newline cannot start a line of the log
    try:
        with store_of(request).transaction() as db:
            lti_launches.add_refusal(db, utc_now(), refused.issuer[:200], refused.reason[:500], MAX_REFUSALS)
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
        answer = page(
            request,
            429,
            "Launch refused",
            refused=f"more than {logins.limit} logins from {client!r} "
            f"within {logins.window_s:g} s: try again in {wait} s",
        )
        answer.headers["Retry-After"] = str(wait)
        return answer
    try:
        params = await read_params(request)
        issuer = params.get("iss", "")
        if not issuer or not params.get("login_hint") or not params.get("target_link_uri"):
            raise LaunchRefused(
                "a login initiation needs iss, login_hint and target_link_uri: start the launch from the LMS",
                400,
                issuer,
            )
        platform = config_of(request).find(issuer, params.get("client_id"))
        deployment = params.get("lti_deployment_id")
        if deployment and deployment not in platform.deployments:
            raise LaunchRefused(
                f"the deployment {deployment!r} of {platform.name} is not one of this course's "
                f"({', '.join(platform.deployments)}): add it to deployments in course.toml",
                403,
                issuer,
            )
        target = params["target_link_uri"]
        if not same_origin(target, tool_url(request)):
            raise LaunchRefused(
                f"the target link {target!r} is not on this server ({tool_url(request)}): set the "
                "tool's launch URL in the LMS to this server",
                400,
                issuer,
            )
    except LaunchRefused as refused:
        return refuse(request, refused)
    state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    with store_of(request).transaction() as db:
        lti_launches.add_state(
            db, state, nonce, issuer, platform.client_id, time.time(), time.time() - STATE_TTL_S, MAX_STATES - 1
        )  # the oldest beyond MAX_STATES - 1 go
    query = {
        "scope": "openid",
        "response_type": "id_token",
        "response_mode": "form_post",
        "prompt": "none",
        "client_id": platform.client_id,
        "redirect_uri": tool_url(request) + "/lti/launch",
        "login_hint": params["login_hint"],
        "state": state,
        "nonce": nonce,
    }
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if urlparse(platform.auth_url).query else "?"
    response = RedirectResponse(platform.auth_url + separator + urlencode(query), status_code=302)
    # the platform posts the launch back cross-site, maybe inside its frame: the cookie must come with it
    set_launch_cookie(request, response, STATE_COOKIE, state, STATE_TTL_S, "/lti", over_http="lax")
    return response


def set_launch_cookie(
    request: Request, response: Response, name: str, value: str, max_age: int, path: str, over_http: str
) -> None:
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
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,
        secure=secure,
        samesite="none" if secure else over_http,  # type: ignore[arg-type]
    )
    if secure:
        index = max(i for i, (key, _) in enumerate(response.raw_headers) if key == b"set-cookie")
        response.raw_headers[index] = (b"set-cookie", response.raw_headers[index][1] + b"; Partitioned")


async def launch_endpoint(request: Request) -> Response:
    """POST /lti/launch: validate the id_token (the chain), admit the user, and land (student page or dashboard)."""
    try:
        params = await read_params(request)
        if "error" in params:
            raise LaunchRefused(
                f"the platform answered the login with an error: {params['error']} "
                f"{params.get('error_description', '')}".strip(),
                400,
            )
        if request.method != "POST" or "id_token" not in params:
            raise LaunchRefused("a launch is a form POST with id_token and state: start it from the LMS", 400)
        launch = await validate_launch(
            store_of(request),
            config_of(request),
            request.app.state.lti_jwks,
            params["id_token"],
            params.get("state", ""),
            request.cookies.get(STATE_COOKIE),
            tool_url(request),
        )
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
    member = match_member(
        store,
        launch.platform.issuer,
        key,
        launch.sub,
        str(launch.claims.get("email", "")),
        str(launch.claims.get("name", "")),
        "learner",
        issue_token=False,
    )
    token = launch_token(store, member, launch)
    LOG.info("LTI launch: %r (%r) from %r", member, launch.sub, launch.platform.issuer)
    return student_landing(request, token)


def student_landing(request: Request, token: str) -> Response:
    """Where a student's launch lands: their own page, ``/student/`` (grader/server/student_pages.py), logged
    in by a session made from the launch's fresh token, which that page shows once with the ``grade login``
    command. The page forwards with a same-site navigation, as an instructor's launch does, so the session
    cookie comes with it after the platform's cross-site POST."""
    response = page(request, 200, "Opening your page", forward="/student/", forward_text="your page")
    set_launch_cookie(
        request,
        response,
        student_sessions.COOKIE,
        student_sessions.open_session(request, token, True),
        student_sessions.MAX_AGE_S,
        "/student",
        over_http="strict",
    )
    return response


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
    set_launch_cookie(
        request,
        response,
        instructor.COOKIE,
        instructor.new_session(request, auth.hash_token(token)),
        instructor.SESSION_HOURS * 3600,
        "/instructor",
        over_http="strict",
    )
    return response


@takes(public=True)
async def jwks_endpoint(request: Request) -> Response:
    """GET /lti/jwks: the tool's public keys (the platform checks our service-token requests with them)."""
    return JSONResponse(public_jwks(store_of(request)), headers={"Cache-Control": f"max-age={JWKS_MAX_AGE_S}"})


@takes(public=True)
async def tool_configuration(request: Request) -> Response:
    """GET /lti/config: the URLs and claims to enter in the LMS (JSON; docs/lti.md explains each)."""
    base = tool_url(request)
    return JSONResponse(
        {
            "title": request.app.state.normgrade.config.course.name,
            "description": f"Hidden checks, quizzes and progress of {request.app.state.normgrade.config.course.name}",
            "oidc_initiation_url": base + "/lti/login",
            "target_link_uri": base + "/lti/launch",
            "redirect_uris": [base + "/lti/launch"],
            "public_jwk_url": base + "/lti/jwks",
            "scopes": [
                "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                "https://purl.imsglobal.org/spec/lti-ags/scope/score",
                "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",
            ],
            "claims": ["iss", "sub", "name", "email"],
            "platforms": [
                {
                    "name": p.name,
                    "issuer": p.issuer,
                    "client_id": p.client_id,
                    "deployments": list(p.deployments),
                    "contexts": list(p.contexts),
                    "frame_origins": list(p.framing),
                }
                for p in config_of(request).platforms
            ],
        }
    )


def routes() -> list[BaseRoute]:
    """The LTI routes (mounted by grader/server/web.py)."""
    return [
        Route("/lti/login", login_initiation, methods=["GET", "POST"]),
        Route("/lti/launch", launch_endpoint, methods=["GET", "POST"]),
        Route("/lti/jwks", jwks_endpoint, methods=["GET"]),
        Route("/lti/config", tool_configuration, methods=["GET"]),
    ]
