"""Text that came from student code, made safe to store, print and export.

Everything a worker reports (exception messages, tracebacks, printed output,
warnings) and every name taken from a submission (folder and file names) goes
through :func:`clean_text` before it is stored or shown:

- invalid Unicode (lone surrogates from ``surrogateescape`` file names or from
  a forged message) becomes ``\\udcXX`` escapes, so SQLite and JSON accept it;
- control characters other than newline and tab (ESC sequences that clear the
  terminal or repaint a fake "Total: 340/340", carriage returns that overwrite
  a line, bells, C1 controls) and the bidirectional overrides become visible
  ``\\x1b``-style escapes;
- an optional length cap.

:func:`csv_cell` neutralises spreadsheet formulas (a cell starting with
``= + - @``, tab or CR gets a leading apostrophe), as OWASP recommends.
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls except \t and \n, DEL, C1 controls, bidi embedding/override/isolate marks.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(text: Any, limit: int | None = None) -> str:
    """``text`` (any object: str() of it) with invalid Unicode and control characters escaped.

    With ``limit``, at most ``limit`` characters are kept and the cut is said.
    """
    text = text if isinstance(text, str) else str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + f" [... {len(text) - limit} more characters cut]"
    return _UNSAFE.sub(_escape, text)


def clean_record(record: Any, limit: int = 20_000) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string cleaned and capped."""
    if isinstance(record, str):
        return clean_text(record, limit)
    if isinstance(record, dict):
        return {clean_text(k, 200): clean_record(v, limit) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [clean_record(v, limit) for v in record]
    return record


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet will not run: strings starting with = + - @ tab or CR get a leading '.

    Numbers are left as numbers (a negative score stays a number).
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
