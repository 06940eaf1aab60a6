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
half: on average half of it is done), and its own service is the **median** of its set's (one upload is
rarely the one that loops; many ahead cost their mean). ``workers`` is the capacity **measured**, not
counted: by Little's law the server's throughput is 1 / (mean gap between reports while it was busy: at
least as many uploads in it as are running now), and the uploads it grades at once are that throughput x the
mean service. The gaps hold what nominal workers x service times miss: a killed worker's lease expiring, its
restart and self-test, a loop holding a worker for its whole timeout. When the window holds few gaps, the
nominal gap (mean service / uploads running now, at least 1) counts as PRIOR_GAPS of them. A running upload
has half its own service left. With no graded upload yet there is no measurement, and no estimate (None): the
student sees the queue position alone. Reports are stored to the millisecond (jobs.finished_at), so gaps
under a second are measured; rows of older stores, whole seconds, still read.

The API gives it as ``estimate_s`` (grader/server/app.py: job_json); the client and the student's page write it
(grader/student/client/connection.py: estimate_words). The deadline bench (bench/deadline.py) prints how far
these estimates were from what happened (the share within +/-30 %).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Any

from grader.queue import records
from grader.student.course import parse_time
from grader.student.store import Store

RECENT = 30  # graded uploads the service times and the throughput are measured over
SAME_SET = 3  # uploads of one exercise set the window must hold for their own service times to be used
PRIOR_GAPS = 3  # busy gaps the nominal interval (mean service / workers running) counts as in the blend


@dataclass(frozen=True)
class Load:
    """What the estimate reads off the store: the measured service times and the queue ahead of one upload."""

    own_s: float | None  # this upload's service; None: nothing graded yet
    ahead_s: float  # the open work ahead, in seconds (running ones count half)
    workers: float  # the effective workers: mean service / mean busy gap (> 0)
    running: bool  # this upload is being graded now


def seconds_to_report(load: Load) -> float | None:
    """The module's rule: work ahead / workers + own service (half of it when running); None without a
    measurement."""
    if load.own_s is None:
        return None
    own = load.own_s * (0.5 if load.running else 1.0)
    ahead = 0.0 if load.running else load.ahead_s / max(load.workers, 1e-9)
    return ahead + own


def _at(text: str) -> float:
    """A stored time in seconds since the epoch (whole seconds in rows written before sub-second times)."""
    return parse_time(text).timestamp()


