"""Fault injection: the course server keeps every stored upload through queue loss, kills and restarts.

Each fault ends with every stored upload graded exactly once (one recorded
attempt) or recorded as an ``error`` the student sees, nothing of the job
left in the queue's store, and ``PRAGMA integrity_check`` ok.

- The collector's rules, driven tick by tick on a real queue file with a fake
  clock (no worker, no waiting): a try lost from the queue is put back, a
  lease that vanishes or stops changing expires, a released lease is put back
  at once, a renewed one holds, the last failure is an error, and a closed
  job leaves no key behind.
- Real processes (loopback only; waits are bounded polls on observable
  state, never sleeps): Redis killed and restarted empty mid-job; the
  server's worker child killed; the server killed while a client waits; a
  standalone worker's main process killed. Grading jobs use the ``loop``
  student (ReLU never returns, so a job is surely running when the fault
  strikes; it ends at the exercise's time limit, graded as a timeout).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from classgen import make_student
from grader.queue import records
from grader.queue.collector import Collector
from grader.queue.jobs import Outage, job_of_key, lease_key, open_queue, queued_key, task_id
from grader.student.course import DEFAULT_COURSE
from grader.student.store import Store
from server_util import (
    Redis,
    Server,
    alive,
    api,
    descendants,
    issue_tokens,
    kill_quietly,
    solution_files,
    start_worker,
    stop_process,
    wait_for,
    wait_graded,
)

RELU = ["activations.ReLU"]
UPLOAD = ["__init__.py", "base.py", "activations.py"]
LEASE = "5"  # --lease-timeout of the process tests (seconds without a renewal)


# --- the collector's rules, tick by tick -----------------------------------------------------------------


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict[str, Any]]:
    db, url = tmp_path / "course.db", f"sqlite:///{tmp_path / 'queue.db'}"
    clock = Clock()
    collector = Collector(db, url, "v", job_timeout=100.0, lease_timeout=10.0)
    collector.clock = clock
    queue = open_queue(url)
    with Store.open(db) as store:
        job = records.create_job(
            store, "ann", "k", {"activations.py": "x = 1\n"}, RELU, DEFAULT_COURSE, datetime.now(timezone.utc)
        ).job
        yield {"store": store, "queue": queue, "collector": collector, "clock": clock, "job": int(job["id"])}


def tick(rig: dict[str, Any]) -> dict[str, Any]:
    rig["collector"].tick(rig["store"], rig["queue"])
    job = records.job(rig["store"], rig["job"])
    assert job is not None
    return job


def take(rig: dict[str, Any], attempt: int, pid: int = 4242, **lease: Any) -> str:
    """What a worker on another machine does when it takes try ``attempt``: lease first, then the mark."""
    tid = task_id(rig["job"], attempt)
    rig["queue"].huey.dequeue()
    rig["queue"].huey.put(
        lease_key(tid), {"host": "machine-b", "pid": pid, "at": 0.0, "elapsed": 0.0, "beat": 0, **lease}
    )
    rig["queue"].huey.delete(queued_key(tid))
    return tid


def keys_of(rig: dict[str, Any]) -> list[str]:
    return [k for k in rig["queue"].stored_keys() if job_of_key(k) == rig["job"]]


def test_a_try_lost_from_the_queue_before_a_worker_took_it_is_enqueued_again(rig: dict[str, Any]) -> None:
    assert tick(rig)["status"] == "queued"
    assert rig["queue"].pending() == 1
    assert tick(rig)["status"] == "queued"  # still waiting: its mark is there, nothing happens
    rig["queue"].huey.flush()  # the queue restarted empty
    job = tick(rig)
    assert job["status"] == "queued" and job["tries"] == 1  # put back as the same try: it never ran
    assert rig["queue"].pending() == 1 and rig["queue"].waiting(task_id(rig["job"], 1))


def test_a_lease_that_vanishes_expires_then_the_job_is_held_and_leaves_no_key(rig: dict[str, Any]) -> None:
    tick(rig)
    take(rig, 1)
    assert tick(rig)["status"] == "running"
    rig["queue"].huey.flush()  # Redis emptied mid-job: the lease is gone
    assert tick(rig)["tries"] == 1  # first seen missing: the lease timeout starts now
    rig["clock"].now += 9
    assert tick(rig)["tries"] == 1
    rig["clock"].now += 2
    job = tick(rig)
    assert job["status"] == "queued" and job["tries"] == 2 and "lease was lost" in job["error"]
    take(rig, 2, pid=4343)
    assert tick(rig)["status"] == "running"
    rig["clock"].now += 11  # try 2's worker stops renewing
    job = tick(rig)
    assert job["status"] == "held" and "stopped renewing its lease" in job["held_reason"]  # never lost
    assert "on each of 2 tries" in job["held_reason"] and records.held_ids(job) == RELU
    assert keys_of(rig) == []  # no start note, lease or mark of a closed job stays


def test_a_renewed_lease_holds_until_the_job_timeout(rig: dict[str, Any]) -> None:
    tick(rig)
    tid = take(rig, 1)
    tick(rig)
    for beat in range(1, 10):  # renewed every 9 s: never 10 s unchanged
        rig["clock"].now += 9
        rig["queue"].huey.put(
            lease_key(tid), {"host": "machine-b", "pid": 4242, "at": 0.0, "elapsed": 9.0 * beat, "beat": beat}
        )
        assert tick(rig)["tries"] == 1
    rig["clock"].now += 9
    rig["queue"].huey.put(lease_key(tid), {"host": "machine-b", "pid": 4242, "at": 0.0, "elapsed": 101.0, "beat": 10})
    job = tick(rig)
    assert job["tries"] == 2 and "took longer than 100 s" in job["error"]


def test_a_released_lease_is_put_back_at_once_and_a_late_result_still_counts_once(rig: dict[str, Any]) -> None:
    from grader.student.engine.model import ExerciseResult, GradeReport
    from grader.student.client.wire import report_to_dict

    tick(rig)
    take(rig, 1, released="the grading worker was stopped (SIGTERM)")
    job = tick(rig)
    assert job["tries"] == 2 and "stopped (SIGTERM)" in job["error"]
    report = GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)])
    rig["queue"].huey.put(task_id(rig["job"], 2), {"ok": True, "report": report_to_dict(report)})
    rig["queue"].huey.put(task_id(rig["job"], 2), {"ok": True, "report": report_to_dict(report)})
    assert tick(rig)["status"] == "done"
    assert tick(rig)["status"] == "done"
    assert len(rig["store"].attempts("ann")) == 1
    assert keys_of(rig) == []


def test_the_sweep_deletes_keys_of_closed_jobs_only(rig: dict[str, Any]) -> None:
    tick(rig)
    records.record_error(rig["store"], rig["job"], "closed elsewhere")
    rig["queue"].huey.put(lease_key(task_id(rig["job"], 1)), {"pid": 1, "beat": 3})  # a late lease and result
    rig["queue"].huey.put(task_id(rig["job"], 1), {"ok": False, "error": "late"})
    other = records.create_job(
        rig["store"], "bob", "k", {"activations.py": "x = 1\n"}, RELU, DEFAULT_COURSE, datetime.now(timezone.utc)
    ).job
    rig["collector"].tick(rig["store"], rig["queue"])  # bob's job is enqueued (its mark stays)
    assert rig["collector"].sweep(rig["store"], rig["queue"]) == 3
    assert keys_of(rig) == []
    assert rig["queue"].waiting(task_id(int(other["id"]), 1))


def test_an_outage_of_any_length_logs_a_few_lines(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage("worker 1", logging.getLogger("test.outage"))
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        waits = [outage.failed(ConnectionError("Connection refused")) for _ in range(5000)]
        outage.recovered()
    assert len(caplog.records) == 2  # lost, back (a minute of failures would add one line)
    assert waits[0] == 0.5 and max(waits) == 30.0 and waits == sorted(waits)


# --- real processes ------------------------------------------------------------------------------------


def submit(url: str, token: str, folder: Path) -> int:
    response = api(
        url, token, "POST", "/submissions", json={"files": solution_files(folder, UPLOAD), "exercises": RELU}
    )
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


def running(url: str, token: str, job_id: int) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        doc = api(url, token, "GET", f"/submissions/{job_id}").json()
        return doc if doc["status"] == "running" and doc["worker"] else None

    return wait_for(check, 120, f"submission {job_id} to run")


def settled(db: Path, queue_url: str, url: str, tokens: dict[str, str], jobs: dict[str, int]) -> dict[str, Any]:
    """Wait for every job to close; check each is graded once or an error, the database intact, no key left."""
    finals = {}
    for student, job in jobs.items():
        final = wait_graded(url, tokens[student], job, timeout=240)
        conn = sqlite3.connect(db)
        try:
            attempts = conn.execute("SELECT COUNT(*) FROM attempts WHERE student = ?", [student]).fetchone()[0]
        finally:
            conn.close()
        assert (final["status"], attempts) in (("done", 1), ("error", 0)), (final, attempts)
        if final["status"] == "error":
            assert final["error"] and "\n" not in final["error"]
        finals[student] = final
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    queue = open_queue(queue_url)
    left = [k for k in queue.stored_keys() if job_of_key(k) in set(jobs.values())]
    assert left == [], f"keys of closed jobs left in the queue's store: {left}"
    return finals


def family_gone(pids: list[int]) -> bool:
    return not any(alive(p) for p in pids)


@pytest.mark.slow
def test_redis_killed_and_restarted_empty_mid_job(redis_server: Redis, tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    tokens, _ = issue_tokens(db, ["r1", "r2"])
    server = Server(db, redis_server.url, workers=0, extra=["--lease-timeout", LEASE]).start()
    worker_log = tmp_path / "worker.log"
    worker = start_worker(redis_server.url, 1, worker_log)
    try:
        job = submit(server.url, tokens["r1"], make_student(tmp_path / "loop", "loop"))
        running(server.url, tokens["r1"], job)
        redis_server.kill()
        # uploads go on being stored while the queue is away
        stored = submit(server.url, tokens["r2"], make_student(tmp_path / "good", "correct"))
        wait_for(
            lambda: "cannot reach the queue" in worker_log.read_text(errors="replace"),
            120,
            "the worker to notice the lost queue",
        )
        before = len(worker_log.read_text(errors="replace").splitlines())
        redis_server.restart_empty()
        doc = api(server.url, tokens["r1"], "GET", f"/submissions/{job}").json()
        assert doc["where"] and doc["max_tries"] == 2 and doc["lease_timeout_s"] == float(LEASE)
        assert doc["phase"] in ("running", "retried", "queued")
        finals = settled(db, redis_server.url, server.url, tokens, {"r1": job, "r2": stored})
        assert finals["r2"]["status"] == "done" and finals["r2"]["json"]["score"] == 10.0
        log_lines = worker_log.read_text(errors="replace").splitlines()
        assert before < 80 and len(log_lines) < 120, "the worker's log is not bounded:\n" + "\n".join(log_lines[-20:])
        assert len(server.log_text().splitlines()) < 40
    finally:
        stop_process(worker)
        server.stop()


@pytest.mark.slow
def test_the_servers_worker_child_killed_leaves_no_orphan_and_the_job_is_graded_once(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    queue_url = f"sqlite:///{tmp_path / 'queue.db'}"
    tokens, _ = issue_tokens(db, ["w1"])
    server = Server(db, queue_url, workers=1, extra=["--lease-timeout", LEASE]).start()
    try:
        job = submit(server.url, tokens["w1"], make_student(tmp_path / "loop", "loop"))
        first = running(server.url, tokens["w1"], job)
        assert server.proc is not None
        children = [p for p in descendants(server.proc.pid)]
        consumer = children[0]  # the server's direct child: `grade worker`
        family = [consumer, *descendants(consumer)]
        assert int(first["worker"].rsplit(":", 1)[1]) in family
        kill_quietly(consumer)
        wait_for(lambda: family_gone(family), 60, "every process of the killed worker child to exit (no orphans)")
        # the server starts another worker child, which grades the try put back
        pid = server.proc.pid
        wait_for(lambda: [p for p in descendants(pid) if p not in family], 60, "a new worker child")
        finals = settled(db, queue_url, server.url, tokens, {"w1": job})
        assert finals["w1"]["status"] == "done" and finals["w1"]["tries"] == 2
        # SIGTERM to the server ends it and every worker process it started
        live = descendants(server.proc.pid)
        server.stop()
        wait_for(lambda: family_gone(live), 60, "the server's workers to exit with it")
    finally:
        server.stop()


@pytest.mark.slow
def test_the_server_killed_while_a_client_waits_then_restarted_grades_once(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    queue_url = f"sqlite:///{tmp_path / 'queue.db'}"
    tokens, _ = issue_tokens(db, ["m1", "m2"])
    server = Server(db, queue_url, workers=1, extra=["--lease-timeout", LEASE]).start()
    try:
        job = submit(server.url, tokens["m1"], make_student(tmp_path / "loop", "loop"))
        queued = submit(server.url, tokens["m2"], make_student(tmp_path / "good", "correct"))
        running(server.url, tokens["m1"], job)
        outcome: dict[str, Any] = {}

        def wait_long() -> None:
            try:
                api(server.url, tokens["m1"], "GET", f"/submissions/{job}", params={"wait": 30})
            except httpx.TransportError as exc:
                outcome["error"] = exc

        waiter = threading.Thread(target=wait_long)
        waiter.start()
        server.kill()  # SIGKILL; its worker child and all of that child's processes exit too (Server.kill checks)
        waiter.join(timeout=60)
        assert not waiter.is_alive()
        server.start()
        settled(db, queue_url, server.url, tokens, {"m1": job, "m2": queued})
    finally:
        server.stop()


@pytest.mark.slow
def test_a_standalone_workers_main_process_killed_takes_its_children_and_the_job_is_put_back(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    queue_url = f"sqlite:///{tmp_path / 'queue.db'}"
    tokens, _ = issue_tokens(db, ["x1"])
    server = Server(db, queue_url, workers=0, extra=["--lease-timeout", LEASE]).start()
    worker = start_worker(queue_url, 1, tmp_path / "worker-a.log")
    second = None
    try:
        job = submit(server.url, tokens["x1"], make_student(tmp_path / "loop", "loop"))
        running(server.url, tokens["x1"], job)
        family = descendants(worker.pid)
        assert family, "the worker's grading processes"
        worker.kill()
        worker.wait(timeout=30)
        wait_for(lambda: family_gone(family), 60, "the killed worker's grading processes to exit (no orphans)")
        second = start_worker(queue_url, 1, tmp_path / "worker-b.log")
        finals = settled(db, queue_url, server.url, tokens, {"x1": job})
        assert finals["x1"]["tries"] == 2
    finally:
        stop_process(worker)
        if second is not None:
            stop_process(second)
        server.stop()


def test_a_lease_is_renewed_while_grading_and_released_on_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.queue import jobs

    monkeypatch.setattr(jobs, "RENEW_S", 0.01)
    queue = open_queue(f"sqlite:///{tmp_path / 'queue.db'}")
    tid = task_id(7, 1)
    queue.huey.put(queued_key(tid), {"at": 0})
    with pytest.raises(KeyboardInterrupt):
        with jobs.Lease(queue.huey, tid):
            assert not queue.waiting(tid)  # taken: the mark is gone, the lease is there
            wait_for(lambda: (queue.lease(tid) or {}).get("beat", 0) >= 3, 60, "three renewals")
            raise KeyboardInterrupt  # what the SIGTERM handler raises
    lease = queue.lease(tid)
    assert lease is not None and "SIGTERM" in lease["released"]


def test_a_try_taken_by_a_worker_that_died_before_its_lease_is_put_back(rig: dict[str, Any]) -> None:
    tick(rig)
    rig["queue"].huey.dequeue()  # taken, then the worker died: no lease, the mark stays
    assert rig["collector"].recover_taken(rig["store"], rig["queue"]) == []  # once could be a worker mid-take
    assert tick(rig)["status"] == "queued" and rig["queue"].pending() == 0
    assert rig["collector"].recover_taken(rig["store"], rig["queue"]) == [rig["job"]]
    assert rig["queue"].pending() == 1 and tick(rig)["tries"] == 1
    take(rig, 1)  # a live worker takes it: never put back again
    assert rig["collector"].recover_taken(rig["store"], rig["queue"]) == []
    assert rig["collector"].recover_taken(rig["store"], rig["queue"]) == []
