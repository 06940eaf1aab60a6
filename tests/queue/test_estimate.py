"""The estimate of the time to an upload's report (grader/queue/estimate.py), as the API gives it, the client
prints it and the student's page shows it; updated as the queue ahead drains. No worker, no waiting: the
jobs are moved by hand through records, as the collector would."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from typing import Any

import pytest

from grader.queue import estimate, records
from grader.server.app import job_json
from grader.server.student_view import submission_view
from grader.student.client.connection import describe_state, estimate_words
from grader.student.course import DEFAULT_COURSE, parse_time
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.store import Store

RELU, GELU = "activations.ReLU", "activations.GELU"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "course.db") as store:
        yield store


def upload(store: Store, student: str, ids: list[str]) -> dict:
    return records.create_job(
        store, student, "k", {"activations.py": "x = 1\n"}, ids, DEFAULT_COURSE, datetime.now(UTC)
    ).job


def graded(store: Store, student: str, ids: list[str], seconds_each: float) -> None:
    """An upload of ``ids`` graded in ``seconds_each`` per exercise, recorded as a worker's result is."""
    job = upload(store, student, ids)
    report = GradeReport(student, [ExerciseResult(i, "passed", 1.0, 1.0, [], "", seconds_each) for i in ids])
    assert records.record_done(store, _job(store, job["id"]), report, "v") is not None


def _job(store: Store, job_id: int) -> dict[str, Any]:
    """The job's row (it exists: the test made it)."""
    row = records.job(store, job_id)
    assert row is not None
    return row


def test_the_rule_is_work_ahead_over_workers_plus_own_work() -> None:
    load = estimate.Load(own_s=2.0, ahead_s=8.0, workers=2, running=False)
    assert estimate.seconds_to_report(load) == pytest.approx(8.0 / 2 + 2.0)
    running = estimate.Load(2.0, 8.0, 2, running=True)  # nothing ahead any more, half its own work left
    assert estimate.seconds_to_report(running) == pytest.approx(1.0)
    assert estimate.seconds_to_report(estimate.Load(None, 8.0, 1, False)) is None


def served(store: Store, student: str, ids: list[str], worker: str, received: float, finished: float) -> None:
    """An upload of ``ids`` graded by ``worker``: received and reported at those seconds of a synthetic clock."""
    graded(store, student, ids, seconds_each=0.1)
    at = {
        k: datetime.fromtimestamp(1_800_000_000 + t, UTC).isoformat()
        for k, t in (("received", received), ("finished", finished))
    }
    store.db.execute(
        "UPDATE jobs SET worker = ?, received_at = ?, finished_at = ? WHERE student = ?",
        [worker, at["received"], at["finished"], student],
    )
    store.db.conn.commit()


def test_on_a_synthetic_queue_of_known_service_times_the_estimate_is_the_queues(store: Store) -> None:
    """Two workers grading back to back: one-exercise uploads cost 2 s, except one that looped (12 s), and
    four-exercise uploads cost 5 s (not 4 x 2: a fixed start, then each exercise). An upload's service is the
    mean of its set's; the work ahead is theirs, over the workers running now, then its own."""
    four = [RELU, GELU, "activations.Sigmoid", "activations.Tanh"]
    t = {"host:1": 0.0, "host:2": 0.0}
    plan = [("host:1", [RELU], 2.0), ("host:2", four, 5.0)] * 4 + [("host:1", [RELU], 12.0)]
    for k, (worker, ids, seconds) in enumerate(plan):
        t[worker] += seconds
        served(store, f"s{k}", ids, worker, 0.0, t[worker])
    one_mean = (2.0 * 3 + 12.0) / 4  # host:1's first upload is not measured: 3 of 2 s and the loop
    window = estimate.measured(store)
    assert window.of([RELU]) == pytest.approx(one_mean)
    assert window.of(four) == pytest.approx(5.0)
    # an exercise set not seen SAME_SET times: the window's seconds per exercise
    per = (2.0 * 3 + 12.0 + 5.0 * 3) / (4 + 3 * 4)
    assert window.of([GELU, RELU]) == pytest.approx(2 * per)

    running = [upload(store, s, ids) for s, ids in (("r1", [RELU]), ("r2", four))]
    for k, job in enumerate(running):
        records.mark_queued(store, job["id"], 1, f"t-r{k}")
        records.mark_running(store, job["id"], f"host:{k + 1}")
    ahead = [upload(store, f"a{k}", [RELU] if k % 2 else four) for k in range(4)]
    mine = upload(store, "me", [RELU])
    work_ahead = 0.5 * one_mean + 0.5 * 5.0 + 2 * one_mean + 2 * 5.0
    load = estimate.load_for(store, _job(store, mine["id"]))
    assert load.ahead_s == pytest.approx(work_ahead) and load.own_s == pytest.approx(2.0)  # its own: the median
    workers = load.workers  # measured: mean service over busy gaps between reports (test_estimate_queue.py)
    assert job_json(store, _job(store, mine["id"]))["estimate_s"] == pytest.approx(work_ahead / workers + 2.0)
    first = job_json(store, _job(store, ahead[0]["id"]))["estimate_s"]  # first in line: the running ones ahead
    assert first == pytest.approx((0.5 * one_mean + 0.5 * 5.0) / workers + 5.0)


