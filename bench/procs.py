"""Processes on loopback for the benches and the tests: `grade serve`, `grade worker` and redis-server.

Every process is started by the bench or test that needs it and stopped by it; only
127.0.0.1 is used. Waits are bounded polling loops on observable state (an
HTTP answer, a PING), never sleeps that guess how long something takes.
The tests import these from here (tests/server_util.py); the benches import nothing from tests/.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from grader.server import roster
from grader.student.store import Store

HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def issue_tokens(db: Path, students: list[str]) -> tuple[dict[str, str], str]:
    """Import a roster of ``students`` into ``db``; (student -> token, instructor token)."""
    entries = [roster.RosterEntry(s, f"Student {s}", f"{s}@example.org") for s in students]
    with Store.open(db) as store:
        issued = roster.import_roster(store, entries)
        teacher = roster.issue_instructor_token(store)
    return {entry.id: token for entry, token in issued}, teacher


@dataclass
class Server:
    """A ``grade serve`` process (with its embedded worker process when workers > 0)."""

    db: Path
    queue: str
    workers: int = 1
    course: Path | None = None
    extra: list[str] = field(default_factory=list)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> Server:
        """Start (on ``port`` when set, else a free one) and wait until the API answers.

        A port picked here can be taken by another process between the pick and
        the server's bind (the suite runs in parallel): then a new one is picked."""
        chosen = not self.port
        for _ in range(5):
            self.port = self.port or free_port()
            if self._start_on_port() or not chosen:
                return self
            self.port = 0  # lost the race for the port: pick another
        raise AssertionError(f"grade serve found no free port in 5 tries: {self.log_text()}")

    def _start_on_port(self) -> bool:
        """True once the API answers; False when the port was taken before the server bound it."""
        command = [
            sys.executable,
            "-m",
            "grader.cli",
            "serve",
            "--db",
            str(self.db),
            "--queue",
            self.queue,
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            *self.extra,
        ]
        if self.course is not None:
            command += ["--course", str(self.course)]
        self.log = self.db.with_name(f"serve-{self.port}.log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def up() -> bool | str:
            if self.proc is not None and self.proc.poll() is not None:
                if "address already in use" in self.log_text():
                    return "taken"
                raise AssertionError(f"grade serve exited {self.proc.returncode}: {self.log_text()}")
            try:
                return httpx.get(self.url + "/api/v1/", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        return wait_for(up, START_TIMEOUT_S, "the server to answer", interval=0.1) is True

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def worker_pids(self) -> list[int]:
        """The processes of the embedded `grade worker` (the consumer and its grading processes)."""
        assert self.proc is not None
        return descendants(self.proc.pid)

    def kill(self) -> None:
        """SIGKILL the server process alone (its worker child follows through PDEATHSIG)."""
        assert self.proc is not None
        children = descendants(self.proc.pid)
        self.proc.kill()
        self.proc.wait(timeout=30)
        wait_for(lambda: not any(alive(p) for p in children), 30, "the server's workers to exit")

    def stop(self) -> None:
        """SIGTERM the server (it stops its workers), SIGKILL after 30 s; never raises."""
        if self.proc is None or self.proc.poll() is not None:
            return
        children = descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for pid in children:
            kill_quietly(pid)


def start_worker(
    queue: str, workers: int, log: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A standalone `grade worker` process (the 'other machine' of the Redis tests); ``env`` adds variables
    (a rehearsed fault)."""
    with open(log, "wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "grader.cli", "worker", "--queue", queue, "--workers", str(workers), *extra],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s, and reap (with the grading processes it started)."""
    if proc.poll() is None:
        children = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        for pid in children:
            kill_quietly(pid)


# --- processes -----------------------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
        except OSError:
            continue
        found += [int(p) for p in text.split()]
    return found


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid``, parents before children."""
    out: list[int] = []
    todo = children_of(pid)
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo += children_of(child)
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything it started (a machine that dies takes its children with it)."""
    family = [pid] + descendants(pid)
    for p in family:
        kill_quietly(p)


# --- redis ----------------------------------------------------------------------------------


@dataclass
class Redis:
    """A redis-server on a free loopback port, persistence off, started and stopped by a fixture."""

    folder: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self, port: int | None = None) -> Redis:
        """Start redis-server (on ``port``, or a free one) and wait until it answers PING."""
        import redis

        self.port = port or free_port()
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                HOST,
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = redis.Redis(host=HOST, port=self.port)

        def pong() -> bool:
            try:
                return bool(client.ping())
            except redis.exceptions.ConnectionError:
                return False

        wait_for(pong, 30, "redis-server to answer PING", interval=0.05)
        client.close()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def kill(self) -> None:
        """SIGKILL redis-server (its data is gone: persistence is off)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def restart_empty(self) -> None:
        """Start a fresh, empty redis-server on the same port (as after a crash without persistence)."""
        self.start(self.port)
