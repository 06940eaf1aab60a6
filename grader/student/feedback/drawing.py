"""Figures (``grader.student.feedback.figures`` data) drawn as inline SVG, by hand: no plotting library.

``figure_html(figure)`` returns one ``<figure>`` element: the SVG picture(s)
with ``role="img"``, a ``<title>`` and a ``<desc>`` (the figure's summary),
a legend in words and the summary again as the caption, so a screen reader
and a reader of the page get the same facts as the picture. Colour is never
the only cue: received values are solid lines with round markers, expected
ones dashed lines with hollow squares, differing elements crosses, bounds
dotted lines with a label, heat-map blocks that differ a thick outline.
Colours are the Okabe-Ito palette (readable with colour-blindness).

Layout rules the browser tests hold every picture to: a picture scales with
its box (no minimum width: at 390 px it shrinks, it never scrolls); every
label sits outside the plotting area (tick labels, series names in a right
gutter moved apart so that none covers another, bound names above the plot),
so no label lies on a line, a marker or another label; and nothing is drawn
outside the picture's own view box. A hidden check's figure (no expected
values) draws the power of ten of each relative error and the ratios
instead, and the public case (``figure["public"]``) beside it.

This module holds one drawing function per figure kind (``DRAW``) and the
``<figure>`` around them; the SVG primitives they draw with (frame, ticks,
labels, markers, legend) are ``grader.student.feedback.svg``.

Pure Python (no NumPy): the HTML report, the notebook and the dashboard draw
from the JSON form of a report.
"""

from __future__ import annotations

import math
from typing import Any

from grader.student.feedback.svg import (
    BOUND,
    CLIP,
    DIFFERS,
    EXPECTED,
    FONT,
    LEFT,
    RECEIVED,
    RIGHT,
    SERIES,
    SMALL,
    WIDTH,
    Frame,
    content_id,
    esc,
    finite,
    gutter_labels,
    gutter_width,
    legend,
    line_symbol,
    marker,
    num,
    polyline,
    spaced,
    svg,
    text,
)

DECADE_LOW, DECADE_HIGH = -12, 3  # figures.DECADE_LOW/HIGH (drawing imports no NumPy)

CSS = """
.ng-figures{display:flex;flex-wrap:wrap;gap:0 1.2em;align-items:flex-start}
.ng-figures>.ng-figure{flex:1 1 22em;min-width:0}
.ng-figure{margin:0.8em 0;max-width:600px}
.ng-figure svg{display:block;width:100%;height:auto;font-family:system-ui,sans-serif}
.ng-figure figcaption{font-size:0.92em;margin-top:0.3em;overflow-wrap:break-word}
.ng-figure .ng-which{font-weight:600;font-size:0.92em;margin:0 0 0.2em}
.ng-legend{display:flex;flex-wrap:wrap;gap:0.3em 1.2em;font-size:0.88em;margin:0.3em 0;padding:0;list-style:none}
.ng-legend li{display:flex;align-items:center;gap:0.35em}
.ng-legend svg{width:28px;min-width:28px;height:14px}
"""


def labels_of(fig: dict[str, Any]) -> dict[str, str]:
    return {"received": "yours", "expected": "expected", **(fig.get("labels") or {})}


