"""The store's one clock: times are written as ISO 8601 UTC strings."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now(timespec: str = "seconds") -> str:
    """The current time as an ISO 8601 UTC string (seconds precision; ``"milliseconds"`` where a duration is
    measured from it, as the estimate of an upload's report does: grader/queue/estimate.py)."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)
