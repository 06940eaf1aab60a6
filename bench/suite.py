"""How long the test suite takes: serially (`make test` before issue 30), in parallel (`make test`), the fast tier.

    python bench/suite.py                                   # serial, then -n 4, then the fast tier at -n 4
    python bench/suite.py --jobs 0 --jobs 2 --jobs 4 --fast --runs 2
    python bench/suite.py --jobs 4 --dist load --dist loadfile   # xdist's default against one worker a file
    CI=true REQUIRE_OPENCL=1 python bench/suite.py          # as .ci/run runs the suite

Each configuration runs ``python -m pytest -q -p no:cacheprovider`` from the
repository root, in parallel with ``-n JOBS`` (the Makefile's PYTEST_PARALLEL:
xdist's ``--dist load``; ``--dist`` names others to compare; ``--jobs 0`` is one
process, as before pytest-xdist), and
``--fast`` adds the fast tier (``-m`` with the Makefile's FAST_TIER) at the last
--jobs. The configurations run back to back and, with --runs, interleaved
(A B C A B C), so that a change in what else the machine runs falls on all of
them alike; the first is the baseline of the ratio column.

Printed per configuration: the median, least and most wall seconds, the
ratio of the baseline's median to this one's (2.0: twice as fast), what
pytest's last line said, the machine's busy share of its CPUs during the runs
(user, nice, system, irq and softirq of /proc/stat: everything running, the
suite and anything else), and the 1-minute load average before each run.
The machine is shared: read the ratio, measured under the same conditions,
before the seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def makefile_value(name: str) -> str:
    """A plain ``NAME = value`` of the Makefile (one definition of the tiers for make and this bench)."""
    found = re.search(rf"^{name}\s*\??:?=\s*(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"the Makefile defines no {name}")
    return found.group(1).strip()


def busy_and_total() -> tuple[int, int]:
    """The machine's busy and total CPU ticks since boot (/proc/stat's first line)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = fields[:7]
    steal = fields[7] if len(fields) > 7 else 0
    return user + nice + system + irq + softirq, user + nice + system + idle + iowait + irq + softirq + steal


@dataclass
class Config:
    name: str
    args: list[str]
    walls: list[float] = field(default_factory=list)
    busy: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    last_line: str = ""


def run(config: Config) -> None:
    """One run of ``config``: its wall time, busy share, load before and pytest's last line are kept."""
    load = float(Path("/proc/loadavg").read_text().split()[0])
    busy0, total0 = busy_and_total()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *config.args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    busy1, total1 = busy_and_total()
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    config.last_line = (lines[-1].strip("= ") if lines else done.stderr.strip()[-200:]) + f" (exit {done.returncode})"
    config.walls.append(wall)
    config.busy.append((busy1 - busy0) / max(1, total1 - total0))
    config.loads.append(load)
    print(f"  {config.name}: {wall:.1f} s, {config.last_line}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs",
        type=int,
        action="append",
        help="pytest-xdist workers (0: one process); repeat for several [default: 0 and 4]",
    )
    parser.add_argument(
        "--fast",
        action="store_true",
        help="Also the fast tier at the last --jobs [default: on when --jobs is not given].",
    )
    parser.add_argument(
        "--dist", action="append", help="xdist's --dist for the parallel runs; repeat to compare [default: load]"
    )
    parser.add_argument("--runs", type=int, default=1, help="Runs of each configuration, interleaved.")
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="PATH",
        help="Run only these tests (a pytest path; repeat for several) [default: the whole suite].",
    )
    options = parser.parse_args()
    jobs = options.jobs or [0, 4]
    fast = options.fast or not options.jobs
    dists = options.dist or ["load"]
    configs = [Config("full, 1 process", [])] if 0 in jobs else []
    configs += [
        Config(f"full, -n {j}" + (f" {d}" if len(dists) > 1 else ""), ["-n", str(j), "--dist", d])
        for j in jobs
        if j != 0
        for d in dists
    ]
    if fast:
        last = configs[-1]
        configs.append(
            Config(f"fast tier, {last.name.split(', ')[1]}", [*last.args, "-m", makefile_value("FAST_TIER")])
        )
    for config in configs:
        config.args += options.tests
    print(f"{os.cpu_count()} CPUs; {options.runs} run(s) each, interleaved", file=sys.stderr)
    for _ in range(options.runs):
        for config in configs:
            run(config)
    base = statistics.median(configs[0].walls)
    print(f"test suite wall time, median of {options.runs} run(s) ({os.cpu_count()} CPUs)")
    print(f"{'configuration':<22}{'median s':>9}{'min s':>8}{'max s':>8}{'x faster':>9}{'busy':>6}{'load':>6}  pytest")
    for c in configs:
        median = statistics.median(c.walls)
        print(
            f"{c.name:<22}{median:9.1f}{min(c.walls):8.1f}{max(c.walls):8.1f}{base / median:9.2f}"
            f"{statistics.median(c.busy):6.0%}{statistics.median(c.loads):6.1f}  {c.last_line}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
