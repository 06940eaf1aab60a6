"""The class report's HTML helpers (grader/term/class_report.py): charts as SVG geometry, the template filters
and the one jinja2 environment every page renders with."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

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


def histogram_chart(bins: list[Bin], width: float = 560, height: float = 240) -> Chart:
    """Vertical bars, one per percent band; bar height proportional to the number of students."""
    left, right, top, bottom = 36.0, 8.0, 18.0, 40.0
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max((b.count for b in bins), default=0) or 1
    step = plot_w / max(1, len(bins))
    bars = []
    for k, b in enumerate(bins):
        h = plot_h * b.count / most
        high = "100" if k == len(bins) - 1 else f"{b.high:g}"
        bars.append(
            Bar(
                x=left + k * step + 2,
                y=top + plot_h - h,
                width=step - 4,
                height=h,
                label=f"{b.low:g}-{high}",
                value=str(b.count),
                title=f"{b.count} student{'s' if b.count != 1 else ''} with {b.low:g}% to {high}%",
            )
        )
    ticks = [(top + plot_h - plot_h * v / most, str(v)) for v in sorted({0, most // 2, most})]
    return Chart(width, height, bars, ticks, baseline=top + plot_h, label_x=left)


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
