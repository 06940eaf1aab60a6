"""The server tests itself, with real processes: `grade serve` and `grade worker` on loopback.

Two machines rehearsed on this one (no Zen 5 needed):

- ``GRADE_OPENCL_FAULT=unknown-cpu`` in a worker's environment (passed into
  its sandbox): every kernel build fails as PoCL's does on a CPU its LLVM does
  not know. The worker's own self-test and the server's say so; the server
  refuses kernel exercises (a log line, the banner, ``/api/v1/health``); the
  student's upload is graded but for its kernel, which is held (one line, exit
  2, nothing recorded for it). A worker started without the fault tests
  itself, and the held kernel is graded by itself, recorded once.
- a ``bwrap`` on the worker's PATH that runs the sandbox probe but no grading
  worker (bubblewrap broken after the check): a NumPy exercise's worker cannot
  start, the upload is held, the server's self-test then refuses NumPy
  exercises; a good worker heals it.

Waits are bounded polls on observable state (the health, a job's status).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.course.solution import write_solution
from grader.queue.jobs import open_queue
from grader.student.client.connection import Login, save_login
from server_util import Server, api, issue_tokens, solution_files, start_worker, stop_process, wait_for

pytestmark = pytest.mark.slow

RELU, KERNEL = "activations.ReLU", "kernels.relu_forward"
WAIT_S = 180.0  # a worker's start and self-test take seconds; the bound is generous for a busy machine

BROKEN_BWRAP = """#!/bin/sh
# bubblewrap that starts the grader's probe but no grading worker: broken after the check
case "$*" in
  *grader.student.sandbox.worker*) echo "bwrap: setting up uid map: Permission denied" >&2; exit 1 ;;
