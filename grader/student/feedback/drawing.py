"""Figures (``grader.student.feedback.figures`` data) drawn as inline SVG, by hand: no plotting library.

``figure_html(figure)`` returns one ``<figure>`` element: the SVG picture(s)
with ``role="img"``, a ``<title>`` and a ``<desc>`` (the figure's summary),
a legend in words and the summary again as the caption, so a screen reader
and a reader of the page get the same facts as the picture. Colour is never
the only cue: received values are solid lines with round markers, expected
ones dashed lines with hollow squares, differing elements crosses, bounds
dotted lines with a label, heat-map blocks that differ a thick outline.
Colours are the Okabe-Ito palette (readable with colour-blindness).

Pure Python (no NumPy): the HTML report, the notebook and the dashboard draw
from the JSON form of a report.
"""

from __future__ import annotations

import hashlib
import html
import math
from typing import Any

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 18, 42
RECEIVED = "#0072B2"   # blue
EXPECTED = "#444444"   # dark grey
DIFFERS = "#D55E00"    # vermillion
BOUND = "#009E73"      # bluish green
SERIES = ("#0072B2", "#CC79A7", "#E69F00", "#56B4E9")


def content_id(*parts: str) -> str:
    """An id for SVG elements derived from what they show: the same page is the same bytes every time."""
    return hashlib.sha1("\0".join(parts).encode("utf-8")).hexdigest()[:12]

CSS = """
.ng-figure{margin:0.8em 0;max-width:680px}
.ng-figure .ng-scroll{overflow-x:auto}
.ng-figure .ng-scroll:focus-visible{outline:3px solid #b35c00;outline-offset:2px}
.ng-figure svg{display:block;width:100%;min-width:480px;height:auto;font-family:system-ui,sans-serif}
.ng-figure figcaption{font-size:0.92em;margin-top:0.3em;overflow-wrap:anywhere}
.ng-legend{display:flex;flex-wrap:wrap;gap:0.3em 1.2em;font-size:0.88em;margin:0.3em 0;padding:0;list-style:none}
.ng-legend li{display:flex;align-items:center;gap:0.35em}
.ng-legend svg{width:28px;min-width:28px;height:14px}
"""


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def num(value: float | None) -> str:
    if value is None:
        return "nan/inf"
    return f"{value:.4g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(0.0 if abs(t) < step * 1e-9 else t)
        t += step
    return ticks


class Frame:
    """A plotting area mapping data (x, y) to SVG coordinates, with axes and tick labels."""

    def __init__(self, xlo: float, xhi: float, ylo: float, yhi: float, height: int = HEIGHT) -> None:
        if xhi <= xlo:
            xlo, xhi = xlo - 0.5, xhi + 0.5
        if yhi <= ylo:
            pad = abs(ylo) * 0.1 or 0.5
            ylo, yhi = ylo - pad, yhi + pad
        else:
            pad = (yhi - ylo) * 0.06
            ylo, yhi = ylo - pad, yhi + pad
        self.xlo, self.xhi, self.ylo, self.yhi, self.height = xlo, xhi, ylo, yhi, height

    def x(self, v: float) -> float:
        return LEFT + (v - self.xlo) / (self.xhi - self.xlo) * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        return self.height - BOTTOM - (v - self.ylo) / (self.yhi - self.ylo) * (self.height - TOP - BOTTOM)

    def axes(self, xlabel: str, ylabel: str, xticks: list[float] | None = None) -> str:
        parts = [f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{self.height - TOP - BOTTOM}"'
                 ' fill="none" stroke="#bbb"/>']
        for t in nice_ticks(self.ylo, self.yhi):
            y = self.y(t)
            parts.append(f'<line x1="{LEFT - 4}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                         f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="12" text-anchor="end">{num(t)}</text>')
        for t in xticks if xticks is not None else nice_ticks(self.xlo, self.xhi, 6):
            x = self.x(t)
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.height - BOTTOM}" y2="{self.height - BOTTOM + 4}"'
                         f' stroke="#888"/><text x="{x:.1f}" y="{self.height - BOTTOM + 17}" font-size="12"'
                         f' text-anchor="middle">{num(t)}</text>')
        parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{self.height - 6}" font-size="12"'
                     f' text-anchor="middle">{esc(xlabel)}</text>')
        parts.append(f'<text x="14" y="{(TOP + self.height - BOTTOM) / 2}" font-size="12" text-anchor="middle"'
                     f' transform="rotate(-90 14 {(TOP + self.height - BOTTOM) / 2})">{esc(ylabel)}</text>')
        return "".join(parts)


