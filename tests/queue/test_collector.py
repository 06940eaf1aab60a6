"""The collector with a result it cannot record: that one job ends ``error``, the queue goes on, /health says so.

Driven tick by tick in this process (no worker, no waiting): a worker's part
is played by putting its lease and result in the queue's store by hand.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from grader.queue import records
from grader.server.app import ServerConfig
from grader.queue.collector import Collector
from grader.queue.jobs import lease_key, open_queue, task_id
from grader.server.web import create_app
from grader.student.client.wire import report_to_dict
from grader.student.course import DEFAULT_COURSE
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

GELU = "activations.GELU"


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[dict[str, Any]]:
    db, url = tmp_path / "course.db", f"sqlite:///{tmp_path / 'queue.db'}"
    collector = Collector(db, url, "v")  # no self-test: jobs are sent at once (as for `grade batch --queue`)
    with Store.open(db) as store:
        yield {"store": store, "queue": open_queue(url), "collector": collector, "db": db, "url": url}


def upload(rig: dict[str, Any], student: str) -> int:
    created = records.create_job(
        rig["store"],
        student,
        f"key-{student}",
        {"activations.py": "x = 1\n"},
        [GELU],
        DEFAULT_COURSE,
        datetime.now(timezone.utc),
    )
    return int(created.job["id"])


def answer(rig: dict[str, Any], job_id: int, report: GradeReport) -> None:
    """What a worker leaves for try 1: its lease, then its result."""
    tid = task_id(job_id, 1)
    rig["queue"].huey.put(lease_key(tid), {"host": "machine-b", "pid": 4242, "at": 0.0, "elapsed": 0.0, "beat": 0})
    rig["queue"].huey.put(tid, {"ok": True, "report": report_to_dict(report, instructor=True)})


def overflowed(student: str) -> GradeReport:
    """A GELU whose forward returned inf: the figures hold inf, -inf, NaN and 1e308."""
    figure = {
        "kind": "elements",
        "title": "forward: y",
        "key": "y",
        "shape": [3],
        "size": 3,
        "index": [0, 1, 2],
        "received": [math.inf, -math.inf, 1e308],
        "expected": [0.5, -0.1, 0.2],
        "differs": [True, True, True],
        "summary": "y: 3 of 3 values differ",
        "axes": [{"axis": 0, "size": 3, "step": 1, "fraction": [1.0, 1.0, 1.0], "error": [math.inf, math.nan, 1e308]}],
    }
    check = CheckResult("forward_1d", False, 0.0, 1.0, "forward returned inf", None, figure, [], figure)
    return GradeReport(student, [ExerciseResult(GELU, "failed", 0.0, 10.0, [check])], "h")


def correct(student: str) -> GradeReport:
    return GradeReport(
        student, [ExerciseResult(GELU, "passed", 10.0, 10.0, [CheckResult("forward_1d", True, 1.0, 1.0)])], "h"
    )


def tick(rig: dict[str, Any]) -> None:
    rig["collector"].tick(rig["store"], rig["queue"])


def job(store: Store, job_id: int) -> dict[str, Any]:
    """The job's row (the test made it)."""
    row = records.job(store, job_id)
    assert row is not None
    return row


def test_a_result_holding_inf_and_nan_is_recorded_and_the_next_job_too(rig: dict[str, Any]) -> None:
    first, second = upload(rig, "ann"), upload(rig, "bob")
    tick(rig)  # both sent
    answer(rig, first, overflowed("ann"))
    answer(rig, second, correct("bob"))
    tick(rig)
    assert job(rig["store"], first)["status"] == "done"
    assert job(rig["store"], second)["status"] == "done"
    report = records.report_of(rig["store"], job(rig["store"], first))
    assert report is not None
    figure = report.exercises[0].checks[0].figure
    assert figure is not None and figure["received"][:2] == [math.inf, -math.inf] and figure["received"][2] == 1e308
    assert rig["collector"].unrecorded == 0


