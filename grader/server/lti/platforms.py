"""The LTI platforms a course registers (``[lti]`` of course.toml), and the errors of a login or launch."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from grader.student.course import Course
from grader.student.errors import GraderError


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
                raise LaunchRefused(
                    f"the platform {issuer!r} has no registration with client id {client_id!r} in "
                    "this course: add it to [[lti.platform]] in course.toml",
                    403,
                    issuer,
                )
            raise LaunchRefused(
                f"the platform {issuer!r} is not registered with this course: the instructor adds "
                "it to [[lti.platform]] in course.toml (docs/lti.md)",
                403,
                issuer,
            )
        if len(matches) > 1:
            raise LaunchRefused(
                f"the platform {issuer!r} has several registrations and the login named no "
                "client_id: configure the platform to send client_id",
                400,
                issuer,
            )
        return matches[0]

    def frame_origins(self) -> tuple[str, ...]:
        """Every platform's framing origins, once each (the launch's ``frame-ancestors``)."""
        return tuple(dict.fromkeys(o for p in self.platforms for o in p.framing))


PLATFORM_FIELDS = (
    "name",
    "issuer",
    "client_id",
    "auth_url",
    "token_url",
    "jwks_url",
    "deployments",
    "token_audience",
    "contexts",
    "frame_origins",
)
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
        raise LtiConfigError(
            f"course.toml: unknown field lti.{unknown[0]}: use tool_url and [[lti.platform]] "
            "(contexts and frame_origins go in each [[lti.platform]])"
        )
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
            raise LtiConfigError(
                f"course.toml: {where} has an unknown field '{extra[0]}': use " + ", ".join(PLATFORM_FIELDS)
            )
        for key in ("issuer", "client_id", "auth_url", "token_url", "jwks_url"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise LtiConfigError(f"course.toml: {where} needs {key} (a string; docs/lti.md lists the values)")
        deployments = item.get("deployments")
        if (
            not isinstance(deployments, list)
            or not deployments
            or not all(isinstance(d, str) and d for d in deployments)
        ):
            raise LtiConfigError(
                f'course.toml: {where} needs deployments = ["<deployment id>", ...] '
                "(the LMS shows it when the tool is deployed)"
            )
        contexts = _strings(item, "contexts", where, "the LMS course ids of this course; docs/lti.md")
        origins = _strings(item, "frame_origins", where, 'like "https://school.instructure.com"')
        for origin in origins:
            if not ORIGIN_RE.fullmatch(origin):
                raise LtiConfigError(
                    f"course.toml: {where}.frame_origins: {origin!r} is not an origin: write "
                    'scheme://host[:port] with no path, like "https://school.instructure.com"'
                )
        platform = Platform(
            str(item.get("name") or item["issuer"]),
            item["issuer"],
            item["client_id"],
            _url(item["auth_url"], f"{where}.auth_url"),
            _url(item["token_url"], f"{where}.token_url"),
            _url(item["jwks_url"], f"{where}.jwks_url"),
            tuple(deployments),
            str(item.get("token_audience", "")),
            contexts,
            origins,
        )
        if any(p.issuer == platform.issuer and p.client_id == platform.client_id for p in platforms):
            raise LtiConfigError(
                f"course.toml: {where} repeats issuer {platform.issuer!r} with client id "
                f"{platform.client_id!r}: list its deployments in one table"
            )
        platforms.append(platform)
    return LtiConfig(tuple(platforms), tool_url)


def platforms_of(course: Course) -> LtiConfig:
    """The course's LTI configuration (no platforms when course.toml has no [lti])."""
    return parse_lti(course.lti)
