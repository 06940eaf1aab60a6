"""A held upload as the student, the instructor and a monitor see it, on a server in this process.

The course server (``create_app`` with its collector, served by uvicorn in a
thread on a loopback port) runs without a worker process: the test plays the
worker, publishing a self-test as a worker does and running the queued tasks
here (``huey.execute``: the real grading path, sandbox included). With kernel
exercises refused, a kernel upload is held at once: the student's `grade
submit` says so in one line and exits 2, the dashboard's pages carry the
banner, ``/instructor/held`` lists the upload, ``GET /api/v1/health`` has the
self-test, and nothing is recorded. Once a self-test passes, the server grades
the held exercise by itself and `grade result` shows the full report. Waits
are bounded polls on the job's state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner

from grader.cli import cli
from grader.course.solution import write_solution
from grader.queue import records
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.queue.jobs import open_queue
from grader.queue.selftest import LATEST_KEY
from grader.student.client.connection import Login, save_login
from grader.student.store import Store
from server_util import HOST, free_port, issue_tokens, wait_for
from test_held_jobs import published

KERNEL = "kernels.relu_forward"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["ann"])
    config = ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", collect_interval=0.05)
    app = create_app(config)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="held-server", daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the server to listen")
    url = f"http://{HOST}:{port}"
    save_login(Login(url, tokens["ann"], "ann"))
    monkeypatch.setenv("NO_COLOR", "1")
    try:
        yield {
            "url": url,
            "db": db,
            "token": tokens["ann"],
            "teacher": teacher,
            "queue": open_queue(config.queue_url),
            "root": tmp_path,
        }
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def publish(served: dict[str, Any], kinds: dict[str, bool]) -> None:
    """A worker's self-test lands in the queue's store (the server adopts it at its next tick)."""
    served["queue"].huey.put(LATEST_KEY, published(kinds))


def health(served: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.get(served["url"] + "/api/v1/health", timeout=30)
    assert answer.status_code == 200
    return answer.json()


def instructor_page(served: dict[str, Any], path: str) -> str:
    answer = httpx.get(served["url"] + path, headers={"Authorization": f"Bearer {served['teacher']}"}, timeout=30)
    assert answer.status_code == 200, answer.text[:300]
    return answer.text


def run_queue(served: dict[str, Any]) -> int:
    """Run the tasks waiting in the queue here, as a worker would; how many ran."""
    huey, ran = served["queue"].huey, 0
    while (task := huey.dequeue()) is not None:
        huey.execute(task)
        ran += 1
    return ran


def test_the_health_says_nothing_is_known_before_the_first_self_test(served: dict[str, Any]) -> None:
    doc = health(served)
    assert (
        doc["ok"] is False and doc["selftest"]["opencl"]["ok"] is None and doc["held"] == {"uploads": 0, "exercises": 0}
    )
    assert 'class="grading-banner"' not in instructor_page(served, "/instructor/")  # nothing failing: no banner


@pytest.mark.slow
@pytest.mark.opencl
def test_a_held_upload_is_told_shown_and_graded_by_itself_once_kernels_work(served: dict[str, Any]) -> None:
    publish(served, {"cpu": True, "opencl": False})
    wait_for(lambda: health(served)["selftest"]["opencl"]["ok"] is False, 30, "the server to adopt the self-test")
    doc = health(served)
    assert doc["ok"] is False and doc["selftest"]["cpu"]["ok"] is True
    assert "unknown target CPU 'generic'" in doc["selftest"]["opencl"]["reason"]
    assert "host" not in doc["selftest"]["opencl"]  # the health answers anyone: no machine's name

    folder = write_solution(served["root"] / "solution")
    runner = CliRunner()
    held = runner.invoke(cli, ["submit", KERNEL, "--path", str(folder)])
    assert held.exit_code == 2, held.output
    told = [line for line in held.stderr.splitlines() if line.startswith("Held:")]
    assert len(told) == 1, held.stderr  # ONE line: how much, that the server grades it by itself, why
    line = told[0]
    assert "1 exercise (10 points) not graded yet: the server grades it by itself" in line
    assert "no new upload needed" in line and "unknown target CPU 'generic'" in line and "grade doctor" in line
    assert "NOT_GRADED" in held.stdout  # the report itself, as local grading prints it
    job_id = int(line.split("submission ")[1].split(":")[0])
    as_json = runner.invoke(cli, ["result", str(job_id), "--json"])
    assert as_json.exit_code == 2
    with Store.open(served["db"]) as store:
        assert store.attempts("ann") == []  # nothing recorded as the student's
        row = records.job(store, job_id)
        assert row is not None and row["status"] == "held" and row["rate_free"] == 1

    doc = health(served)
    assert doc["held"] == {"uploads": 1, "exercises": 1}
    for path in ("/instructor/", "/instructor/quizzes", "/instructor/term", "/instructor/lti"):
        page = instructor_page(served, path)
        assert "Kernel exercises are not being graded: no OpenCL device here can build and run a kernel" in page
        assert "1 upload held. <code>grade doctor</code> on the worker shows more" in page
    held_page = instructor_page(served, "/instructor/held")
    assert f'<td data-label="Submission">{job_id}</td>' in held_page and KERNEL in held_page
    assert "fails: refused" in held_page

    publish(served, {"cpu": True, "opencl": True})  # a worker's self-test passes again

    def sent_again() -> bool:
        with Store.open(served["db"]) as store:
            row = records.job(store, job_id)
        return row is not None and row["status"] == "queued" and row["regrades"] == 1

    wait_for(sent_again, 30, "the held exercise to be sent again")
    assert run_queue(served) >= 1  # (the server's start-up self-test too, which no worker had taken)
    final = runner.invoke(cli, ["result", str(job_id)])
    assert final.exit_code == 0, final.output
    assert "PASS" in final.stdout and "NOT_GRADED" not in final.stdout and "Held" not in final.stderr
    with Store.open(served["db"]) as store:
        attempts = store.attempts("ann")
        assert len(attempts) == 1 and attempts[0]["score"] == 10.0
        done = records.job(store, job_id)
        assert done is not None and done["status"] == "done"
    assert health(served)["ok"] is True
    assert 'class="grading-banner"' not in instructor_page(served, "/instructor/")
