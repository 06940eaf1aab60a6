"""A deadline on loopback: a class arriving on a deadline's curve, workers killed, Redis restarted.

    python bench/deadline.py                                  # 300 students, 3 workers, a 60 s ramp, 30 s burst
    python bench/deadline.py --students 12 --workers 2 --ramp 4 --burst 4 --kill-every 3   # the slow tier's size

It starts, on free 127.0.0.1 ports and in a fresh folder, a redis-server, ``grade serve --workers 0 --queue
redis://...`` and K ``grade worker --workers 1`` processes (bench/procs.py, the machinery of
bench/server_load.py). A generated class (``--mix``: right, partial, crashing and looping submissions; the
looping one spins in ReLU's forward until the sandbox stops it) arrives on a deadline's curve: a share of the
students (1 - ``--burst-share``) over ``--ramp`` seconds at a rate rising linearly from zero, the rest evenly over
the last ``--burst`` seconds. Each student is a thread with the real client library
(``grader.student.client.connection.submit``: upload, then long-poll until graded).

During the burst one worker is killed with SIGKILL (with its grading processes) every ``--kill-every`` seconds and
started again at once, and Redis is killed once, half-way through the burst, and started again empty
``--outage`` seconds later (every queued task and lease gone): the stored uploads must all be graded, once.

Printed: p50/p95/p99 of upload -> report as each student saw it, throughput (graded per minute, first upload to
last report), the machine's busy CPU seconds per student (/proc/stat, everything running included), and the
queueing bound: the same arrivals served first come first served by K workers, each upload taking its own
measured grading time (its attempt's ``duration``) and nothing else: p95 / bound is what the queue's machinery
and the faults cost. Then how far the estimate the student was shown on upload (``estimate_s``,
grader/queue/estimate.py) was from what happened (the share within +/-30 %; goal: 90 %; and the median of
estimate / actual: above 1 the estimates were too long; then the same by how many uploads were ahead when the
estimate was shown, and the share of every estimate shown while waiting, each against the time then left),
lost uploads (must be 0), students recorded twice
(must be 0), and uploads held (not graded yet: their worker was killed on both tries) then graded by the
server by itself, the student polling as `grade result ID` does.
"""

from __future__ import annotations

import argparse
import heapq
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(REPO)
)  # the checkout, for bench.* (never tests/: its reference/ folder would shadow the package)

from bench.batch import machine_cpu_seconds  # noqa: E402
from bench.procs import Redis, Server, issue_tokens, kill_tree, start_worker, stop_process  # noqa: E402
from bench.server_load import CRASH, count_recorded_once, percentile  # noqa: E402
from grader.course.solution import write_solution  # noqa: E402
from grader.student.client import connection as client_lib  # noqa: E402

KINDS = ("right", "partial", "crash", "loop")
LOOP = """

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        while True:
            pass
"""


@dataclass
class Seen:
    """What one student saw: when they uploaded, the estimate on upload, when the report came (None: never)."""

    student: str
    kind: str
    arrival: float  # seconds after the start, as scheduled
    uploaded: float | None = None  # monotonic
    reported: float | None = None
    shown: list[tuple[float, float, int]] = field(default_factory=list)  # (monotonic, estimate, uploads ahead)
    error: str | None = None
    held: bool = False  # answered "not graded yet" (the machine's fault), then graded later

    @property
    def estimate_s(self) -> float | None:
        """The estimate shown first, on upload (None: never shown)."""
        return self.shown[0][1] if self.shown else None

    @property
    def ahead(self) -> int | None:
        """The uploads ahead when the first estimate was shown."""
        return self.shown[0][2] if self.shown else None


@dataclass
class Faults:
    """The faults injected: worker kills and the Redis restart."""

    kills: int = 0
    redis_restarts: int = 0
    notes: list[str] = field(default_factory=list)


def write_class(root: Path) -> dict[str, Path]:
    """One folder per kind of submission: right (the reference), partial (activations.py is the stub),
    crash (ReLU calls os.abort()), loop (ReLU's forward never returns)."""
    folders = {}
    for kind in KINDS:
        folder = write_solution(root / kind)
        if kind == "partial":
            shutil.copyfile(REPO / "exercises" / "activations.py", folder / "activations.py")
        elif kind in ("crash", "loop"):
            with open(folder / "activations.py", "a", encoding="utf-8") as fh:
                fh.write(CRASH if kind == "crash" else LOOP)
        folders[kind] = folder
    return folders


