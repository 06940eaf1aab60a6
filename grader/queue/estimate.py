"""How long until an open upload's report: one estimate from the measured service times, for the API.

The service time is measured, never configured: the seconds per exercise of the last ``RECENT`` uploads the
server graded. Where a worker graded several of them one after the other, an upload's service is what the
server saw it cost: from its receipt, or from the worker's previous report when that came later, to its own
report (taking it off the queue, the sandboxes, the grading and the recording all included); otherwise its
attempt's ``duration`` (the worker's grading time alone). The rule, for an upload that waits (``queued``)
with uploads ahead of it:

    seconds = work ahead / workers + own work

where an upload's work is its exercises times the seconds per exercise, the work ahead is that of every open
upload received before it (one already running counts half: on average half of it is done), and ``workers``
is how many uploads run at once right now (the uploads marked ``running``; at least 1). A running upload has
half its own work left. With no graded upload yet there is no measurement, and no estimate (None): the
student sees the queue position alone.

The API gives it as ``estimate_s`` (grader/server/app.py: job_json); the client and the student's page write it
(grader/student/client/connection.py: estimate_words). The deadline bench (bench/deadline.py) prints how far
these estimates were from what happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.queue import records
from grader.student.course import parse_time
from grader.student.store import Store

RECENT = 30  # graded uploads the seconds per exercise are measured over


@dataclass(frozen=True)
class Load:
    """What the estimate reads off the store: the measured service time and the queue ahead of one upload."""

    seconds_per_exercise: float | None   # None: nothing graded yet
    workers: int                         # uploads running at once now (at least 1)
    exercises_ahead: float               # open work ahead, in exercises (running ones count half)
    own_exercises: int
    running: bool                        # this upload is being graded now


def seconds_to_report(load: Load) -> float | None:
    """The module's rule: work ahead / workers + own work (half of it when running); None without a measurement."""
    per = load.seconds_per_exercise
    if per is None:
        return None
    own = load.own_exercises * per * (0.5 if load.running else 1.0)
    ahead = 0.0 if load.running else load.exercises_ahead * per / max(1, load.workers)
    return ahead + own


def service_seconds(rows: list[dict[str, Any]]) -> list[float]:
    """Each upload's service as the server saw it, for those a worker graded right after another of ``rows``:
    its report's time less its receipt or that worker's previous report, whichever came later."""
    out = []
    last: dict[str, float] = {}  # worker -> its latest report so far
    for row in sorted(rows, key=lambda r: (r["finished_at"], r["id"])):
        done = parse_time(row["finished_at"]).timestamp()
        worker = row["worker"]
        if worker and worker in last:
            out.append(max(0.0, done - max(parse_time(row["received_at"]).timestamp(), last[worker])))
        if worker:
            last[worker] = done
    return out


def seconds_per_exercise(store: Store) -> float | None:
    """Seconds per exercise over the last RECENT uploads graded: their service as the server saw it where a
    worker graded them back to back, else their attempts' grading time (None: nothing graded yet)."""
    rows = records.recent_done(store, RECENT)
    if not rows:
        return None
    per_row = sorted(rows, key=lambda r: (r["finished_at"], r["id"]))
    services = service_seconds(per_row)
    if services:  # the uploads each worker graded after its first in the window
        served = [r for r in per_row if r["worker"]]
        firsts = {r["worker"]: r["id"] for r in reversed(served)}
        counted = [r for r in served if firsts[r["worker"]] != r["id"]]
        exercises = sum(len(records.exercise_ids(r)) for r in counted)
        return sum(services) / exercises if exercises else None
    exercises = sum(len(records.exercise_ids(r)) for r in rows)
    return sum(float(r["duration"] or 0.0) for r in rows) / exercises if exercises else None


def load_for(store: Store, job_row: dict[str, Any]) -> Load:
    """The Load of one open upload: the open uploads before it, those running, the measured time."""
    open_before = records.open_before(store, job_row["id"])
    running = records.running_count(store)
    ahead = sum(len(records.exercise_ids(r)) * (0.5 if r["status"] == "running" else 1.0) for r in open_before)
    return Load(seconds_per_exercise(store), max(1, running), ahead, len(records.exercise_ids(job_row)),
                job_row["status"] == "running")


def estimate(store: Store, job_row: dict[str, Any]) -> float | None:
    """Seconds until an open upload's report (None: closed, or nothing measured yet)."""
    if job_row["status"] not in records.OPEN_STATES:
        return None
    return seconds_to_report(load_for(store, job_row))

