"""Bounds on what one client may make the server keep: a sliding-window rate limit per source address.

Unauthenticated requests that store something (an LTI login initiation stores
a state row) are counted per address, so a flood from one address is refused
to that address alone and every other client goes on as before.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable


class PerClient:
    """At most ``limit`` events per client in any ``window_s`` seconds.

    Each client keeps the times of its last ``limit`` events (a sliding log); an
    event is allowed when fewer than ``limit`` of them fall within the last
    ``window_s`` seconds. The ``max_clients`` most recently seen clients are
    remembered; the least recently seen is forgotten first, so the limiter's own
    memory is bounded too (at most ``max_clients * limit`` times).
    """

    def __init__(
        self, limit: int, window_s: float, max_clients: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit, self.window_s, self.max_clients, self.clock = limit, window_s, max_clients, clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def allow(self, client: str) -> bool:
        """Count one event of ``client`` and say whether it is within the limit (a refused one is not counted)."""
        now = self.clock()
        times = self._seen.pop(client, None) or deque(maxlen=self.limit)
        self._seen[client] = times  # the most recently seen last
        while len(self._seen) > self.max_clients:
            self._seen.popitem(last=False)
        if len(times) == self.limit and now - times[0] < self.window_s:
            return False
        times.append(now)
        return True

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again (0 when it may now)."""
        times = self._seen.get(client)
        if not times or len(times) < self.limit:
            return 0
        return max(0, int(self.window_s - (self.clock() - times[0])) + 1)
