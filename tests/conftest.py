"""Shared test fixtures: the OpenCL gate, required programs, a Redis server of the test's own.

Tests marked ``@pytest.mark.opencl`` skip, with the reason, where no OpenCL
platform exists; with ``REQUIRE_OPENCL=1`` (CI on PoCL) they fail instead of
skipping, so a missing OpenCL install cannot pass silently.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from server_util import Redis


@lru_cache(maxsize=1)
def opencl_unavailable_reason() -> str | None:
    """None when an OpenCL device builds and runs a kernel here (the grader's own choice), else why not."""
    from grader.student.engine import opencl_device

    return opencl_device.choose().problem


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "opencl" not in item.keywords:
        return
    reason = opencl_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("REQUIRE_OPENCL") == "1":
        pytest.fail(f"REQUIRE_OPENCL=1 but {reason}", pytrace=False)
    pytest.skip(reason)


# --- Debian programs (bubblewrap, redis-server, chromium) ------------------------------


def program_missing_reason(program: str, package: str) -> str | None:
    """None when ``program`` is on PATH, else a one-line reason naming the Debian package."""
    import shutil

    if shutil.which(program):
        return None
    return f"{program} is not installed (Debian package {package}: `make system-deps` as root, or apt-get install {package})"


def require_program(program: str, package: str) -> None:
    """Skip the calling test when ``program`` is missing; under CI=true fail instead."""
    reason = program_missing_reason(program, package)
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator["Redis"]:
    """A redis-server of the test's own on a loopback port (tests/server_util.py), stopped after the test."""
    from server_util import Redis

    require_program("redis-server", "redis-server")
    server = Redis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def no_saved_login(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's `grade login`: $GRADE_CONFIG points at a file that does not exist."""
    monkeypatch.setenv("GRADE_CONFIG", str(tmp_path_factory.mktemp("login") / "config.json"))
