"""The SVG primitives every figure kind is drawn with (``grader.student.feedback.drawing``), by hand.

The picture's geometry (a ``WIDTH`` x ``HEIGHT`` view box, margins for tick labels) and palette (Okabe-Ito:
readable with colour-blindness); escaping and number labels; a label moved sideways to stay inside the picture;
round tick values; labels that keep apart (``spaced``); the plotting ``Frame`` (data to SVG coordinates, axes
and tick labels); an accessible ``<svg>`` (role img, a ``<title>`` and a ``<desc>``); markers that differ by
shape, not colour alone (round: a value, cross: a differing one, hollow square: expected, diamond: a
statistic); lines; a legend in words; series names in a right gutter, moved apart so that none covers another.

Pure Python (no NumPy): the HTML report, the notebook and the dashboard draw from the JSON form of a report.
"""

from __future__ import annotations

import hashlib
import html
import math
from typing import Any

WIDTH, HEIGHT = 460, 250
LEFT, RIGHT, TOP, BOTTOM = 66, 14, 26, 42
FONT = 13
SMALL = 12
CHAR = 0.62  # a character's width, as a share of the font size (an estimate on the safe side)
RECEIVED = "#0072B2"  # blue
EXPECTED = "#444444"  # dark grey
DIFFERS = "#D55E00"  # vermillion
BOUND = "#007A5A"  # bluish green, darkened for text contrast
INK = "#1d232b"  # text
SERIES = ("#0072B2", "#CC79A7", "#B8860B", "#56B4E9")
CLIP = 1.7976931348623157e308  # the largest finite float: where inf is drawn (clipped)


def content_id(*parts: str) -> str:
    """An id for SVG elements derived from what they show: the same page is the same bytes every time."""
    return hashlib.sha1("\0".join(parts).encode("utf-8")).hexdigest()[:12]


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def num(value: float | None) -> str:
    if value is None:
        return "nan/inf"
    return f"{value:.4g}"


def tick(value: float) -> str:
    """A tick label, at most 6 characters: 20000 -> '2e4', 0.000125 -> '1.25e-4', 0.35 -> '0.35'."""
    words = f"{value:.3g}"
    if "e" in words:
        mantissa, exponent = words.split("e")
        words = f"{mantissa}e{int(exponent)}"
    return words


def text_width(text: str, size: float = FONT) -> float:
    """About how wide ``text`` is at ``size`` (view-box units; on the wide side)."""
    return len(text) * size * CHAR


def text(
    x: float,
    y: float,
    words: str,
    size: float = FONT,
    anchor: str = "start",
    fill: str = "",
    width: float = WIDTH,
    extra: str = "",
) -> str:
    """A label at (x, y), moved sideways so that it stays inside [0, width] of the picture."""
    w = text_width(words, size)
    left = x - (w if anchor == "end" else w / 2 if anchor == "middle" else 0.0)
    shift = max(0.0, 1.0 - left) - max(0.0, left + w - (width - 1.0))
    colour = f' fill="{fill}"' if fill else ""
    return (
        f'<text x="{x + shift:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{colour}{extra}>'
        f"{esc(words)}</text>"
    )


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = hi / count - lo / count  # (no overflow for values near the largest float)
    mag = 10.0 ** math.floor(math.log10(raw)) if raw > 0 else 0.0
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), 0.0)
    if not 0 < step < math.inf:
        return [lo]
    first = math.ceil(lo / step) * step
    ticks: list[float] = []
    for k in range(2 * count + 2):  # bounded: a step below the values' precision never ends a `t += step` loop
        t = first + k * step
        if t > hi + step * 1e-9:
            break
        t = 0.0 if abs(t) < step * 1e-9 else t
        if not ticks or t != ticks[-1]:
            ticks.append(t)
    return ticks or [lo]


