"""A deadline on request headers: uvicorn's h11 protocol, closing a connection whose headers never finish.

uvicorn has a keep-alive timeout but no header timeout: a client that opens a
connection and sends half a request line, or a few bytes a minute, holds it
(and a file descriptor) for ever. ``header_deadline(seconds)`` is the h11
protocol class with one rule added: from the moment a connection opens, and
again when each response ends, the next request's line and headers must be
complete within ``seconds``; else the connection is closed without an answer.
A body is not under this deadline (the handlers read it under their limits).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


class HeaderDeadline(H11Protocol):
    """H11Protocol with :data:`header_timeout` seconds for each request's line and headers."""

    header_timeout: float = HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        """Close the connection when the client still owes the request's headers (h11: their state IDLE)."""
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def header_deadline(seconds: float = HEADER_TIMEOUT_S) -> type[HeaderDeadline]:
    """The protocol class for ``uvicorn.run(..., http=...)`` with a ``seconds`` header deadline."""
    attributes: dict[str, Any] = {"header_timeout": float(seconds)}
    return type("HeaderDeadline", (HeaderDeadline,), attributes)
