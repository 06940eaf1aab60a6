"""The estimate (grader/queue/estimate.py) on a synthetic deadline: a discrete-event simulation of a queue with
known arrivals (a ramp, then a burst), service times (right, partial and crashing uploads, and loops that hold a
worker for the sandbox's whole timeout) and outages (a worker SIGKILLed every few seconds of the burst: its
upload waits for its lease to expire, the worker for its restart and self-test). The clock is the simulation's;
nothing waits. Each upload's estimate is taken as the student first sees it, on upload, from the rows the store
would hold at that instant, and compared with when its report came."""

from __future__ import annotations

import dataclasses
import heapq
import statistics
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from grader.queue import estimate

SERVICE_S = {"right": 1.0, "partial": 1.2, "crash": 0.8, "loop": 10.0}  # loop: the sandbox's timeout
MIX = ["right"] * 10 + ["partial"] * 5 + ["crash"] * 3 + ["loop"] * 2  # bench/deadline.py's default shares
KILL_EVERY = 10.0
LEASE_S, RESTART_S = 5.0, 9.0  # a killed worker's upload waits LEASE_S; the worker is back after RESTART_S
EPOCH = 1_800_000_000


def _iso(t: float) -> str:
    return datetime.fromtimestamp(EPOCH + t, UTC).isoformat(timespec="milliseconds")


@dataclass
class Upload:
    id: int
    received: float
    service: float
    runs: list[tuple[float, float]] = field(default_factory=list)  # (start, end of holding the status running)
    finished: float | None = None
    worker: str | None = None

    def row(self, now: float) -> dict[str, Any]:
        """The upload's jobs row as the store holds it at ``now``."""
        done = self.finished is not None and self.finished <= now
        running = any(start <= now < end for start, end in self.runs)
        return {
            "id": self.id,
            "selectors": json.dumps(["activations.ReLU"]),
            "received_at": _iso(self.received),
            "status": "done" if done else "running" if running else "queued",
            "worker": self.worker,
            "finished_at": _iso(self.finished) if done and self.finished is not None else None,
            "duration": self.service,
        }


def simulate(arrivals: list[float], kinds: list[str], workers: int, kills: list[float]) -> list[Upload]:
    """First come first served by ``workers`` workers; at each time of ``kills`` the lowest busy worker dies."""
    uploads = [Upload(k + 1, t, SERVICE_S[kind]) for k, (t, kind) in enumerate(zip(arrivals, kinds, strict=True))]
    events: list[tuple[float, int, str, int]] = [(u.received, 1, "arrive", u.id) for u in uploads]
    events += [(t, 0, "kill", 0) for t in kills]
    heapq.heapify(events)
    ready: list[int] = []  # upload ids waiting, served lowest id first
    busy: dict[int, tuple[int, float]] = {}  # worker -> (upload id, started)
    names = {w: f"host:{w}" for w in range(workers)}
    up = set(range(workers))
    generation = {w: 0 for w in range(workers)}
    while events:
        now, _, kind, value = heapq.heappop(events)
        if kind == "arrive" or kind == "requeue":
            heapq.heappush(ready, value)
        elif kind == "finish":
            worker, gen = divmod(value, 1000)
            if gen == generation[worker] and worker in busy:
                job_id, started = busy.pop(worker)
                u = uploads[job_id - 1]
                u.runs.append((started, now))
                u.finished, u.worker = now, names[worker]
        elif kind == "kill" and busy:
            worker = min(busy)
            job_id, started = busy.pop(worker)
            uploads[job_id - 1].runs.append((started, now + LEASE_S))  # running until its lease expires
            heapq.heappush(events, (now + LEASE_S, 1, "requeue", job_id))
            up.discard(worker)
            generation[worker] += 1
            heapq.heappush(events, (now + RESTART_S, 0, "restart", worker))
        elif kind == "restart":
            up.add(value)
            names[value] = f"host:{value}-{generation[value]}"
        for worker in sorted(up - set(busy)):
            if not ready:
                break
            job_id = heapq.heappop(ready)
            busy[worker] = (job_id, now)
            heapq.heappush(events, (now + uploads[job_id - 1].service, 2, "finish", worker * 1000 + generation[worker]))
    return uploads