def draw_elements(fig: dict[str, Any]) -> str:
    """Received (and expected, unless hidden) per sampled element; a hidden figure's relative errors as powers of
    ten; then the heat map or the per-axis summary."""
    received, expected, differs = fig["received"], fig.get("expected"), fig["differs"]
    names = labels_of(fig)
    values = finite(received) + finite(expected)
    frame = Frame(0, max(1, len(received) - 1), min(values, default=0.0), max(values, default=1.0))
    body = [
        frame.axes(f"element (a sample of {len(received)} of {fig['size']}, in memory order)", fig["key"], xticks=[])
    ]
    if expected is not None:
        body.append(
            polyline(
                [(frame.x(i), frame.y(v)) for i, v in enumerate(expected) if v is not None],
                EXPECTED,
                dashed=True,
                width=1.2,
            )
        )
        body.extend(
            marker("square", frame.x(i), frame.y(v), EXPECTED, 3.2)
            for i, v in enumerate(expected)
            if v is not None and len(expected) <= 120
        )
    nan_seen = False
    for i, (v, bad) in enumerate(zip(received, differs, strict=False)):
        if v is None:  # NaN or inf: a cross on the top edge of the plot
            nan_seen = True
            body.append(marker("cross", frame.x(i), frame.top + 5, DIFFERS, 3.5))
            continue
        body.append(
            marker(
                "cross" if bad else "circle", frame.x(i), frame.y(v), DIFFERS if bad else RECEIVED, 4.5 if bad else 2.6
            )
        )
    # the flat index under a few evenly spaced positions, so the sample can be found in the array
    last = len(received) - 1
    marks = [(frame.x(i), str(fig["index"][i])) for i in sorted({round(last * k / 4) for k in range(5)})]
    for x, label in spaced(marks, SMALL):
        body.append(text(x, frame.bottom + 16, label, SMALL, anchor="middle"))
    items = [
        (marker("circle", 14, 7, RECEIVED, 4.5), f"{names['received']}, within tolerance"),
        (marker("cross", 14, 7, DIFFERS, 4), f"{names['received']}, differs from {names['expected']}"),
    ]
    if expected is not None:
        items.append((line_symbol(EXPECTED, True, "square"), names["expected"]))
    if nan_seen:
        items.append((marker("cross", 14, 7, DIFFERS, 3.5), "NaN or inf (on the top edge)"))
    parts = [svg("".join(body), fig["title"], fig["summary"]), legend(items)]
    if fig.get("hidden") and finite(fig.get("decades")):
        parts.append(draw_decades(fig))
    if fig.get("heat") is not None:
        parts.append(draw_heat(fig))
    elif fig.get("axes"):
        parts.append(draw_axes(fig))
    return "".join(parts)


def decade_label(k: float) -> str:
    return f"≥1e{DECADE_HIGH}" if k >= DECADE_HIGH else f"1e{int(k)}"


def draw_decades(fig: dict[str, Any]) -> str:
    """A hidden figure's sampled elements: the power of ten of each differing one's relative error, as a bar."""
    decades = fig["decades"]
    shown = finite(decades)
    lo, hi = min(shown) - 1, max(max(shown), min(shown) + 2)
    height = 170
    frame = Frame(-0.5, len(decades) - 0.5, lo, hi + 1, height=height)  # a bar's width each side of its index
    frame.ylo, frame.yhi = lo, hi + 1  # whole powers of ten, no padding
    body = [frame.axes("element (the same sample)", "rel. error", xticks=[], ytick_text=lambda t: decade_label(t))]
    width = max(0.6, (frame.right_edge - LEFT) / max(1, len(decades)) - 1)
    for i, k in enumerate(decades):
        if k is None:
            continue
        x, y = frame.x(i), frame.y(k + 1)
        body.append(
            f'<rect class="ng-data" x="{x - width / 2:.1f}" y="{y:.1f}" width="{width:.1f}"'
            f' height="{frame.bottom - y:.1f}" fill="{DIFFERS}"/>'
        )
    desc = (
        f"For each differing element of the sample, the power of ten of its relative error |yours - expected| /"
        f" |expected|: the largest shown is {decade_label(max(shown))} (a band, never a value:"
        " the expected values are not shown)."
    )
    return svg("".join(body), f"{fig['title']}: how far off", desc, height) + legend(
        [
            (
                f'<rect x="7" y="1" width="12" height="12" fill="{DIFFERS}"/>',
                "bar up to 1eK: the relative error is between 1e(K-1) and 1eK",
            )
        ]
    )


def heat_colour(t: float) -> str:
    """White (0) to dark blue (1), through light blue: a sequential scale."""
    t = min(1.0, max(0.0, t))
    r = round(255 - t * (255 - 8))
    g = round(255 - t * (255 - 48))
    b = round(255 - t * (255 - 107))
    return f"rgb({r},{g},{b})"


