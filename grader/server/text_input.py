"""The one rule for text a request brings in: characters that cannot be stored, shown or logged are refused.

Refused, anywhere in a JSON body (keys and values, at any depth), a form or a
query string: lone UTF-16 surrogates (U+D800 to U+DFFF: ``"\\ud800"`` in JSON
decodes to one, and no UTF-8 encoder takes it), control characters other
than tab, newline and carriage return (NUL among them), and the bidirectional
controls that reorder what a reader sees (U+202A to U+202E, U+2066 to U+2069).
The refusal is a 400 naming the field and the code point (``U+D800``), never
echoing the text itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException

UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
MAX_NAME = 40  # characters of a field's name shown in the refusal


def kind_of(char: str) -> str:
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        return "a lone UTF-16 surrogate"
    if 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
        return "a bidirectional control"
    return "a control character"


def unsafe_text(value: Any, where: str = "the body") -> str | None:
    """Why ``value`` (a string, or lists and objects of them, keys included) cannot be taken: one sentence naming
    the field and the code point, or None when every string in it is safe."""
    if isinstance(value, str):
        found = UNSAFE.search(value)
        if found is None:
            return None
        char = found.group()
        return f"{where} holds U+{ord(char):04X} ({kind_of(char)}) at character {found.start() + 1}: send plain text"
    if isinstance(value, Mapping):
        for key, item in value.items():
            name = ascii(str(key))[:MAX_NAME]
            reason = unsafe_text(key, f"a field name in {where}") or unsafe_text(item, f"{where}, field {name}")
            if reason:
                return reason
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            reason = unsafe_text(item, f"{where}, item {index + 1}")
            if reason:
                return reason
    return None


def refuse_unsafe_text(value: Any, where: str = "the body") -> None:
    """Raise a 400 (HTTPException) when :func:`unsafe_text` finds a character that cannot be taken."""
    reason = unsafe_text(value, where)
    if reason:
        raise HTTPException(400, reason)
