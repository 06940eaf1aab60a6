"""The security headers of every answer of the course server (pages, API, errors).

- ``Content-Security-Policy``: nothing from elsewhere (``default-src 'none'``),
  the page's own inline style, images only from itself or ``data:``, forms
  posting only to this server, and ``frame-ancestors 'none'``: no other site
  can frame a page (clickjacking). A page with an inline script (the
  dashboard's sorting) names that script by its SHA-256 (:func:`policy_for`),
  so no other inline script, injected or not, ever runs.
- ``X-Frame-Options: DENY`` (older browsers' frame-ancestors),
  ``X-Content-Type-Options: nosniff`` (a JSON or CSV answer is never run as a
  script), ``Referrer-Policy: no-referrer`` (a page's address, which may hold a
  student id, never leaks to another site), ``Cross-Origin-Opener-Policy``.

**Framing by the LMS** (:class:`Framing`): the LTI launch and the pages it
lands on (``grader.server.lti.FRAMED_PATHS``) may be shown in an iframe of the
configured platforms' web origins (Canvas's course navigation, Moodle's
embedded launch): on those paths ``frame-ancestors`` lists these origins
instead of ``'none'`` and ``X-Frame-Options`` is left out (it cannot name
several origins; a browser that knows CSP ignores it anyway). Every other
answer, and every answer when no platform is configured, keeps ``'none'``.

:class:`SecurityHeaders` adds them to every response that does not set its
own, and applies the framing rule to every response, its own CSP included.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

NO_FRAMING = "frame-ancestors 'none'"
BASE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; " + NO_FRAMING
)
OTHER_HEADERS = [
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
]
SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def policy_for(html: str) -> str:
    """The CSP of a page: the base policy, plus ``script-src`` with the hash of each inline script it has."""
    hashes = [base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode() for body in SCRIPT.findall(html)]
    if not hashes:
        return BASE_POLICY
    return BASE_POLICY + "; script-src " + " ".join(f"'sha256-{h}'" for h in hashes)


def with_own_files(policy: str) -> str:
    """A policy that also lets the page load scripts, style sheets and fonts from this server (``'self'``): the
    course text's pages, whose maths KaTeX typesets from the files the server itself serves (never a CDN)."""
    return (
        policy.replace("style-src 'unsafe-inline'", "style-src 'self' 'unsafe-inline'")
        + "; script-src 'self'; font-src 'self'"
    )


def as_dict(html: str | None = None) -> dict[str, str]:
    """Every security header (the policy for ``html`` when given), as response headers."""
    return {"Content-Security-Policy": policy_for(html) if html else BASE_POLICY, **dict(OTHER_HEADERS)}


@dataclass(frozen=True)
class Framing:
    """Who may frame which paths: ``origins`` (CSP sources) may frame ``paths`` (exact, or a folder's prefix)."""

    origins: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()

    def ancestors(self, path: str) -> str | None:
        """The ``frame-ancestors`` directive for ``path``, or None when it keeps ``'none'``."""
        if self.origins and any(path == p or path.startswith(p.rstrip("/") + "/") for p in self.paths):
            return "frame-ancestors " + " ".join(self.origins)
        return None


class SecurityHeaders:
    """ASGI middleware: the security headers on every response that has not set them itself, and the framing rule."""

    def __init__(self, app: ASGIApp, framing: Framing | None = None) -> None:
        self.app = app
        self.framing = framing or Framing()
        self.defaults = [(k.lower().encode(), v.encode()) for k, v in as_dict().items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        framed = self.framing.ancestors(scope.get("path", ""))

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in self.defaults if name not in names]
                if framed is not None:
                    headers = [
                        (name, value.replace(NO_FRAMING.encode(), framed.encode()))
                        if name.lower() == b"content-security-policy"
                        else (name, value)
                        for name, value in headers
                        if name.lower() != b"x-frame-options"
                    ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
