"""Load on the course server: N simulated students submitting at once, on loopback.

    python bench/server_load.py                          # 200 students, both queues, 1 run each
    python bench/server_load.py --students 40 --runs 3   # the median of 3 runs
    python bench/server_load.py --queue sqlite --exercises activations.ReLU

For each queue it starts, on free 127.0.0.1 ports and in a fresh folder:

- ``sqlite``: ``grade serve --workers 2`` (the embedded SqliteHuey queue and
  one `grade worker` child with 2 grading processes);
- ``redis``: a redis-server, ``grade serve --workers 0 --queue redis://...``
  and two separate ``grade worker --workers 1`` processes (two "machines");
- ``redis-restart``: the same, but once a third of the students have their
  report, redis-server is killed and, ``--outage`` seconds later, started
  again empty on the same port (no persistence: every queued task, lease and
  result is gone). The stored uploads must all be graded all the same.

Then every student (a thread, with the real client library,
``grader.student.client.connection.submit``: upload, then long-poll until graded) submits one
folder at the same moment: a third correct (the reference), a third partial
(activations.py is the stub), a third crashing (activations.ReLU calls
os.abort()), graded on ``--exercises`` (default: the activations topic, 8
exercises; the whole course is ~1.5 s per student on 2 cores). Meanwhile a probe asks
``GET /api/v1/progress`` every 0.2 s.

Columns: throughput (submissions graded per minute, first upload to last
report), p50/p95 of upload -> report as each student saw it, p95 of the
progress request while grading ran, "recorded once": students with exactly
one recorded attempt and a closed job (anything but N/N is a bug), "lost":
uploads that never got a report (must be 0), and "extra p95": this row's
p95 minus the plain ``redis`` row's of the same invocation (what the restart
cost). With --runs > 1 each figure is the median over the runs.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(REPO)
)  # the checkout, for bench.procs (never tests/: its reference/ folder would shadow the package)

from bench.procs import Redis, Server, issue_tokens, start_worker, stop_process  # noqa: E402
from grader.course.solution import write_solution  # noqa: E402
from grader.student.client import connection as client_lib  # noqa: E402

KINDS = ("correct", "partial", "crash")
CRASH = """

import os as _os

_CorrectReLU = ReLU


class ReLU(_CorrectReLU):
    def forward(self, x):
        _os.abort()
"""


@dataclass
class RunResult:
    """One run's figures."""

    throughput: float  # submissions per minute
    p50: float  # seconds, upload -> report
    p95: float
    api_p95_ms: float  # GET /progress during grading
    recorded_once: int
    students: int
    lost: int = 0  # uploads that never got a report


def write_folders(root: Path) -> dict[str, Path]:
    """The three kinds of submission, once each (every student of a kind uploads the same files)."""
    folders = {}
    for kind in KINDS:
        folder = write_solution(root / kind)
        if kind == "partial":
            shutil.copyfile(REPO / "exercises" / "activations.py", folder / "activations.py")
        elif kind == "crash":
            with open(folder / "activations.py", "a", encoding="utf-8") as fh:
                fh.write(CRASH)
        folders[kind] = folder
    return folders


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def count_recorded_once(db: Path, students: list[str]) -> int:
    """Students with exactly one attempt and no open job."""
    conn = sqlite3.connect(db)
    try:
        attempts = dict(conn.execute("SELECT student, COUNT(*) FROM attempts GROUP BY student"))
        open_jobs = {
            r[0] for r in conn.execute("SELECT student FROM jobs WHERE status IN ('received', 'queued', 'running')")
        }
    finally:
        conn.close()
    return sum(1 for s in students if attempts.get(s) == 1 and s not in open_jobs)


def one_run(
    queue: str, n: int, selectors: list[str], workers: int, outage: float = 5.0, lease_timeout: float = 20.0
) -> RunResult:
    """Start the server (and Redis and workers), let n students submit at once, measure, stop everything.

    ``redis-restart``: Redis is killed once a third of the students have their report and started again,
    empty, ``outage`` seconds later.
    """
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        root = Path(tmp)
        db = root / "course.db"
        students = [f"s{k:03d}" for k in range(n)]
        tokens, _ = issue_tokens(db, students)
        folders = write_folders(root)
        redis = Redis(root).start() if queue.startswith("redis") else None
        machines = []
        fault = None
        if redis is not None:
            server = Server(db, redis.url, workers=0, extra=["--lease-timeout", f"{lease_timeout:g}"])
            machines = [start_worker(redis.url, 1, root / f"worker-{k}.log") for k in range(workers)]
        else:
            server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=workers)
        if queue == "redis-restart":
            assert redis is not None

            def fault() -> None:
                redis.kill()
                time.sleep(outage)
                redis.restart_empty()

        server.start()
        try:
            return measure(server, db, students, tokens, folders, selectors, fault)
        finally:
            server.stop()
            for machine in machines:
                stop_process(machine)
            if redis is not None:
                redis.stop()


