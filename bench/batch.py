"""What a real class costs in `grade batch`: per-student wall time and machine CPU, memory, and the floor.

    python bench/batch.py                      # 24 students, --jobs 2, the OS sandbox on
    python bench/batch.py --n 60 --jobs 1 --jobs 2 --runs 3
    python bench/batch.py --n 20 --redis 1 --redis 2   # also through a local Redis queue, 1 then 2 workers

The class is generated the way real hand-ins differ: every student's kernel
files are distinct sources (so no compiled kernel is shared) holding the
kernels the handout's stubs declare (the reference's files hold more), and the work is
a mix of correct (40 %), partial (20 %: two topics still stubs), mistaken
(20 %: a classic mistake in one file), crashing (15 %: a forward that aborts)
and looping (5 %: a forward that never returns) submissions. Each run grades a
fresh class (new names: new seeds) into a new database with
``grader.term.batch.run_batch``, the code path of ``grade batch``, with the OS
sandbox on where bubblewrap works.

Printed first: the load average before the benchmark and the floor: the same
checks' arithmetic for one student in one process, with the reference
standing in for the student (no processes, no sandbox); the numpy floor; and
the whole floor: one correct student graded whole (kernels included, built with
an empty PoCL cache) in one bare process, its CPU from the interpreter's start,
which is the least CPU a student's grading could take on this machine, so
that CPU over the cores is the least wall per student any configuration could
reach (``--floor-runs``, median). Then, per
configuration (median over --runs): wall seconds per student (batch wall /
N), machine CPU seconds per student, the median of the students' own grading
times, peak and final RSS of each grading process (sampled every 0.1 s) and of
this process. Target (issue 14): at most 1.2 s wall per student with --jobs 2
on a 2-core machine; issue 47: at most 12 times the numpy floor (``python -c "import numpy"``, measured
in the same run: the "x numpy" column).

Machine CPU is the machine's busy CPU time during the run (user, nice,
system, irq and softirq in /proc/stat), so it includes anything else running:
read it on a quiet machine (the load average says how quiet). This process's
getrusage (self and children) would miss most of the grading: the sandboxed
grading processes are bubblewrap's grandchildren, reaped in its PID namespace,
and the --redis workers are not counted by anyone's rusage. So grading CPU is
sampled instead: this process's CPU time (less its sampling thread's) and that
of each of its descendants, read from /proc every 0.1 s (a sandboxed worker
with the programs it started and reaped, PoCL's linker); it leaves out other
work on a shared machine. On 2 cores with --jobs 2 the wall per student is at
least half of it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grader.term import batch
from grader.course.grading import LiveExpected, reference_results
from grader.mistakes import reference_namespace
from grader.student.sandbox import bwrap
from grader.student.engine import catalogue
from grader.student.engine.checks import CHECKS
from grader.student.engine.model import CheckResult, exercise_seed
from grader.student.engine.ops import run_script
from grader.student.sandbox.runner import Limits
from grader.course.solution import write_solution
from grader.student.store import Store

REPO = Path(__file__).resolve().parents[1]
TARGET_X = 12.0  # issue 47: wall seconds per student with --jobs 2 at most 12 times `python -c "import numpy"`

# (kind, share of the class) in the order students are dealt out.
MIX = [("correct", 8), ("partial", 4), ("mistaken", 4), ("crashing", 3), ("looping", 1)]

# Classic mistakes as edits of the correct solution: (file, the correct line, the mistaken line).
MISTAKES = [
    ("dropout.py", "        return x * self.keep / (1.0 - self.p)", "        return x * self.keep"),
    (
        "normalization.py",
        "        bn.running_var = (1.0 - bn.momentum) * bn.running_var + bn.momentum * var * m / (m - 1)",
        "        bn.running_var = (1.0 - bn.momentum) * bn.running_var + bn.momentum * var",
    ),
]

CRASH = "\n\nimport os as _os\n_Sigmoid = Sigmoid\n\n\nclass Sigmoid(_Sigmoid):\n    def forward(self, x):\n        _os.abort()\n"
LOOP = "\n\n_Tanh = Tanh\n\n\nclass Tanh(_Tanh):\n    def forward(self, x):\n        while True:\n            pass\n"


def kinds(n: int) -> list[str]:
    """The kinds of n students, interleaved in the proportions of MIX (any prefix of the class is mixed too)."""
    deck = sorted(((j + 0.5) / share, kind) for kind, share in MIX for j in range(share))
    return [deck[k % len(deck)][1] for k in range(n)]


def stub_kernels(cl_file: str) -> set[str]:
    """The kernel names the handout's stub of ``cl_file`` declares (what a student's file holds)."""
    stub = (REPO / "exercises" / "kernels" / cl_file).read_text()
    return {line.split("(")[0].split()[-1] for line in stub.splitlines() if line.startswith("__kernel void ")}


def student_kernel_source(reference_source: str, wanted: set[str]) -> str:
    """The reference's kernel file cut to the kernels in ``wanted`` (helpers and #defines kept).

    The reference files also hold the course's other kernels (sigmoid, Philox
    dropout, backward passes: 19 kernels in activations.cl); a student's file
    holds the ones the stub asks for, and build time grows with the kernels
    in a file. Top-level functions end with a '}' line, as in reference/opencl.
    """
    kept, skipping = [], False
    for line in reference_source.splitlines():
        if line.startswith("__kernel void ") and line.split("(")[0].split()[-1] not in wanted:
            skipping = True
        if not skipping:
            kept.append(line)
        elif line == "}":
            skipping = False
    return "\n".join(kept) + "\n"


def write_student(folder: Path, name: str, kind: str, serial: int) -> None:
    """One student's exercises folder of the given kind, with kernel sources of their own."""
    exercises = write_solution(folder / "exercises")
    for cl in (exercises / "kernels").glob("*.cl"):
        source = student_kernel_source(cl.read_text(), stub_kernels(cl.name))
        cl.write_text(source + f"\n// {name}: my own work\n")
    if kind == "partial":
        for topic in ("normalization", "optim"):
            (exercises / f"{topic}.py").write_text((REPO / "exercises" / f"{topic}.py").read_text())
    elif kind == "mistaken":
        file, right, wrong = MISTAKES[serial % len(MISTAKES)]
        source = (exercises / file).read_text()
        if right not in source:
            raise SystemExit(f"bench/batch.py: the mistake edit no longer applies to {file}: update MISTAKES")
        (exercises / file).write_text(source.replace(right, wrong, 1))
    elif kind in ("crashing", "looping"):
        path = exercises / "activations.py"
        path.write_text(path.read_text() + (CRASH if kind == "crashing" else LOOP))