def arrivals(n: int, ramp_s: float, burst_s: float, burst_share: float) -> list[float]:
    """Arrival times (seconds from the start) on a deadline's curve, sorted.

    The first round(n * (1 - burst_share)) students over [0, ramp_s) at a rate rising linearly from zero
    (the k-th of m at ramp_s * sqrt(k / m): the cumulative count grows as t^2), the rest evenly over
    [ramp_s, ramp_s + burst_s)."""
    early = round(n * (1.0 - burst_share))
    late = n - early
    times = [ramp_s * (k / early) ** 0.5 for k in range(early)]
    times += [ramp_s + burst_s * k / late for k in range(late)]
    return times


def mix_of(n: int, shares: dict[str, float]) -> list[str]:
    """The kind of each of n students: the shares spread evenly over the arrivals (largest remainder)."""
    total = sum(shares.values())
    kinds: list[str] = []
    credit = dict.fromkeys(shares, 0.0)
    for _ in range(n):
        for kind, share in shares.items():
            credit[kind] += share / total
        kind = max(credit, key=lambda k: credit[k])
        credit[kind] -= 1.0
        kinds.append(kind)
    return kinds


def queueing_bound(arrival_s: list[float], service_s: list[float], workers: int) -> list[float]:
    """Each upload's time to report when k workers serve the same arrivals first come first served, each upload
    taking its own service time and nothing else (no queue machinery, no faults)."""
    free = [0.0] * workers
    heapq.heapify(free)
    out = []
    for arrival, service in sorted(zip(arrival_s, service_s, strict=True)):
        start = max(arrival, heapq.heappop(free))
        heapq.heappush(free, start + service)
        out.append(start + service - arrival)
    return out


def service_times(db: Path, students: list[str]) -> dict[str, float]:
    """Each student's recorded grading time (their attempt's duration, seconds)."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT student, duration FROM attempts").fetchall()
    finally:
        conn.close()
    wanted = set(students)
    return {s: float(d or 0.0) for s, d in rows if s in wanted}


def recorded_twice(db: Path) -> int:
    """Students with more than one recorded attempt (each submitted once)."""
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM (SELECT student FROM attempts GROUP BY student HAVING COUNT(*) > 1)"
            ).fetchone()[0]
        )
    finally:
        conn.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One deadline: start everything, replay the arrivals with the faults, measure, stop everything."""
    shares = dict(zip(KINDS, args.mix, strict=True))
    with tempfile.TemporaryDirectory(prefix="bench-deadline-") as tmp:
        root = Path(tmp)
        db = root / "course.db"
        students = [f"s{k:03d}" for k in range(args.students)]
        tokens, _ = issue_tokens(db, students)
        folders = write_class(root)
        redis = Redis(root).start()
        server = Server(db, redis.url, workers=0, extra=["--lease-timeout", f"{args.lease_timeout:g}"])
        logs = [root / f"worker-{k}.log" for k in range(args.workers)]
        machines = [start_worker(redis.url, 1, log) for log in logs]
        server.start()
        times = arrivals(args.students, args.ramp, args.burst, args.burst_share)
        seen = [Seen(s, kind, t) for s, kind, t in zip(students, mix_of(args.students, shares), times, strict=True)]
        faults = Faults()
        try:
            cpu0 = machine_cpu_seconds()
            began = replay(server, tokens, folders, args.exercises, seen, machines, redis, logs, faults, args)
            cpu = machine_cpu_seconds() - cpu0
            service = service_times(db, students)
            twice = recorded_twice(db)
            once = count_recorded_once(db, students)
        finally:
            server.stop()
            for machine in machines:
                stop_process(machine)
            redis.stop()
    return summarize(seen, service, began, cpu, twice, once, faults, args.workers)


