"""The store's one clock: times are written as ISO 8601 UTC strings."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string (seconds precision)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
