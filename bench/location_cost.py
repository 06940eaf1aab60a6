"""What round 5's location costs in live grading: ``python bench/location_cost.py [--runs 5]``.

A wrong BatchNorm1d (eps outside the square root) is graded live in the sandbox ``--runs`` times with the
location step (grading._located: the failing cases traced in a second sandbox run, aligned with the
reference's) and as many times without it; it prints the medians and their ratio (issue 44: at most 1.5x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout

import grader.student.engine.grading as engine_grading  # noqa: E402
from grader.course.grading import grade  # noqa: E402
from grader.course.solution import write_solution  # noqa: E402

RIGHT = "inv_std = _channel_view(1.0 / np.sqrt(var + bn.eps), x.ndim)"
WRONG = "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)"


def timed(folder: Path, locate: bool) -> float:
    """Seconds to grade BatchNorm1d in ``folder`` live, with the location step or with it switched off."""
    located = engine_grading._located
    if not locate:
        engine_grading._located = lambda exercise, *rest: exercise
    try:
        start = time.perf_counter()
        grade(folder, ["normalization.BatchNorm1d"], "alice")
        return time.perf_counter() - start
    finally:
        engine_grading._located = located


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-location-") as tmp:
        folder = Path(tmp)
        write_solution(folder)
        path = folder / "normalization.py"
        path.write_text(path.read_text().replace(RIGHT, WRONG))
        timed(folder, True)  # warm: the first run compiles and caches
        on, off = [], []
        for _ in range(args.runs):
            off.append(timed(folder, False))
            on.append(timed(folder, True))
    with_s, without_s = statistics.median(on), statistics.median(off)
    print(f"{'graded live':<24} {'median s':>9}")
    print(f"{'with location':<24} {with_s:9.2f}")
    print(f"{'without location':<24} {without_s:9.2f}")
    print(f"ratio {with_s / without_s:.2f} (median of {args.runs}; issue 44's target: at most 1.5)")


if __name__ == "__main__":
    main()
