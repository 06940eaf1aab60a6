"""A connection whose request headers never finish is closed (grader/server/deadline.py); a prompt one is served."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from grader.server.deadline import header_deadline
from server_util import HOST, free_port, wait_for

pytestmark = pytest.mark.server


@pytest.fixture
def port() -> Iterator[int]:
    async def hello(request: object) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/", hello)])
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host=HOST, port=port, log_level="warning", http=header_deadline(0.5), timeout_keep_alive=60)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the server to listen")
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes the connection (socket.timeout after 20 s if it never does)."""
    sock.settimeout(20)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("sent", [b"", b"GET / HT", b"GET / HTTP/1.1\r\nHost: x\r\n"])
def test_a_request_whose_headers_never_end_is_closed(port: int, sent: bytes) -> None:
    with socket.create_connection((HOST, port)) as sock:
        sock.sendall(sent)
        assert read_all(sock) == b""  # closed without an answer


def test_after_a_response_the_next_requests_headers_are_under_the_deadline_too(port: int) -> None:
    with socket.create_connection((HOST, port)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHo")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"HTTP/1.1") == 1