def heat_grid(
    values: list[list[float | None]],
    colour_of: Any,
    differs: list[list[int]] | None,
    left: float,
    top: float,
    size: float,
    block: list[int],
) -> list[str]:
    """The cells of a heat map, outlined where they differ, with row and column index labels that keep apart."""
    rows, cols = len(values), len(values[0])
    br, bc = block
    body = []
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            x, y = left + j * size, top + i * size
            body.append(
                f'<rect class="ng-data" x="{x:.1f}" y="{y:.1f}" width="{size:.1f}" height="{size:.1f}"'
                f' fill="{colour_of(v)}" stroke="#ddd" stroke-width="0.5"/>'
            )
            if differs is not None and differs[i][j]:
                body.append(
                    f'<rect class="ng-data" x="{x + 1.2:.1f}" y="{y + 1.2:.1f}" width="{size - 2.4:.1f}"'
                    f' height="{size - 2.4:.1f}" fill="none" stroke="{DIFFERS}" stroke-width="2"/>'
                )
    every = max(1, math.ceil((SMALL + 2) / size))
    for i in range(0, rows, every):
        body.append(text(left - 4, top + (i + 0.5) * size + 4, str(i * br), SMALL, anchor="end"))
    columns = [(left + (j + 0.5) * size, str(j * bc)) for j in range(cols)]
    for x, label in spaced(columns, SMALL, gap=4):
        body.append(text(x, top + rows * size + 14, label, SMALL, anchor="middle"))
    return body


