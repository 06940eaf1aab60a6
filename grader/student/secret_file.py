"""Files that hold secrets (tokens, a saved login), written owner-only from their first byte."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_owner_only(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, atomically.

    The text goes to a new temporary file beside ``path``, created by ``os.open`` with ``O_CREAT | O_EXCL`` and
    mode 0600 (the umask can only take bits away; no ``chmod`` after, so no moment where others may read it; a
    file or link already at that name is never reused or followed), then renamed over ``path``: a reader sees
    the old file or the whole new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
