"""What the pictures cost: keeping the figures' data while grading, and drawing the page.

    python bench/figures.py              # 7 runs each
    python bench/figures.py --runs 11

Three rows, each the median of --runs, with its baseline measured in the same run:

1. ``grade submit normalization.BatchNorm1d`` (a complete solution with the
   biased running variance, a known mistake: 1 failing check), the whole
   command in a fresh interpreter, text report: as shipped, against the same
   command with the figure builders replaced by ``lambda *a, **k: None``
   (the grading without pictures).
2. Grading the known submissions of bench/known_report.py in-process (live:
   14 exercises, the failing checks with figures): with figures, against
   without; and against the same grading without the public case drawn
   beside a hidden check that names a known mistake (the reference and that
   mistake run on the public inputs: what that picture costs).
3. ``format_html`` of that report (what ``--html`` and ``grade view`` add),
   against ``format_text`` of the same report.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(
    0, str(ROOT)
)  # the checkout, for bench.* (never tests/: its reference/ folder would shadow the package)

NO_FIGURES = """
import runpy, sys
import grader.student.feedback.figures as f
for name in ("elements_figure", "trajectory_figure", "histogram_figure", "fit_figure", "shapes_figure",
             "masks_figure"):
    setattr(f, name, lambda *a, **k: None)
sys.argv = ["grade"] + sys.argv[1:]
runpy.run_module("grader", run_name="__main__", alter_sys=True)
"""
AS_SHIPPED = """
import runpy, sys
sys.argv = ["grade"] + sys.argv[1:]
runpy.run_module("grader", run_name="__main__", alter_sys=True)
"""


def median_time(fn: Callable[[], object], runs: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The median of ``runs`` calls of ``fn`` by ``clock`` (wall time; ``time.process_time`` for in-process work,
    which a busy shared machine disturbs far less)."""
    times = []
    for _ in range(runs):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def submit_row(runs: int) -> tuple[float, float]:
    from grader.course.solution import write_solution

    folder = Path(tempfile.mkdtemp(prefix="bench-figures-"))
    write_solution(folder / "exercises")
    code = folder / "exercises" / "normalization.py"
    code.write_text(code.read_text().replace("bn.momentum * var * m / (m - 1)", "bn.momentum * var"))
    args = [
        "submit",
        "normalization.BatchNorm1d",
        "--path",
        str(folder / "exercises"),
        "--student",
        "bench",
        "--db",
        str(folder / "p.db"),
    ]

    def run(wrapper: str) -> Callable[[], object]:
        return lambda: subprocess.run(
            [sys.executable, "-c", wrapper, *args], cwd=ROOT, capture_output=True, check=False
        )

    run(AS_SHIPPED)()  # warm the kernel and file caches once
    shipped, baseline = [], []
    for _ in range(runs):  # interleaved, so a busy moment costs both
        shipped.append(median_time(run(AS_SHIPPED), 1))
        baseline.append(median_time(run(NO_FIGURES), 1))
    return statistics.median(shipped), statistics.median(baseline)


def grading_rows(runs: int) -> list[tuple[str, float, float]]:
    import grader.student.feedback.figures as f
    from bench.known_report import known_report
    from grader.student.feedback.report import format_text
    from grader.student.feedback.report_html import format_html

    report = known_report()  # warms the reference runs' cache
    with_figures = median_time(known_report, runs, time.process_time)
    from grader.student.engine.checks.kinds import Compare

    twin = Compare.public_picture
    Compare.public_picture = lambda *a, **k: None  # type: ignore[method-assign]
    try:
        without_twin = median_time(known_report, runs, time.process_time)
    finally:
        Compare.public_picture = twin  # type: ignore[method-assign]
    saved = {
        name: getattr(f, name)
        for name in (
            "elements_figure",
            "trajectory_figure",
            "histogram_figure",
            "fit_figure",
            "shapes_figure",
            "masks_figure",
        )
    }
    for name in saved:
        setattr(f, name, lambda *a, **k: None)
    try:
        without = median_time(known_report, runs, time.process_time)
    finally:
        for name, fn in saved.items():
            setattr(f, name, fn)
    html = median_time(lambda: format_html(report), runs, time.process_time)
    text = median_time(lambda: format_text(report), runs, time.process_time)
    checks = sum(1 for ex in report.exercises for c in ex.checks if c.figure)
    twins = sum(1 for ex in report.exercises for c in ex.checks if c.figure and c.figure.get("public"))
    return [
        (f"grading {len(report.exercises)} known submissions ({checks} figures)", with_figures, without),
        (f"... the public case beside {twins} hidden checks", with_figures, without_twin),
        ("format_html vs format_text of that report", html, text),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    shipped, baseline = submit_row(runs)
    rows = [("grade submit normalization.BatchNorm1d (text)", shipped, baseline)] + grading_rows(runs)
    print(
        f"median of {runs} runs; baseline: the same work without figures (or the text report);"
        " the first row wall time, the others CPU time"
    )
    print(f"{'what':<48} {'with (s)':>10} {'baseline (s)':>13} {'ratio':>7}")
    for name, value, base in rows:
        print(f"{name:<48} {value:>10.4f} {base:>13.4f} {value / base:>7.3f}")


if __name__ == "__main__":
    main()
