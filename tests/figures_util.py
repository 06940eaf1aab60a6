"""The pictures' tests' helpers: the known submissions graded in-process (bench/known_report.py's, re-exported
here by name) and what the browser tests hold every picture and name to (LAYOUT_JS, MIDWORD_JS)."""

from __future__ import annotations

from bench.known_report import (  # noqa: F401 (re-exported for the tests)
    KNOWN,
    exercise_result,
    graded,
    known_report,
    namespace,
    straight_line_fit,
)

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
