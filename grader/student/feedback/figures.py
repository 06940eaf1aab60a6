"""What a picture of a failing check needs, kept small: the data of ``CheckResult.figure``.

A check that fails records a *figure*: a plain JSON-safe dict, bounded in size
(at most :data:`MAX_POINTS` elements, a :data:`MAX_CELLS` x :data:`MAX_CELLS`
heat map, :data:`MAX_BINS` histogram bins), from which every front end (the
HTML report, the notebook, the dashboard) draws the same picture with
``grader.student.feedback.drawing``. Each figure carries ``kind``, ``title`` and
``summary`` (one or two sentences that say what the picture shows: its text
alternative). Kinds:

- ``elements``: received vs expected per element (a sample in flat order, the
  differing ones marked, each with the power of ten of its relative error), for
  2-D outputs a heat map of the error by block, and for every output of 2 or
  more axes the fraction of differing values per index of each axis (``axes``),
  with the axis the error follows, if one does. The expected side is the
  reference's result, or the student's own (central differences of their
  forward, the input they were given: ``labels`` says which);
- ``trajectory``: values after each step (running statistics, an optimiser's
  parameters) received against expected, a few components, and per step the
  ratio of what each step adds (``x_t - carry * x_(t-1)``), yours over expected;
- ``histogram``: the student's samples over the expected density, with the
  distribution's bound and the judged statistic against its allowed interval;
- ``fit``: an approximation's curve over its target, with the worst point;
- ``shapes``: the shape (and dtype) received against the one asked for;
- ``masks``: which elements a random mask dropped, as heat maps side by side.

**Hidden checks.** A check builds the *full* figure; where its expected values
are the reference's results computed live (``from_reference`` and
``Expected.live``: Gradescope, the course server, ``grade batch``), the student
gets :func:`hidden_view` of it and the instructor the full one
(``CheckResult.instructor_figure``). The rule, per kind (docs/feedback.md):
a hidden figure holds the student's own values, *where* they differ, and
relations to the expected values only coarsely: the power of ten of each
relative error (an integer), and ratios to two significant digits. A student
can always print their own values, so what protects an expected value is this
coarseness: it leaves each one anywhere in a band at least 0.5% wide (a
ratio to two digits) or as wide as the error itself (a power of ten), five
thousand times the 1e-6 a check asks for. No expected array, no error
magnitude, no difference is kept; the first differing pair stays (the message
states it). Figures whose expected side is a formula (statistics, fit) or
the student's own data are the same hidden or not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grader.student.engine.compare import close_mask, scale_of

MAX_POINTS = 240  # elements (or steps x components) kept of one output
MAX_DIFFERING = 60  # of which up to this many are differing ones, so the sample shows them
MAX_CELLS = 24  # a heat map has at most MAX_CELLS x MAX_CELLS blocks
MAX_AXIS = 48  # per-axis summaries keep at most this many indices (blocks of indices beyond)
MAX_BINS = 40
MAX_SERIES = 4  # components drawn in a trajectory
MAX_MASK_CELLS = 20  # a mask panel has at most this many blocks per side
FIT_POINTS = 201
FOLLOWS_SPREAD = 0.5  # an axis "carries" the error when its per-index fractions differ by at least this
DECADE_LOW, DECADE_HIGH = -12, 3  # relative errors are shown as powers of ten within these
RATIO_DIGITS = 2  # hidden ratios keep this many significant digits
CONSTANT_WITHIN = 0.02  # ratios within 2% of each other read as "one constant factor"
LARGEST = 1e300  # a histogram's samples are clipped to [-LARGEST, LARGEST] (its range stays finite)
NARROWEST = 1e-9  # values closer than this times max(1, |lo|, |hi|) get a histogram range 1 wide (finite bins)

YOURS = "yours"
EXPECTED = "expected"


def number(value: Any) -> float | None:
    """A float with 7 significant digits for the figure, None for NaN or inf (JSON has neither)."""
    v = float(value)
    if not math.isfinite(v):
        return None
    return float(f"{v:.7g}")


def numbers(values: Any) -> list[float | None]:
    return [number(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def two_digits(value: float | None) -> float | None:
    """``value`` to RATIO_DIGITS significant digits (a hidden ratio): 0.8749 -> 0.87, 1.004 -> 1.0."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{RATIO_DIGITS}g}")