def replay(
    server: Server,
    tokens: dict[str, str],
    folders: dict[str, Path],
    selectors: list[str],
    seen: list[Seen],
    machines: list[Any],
    redis: Redis,
    logs: list[Path],
    faults: Faults,
    args: argparse.Namespace,
) -> float:
    """The students' threads on their arrival times and the faults of the burst; returns the start (monotonic)."""
    lock = threading.Lock()
    done = threading.Event()
    began = time.monotonic() + 1.0  # every thread started before the first arrival

    def student(one: Seen) -> None:
        def on_state(doc: dict[str, Any]) -> None:  # every state the server reports, from the upload on
            if doc.get("estimate_s") is not None:
                one.shown.append((time.monotonic(), float(doc["estimate_s"]), int(doc.get("queue_position") or 0)))

        with client_lib.Client(server.url, tokens[one.student], timeout=120) as client:
            time.sleep(max(0.0, began + one.arrival - time.monotonic()))
            one.uploaded = time.monotonic()
            try:
                result = client_lib.submit(
                    client, folders[one.kind], selectors, on_state=on_state, max_wait_s=args.max_wait
                )
                if result.status == "held":  # not graded yet (its workers killed): the server grades it later
                    one.held = True
                    result = graded_later(client, result.id, began + one.arrival + args.max_wait)
            except Exception as exc:  # noqa: BLE001 (a bench reports every failure and goes on)
                one.error = str(exc)
                return
        with lock:
            one.reported = time.monotonic()
            if result.status != "done":
                one.error = f"{result.status}: {result.error}"

    def chaos() -> None:
        """From the burst's start: a worker SIGKILLed and restarted every kill_every s; Redis restarted once."""
        burst_at = began + args.ramp
        redis_at = burst_at + args.burst / 2
        next_kill = burst_at
        victim = 0
        while not done.wait(max(0.0, min(next_kill, redis_at) - time.monotonic())):
            now = time.monotonic()
            if now >= redis_at and not faults.redis_restarts:
                redis.kill()
                time.sleep(args.outage)  # the outage itself: Redis is down this long
                redis.restart_empty()
                faults.redis_restarts += 1
                redis_at = float("inf")
            if now >= next_kill and now < burst_at + args.burst:
                kill_tree(machines[victim].pid)
                machines[victim].wait(timeout=30)
                machines[victim] = start_worker(redis.url, 1, logs[victim])
                faults.kills += 1
                victim = (victim + 1) % len(machines)
                next_kill += args.kill_every
            elif now >= burst_at + args.burst and faults.redis_restarts:
                return

    threads = [threading.Thread(target=student, args=(one,)) for one in seen]
    for t in threads:
        t.start()
    chaos_thread = threading.Thread(target=chaos)
    chaos_thread.start()
    for t in threads:
        t.join()
    done.set()
    chaos_thread.join()
    return began


HELD_POLL_S = 1.0  # how often a held student looks again, as `grade result ID` would


def graded_later(client: Any, submission: int, deadline: float) -> Any:
    """What a held upload ends as: polled (as `grade result ID`) until the server graded it by itself, or
    ``deadline`` (monotonic) passed (then still held: counted lost)."""
    while True:
        result = client_lib.wait_for(client, submission, max_wait_s=max(0.0, deadline - time.monotonic()))
        if result.status != "held" or time.monotonic() > deadline:
            return result
        time.sleep(HELD_POLL_S)


def near(estimate: float, actual: float) -> bool:
    """The estimate is within +/-30 % of what happened (the issue's measure)."""
    return abs(estimate - actual) <= 0.3 * actual


# (label, least, most) uploads ahead when the estimate was shown: the estimate's error by how deep the queue was
AHEAD_GROUPS = [("0", 0, 0), ("1-9", 1, 9), ("10-29", 10, 29), ("30-59", 30, 59), ("60+", 60, 10**9)]