def svg(body: str, title: str, desc: str, height: int = HEIGHT) -> str:
    """An accessible SVG: role img, labelled by its title and described by ``desc``; its box scrolls on a narrow
    screen and so takes the keyboard's focus (tabindex 0: the arrow keys scroll it)."""
    n = content_id(body, title, desc)
    return (f'<div class="ng-scroll" tabindex="0"><svg viewBox="0 0 {WIDTH} {height}" role="img" aria-labelledby="ng-t{n} ng-d{n}"'
            f' xmlns="http://www.w3.org/2000/svg"><title id="ng-t{n}">{esc(title)}</title>'
            f'<desc id="ng-d{n}">{esc(desc)}</desc>{body}</svg></div>')


def marker(kind: str, x: float, y: float, colour: str, size: float = 4.0) -> str:
    """circle (a value), cross (a differing value), square (hollow: expected), diamond (a statistic)."""
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size * 0.75:.1f}" fill="{colour}"/>'
    if kind == "cross":
        s = size
        return (f'<path d="M{x - s:.1f} {y - s:.1f}L{x + s:.1f} {y + s:.1f}M{x - s:.1f} {y + s:.1f}L{x + s:.1f}'
                f' {y - s:.1f}" stroke="{colour}" stroke-width="2.2"/>')
    if kind == "square":
        s = size * 0.8
        return (f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}" fill="none"'
                f' stroke="{colour}" stroke-width="1.3"/>')
    s = size * 1.3
    return f'<path d="M{x:.1f} {y - s:.1f}L{x + s:.1f} {y:.1f}L{x:.1f} {y + s:.1f}L{x - s:.1f} {y:.1f}Z" fill="{colour}"/>'


def polyline(points: list[tuple[float, float]], colour: str, dashed: bool = False, width: float = 1.6) -> str:
    if len(points) < 2:
        return ""
    d = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>'


def legend(items: list[tuple[str, str]]) -> str:
    """A legend in words: (symbol svg body, text) pairs."""
    lis = "".join(f'<li><svg viewBox="0 0 28 14" aria-hidden="true">{sym}</svg>{esc(text)}</li>' for sym, text in items)
    return f'<ul class="ng-legend">{lis}</ul>'


def line_symbol(colour: str, dashed: bool, mark: str | None) -> str:
    body = polyline([(1, 7), (27, 7)], colour, dashed)
    return body + (marker(mark, 14, 7, colour) if mark else "")


def finite(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None]


# --------------------------------------------------------------------------- kinds


def draw_elements(fig: dict[str, Any]) -> str:
    """Received (and expected, unless hidden) per sampled element; then the heat map or the per-axis summary."""
    received, expected, differs = fig["received"], fig.get("expected"), fig["differs"]
    values = finite(received) + finite(expected or [])
    frame = Frame(0, max(1, len(received) - 1), min(values, default=0.0), max(values, default=1.0))
    body = [frame.axes(f"element (a sample of {len(received)} of {fig['size']}, in memory order)", fig["key"],
                       xticks=[])]
    if expected is not None:
        body.append(polyline([(frame.x(i), frame.y(v)) for i, v in enumerate(expected) if v is not None],
                             EXPECTED, dashed=True, width=1.2))
        body.extend(marker("square", frame.x(i), frame.y(v), EXPECTED, 3.2) for i, v in enumerate(expected)
                    if v is not None and len(expected) <= 120)
    for i, (v, bad) in enumerate(zip(received, differs)):
        if v is None:
            body.append(f'<text x="{frame.x(i):.1f}" y="{TOP + 12}" font-size="11" text-anchor="middle"'
                        f' fill="{DIFFERS}">nan</text>')
            continue
        body.append(marker("cross" if bad else "circle", frame.x(i), frame.y(v), DIFFERS if bad else RECEIVED,
                           4.5 if bad else 2.6))
    # the flat index under a few evenly spaced positions, so the sample can be found in the array
    last = len(received) - 1
    for i in sorted({round(last * k / 6) for k in range(7)}):
        body.append(f'<text x="{frame.x(i):.1f}" y="{HEIGHT - BOTTOM + 17}" font-size="11"'
                    f' text-anchor="middle">{fig["index"][i]}</text>')
    items = [(marker("circle", 14, 7, RECEIVED, 4.5), "yours, within tolerance"),
             (marker("cross", 14, 7, DIFFERS, 4), "yours, differs from expected")]
    if expected is not None:
        items.append((line_symbol(EXPECTED, True, "square"), "expected"))
    parts = [svg("".join(body), fig["title"], fig["summary"]), legend(items)]
    if fig.get("heat") is not None:
        parts.append(draw_heat(fig))
    elif fig.get("axes"):
        parts.append(draw_axes(fig))
    return "".join(parts)