def differing(received: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """The mask of elements that differ by compare's rule (:func:`grader.student.engine.compare.close_mask`)."""
    return ~close_mask(received, expected, rtol, atol)


def sample_indices(mask: np.ndarray) -> np.ndarray:
    """Up to MAX_POINTS flat indices: every one when the array is small, else an even stride plus differing ones."""
    size = mask.size
    if size <= MAX_POINTS:
        return np.arange(size)
    bad = np.flatnonzero(mask.ravel())[:MAX_DIFFERING]
    stride = np.linspace(0, size - 1, MAX_POINTS - bad.size).round().astype(np.int64)
    return np.unique(np.concatenate([stride, bad]))


def block_reduce(values: np.ndarray, reduce: str, cells: int = MAX_CELLS) -> tuple[np.ndarray, tuple[int, int]]:
    """A 2-D array cut into at most ``cells`` x ``cells`` blocks, each reduced by max or mean; (blocks, block size).

    The array is padded with NaN to whole blocks, so edge blocks reduce over their real values only; a block
    of NaN alone reduces to NaN.
    """
    rows, cols = values.shape
    br, bc = max(1, math.ceil(rows / cells)), max(1, math.ceil(cols / cells))
    n_r, n_c = math.ceil(rows / br), math.ceil(cols / bc)
    padded = np.full((n_r * br, n_c * bc), np.nan)
    padded[:rows, :cols] = values
    blocks = padded.reshape(n_r, br, n_c, bc).transpose(0, 2, 1, 3).reshape(n_r, n_c, br * bc)
    out = np.full((n_r, n_c), np.nan)
    present = ~np.all(np.isnan(blocks), axis=2)
    if present.any():
        pick = blocks[present]
        out[present] = np.nanmax(pick, axis=1) if reduce == "max" else np.nanmean(pick, axis=1)
    return out, (br, bc)


def axis_summary(mask: np.ndarray, error: np.ndarray | None = None) -> list[dict[str, Any]]:
    """For each axis, the fraction of differing values at each index (and, given ``error``, the mean |error| there).

    Beyond MAX_AXIS indices, consecutive indices form blocks of ``step`` and a
    block shows its most affected index (the largest value), so one wrong
    channel among hundreds still stands out. ``error`` (computed from the
    expected values: left out of a hidden figure) shows which indices carry the
    error when every value differs.
    """
    axes = []
    for axis in range(mask.ndim):
        other = tuple(a for a in range(mask.ndim) if a != axis)
        per_index = mask.mean(axis=other) if other else mask.astype(np.float64)
        size = per_index.size
        step = max(1, math.ceil(size / MAX_AXIS))
        fractions = [float(per_index[i : i + step].max()) for i in range(0, size, step)]
        summary: dict[str, Any] = {
            "axis": axis,
            "size": int(size),
            "step": step,
            "fraction": [round(f, 4) for f in fractions],
        }
        if error is not None:
            with np.errstate(over="ignore"):  # a mean of errors near 1e308 is inf: stored and drawn as such
                mean_error = error.mean(axis=other) if other else error
            summary["error"] = [float(f"{float(mean_error[i : i + step].max()):.3g}") for i in range(0, size, step)]
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


def relative_decades(
    received: np.ndarray, expected: np.ndarray, mask: np.ndarray, rtol: float, atol: float
) -> np.ndarray:
    """Per element, k with 10^k <= relative error < 10^(k+1), as floats; NaN where the element does not differ.

    The relative error is |received - expected| / (|expected| + atol / rtol):
    the tolerance's own scale, so a differing value's k is at least
    log10(rtol). A NaN or inf where a finite value was expected (or the
    reverse) counts as DECADE_HIGH; k is clipped to [DECADE_LOW, DECADE_HIGH].
    """
    r = np.asarray(received, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    floor = atol / rtol if rtol > 0 else max(atol, 1e-300)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        rel = np.abs(r - e) / (np.abs(e) + floor)
        k = np.floor(np.log10(rel))
    k = np.where(np.isfinite(k), np.clip(k, DECADE_LOW, DECADE_HIGH), float(DECADE_HIGH))
    return np.where(mask, k, np.nan)


def decade_list(values: np.ndarray) -> list[int | None]:
    return [None if not np.isfinite(v) else int(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def index_text(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def elements_figure(
    received: Any,
    expected: Any,
    rtol: float,
    atol: float,
    *,
    title: str,
    key: str,
    labels: dict[str, str] | None = None,
    from_reference: bool = True,
) -> dict[str, Any] | None:
    """Received vs expected element by element (same shape only; None otherwise): the full figure.

    ``labels``: what the two sides are ({"received": "yours", "expected":
    "expected"} by default; "central differences of your forward", "x as you
    were given it" for the checks that compare the student with themselves).
    ``from_reference``: the expected side is the reference's result (hidden
    when graded live: :func:`hidden_view`).
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
    decades = relative_decades(r, e, mask, rtol, atol)
    figure: dict[str, Any] = {
        "kind": "elements",
        "title": title,
        "key": key,
        "labels": {"received": YOURS, "expected": EXPECTED, **(labels or {})},
        "from_reference": from_reference,
        "shape": list(r.shape),
        "size": int(r.size),
        "count_differing": count,
        "hidden": False,
        "index": [int(i) for i in idx],
        "received": numbers(r.ravel()[idx]),
        "expected": numbers(e.ravel()[idx]),
        "differs": [bool(b) for b in flat_mask[idx]],
        "decades": decade_list(decades.ravel()[idx]),
        "first": {
            "index": index_text(first, r.shape),
            "received": number(r.ravel()[first]),
            "expected": number(e.ravel()[first]),
        },
    }
    if r.ndim >= 2:
        figure["axes"] = axis_summary(mask, finite_error(r, e, mask))
        figure["follows"] = error_follows(figure["axes"])
    if r.ndim == 2:
        cells, block = block_reduce(finite_error(r, e, mask), "max")
        worst, _ = block_reduce(decades, "max")  # NaN (None) where no value of the block differs
        figure["heat"] = {
            "measure": "largest absolute error",
            "block": list(block),
            "values": [[float(f"{v:.2g}") for v in row] for row in cells],  # a colour: 2 digits
            "decades": [decade_list(row) for row in worst],
        }
    figure["summary"] = elements_summary(figure)
    return figure


def elements_summary(figure: dict[str, Any]) -> str:
    """The text alternative of an elements figure."""
    first = figure["first"]
    labels = figure.get("labels") or {}
    theirs = labels.get("expected", EXPECTED)
    where = f" at index {tuple(first['index'])}" if first["index"] else ""
    text = (
        f"{figure['key']}: {figure['count_differing']} of {figure['size']} values differ from {theirs};"
        f" the first{where} is {fmt(first['received'])} where {fmt(first['expected'])} was expected."
    )
    worst = max((d for d in figure.get("decades") or [] if d is not None), default=None)
    if worst is not None:
        text += f" The largest relative error shown is {decade_text(worst)}."
    follows = figure.get("follows")
    if follows is not None:
        listed = ", ".join(str(i) for i in follows["indices"]) + (
            f" and {follows['more']} more" if follows["more"] else ""
        )
        where = "indices" if follows["step"] == 1 else f"the blocks of {follows['step']} indices starting at"
        text += f" The error follows axis {follows['axis']}: it is concentrated at {where} {listed} of that axis."
    elif figure.get("axes"):
        text += " The error is spread over every axis rather than following one."
    if figure["hidden"]:
        text += (
            " (Hidden check: your values, where they differ and how far off in powers of ten; the expected"
            " values are not shown.)"
        )
    return text


def decade_text(k: int) -> str:
    """The band of relative errors a power of ten stands for: 'between 1e-3 and 1e-2', 'at least 1e3'."""
    if k >= DECADE_HIGH:
        return f"at least 1e{DECADE_HIGH} (or NaN)"
    return f"between 1e{k} and 1e{k + 1}"


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


def step_ratios(received: list[float], expected: list[float], carry: float, start: float | None) -> list[float | None]:
    """Per step t, (r_t - carry * r_(t-1)) / (e_t - carry * e_(t-1)): what each step adds, yours over expected.

    carry 0: the values themselves; 1: each step's change (an optimiser); 1 - momentum: what a running average
    takes in at each step. ``start`` is the value before step 1 (None: step 1 has no ratio). None where the
    expected step adds (next to) nothing.
    """
    out: list[float | None] = []
    before_r = before_e = start
    for r, e in zip(received, expected, strict=False):
        if carry and before_r is None:
            out.append(None)
        else:
            num = r - carry * (before_r or 0.0)
            den = e - carry * (before_e or 0.0)
            scale = max(abs(e), abs(carry * (before_e or 0.0)), 1e-300)
            out.append(number(num / den) if math.isfinite(num) and abs(den) > 1e-12 * scale else None)
        before_r, before_e = r, e
    return out


def ratio_words(carry: float) -> str:
    """What a trajectory's ratio is of, in words."""
    if carry == 0.0:
        return "the value after each step"
    if carry == 1.0:
        return "the change each step makes"
    return f"what each step adds (x_t - {carry:g} x_(t-1))"


def trajectory_figure(
    received: dict[str, Any],
    expected: dict[str, Any],
    keys: list[str],
    rtol: float,
    atol: float,
    *,
    title: str,
    carry: float = 0.0,
    starts: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Values after each step, received vs expected, for the series whose first differing step comes first.

    ``keys`` are <name>_<step> outputs; components drawn: the first differing
    one and the first few others (MAX_SERIES). None when the keys are not steps
    or shapes differ. ``atol`` is scaled by each step's expected values, as
    ``Compare`` does. Each component also keeps :func:`step_ratios` with
    ``carry`` and the value before the first step (``starts[name]``, a number or
    an array of the series' shape; absent: no ratio at step 1).
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
    start = (starts or {}).get(name)
    series = []
    for c in components:
        rs = [np.asarray(received[k], dtype=np.float64).ravel()[c] for k in series_keys]
        es = [np.asarray(expected[k], dtype=np.float64).ravel()[c] for k in series_keys]
        scales = [scale_of(expected[k]) for k in series_keys]
        marks = [
            bool(differing(np.array(a), np.array(b), rtol, atol * sc)) for a, b, sc in zip(rs, es, scales, strict=False)
        ]
        label = f"{name}[{', '.join(str(i) for i in index_text(c, shape))}]" if shape else name
        before = (
            None
            if start is None
            else float(
                np.broadcast_to(np.asarray(start, dtype=np.float64), shape).ravel()[c]
                if shape
                else np.asarray(start, dtype=np.float64).ravel()[0]
            )
        )
        series.append(
            {
                "label": label,
                "received": numbers(rs),
                "expected": numbers(es),
                "differs": marks,
                "ratio": step_ratios(rs, es, carry, before),
            }
        )
    first_step = next(i for i, d in enumerate(series[0]["differs"]) if d)
    figure = {
        "kind": "trajectory",
        "title": title,
        "from_reference": True,
        "hidden": False,
        "steps": list(range(1, len(series_keys) + 1)),
        "series": series,
        "ratio_of": ratio_words(carry),
        "carry": carry,
        "first": {
            "step": first_step + 1,
            "label": series[0]["label"],
            "received": series[0]["received"][first_step],
            "expected": number(component_at(expected[series_keys[first_step]], component)),
        },
    }
    figure["summary"] = trajectory_summary(figure)
    return figure


def ratio_reading(figure: dict[str, Any]) -> str:
    """The ratios in words: one constant factor at every step, or where they go."""
    values = [v for s in figure["series"] for v in s.get("ratio") or [] if v is not None]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    what = figure.get("ratio_of", "the value")
    factor = two_digits(lo / 2 + hi / 2) if lo > 0 and hi <= lo * (1 + CONSTANT_WITHIN) else None
    if factor is not None:  # (None: a factor beyond what two digits can say, e.g. 1e308's: read as a range below)
        if factor == 1.0:
            return f" Per step, {what} is yours over expected 1.0 (within two digits) at every step shown."
        return (
            f" Per step, {what}, yours over expected: one constant factor {factor:g} at every step and component shown."
        )
    first = next((v for v in figure["series"][0].get("ratio") or [] if v is not None), None)
    last = next((v for v in reversed(figure["series"][0].get("ratio") or []) if v is not None), None)
    return (
        f" Per step, {what}, yours over expected: from {fmt(first)} to {fmt(last)} for"
        f" {figure['series'][0]['label']} (between {fmt(lo)} and {fmt(hi)} over the components shown)."
    )


def trajectory_summary(figure: dict[str, Any]) -> str:
    s0, first = figure["series"][0], figure["first"]
    steps = len(figure["steps"])
    text = (
        f"{s0['label']} after each of {steps} steps: yours first leaves the expected trajectory"
        f" at step {first['step']} ({fmt(first['received'])} where {fmt(first['expected'])}"
        f" was expected); {sum(s0['differs'])} of {steps} steps differ."
    )
    text += ratio_reading(figure)
    if figure["hidden"]:
        text += " (Hidden check: your trajectory and the ratios to two digits are shown, not the expected values.)"
    return text


def component_at(value: Any, component: int) -> float:
    """Element ``component`` of an array in flat order."""
    return float(np.asarray(value, dtype=np.float64).ravel()[component])


def histogram_figure(
    samples: Any,
    *,
    title: str,
    density: dict[str, Any] | None,
    bounds: list[float] | None = None,
    statistic: dict[str, Any] | None = None,
    summary: str = "",
    value_label: str = "value",
    bound_label: str = "bound",
) -> dict[str, Any]:
    """A histogram of the student's samples (MAX_BINS bins) over the expected density.

    ``density``: {"kind": "normal" | "uniform", "mean", "std"}: the distribution
    the samples should follow (drawn as counts per bin: n * binwidth * pdf).
    ``bounds``: values a correct sample never leaves (a uniform's [-a, a]), or
    the one value every sample should take (dropout's y / x = 1 / (1 - p)),
    named ``bound_label``. ``statistic``: {"name", "value", "expected", "low",
    "high"}: the judged statistic and its allowed interval (as the message
    states them).
    """
    w = np.clip(finite_values(samples), -LARGEST, LARGEST)
    ends = [float(w.min()), float(w.max())] if w.size else []
    if density is not None:
        mean, std = float(density["mean"]), float(density["std"])
        reach = math.sqrt(3.0) * std if density["kind"] == "uniform" else 4.0 * std
        ends += [mean - reach, mean + reach]
    lo, hi = histogram_range(ends + list(bounds or []))
    counts, edges = np.histogram(w, bins=MAX_BINS, range=(lo, hi))
    figure = {
        "kind": "histogram",
        "title": title,
        "from_reference": False,
        "value_label": value_label,
        "n": int(w.size),
        "edges": numbers(edges),
        "counts": [int(c) for c in counts],
        "density": None
        if density is None
        else {"kind": density["kind"], "mean": number(density["mean"]), "std": number(density["std"])},
        "bounds": None if bounds is None else [number(b) for b in bounds],
        "bound_label": bound_label,
        "statistic": None
        if statistic is None
        else {
            "name": str(statistic["name"]),
            **{k: number(statistic[k]) for k in ("value", "expected", "low", "high")},
        },
    }
    figure["summary"] = summary or histogram_summary(figure)
    return figure


def finite_values(values: Any) -> np.ndarray:
    """The finite values of any numeric input (a scalar, an empty or N-D array of bool, int or float), flat, float64."""
    with np.errstate(over="ignore"):
        flat = np.asarray(values, dtype=np.float64).ravel()
    return flat[np.isfinite(flat)]


def histogram_range(ends: list[float]) -> tuple[float, float]:
    """The range a histogram's bins cover: the finite ``ends`` within [-LARGEST, LARGEST] (any order, [0, 1] when
    none), 1 wide around them when they are closer than NARROWEST * max(1, |lo|, |hi|) (MAX_BINS finite-sized bins
    however close the values are), padded by 5% of its width on each side (the bounds and the density's tails
    inside the picture, not on its frame).
    """
    finite = np.clip(finite_values(ends), -LARGEST, LARGEST)
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    narrowest = NARROWEST * max(1.0, abs(lo), abs(hi))
    if hi - lo < narrowest:
        middle, half = lo / 2 + hi / 2, max(0.5, narrowest / 2)
        lo, hi = middle - half, middle + half
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def histogram_summary(figure: dict[str, Any]) -> str:
    text = f"Histogram of your {figure['n']} values"
    d = figure["density"]
    if d is not None:
        text += f" over the expected {d['kind']} density (mean {fmt(d['mean'])}, std {fmt(d['std'])})"
    text += "."
    s = figure["statistic"]
    if s is not None:
        inside = None not in (s["value"], s["low"], s["high"]) and s["low"] <= s["value"] <= s["high"]
        text += (
            f" {s['name']}: yours is {fmt(s['value'])}, expected {fmt(s['expected'])}, allowed"
            f" [{fmt(s['low'])}, {fmt(s['high'])}]: {'inside' if inside else 'outside'} the interval."
        )
    return text


def fit_figure(
    x: Any,
    received: Any,
    target: Any,
    *,
    title: str,
    full_marks_error: float,
) -> dict[str, Any] | None:
    """An approximation's curve g(x) over the target f(x) on the grid, at most FIT_POINTS points, and the worst point;
    None when there is no curve to draw (no points, or the curve's values do not match the grid one to one).

    The target is a stated formula (sin(2 pi x), a bump), never a secret: the
    figure is the same for hidden checks.
    """
    xs = np.asarray(x, dtype=np.float64).ravel()
    ys = np.asarray(received, dtype=np.float64).ravel()
    ts = np.asarray(target, dtype=np.float64).ravel()
    if xs.size == 0 or not xs.size == ys.size == ts.size:
        return None
    with np.errstate(invalid="ignore"):
        diff = np.abs(ys - ts)
    worst = int(np.nanargmax(np.where(np.isfinite(diff), diff, np.inf))) if diff.size else 0
    step = max(1, math.ceil(xs.size / FIT_POINTS))
    keep = np.unique(np.append(np.arange(0, xs.size, step), [xs.size - 1, worst]))
    figure: dict[str, Any] = {
        "kind": "fit",
        "title": title,
        "from_reference": False,
        "hidden": False,
        "x": numbers(xs[keep]),
        "received": numbers(ys[keep]),
        "target": numbers(ts[keep]),
        "worst": {
            "x": number(xs[worst]),
            "received": number(ys[worst]),
            "target": number(ts[worst]),
            "error": number(diff[worst]),
        },
        "full_marks_error": number(full_marks_error),
    }
    figure["summary"] = (
        f"Your g(x) (solid) over the target f(x) (dashed) on [{fmt(xs.min())}, {fmt(xs.max())}]: the largest"
        f" error is {fmt(figure['worst']['error'])} at x = {fmt(figure['worst']['x'])}; full marks below"
        f" {fmt(full_marks_error)}."
    )
    return figure


def shapes_figure(
    received: Any,
    expected: Any,
    *,
    title: str,
    key: str,
    received_dtype: str | None = None,
    expected_dtype: str | None = None,
) -> dict[str, Any]:
    """The shape (and dtype) received against the one asked for; says when it is the expected one transposed.

    An expected shape is the contract's (the message states it): the figure is the same hidden or not.
    """
    got, want = [int(n) for n in received], [int(n) for n in expected]
    if got == want and received_dtype != expected_dtype:
        what = f"the shape {tuple(want)} is right; the dtype is {received_dtype}, not {expected_dtype}"
    elif len(got) == len(want) >= 2 and got == want[::-1]:
        what = f"your {key} has shape {tuple(got)}: the expected {tuple(want)} transposed"
    elif sorted(got) == sorted(want) and got != want:
        what = f"your {key} has shape {tuple(got)}: the axes of the expected {tuple(want)} in another order"
    elif math.prod(got) == math.prod(want):
        what = f"your {key} has shape {tuple(got)}: as many values as the expected {tuple(want)}, laid out otherwise"
    elif len(got) > len(want):
        what = (
            f"your {key} has shape {tuple(got)}, {len(got) - len(want)} axis more than the expected"
            f" {tuple(want)}: a sum or mean over an axis left out?"
        )
    else:
        what = f"your {key} has shape {tuple(got)}; expected {tuple(want)}"
    return {
        "kind": "shapes",
        "title": title,
        "key": key,
        "from_reference": False,
        "hidden": False,
        "received": got,
        "expected": want,
        "received_dtype": received_dtype,
        "expected_dtype": expected_dtype,
        "summary": f"Shapes: {what}.",
    }


def masks_figure(panels: list[tuple[str, Any]], *, title: str, summary: str) -> dict[str, Any]:
    """Which elements random masks dropped (``panels``: (label, 0/1 array of dropped)), side by side.

    Each mask is cut into at most MAX_MASK_CELLS x MAX_MASK_CELLS blocks, each
    the fraction of its elements dropped: two identical masks look identical,
    a mask shared by every row shows columns. The masks are the student's own.
    """
    shown = []
    for label, mask in panels:
        m = np.asarray(mask, dtype=np.float64)
        m = m.reshape(m.shape[0], -1) if m.ndim >= 2 and m.size else m.reshape(1, -1)
        cells, block = block_reduce(m, "mean", MAX_MASK_CELLS)
        shown.append(
            {
                "label": label,
                "shape": list(np.shape(mask)),
                "block": list(block),
                "values": [[round(float(v), 3) for v in row] for row in cells],
            }
        )
    return {
        "kind": "masks",
        "title": title,
        "from_reference": False,
        "hidden": False,
        "panels": shown,
        "summary": summary,
    }


def hidden_view(figure: dict[str, Any]) -> dict[str, Any]:
    """What a student may see of a full figure whose expected values are the reference's, computed live.

    elements: the expected sample, the error magnitudes (heat map, axis
    summary) are left out; the heat map shows the power of ten of the largest
    relative error per block instead. trajectory: the expected trajectories are
    left out; the ratios keep two significant digits. The first differing pair
    (stated by the message) and the public case (``figure["public"]``: data of
    the handout's case pack) stay. A figure whose expected side is no
    reference run (``from_reference`` false) comes back as it is.
    """
    if not figure.get("from_reference"):
        return figure
    view = dict(figure, hidden=True)
    if figure["kind"] == "elements":
        view["expected"] = None
        if figure.get("axes"):
            view["axes"] = [{k: v for k, v in axis.items() if k != "error"} for axis in figure["axes"]]
        if figure.get("heat"):
            heat = figure["heat"]
            view["heat"] = {
                "measure": "relative error (power of ten)",
                "block": heat["block"],
                "values": heat["decades"],
                "decades": heat["decades"],
            }
        view["summary"] = elements_summary(view)
    elif figure["kind"] == "trajectory":
        view["series"] = [
            dict(s, expected=None, ratio=[two_digits(v) for v in s.get("ratio") or []]) for s in figure["series"]
        ]
        view["summary"] = trajectory_summary(view)
    return view
