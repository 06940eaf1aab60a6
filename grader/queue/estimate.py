"""How long until an open upload's report: one estimate from the measured service times, for the API.

The service time is measured, never configured, over the last ``RECENT`` uploads the server graded (a recent
window: it follows the machine as spares, load and workers change). Where a worker graded several of them one
after the other, an upload's service is what the server saw it cost: from its receipt, or from the worker's
previous report when that came later, to its own report (taking it off the queue, the sandboxes, the grading
and the recording all included); otherwise its attempt's ``duration`` (the worker's grading time alone).

Uploads of different exercise sets cost differently (a fixed start, then each exercise), so the service of
an upload is the **mean** service of the uploads of its own exercise set when the window holds at least
``SAME_SET`` of them, else the window's seconds per exercise (all services over all their exercises) times its
exercises. The mean, not the median: the estimate is the expected time (a queue of uploads costs the sum of
their means, the slow ones included), and the store's times are whole seconds, whose differences only
average out (back-to-back reports one second apart or in the same second: a median would read 0 or 1). The
rule, for an upload that waits with uploads ahead of it:

    seconds = work ahead / workers + own service

where the work ahead is the service of each open upload received before it (one already running counts
half: on average half of it is done), and ``workers`` is how many uploads run at once right now (the uploads
marked ``running``; at least 1). A running upload has half its own service left. With no graded upload yet
there is no measurement, and no estimate (None): the student sees the queue position alone.

The API gives it as ``estimate_s`` (grader/server/app.py: job_json); the client and the student's page write it
(grader/student/client/connection.py: estimate_words). The deadline bench (bench/deadline.py) prints how far
these estimates were from what happened (the share within +/-30 %).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from grader.queue import records
from grader.student.course import parse_time
from grader.student.store import Store

RECENT = 30  # graded uploads the service times are measured over
SAME_SET = 3  # uploads of one exercise set the window must hold for their own service times to be used


@dataclass(frozen=True)
class Load:
    """What the estimate reads off the store: the measured service times and the queue ahead of one upload."""

    own_s: float | None     # this upload's service; None: nothing graded yet
    ahead_s: float          # the open work ahead, in seconds (running ones count half)
    workers: int            # uploads running at once now (at least 1)
    running: bool           # this upload is being graded now


def seconds_to_report(load: Load) -> float | None:
    """The module's rule: work ahead / workers + own service (half of it when running); None without a
    measurement."""
    if load.own_s is None:
        return None
    own = load.own_s * (0.5 if load.running else 1.0)
    ahead = 0.0 if load.running else load.ahead_s / max(1, load.workers)
    return ahead + own


def service_seconds(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each upload's service as the server saw it, for those a worker graded right after another of ``rows``:
    (the upload, its report's time less its receipt or that worker's previous report, whichever came later)."""
    out = []
    last: dict[str, float] = {}  # worker -> its latest report so far
    for row in sorted(rows, key=lambda r: (r["finished_at"], r["id"])):
        done = parse_time(row["finished_at"]).timestamp()
        worker = row["worker"]
        if worker and worker in last:
            out.append((row, max(0.0, done - max(parse_time(row["received_at"]).timestamp(), last[worker]))))
        if worker:
            last[worker] = done
    return out


@dataclass(frozen=True)
class Measured:
    """The window's services: (exercise set, seconds) of each upload measured."""

    services: list[tuple[tuple[str, ...], float]]

    def per_exercise(self) -> float | None:
        """All the services over all their exercises (None: nothing measured)."""
        exercises = sum(len(ids) for ids, _ in self.services)
        return sum(seconds for _, seconds in self.services) / exercises if exercises else None

    def of(self, ids: list[str]) -> float | None:
        """The service of an upload of ``ids``: the mean of the services of uploads of exactly ``ids`` when the
        window holds SAME_SET of them, else the seconds per exercise times their number (None: nothing
        measured)."""
        same = [seconds for key, seconds in self.services if key == tuple(sorted(ids))]
        if len(same) >= SAME_SET:
            return statistics.fmean(same)
        per = self.per_exercise()
        return None if per is None else per * len(ids)


def measured(store: Store) -> Measured:
    """The services of the last RECENT uploads graded: as the server saw them where a worker graded them back to
    back (those each worker graded after its first in the window), else their attempts' grading time."""
    rows = records.recent_done(store, RECENT)
    services = service_seconds(rows)
    if services:
        return Measured([(tuple(sorted(records.exercise_ids(r))), t) for r, t in services])
    return Measured([(tuple(sorted(records.exercise_ids(r))), float(r["duration"] or 0.0)) for r in rows])


def seconds_per_exercise(store: Store) -> float | None:
    """The window's seconds per exercise (None: nothing graded yet)."""
    return measured(store).per_exercise()


def load_for(store: Store, job_row: dict[str, Any]) -> Load:
    """The Load of one open upload: the open uploads before it, those running, the measured services."""
    window = measured(store)
    ahead = 0.0
    for row in records.open_before(store, job_row["id"]):
        service = window.of(records.exercise_ids(row))
        ahead += (service or 0.0) * (0.5 if row["status"] == "running" else 1.0)
    return Load(window.of(records.exercise_ids(job_row)), ahead,
                max(1, records.running_count(store)), job_row["status"] == "running")


def estimate(store: Store, job_row: dict[str, Any]) -> float | None:
    """Seconds until an open upload's report (None: closed, or nothing measured yet)."""
    if job_row["status"] not in records.OPEN_STATES:
        return None
    return seconds_to_report(load_for(store, job_row))