def machine_cpu_seconds() -> float:
    """The machine's busy CPU time since boot, all CPUs: user + nice + system + irq + softirq of /proc/stat.

    The difference over a run is the machine CPU during the run, which includes
    anything else running (not only this process and its descendants).
    """
    fields = (
        Path("/proc/stat").read_text().split("\n", 1)[0].split()
    )  # "cpu  user nice system idle iowait irq softirq ..."
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def numpy_floor_seconds(runs: int = 5) -> float:
    """The floor of any grading on this machine, now: the median wall time of ``python -c "import numpy"``, a fresh
    process that imports NumPy and exits (the issue's ratios are to it, measured in the same run)."""
    times = []
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` shows them."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _is_worker(pid: int) -> bool:
    """Whether ``pid`` is a sandboxed worker's Python (not the bubblewrap that starts it with the same words)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return Path(argv[0].decode(errors="replace")).name.startswith("python") and b"grader.student.sandbox.worker" in argv


class MemorySampler:
    """Samples VmHWM (peak) and VmRSS of this process's direct children (the grading processes), and the CPU
    time of all its descendants (:meth:`cpu_seconds`)."""

    def __init__(self) -> None:
        self.peak: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.cpu: dict[tuple[int, str], float] = {}  # (pid, start time) -> its CPU seconds when last seen
        self.workers: dict[tuple[int, str], bool] = {}  # (pid, start time) -> whether a sandboxed worker
        self.own = 0.0  # the CPU seconds of this sampling thread (not the grading's)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self.stop.wait(0.1):
            for pid in self._sample_cpu(me):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                if "VmRSS" in fields:
                    self.peak[pid] = max(self.peak.get(pid, 0), int(fields["VmHWM"].split()[0]))
                    self.last[pid] = int(fields["VmRSS"].split()[0])
            self.own = time.thread_time()

    def _sample_cpu(self, me: int) -> list[int]:
        """This process's children; records the CPU time of every descendant of ``me``: its own user and system time, and for a sandboxed
        worker also that of the programs it started and reaped (PoCL's linker: too short-lived to be sampled).
        A worker's descendants are not counted apart (they are in its children's time once reaped)."""
        tick = os.sysconf("SC_CLK_TCK")
        stats: dict[int, list[str]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    stats[int(entry)] = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        descendants: dict[int, list[int]] = {}  # pid -> its ancestors below this process
        for pid in stats:
            line, ancestor = [], int(stats[pid][1])
            while ancestor in stats and ancestor != me:
                line.append(ancestor)
                ancestor = int(stats[ancestor][1])
            if ancestor == me:
                descendants[pid] = line
        for pid in descendants:
            if (pid, stats[pid][19]) not in self.workers:
                self.workers[(pid, stats[pid][19])] = _is_worker(pid)
        workers = {pid for pid in descendants if self.workers[(pid, stats[pid][19])]}
        for pid, line in descendants.items():
            if workers.intersection(line):
                continue
            fields = stats[pid]
            ticks = int(fields[11]) + int(fields[12])  # utime, stime
            if pid in workers:
                ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: the programs it started
            self.cpu[(pid, fields[19])] = ticks / tick
        return [pid for pid, line in descendants.items() if not line]

    def cpu_seconds(self) -> float:
        """The CPU seconds of this process's descendants seen so far (the grading processes and their workers)."""
        return sum(self.cpu.values())

    def __enter__(self) -> MemorySampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._sample_cpu(os.getpid())


def one_run(
    n: int, jobs: int, tag: str, limits: Limits, queue: str | None = None
) -> dict[str, float | list[tuple[int, int]]]:
    """Grade a fresh class of n students (locally, or on the workers of ``queue``); the figures of the run."""
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        root = Path(tmp) / "class"
        for k, kind in enumerate(kinds(n)):
            write_student(root / f"{tag}-{k:03d}", f"{tag}-{k:03d}", kind, k)
        with Store.open(Path(tmp) / "class.db") as store, MemorySampler() as memory:
            t0, c0, own0 = time.perf_counter(), machine_cpu_seconds(), time.process_time()
            if queue is None:
                summary = batch.run_batch(root, store, "bench", None, jobs=jobs, limits=limits)
            else:
                summary = batch.run_batch_on_queue(root, store, "bench", queue)
            wall, cpu, own = time.perf_counter() - t0, machine_cpu_seconds() - c0, time.process_time() - own0
        grading_cpu = memory.cpu_seconds() + own - memory.own
        broken = [o for o in summary.outcomes if o.status in ("failed", "error")]
        if broken:
            raise SystemExit(f"{len(broken)} students could not be graded, e.g. {broken[0].message}")
    return {
        "wall": wall / n,
        "cpu": cpu / n,
        "grading_cpu": grading_cpu / n,
        "median": statistics.median(o.duration for o in summary.outcomes),
        "processes": [(memory.peak[p], memory.last.get(p, 0)) for p in sorted(memory.peak)],
    }


def floor_seconds(student: str, exercises: list[str] | None = None) -> float:
    """One student's checks in one process: cases run on the reference (standing in for the student) and evaluated.

    ``exercises`` (default: all) less those that need OpenCL (their cases run kernels, not NumPy).
    """
    namespace = reference_namespace()
    t0 = time.perf_counter()
    for exercise in exercises if exercises is not None else catalogue.EXERCISES:
        if not CHECKS[exercise].needs_opencl:
            judge(namespace, student, exercise)
    return time.perf_counter() - t0


def judge(namespace: Any, student: str, exercise: str) -> list[CheckResult]:
    """The checks of ``exercise`` for ``student`` (their seed) on the code of ``namespace``, run in this process:
    the cases on that code, the reference's results, the verdicts."""
    checks = CHECKS[exercise]
    seed = exercise_seed(student, exercise)
    cases = checks.cases(seed)
    results = {case.name: run_script(namespace, case.script, case.arrays) for case in cases}
    return checks.evaluate(results, LiveExpected(exercise, reference_results(exercise, seed, cases)), seed)


def grade_correct_in_process(name: str, exercises: list[str] | None = None) -> tuple[float, bool]:
    """Grade a correct student ``name`` (``exercises``, default all) in this process, alone: no sandbox, no
    workers, no files, no store. Returns this process's CPU seconds from its start (run it in a fresh process:
    the interpreter, the imports, the OpenCL compiler's start and probe, the kernel files' builds, every case
    and check) and whether an OpenCL device built and ran the kernels. Stops, naming the first check lost,
    unless the student has full marks (the kernel exercises aside when no device works): a floor times a
    full-marks grading, or it is no floor."""
    from grader.student.engine.loader import load_exercises
    from grader.student.engine.ops_opencl import device_choice

    lost = []
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as folder:
        write_student(Path(folder), name, "correct", 0)
        kernels = device_choice().device is not None  # the device's probe, as every kernel worker runs it
        namespace = load_exercises(Path(folder) / "exercises")
        for exercise in exercises if exercises is not None else catalogue.EXERCISES:
            verdicts = judge(namespace, name, exercise)
            if kernels or not CHECKS[exercise].needs_opencl:
                lost += [f"{exercise} {v.name}: {v.message}" for v in verdicts if not v.passed]
    if lost:
        raise SystemExit(f"{Path(sys.argv[0]).name}: the correct student {name} lost points: {lost[0]}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, kernels


def fresh_process(script: str, args: list[str], env: dict[str, str] | None = None) -> str:
    """The last line ``python SCRIPT ARGS`` prints, run in a fresh process (an OpenCL context must not be made in
    a process that starts others) with an empty PoCL cache, as a sandboxed worker has: PoCL keys its cache on
    the preprocessed source, so a warm one would answer for a file that differs from one built earlier only in
    its comments."""
    with tempfile.TemporaryDirectory(prefix="bench-pocl-") as cache:
        done = subprocess.run(
            [sys.executable, script, *args],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**(env or os.environ), "POCL_CACHE_DIR": cache},
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"{Path(script).name} {' '.join(args)} failed: {(done.stderr or done.stdout).strip()[-500:]}")
    return done.stdout.strip().splitlines()[-1]


def whole_floor_seconds(name: str) -> tuple[float, bool]:
    """The whole floor: the CPU seconds of one correct student graded whole in a fresh process
    (:func:`grade_correct_in_process`), and whether the kernels were built and run."""
    seconds, kernels = fresh_process(__file__, ["--whole-floor", name]).split()
    return float(seconds), kernels == "kernels"


@contextlib.contextmanager
def redis_workers(workers: int) -> Iterator[str]:
    """A redis-server on a free loopback port and ``workers`` `grade worker` processes on it; yields the URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as folder:
        server = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                folder,
            ],
            stdout=subprocess.DEVNULL,
        )
        procs = []
        try:
            for _ in range(100):  # bounded wait for redis-server to listen
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.05)
            procs = [
                subprocess.Popen(
                    [sys.executable, "-m", "grader.cli", "worker", "--queue", url, "--workers", "1"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(workers)
            ]
            yield url
        finally:
            for proc in procs + [server]:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24, help="students in the class")
    parser.add_argument("--jobs", type=int, action="append", help="students at once (repeatable) [2]")
    parser.add_argument("--runs", type=int, default=1, help="runs per configuration (median reported)")
    parser.add_argument(
        "--redis",
        type=int,
        action="append",
        metavar="WORKERS",
        help="also grade on a local redis-server queue with this many `grade worker` processes"
        " (repeatable: the scaling from one count to the next)",
    )
    parser.add_argument("--floor-runs", type=int, default=3, help="runs of the whole floor (median reported) [3]")
    parser.add_argument("--whole-floor", metavar="NAME", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.whole_floor:  # the child of whole_floor_seconds
        seconds, kernels = grade_correct_in_process(args.whole_floor)
        print(f"{seconds:.3f} {'kernels' if kernels else 'no-opencl'}")
        return 0
    print(f"load average before the benchmark (1, 5, 15 min): {load_average()}")
    problem = bwrap.problem()
    limits = Limits(sandbox=problem is None)
    mix = Counter(kinds(args.n))
    print(
        f"grade batch on a generated class of {args.n}: "
        + ", ".join(f"{mix[k]} {k}" for k, _ in MIX)
        + f"; distinct kernel sources; sandbox {'on' if problem is None else 'OFF (' + problem + ')'}; "
        + f"{batch.usable_cpus()} CPU(s)"
    )
    floor = statistics.median(floor_seconds(f"floor-{k}") for k in range(3))
    print(f"floor (one process, the CPU exercises' cases and checks, reference as student): {floor:.2f} s per student")
    numpy_floor = numpy_floor_seconds()
    print(f'numpy floor (`python -c "import numpy"`, median of 5): {numpy_floor:.3f} s')
    wholes = [whole_floor_seconds(f"whole-{k}") for k in range(max(1, args.floor_runs))]
    whole, cores = statistics.median(s for s, _ in wholes), batch.usable_cpus()
    what = "kernels built and run" if all(k for _, k in wholes) else "NO OpenCL device: kernels not built"
    print(
        f"whole floor (one correct student, every exercise, {what}, in one bare process, median of {len(wholes)}):"
        f" {whole:.2f} CPU s; with {cores} at once, at least {whole / cores:.2f} s per student"
        f" = {whole / cores / numpy_floor:.1f}x numpy"
    )
    header = (
        f"{'jobs':>4} {'runs':>4} {'wall s/student':>15} {'x numpy':>8} {'machine CPU s/student':>22}"
        f" {'grading CPU s/student':>22}"
        f" {'median grading s':>17}  {'target':<13} grading processes: peak / final RSS MB"
    )
    print(header)
    print("-" * len(header))
    serial = 0
    for jobs in args.jobs or [2]:
        results = []
        for _ in range(max(1, args.runs)):
            serial += 1
            results.append(one_run(args.n, jobs, f"r{serial}", limits))
        wall = statistics.median(float(r["wall"]) for r in results)  # type: ignore[arg-type]
        cpu = statistics.median(float(r["cpu"]) for r in results)  # type: ignore[arg-type]
        grading_cpu = statistics.median(float(r["grading_cpu"]) for r in results)  # type: ignore[arg-type]
        median = statistics.median(float(r["median"]) for r in results)  # type: ignore[arg-type]
        memory = ", ".join(f"{peak / 1024:.0f}/{last / 1024:.0f}" for peak, last in results[-1]["processes"])  # type: ignore[union-attr]
        ratio = wall / numpy_floor
        verdict = f"{'ok' if ratio <= TARGET_X else 'MISSED'} (<= {TARGET_X:g}x)" if jobs == 2 else ""
        print(
            f"{jobs:>4} {len(results):>4} {wall:>15.2f} {ratio:>8.1f} {cpu:>22.2f} {grading_cpu:>22.2f}"
            f" {median:>17.2f}  {verdict:<13}"
            f" {memory}",
            flush=True,
        )
    first_wall = None
    for workers in args.redis or []:
        with redis_workers(workers) as queue:
            results = [one_run(args.n, 0, f"q{workers}-{k}", limits, queue) for k in range(max(1, args.runs))]
        wall = statistics.median(float(r["wall"]) for r in results)  # type: ignore[arg-type]
        cpu = statistics.median(float(r["cpu"]) for r in results)  # type: ignore[arg-type]
        first_wall = first_wall or (wall, workers)
        scaling = f"; x{first_wall[0] / wall:.2f} the speed of {first_wall[1]}" if first_wall[1] != workers else ""
        print(
            f"queue: redis-server and {workers} `grade worker` processes (one grading process each): "
            f"{wall:.2f} s wall, {cpu:.2f} machine CPU s per student{scaling}",
            flush=True,
        )
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        "machine CPU: the machine's busy CPU time during the run (/proc/stat), per student; it includes anything"
        " else running. grading CPU: this process's and its descendants' (the grading processes, their sandboxed"
        " workers and what those started), sampled from /proc every 0.1 s: on a shared machine, read this one"
    )
    print(f"this process (the one writer): peak RSS {own:.0f} MB; load average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
