"""Which OpenCL device grades a student's kernels for the least CPU: every device here, alternated.

    python bench/devices.py              # 5 runs of each device that passes the probe
    python bench/devices.py --runs 9

Every student's kernel worker starts an OpenCL compiler, runs the probe and
builds the student's kernel files, so a device's cost per student is mostly
its compiler's. For each device that passes the probe (``PYOPENCL_CTX`` names
it in the child), a fresh process with an empty PoCL cache (PoCL keys its cache
on the preprocessed source, so a warm one would answer for files that differ
from earlier ones only in comments) grades one correct student's seven kernel
exercises in itself (bench/batch.py ``grade_correct_in_process``: no sandbox, no workers) and
prints its CPU seconds from the interpreter's start. The devices take turns run
after run, so a machine whose speed drifts moves them alike. Printed: each
device's median, least and most CPU seconds, its ratio to the cheapest, and
which one grading chooses (grader/student/engine/opencl_device.py: release
builds before builds with assertions, a simulator last). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(REPO)
)  # the checkout, for bench.* (never tests/: its reference/ folder would shadow the package)

from bench.batch import fresh_process, grade_correct_in_process  # noqa: E402
from grader.student.engine import catalogue  # noqa: E402
from grader.student.engine.checks import CHECKS  # noqa: E402

KERNEL_EXERCISES = [e for e in catalogue.EXERCISES if CHECKS[e].needs_opencl]


def list_child() -> None:
    """(``--list``, in a fresh process.) One JSON line: each device's position, label, whether it passes the
    probe and whether grading would choose it."""
    import pyopencl as cl

    from grader.student.engine import opencl_device
    from grader.student.engine.ops_opencl import STUDENT_BUILD_OPTIONS

    survey = opencl_device.survey(tuple(STUDENT_BUILD_OPTIONS))
    passed = {t.label for t in survey.tried if t.reason is None}
    try:
        found = opencl_device.listed_devices(cl)
    except cl.Error:  # no platform at all (PLATFORM_NOT_FOUND_KHR): no device to list
        found = []
    listed = [(f"{pi}:{di}", opencl_device.label_of(p, d)) for pi, di, p, d in found]
    print(
        json.dumps(
            [
                {"position": at, "label": label, "ok": label in passed, "chosen": label == survey.label}
                for at, label in listed
            ]
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each device, taking turns (median) [5]")
    parser.add_argument("--list", action="store_true", help=argparse.SUPPRESS)  # the children
    parser.add_argument("--child", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.list:
        list_child()
        return 0
    if args.child:
        cpu, kernels = grade_correct_in_process(args.child, KERNEL_EXERCISES)
        if not kernels:
            raise SystemExit(f"bench/devices.py: {os.environ.get('PYOPENCL_CTX')} built no kernel")
        print(f"{cpu:.3f}")
        return 0
    devices = json.loads(fresh_process(__file__, ["--list"]))
    usable = [d for d in devices if d["ok"]]
    print(f"load average before (1, 5, 15 min): {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(
        f"{len(devices)} OpenCL device(s), {len(usable)} passing the probe; the kernel exercises:"
        f" {' '.join(KERNEL_EXERCISES)}"
    )
    seconds: dict[str, list[float]] = {d["position"]: [] for d in usable}
    for run in range(max(1, args.runs)):
        for device in usable:
            env = {**os.environ, "PYOPENCL_CTX": device["position"]}
            out = fresh_process(__file__, ["--child", f"dev-{run}-{device['position'].replace(':', '-')}"], env)
            seconds[device["position"]].append(float(out))
    cheapest = min((statistics.median(v) for v in seconds.values()), default=float("nan"))
    width = max((len(d["label"]) for d in devices), default=6)
    header = f"{'device':<{width}} {'runs':>4} {'median CPU s':>12} {'min':>6} {'max':>6} {'x cheapest':>10}  chosen"
    print(header)
    print("-" * len(header))
    for device in devices:
        values = seconds.get(device["position"])
        if not values:
            print(f"{device['label']:<{width}} {'fails the probe':>43}")
            continue
        median = statistics.median(values)
        print(
            f"{device['label']:<{width}} {len(values):>4} {median:>12.2f} {min(values):>6.2f} {max(values):>6.2f}"
            f" {median / cheapest:>10.2f}  {'yes' if device['chosen'] else ''}"
        )
    print(f"load average now: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
