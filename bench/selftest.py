"""What the server's self-test costs a worker, and what a refused kind saves.

    python bench/selftest.py              # 5 runs each
    python bench/selftest.py --runs 9

Rows, each the median of --runs in this process (after one untimed grading: imports, the device probe), with
its baseline measured in the same run:

1. ``selftest.run()``: the reference solution's activations.ReLU and kernels.relu_forward graded through
   ``grader.course.grading.grade`` in the sandbox (what ``grade worker`` pays before taking jobs, and each
   ``selftest`` task), against grading an upload of those two exercises the same way (the solution as a
   student folder): the self-test is one such upload, plus writing the folder.
2. The same self-test on a machine whose compiler does not know the CPU (``GRADE_OPENCL_FAULT=unknown-cpu``):
   the kernel kind fails at the device probe, against row 1.
3. An upload of both exercises on a worker whose own self-test refused kernels (``jobs.grade_here``: the
   kernel is returned not_graded without running), against grading both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBES = ["activations.ReLU", "kernels.relu_forward"]


def median_time(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Refusing:
    """A queue store whose host key says kernels fail (what grade_here reads), nothing else."""

    def __init__(self, doc: dict[str, object]) -> None:
        self.doc = doc

    def get(self, key: str, peek: bool = False) -> object:
        return self.doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from grader.course import grading
    from grader.course.solution import write_solution
    from grader.queue import jobs, selftest
    from grader.student.sandbox.runner import Limits

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_solution(Path(tmp) / "exercises")
        grading.grade(folder, PROBES, "(warm-up)", Limits(sandbox=True))  # imports, the device probe: not timed
        upload = median_time(lambda: grading.grade(folder, PROBES, "(bench)", Limits(sandbox=True)), args.runs)
        run = median_time(lambda: selftest.run(True), args.runs)
        os.environ["GRADE_OPENCL_FAULT"] = "unknown-cpu"
        try:
            broken = median_time(lambda: selftest.run(True), args.runs)
        finally:
            del os.environ["GRADE_OPENCL_FAULT"]
        refused_doc = selftest.verdict(
            {
                "cpu": {"ok": True, "reason": None, "exercise": PROBES[0]},
                "opencl": {"ok": False, "reason": "bench", "exercise": PROBES[1]},
            }
        )
        refused = median_time(lambda: jobs.grade_here(folder, PROBES, "(bench)", Refusing(refused_doc)), args.runs)

    rows = [
        ("self-test (ReLU + relu_forward, sandbox)", run, "an upload of the same two", upload),
        ("self-test, compiler does not know the CPU", broken, "self-test on a working device", run),
        ("upload on a worker refusing kernels", refused, "the same upload graded whole", upload),
    ]
    print(f"{'what':44} {'median s':>9}  {'baseline':32} {'median s':>9} {'ratio':>6}")
    for name, value, base_name, base in rows:
        print(f"{name:44} {value:9.2f}  {base_name:32} {base:9.2f} {value / base:6.2f}")
    print(f"({args.runs} runs each, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
