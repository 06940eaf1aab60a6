"""Array comparison with messages that teach where the first large difference is.

``compare(received, expected, rtol, atol)`` passes when, elementwise,
``|received - expected| <= atol + rtol * |expected|`` where the expected value
is finite, and ``received == expected`` where it is not (inf matches only the
same inf, NaN matches NaN: an expected inf never widens the tolerance), with
the same shape and a compatible dtype; otherwise its message says what went
wrong first: the shape, the dtype, a NaN/inf where a finite value was
expected, or the first significant difference and how many values are off:

    first significant difference at index (1, 2): received 0.81649658,
    expected 0.81649454; max abs error 3.2e-03 over 12 of 60 values
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-8


@dataclass
class Comparison:
    """The verdict of one comparison: ok, and a one-line message when not ok."""

    ok: bool
    message: str = ""


def _index(idx: tuple[int, ...]) -> str:
    if len(idx) == 0:
        return ""
    if len(idx) == 1:
        return f" at index {idx[0]}"
    return f" at index {tuple(int(i) for i in idx)}"


def format_pair(received: float, expected: float) -> tuple[str, str]:
    """Both numbers with the fewest significant digits (6 to 17) that show them apart."""
    for digits in (6, 8, 10, 12, 14, 17):
        a, b = f"{received:.{digits}g}", f"{expected:.{digits}g}"
        if a != b:
            return a, b
    return a, b


def _dtype_ok(received: np.ndarray, expected: np.ndarray) -> bool:
    if expected.dtype.kind == "f":
        return received.dtype == expected.dtype
    if expected.dtype.kind in "biu":
        return received.dtype.kind in "biuf"
    return True


def nonfinite_counts(values: np.ndarray) -> str:
    """How many of ``values`` are inf, -inf and nan, in words: "12 inf, 8 -inf" (kinds absent left out)."""
    counts = [
        (int(np.isposinf(values).sum()), "inf"),
        (int(np.isneginf(values).sum()), "-inf"),
        (int(np.isnan(values).sum()), "nan"),
    ]
    return ", ".join(f"{n} {name}" for n, name in counts if n)


def close_mask(received: Any, expected: Any, rtol: float, atol: float) -> np.ndarray:
    """Elementwise agreement: ``|r - e| <= atol + rtol * |e|`` where ``e`` is finite; else ``r == e`` (or both NaN).

    An expected inf or NaN asks for exactly that value: ``rtol * |inf|`` would let every number match an inf
    (an overflow mistake's variant would then explain any output, and no overflow could be named).
    """
    r = np.asarray(received, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        within = np.isfinite(e) & (np.abs(r - e) <= atol + rtol * np.abs(e))
        return within | (np.isnan(r) & np.isnan(e)) | (r == e)


def compare(
    received: Any,
    expected: Any,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    check_dtype: bool = True,
) -> Comparison:
    """Compare elementwise: ok when :func:`close_mask` holds everywhere."""
    if received is None:
        return Comparison(False, "no value was produced")
    r = np.asarray(received)
    e = np.asarray(expected)
    if r.shape != e.shape:
        return Comparison(False, f"shape {r.shape}, expected {e.shape}")
    if r.dtype.kind not in "biuf":
        return Comparison(False, f"dtype {r.dtype}, expected {e.dtype}")
    if check_dtype and not _dtype_ok(r, e):
        return Comparison(False, f"dtype {r.dtype}, expected {e.dtype}")
    rf = r.astype(np.float64)
    ef = e.astype(np.float64)
    bad_nonfinite = ~np.isfinite(rf) & np.isfinite(ef)
    if bad_nonfinite.any():
        idx = tuple(np.argwhere(bad_nonfinite)[0])
        count = int(bad_nonfinite.sum())
        return Comparison(
            False,
            f"received {rf[idx]}{_index(idx)} where {ef[idx]:.8g} was expected"
            f" ({count} of {rf.size} values are nan or inf: {nonfinite_counts(rf[bad_nonfinite])})",
        )
    close = close_mask(rf, ef, rtol, atol)
    if close.all():
        return Comparison(True, "")
    far = ~close
    idx = tuple(np.argwhere(far)[0])
    a, b = format_pair(float(rf[idx]), float(ef[idx]))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(rf - ef)
    finite = np.isfinite(diff)
    max_err = float(np.max(diff[far & finite])) if (far & finite).any() else float("inf")
    return Comparison(
        False,
        f"first significant difference{_index(idx)}: received {a}, expected {b};"
        f" max abs error {max_err:.1e} over {int(far.sum())} of {rf.size} values",
    )


def same_as(a: Any, b: Any, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> bool:
    """True when a and b have the same shape and agree elementwise (used to match mistakes).

    Scale-aware: the absolute tolerance is ``atol * max(1, max|b|)``.
    """
    if a is None or b is None:
        return False
    x = np.asarray(a)
    y = np.asarray(b)
    if x.shape != y.shape or x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
        return False
    return compare(x, y, rtol=rtol, atol=atol * scale_of(y), check_dtype=False).ok


def scale_of(values: Any) -> float:
    """max(1, largest finite magnitude): scales absolute tolerances to the data."""
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        return 1.0
    return max(1.0, float(np.max(np.abs(finite))))