def test_a_job_whose_result_cannot_be_recorded_ends_error_and_the_queue_goes_on(
    rig: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, second = upload(rig, "ann"), upload(rig, "bob")
    tick(rig)
    real = records.record_done

    def record_done(store: Store, job: dict[str, Any], report: GradeReport, version: str) -> Any:
        if int(job["id"]) == first:
            raise ValueError("Out of range float values are not JSON compliant")
        return real(store, job, report, version)

    monkeypatch.setattr(records, "record_done", record_done)
    answer(rig, first, overflowed("ann"))
    answer(rig, second, correct("bob"))
    tick(rig)  # a failure of one job is that job's: the tick goes on to the next
    ann, bob = job(rig["store"], first), job(rig["store"], second)
    assert ann["status"] == "error" and "could not record" in ann["error"] and "Out of range float" in ann["error"]
    assert bob["status"] == "done"
    assert rig["collector"].outage.failures == 0

    config = ServerConfig(tmp_path / "served.db", rig["url"], DEFAULT_COURSE, quiz_dir=tmp_path / "no-quizzes")
    app = create_app(config, run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        app.state.normgrade.collector = rig["collector"]  # (never started: the shutdown joins none)
        health = client.get("/api/v1/health").json()
        app.state.normgrade.collector = None
    assert health["unrecorded"]["jobs"] == 1
    assert f"job {first}" in health["unrecorded"]["last_reason"]
    assert "Out of range float" in health["unrecorded"]["last_reason"]


def test_only_an_unreachable_database_or_queue_is_an_outage() -> None:
    import sqlite3

    from grader.queue.collector import unreachable

    assert unreachable(sqlite3.OperationalError("database is locked"))
    assert unreachable(ConnectionRefusedError())
    assert not unreachable(ValueError("Out of range float values are not JSON compliant"))
    assert not unreachable(sqlite3.InterfaceError("Error binding parameter 1"))


def test_a_graded_upload_puts_its_mistakes_concepts_on_the_practice_schedule(rig: dict[str, Any]) -> None:
    from grader.student import practice_schedule

    named = GradeReport(
        "ann",
        [
            ExerciseResult(
                GELU, "failed", 0.0, 10.0, [CheckResult("forward_1d", False, 0.0, 1.0, "differs", "gelu-tanh-approx")]
            )
        ],
        "h",
    )
    job_id = upload(rig, "ann")
    tick(rig)
    answer(rig, job_id, named)
    tick(rig)
    (entry,) = [practice_schedule.from_row(r) for r in rig["store"].practice_entries("ann")]
    received = datetime.fromisoformat(job(rig["store"], job_id)["received_at"])
    assert entry.concept == "activations.gelu" and entry.reviewed == received  # missed at the upload's time
    (review,) = rig["store"].practice_reviews("ann")  # logged: a miss without a question, made on the server
    assert (review["concept"], review["question"], review["rating"], review["origin"]) == (
        "activations.gelu",
        None,
        "again",
        "server",
    )
    assert rig["store"].practice_entries("bob") == []


def test_a_held_exercises_mistakes_are_not_scheduled_in_exam_mode(rig: dict[str, Any], tmp_path: Path) -> None:
    from grader.student.course import load_course
    from grader.term import standing

    course_file = tmp_path / "course.toml"
    course_file.write_text(
        '[[chapter]]\nname = "activations"\nrelease_feedback = 2099-01-01T00:00:00Z\n', encoding="utf-8"
    )
    course = load_course(course_file)
    rig["collector"].practice_view = lambda report, at: standing.student_report(report, course, at)
    named = GradeReport(
        "ann",
        [
            ExerciseResult(
                GELU, "failed", 0.0, 10.0, [CheckResult("forward_1d", False, 0.0, 1.0, "differs", "gelu-tanh-approx")]
            )
        ],
        "h",
    )
    job_id = upload(rig, "ann")
    tick(rig)
    answer(rig, job_id, named)
    tick(rig)
    assert job(rig["store"], job_id)["status"] == "done"
    assert rig["store"].practice_entries("ann") == []  # the feedback is held: its mistake is not told, nor scheduled
