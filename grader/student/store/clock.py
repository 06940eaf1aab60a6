"""The store's one clock: times are written as ISO 8601 UTC strings."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now(timespec: str = "seconds") -> str:
    """The current time as an ISO 8601 UTC string (seconds precision; ``"milliseconds"`` where a duration is
    measured from it, as the estimate of an upload's report does: grader/queue/estimate.py)."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def to_seconds(when: str) -> str:
    """An ISO 8601 time written to the second, as every attempt's time is (an upload's receipt is kept to the
    millisecond in ``jobs``; its attempt starts at that second, so attempts sort by time as text, whatever wrote
    them)."""
    return datetime.fromisoformat(when).isoformat(timespec="seconds")