def draw_heat(fig: dict[str, Any]) -> str:
    """The 2-D heat map: the largest absolute error by block, or (hidden) the power of ten of the relative error."""
    heat = fig["heat"]
    values = heat["values"]
    rows, cols = len(values), len(values[0])
    decades = "power of ten" in heat["measure"]
    top, left = 30, 44
    size = min((WIDTH - left - 78) / cols, 300 / rows, 24)
    height = top + rows * size + 24
    br, bc = heat["block"]
    what = "element" if br == bc == 1 else f"block of {br} x {bc}"
    body = [text(4, 16, f"{heat['measure']} by {what}", anchor="start")]
    sx = left + cols * size + 14
    if decades:
        present = sorted({int(v) for row in values for v in row if v is not None})
        lo, hi = (present[0], present[-1]) if present else (0, 0)

        def colour(v: float | None) -> str:
            return "#ffffff" if v is None else heat_colour((v - lo + 1) / (hi - lo + 1))

        scale = list(range(lo, hi + 1))[-10:]
        for k, d in enumerate(reversed(scale)):
            body.append(
                f'<rect x="{sx:.1f}" y="{top + k * 14:.1f}" width="14" height="14" fill="{colour(d)}"'
                ' stroke="#999" stroke-width="0.5"/>'
            )
            if k % max(1, math.ceil(len(scale) / 8)) == 0:
                body.append(text(sx + 18, top + k * 14 + 11, decade_label(d + 1), SMALL))
        height = max(height, top + len(scale) * 14 + 8)
        scale_text = f"darker: a larger relative error (up to {decade_label(hi + 1)}); white: no value differs"
    else:
        peak = max((v for row in values for v in row if v is not None), default=0.0) or 1.0

        def colour(v: float | None) -> str:
            return heat_colour((v or 0.0) / peak)

        for k in range(10):
            body.append(
                f'<rect x="{sx:.1f}" y="{top + (9 - k) * 12:.1f}" width="14" height="12"'
                f' fill="{heat_colour((k + 0.5) / 10)}"/>'
            )
        body.append(text(sx + 18, top + 10, num(peak), SMALL) + text(sx + 18, top + 120, "0", SMALL))
        height = max(height, top + 128)
        scale_text = f"darker: larger {heat['measure']} (scale 0 to {num(peak)})"
    differs = [[int(d is not None) for d in row] for row in heat["decades"]]  # a block holds differing values
    body.extend(heat_grid(values, colour, differs, left, top, size, heat["block"]))
    desc = (
        f"Heat map of the {heat['measure']} of {fig['key']} over its {fig['shape'][0]} x {fig['shape'][1]}"
        f" elements (rows: axis 0, columns: axis 1); outlined blocks hold values that differ. " + follows_text(fig)
    )
    return svg("".join(body), f"{fig['title']}: where the error is", desc, height) + legend(
        [
            (
                f'<rect x="7" y="1" width="12" height="12" fill="{heat_colour(0.7)}" stroke="{DIFFERS}"'
                ' stroke-width="2"/>',
                "outlined: the block holds differing values",
            ),
            (f'<rect x="7" y="1" width="12" height="12" fill="{heat_colour(1)}"/>', scale_text),
        ]
    )


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
    band = 66
    height = 10 + band * len(axes) + 6
    body = []
    follows = (fig.get("follows") or {}).get("axis")
    for k, ax in enumerate(axes):
        top = 10 + k * band
        fr = ax["fraction"]
        values = ax["error"] if magnitude else fr
        peak = max(values) or 1.0
        width = (WIDTH - LEFT - RIGHT) / max(1, len(fr))
        label = f"axis {ax['axis']} ({ax['size']} indices)"
        if magnitude:
            label += f", largest mean |error| {num(peak)}"
        if ax["axis"] == follows:
            label += " ← the error follows it"
        body.append(text(4, top + 12, label, SMALL))
        base = top + band - 14
        body.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base}" y2="{base}" stroke="#888"/>')
        for i, (v, f) in enumerate(zip(values, fr, strict=False)):
            h = v / peak * (band - 32)
            colour = DIFFERS if f > 0.5 else RECEIVED
            outline = ' stroke="#000" stroke-width="1"' if f > 0.5 else ""
            body.append(
                f'<rect class="ng-data" x="{LEFT + i * width + 1:.1f}" y="{base - h:.1f}"'
                f' width="{max(1.0, width - 2):.1f}" height="{h:.1f}" fill="{colour}"{outline}/>'
            )
        body.append(
            text(LEFT - 4, base + 11, "0", 10, anchor="end")
            + text(WIDTH - RIGHT, base + 11, str(ax["size"] - 1), 10, anchor="end")
        )
    measure = "the mean absolute error" if magnitude else "the fraction of differing values"
    desc = f"Per axis, {measure} at each index (full height: the most of that axis). {follows_text(fig)}"
    return svg("".join(body), f"{fig['title']}: which axis the error follows", desc, height) + legend(
        [
            (
                f'<rect x="7" y="1" width="12" height="12" fill="{DIFFERS}" stroke="#000"/>',
                "over half of the values at that index differ (outlined)",
            ),
            (f'<rect x="7" y="1" width="12" height="12" fill="{RECEIVED}"/>', "fewer than half differ"),
            ("", f"bar height: {measure} at that index"),
        ]
    )


def draw_trajectory(fig: dict[str, Any]) -> str:
    """The values after each step (the expected ones dashed, unless hidden), names in the gutter; then the ratios."""
    steps = fig["steps"]
    series = fig["series"]
    values = [v for s in series for v in finite(s["received"]) + finite(s["expected"])]
    right = gutter_width([s["label"] for s in series])
    frame = Frame(steps[0] - 0.3, steps[-1] + 0.3, min(values, default=0.0), max(values, default=1.0), right=right)
    body = [frame.axes("step", "value after the step", xticks=[float(s) for s in steps])]
    items, ends = [], []
    for k, s in enumerate(series):
        colour = SERIES[k % len(SERIES)]
        if s["expected"] is not None:
            body.append(
                polyline(
                    [(frame.x(t), frame.y(v)) for t, v in zip(steps, s["expected"], strict=False) if v is not None],
                    colour,
                    dashed=True,
                    width=1.2,
                )
            )
            body.extend(
                marker("square", frame.x(t), frame.y(v), colour, 3.5)
                for t, v in zip(steps, s["expected"], strict=False)
                if v is not None
            )
        pts = [(frame.x(t), frame.y(v)) for t, v in zip(steps, s["received"], strict=False) if v is not None]
        body.append(polyline(pts, colour))
        for t, v, bad in zip(steps, s["received"], s["differs"], strict=False):
            if v is not None:
                body.append(
                    marker(
                        "cross" if bad else "circle",
                        frame.x(t),
                        frame.y(v),
                        DIFFERS if bad else colour,
                        4.5 if bad else 3,
                    )
                )
        if pts:
            ends.append((pts[-1][1], s["label"], colour))
        items.append((line_symbol(colour, False, "circle"), f"yours: {s['label']}"))
    body.append(gutter_labels(ends, frame.right_edge + 12, frame.height))
    if series[0]["expected"] is not None:
        items.append((line_symbol(EXPECTED, True, "square"), "expected (dashed, hollow squares)"))
    items.append((marker("cross", 14, 7, DIFFERS, 4), "a step where yours differs"))
    parts = [svg("".join(body), fig["title"], fig["summary"]), legend(items)]
    if any(finite(s.get("ratio")) for s in series):
        parts.append(draw_ratios(fig))
    return "".join(parts)


