"""The same jobs over Redis: a real redis-server on a loopback port, two `grade worker` processes as two machines.

The server runs with ``--workers 0`` and ``--queue redis://...``; the workers
are separate processes that share nothing with it but the Redis URL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


from grader.course.solution import write_solution
from server_util import Redis, Server, api, issue_tokens, solution_files, start_worker, stop_process, wait_graded

RELU = ["activations.ReLU"]
UPLOAD = ["__init__.py", "base.py", "activations.py"]


def submit(url: str, token: str, folder: Path) -> int:
    response = api(
        url, token, "POST", "/submissions", json={"files": solution_files(folder, UPLOAD), "exercises": RELU}
    )
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


def recorded(db: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute("SELECT student, COUNT(*) FROM attempts GROUP BY student ORDER BY student"))
    finally:
        conn.close()


def test_two_worker_processes_on_redis_grade_every_job_once(redis_server: Redis, tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    students = ["r1", "r2", "r3", "r4"]
    tokens, _ = issue_tokens(db, students)
    folder = write_solution(tmp_path / "good")
    server = Server(db, redis_server.url, workers=0).start()
    workers: list[Any] = []
    try:
        # machine A alone grades the first job, then machine B alone the second: both consume the same queue
        machine_a = start_worker(redis_server.url, 1, tmp_path / "worker-a.log")
        workers.append(machine_a)
        first = wait_graded(server.url, tokens["r1"], submit(server.url, tokens["r1"], folder))
        stop_process(machine_a)
        machine_b = start_worker(redis_server.url, 1, tmp_path / "worker-b.log")
        workers.append(machine_b)
        second = wait_graded(server.url, tokens["r2"], submit(server.url, tokens["r2"], folder))
        assert first["status"] == second["status"] == "done"
        assert first["worker"] != second["worker"]
        # then both at once, with jobs from two more students
        workers.append(start_worker(redis_server.url, 1, tmp_path / "worker-c.log"))
        jobs = {s: submit(server.url, tokens[s], folder) for s in ("r3", "r4")}
        for student, job in jobs.items():
            final = wait_graded(server.url, tokens[student], job)
            assert final["status"] == "done" and final["json"]["score"] == 10.0
        assert recorded(db) == [(s, 1) for s in students]
    finally:
        for proc in workers:
            stop_process(proc)
        server.stop()