esac
exec {real} "$@"
"""


@pytest.fixture
def course(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["ann"])
    queue = f"sqlite:///{tmp_path / 'queue.db'}"
    server = Server(db, queue, workers=0).start()
    workers: list[subprocess.Popen[bytes]] = []
    save_login(Login(server.url, tokens["ann"], "ann"))
    monkeypatch.setenv("NO_COLOR", "1")
    try:
        yield {
            "server": server,
            "db": db,
            "queue": queue,
            "token": tokens["ann"],
            "teacher": teacher,
            "root": tmp_path,
            "workers": workers,
        }
    finally:
        for proc in workers:
            stop_process(proc)
        server.stop()


def worker(
    course: dict[str, Any], name: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    proc = start_worker(course["queue"], 1, course["root"] / f"{name}.log", *extra, env=env)
    course["workers"].append(proc)
    return proc


def health(course: dict[str, Any]) -> dict[str, Any]:
    return httpx.get(course["server"].url + "/api/v1/health", timeout=30).json()


def kind_is(course: dict[str, Any], kind: str, ok: bool) -> bool:
    return health(course)["selftest"][kind]["ok"] is ok


def job_row(course: dict[str, Any], job_id: int) -> dict[str, Any]:
    conn = sqlite3.connect(course["db"])
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM jobs WHERE id = ?", [job_id]).fetchone())
    finally:
        conn.close()


def recorded(course: dict[str, Any]) -> list[tuple[int, str]]:
    conn = sqlite3.connect(course["db"])
    try:
        return [(int(a), str(e)) for a, e in conn.execute("SELECT attempt_id, exercise FROM submissions ORDER BY id")]
    finally:
        conn.close()


def banner(course: dict[str, Any]) -> str:
    page = httpx.get(
        course["server"].url + "/instructor/", headers={"Authorization": f"Bearer {course['teacher']}"}, timeout=30
    )
    assert page.status_code == 200
    return page.text


@pytest.mark.opencl
def test_kernels_are_refused_on_a_machine_whose_compiler_does_not_know_the_cpu_then_graded_by_themselves(
    course: dict[str, Any],
) -> None:
    broken = worker(course, "broken", env={"GRADE_OPENCL_FAULT": "unknown-cpu"})
    wait_for(lambda: kind_is(course, "opencl", False), WAIT_S, "the server to refuse kernel exercises")
    doc = health(course)
    assert doc["ok"] is False and doc["selftest"]["cpu"]["ok"] is True
    assert "unknown target CPU 'generic'" in doc["selftest"]["opencl"]["reason"]
    wait_for(
        lambda: "kernel exercises FAIL" in (course["root"] / "broken.log").read_text(),
        WAIT_S,
        "the worker's own self-test line",
    )
    assert "kernel exercises FAIL and are refused" in course["server"].log_text()  # the server's log line too

    folder = write_solution(course["root"] / "solution")
    submitted = CliRunner().invoke(cli, ["submit", RELU, KERNEL, "--path", str(folder)])
    assert submitted.exit_code == 2, submitted.output
    held = [line for line in submitted.stderr.splitlines() if line.startswith("Held:")]
    assert len(held) == 1 and "the server grades it by itself" in held[0] and "grade doctor" in held[0]
    assert "unknown target CPU 'generic'" in held[0]
    job_id = int(held[0].split("submission ")[1].split(":")[0])
    assert recorded(course) == [(job_row(course, job_id)["attempt_id"], RELU)]  # the kernel is nobody's zero
    assert "Kernel exercises are not being graded" in banner(course)
    assert health(course)["held"] == {"uploads": 1, "exercises": 1}

    stop_process(broken)
    worker(course, "fixed")  # the machine is fixed: its self-test passes, the server adopts it
    wait_for(lambda: job_row(course, job_id)["status"] == "done", WAIT_S, "the held kernel to be graded by itself")
    rows = recorded(course)
    assert [e for _, e in rows] == [RELU, KERNEL] and len({a for a, _ in rows}) == 1  # one upload, one attempt
    result = CliRunner().invoke(cli, ["result", str(job_id)])
    assert result.exit_code == 0 and result.stdout.count("PASS") >= 2 and "NOT_GRADED" not in result.stdout
    assert health(course)["ok"] is True and 'class="grading-banner"' not in banner(course)


def test_a_numpy_exercise_whose_worker_cannot_start_is_held_until_a_good_worker_comes_back(
    course: dict[str, Any],
) -> None:
    good = worker(course, "good")
    wait_for(lambda: kind_is(course, "cpu", True), WAIT_S, "the first self-test")
    queue = open_queue(course["queue"])

    def answered() -> bool:  # the server's start-up self-test ran and was collected: none in flight
        return queue.pending() == 0 and not any("selftest-" in k for k in queue.stored_keys())

    wait_for(answered, WAIT_S, "the server's start-up self-test to be answered")
    stop_process(good)  # the next task the broken worker takes is the upload itself
    fake = course["root"] / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text(BROKEN_BWRAP.format(real="/usr/bin/bwrap"))
    (fake / "bwrap").chmod(0o755)
    worker(course, "broken", "--no-self-test", env={"PATH": f"{fake}:{os.environ['PATH']}"})
    folder = write_solution(course["root"] / "solution")
    answer = api(
        course["server"].url,
        course["token"],
        "POST",
        "/submissions",
        json={"files": solution_files(folder, ["__init__.py", "base.py", "activations.py"]), "exercises": [RELU]},
    )
    assert answer.status_code == 202
    job_id = int(answer.json()["id"])
    wait_for(lambda: job_row(course, job_id)["status"] == "held", WAIT_S, "the upload to be held")
    row = job_row(course, job_id)
    assert "the grader's worker did not start" in row["held_reason"] and "grade doctor" in row["held_reason"]
    assert row["rate_free"] == 1 and recorded(course) == []
    doc = api(course["server"].url, course["token"], "GET", f"/submissions/{job_id}").json()
    assert doc["status"] == "held" and doc["json"]["exercises"][0]["score"] is None
    wait_for(lambda: kind_is(course, "cpu", False), WAIT_S, "the self-test after the failure to refuse NumPy")
    assert "NumPy exercises are not being graded" in banner(course)

    stop_process(course["workers"][-1])
    worker(course, "good-again")
    wait_for(lambda: job_row(course, job_id)["status"] == "done", WAIT_S, "the held upload to be graded by itself")
    assert recorded(course) == [(job_row(course, job_id)["attempt_id"], RELU)]