def estimates_on_upload(uploads: list[Upload], nominal: bool = False) -> list[tuple[float, float]]:
    """(estimate on upload, seconds it took) of each upload estimated (none before the first report); with
    ``nominal``, the rule of nominal capacity (the uploads running now as the workers) in place of the measured."""
    out = []
    for u in uploads:
        before = u.received - 1e-6  # the instant the upload is stored, before a worker takes it
        rows = [other.row(before) for other in uploads if other.received < u.received]
        done = sorted((r for r in rows if r["status"] == "done"), key=lambda r: r["finished_at"])[-estimate.RECENT :]
        mine = {**u.row(before), "status": "received"}
        open_rows = [r for r in rows if r["status"] != "done"] + [mine]
        load = estimate.load_of(done, open_rows, mine)
        if nominal:
            load = dataclasses.replace(load, workers=max(1, sum(r["status"] == "running" for r in open_rows)))
        seconds = estimate.seconds_to_report(load)
        if seconds is not None and u.finished is not None:
            out.append((seconds, u.finished - u.received))
    return out


def deadline(students: int, seed: int) -> tuple[list[float], list[str], list[float]]:
    """Arrivals (a 60 s ramp of 30 %, then 70 % in a 30 s burst), their kinds (MIX), and a worker killed every
    KILL_EVERY seconds from the start to long after the last upload (a steady rate of outages, which a window of
    recent reports can learn; kills that begin only with the burst no estimate made before could foresee)."""
    rng = random.Random(seed)
    ramp = int(0.3 * students)
    times = sorted([rng.uniform(0, 60) for _ in range(ramp)] + [rng.uniform(60, 90) for _ in range(students - ramp)])
    return times, [rng.choice(MIX) for _ in times], [KILL_EVERY * k for k in range(1, 100)]


def within(pairs: list[tuple[float, float]], share: float = 0.3) -> float:
    return sum(1 for guess, took in pairs if abs(guess - took) <= share * took) / len(pairs)


@pytest.mark.parametrize("kill_every", [10.0, 30.0])
def test_on_a_deadline_with_kills_and_loops_the_measured_capacity_beats_the_nominal(kill_every: float) -> None:
    """Over five classes: more estimates within +/-30 % than with the nominal workers, and not consistently
    short (the median estimate / actual within 0.7-1.3; the nominal rule's is below 0.85: kills and loops
    unseen). The goal of 90 % is out of reach of any estimate that cannot tell which upload loops: with a
    tenth looping at ten times the others' cost, the work of 30 uploads ahead varies by about +/-25 %."""
    measured, nominal = [], []
    for seed in range(1, 6):
        arrivals, kinds, _ = deadline(120, seed)
        uploads = simulate(arrivals, kinds, workers=2, kills=[kill_every * k for k in range(1, 60)])
        assert all(u.finished is not None for u in uploads)
        measured += estimates_on_upload(uploads)
        nominal += estimates_on_upload(uploads, nominal=True)
    assert within(measured) > within(nominal) + 0.1
    assert 0.7 <= statistics.median(g / t for g, t in measured) <= 1.3
    assert statistics.median(g / t for g, t in nominal) < 0.85


def test_busy_gaps_count_only_while_the_server_had_work_for_every_worker() -> None:
    def row(received: float, finished: float) -> dict[str, Any]:
        return {"received_at": _iso(received), "finished_at": _iso(finished)}

    done = [row(0, 1), row(0, 2), row(5, 6), row(5.5, 8)]  # idle from 2 to 5: not a gap of the server's
    assert estimate.busy_gaps(done, [], workers=1) == pytest.approx([1.0, 2.0])
    # two workers: only after the report at 6 s were two uploads in (one of them still open)
    assert estimate.busy_gaps(done, [row(1.5, 0)], workers=2) == pytest.approx([2.0])
    assert estimate.effective_workers(2.0, [], 2) == pytest.approx(2.0)  # nothing measured: the nominal
    # gaps of 4 s (a worker down) against a mean service of 2 s: half a worker, blended with the nominal 1 s gap
    gap = (4.0 * 6 + estimate.PRIOR_GAPS * 1.0) / (6 + estimate.PRIOR_GAPS)
    assert estimate.effective_workers(2.0, [4.0] * 6, 2) == pytest.approx(2.0 / gap)
