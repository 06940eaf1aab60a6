"""Every script in bench/ runs at a small size and prints its table (no timing is asserted), from outside the
checkout (as `python bench/X.py` runs from a fresh clone: nothing of tests/ on its path); the deadline bench
also loses no upload and records none twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

# script -> (its small run's arguments, a line of its table's header)
SMALL: dict[str, tuple[list[str], str]] = {
    "audit.py": (["--seeds", "1"], "named right"),
    "batch.py": (["--n", "2", "--runs", "1", "--floor-runs", "1"], "wall s/student"),
    "dashboard.py": (["--students", "5", "--runs", "1"], "median ms"),
    # one kill (at the burst's start): a try is put back once (jobs.MAX_TRIES), so no upload can be killed twice
    "deadline.py": (
        [
            "--students",
            "8",
            "--workers",
            "2",
            "--ramp",
            "2",
            "--burst",
            "4",
            "--kill-every",
            "10",
            "--outage",
            "1",
            "--lease-timeout",
            "5",
            "--exercises",
            "activations.ReLU",
        ],
        "p95/bound",
    ),
    "devices.py": (["--runs", "1"], "x cheapest"),
    "diagnosis_time.py": (["--runs", "1", "--mutants", "1"], "round 3 (s)"),
    "figures.py": (["--runs", "1"], "baseline (s)"),
    "grading.py": (["--runs", "1", "--quick"], "x floor"),
    "kernels.py": (["--quick"], "speed-up"),
    "lti.py": (["--launches", "2", "--scores", "3", "--runs", "1"], "received (distinct learners)"),
    "mutants.py": (["--limit", "2", "--topics", "activations"], "survived"),
    "location_cost.py": (["--runs", "1"], "with location"),
    "selftest.py": (["--runs", "1"], "median s"),
    "server_load.py": (
        [
            "--students",
            "3",
            "--queue",
            "sqlite",
            "--queue",
            "redis-restart",
            "--outage",
            "1",
            "--exercises",
            "activations.ReLU",
        ],
        "recorded once",
    ),
    "similarity.py": (["--runs", "1"], "planted found"),
    "student_pages.py": (["--uploads", "2", "--runs", "1"], "x API"),
    "suite.py": (["--jobs", "0", "--tests", "tests/test_boundary.py"], "configuration"),
}
NEEDS_OPENCL = {"kernels.py"}
STARTS_SERVERS = {"deadline.py", "lti.py", "server_load.py"}  # grade serve, grade worker, redis-server


def scripts() -> list[str]:
    """The bench scripts: bench/*.py with a __main__ (procs.py, lms_platform.py, sample_class.py are their
    libraries)."""
    return sorted(p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def test_every_bench_script_has_a_small_run() -> None:
    assert scripts() == sorted(SMALL)


# Not yet: these benches grade the mistake audit's class (tests/mistakes/test_mistake_audit.py) and the checks'
# helpers of the tests (tests/checks_util.py, tests/figures_util.py); they import `reference` before tests/ can
# shadow it (the small runs below show they work from outside the checkout).
READ_TESTS = {"audit.py", "diagnosis_time.py", "figures.py", "mutants.py"}


def test_no_bench_imports_from_tests() -> None:
    for path in sorted(BENCH.glob("*.py")):
        text = path.read_text()
        if path.name in READ_TESTS:
            continue
        assert '"tests"' not in text and "'tests'" not in text, f"{path.name} puts tests/ on its path"


@pytest.mark.slow
@pytest.mark.parametrize(
    "script", [pytest.param(s, marks=[pytest.mark.server] if s in STARTS_SERVERS else []) for s in sorted(SMALL)]
)
def test_the_bench_runs_small_and_prints_its_table(script: str, tmp_path: Path) -> None:
    if script in STARTS_SERVERS:
        from conftest import require_program

        require_program("redis-server", "redis-server")
    if script in NEEDS_OPENCL:
        from conftest import opencl_unavailable_reason

        if (reason := opencl_unavailable_reason()) is not None:
            pytest.skip(reason)
    args, header = SMALL[script]
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert header in done.stdout, f"{script} printed no table:\n{done.stdout[-2000:]}"
    if script == "deadline.py":
        row = [line for line in done.stdout.splitlines() if line.startswith("| ") and "p50" not in line][-1]
        cells = [c.strip() for c in row.strip("|").split("|")]
        lost, twice, kills, restarts = cells[-4:]
        assert (lost, twice) == ("0", "0")
        assert int(kills) >= 1 and restarts == "1"