def test_nothing_graded_yet_means_no_estimate_and_the_position_alone(store: Store) -> None:
    job = upload(store, "ann", [RELU])
    doc = job_json(store, job)
    assert doc["estimate_s"] is None
    assert describe_state(doc) == f"Submission {job['id']}: queued"
    assert "report in about" not in submission_view(doc).state


def test_the_estimate_is_shown_and_updated_as_the_queue_ahead_drains(store: Store) -> None:
    graded(store, "zed", [RELU, GELU], seconds_each=10.0)  # measured: 10 s per exercise
    first, second, mine = (upload(store, s, [RELU]) for s in ("ann", "ben", "cy"))
    doc = job_json(store, _job(store, mine["id"]))
    # two uploads of one exercise ahead, one running at most: 2 * 10 / 1 + 10 = 30 s
    assert doc["estimate_s"] == pytest.approx(30.0)
    assert describe_state(doc) == f"Submission {mine['id']}: queued (2 ahead); report in about 30 s"
    assert submission_view(doc).state == "2 upload(s) ahead of it in the queue; report in about 30 s"

    report = GradeReport("ann", [ExerciseResult(RELU, "passed", 1.0, 1.0, [], "", 10.0)])
    records.record_done(store, _job(store, first["id"]), report, "v")
    records.mark_queued(store, second["id"], 1, "t-2")
    records.mark_running(store, second["id"], "host:1")
    doc = job_json(store, _job(store, mine["id"]))
    # one running ahead (half of it left) over the workers measured (two reports now), then its own 10 s
    expected = 0.5 * 10 / estimate.load_for(store, _job(store, mine["id"])).workers + 10
    assert doc["estimate_s"] == pytest.approx(expected) and doc["estimate_s"] < 30
    assert describe_state(doc) == f"Submission {mine['id']}: queued; {estimate_words(expected)}"

    records.mark_queued(store, mine["id"], 1, "t-3")
    records.mark_running(store, mine["id"], "host:2")
    doc = job_json(store, _job(store, mine["id"]))
    assert doc["estimate_s"] == pytest.approx(5.0)  # its own half left
    assert submission_view(doc).state == "being graded now (worker host:2); report in about 5 s"

    records.record_done(store, _job(store, mine["id"]), report, "v")
    doc = job_json(store, _job(store, mine["id"]))
    assert doc["estimate_s"] is None and "report in about" not in describe_state(doc)


def test_a_worker_grading_back_to_back_is_measured_as_the_server_saw_it(store: Store) -> None:
    """Service = report less the later of receipt and that worker's previous report: the queue's own cost
    included, whatever the attempt's grading time says."""
    for k, (student, worker, received, finished) in enumerate(
        [
            ("ann", "host:1", "2026-01-01T10:00:00+00:00", "2026-01-01T10:00:04+00:00"),
            ("ben", "host:1", "2026-01-01T10:00:00+00:00", "2026-01-01T10:00:10+00:00"),  # 6 s after ann's
            ("cy", "host:1", "2026-01-01T10:00:20+00:00", "2026-01-01T10:00:28+00:00"),  # idle, then 8 s
            ("dee", "host:2", "2026-01-01T10:00:00+00:00", "2026-01-01T10:00:30+00:00"),  # its first: not counted
        ]
    ):
        graded(store, student, [RELU, GELU] if k == 2 else [RELU], seconds_each=0.5)
        store.db.execute(
            "UPDATE jobs SET worker = ?, received_at = ?, finished_at = ? WHERE student = ?",
            [worker, received, finished, student],
        )
    store.db.conn.commit()
    assert estimate.seconds_per_exercise(store) == pytest.approx((6 + 8) / 3)  # ben's 1 exercise, cy's 2


def test_the_words_round_to_seconds_then_minutes() -> None:
    assert estimate_words(0.2) == "report in about 1 s"
    assert estimate_words(89.4) == "report in about 89 s"
    assert estimate_words(600) == "report in about 10 min"
    assert estimate_words(None) == "" and estimate_words(float("nan")) == "" and estimate_words("3") == ""


def test_receipts_and_reports_are_stored_to_the_millisecond_and_old_whole_seconds_still_read(store: Store) -> None:
    """A service under a second is measured as it was, not as 0 or 1 s of whole-second times."""
    when = datetime(2026, 1, 1, 10, 0, 5, 300_000, UTC)
    job = records.create_job(store, "ann", "k", {"activations.py": "x = 1\n"}, [RELU], DEFAULT_COURSE, when).job
    assert parse_time(job["received_at"]) == when
    graded(store, "ben", [RELU], seconds_each=0.1)
    finished = records.jobs_of(store, "ben")[0]["finished_at"]
    assert parse_time(finished).microsecond % 1000 == 0 and "." in finished  # milliseconds, always written
    assert parse_time("2026-01-01T10:00:05+00:00") < parse_time(job["received_at"])  # an old row, whole seconds
    assert "2026-01-01T10:00:05+00:00" < job["received_at"]  # and as text, as SQL orders and compares them