def service_seconds(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each upload's service as the server saw it, for those a worker graded right after another of ``rows``:
    (the upload, its report's time less its receipt or that worker's previous report, whichever came later)."""
    out = []
    last: dict[str, float] = {}  # worker -> its latest report so far
    for row in sorted(rows, key=lambda r: (_at(r["finished_at"]), r["id"])):
        done = _at(row["finished_at"])
        worker = row["worker"]
        if worker and worker in last:
            out.append((row, max(0.0, done - max(_at(row["received_at"]), last[worker]))))
        if worker:
            last[worker] = done
    return out


def busy_gaps(done: list[dict[str, Any]], open_rows: list[dict[str, Any]], workers: int) -> list[float]:
    """The seconds between consecutive reports of ``done`` (graded uploads) while the server was busy: at least
    ``workers`` uploads in it (received, not yet reported; ``open_rows`` are not yet reported) just after the
    first report of the two. Outages, restarts and loops are in them; idle time is not."""
    spans = [(_at(r["received_at"]), _at(r["finished_at"])) for r in done]
    spans += [(_at(r["received_at"]), math.inf) for r in open_rows]
    reports = sorted(end for _, end in spans[: len(done)])
    return [
        after - t
        for t, after in itertools.pairwise(reports)
        if sum(1 for start, end in spans if start <= t < end) >= workers
    ]


def effective_workers(mean_service: float, gaps: list[float], workers: int) -> float:
    """How many uploads the server grades at once, measured: the mean service over the mean busy gap between
    reports (Little's law: throughput = 1 / gap, workers = throughput x service). The mean gap is blended with
    the nominal one, mean service / ``workers``, which counts as PRIOR_GAPS gaps:

        gap = (sum(gaps) + PRIOR_GAPS * mean_service / workers) / (len(gaps) + PRIOR_GAPS)

    ``workers`` (those grading now, at least 1) when nothing is measured."""
    gap = (sum(gaps) + PRIOR_GAPS * mean_service / workers) / (len(gaps) + PRIOR_GAPS)
    return mean_service / gap if mean_service > 0 and gap > 0 else float(workers)


@dataclass(frozen=True)
class Measured:
    """The window's services: (exercise set, seconds) of each upload measured."""

    services: list[tuple[tuple[str, ...], float]]

    def per_exercise(self) -> float | None:
        """All the services over all their exercises (None: nothing measured)."""
        exercises = sum(len(ids) for ids, _ in self.services)
        return sum(seconds for _, seconds in self.services) / exercises if exercises else None

    def mean(self) -> float:
        """The mean service of an upload (0: nothing measured)."""
        return statistics.fmean(seconds for _, seconds in self.services) if self.services else 0.0

    def typical(self, ids: list[str]) -> float | None:
        """The typical service of one upload of ``ids``: like :meth:`of`, with the median in place of the mean
        (a single upload is rarely the one that loops; the work ahead, many uploads, costs their mean)."""
        same = [seconds for key, seconds in self.services if key == tuple(sorted(ids))]
        if len(same) >= SAME_SET:
            return statistics.median(same)
        return self.of(ids)

    def of(self, ids: list[str]) -> float | None:
        """The service of an upload of ``ids``: the mean of the services of uploads of exactly ``ids`` when the
        window holds SAME_SET of them, else the seconds per exercise times their number (None: nothing
        measured)."""
        same = [seconds for key, seconds in self.services if key == tuple(sorted(ids))]
        if len(same) >= SAME_SET:
            return statistics.fmean(same)
        per = self.per_exercise()
        return None if per is None else per * len(ids)


def measured_of(rows: list[dict[str, Any]]) -> Measured:
    """The services of graded uploads ``rows``: as the server saw them where a worker graded them back to back
    (those each worker graded after its first), else their attempts' grading time."""
    services = service_seconds(rows)
    if services:
        return Measured([(tuple(sorted(records.exercise_ids(r))), t) for r, t in services])
    return Measured([(tuple(sorted(records.exercise_ids(r))), float(r["duration"] or 0.0)) for r in rows])


def measured(store: Store) -> Measured:
    """The services of the last RECENT uploads graded."""
    return measured_of(records.recent_done(store, RECENT))


def seconds_per_exercise(store: Store) -> float | None:
    """The window's seconds per exercise (None: nothing graded yet)."""
    return measured(store).per_exercise()


def load_of(done: list[dict[str, Any]], open_rows: list[dict[str, Any]], job_row: dict[str, Any]) -> Load:
    """The Load of one open upload from the recent graded uploads ``done`` and the open ones: the measured
    services, the open uploads received before it, the effective workers."""
    window = measured_of(done)
    ahead = 0.0
    for row in open_rows:
        if row["id"] < job_row["id"]:
            service = window.of(records.exercise_ids(row))
            ahead += (service or 0.0) * (0.5 if row["status"] == "running" else 1.0)
    workers = max(1, sum(1 for row in open_rows if row["status"] == "running"))
    return Load(
        window.typical(records.exercise_ids(job_row)),
        ahead,
        effective_workers(window.mean(), busy_gaps(done, open_rows, workers), workers),
        job_row["status"] == "running",
    )


def load_for(store: Store, job_row: dict[str, Any]) -> Load:
    """The Load of one open upload, read off the store."""
    return load_of(records.recent_done(store, RECENT), records.open_jobs(store), job_row)


def estimate(store: Store, job_row: dict[str, Any]) -> float | None:
    """Seconds until an open upload's report (None: closed, or nothing measured yet)."""
    if job_row["status"] not in records.OPEN_STATES:
        return None
    return seconds_to_report(load_for(store, job_row))
