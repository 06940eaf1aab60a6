"""Known submissions graded in-process, for the pictures' tests: the reference, and one mistake of each kind.

``graded(exercise_id, ns)`` grades a namespace live (hidden checks: expected
values computed here) or, with ``pack_dir``, on a case pack written from the
reference at the public seed (the handout's public checks), and returns the
ExerciseResult a report holds. ``KNOWN`` names the submissions the tests
draw: a correct one and a mistake for each kind of picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from grader.mistakes import CATALOGUE, patched_namespace, reference_namespace
from grader.course.packs import public_seed, write_pack
from grader.student.engine.checks import CHECKS
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.engine.pack import PackExpected, load_pack, pack_path

from checks_util import grade_in_process, run_cases

# (exercise, mistake id or None for the reference, the picture kind its first failing check draws)
KNOWN: list[tuple[str, str | None, str]] = [
    ("normalization.BatchNorm1d", None, ""),
    ("normalization.LayerNorm", "ln-batch-axis", "elements"),          # 2-D: heat map, the error follows an axis
    ("normalization.BatchNorm1d", "bn-3d-stats-axis0", "elements"),    # 3-D: per-axis summary
    ("normalization.BatchNorm1d", "bn-biased-running-var", "trajectory"),
    ("optim.AdamW", "adamw-no-bias-correction", "trajectory"),
    ("init.kaiming_normal", "init-kaiming-variance-as-std", "histogram"),
    ("init.xavier_uniform", "init-uniform-bound-std", "histogram"),
    ("dropout.Dropout", "dropout-gaussian-mask", "histogram"),
    ("approximation.fit_function", "(a straight line)", "fit"),
    ("dropout.Dropout", "dropout-no-rescale", "histogram"),            # values: y / x against 1 / (1 - p)
    ("dropout.Dropout", "dropout-mask-reused", "masks"),               # fresh_mask: the two masks side by side
    ("linear.Linear", "linear-dW-transposed", "shapes"),               # dW of the other shape
    ("activations.Sigmoid", "sigmoid-grad-incomplete", "elements"),    # numgrad: your dx against your own forward
    ("activations.ReLU", "relu-inplace", "elements"),                  # no_mutation: x after the call against before
]


def straight_line_fit(f: Any, n_hidden: int, rng: np.random.Generator, **_kw: Any) -> Any:
    """A fit_function that ignores the target's shape: the least-squares straight line through it."""
    x = np.linspace(0.0, 1.0, 101).reshape(-1, 1)
    slope, intercept = np.polyfit(x.ravel(), np.asarray(f(x)).ravel(), 1)
    return lambda z: slope * np.asarray(z, dtype=np.float64) + intercept


def namespace(exercise_id: str, mistake: str | None) -> Any:
    if mistake is None:
        return reference_namespace()
    if mistake == "(a straight line)":
        return patched_namespace("approximation", {"fit_function": straight_line_fit})
    return CATALOGUE[mistake].namespace


def exercise_result(exercise_id: str, checks: list[Any]) -> ExerciseResult:
    score = sum(c.score for c in checks)
    status = "passed" if all(c.passed for c in checks) else "failed"
    return ExerciseResult(exercise_id, status, score, sum(c.max_score for c in checks), checks)


def graded(exercise_id: str, mistake: str | None, pack_dir: Path | None = None) -> ExerciseResult:
    """The exercise graded live (hidden), or with ``pack_dir`` on its public case pack (written there once)."""
    ns = namespace(exercise_id, mistake)
    if pack_dir is None:
        return exercise_result(exercise_id, grade_in_process(exercise_id, ns))
    path = pack_path(pack_dir, exercise_id)
    if not path.exists():
        pack_dir.mkdir(parents=True, exist_ok=True)
        write_pack(pack_dir, exercise_id)
    seed = public_seed(exercise_id)
    student = run_cases(exercise_id, ns, seed)
    checks = CHECKS[exercise_id].evaluate(student, PackExpected(load_pack(path)), seed)
    return exercise_result(exercise_id, checks)


def known_report(pack_dir: Path | None = None, student: str = "ada") -> GradeReport:
    """One report holding every KNOWN submission (the same exercise may appear twice: different submissions)."""
    return GradeReport(student, [graded(e, m, pack_dir) for e, m, _ in KNOWN])