def measure(
    server: Server,
    db: Path,
    students: list[str],
    tokens: dict[str, str],
    folders: dict[str, Path],
    selectors: list[str],
    fault: Any = None,
) -> RunResult:
    """The submissions, the probe and the figures; ``fault()`` runs once a third of the reports are in."""
    latencies: list[float] = []
    finished_at: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(students) + 1)

    def student(index: int, name: str) -> None:
        folder = folders[KINDS[index % len(KINDS)]]
        with client_lib.Client(server.url, tokens[name], timeout=120) as client:
            start.wait()
            t0 = time.monotonic()
            try:
                done = client_lib.submit(client, folder, selectors, max_wait_s=3600)
            except Exception as exc:  # noqa: BLE001 (a bench reports every failure and goes on)
                with lock:
                    failures.append(f"{name}: {exc}")
                    lost.append(name)
                return
            t1 = time.monotonic()
        with lock:
            latencies.append(t1 - t0)
            finished_at.append(t1)
            if done.status != "done":
                failures.append(f"{name}: {done.status} {done.error}")
                lost.append(name)

    probe_ms: list[float] = []
    stop_probe = threading.Event()
    lost: list[str] = []

    def strike() -> None:
        while not stop_probe.is_set():
            with lock:
                if len(finished_at) >= max(1, len(students) // 3):
                    break
            stop_probe.wait(0.05)
        if not stop_probe.is_set():
            fault()

    def probe() -> None:
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {tokens[students[0]]}"}, timeout=60
        ) as http:
            while not stop_probe.is_set():
                t0 = time.monotonic()
                http.get("/api/v1/progress").raise_for_status()
                probe_ms.append(1000 * (time.monotonic() - t0))
                stop_probe.wait(0.2)

    threads = [threading.Thread(target=student, args=(k, s)) for k, s in enumerate(students)]
    for t in threads:
        t.start()
    probe_thread = threading.Thread(target=probe)
    fault_thread = threading.Thread(target=strike) if fault is not None else None
    start.wait()
    began = time.monotonic()
    probe_thread.start()
    if fault_thread is not None:
        fault_thread.start()
    for t in threads:
        t.join()
    stop_probe.set()
    probe_thread.join()
    if fault_thread is not None:
        fault_thread.join()
    for line in failures[:5]:
        print(f"  failed: {line}", file=sys.stderr)
    span = (max(finished_at) - began) if finished_at else float("nan")
    return RunResult(
        throughput=60.0 * len(latencies) / span if finished_at else 0.0,
        p50=percentile(latencies, 50),
        p95=percentile(latencies, 95),
        api_p95_ms=percentile(probe_ms, 95),
        recorded_once=count_recorded_once(db, students),
        students=len(students),
        lost=len(lost),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=200, help="simulated students (default 200)")
    parser.add_argument("--runs", type=int, default=1, help="runs per queue; figures are medians (default 1)")
    parser.add_argument(
        "--queue",
        choices=["sqlite", "redis", "redis-restart"],
        action="append",
        help="queue(s) to measure (default: all three; redis-restart: Redis killed and restarted empty mid-run)",
    )
    parser.add_argument("--outage", type=float, default=5.0, help="seconds Redis stays down (default 5)")
    parser.add_argument(
        "--lease-timeout", type=float, default=20.0, help="the server's --lease-timeout (default 20, its own default)"
    )
    parser.add_argument("--workers", type=int, default=2, help="grading processes (default 2)")
    parser.add_argument(
        "--exercises",
        nargs="+",
        default=["activations"],
        help="exercises or topics graded per submission (default: activations)",
    )
    args = parser.parse_args()
    queues = args.queue or ["sqlite", "redis", "redis-restart"]
    if "redis-restart" in queues and "redis" not in queues:
        queues.insert(queues.index("redis-restart"), "redis")  # the baseline of "extra p95"
    if any(q.startswith("redis") for q in queues) and shutil.which("redis-server") is None:
        parser.error("redis-server is not installed (Debian package redis-server): or pass --queue sqlite")
    print(
        f"{args.students} students, {args.runs} run(s) each, {args.workers} grading processes, "
        f"exercises: {' '.join(args.exercises)}"
    )
    header = ("queue", "throughput/min", "p50 s", "p95 s", "progress p95 ms", "recorded once", "lost", "extra p95 s")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    baseline_p95 = None
    for queue in queues:
        runs = [
            one_run(queue, args.students, args.exercises, args.workers, args.outage, args.lease_timeout)
            for _ in range(args.runs)
        ]
        med = statistics.median
        p95 = med(r.p95 for r in runs)
        if queue == "redis":
            baseline_p95 = p95
        label = {
            "sqlite": "sqlite (embedded, 2 workers)",
            "redis": f"redis ({args.workers} worker processes)",
            "redis-restart": f"redis, restarted empty mid-run ({args.outage:g} s down)",
        }[queue]
        extra = f"{p95 - baseline_p95:+.1f}" if queue == "redis-restart" and baseline_p95 is not None else "-"
        print(
            f"| {label} | {med(r.throughput for r in runs):.1f} | {med(r.p50 for r in runs):.1f} | "
            f"{p95:.1f} | {med(r.api_p95_ms for r in runs):.0f} | "
            f"{min(r.recorded_once for r in runs)}/{args.students} | {max(r.lost for r in runs)} | {extra} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