def draw_ratios(fig: dict[str, Any]) -> str:
    """Per step, the ratio of what each step adds (or of the values), yours over expected, one line per component,
    with the dotted line of 1 (equal)."""
    steps, series = fig["steps"], fig["series"]
    values = [v for s in series for v in finite(s.get("ratio"))] + [1.0]
    labels = [s["label"] for s in series] + ["1: equal"]
    right = gutter_width(labels)
    height = 190
    frame = Frame(steps[0] - 0.3, steps[-1] + 0.3, min(values), max(values), height=height, right=right)
    body = [frame.axes("step", "yours / expected", xticks=[float(s) for s in steps])]
    one = frame.y(1.0)
    body.append(
        f'<line class="ng-data" x1="{LEFT}" x2="{frame.right_edge:.1f}" y1="{one:.1f}" y2="{one:.1f}"'
        f' stroke="{EXPECTED}" stroke-width="1.2" stroke-dasharray="2 3"/>'
    )
    ends = [(one, "1: equal", EXPECTED)]
    for k, s in enumerate(series):
        colour = SERIES[k % len(SERIES)]
        pts = [(frame.x(t), frame.y(v)) for t, v in zip(steps, s.get("ratio") or [], strict=False) if v is not None]
        body.append(polyline(pts, colour))
        body.extend(marker("diamond", x, y, colour, 3.2) for x, y in pts)
        if pts:
            ends.append((pts[-1][1], s["label"], colour))
    body.append(gutter_labels(ends, frame.right_edge + 12, frame.height))
    hidden = " (two significant digits: the expected values are not shown)" if fig.get("hidden") else ""
    what = fig.get("ratio_of", "the value after each step")
    desc = f"Per step, {what}: yours divided by the expected{hidden}.{fig['summary'].split('.', 1)[-1]}"
    return svg("".join(body), f"{fig['title']}: yours / expected, per step", desc, height) + legend(
        [
            (marker("diamond", 14, 7, SERIES[0], 3.2), f"{what}: yours / expected{hidden}"),
            (
                f'<line x1="1" x2="27" y1="7" y2="7" stroke="{EXPECTED}" stroke-dasharray="2 3"/>',
                "1: the same as expected",
            ),
        ]
    )


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
        body.append(
            f'<rect class="ng-data" x="{x0:.1f}" y="{frame.y(c):.1f}" width="{max(0.5, x1 - x0 - 0.6):.1f}"'
            f' height="{frame.y(0) - frame.y(c):.1f}" fill="#9ecae1" stroke="{RECEIVED}" stroke-width="0.6"/>'
        )
    if curve:
        body.append(polyline([(frame.x(x), frame.y(y)) for x, y in curve], EXPECTED, dashed=True, width=2))
    items = [(f'<rect x="4" y="2" width="20" height="10" fill="#9ecae1" stroke="{RECEIVED}"/>', "your values")]
    if d is not None:
        items.append((line_symbol(EXPECTED, True, None), f"expected {d['kind']} density (std {num(d['std'])})"))
    name = fig.get("bound_label") or "bound"
    names = []
    for b in fig["bounds"] or []:
        x = frame.x(b)
        body.append(
            f'<line class="ng-data" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top}" y2="{frame.bottom}"'
            f' stroke="{BOUND}" stroke-width="2" stroke-dasharray="2 3"/>'
        )
        names.append((x, f"{name} {num(b)}"))
    for x, label in spaced(names, SMALL):  # above the plot, where no bar or curve is
        body.append(text(x, frame.top - 8, label, SMALL, anchor="middle", fill=BOUND))
    if fig["bounds"]:
        items.append(
            (
                f'<line x1="14" x2="14" y1="1" y2="13" stroke="{BOUND}" stroke-width="2" stroke-dasharray="2 3"/>',
                "the bound a correct draw never passes" if name == "bound" else name,
            )
        )
    parts = [svg("".join(body), fig["title"], fig["summary"]), legend(items)]
    if fig["statistic"] is not None:
        parts.append(draw_statistic(fig["statistic"], fig["title"]))
    return "".join(parts)


