"""How long grading takes: ``python bench/grading.py [--runs N]``.

Times, median of N runs (default 5), on a complete correct submission (the
reference solutions laid out as a student folder by ``grader.course.solution``):
all exercises, one exercise, and the untouched stubs in ``exercises/``; each
both in-process (``grader.course.grading.grade``, reference results cached after the
first run, as in a long-lived process) and as the ``grade submit`` command (a
fresh process every time, what a student waits for); each with the OS
sandbox (bubblewrap) and without it (``--no-sandbox``), with the sandbox's
cost per run as the ratio of the two. Targets of the speed issue on a 2-core
machine, with the sandbox: ``grade submit`` of all exercises at most 1.0 s,
of one exercise at most 0.3 s. Each ``grade submit`` row also shows the
machine's busy CPU seconds per run (/proc/stat, everything running included):
CPU / cores is the least wall time those runs could take on this machine.

`grade submit` keeps a student's built kernels between their runs
(``.grade/kernels`` beside the folder, see ``sandbox.kernel_cache_folder``):
"all exercises" resubmits unchanged kernel files, as a student at the
keyboard does between edits; "all, first run" empties that cache before each
run, so every kernel file is compiled, as on a first submission.

The grader's bytecode is compiled first (``compileall``), as an installed
grader has it: where PYTHONDONTWRITEBYTECODE is set, every fresh process
would otherwise compile the grader's sources again.

Beside them, the floor measured in the same run: one process doing the same
checks' arithmetic (each case run on the reference, standing in for the
student, then evaluated) with no processes and no sandbox, median of N runs
with fresh seeds (``floor_seconds`` of bench/batch.py). The OpenCL kernel
exercises have no floor: "all exercises" is the CPU exercises' floor.
The load average is printed before the benchmark and after it.

``--handout DIR`` measures a release's handout instead (``grade release --out
R``; DIR is ``R/student``): grade() is the student-side pipeline on DIR's case
packs (public checks, no reference code), the stubs are DIR's, and
``--grade-command PATH`` times the handout's own installed ``grade``
(``pip install DIR`` in a virtual environment outside /tmp, which the
sandbox's private /tmp would hide).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from grader.student.sandbox import bwrap
from grader.course.grading import grade
from grader.student.engine.grading import grade as grade_with
from grader.student.engine.pack import PackSource
from grader.student.sandbox.runner import Limits
from grader.student.sandbox.spares import Spares
from grader.course.solution import write_solution

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the checkout, for bench.batch
from bench.batch import floor_seconds, load_average, machine_cpu_seconds, numpy_floor_seconds  # noqa: E402

ONE_EXERCISE = "normalization.BatchNorm1d"
FIRST_RUN = "all, first run"  # grade submit of all exercises with no kept kernels (each run compiles them)
TARGETS = {"all exercises": 1.0, FIRST_RUN: 1.0, "one exercise": 0.3}
TARGETS_X = {
    "one exercise": 3.0,
    "all exercises": 10.0,
}  # issue 47: grade submit, sandbox, x `python -c "import numpy"`


def median_time(
    fn: Callable[[], object],
    runs: int,
    before: Callable[[], object] = lambda: None,
) -> tuple[float, float, float, float]:
    """(median, min, max) wall time in seconds of ``fn()`` over ``runs`` calls, and the median machine CPU.

    ``before()`` runs ahead of each call, untimed.
    """
    times, cpus = [], []
    for _ in range(runs):
        before()
        c0, t0 = machine_cpu_seconds(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpus.append(machine_cpu_seconds() - c0)
    return statistics.median(times), min(times), max(times), statistics.median(cpus)


SPARE = "grade() in a spare"  # a long-lived grading process's spare workers (grader/student/sandbox/spares.py)


def spare_timing(
    grade_fn: Callable[..., object], folder: Path, selectors: list[str], runs: int
) -> tuple[float, float, float, float]:
    """Timing of ``grade_fn`` in a warm spare, as ``grade worker`` and ``grade batch`` grade between two jobs:
    before each run the spare's workers have imported NumPy (untimed); the run includes starting the
    replacement spare."""
    limits = Limits(sandbox=True)
    pool = Spares(limits, limits.sandboxed())

    def run() -> object:
        with pool.one() as workspace:
            return grade_fn(folder, selectors or None, "bench", limits, workspace)

    try:
        pool.fill()
        run()  # warm-up: the parent's imports and reference caches
        return median_time(run, runs, pool.wait_ready)
    finally:
        pool.close()


def grade_command() -> list[str] | None:
    """The ``grade`` console script, or None when ``grade submit`` is not available."""
    exe = shutil.which("grade") or str(Path(sys.executable).with_name("grade"))
    if not Path(exe).exists():
        return None
    probe = subprocess.run([exe, "submit", "--help"], capture_output=True, text=True)
    return [exe] if probe.returncode == 0 else None


def cli_run(cmd: list[str], folder: Path, selectors: list[str], db: Path, sandbox: bool) -> Callable[[], object]:
    """A function running ``grade submit SELECTORS --path FOLDER --json`` (exit 0 or 1 expected)."""

    def run() -> object:
        args = cmd + ["submit", *selectors, "--path", str(folder), "--student", "bench", "--db", str(db), "--json"]
        args += [] if sandbox else ["--no-sandbox"]
        done = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, NO_COLOR="1"))
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    return run


def main() -> int:
    """Measure every scenario and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median reported)")
    parser.add_argument("--handout", type=Path, default=None, help="a release's student/ folder to measure instead")
    parser.add_argument(
        "--grade-command", type=Path, default=None, help="with --handout: the handout's installed grade"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="grade submit of one and of all exercises with the sandbox only, --runs times (the test's "
        "small size; the full run takes at least 5 runs of every row)",
    )
    args = parser.parse_args()
    runs = max(1, args.runs) if args.quick else max(5, args.runs)
    print(f"load average before the benchmark (1, 5, 15 min): {load_average()}")
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "grader"), str(REPO / "reference")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    grade_fn: Callable[..., object] = grade
    if args.handout is not None:
        source = PackSource(args.handout / "grader" / "student" / "packs")
        grade_fn = lambda folder, ids, student, limits, workspace=None: grade_with(  # noqa: E731
            folder, ids, student, limits, source, workspace
        )
        print(f"the handout at {args.handout}: public checks from its case packs")

    work = Path(tempfile.mkdtemp(prefix="normgrade-bench-"))
    try:
        solution = write_solution(work / "exercises")
        stubs = (args.handout or REPO) / "exercises"
        scenarios: list[tuple[str, Path, list[str]]] = [
            ("all exercises", solution, []),
            ("one exercise", solution, [ONE_EXERCISE]),
            ("untouched stubs", stubs, []),
        ]
        modes = [("sandbox", True), ("no sandbox", False)]
        if args.quick:
            scenarios, modes = scenarios[:2], modes[:1]
        problem = bwrap.problem()
        if problem:
            print(f"the OS sandbox cannot run here ({problem}): timing without it only")
            modes = modes[1:]
        rows: list[tuple[str, str, str, tuple[float, float, float, float]]] = []
        verdicts: list[str] = []
        numpy_floor = numpy_floor_seconds(max(5, runs))
        for name, folder, selectors in [] if args.quick else scenarios:
            for mode, sandbox in modes:
                limits = Limits(sandbox=sandbox)
                report: Any = grade_fn(folder, selectors or None, "bench", limits)  # warm-up: imports, caches
                if sandbox or len(modes) == 1:
                    statuses = Counter(e.status for e in report.exercises)
                    verdicts.append(f"{name}: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
                timing = median_time(partial(grade_fn, folder, selectors or None, "bench", limits), runs)
                rows.append((name, "grade()", mode, timing))
        floors: dict[str, float] = {}
        if args.handout is None:  # a handout grades on case packs: the live checks' floor is not its work
            for name, exercises in (("all exercises", None), ("one exercise", [ONE_EXERCISE])):
                floor_seconds("floor-warm-up", exercises)
                floors[name] = statistics.median(floor_seconds(f"floor-{k}", exercises) for k in range(runs))
            floors[FIRST_RUN] = floors["all exercises"]
        cmd = (
            grade_command()
            if args.handout is None
            else ([str(args.grade_command)] if args.grade_command is not None else None)
        )
        if cmd is not None:
            kept_kernels = solution.parent / ".grade" / "kernels"  # grade submit's kept kernel cache
            forget_kernels = lambda: shutil.rmtree(kept_kernels, ignore_errors=True)  # noqa: E731
            for name, folder, selectors in scenarios if args.quick else [*scenarios, (FIRST_RUN, solution, [])]:
                for mode, sandbox in modes:
                    run = cli_run(cmd, folder, selectors, work / "progress.db", sandbox)
                    before = forget_kernels if name == FIRST_RUN else (lambda: None)
                    before()
                    run()
                    rows.append((name, "grade submit", mode, median_time(run, runs, before)))

        if "sandbox" in dict(modes):  # a grading process's spare workers (grade worker, grade batch)
            for name, folder, selectors in scenarios[:2]:
                rows.append((name, SPARE, "sandbox", spare_timing(grade_fn, folder, selectors, runs)))

        print(f"grading time, median of {runs} runs ({os.cpu_count()} CPUs)")
        cores = os.cpu_count() or 1
        print(
            f"{'scenario':<18} {'how':<13} {'mode':<11} {'median s':>9} {'min s':>7} {'max s':>7} {'x no sandbox':>13}"
            f" {'floor s':>8} {'CPU s':>6} {'CPU/cores':>9}  target"
        )
        plain = {(n, h): t[0] for n, h, m, t in rows if m == "no sandbox"}
        for name, how, mode, (med, lo, hi, cpu) in rows:
            target = TARGETS.get(name) if mode == "sandbox" and how == "grade submit" else None
            how = "in a spare" if how == SPARE else how
            verdict = "" if target is None else f"<= {target:g} s {'ok' if med <= target else 'MISSED'}"
            ratio = f"{med / plain[(name, how)]:.2f}" if (name, how) in plain else "-"
            floor = f"{floors[name]:.3f}" if name in floors else "-"
            used = f"{cpu:6.2f} {cpu / cores:9.2f}" if how == "grade submit" else f"{'-':>6} {'-':>9}"
            print(
                f"{name:<18} {how:<13} {mode:<11} {med:9.3f} {lo:7.3f} {hi:7.3f} {ratio:>13} {floor:>8}"
                f" {used}  {verdict}"
            )
        if cmd is None:
            print("`grade submit` is not available yet: only grade() was timed.")
        print("what was graded: " + "; ".join(verdicts))
        if floors:
            print(
                f"floor s: one process, no processes or sandbox: the cases run on the reference as the student and"
                f" the checks evaluated, median of {runs} runs with fresh seeds; all exercises = the CPU ones"
            )
        numpy_floor = statistics.median([numpy_floor, numpy_floor_seconds(max(5, runs))])  # before and after
        print(f'\nagainst the floor: `python -c "import numpy"` {numpy_floor:.3f} s (median, before and after)')
        print(f"{'sandbox':<22} {'how':<28} {'median s':>9} {'x floor':>8}  target")
        for name, how, mode, (med, *_rest) in rows:
            if how in ("grade submit", SPARE) and mode == "sandbox" and name in TARGETS_X:
                times_floor, target_x = med / numpy_floor, TARGETS_X[name]
                shown = "grade submit (cold)" if how == "grade submit" else "a spare (worker, batch)"
                print(
                    f"{name:<22} {shown:<28} {med:9.3f} {times_floor:8.1f}  <= {target_x:g}x "
                    f"{'ok' if times_floor <= target_x else 'MISSED'}"
                )
        print(f"load average now (1, 5, 15 min): {load_average()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
