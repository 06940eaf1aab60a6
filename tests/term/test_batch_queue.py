"""`grade batch --queue URL`: a class graded by `grade worker` processes, recorded by the batch alone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import require_program
from grader.cli import cli
from grader.course.solution import write_solution
from grader.student.store import Store
from server_util import start_worker, stop_process


@pytest.fixture
def worker(tmp_path: Path):
    """One standalone `grade worker` on an embedded (SQLite) queue: the 'other machine'."""
    require_program("bwrap", "bubblewrap")
    queue = f"sqlite:///{tmp_path / 'queue.db'}"
    proc = start_worker(queue, 1, tmp_path / "worker.log")
    yield queue
    stop_process(proc)


def test_a_class_graded_on_the_queue_is_recorded_once_here(tmp_path: Path, worker: str) -> None:
    root = tmp_path / "class"
    write_solution(root / "amy" / "exercises")
    crashing = write_solution(root / "bob" / "exercises")
    (crashing / "linear.py").write_text(
        (crashing / "linear.py").read_text() + "\n\nimport os\n_L = Linear\n\n\nclass Linear(_L):\n"
        "    def forward(self, x):\n        os.abort()\n"
    )
    (root / "empty").mkdir()
    db = tmp_path / "class.db"
    result = CliRunner().invoke(cli, ["batch", str(root), "linear", "--db", str(db), "--queue", worker, "--json"])
    assert result.exit_code == 1, result.output  # 'empty' could not be graded
    doc = json.loads(result.output[result.output.index("{") : result.output.rindex("}") + 1])
    outcomes = {o["student"]: o for o in doc["outcomes"]}
    assert outcomes["amy"]["status"] == "graded" and outcomes["amy"]["score"] == 10.0
    assert outcomes["bob"]["status"] == "graded" and outcomes["bob"]["score"] == 0.0
    assert outcomes["empty"]["status"] == "error" and "no exercise files" in outcomes["empty"]["message"]
    with Store.open(db) as store:
        assert [len(store.attempts(s)) for s in ("amy", "bob")] == [1, 1]  # exactly once each
        bob = [r for r in store.submissions(student="bob") if r["exercise"] == "linear.Linear"]
        assert bob[0]["status"] == "error" and "signal" in bob[0]["message"]
    with sqlite3.connect(db) as conn:  # every job closed
        assert conn.execute("SELECT count(*) FROM jobs WHERE status NOT IN ('done', 'error')").fetchone() == (0,)
    again = CliRunner().invoke(cli, ["batch", str(root), "linear", "--db", str(db), "--queue", worker])
    assert "2 unchanged (skipped)" in again.output, again.output


@pytest.mark.slow
@pytest.mark.opencl
def test_a_worker_whose_compiler_does_not_know_the_cpu_leaves_kernels_to_the_next_run(tmp_path: Path) -> None:
    """The worker's own self-test fails for kernels (GRADE_OPENCL_FAULT), so it grades none: the batch records
    the rest, closes every job, exits 2; the next run, on a fixed worker, grades the kernel alone."""
    require_program("bwrap", "bubblewrap")
    queue = f"sqlite:///{tmp_path / 'queue.db'}"
    root = tmp_path / "class"
    write_solution(root / "amy" / "exercises")
    db = tmp_path / "class.db"
    args = ["batch", str(root), "activations.ReLU", "kernels.relu_forward", "--db", str(db), "--queue", queue, "--json"]
    broken = start_worker(queue, 1, tmp_path / "broken.log", env={"GRADE_OPENCL_FAULT": "unknown-cpu"})
    try:
        result = CliRunner().invoke(cli, args)
    finally:
        stop_process(broken)
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert doc["not_graded"] == 1 and doc["outcomes"][0]["not_graded"] == ["kernels.relu_forward"]
    assert "Error: NOT_GRADED: 1 exercise(s) of 1 student(s)" in result.stderr
    with Store.open(db) as store:
        assert [r["exercise"] for r in store.submissions(student="amy")] == ["activations.ReLU"]
    with sqlite3.connect(db) as conn:  # the held job is closed: the next run makes its own
        assert conn.execute("SELECT count(*) FROM jobs WHERE status NOT IN ('done', 'error')").fetchone() == (0,)
    fixed = start_worker(queue, 1, tmp_path / "fixed.log")
    try:
        again = CliRunner().invoke(cli, args)
    finally:
        stop_process(fixed)
    assert again.exit_code == 0, again.output
    with Store.open(db) as store:
        assert [r["exercise"] for r in store.submissions(student="amy")] == ["activations.ReLU", "kernels.relu_forward"]


def test_two_worker_machines_on_redis_share_a_class(tmp_path: Path) -> None:
    """Redis between the batch and two `grade worker` processes standing in for two machines."""
    require_program("bwrap", "bubblewrap")
    require_program("redis-server", "redis-server")
    from server_util import Redis

    redis_server = Redis(tmp_path).start()
    workers = [start_worker(redis_server.url, 1, tmp_path / f"worker{k}.log") for k in range(2)]
    try:
        root = tmp_path / "class"
        for name in ("amy", "bob", "cy", "dee"):
            write_solution(root / name / "exercises")
        db = tmp_path / "class.db"
        result = CliRunner().invoke(
            cli, ["batch", str(root), "activations.ReLU", "--db", str(db), "--queue", redis_server.url]
        )
        assert result.exit_code == 0, result.output
        assert "4 students: 4 graded" in result.output
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT student, count(*), min(score) FROM attempts GROUP BY student").fetchall()
            machines = {w for (w,) in conn.execute("SELECT DISTINCT worker FROM jobs")}
        assert rows == [(name, 1, 10.0) for name in ("amy", "bob", "cy", "dee")]
        assert len(machines) >= 1 and all(machines)
    finally:
        for proc in workers:
            stop_process(proc)
        redis_server.stop()
