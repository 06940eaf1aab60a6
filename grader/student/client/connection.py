"""The student's side of the course server: ``grade login``, and ``grade submit/quiz/progress`` against it.

``grade login URL`` checks a token with ``GET /api/v1/me`` and keeps the
server and token in ``$XDG_CONFIG_HOME/normgrade/config.json`` (default
``~/.config/normgrade/``), a file only its owner can read (0600). Every failure
to talk to the server becomes a :class:`ClientError`: one line saying what
happened and what to do (the CLI prints it and exits 2).

An upload carries an ``Idempotency-Key`` chosen once per ``grade submit``; a
request that fails on the network is sent again with the same key, so the
server records it once however many times it arrives.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.student.errors import GraderError
from grader.student.engine.model import GradeReport
from grader.student.client.uploads import collect_files
from grader.student.client.wire import report_from_dict
from grader.student.store import write_owner_only

if TYPE_CHECKING:  # httpx is imported where a server is used
    import httpx

API = "/api/v1"
CONFIG_ENV = "GRADE_CONFIG"
TIMEOUT_S = 30.0
SEND_TRIES = 3
WAIT_S = 10.0  # each status request is held by the server until the job closes or this time is up


class ClientError(GraderError):
    """Talking to the course server failed (one line: what happened, what to do)."""


# --- the login file -----------------------------------------------------------------


def config_path() -> Path:
    """``$GRADE_CONFIG``, else ``$XDG_CONFIG_HOME/normgrade/config.json``, else ``~/.config/normgrade/config.json``."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "normgrade" / "config.json"


@dataclass(frozen=True)
class Login:
    """A saved login: the server's URL, the token and who it belongs to."""

    server: str
    token: str
    student: str


