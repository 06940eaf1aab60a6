"""The class report's and the dashboard's HTML helpers: charts as SVG geometry (bars per band, the dashboard's
lines over time and their time axis), the template filters and the one jinja2 environment every page renders
with (grader/term/class_report.py, grader/server/dashboard.py)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import jinja2


from grader.student.course import parse_time
from grader.student.standing import format_time
from grader.student.feedback.report import format_score, status_style
from grader.term.class_model import Bin, ExerciseStats

# --- HTML: charts as SVG geometry, then the template --------------------------------------------


@dataclass
class Bar:
    """One bar of an SVG chart, in pixels, with its labels."""

    x: float
    y: float
    width: float
    height: float
    label: str
    value: str
    title: str = ""


@dataclass
class Chart:
    """An SVG chart: its size, its bars, and axis ticks (position, text)."""

    width: float
    height: float
    bars: list[Bar]
    ticks: list[tuple[float, str]] = field(default_factory=list)
    baseline: float = 0.0
    label_x: float = 0.0


def column_chart(columns: list[tuple[int, str, str]], width: float, height: float, bottom: float) -> Chart:
    """Vertical bars side by side, one per (count, label, title): each bar's height is its count over the largest
    count (the tallest fills the plot); ticks at 0, half the largest and the largest. ``bottom``: the room left
    under the plot for the labels."""
    left, right, top = 36.0, 8.0, 18.0
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max((count for count, _, _ in columns), default=0) or 1
    step = plot_w / max(1, len(columns))
    bars = []
    for k, (count, label, title) in enumerate(columns):
        h = plot_h * count / most
        bars.append(
            Bar(
                x=left + k * step + 2,
                y=top + plot_h - h,
                width=step - 4,
                height=h,
                label=label,
                value=str(count),
                title=title,
            )
        )
    ticks = [(top + plot_h - plot_h * v / most, str(v)) for v in sorted({0, most // 2, most})]
    return Chart(width, height, bars, ticks, baseline=top + plot_h, label_x=left)


def histogram_chart(bins: list[Bin], width: float = 560, height: float = 240) -> Chart:
    """Vertical bars, one per percent band; bar height proportional to the number of students."""
    columns = []
    for k, b in enumerate(bins):
        high = "100" if k == len(bins) - 1 else f"{b.high:g}"
        title = f"{b.count} student{'s' if b.count != 1 else ''} with {b.low:g}% to {high}%"
        columns.append((b.count, f"{b.low:g}-{high}", title))
    return column_chart(columns, width, height, bottom=40.0)


def distribution_chart(fractions: list[float], width: float = 560, height: float = 200) -> Chart:
    """Students per tenth of the max score (the last bar: full marks)."""
    counts = [0] * 11
    for f in fractions:
        counts[min(10, max(0, int(math.floor(f * 10 + 1e-9))))] += 1
    columns = []
    for k, count in enumerate(counts):
        what = "at full marks" if k == 10 else f"with {10 * k}% to {10 * k + 10}%"
        title = f"{count} student{'s' if count != 1 else ''} {what}"
        columns.append((count, "100%" if k == 10 else f"{10 * k}%", title))
    return column_chart(columns, width, height, bottom=34.0)


def pass_rate_chart(stats: list[ExerciseStats], width: float = 560) -> Chart:
    """Horizontal bars, one per exercise: the fraction of students at full marks."""
    label_w, value_w, row, top = 190.0, 48.0, 18.0, 6.0
    plot_w = width - label_w - value_w
    bars = [
        Bar(
            x=label_w,
            y=top + k * row,
            width=plot_w * s.pass_rate,
            height=row - 4,
            label=s.id,
            value=f"{100 * s.pass_rate:.0f}%",
            title=f"{s.id}: {s.passed} of {s.students} students at full marks",
        )
        for k, s in enumerate(stats)
    ]
    height = top * 2 + row * len(stats)
    ticks = [(label_w + plot_w * f, f"{100 * f:.0f}%") for f in (0.0, 0.5, 1.0)]
    return Chart(width, height, bars, ticks, baseline=label_w + plot_w, label_x=label_w)


@dataclass
class LineChart:
    """An SVG line over time: its size, its points (x, y, tooltip), and axis ticks (position, text; the time
    axis's also their anchor: start, middle or end, so that no label leaves the picture)."""

    width: float
    height: float
    points: list[tuple[float, float, str]]
    x_ticks: list[tuple[float, str, str]]
    y_ticks: list[tuple[float, str]]
    left: float
    bottom: float
    label: str

    @property
    def path(self) -> str:
        """The polyline's points attribute, as a step line (each value holds until the next)."""
        out: list[str] = []
        for k, (x, y, _) in enumerate(self.points):
            if k:
                out.append(f"{x:.1f},{self.points[k - 1][1]:.1f}")
            out.append(f"{x:.1f},{y:.1f}")
        return " ".join(out)


def line_chart(
    series: list[tuple[datetime, float, str]],
    y_max: float,
    y_format: str,
    label: str,
    end: datetime | None = None,
    width: float = 560,
    height: float = 200,
) -> LineChart:
    """A step line of (time, value, tooltip) from the first time to ``end`` (default: the last)."""
    left, right, top, bottom = 44.0, 12.0, 10.0, 30.0
    plot_w, plot_h = width - left - right, height - top - bottom
    y_max = y_max or 1.0
    if not series:
        return LineChart(width, height, [], [], [], left, top + plot_h, label)
    start = series[0][0]
    stop = max(end or series[-1][0], series[-1][0])
    span = max((stop - start).total_seconds(), 1.0)

    def x_of(t: datetime) -> float:
        return left + plot_w * (t - start).total_seconds() / span

    def y_of(v: float) -> float:
        return top + plot_h - plot_h * min(max(v / y_max, 0.0), 1.0)

    points = [(x_of(t), y_of(v), tip) for t, v, tip in series]
    if end is not None and end > series[-1][0]:
        points.append((x_of(end), points[-1][1], ""))
    x_ticks = []
    for when, text in time_ticks(start, stop):
        x = x_of(when)
        half = 3.6 * len(text)  # about half the label's width at 12 px
        anchor = "start" if x - half < 2 else "end" if x + half > width - 2 else "middle"
        x_ticks.append((x, text, anchor))
    y_ticks = [(y_of(y_max * f), y_format.format(y_max * f)) for f in (0, 0.5, 1)]
    return LineChart(width, height, points, x_ticks, y_ticks, left, top + plot_h, label + " (times in UTC)")


# Tick spacings of a time axis, the shortest first: minutes, hours, days, weeks, months.
TICK_STEPS = (
    [timedelta(minutes=m) for m in (1, 2, 5, 10, 15, 30)]
    + [timedelta(hours=h) for h in (1, 2, 3, 6, 12)]
    + [timedelta(days=d) for d in (1, 2, 7, 14, 28, 56, 91)]
)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def time_ticks(start: datetime, stop: datetime, most: int = 4) -> list[tuple[datetime, str]]:
    """Round times from ``start`` to ``stop``, at most ``most`` + 1, and their labels.

    The spacing is the shortest of TICK_STEPS that gives no more than ``most`` + 1
    round times. Under a day apart, ticks say the time of day ("14:30"), with the
    date ("Dec 02 14:30") on the first and wherever the day changes; a day or
    more apart, the date alone. Times are UTC, as stored. With fewer than two
    round times in the span, its two ends are the ticks.
    """
    if start.tzinfo is None:
        start, stop = start.replace(tzinfo=timezone.utc), stop.replace(tzinfo=timezone.utc)
    span = stop - start

    def multiples(step: timedelta) -> range:
        """k with start <= EPOCH + k * step <= stop."""
        return range(math.ceil((start - EPOCH) / step), math.floor((stop - EPOCH) / step) + 1)

    step = next((s for s in TICK_STEPS if len(multiples(s)) <= most + 1), TICK_STEPS[-1])
    times = [EPOCH + step * k for k in multiples(step)]
    if len(times) < 2:
        times = [start, stop] if stop > start else [start]
    fine = step < timedelta(days=1) or span < timedelta(days=1)
    clock = "%H:%M:%S" if span < timedelta(minutes=2) else "%H:%M"  # seconds apart: the seconds tell them apart
    ticks: list[tuple[datetime, str]] = []
    day = None
    for when in times:
        if not fine:
            label = when.strftime("%b %d")
        elif when.date() != day:
            label = when.strftime(f"%b %d {clock}")
        else:
            label = when.strftime(clock)
        day = when.date()
        if not ticks or label != ticks[-1][1]:
            ticks.append((when, label))
    return ticks


def band(fraction: float | None) -> str:
    """The grid's colour class of a score: none (never scored), zero, low (< 50 %), part, full."""
    if fraction is None:
        return "none"
    if fraction >= 1 - 1e-9:
        return "full"
    if fraction <= 0:
        return "zero"
    return "low" if fraction < 0.5 else "part"


def _when(value: str | None) -> str:
    """An ISO time as every view shows one (grader/student/standing.py: ``YYYY-MM-DD HH:MM UTC``); "never" when
    there is none."""
    if not value:
        return "never"
    try:
        return format_time(parse_time(value))
    except ValueError:
        return value[:16].replace("T", " ")


def _day(value: str | None) -> str:
    """An ISO time's date; "never" when there is none."""
    return value[:10] if value else "never"


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one jinja2 environment over ``grader/templates``, every template autoescaped whatever its name (the
    ``.css.j2``/``.js.j2`` ones are included in pages and hold no variables); undefined names are errors. The
    server's pages (``Jinja2Templates(env=environment())`` in pages.py and lti/web.py), the dashboard, the student's
    pages and the offline class report all render with it; made once per process, so each template is compiled
    once."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = format_score
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.0f}%"
    env.filters["when"] = _when
    env.filters["day"] = _day
    env.globals["band"] = band
    env.globals["status_label"] = status_label
    return env


def status_label(status: str | None) -> str:
    """The report label of a status (PASS, FAIL, TODO, ERROR, TIMEOUT); '-' when never graded."""
    return status_style(status)[0]