def spaced(positions: list[tuple[float, str]], size: float, gap: float = 6.0) -> list[tuple[float, str]]:
    """Of labels centred at x, those that do not overlap the ones kept before them (left to right)."""
    kept: list[tuple[float, str]] = []
    right = -math.inf
    for x, words in sorted(positions):
        half = text_width(words, size) / 2
        if x - half >= right + gap:
            kept.append((x, words))
            right = x + half
    return kept


class Frame:
    """A plotting area mapping data (x, y) to SVG coordinates, with axes and tick labels."""

    def __init__(
        self,
        xlo: float,
        xhi: float,
        ylo: float,
        yhi: float,
        height: int = HEIGHT,
        right: float = RIGHT,
        top: float = TOP,
    ) -> None:
        if xhi <= xlo:
            xlo, xhi = xlo - 0.5, xhi + 0.5
        if yhi <= ylo:
            pad = abs(ylo) * 0.1 or 0.5
            ylo, yhi = max(-CLIP, ylo - pad), min(CLIP, yhi + pad)
        else:
            pad = (yhi / 2 - ylo / 2) * 0.12  # halves: no overflow for values near the largest float
            ylo, yhi = max(-CLIP, ylo - pad), min(CLIP, yhi + pad)
        self.xlo, self.xhi, self.ylo, self.yhi, self.height = xlo, xhi, ylo, yhi, height
        self.right_edge = WIDTH - right
        self.top = top

    @property
    def bottom(self) -> float:
        return self.height - BOTTOM

    def x(self, v: float) -> float:
        return LEFT + (v - self.xlo) / (self.xhi - self.xlo) * (self.right_edge - LEFT)

    def y(self, v: float) -> float:
        return self.bottom - (v / 2 - self.ylo / 2) / (self.yhi / 2 - self.ylo / 2) * (self.bottom - self.top)

    def axes(self, xlabel: str, ylabel: str, xticks: list[float] | None = None, ytick_text: Any = None) -> str:
        parts = [
            f'<rect x="{LEFT}" y="{self.top}" width="{self.right_edge - LEFT:.1f}"'
            f' height="{self.bottom - self.top:.1f}" fill="none" stroke="#bbb"/>'
        ]
        ticks = nice_ticks(self.ylo, self.yhi)
        last_y = math.inf
        for t in ticks:
            y = self.y(t)
            parts.append(f'<line x1="{LEFT - 4}" x2="{self.right_edge:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
            if last_y - y >= SMALL + 2:  # a tick label only where it has room
                label = ytick_text(t) if ytick_text else tick(t)
                parts.append(text(LEFT - 6, y + 4, label, SMALL, anchor="end"))
                last_y = y
        xs = xticks if xticks is not None else nice_ticks(self.xlo, self.xhi, 5)
        for x, label in spaced([(self.x(t), tick(t)) for t in xs], SMALL):
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.bottom}" y2="{self.bottom + 4}"'
                f' stroke="#888"/>' + text(x, self.bottom + 17, label, SMALL, anchor="middle")
            )
        parts.append(text((LEFT + self.right_edge) / 2, self.height - 6, xlabel, anchor="middle"))
        mid = (self.top + self.bottom) / 2
        parts.append(
            f'<text x="14" y="{mid:.1f}" font-size="{SMALL}" text-anchor="middle"'
            f' transform="rotate(-90 14 {mid:.1f})">{esc(clip(ylabel, (self.bottom - self.top) / (SMALL * CHAR)))}'
            "</text>"
        )
        return "".join(parts)


def clip(words: str, chars: float) -> str:
    """``words`` cut to ``chars`` characters with an ellipsis (a vertical axis label in a short plot)."""
    n = max(4, int(chars))
    return words if len(words) <= n else words[: n - 1] + "…"


def svg(body: str, title: str, desc: str, height: float = HEIGHT) -> str:
    """An accessible SVG: role img, labelled by its title and described by ``desc``."""
    n = content_id(body, title, desc)
    return (
        f'<svg viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-labelledby="ng-t{n} ng-d{n}"'
        f' xmlns="http://www.w3.org/2000/svg"><title id="ng-t{n}">{esc(title)}</title>'
        f'<desc id="ng-d{n}">{esc(desc)}</desc>{body}</svg>'
    )