def draw_statistic(s: dict[str, Any], title: str) -> str:
    """The judged statistic on its own axis: the allowed interval (hatched band), the expected value, yours."""
    vals = finite([s["value"], s["expected"], s["low"], s["high"]])
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    frame = Frame(lo - 0.1 * span, hi + 0.1 * span, 0, 1, height=100)
    y = 52
    hatch = "ng-hatch" + content_id(repr(sorted(s.items())), title)
    body = [
        f'<defs><pattern id="{hatch}" width="6" height="6" patternUnits="userSpaceOnUse"'
        f' patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="{BOUND}" stroke-width="2"/>'
        "</pattern></defs>",
        text(4, 14, s["name"]),
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" stroke="#888"/>',
    ]
    if s["low"] is not None and s["high"] is not None:
        x0, x1 = frame.x(s["low"]), frame.x(s["high"])
        body.append(
            f'<rect class="ng-data" x="{x0:.1f}" y="{y - 9}" width="{max(1.0, x1 - x0):.1f}" height="18"'
            f' fill="url(#{hatch})" stroke="{BOUND}"/>'
        )
        body.append(
            text(x0 - 3, y + 24, num(s["low"]), SMALL, anchor="end")
            + text(x1 + 3, y + 24, num(s["high"]), SMALL, anchor="start")
        )
    if s["expected"] is not None:
        x = frame.x(s["expected"])
        body.append(
            f'<line class="ng-data" x1="{x:.1f}" x2="{x:.1f}" y1="{y - 11}" y2="{y + 11}" stroke="{EXPECTED}"'
            ' stroke-width="2" stroke-dasharray="3 2"/>'
        )
    if s["value"] is not None:
        x = frame.x(s["value"])
        body.append(
            marker("diamond", x, y, DIFFERS, 5) + text(x, y - 17, f"yours {num(s['value'])}", SMALL, anchor="middle")
        )
    inside = s["value"] is not None and s["low"] is not None and s["low"] <= s["value"] <= s["high"]
    desc = (
        f"{s['name']}: yours {num(s['value'])}, expected {num(s['expected'])}, allowed interval"
        f" [{num(s['low'])}, {num(s['high'])}]; yours is {'inside' if inside else 'outside'} it."
    )
    return svg("".join(body), f"{title}: {s['name']}", desc, 100) + legend(
        [
            (f'<rect x="4" y="2" width="20" height="10" fill="url(#{hatch})" stroke="{BOUND}"/>', "allowed interval"),
            (
                f'<line x1="14" x2="14" y1="1" y2="13" stroke="{EXPECTED}" stroke-width="2" stroke-dasharray="3 2"/>',
                "expected",
            ),
            (marker("diamond", 14, 7, DIFFERS, 4), "yours"),
        ]
    )


