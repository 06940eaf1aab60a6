"""What round 5's location costs in live grading: ``python bench/location_cost.py``.

A wrong BatchNorm1d (eps outside the square root) graded live in the sandbox five times with the location
step (grading._located: the failing cases traced in a second sandbox run, aligned with the reference's) and
five times without it; medians.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pathlib, statistics, tempfile, time
import grader.student.engine.grading as g
from grader.course.solution import write_solution
from grader.course.grading import grade
d = pathlib.Path(tempfile.mkdtemp()); write_solution(d)
p = d / "normalization.py"
p.write_text(p.read_text().replace("inv_std = _channel_view(1.0 / np.sqrt(var + bn.eps), x.ndim)",
                                   "inv_std = _channel_view(1.0 / (np.sqrt(var) + bn.eps), x.ndim)"))
located = g._located
def timed(on):
    g._located = located if on else (lambda ex, *a: ex)
    t = time.perf_counter(); r = grade(d, ["normalization.BatchNorm1d"], "alice"); return time.perf_counter() - t, r
timed(True)
on, off = [], []
for _ in range(5):
    off.append(timed(False)[0]); on.append(timed(True)[0])
print(f"with location {statistics.median(on):.2f} s, without {statistics.median(off):.2f} s, ratio {statistics.median(on)/statistics.median(off):.2f} (median of 5)")
