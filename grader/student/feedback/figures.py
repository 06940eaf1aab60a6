"""What a picture of a failing check needs, kept small: the data of ``CheckResult.figure``.

A check that fails records a *figure*: a plain JSON-safe dict, bounded in size
(at most :data:`MAX_POINTS` elements, a :data:`MAX_CELLS` x :data:`MAX_CELLS`
heat map, :data:`MAX_BINS` histogram bins), from which every front end (the
HTML report, the notebook, the dashboard) draws the same picture with
``grader.student.feedback.drawing``. Each figure carries ``kind``, ``title`` and
``summary`` (one or two sentences that say what the picture shows: its text
alternative). Kinds:

- ``elements``: received vs expected per element (a sample in flat order, the
  differing ones marked), for 2-D outputs a heat map of the error by block,
  and for every output of 2 or more axes the fraction of differing values per
  index of each axis (``axes``), with the axis the error follows, if one does;
- ``trajectory``: values after each step (running statistics, an optimiser's
  parameters) received against expected, a few components;
- ``histogram``: the student's samples over the expected density, with the
  distribution's bound and the judged statistic against its allowed interval;
- ``fit``: an approximation's curve over its target, with the worst point.

**Hidden checks** (``hidden=True``: expected values computed by the
instructor's reference, live) keep nothing of the expected values beyond what
the check's message already states (the first differing pair): no expected
array, no error magnitudes, only the student's own values and *where* they
differ (a heat map and axis summary of the fraction of differing values).
Statistical figures hold the student's samples and the bounds the message
states (which follow from the exercise's formula, not from a reference run),
so they are the same hidden or not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grader.student.engine.compare import scale_of

MAX_POINTS = 240     # elements (or steps x components) kept of one output
MAX_DIFFERING = 60   # of which up to this many are differing ones, so the sample shows them
MAX_CELLS = 24       # a heat map has at most MAX_CELLS x MAX_CELLS blocks
MAX_AXIS = 48        # per-axis summaries keep at most this many indices (blocks of indices beyond)
MAX_BINS = 40
MAX_SERIES = 4       # components drawn in a trajectory
FIT_POINTS = 201
FOLLOWS_SPREAD = 0.5  # an axis "carries" the error when its per-index fractions differ by at least this


def number(value: Any) -> float | None:
    """A float with 7 significant digits for the figure, None for NaN or inf (JSON has neither)."""
    v = float(value)
    if not math.isfinite(v):
        return None
    return float(f"{v:.7g}")


def numbers(values: Any) -> list[float | None]:
    return [number(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def differing(received: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """The mask of elements outside ``atol + rtol * |expected|`` (compare.compare's rule; NaN matches NaN)."""
    r = np.asarray(received, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = (np.abs(r - e) <= atol + rtol * np.abs(e)) | (np.isnan(r) & np.isnan(e)) | (r == e)
    return ~close


def sample_indices(mask: np.ndarray) -> np.ndarray:
    """Up to MAX_POINTS flat indices: every one when the array is small, else an even stride plus differing ones."""
    size = mask.size
    if size <= MAX_POINTS:
        return np.arange(size)
    bad = np.flatnonzero(mask.ravel())[:MAX_DIFFERING]
    stride = np.linspace(0, size - 1, MAX_POINTS - bad.size).round().astype(np.int64)
    return np.unique(np.concatenate([stride, bad]))


def block_reduce(values: np.ndarray, reduce: str) -> tuple[np.ndarray, tuple[int, int]]:
    """A 2-D array cut into at most MAX_CELLS x MAX_CELLS blocks, each reduced by max or mean; (blocks, block size).

    The array is padded with NaN to whole blocks, so edge blocks reduce over their real values only.
    """
    rows, cols = values.shape
    br, bc = max(1, math.ceil(rows / MAX_CELLS)), max(1, math.ceil(cols / MAX_CELLS))
    n_r, n_c = math.ceil(rows / br), math.ceil(cols / bc)
    padded = np.full((n_r * br, n_c * bc), np.nan)
    padded[:rows, :cols] = values
    blocks = padded.reshape(n_r, br, n_c, bc)
    out = np.nanmax(blocks, axis=(1, 3)) if reduce == "max" else np.nanmean(blocks, axis=(1, 3))
    return out, (br, bc)


def axis_summary(mask: np.ndarray, error: np.ndarray | None = None) -> list[dict[str, Any]]:
    """For each axis, the fraction of differing values at each index (and, given ``error``, the mean |error| there).

    Beyond MAX_AXIS indices, consecutive indices form blocks of ``step`` and a
    block shows its most affected index (the largest value), so one wrong
    channel among hundreds still stands out. ``error`` (public checks only:
    it is computed from the expected values) shows which indices carry the
    error when every value differs.
    """
    axes = []
    for axis in range(mask.ndim):
        other = tuple(a for a in range(mask.ndim) if a != axis)
        per_index = mask.mean(axis=other) if other else mask.astype(np.float64)
        size = per_index.size
        step = max(1, math.ceil(size / MAX_AXIS))
        fractions = [float(per_index[i:i + step].max()) for i in range(0, size, step)]
        summary: dict[str, Any] = {"axis": axis, "size": int(size), "step": step,
                                   "fraction": [round(f, 4) for f in fractions]}
        if error is not None:
            mean_error = error.mean(axis=other) if other else error
            summary["error"] = [float(f"{float(mean_error[i:i + step].max()):.3g}") for i in range(0, size, step)]
        axes.append(summary)
    return axes


def error_follows(axes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The axis along which the error is concentrated (some indices nearly all wrong, others nearly all right).

    The axis whose per-index fraction of differing values spreads the most,
    when that spread is at least FOLLOWS_SPREAD; with it the indices most
    affected (fraction > 0.5). None when the error is spread evenly.
    """
    best = max(axes, key=lambda a: max(a["fraction"]) - min(a["fraction"]), default=None)
    if best is None or best["size"] < 2:
        return None
    spread = max(best["fraction"]) - min(best["fraction"])
    if spread < FOLLOWS_SPREAD:
        return None
    wrong = [i * best["step"] for i, f in enumerate(best["fraction"]) if f > 0.5]
    return {"axis": best["axis"], "indices": wrong[:12], "more": max(0, len(wrong) - 12), "step": best["step"]}


def finite_error(received: np.ndarray, expected: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """|received - expected|, finite: a differing NaN or inf counts as the largest finite error (or 1), a matching
    one (NaN where NaN was expected) as 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(received - expected)
    bad = ~np.isfinite(err)
    if not bad.any():
        return err
    finite = err[~bad]
    worst = float(finite.max()) if finite.size else 1.0
    return np.where(bad, np.where(mask, worst, 0.0), err)


def index_text(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def elements_figure(
    received: Any, expected: Any, rtol: float, atol: float, *, title: str, key: str, hidden: bool
) -> dict[str, Any] | None:
    """Received vs expected element by element (same shape only; None otherwise).

    Hidden: ``expected`` and the error heat map's magnitudes are left out;
    the first differing pair (which the message states) stays.
    """
    r = np.asarray(received, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if r.shape != e.shape or r.size == 0:
        return None
    mask = differing(r, e, rtol, atol)
    flat_mask = mask.ravel()
    count = int(flat_mask.sum())
    if count == 0:
        return None
    idx = sample_indices(mask)
    first = int(np.flatnonzero(flat_mask)[0])
    figure: dict[str, Any] = {
        "kind": "elements",
        "title": title,
        "key": key,
        "shape": list(r.shape),
        "size": int(r.size),
        "count_differing": count,
        "hidden": hidden,
        "index": [int(i) for i in idx],
        "received": numbers(r.ravel()[idx]),
        "expected": None if hidden else numbers(e.ravel()[idx]),
        "differs": [bool(b) for b in flat_mask[idx]],
        "first": {"index": index_text(first, r.shape), "received": number(r.ravel()[first]),
                  "expected": number(e.ravel()[first])},
    }
    if r.ndim >= 2:
        figure["axes"] = axis_summary(mask, None if hidden else finite_error(r, e, mask))
        figure["follows"] = error_follows(figure["axes"])
    if r.ndim == 2:
        if hidden:
            cells, block = block_reduce(mask.astype(np.float64), "mean")
            measure = "fraction differing"
        else:
            cells, block = block_reduce(finite_error(r, e, mask), "max")
            measure = "largest absolute error"
        marked, _ = block_reduce(mask.astype(np.float64), "max")
        figure["heat"] = {"measure": measure, "block": list(block),
                          "values": [[float(f"{v:.3g}") for v in row] for row in cells],  # a colour: 3 digits
                          "differs": [[int(v > 0) for v in row] for row in marked]}
    figure["summary"] = elements_summary(figure)
    return figure


def elements_summary(figure: dict[str, Any]) -> str:
    """The text alternative of an elements figure."""
    first = figure["first"]
    where = f" at index {tuple(first['index'])}" if first["index"] else ""
    text = (f"{figure['key']}: {figure['count_differing']} of {figure['size']} values differ from the expected ones;"
            f" the first{where} is {fmt(first['received'])} where {fmt(first['expected'])} was expected.")
    follows = figure.get("follows")
    if follows is not None:
        listed = ", ".join(str(i) for i in follows["indices"]) + (f" and {follows['more']} more" if follows["more"] else "")
        where = "indices" if follows["step"] == 1 else f"the blocks of {follows['step']} indices starting at"
        text += f" The error follows axis {follows['axis']}: it is concentrated at {where} {listed} of that axis."
    elif figure.get("axes"):
        text += " The error is spread over every axis rather than following one."
    if figure["hidden"]:
        text += " (Hidden check: only your values and where they differ are shown.)"
    return text


def fmt(value: float | None) -> str:
    return "nan or inf" if value is None else f"{value:.6g}"


STEP_SUFFIX = "_"


def step_series(keys: list[str]) -> dict[str, list[str]] | None:
    """Keys named <name>_<step> grouped by name in step order ({"W": ["W_1", "W_2"], ...}), or None."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for key in keys:
        name, _, step = key.rpartition(STEP_SUFFIX)
        if not name or not step.isdigit():
            return None
        groups.setdefault(name, []).append((int(step), key))
    if not groups or all(len(v) < 2 for v in groups.values()):
        return None
    return {name: [k for _, k in sorted(v)] for name, v in groups.items()}


def trajectory_figure(
    received: dict[str, Any], expected: dict[str, Any], keys: list[str], rtol: float, atol: float, *,
    title: str, hidden: bool,
) -> dict[str, Any] | None:
    """Values after each step, received vs expected, for the series whose first differing step comes first.

    ``keys`` are <name>_<step> outputs; components drawn: the first differing
    one and the first few others (MAX_SERIES). None when the keys are not steps
    or shapes differ. ``atol`` is scaled by each step's expected values, as
    ``Compare`` does.
    """
    groups = step_series(keys)
    if groups is None:
        return None
    chosen: tuple[int, str, int] | None = None  # (first differing step, series name, component)
    for name, series_keys in groups.items():
        for step, key in enumerate(series_keys):
            r, e = received.get(key), expected.get(key)
            if r is None or e is None or np.shape(r) != np.shape(e):
                return None
            mask = differing(r, e, rtol, atol * scale_of(e)).ravel()
            if mask.any():
                if chosen is None or step < chosen[0]:
                    chosen = (step, name, int(np.flatnonzero(mask)[0]))
                break
    if chosen is None:
        return None
    _, name, component = chosen
    series_keys = groups[name]
    width = int(np.asarray(received[series_keys[0]]).size)
    components = [component] + [c for c in range(width) if c != component][: MAX_SERIES - 1]
    shape = np.shape(received[series_keys[0]])
    series = []
    for c in components:
        rs = [np.asarray(received[k], dtype=np.float64).ravel()[c] for k in series_keys]
        es = [np.asarray(expected[k], dtype=np.float64).ravel()[c] for k in series_keys]
        scales = [scale_of(expected[k]) for k in series_keys]
        marks = [bool(differing(np.array(a), np.array(b), rtol, atol * sc)) for a, b, sc in zip(rs, es, scales)]
        label = f"{name}[{', '.join(str(i) for i in index_text(c, shape))}]" if shape else name
        series.append({"label": label, "received": numbers(rs), "expected": None if hidden else numbers(es),
                       "differs": marks})
    first_step = next(i for i, d in enumerate(series[0]["differs"]) if d)
    figure = {
        "kind": "trajectory",
        "title": title,
        "steps": list(range(1, len(series_keys) + 1)),
        "series": series,
        "hidden": hidden,
        "first": {"step": first_step + 1, "label": series[0]["label"], "received": series[0]["received"][first_step],
                  "expected": number(component_at(expected[series_keys[first_step]], component))},
    }
    figure["summary"] = (
        f"{series[0]['label']} after each of {len(series_keys)} steps: yours first leaves the expected trajectory"
        f" at step {first_step + 1} ({fmt(figure['first']['received'])} where {fmt(figure['first']['expected'])}"
        f" was expected); {sum(series[0]['differs'])} of {len(series_keys)} steps differ."
        + (" (Hidden check: only your trajectory and the steps where it differs are shown.)" if hidden else "")
    )
    return figure


def component_at(value: Any, component: int) -> float:
    """Element ``component`` of an array in flat order."""
    return float(np.asarray(value, dtype=np.float64).ravel()[component])


def histogram_figure(
    samples: Any, *, title: str, density: dict[str, Any] | None, bounds: list[float] | None = None,
    statistic: dict[str, Any] | None = None, summary: str = "", value_label: str = "value",
) -> dict[str, Any]:
    """A histogram of the student's samples (MAX_BINS bins) over the expected density.

    ``density``: {"kind": "normal" | "uniform", "mean", "std"}: the distribution
    the samples should follow (drawn as counts per bin: n * binwidth * pdf).
    ``bounds``: values a correct sample never leaves (a uniform's [-a, a]).
    ``statistic``: {"name", "value", "expected", "low", "high"}: the judged
    statistic and its allowed interval (as the message states them).
    """
    w = np.asarray(samples, dtype=np.float64).ravel()
    w = w[np.isfinite(w)]
    lo, hi = (float(w.min()), float(w.max())) if w.size else (0.0, 1.0)
    if density is not None:
        mean, std = float(density["mean"]), float(density["std"])
        reach = math.sqrt(3.0) * std if density["kind"] == "uniform" else 4.0 * std
        lo, hi = min(lo, mean - reach), max(hi, mean + reach)
    for b in bounds or []:
        lo, hi = min(lo, b), max(hi, b)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.05 * (hi - lo)  # the bounds and the density's tails inside the picture, not on its frame
    lo, hi = lo - pad, hi + pad
    counts, edges = np.histogram(w, bins=MAX_BINS, range=(lo, hi))
    figure = {
        "kind": "histogram",
        "title": title,
        "value_label": value_label,
        "n": int(w.size),
        "edges": numbers(edges),
        "counts": [int(c) for c in counts],
        "density": None if density is None else {"kind": density["kind"], "mean": number(density["mean"]),
                                                 "std": number(density["std"])},
        "bounds": None if bounds is None else [number(b) for b in bounds],
        "statistic": None if statistic is None else {
            "name": str(statistic["name"]),
            **{k: number(statistic[k]) for k in ("value", "expected", "low", "high")},
        },
    }
    figure["summary"] = summary or histogram_summary(figure)
    return figure


def histogram_summary(figure: dict[str, Any]) -> str:
    text = f"Histogram of your {figure['n']} values"
    d = figure["density"]
    if d is not None:
        text += f" over the expected {d['kind']} density (mean {fmt(d['mean'])}, std {fmt(d['std'])})"
    text += "."
    s = figure["statistic"]
    if s is not None:
        inside = s["value"] is not None and s["low"] <= s["value"] <= s["high"]
        text += (f" {s['name']}: yours is {fmt(s['value'])}, expected {fmt(s['expected'])}, allowed"
                 f" [{fmt(s['low'])}, {fmt(s['high'])}]: {'inside' if inside else 'outside'} the interval.")
    return text


def fit_figure(
    x: Any, received: Any, target: Any, *, title: str, full_marks_error: float, hidden: bool = False
) -> dict[str, Any]:
    """An approximation's curve g(x) over the target f(x) on the grid, at most FIT_POINTS points, and the worst point.

    The target is a stated formula (sin(2 pi x), a bump), never a secret: the
    figure is the same for hidden checks.
    """
    xs = np.asarray(x, dtype=np.float64).ravel()
    ys = np.asarray(received, dtype=np.float64).ravel()
    ts = np.asarray(target, dtype=np.float64).ravel()
    with np.errstate(invalid="ignore"):
        diff = np.abs(ys - ts)
    worst = int(np.nanargmax(np.where(np.isfinite(diff), diff, np.inf))) if diff.size else 0
    step = max(1, math.ceil(xs.size / FIT_POINTS))
    keep = np.unique(np.append(np.arange(0, xs.size, step), [xs.size - 1, worst]))
    figure = {
        "kind": "fit",
        "title": title,
        "hidden": hidden,
        "x": numbers(xs[keep]),
        "received": numbers(ys[keep]),
        "target": numbers(ts[keep]),
        "worst": {"x": number(xs[worst]), "received": number(ys[worst]), "target": number(ts[worst]),
                  "error": number(diff[worst])},
        "full_marks_error": number(full_marks_error),
    }
    figure["summary"] = (
        f"Your g(x) (solid) over the target f(x) (dashed) on [{fmt(xs.min())}, {fmt(xs.max())}]: the largest"
        f" error is {fmt(figure['worst']['error'])} at x = {fmt(figure['worst']['x'])}; full marks below"
        f" {fmt(full_marks_error)}."
    )
    return figure