def draw_fit(fig: dict[str, Any]) -> str:
    xs, ys, ts = fig["x"], fig["received"], fig["target"]
    values = finite(ys) + finite(ts)
    frame = Frame(
        min(finite(xs), default=0.0), max(finite(xs), default=1.0), min(values, default=0.0), max(values, default=1.0)
    )
    body = [
        frame.axes("x", "value"),
        polyline(
            [(frame.x(x), frame.y(t)) for x, t in zip(xs, ts, strict=False) if x is not None and t is not None],
            EXPECTED,
            dashed=True,
            width=2,
        ),
        polyline(
            [(frame.x(x), frame.y(y)) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None],
            RECEIVED,
            width=2,
        ),
    ]
    w = fig["worst"]
    if w["x"] is not None and w["received"] is not None and w["target"] is not None:
        x = frame.x(w["x"])
        body.append(
            f'<line class="ng-data" x1="{x:.1f}" x2="{x:.1f}" y1="{frame.y(w["received"]):.1f}"'
            f' y2="{frame.y(w["target"]):.1f}" stroke="{DIFFERS}" stroke-width="2"/>'
            + marker("cross", x, frame.y(w["received"]), DIFFERS, 5)
        )
    items = [
        (line_symbol(RECEIVED, False, None), "your g(x)"),
        (line_symbol(EXPECTED, True, None), "target f(x)"),
        (marker("cross", 14, 7, DIFFERS, 4), f"the largest error, {num(w['error'])} at x = {num(w['x'])}"),
    ]
    return svg("".join(body), fig["title"], fig["summary"]) + legend(items)


