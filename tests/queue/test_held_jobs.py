"""Held jobs and the server's self-test, driven tick by tick (no worker process, no waiting).

The collector runs with a :class:`SelfTest` on a real queue file; a worker's
part is played by hand (a published self-test, a result put in the result
store) or by running the queued task in this process (``huey.execute``),
which grades through the real path, the sandbox included, with
``GRADE_OPENCL_FAULT=unknown-cpu`` standing for a CPU PoCL's compiler does not
know. Each test says what the student and the store see: nothing recorded for
a held exercise, one attempt per upload, no rate limit spent on the machine's
fault.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from grader.course.solution import write_solution
from grader.queue import records, selftest
from grader.server.app import job_json
from grader.student.store.clock import to_seconds
from grader.queue.collector import Collector, regrade_backoff
from grader.queue.jobs import job_of_key, lease_key, open_queue, task_id
from grader.queue.selftest import LATEST_KEY, SelfTest, verdict
from grader.student.client.wire import report_to_dict
from grader.student.course import DEFAULT_COURSE
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.store import Store
from server_util import solution_files

RELU, KERNEL = "activations.ReLU", "kernels.relu_forward"
UPLOAD = ["__init__.py", "base.py", "activations.py", "kernels/activations.cl"]
NO_DEVICE = "no OpenCL device here can build and run a kernel (PoCL: error: unknown target CPU 'generic')"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def published(kinds: dict[str, bool], reason: str = NO_DEVICE) -> dict[str, Any]:
    """A self-test as a worker publishes it: each kind ok or failing with ``reason``."""
    return verdict(
        {
            kind: {"ok": ok, "reason": None if ok else reason, "exercise": selftest.PROBES[kind]}
            for kind, ok in kinds.items()
        }
    )


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict[str, Any]]:
    db, url = tmp_path / "course.db", f"sqlite:///{tmp_path / 'queue.db'}"
    queue = open_queue(url)
    clock = Clock()
    test = SelfTest(queue, retry_first_s=60.0, clock=clock)
    collector = Collector(db, url, "v", job_timeout=100.0, lease_timeout=10.0, selftest=test)
    collector.clock = clock
    closed: list[int] = []
    collector.on_closed = closed.append
    with Store.open(db) as store:
        yield {
            "store": store,
            "queue": queue,
            "collector": collector,
            "test": test,
            "clock": clock,
            "closed": closed,
            "root": tmp_path,
        }


def upload(rig: dict[str, Any], ids: list[str], student: str = "ann", key: str = "k") -> int:
    files = {"activations.py": "x = 1\n"}
    job = records.create_job(rig["store"], student, key, files, ids, DEFAULT_COURSE, datetime.now(timezone.utc)).job
    return int(job["id"])


def tick(rig: dict[str, Any]) -> None:
    rig["collector"].tick(rig["store"], rig["queue"])


def job(rig: dict[str, Any], job_id: int) -> dict[str, Any]:
    row = records.job(rig["store"], job_id)
    assert row is not None
    return row


def publish(rig: dict[str, Any], kinds: dict[str, bool], reason: str = NO_DEVICE) -> None:
    rig["queue"].huey.put(LATEST_KEY, published(kinds, reason))


def answer(rig: dict[str, Any], job_id: int, attempt: int, exercises: list[ExerciseResult]) -> None:
    """What a worker returns for try ``attempt``: its lease, then its result."""
    tid = task_id(job_id, attempt)
    rig["queue"].huey.put(lease_key(tid), {"host": "machine-b", "pid": 4242, "at": 0.0, "elapsed": 0.0, "beat": 0})
    report = GradeReport("ann", exercises, "hash")
    rig["queue"].huey.put(tid, {"ok": True, "report": report_to_dict(report)})


def passed(exercise_id: str) -> ExerciseResult:
    return ExerciseResult(exercise_id, "passed", 10.0, 10.0)


def not_graded(exercise_id: str, why: str = NO_DEVICE) -> ExerciseResult:
    return ExerciseResult(exercise_id, "not_graded", 0.0, 10.0, [], why + " (`grade doctor` shows more)")


def recorded(rig: dict[str, Any], student: str = "ann") -> list[tuple[int, str, str]]:
    return [(r["attempt_id"], r["exercise"], r["started_at"]) for r in rig["store"].submissions(student=student)]


def sent_ids(rig: dict[str, Any], job_id: int) -> list[str]:
    """The exercise ids of the latest grading task of a job waiting in the queue."""
    tasks = [t for t in rig["queue"].huey.pending() if str(t.id).startswith(f"job-{job_id}-")]
    return list(tasks[-1].args[3]) if tasks else []


# --- the self-test decides what is sent ---------------------------------------------------------------------


def test_no_job_is_handed_out_before_the_first_self_test(rig: dict[str, Any]) -> None:
    job_id = upload(rig, [RELU])
    tick(rig)
    assert job(rig, job_id)["status"] == "received"
    assert [str(t.id) for t in rig["queue"].huey.pending()] == [rig["test"].task]  # the self-test, sent at start
    publish(rig, {"cpu": True, "opencl": True})
    tick(rig)
    assert job(rig, job_id)["status"] == "queued" and sent_ids(rig, job_id) == [RELU]


def test_a_verdict_published_before_the_server_started_is_not_trusted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'queue.db'}"
    queue = open_queue(url)
    queue.huey.put(LATEST_KEY, published({"cpu": True, "opencl": True}))  # yesterday's
    test = SelfTest(queue)
    test.tick(queue, lambda tid: None)
    assert not test.ready and test.task is not None


def test_a_refused_kind_is_held_and_the_rest_graded_then_graded_by_itself_once_healed(rig: dict[str, Any]) -> None:
    publish(rig, {"cpu": True, "opencl": False})
    job_id = upload(rig, [RELU, KERNEL])
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "queued" and sent_ids(rig, job_id) == [RELU]
    assert records.held_ids(row) == [KERNEL] and "Kernel exercises are not being graded" in row["held_reason"]
    answer(rig, job_id, 1, [passed(RELU)])
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "held" and records.held_ids(row) == [KERNEL] and job_id in rig["closed"]
    assert [ex for _, ex, _ in recorded(rig)] == [RELU]  # the graded one counts; the held one is nobody's score
    doc = job_json(rig["store"], row)
    assert doc["phase"] == "held" and doc["held"]["exercises"] == [KERNEL]
    assert doc["where"].startswith("1 exercise (10 points) not graded yet: the server grades it by itself")
    assert "grade doctor" in doc["where"] and "\n" not in doc["where"]
    shown = {e["id"]: e for e in doc["json"]["exercises"]}
    assert shown[KERNEL]["score"] is None and shown[KERNEL]["status"] == "not_graded"
    assert doc["json"]["score"] == 10.0 and doc["json"]["max_score"] == 10.0
    tick(rig)
    assert job(rig, job_id)["status"] == "held"  # still refused: not sent
    publish(rig, {"cpu": True, "opencl": True})  # a worker's self-test passes again
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "queued" and row["tries"] == 2 and row["first_try"] == 2 and row["regrades"] == 1
    assert sent_ids(rig, job_id) == [KERNEL]  # the held exercise alone, the same upload
    answer(rig, job_id, 2, [passed(KERNEL)])
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "done" and row["held"] is None
    rows = recorded(rig)
    assert [ex for _, ex, _ in rows] == [RELU, KERNEL]
    assert len({a for a, _, _ in rows}) == 1 and len(rig["store"].attempts("ann")) == 1  # one upload, one attempt
    # timed at the upload (to its second, as every attempt is): deadlines judge it
    assert {when for _, _, when in rows} == {to_seconds(row["received_at"])}
    attempt = rig["store"].attempts("ann")[0]
    assert (attempt["score"], attempt["max_score"]) == (20.0, 20.0)
    final = job_json(rig["store"], row)
    assert final["status"] == "done" and final["json"]["score"] == 20.0 and final["held"] is None
    tick(rig)
    assert len(rig["store"].attempts("ann")) == 1
    assert [k for k in rig["queue"].stored_keys() if job_of_key(k) == job_id] == []  # nothing of it left


def test_an_upload_held_whole_is_told_at_once_and_spends_no_rate_limit(rig: dict[str, Any]) -> None:
    publish(rig, {"cpu": False, "opencl": False}, "the grader's worker did not start (exit status 1)")
    course = DEFAULT_COURSE.__class__(name="limited", rate_submissions=1, rate_minutes=60)
    now = datetime.now(timezone.utc)
    first = records.create_job(rig["store"], "ann", "k1", {"activations.py": "x = 1\n"}, [RELU], course, now)
    tick(rig)
    row = job(rig, int(first.job["id"]))
    assert row["status"] == "held" and row["rate_free"] == 1 and row["attempt_id"] is None
    assert int(first.job["id"]) in rig["closed"]  # the long poll answers: the student is told now
    assert rig["store"].attempts("ann") == []
    second = records.create_job(rig["store"], "ann", "k2", {"activations.py": "x = 2\n"}, [RELU], course, now)
    assert second.created  # the held upload was free: this one is within the limit
    with pytest.raises(records.RateLimited):  # and this one is not
        records.create_job(rig["store"], "ann", "k3", {"activations.py": "x = 3\n"}, [RELU], course, now)
    report = records.report_of(rig["store"], row)
    assert report is not None and [e.status for e in report.exercises] == ["not_graded"]
    assert report.exit_status == 2


# --- a job that comes back not graded --------------------------------------------------------------------------


def test_a_cpu_exercise_whose_worker_cannot_start_is_held_and_asks_for_a_self_test(rig: dict[str, Any]) -> None:
    publish(rig, {"cpu": True, "opencl": True})
    job_id = upload(rig, [RELU])
    tick(rig)
    selftests = rig["test"].sent
    answer(rig, job_id, 1, [not_graded(RELU, "the grader's worker did not start (exit status 1): bwrap: no")])
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "held" and row["rate_free"] == 1 and rig["store"].attempts("ann") == []
    assert "the grader's worker did not start" in row["held_reason"] and "grade doctor" in row["held_reason"]
    tick(rig)
    assert rig["test"].sent == selftests + 1  # the machine failed a job: it is tested again at once
    assert job(rig, job_id)["status"] == "held"  # and the job waits for that verdict
    publish(rig, {"cpu": False, "opencl": True}, "the grader's worker did not start (exit status 1): bwrap: no")
    tick(rig)
    assert job(rig, job_id)["status"] == "held" and "cpu" in rig["test"].refused()


def test_held_work_that_fails_again_waits_a_growing_back_off(rig: dict[str, Any]) -> None:
    publish(rig, {"cpu": True, "opencl": True})
    job_id = upload(rig, [RELU])
    tick(rig)
    answer(rig, job_id, 1, [not_graded(RELU)])
    tick(rig)
    publish(rig, {"cpu": True, "opencl": True})  # the self-test passes, yet the machine failed the job
    tick(rig)
    assert job(rig, job_id)["status"] == "queued"  # the first round again: at once
    answer(rig, job_id, 2, [not_graded(RELU)])
    tick(rig)
    assert job(rig, job_id)["status"] == "held" and job(rig, job_id)["regrades"] == 1
    publish(rig, {"cpu": True, "opencl": True})
    tick(rig)
    assert job(rig, job_id)["status"] == "held"  # now it waits
    rig["collector"].now = lambda: datetime.now(timezone.utc).timestamp() + regrade_backoff(1) + 1
    tick(rig)
    assert job(rig, job_id)["status"] == "queued" and job(rig, job_id)["tries"] == 3
    assert [regrade_backoff(n) for n in (0, 1, 2, 3, 20)] == [0.0, 30.0, 60.0, 120.0, 3600.0]


def test_a_held_round_whose_worker_dies_twice_is_held_again_not_an_error(rig: dict[str, Any]) -> None:
    publish(rig, {"cpu": True, "opencl": False})
    job_id = upload(rig, [RELU, KERNEL])
    tick(rig)
    answer(rig, job_id, 1, [passed(RELU)])
    tick(rig)
    publish(rig, {"cpu": True, "opencl": True})
    tick(rig)
    for attempt in (2, 3):  # the round's two tries: taken, then their workers vanish
        rig["queue"].huey.dequeue()
        tid = task_id(job_id, attempt)
        rig["queue"].huey.put(lease_key(tid), {"host": "machine-b", "pid": 4242, "at": 0.0, "elapsed": 0.0, "beat": 0})
        rig["queue"].huey.delete(f"queued:{tid}")
        tick(rig)
        rig["queue"].huey.delete(lease_key(tid))
        tick(rig)
        rig["clock"].now += 11
        tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "held" and records.held_ids(row) == [KERNEL] and "lease was lost" in row["held_reason"]
    assert [ex for _, ex, _ in recorded(rig)] == [RELU]


def killed_worker_pid() -> int:
    """The pid of a process of this host that a SIGKILL ended (as a grading worker killed mid-job)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.pid