def marker(kind: str, x: float, y: float, colour: str, size: float = 4.0) -> str:
    """circle (a value), cross (a differing value), square (hollow: expected), diamond (a statistic)."""
    if kind == "circle":
        return f'<circle class="ng-data" cx="{x:.1f}" cy="{y:.1f}" r="{size * 0.75:.1f}" fill="{colour}"/>'
    if kind == "cross":
        s = size
        return (
            f'<path class="ng-data" d="M{x - s:.1f} {y - s:.1f}L{x + s:.1f} {y + s:.1f}M{x - s:.1f} {y + s:.1f}'
            f'L{x + s:.1f} {y - s:.1f}" stroke="{colour}" stroke-width="2.2"/>'
        )
    if kind == "square":
        s = size * 0.8
        return (
            f'<rect class="ng-data" x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}"'
            f' fill="none" stroke="{colour}" stroke-width="1.3"/>'
        )
    s = size * 1.3
    return (
        f'<path class="ng-data" d="M{x:.1f} {y - s:.1f}L{x + s:.1f} {y:.1f}L{x:.1f} {y + s:.1f}L{x - s:.1f}'
        f' {y:.1f}Z" fill="{colour}"/>'
    )


def polyline(
    points: list[tuple[float, float]], colour: str, dashed: bool = False, width: float = 1.6, cls: str = "ng-data"
) -> str:
    if len(points) < 2:
        return ""
    d = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return f'<polyline class="{cls}" points="{d}" fill="none" stroke="{colour}" stroke-width="{width}"{dash}/>'


def legend(items: list[tuple[str, str]]) -> str:
    """A legend in words: (symbol svg body, text) pairs."""
    lis = "".join(
        f'<li><svg viewBox="0 0 28 14" aria-hidden="true">{sym}</svg>{esc(words)}</li>' for sym, words in items
    )
    return f'<ul class="ng-legend">{lis}</ul>'


def line_symbol(colour: str, dashed: bool, mark: str | None) -> str:
    body = polyline([(1, 7), (27, 7)], colour, dashed, cls="ng-sym")
    return body + (marker(mark, 14, 7, colour) if mark else "")


def finite(values: list[float | None] | None) -> list[float]:
    return [v for v in values or [] if v is not None]


def gutter_labels(ends: list[tuple[float, str, str]], x: float, height: float) -> str:
    """Series names in the right gutter, each at the height its line ends when there is room, moved apart so that
    none covers another and all stay inside the picture (a thin leader joins a moved name to its line's end)."""
    step = SMALL + 3
    order = sorted(range(len(ends)), key=lambda i: ends[i][0])
    ys = [0.0] * len(ends)
    previous = -math.inf
    for i in order:  # downwards: each below the one before
        ys[i] = max(ends[i][0] + 4, previous + step)
        previous = ys[i]
    floor = height - 4
    for i in reversed(order):  # upwards: none below the picture's foot
        ys[i] = min(ys[i], floor)
        floor = ys[i] - step
    ceiling: float = SMALL + 2 - step
    for i in order:  # and none above its top
        ys[i] = max(ys[i], ceiling + step)
        ceiling = ys[i]
    parts = []
    for (y_end, label, colour), y in zip(
        ends, ys, strict=False
    ):  # the name in ink (readable), its leader in the line's colour
        parts.append(
            f'<line class="ng-leader" x1="{x - 10:.1f}" y1="{y_end:.1f}" x2="{x - 2:.1f}" y2="{y - 4:.1f}"'
            f' stroke="{colour}" stroke-width="{1.6 if abs(y - (y_end + 4)) <= 1 else 0.9}"/>'
        )
        parts.append(text(x, y, label, SMALL, fill=INK))
    return "".join(parts)


def gutter_width(labels: list[str]) -> float:
    """Room at the right of a plot for its series names."""
    return min(150.0, max((text_width(s, SMALL) for s in labels), default=0.0) + 18.0)