def load_login() -> Login | None:
    """The saved login, or None when there is none (an unreadable file is a ClientError)."""
    path = config_path()
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return Login(str(doc["server"]), str(doc["token"]), str(doc["student"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClientError(f"{path} is not a readable login ({exc}): run `grade login URL` again") from exc


def default_student() -> str:
    """Who is graded when no --student is given: the student of the saved `grade login` (the name the course
    server's reports carry), else the OS user name, else 'student' where the system cannot say."""
    import getpass

    try:
        login = load_login()
    except ClientError:  # an unreadable login file: the remote commands say so; a local grade goes on
        login = None
    if login is not None:
        return login.student
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "student"


def save_login(login: Login) -> Path:
    """Write the login file with mode 0600 (its folder 0700); return its path."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_owner_only(path, json.dumps({"server": login.server, "token": login.token, "student": login.student}))
    return path


def remove_login() -> bool:
    """Delete the login file; whether there was one."""
    path = config_path()
    if path.exists():
        path.unlink()
        return True
    return False


# --- HTTP -------------------------------------------------------------------------------


class Client:
    """A thin JSON client for one server and token."""

    def __init__(
        self, server: str, token: str, timeout: float = TIMEOUT_S, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.server = server.rstrip("/")
        import httpx  # imported when a server is used: `grade submit` on local work does not pay for it

        self.http = httpx.Client(
            base_url=self.server, timeout=timeout, transport=transport, headers={"Authorization": f"Bearer {token}"}
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        tries: int = 1,
        accept: tuple[int, ...] = (),
    ) -> tuple[int, dict[str, Any]]:
        """Send one request (again on a network error, up to ``tries``); (status, JSON body).

        Raises ClientError for a network failure, a non-JSON answer, or an
        error status (the server's one-line reason, with what to do) not in ``accept``.
        """
        import httpx

        last: Exception | None = None
        for _ in range(tries):
            try:
                response = self.http.request(method, API + path, json=body, headers=headers)
                break
            except httpx.TimeoutException as exc:
                last = exc
            except httpx.TransportError as exc:
                last = exc
        else:
            if isinstance(last, httpx.TimeoutException):
                raise ClientError(
                    f"the course server at {self.server} did not answer in time: try again later, "
                    "or work on this machine with --local (submit, quiz, progress)"
                )
            raise ClientError(
                f"cannot reach the course server at {self.server} ({last}): the server may be down, "
                "or check the address and your network; then try again, or work on this machine with --local "
                "(submit, quiz, progress)"
            )
        try:
            doc = response.json()
        except ValueError:
            raise ClientError(
                f"{self.server} did not answer like a normgrade server (HTTP {response.status_code}): "
                "check the URL given to `grade login`"
            ) from None
        status = response.status_code
        if status < 400 or status in accept:
            return status, doc if isinstance(doc, dict) else {}
        message = str(doc.get("error") if isinstance(doc, dict) else "") or response.reason_phrase
        if status >= 500:
            raise ClientError(
                f"the course server failed (HTTP {status}: {message}): try again later, "
                "and tell your instructor if it goes on"
            )
        raise ClientError(message)


def login(server: str, token: str, transport: httpx.BaseTransport | None = None) -> tuple[Login, dict[str, Any]]:
    """Check ``token`` on ``server`` (GET /me); return the Login to save and the server's answer."""
    if not server.startswith(("http://", "https://")):
        raise ClientError(f"'{server}' is not a URL: pass the server's address, like https://grader.example.org")
    with Client(server, token.strip(), transport=transport) as client:
        _, me = client.call("GET", "/me")
    return Login(server.rstrip("/"), token.strip(), str(me["student"])), me


# --- submit -----------------------------------------------------------------------------------


@dataclass
class Submitted:
    """What a remote submission came to: the job's last state, and the report once graded."""

    id: int
    status: str
    report: GradeReport | None
    error: str | None
    document: dict[str, Any]


def submit(
    client: Client,
    folder: Path,
    selectors: list[str],
    wait: bool = True,
    on_state: Callable[[dict[str, Any]], None] | None = None,
    max_wait_s: float = 3600.0,
    key: str | None = None,
) -> Submitted:
    """Upload the exercise files of ``folder`` and (``wait``) poll until graded.

    ``on_state`` is called with every state the server reports (progress display).
    """
    files = collect_files(folder)
    key = key or uuid.uuid4().hex
    _, doc = client.call(
        "POST",
        "/submissions",
        {"files": files, "exercises": selectors},
        headers={"Idempotency-Key": key},
        tries=SEND_TRIES,
    )
    if not wait:
        return _submitted(doc)
    return wait_for(client, int(doc["id"]), on_state, max_wait_s, doc)


SETTLED = ("done", "error", "held")  # a held job waits for the server's machine, not for this client


def wait_for(
    client: Client,
    submission: int,
    on_state: Callable[[dict[str, Any]], None] | None = None,
    max_wait_s: float = 3600.0,
    doc: dict[str, Any] | None = None,
) -> Submitted:
    """Poll submission ``submission`` (long polls) until it is graded, closed as an error, or held (some
    exercises wait for the server's machine: it grades them by itself later).

    Once an upload is stored it is graded whatever happens to this client: a
    server lost while waiting is a ClientError that names the submission and
    `grade result ID`, the command that shows its report later.
    """
    deadline = time.monotonic() + max_wait_s
    later = (
        f"submission {submission} is stored on the server and will be graded: see its result later with "
        f"`grade result {submission}`"
    )
    while doc is None or doc["status"] not in SETTLED:
        if doc is not None and on_state is not None:
            on_state(doc)
        if time.monotonic() > deadline:
            raise ClientError(f"not graded after {max_wait_s:g} s; {later}")
        try:
            _, doc = client.call("GET", f"/submissions/{submission}?wait={WAIT_S:g}", tries=SEND_TRIES)
        except ClientError as exc:
            if doc is None:  # asked for a stored submission that the server does not give: its own reason
                raise
            raise ClientError(f"lost the course server while waiting ({exc}); {later}") from exc
    return _submitted(doc)


def _submitted(doc: dict[str, Any]) -> Submitted:
    report = report_from_dict(doc["report"]) if doc.get("report") else None
    return Submitted(int(doc["id"]), str(doc["status"]), report, doc.get("error"), doc)


def estimate_words(seconds: Any) -> str:
    """The server's estimate of the time to the report (``estimate_s``) as the student reads it: "report in
    about 40 s", "report in about 3 min"; "" when the server has none (nothing measured yet, or settled)."""
    if not isinstance(seconds, (int, float)) or seconds != seconds or seconds < 0:
        return ""
    if seconds < 90:
        return f"report in about {max(1, round(seconds))} s"
    return f"report in about {round(seconds / 60)} min"


def describe_state(doc: dict[str, Any]) -> str:
    """One progress line for a submission's state: the server's ``where`` (queued with how many ahead, running
    on which worker, which try after what failure) and its estimate of the time to the report, or a line made
    from the status for an older server."""
    estimate = estimate_words(doc.get("estimate_s")) if doc["status"] not in SETTLED else ""
    if doc.get("where") and doc["status"] not in SETTLED:
        return f"Submission {doc['id']}: {doc['where']}" + (f"; {estimate}" if estimate else "")
    if doc["status"] in ("received", "queued"):
        ahead = int(doc.get("queue_position") or 0)
        return f"Submission {doc['id']}: queued" + (f" ({ahead} ahead)" if ahead else "")
    if doc["status"] == "running":
        return f"Submission {doc['id']}: grading"
    return f"Submission {doc['id']}: {doc['status']}"
