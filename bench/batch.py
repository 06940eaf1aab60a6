"""Throughput of `grade batch`: complete correct submissions graded per second.

Target (issue 5): 100 complete submissions in under 4 minutes on a 2-core machine.

    python bench/batch.py                 # median of 3 runs at N=20, then one run at N=100
    python bench/batch.py --n 100 --small 10 --repeats 3 --jobs 1 --jobs 2 --parallel 1 --parallel 2

Each run grades freshly written copies of the reference solution
(``grader.solution.write_solution``) under new student names, so nothing is
cached between runs, into a new database, with ``grader.batch.run_batch``: the
same code path as ``grade batch``. It prints one table row per configuration:
N, jobs (students at once), parallel (sandbox children per student), runs,
median wall time, submissions per second, the time projected for 100, and
"short": how many of these correct submissions scored below full marks (over
all runs of the row; anything but 0 is a grader bug), "cpu/s": CPU seconds
(this process and its children) per submission, and "load": the 1-minute load
average after the row (other work on the machine slows every figure down:
on an idle machine, 100 * cpu/s / cores is the best time possible).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from grader import batch
from grader.student import catalogue
from grader.student.checks import CHECKS
from grader.student.sandbox import Limits
from grader.solution import write_solution
from grader.student.store import Store

TARGET_N = 100
TARGET_S = 240.0


def write_class(root: Path, n: int, tag: str) -> None:
    """n complete correct submissions, students ``<tag>-000`` ... (a new tag: new seeds, nothing cached)."""
    for k in range(n):
        write_solution(root / f"{tag}-{k:03d}" / "exercises")


def cpu_seconds() -> float:
    """User + system CPU time of this process and of its finished children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one_run(n: int, jobs: int, parallel: int, selectors: list[str] | None, tag: str) -> tuple[float, float, int]:
    """Grade n fresh submissions: (wall seconds of run_batch, CPU seconds it used, submissions below full marks).

    A submission that cannot be graded at all stops the bench.
    """
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        root = Path(tmp) / "class"
        write_class(root, n, tag)
        with Store.open(Path(tmp) / "class.db") as store:
            t0, c0 = time.perf_counter(), cpu_seconds()
            summary = batch.run_batch(
                root, store, "bench", selectors, jobs=jobs, limits=Limits(parallel=parallel)
            )
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            failed = [o for o in summary.outcomes if o.status == "failed"]
            if failed:
                raise SystemExit(f"{len(failed)} submissions could not be graded, e.g. {failed[0].message}")
            short = [
                f"{row['student']} {row['exercise']}: {row['status']} {row['message'][:120]}"
                for row in store.submissions()
                if row["score"] < row["max_score"]
            ]
            short_students = sum(1 for a in store.attempts() if a["score"] < a["max_score"])
    for line in short:
        print(f"  below full marks: {line}", file=sys.stderr)
    return wall, cpu, short_students


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=TARGET_N, help="submissions in the single large run (0: skip it)")
    parser.add_argument("--small", type=int, default=20, help="submissions in each of the repeated small runs")
    parser.add_argument("--repeats", type=int, default=3, help="small runs per configuration (median reported)")
    parser.add_argument("--jobs", type=int, action="append", help="students at once (repeatable) [grade batch's default]")
    parser.add_argument("--parallel", type=int, action="append", help="sandbox children per student (repeatable) [2]")
    args = parser.parse_args(argv)
    jobs_list = args.jobs or [batch.default_jobs()]
    parallel_list = args.parallel or [Limits().parallel]

    missing = [e for e in catalogue.EXERCISES if e not in CHECKS]
    selectors = None if not missing else [e for e in catalogue.EXERCISES if e in CHECKS]
    graded = len(catalogue.EXERCISES) - len(missing)
    cpus = batch.usable_cpus()
    print(f"grade batch throughput: {cpus} CPU(s) usable, {os.cpu_count()} in the machine; "
          f"{graded} of {len(catalogue.EXERCISES)} exercises have checks"
          + (f" (missing: {', '.join(missing)})" if missing else " (complete submissions)"))
    header = (f"{'N':>4} {'jobs':>4} {'par':>4} {'runs':>4} {'median s':>9} {'subm/s':>7} {'100 in s':>9}"
              f"  {'target':<16}  short  cpu/s  load")
    print(header)
    print("-" * len(header))
    serial = 0
    for jobs in jobs_list:
        for parallel in parallel_list:
            sizes = [args.small] * (args.repeats if args.small > 0 else 0) + ([args.n] if args.n > 0 else [])
            runs: dict[int, list[tuple[float, float, int]]] = {}
            for n in sizes:
                serial += 1
                runs.setdefault(n, []).append(one_run(n, jobs, parallel, selectors, f"r{serial}"))
            for n, results in runs.items():
                wall = statistics.median(w for w, _, _ in results)
                cpu = statistics.median(c for _, c, _ in results) / n
                short = sum(s for _, _, s in results)
                rate = n / wall
                projected = TARGET_N / rate
                verdict = "ok" if projected < TARGET_S else "MISSED"
                load = os.getloadavg()[0]
                print(f"{n:>4} {jobs:>4} {parallel:>4} {len(results):>4} {wall:>9.1f} {rate:>7.2f} "
                      f"{projected:>9.1f}  {verdict + f' (< {TARGET_S:.0f} s)':<16}  {short:>5} {cpu:>6.2f} "
                      f"{load:>5.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