def heat_colour(t: float) -> str:
    """White (0) to dark blue (1), through light blue: a sequential scale."""
    t = min(1.0, max(0.0, t))
    r = round(255 - t * (255 - 8))
    g = round(255 - t * (255 - 48))
    b = round(255 - t * (255 - 107))
    return f"rgb({r},{g},{b})"


def draw_heat(fig: dict[str, Any]) -> str:
    heat = fig["heat"]
    values = heat["values"]
    rows, cols = len(values), len(values[0])
    top, left = 24, LEFT
    size = min((WIDTH - left - 90) / cols, 320 / rows, 28)
    height = int(top + rows * size + 40)
    peak = max((v for row in values for v in row if v is not None), default=0.0) or 1.0
    br, bc = heat["block"]
    body = [f'<text x="{left}" y="16" font-size="12">{esc(heat["measure"])} by '
            f'{"element" if br == bc == 1 else f"block of {br} x {bc}"} (rows: axis 0, columns: axis 1)</text>']
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            x, y = left + j * size, top + i * size
            colour = heat_colour((v or 0.0) / peak)
            body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{size:.1f}" height="{size:.1f}" fill="{colour}"'
                        ' stroke="#ddd" stroke-width="0.5"/>')
            if heat["differs"][i][j]:
                body.append(f'<rect x="{x + 1.2:.1f}" y="{y + 1.2:.1f}" width="{size - 2.4:.1f}"'
                            f' height="{size - 2.4:.1f}" fill="none" stroke="{DIFFERS}" stroke-width="2"/>')
    for i in range(0, rows, max(1, rows // 6)):
        body.append(f'<text x="{left - 4}" y="{top + (i + 0.5) * size + 4:.1f}" font-size="11"'
                    f' text-anchor="end">{i * br}</text>')
    for j in range(0, cols, max(1, cols // 8)):
        body.append(f'<text x="{left + (j + 0.5) * size:.1f}" y="{top + rows * size + 14:.1f}" font-size="11"'
                    f' text-anchor="middle">{j * bc}</text>')
    sx = left + cols * size + 16
    for k in range(10):
        body.append(f'<rect x="{sx:.1f}" y="{top + (9 - k) * 12:.1f}" width="14" height="12"'
                    f' fill="{heat_colour((k + 0.5) / 10)}"/>')
    body.append(f'<text x="{sx + 18:.1f}" y="{top + 10}" font-size="11">{num(peak)}</text>'
                f'<text x="{sx + 18:.1f}" y="{top + 120}" font-size="11">0</text>')
    desc = (f"Heat map of the {heat['measure']} of {fig['key']} over its {fig['shape'][0]} x {fig['shape'][1]}"
            f" elements; outlined blocks hold values that differ. " + (follows_text(fig) or ""))
    return (svg("".join(body), f"{fig['title']}: where the error is", desc, height)
            + legend([(f'<rect x="7" y="1" width="12" height="12" fill="{heat_colour(0.7)}" stroke="{DIFFERS}"'
                       ' stroke-width="2"/>', "outlined: the block holds differing values"),
                      (f'<rect x="7" y="1" width="12" height="12" fill="{heat_colour(1)}"/>',
                       f"darker: larger {heat['measure']} (scale 0 to {num(peak)})")]))


def follows_text(fig: dict[str, Any]) -> str:
    follows = fig.get("follows")
    if follows is None:
        return "The error does not follow one axis."
    return f"The error follows axis {follows['axis']}."


def draw_axes(fig: dict[str, Any]) -> str:
    """One bar chart per axis: at each index, the mean |error| (public checks) or the fraction of differing values.

    A bar is outlined, in the differing colour, where over half of the values at that index differ.
    """
    axes = fig["axes"]
    magnitude = all("error" in ax for ax in axes)
    band = 64
    height = 20 + band * len(axes) + 10
    body = []
    follows = (fig.get("follows") or {}).get("axis")
    for k, ax in enumerate(axes):
        top = 20 + k * band
        fr = ax["fraction"]
        values = ax["error"] if magnitude else fr
        peak = max(values) or 1.0
        width = (WIDTH - LEFT - RIGHT) / max(1, len(fr))
        label = f"axis {ax['axis']} ({ax['size']})" + (" ← error follows" if ax["axis"] == follows else "")
        body.append(f'<text x="4" y="{top + 12}" font-size="12">{esc(label)}</text>')
        if magnitude:
            body.append(f'<text x="{WIDTH - RIGHT}" y="{top + 12}" font-size="11" text-anchor="end">'
                        f'largest mean |error| {num(peak)}</text>')
        base = top + band - 14
        body.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base}" y2="{base}" stroke="#888"/>')
        for i, (v, f) in enumerate(zip(values, fr)):
            h = v / peak * (band - 30)
            colour = DIFFERS if f > 0.5 else RECEIVED
            outline = ' stroke="#000" stroke-width="1"' if f > 0.5 else ""
            body.append(f'<rect x="{LEFT + i * width + 1:.1f}" y="{base - h:.1f}" width="{max(1.0, width - 2):.1f}"'
                        f' height="{h:.1f}" fill="{colour}"{outline}/>')
        body.append(f'<text x="{LEFT - 4}" y="{base + 11}" font-size="10" text-anchor="end">0</text>'
                    f'<text x="{WIDTH - RIGHT}" y="{base + 11}" font-size="10" text-anchor="end">'
                    f'{ax["size"] - 1}</text>')
    measure = "the mean absolute error" if magnitude else "the fraction of differing values"
    desc = (f"Per axis, {measure} at each index (full height: the most of that axis). {follows_text(fig)}")
    return (svg("".join(body), f"{fig['title']}: which axis the error follows", desc, height)
            + legend([(f'<rect x="7" y="1" width="12" height="12" fill="{DIFFERS}" stroke="#000"/>',
                       "over half of the values at that index differ (outlined)"),
                      (f'<rect x="7" y="1" width="12" height="12" fill="{RECEIVED}"/>', "fewer than half differ"),
                      ("", f"bar height: {measure} at that index")]))


def draw_trajectory(fig: dict[str, Any]) -> str:
    steps = fig["steps"]
    values = [v for s in fig["series"] for v in finite(s["received"]) + finite(s["expected"] or [])]
    frame = Frame(steps[0] - 0.3, steps[-1] + 0.3, min(values, default=0.0), max(values, default=1.0))
    body = [frame.axes("step", "value after the step", xticks=[float(s) for s in steps])]
    items = []
    for k, s in enumerate(fig["series"]):
        colour = SERIES[k % len(SERIES)]
        if s["expected"] is not None:
            body.append(polyline([(frame.x(t), frame.y(v)) for t, v in zip(steps, s["expected"]) if v is not None],
                                 colour, dashed=True, width=1.2))
            body.extend(marker("square", frame.x(t), frame.y(v), colour, 3.5)
                        for t, v in zip(steps, s["expected"]) if v is not None)
        pts = [(frame.x(t), frame.y(v)) for t, v in zip(steps, s["received"]) if v is not None]
        body.append(polyline(pts, colour))
        for t, v, bad in zip(steps, s["received"], s["differs"]):
            if v is not None:
                body.append(marker("cross" if bad else "circle", frame.x(t), frame.y(v), DIFFERS if bad else colour,
                                   4.5 if bad else 3))
        if pts:
            body.append(f'<text x="{pts[-1][0] - 6:.1f}" y="{pts[-1][1] - 7:.1f}" font-size="11" text-anchor="end"'
                        f' fill="{colour}">{esc(s["label"])}</text>')
        items.append((line_symbol(colour, False, "circle"), f"yours: {s['label']}"))
    if fig["series"][0]["expected"] is not None:
        items.append((line_symbol(EXPECTED, True, "square"), "expected (dashed, hollow squares)"))
    items.append((marker("cross", 14, 7, DIFFERS, 4), "a step where yours differs"))
    return svg("".join(body), fig["title"], fig["summary"]) + legend(items)


def density_at(d: dict[str, Any], x: float) -> float:
    mean, std = d["mean"] or 0.0, d["std"] or 0.0
    if std <= 0:
        return 0.0
    if d["kind"] == "uniform":
        a = math.sqrt(3.0) * std
        return 1.0 / (2 * a) if abs(x - mean) <= a else 0.0
    return math.exp(-0.5 * ((x - mean) / std) ** 2) / (std * math.sqrt(2 * math.pi))


def draw_histogram(fig: dict[str, Any]) -> str:
    edges, counts, d = fig["edges"], fig["counts"], fig["density"]
    lo, hi = edges[0], edges[-1]
    width = (hi - lo) / len(counts)
    curve: list[tuple[float, float]] = []
    if d is not None:
        for k in range(161):
            x = lo + (hi - lo) * k / 160
            curve.append((x, fig["n"] * width * density_at(d, x)))
    top = max([*counts, *(c for _, c in curve)], default=1)
    frame = Frame(lo, hi, 0.0, float(top))
    body = [frame.axes(fig["value_label"], "count")]
    for k, c in enumerate(counts):
        x0, x1 = frame.x(edges[k]), frame.x(edges[k + 1])
        body.append(f'<rect x="{x0:.1f}" y="{frame.y(c):.1f}" width="{max(0.5, x1 - x0 - 0.6):.1f}"'
                    f' height="{frame.y(0) - frame.y(c):.1f}" fill="#9ecae1" stroke="{RECEIVED}" stroke-width="0.6"/>')
    if curve:
        body.append(polyline([(frame.x(x), frame.y(y)) for x, y in curve], EXPECTED, dashed=True, width=2))
    items = [(f'<rect x="4" y="2" width="20" height="10" fill="#9ecae1" stroke="{RECEIVED}"/>', "your values")]
    if d is not None:
        items.append((line_symbol(EXPECTED, True, None), f"expected {d['kind']} density (std {num(d['std'])})"))
    for b in fig["bounds"] or []:
        x = frame.x(b)
        right = x > WIDTH / 2  # the label on the inner side of the line
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="{BOUND}"'
                    f' stroke-width="2" stroke-dasharray="2 3"/><text x="{x - 4 if right else x + 4:.1f}" y="{TOP + 12}"'
                    f' font-size="11" text-anchor="{"end" if right else "start"}" fill="{BOUND}">bound {num(b)}</text>')
    if fig["bounds"]:
        items.append((f'<line x1="14" x2="14" y1="1" y2="13" stroke="{BOUND}" stroke-width="2" stroke-dasharray="2 3"/>',
                      "the bound a correct draw never passes"))
    parts = [svg("".join(body), fig["title"], fig["summary"]), legend(items)]
    if fig["statistic"] is not None:
        parts.append(draw_statistic(fig["statistic"], fig["title"]))
    return "".join(parts)


def draw_statistic(s: dict[str, Any], title: str) -> str:
    """The judged statistic on its own axis: the allowed interval (hatched band), the expected value, yours."""
    vals = finite([s["value"], s["expected"], s["low"], s["high"]])
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    frame = Frame(lo - 0.1 * span, hi + 0.1 * span, 0, 1, height=96)
    y = 44
    hatch = "ng-hatch" + content_id(repr(sorted(s.items())), title)
    body = [f'<defs><pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse"'
            f' patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="{BOUND}" stroke-width="2"/>'
            '</pattern></defs>',
            f'<text x="4" y="14" font-size="12">{esc(s["name"])}</text>',
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#888"/>']
    if s["low"] is not None and s["high"] is not None:
        x0, x1 = frame.x(s["low"]), frame.x(s["high"])
        body.append(f'<rect x="{x0:.1f}" y="{y - 9}" width="{max(1.0, x1 - x0):.1f}" height="18" fill="url(#{hatch})"'
                    f' stroke="{BOUND}"/>')
        for v, anchor in ((s["low"], "end"), (s["high"], "start")):
            body.append(f'<text x="{frame.x(v) + (-3 if anchor == "end" else 3):.1f}" y="{y + 24}" font-size="11"'
                        f' text-anchor="{anchor}">{num(v)}</text>')
    if s["expected"] is not None:
        x = frame.x(s["expected"])
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y - 14}" y2="{y + 14}" stroke="{EXPECTED}" stroke-width="2"'
                    ' stroke-dasharray="3 2"/>')
    if s["value"] is not None:
        x = frame.x(s["value"])
        body.append(marker("diamond", x, y, DIFFERS, 5) +
                    f'<text x="{x:.1f}" y="{y - 14}" font-size="11" text-anchor="middle">yours {num(s["value"])}</text>')
    inside = s["value"] is not None and s["low"] is not None and s["low"] <= s["value"] <= s["high"]
    desc = (f"{s['name']}: yours {num(s['value'])}, expected {num(s['expected'])}, allowed interval"
            f" [{num(s['low'])}, {num(s['high'])}]; yours is {'inside' if inside else 'outside'} it.")
    return (svg("".join(body), f"{title}: {s['name']}", desc, 96)
            + legend([(f'<rect x="4" y="2" width="20" height="10" fill="url(#{hatch})" stroke="{BOUND}"/>',
                       "allowed interval"),
                      (f'<line x1="14" x2="14" y1="1" y2="13" stroke="{EXPECTED}" stroke-width="2"'
                       ' stroke-dasharray="3 2"/>', "expected"),
                      (marker("diamond", 14, 7, DIFFERS, 4), "yours")]))


def draw_fit(fig: dict[str, Any]) -> str:
    xs, ys, ts = fig["x"], fig["received"], fig["target"]
    values = finite(ys) + finite(ts)
    frame = Frame(min(finite(xs), default=0.0), max(finite(xs), default=1.0), min(values, default=0.0),
                  max(values, default=1.0))
    body = [frame.axes("x", "value"),
            polyline([(frame.x(x), frame.y(t)) for x, t in zip(xs, ts) if x is not None and t is not None],
                     EXPECTED, dashed=True, width=2),
            polyline([(frame.x(x), frame.y(y)) for x, y in zip(xs, ys) if x is not None and y is not None],
                     RECEIVED, width=2)]
    w = fig["worst"]
    if w["x"] is not None and w["received"] is not None and w["target"] is not None:
        x = frame.x(w["x"])
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.y(w["received"]):.1f}" y2="{frame.y(w["target"]):.1f}"'
                    f' stroke="{DIFFERS}" stroke-width="2"/>' + marker("cross", x, frame.y(w["received"]), DIFFERS, 5))
        body.append(f'<text x="{x + 8:.1f}" y="{frame.y(w["received"]) - 6:.1f}" font-size="11">largest error'
                    f' {num(w["error"])}</text>')
    items = [(line_symbol(RECEIVED, False, None), "your g(x)"), (line_symbol(EXPECTED, True, None), "target f(x)"),
             (marker("cross", 14, 7, DIFFERS, 4), "the largest error")]
    return svg("".join(body), fig["title"], fig["summary"]) + legend(items)


DRAW = {"elements": draw_elements, "trajectory": draw_trajectory, "histogram": draw_histogram, "fit": draw_fit}


def figure_html(figure: dict[str, Any]) -> str:
    """One ``<figure>``: the picture(s), a legend in words, the summary as caption.

    An unknown kind (a newer grader's), or figure data that cannot be drawn (a
    report file edited by hand), shows the summary alone: a page never fails
    for one picture.
    """
    draw = DRAW.get(str(figure.get("kind")))
    summary = esc(figure.get("summary", ""))
    try:
        picture = draw(figure) if draw is not None else ""
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        picture = '<p class="ng-note">(This picture could not be drawn from the report file.)</p>'
    return f'<figure class="ng-figure">{picture}<figcaption>{summary}</figcaption></figure>'