# What the browser tests hold every picture and name to (tests/**/test_*_browser.py): run in the page by
# ``page.evaluate(LAYOUT_JS, selector)`` over the pictures under ``selector``; returns a list of problems.
LAYOUT_JS = """(scope) => {
  const problems = [];
  const overlap = (a, b, slack) => a.left < b.right - slack && b.left < a.right - slack &&
                                   a.top < b.bottom - slack && b.top < a.bottom - slack;
  const segmentHits = (x1, y1, x2, y2, r) => {           // a line segment through a label's box (sampled)
    for (let k = 0; k <= 40; k++) {
      const x = x1 + (x2 - x1) * k / 40, y = y1 + (y2 - y1) * k / 40;
      if (x > r.left + 0.5 && x < r.right - 0.5 && y > r.top + 0.5 && y < r.bottom - 0.5) return true;
    }
    return false;
  };
  for (const svg of document.querySelectorAll(scope + " svg[role=img]")) {
    const name = (svg.querySelector("title") || {}).textContent || "?";
    const box = svg.getBoundingClientRect();
    if (box.width < 1) continue;                          // a closed <details>
    if (box.left < -0.5 || box.right > window.innerWidth + 0.5) problems.push(`${name}: cut off by the window`);
    const [vx, vy, vw, vh] = svg.getAttribute("viewBox").split(" ").map(Number);
    const inner = svg.getBBox();                          // everything drawn, in view-box units
    if (inner.x < vx - 0.5 || inner.y < vy - 0.5 || inner.x + inner.width > vx + vw + 0.5 ||
        inner.y + inner.height > vy + vh + 0.5) {
      problems.push(`${name}: drawn outside its view box (${inner.x.toFixed(1)}, ${inner.y.toFixed(1)},` +
                    ` ${inner.width.toFixed(1)} x ${inner.height.toFixed(1)} in ${vw} x ${vh})`);
    }
    const texts = [...svg.querySelectorAll("text")].map(t => [t.textContent, t.getBoundingClientRect()]);
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        if (overlap(texts[i][1], texts[j][1], 0.5)) problems.push(`${name}: "${texts[i][0]}" overlaps "${texts[j][0]}"`);
      }
    }
    const ctm = svg.getScreenCTM();
    for (const data of svg.querySelectorAll(".ng-data, .line, .dot, .bar")) {
      for (const [words, r] of texts) {
        if (data.tagName === "polyline") {
          const pts = [...data.points].map(p => new DOMPoint(p.x, p.y).matrixTransform(ctm));
          for (let k = 1; k < pts.length; k++) {
            if (segmentHits(pts[k - 1].x, pts[k - 1].y, pts[k].x, pts[k].y, r)) {
              problems.push(`${name}: a line crosses the label "${words}"`); break;
            }
          }
        } else if (data.tagName !== "line" && overlap(data.getBoundingClientRect(), r, 0.5)) {
          problems.push(`${name}: a mark covers the label "${words}"`);
        } else if (data.tagName === "line") {
          const a = new DOMPoint(+data.getAttribute("x1"), +data.getAttribute("y1")).matrixTransform(ctm);
          const b = new DOMPoint(+data.getAttribute("x2"), +data.getAttribute("y2")).matrixTransform(ctm);
          if (segmentHits(a.x, a.y, b.x, b.y, r)) problems.push(`${name}: a line crosses the label "${words}"`);
        }
      }
    }
  }
  return problems;
}"""

# Where a name (an exercise id, "ng-id") breaks across lines: only right after a dot. Returns the bad breaks.
MIDWORD_JS = """(selector) => {
  const bad = [];
  for (const el of document.querySelectorAll(selector)) {
    const chars = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (rect) chars.push([node.data[i], rect.top]);
      }
    }
    for (let k = 1; k < chars.length; k++) {
      if (chars[k][1] > chars[k - 1][1] + 2 && chars[k - 1][0] !== ".") {
        bad.push(`${el.textContent}: a line breaks after "${chars[k - 1][0]}"`);
      }
    }
  }
  return bad;
}"""