def test_a_job_whose_worker_is_killed_on_each_try_is_held_then_graded_once(rig: dict[str, Any]) -> None:
    """Killed twice (both tries, MAX_TRIES): held, not an error, never lost; graded once after the self-test."""
    publish(rig, {"cpu": True, "opencl": True})
    job_id = upload(rig, [RELU])
    tick(rig)
    selftests = rig["test"].sent
    for attempt in (1, 2):  # each try is taken by a worker of this host, then that worker is SIGKILLed
        rig["queue"].huey.dequeue()
        tid = task_id(job_id, attempt)
        rig["queue"].huey.put(
            lease_key(tid),
            {"host": rig["collector"].host, "pid": killed_worker_pid(), "at": 0.0, "elapsed": 0.0, "beat": 0},
        )
        rig["queue"].huey.delete(f"queued:{tid}")
        tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "held" and records.held_ids(row) == [RELU]
    assert "stopped in the middle of the job, on each of 2 tries" in row["held_reason"]
    assert rig["store"].attempts("ann") == [] and job_id in rig["closed"]  # told now, nothing recorded
    report = records.report_of(rig["store"], row)
    assert report is not None and [e.status for e in report.exercises] == ["not_graded"]
    tick(rig)
    assert rig["test"].sent == selftests + 1  # the machine failed a job: it is tested again
    publish(rig, {"cpu": True, "opencl": True})  # and passes
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "queued" and sent_ids(rig, job_id) == [RELU] and row["tries"] == 3
    answer(rig, job_id, 3, [passed(RELU)])
    tick(rig)
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "done" and row["held"] is None
    assert [ex for _, ex, _ in recorded(rig)] == [RELU] and len(rig["store"].attempts("ann")) == 1  # graded once