def draw_shapes(fig: dict[str, Any]) -> str:
    """Yours and the expected shape side by side, the last two axes as a rectangle to scale, the others written."""
    height = 170
    body = []
    boxes = [
        ("yours", fig["received"], fig.get("received_dtype"), DIFFERS),
        ("expected", fig["expected"], fig.get("expected_dtype"), EXPECTED),
    ]
    dims = [(shape[-2] if len(shape) >= 2 else 1, shape[-1] if shape else 1) for _, shape, _, _ in boxes]
    most = max(max(r, c) for r, c in dims) or 1
    half = WIDTH / 2
    for k, ((who, shape, dtype, colour), (rows, cols)) in enumerate(zip(boxes, dims, strict=False)):
        cx = half * k + half / 2
        unit = 96 / most
        w, h = max(6.0, cols * unit), max(6.0, rows * unit)
        x, y = cx - w / 2, 40 + (96 - h) / 2
        label = f"{who}: ({', '.join(str(n) for n in shape)}{',' if len(shape) == 1 else ''})"
        body.append(text(cx, 18, label, FONT, anchor="middle", width=WIDTH, extra=' font-weight="600"'))
        if dtype:
            body.append(text(cx, 32, f"dtype {dtype}", SMALL, anchor="middle"))
        dash = ' stroke-dasharray="6 4"' if k else ""
        body.append(
            f'<rect class="ng-data" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"'
            f' fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        lead = shape[:-2] if len(shape) > 2 else []
        under = (f"{' x '.join(str(n) for n in lead)} of these; " if lead else "") + (
            f"{rows} x {cols}" if len(shape) >= 2 else (f"{cols} values" if shape else "one number")
        )
        body.append(text(cx, 40 + 96 + 18, under, SMALL, anchor="middle"))
    return svg("".join(body), fig["title"], fig["summary"], height) + legend(
        [
            (f'<rect x="4" y="2" width="20" height="10" fill="none" stroke="{DIFFERS}" stroke-width="2"/>', "yours"),
            (
                f'<rect x="4" y="2" width="20" height="10" fill="none" stroke="{EXPECTED}" stroke-width="2"'
                ' stroke-dasharray="6 4"/>',
                "the shape asked for",
            ),
        ]
    )


def draw_masks(fig: dict[str, Any]) -> str:
    """Mask panels side by side: the fraction of each block's elements that were dropped."""
    panels = fig["panels"]
    gap = 16
    each = (WIDTH - gap * (len(panels) + 1)) / max(1, len(panels))
    body = []
    height = 0.0
    peak = max((v for panel in panels for row in panel["values"] for v in row if v is not None), default=0.0) or 1.0
    for k, panel in enumerate(panels):
        values = panel["values"]
        rows, cols = len(values), len(values[0])
        size = min((each - 30) / cols, 160 / rows)
        left = gap + k * (each + gap) + 30
        body.append(text(left - 30 + each / 2, 16, panel["label"], SMALL, anchor="middle"))
        body.extend(heat_grid(values, lambda v: heat_colour((v or 0.0) / peak), None, left, 26, size, panel["block"]))
        height = max(height, 26 + rows * size + 22)
    return svg("".join(body), fig["title"], fig["summary"], height) + legend(
        [
            (
                f'<rect x="7" y="1" width="12" height="12" fill="{heat_colour(1)}"/>',
                f"darkest: {peak:.0%} of the block's elements dropped (the most of any block); white: none",
            )
        ]
    )


DRAW = {
    "elements": draw_elements,
    "trajectory": draw_trajectory,
    "histogram": draw_histogram,
    "fit": draw_fit,
    "shapes": draw_shapes,
    "masks": draw_masks,
}

INSTRUCTOR_NOTE = (
    "Instructor's view of a hidden check: the expected values are drawn here; the student's picture leaves them out."
)


def clipped(value: Any, counts: dict[str, int]) -> Any:
    """``value`` (figure data) with each non-finite number made drawable, counted in ``counts`` by kind: inf and -inf
    clipped to the largest finite float of their sign (drawn at the plot's edge), NaN as None (drawn as NaN or inf
    where the kind marks missing values, else left out)."""
    if isinstance(value, float) and not math.isfinite(value):
        kind = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        counts[kind] = counts.get(kind, 0) + 1
        return None if kind == "NaN" else math.copysign(CLIP, value)
    if isinstance(value, dict):
        return {k: v if k == "public" else clipped(v, counts) for k, v in value.items()}
    if isinstance(value, list):
        return [clipped(v, counts) for v in value]
    return value


def clipped_note(counts: dict[str, int]) -> str:
    """One line under a picture that had non-finite numbers, e.g. "Not finite: 3 inf, 1 NaN (inf drawn at the edge,
    NaN left out or on the top edge)."; empty when there were none."""
    if not counts:
        return ""
    words = ", ".join(f"{counts[kind]} {kind}" for kind in ("inf", "-inf", "NaN") if kind in counts)
    how = [
        w
        for w, present in (
            ("inf drawn at the edge", "inf" in counts or "-inf" in counts),
            ("NaN left out or on the top edge", "NaN" in counts),
        )
        if present
    ]
    return f'<p class="ng-note">Not finite: {esc(words)} ({"; ".join(how)}).</p>'


def one_figure(figure: dict[str, Any], classes: str = "ng-figure", heading: str = "") -> str:
    draw = DRAW.get(str(figure.get("kind")))
    summary = esc(figure.get("summary", ""))
    counts: dict[str, int] = {}
    try:
        picture = draw(clipped(figure, counts)) if draw is not None else ""
    except (KeyError, IndexError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError):
        picture = '<p class="ng-note">(This picture could not be drawn from the report file.)</p>'
    which = f'<p class="ng-which">{esc(heading)}</p>' if heading else ""
    return (
        f'<figure class="{classes}">{which}{picture}{clipped_note(counts)}<figcaption>{summary}</figcaption></figure>'
    )


def figure_html(figure: dict[str, Any], instructor: bool = False) -> str:
    """The picture: one ``<figure>`` (the picture(s), a legend in words, the summary as caption), and beside it the
    public case's figure when there is one (``figure["public"]``).

    ``instructor``: the figure is a hidden check's full one (the dashboard), said so above it. An unknown kind
    (a newer grader's), or figure data that cannot be drawn (a report file edited by hand), shows the summary
    alone: a page never fails for one picture.
    """
    public = figure.get("public") if isinstance(figure.get("public"), dict) else None
    heading = INSTRUCTOR_NOTE if instructor else ("Hidden case (yours)" if public is not None else "")
    main = one_figure(figure, heading=heading)
    if public is None:
        return main
    return (
        f'<div class="ng-figures">{main}'
        f"{one_figure(public, 'ng-figure ng-public', 'Public case (your handout’s case pack)')}</div>"
    )
