"""The course server as an LTI 1.3 tool: platforms, the tool's keys, the OIDC login and the launch.

One module per concern: ``platforms`` (course.toml's [lti], the errors), ``keys`` (the tool's signing keys),
``launch`` (the platform's key set, the chain of checks, admission), ``members`` (an LMS user in the roster)
and ``web`` (the Starlette side: the endpoints and where a launch lands). The tables are the store's
(grader/student/store/lti_*.py).

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

from grader.server.lti.keys import JWKS_MAX_AGE_S, RotationWaiting, public_jwks, published_keys, rotate_key, signing_key
from grader.server.lti.launch import (
    AGS_CLAIM,
    CLAIM,
    JWKS_REFETCH_S,
    JWKS_TTL_S,
    LEEWAY_S,
    MAX_TOKEN_AGE_S,
    NRPS_CLAIM,
    STATE_TTL_S,
    JwksCache,
    Launch,
    admit,
    bound_contexts,
    check_context,
    context_key,
    context_role,
    save_context,
    validate_launch,
)
from grader.server.lti.members import launch_token, match_member, new_student_id
from grader.server.lti.platforms import LaunchRefused, LtiConfig, LtiConfigError, Platform, parse_lti, platforms_of
from grader.server.lti.web import (
    FRAMED_PATHS,
    LOGIN_WINDOW_S,
    LOGINS_PER_CLIENT,
    MAX_REFUSALS,
    MAX_STATES,
    STATE_COOKIE,
    TEMPLATES,
    routes,
    set_launch_cookie,
    tool_url,
)

__all__ = [
    "AGS_CLAIM",
    "CLAIM",
    "FRAMED_PATHS",
    "JWKS_MAX_AGE_S",
    "JWKS_REFETCH_S",
    "JWKS_TTL_S",
    "LEEWAY_S",
    "LOGINS_PER_CLIENT",
    "LOGIN_WINDOW_S",
    "MAX_REFUSALS",
    "MAX_STATES",
    "MAX_TOKEN_AGE_S",
    "NRPS_CLAIM",
    "STATE_COOKIE",
    "STATE_TTL_S",
    "TEMPLATES",
    "JwksCache",
    "Launch",
    "LaunchRefused",
    "LtiConfig",
    "LtiConfigError",
    "Platform",
    "RotationWaiting",
    "admit",
    "bound_contexts",
    "check_context",
    "context_key",
    "context_role",
    "launch_token",
    "match_member",
    "new_student_id",
    "parse_lti",
    "platforms_of",
    "public_jwks",
    "published_keys",
    "rotate_key",
    "routes",
    "save_context",
    "set_launch_cookie",
    "signing_key",
    "tool_url",
    "validate_launch",
]
