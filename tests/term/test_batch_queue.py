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
    (crashing / "linear.py").write_text((crashing / "linear.py").read_text()
                                        + "\n\nimport os\n_L = Linear\n\n\nclass Linear(_L):\n"
                                          "    def forward(self, x):\n        os.abort()\n")
    (root / "empty").mkdir()
    db = tmp_path / "class.db"
    result = CliRunner().invoke(cli, ["batch", str(root), "linear", "--db", str(db), "--queue", worker, "--json"])
    assert result.exit_code == 1, result.output  # 'empty' could not be graded
    doc = json.loads(result.output[result.output.index("{"):result.output.rindex("}") + 1])
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
        result = CliRunner().invoke(cli, ["batch", str(root), "activations.ReLU", "--db", str(db),
                                          "--queue", redis_server.url])
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