def test_a_held_result_is_recorded_once_however_often_it_is_collected(rig: dict[str, Any]) -> None:
    publish(rig, {"cpu": True, "opencl": True})
    job_id = upload(rig, [RELU, KERNEL])
    tick(rig)
    row = job(rig, job_id)
    report = GradeReport("ann", [passed(RELU), not_graded(KERNEL)])
    assert records.record_done(rig["store"], row, report, "v") is not None
    assert records.record_done(rig["store"], row, report, "v") is None
    assert len(rig["store"].submissions(student="ann")) == 1


# --- the real path: the task graded here, a CPU PoCL does not know ------------------------------------------------


def run_queue(rig: dict[str, Any]) -> int:
    """Run every task waiting in the queue in this process, as a worker would; how many ran."""
    ran = 0
    while (task := rig["queue"].huey.dequeue()) is not None:
        rig["queue"].huey.execute(task)
        ran += 1
    return ran


@pytest.mark.slow
@pytest.mark.opencl
def test_the_real_self_test_refuses_kernels_on_a_machine_whose_compiler_does_not_know_the_cpu(
    rig: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRADE_OPENCL_FAULT", "unknown-cpu")
    folder = write_solution(rig["root"] / "solution")
    files = solution_files(folder, UPLOAD)
    job_id = int(
        records.create_job(
            rig["store"], "ann", "k", files, [RELU, KERNEL], DEFAULT_COURSE, datetime.now(timezone.utc)
        ).job["id"]
    )
    tick(rig)  # the self-test goes out first
    assert run_queue(rig) == 1
    tick(rig)
    health = rig["test"].as_json()
    assert health["cpu"]["ok"] is True and health["opencl"]["ok"] is False
    assert "unknown target CPU 'generic'" in health["opencl"]["reason"]
    assert sent_ids(rig, job_id) == [RELU]
    run_queue(rig)
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "held" and [ex for _, ex, _ in recorded(rig)] == [RELU]
    monkeypatch.delenv("GRADE_OPENCL_FAULT")  # the machine is fixed; the next self-test says so
    rig["test"].want()
    tick(rig)
    run_queue(rig)
    tick(rig)
    assert rig["test"].works("opencl") and sent_ids(rig, job_id) == [KERNEL]
    run_queue(rig)
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "done"
    doc = job_json(rig["store"], row)
    assert doc["json"]["score"] == 20.0 and len(rig["store"].attempts("ann")) == 1


@pytest.mark.slow
def test_a_worker_whose_own_self_test_failed_holds_that_kind_without_grading_it(rig: dict[str, Any]) -> None:
    rig["queue"].huey.put(selftest.host_key(), published({"cpu": True, "opencl": False}))  # this machine's
    publish(rig, {"cpu": True, "opencl": True})  # the server's: kernels work (another worker said so)
    folder = write_solution(rig["root"] / "solution")
    job_id = int(
        records.create_job(
            rig["store"],
            "ann",
            "k",
            solution_files(folder, UPLOAD),
            [RELU, KERNEL],
            DEFAULT_COURSE,
            datetime.now(timezone.utc),
        ).job["id"]
    )
    tick(rig)
    rig["queue"].huey.revoke_by_id(rig["test"].task)  # (the server's start-up self-test is not this test's subject)
    assert sent_ids(rig, job_id) == [RELU, KERNEL]
    run_queue(rig)
    tick(rig)
    row = job(rig, job_id)
    assert row["status"] == "held" and records.held_ids(row) == [KERNEL]
    assert "this worker's self-test fails for them" in row["held_reason"]
    assert [ex for _, ex, _ in recorded(rig)] == [RELU]


def test_a_sandbox_that_cannot_start_on_the_worker_holds_every_exercise(
    rig: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.queue import jobs
    from grader.student.sandbox import bwrap

    monkeypatch.setattr(bwrap, "problem", lambda: "bubblewrap cannot create a sandbox here: setting up uid map")
    folder = write_solution(rig["root"] / "solution")
    report = jobs.grade_here(folder, [RELU, KERNEL], "ann", rig["queue"].huey)
    assert [e.status for e in report.exercises] == ["not_graded", "not_graded"]
    assert all("the OS sandbox cannot start on this worker" in e.message for e in report.exercises)
    assert report.exit_status == 2 and report.files_hash


def test_a_self_test_lost_on_the_queue_is_sent_again_and_its_late_keys_swept(rig: dict[str, Any]) -> None:
    tick(rig)
    first = rig["test"].task
    assert first is not None
    rig["queue"].huey.flush()  # the queue restarted empty: the self-test never reached a worker
    tick(rig)
    second = rig["test"].task
    assert second is not None and second != first and str(second) in {str(t.id) for t in rig["queue"].huey.pending()}
    rig["queue"].huey.put(first, {"ok": True, "selftest": published({"cpu": True, "opencl": True})})  # arrives late
    assert rig["collector"].sweep(rig["store"], rig["queue"]) == 1
    assert first not in rig["queue"].stored_keys() and f"queued:{second}" in rig["queue"].stored_keys()
    assert not rig["test"].ready  # a late answer to a self-test no longer awaited is not taken