def summarize(
    seen: list[Seen],
    service: dict[str, float],
    began: float,
    cpu: float,
    twice: int,
    once: int,
    faults: Faults,
    workers: int,
) -> dict[str, Any]:
    """The figures of one run."""
    graded = [s for s in seen if s.reported is not None and s.uploaded is not None and s.error is None]
    latency = {s.student: s.reported - s.uploaded for s in graded}  # type: ignore[operator]
    bound = queueing_bound([s.arrival for s in seen], [service.get(s.student, 0.0) for s in seen], workers)
    estimated = [s for s in graded if s.estimate_s is not None]
    within = [s for s in estimated if near(s.estimate_s, latency[s.student])]  # type: ignore[arg-type]
    within_names = {s.student for s in within}
    # every estimate shown while the student waited, against the time then left until the report
    updates = [(e, s.reported - t) for s in graded for t, e, _ in s.shown if s.reported is not None and s.reported > t]
    updates_within = sum(1 for e, left in updates if near(e, left))
    span = max(s.reported for s in graded if s.reported is not None) - began if graded else float("nan")
    values = list(latency.values())
    p95_bound = percentile(bound, 95)
    return {
        "students": len(seen),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "throughput": 60.0 * len(graded) / span if graded else 0.0,
        "cpu_per_student": cpu / len(seen),
        "bound_p95": p95_bound,
        "p95_over_bound": percentile(values, 95) / p95_bound if p95_bound > 0 else float("nan"),
        "estimated": len(estimated),
        "within_30": len(within),
        "estimate_ratio": percentile([s.estimate_s / latency[s.student] for s in estimated], 50),  # type: ignore[operator]
        "estimate_ratio_by_kind": {
            kind: percentile(
                [
                    s.estimate_s / latency[s.student]  # type: ignore[operator]
                    for s in estimated
                    if s.kind == kind
                ],
                50,
            )
            for kind in KINDS
            if any(s.kind == kind for s in estimated)
        },
        "updates": len(updates),
        "updates_within_30": updates_within,
        "within_30_by_ahead": {
            label: (
                sum(1 for s in group if s.student in within_names),
                len(group),
                percentile([s.estimate_s / latency[s.student] for s in group], 50),  # type: ignore[operator]
            )
            for label, low, high in AHEAD_GROUPS
            if (group := [s for s in estimated if s.ahead is not None and low <= s.ahead <= high])
        },
        "lost": len(seen) - len(graded),
        "recorded_twice": twice,
        "recorded_once": once,
        "held": sum(s.held for s in graded),
        "kills": faults.kills,
        "redis_restarts": faults.redis_restarts,
        "errors": [f"{s.student} ({s.kind}): {s.error}" for s in seen if s.error][:5],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=300, help="students in the class (default 300)")
    parser.add_argument("--workers", type=int, default=3, help="`grade worker --workers 1` processes (default 3)")
    parser.add_argument("--ramp", type=float, default=60.0, help="seconds of the rising ramp (default 60)")
    parser.add_argument("--burst", type=float, default=30.0, help="seconds of the final burst (default 30)")
    parser.add_argument("--burst-share", type=float, default=0.7, help="share arriving in the burst (default 0.7)")
    parser.add_argument(
        "--kill-every", type=float, default=10.0, help="seconds between worker kills during the burst (default 10)"
    )
    parser.add_argument("--outage", type=float, default=2.0, help="seconds Redis stays down (default 2)")
    parser.add_argument("--lease-timeout", type=float, default=10.0, help="the server's --lease-timeout (default 10)")
    parser.add_argument(
        "--mix",
        type=float,
        nargs=4,
        default=[0.5, 0.25, 0.15, 0.10],
        metavar=("RIGHT", "PARTIAL", "CRASH", "LOOP"),
        help="shares of the kinds of submission (default 0.5 0.25 0.15 0.10)",
    )
    parser.add_argument(
        "--exercises",
        nargs="+",
        default=["activations"],
        help="exercises or topics graded per submission (default: activations)",
    )
    parser.add_argument("--max-wait", type=float, default=3600.0, help="seconds a student waits at most")
    args = parser.parse_args(argv)
    if shutil.which("redis-server") is None:
        parser.error("redis-server is not installed (Debian package redis-server)")
    print(
        f"{args.students} students ({' '.join(f'{k} {v:g}' for k, v in zip(KINDS, args.mix, strict=True))}), "
        f"{args.workers} workers, {args.ramp:g} s ramp then {args.burst_share:.0%} in a {args.burst:g} s burst; "
        f"a worker killed every {args.kill_every:g} s of the burst, Redis restarted once "
        f"({args.outage:g} s down); exercises: {' '.join(args.exercises)}",
        flush=True,
    )
    r = run(args)
    header = (
        "p50 s",
        "p95 s",
        "p99 s",
        "throughput/min",
        "CPU s/student",
        "bound p95 s",
        "p95/bound",
        "estimate within 30%",
        "estimate/actual p50",
        "lost",
        "recorded twice",
        "held, then graded",
        "workers killed",
        "Redis restarts",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    share = f"{r['within_30']}/{r['estimated']} ({r['within_30'] / r['estimated']:.0%})" if r["estimated"] else "-"
    print(
        f"| {r['p50']:.1f} | {r['p95']:.1f} | {r['p99']:.1f} | {r['throughput']:.1f} | "
        f"{r['cpu_per_student']:.2f} | {r['bound_p95']:.1f} | {r['p95_over_bound']:.2f} | {share} | "
        f"{r['estimate_ratio']:.2f} | "
        f"{r['lost']} | {r['recorded_twice']} | {r['held']} | {r['kills']} | {r['redis_restarts']} |",
        flush=True,
    )
    by_kind = ", ".join(f"{kind} {ratio:.2f}" for kind, ratio in r["estimate_ratio_by_kind"].items())
    print(f"estimate/actual p50 by kind of submission: {by_kind or '-'}")
    by_ahead = ", ".join(
        f"{label}: {n_in}/{n} within 30%, estimate/actual {ratio:.2f}"
        for label, (n_in, n, ratio) in r["within_30_by_ahead"].items()
    )
    print(f"by uploads ahead when shown: {by_ahead or '-'}")
    if r["updates"]:
        print(
            f"every estimate shown while waiting, against the time then left: {r['updates_within_30']}/{r['updates']}"
            f" ({r['updates_within_30'] / r['updates']:.0%}) within 30%"
        )
    for line in r["errors"]:
        print(f"  failed: {line}", file=sys.stderr)
    return 1 if r["lost"] or r["recorded_twice"] else 0


if __name__ == "__main__":
    sys.exit(main())
