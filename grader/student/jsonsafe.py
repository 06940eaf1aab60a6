"""Any value a grading produced, as strict JSON and back: the one encoding of the store, the wire and the reports.

Student code can return anything: inf, NaN, 1e308, NumPy scalars and arrays
of any dtype (float16, int, complex, object), strings. Strict JSON has no
inf or NaN, and ``json.dumps`` refuses NumPy types, so every figure and
report goes through :func:`plain` before it is stored or sent:

- a non-finite float becomes the marked form ``{"$float": "inf"}`` (also
  ``"-inf"`` and ``"nan"``), which :func:`restore` turns back into the float;
- a NumPy array becomes nested lists, a NumPy scalar its Python value, a
  tuple a list, a dict key a string;
- a complex number, bytes and any other object become their ``str``.

``restore(plain(x)) == plain(x)`` with the marks replaced by floats, for
every ``x``; neither function raises.
"""

from __future__ import annotations

import json
import math
from typing import Any

MARK = "$float"
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
MAX_INT_BITS = 4096  # about 1,200 digits: far below sys.get_int_max_str_digits()


def mark(value: float) -> dict[str, str]:
    """The marked form of a non-finite float: ``{"$float": "inf"}``, ``"-inf"`` or ``"nan"``."""
    return {MARK: "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def plain(value: Any) -> Any:
    """``value`` as JSON-safe Python (str, int, finite float, bool, None, lists, dicts), non-finite floats marked."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):  # (one too long for Python's int-to-text limit is named, not written)
        return int(value) if value.bit_length() <= MAX_INT_BITS else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else mark(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    tolist = getattr(value, "tolist", None)  # NumPy arrays and scalars, without importing NumPy here
    if callable(tolist) and type(value).__module__ == "numpy":
        try:
            as_python = tolist()
        except Exception:  # an object array whose items refuse: their text instead
            return str(value)
        return plain(as_python) if as_python is not value else str(value)
    return str(value)


def restore(value: Any) -> Any:
    """The inverse of :func:`plain`: each ``{"$float": ...}`` back to its float; anything else as it is."""
    if isinstance(value, dict):
        if len(value) == 1 and value.get(MARK) in NON_FINITE:
            return NON_FINITE[value[MARK]]
        return {k: restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``value`` as strict JSON text (``plain`` first); ``options`` go to ``json.dumps`` (indent, separators)."""
    return json.dumps(plain(value), allow_nan=False, **options)


def loads(text: str) -> Any:
    """JSON text back, marks restored; ValueError for text that is not JSON."""
    return restore(json.loads(text))
