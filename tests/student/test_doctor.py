"""`grade doctor`: one line an item with a fix for each failure, --json, exit 0 when the course's needs work.

The OpenCL items run the real probe (GRADE_OPENCL_FAULT rehearses a CPU PoCL's LLVM does not know);
the sandbox item starts the real bubblewrap where it is installed.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import require_program
from grader.cli import cli as instructor_cli
from grader.student.sandbox import bwrap
from grader.student import doctor
from grader.student.engine import opencl_device
from grader.student.cli import cli as handout_cli


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv(opencl_device.CACHE_VARIABLE, str(tmp_path / "device.json"))
    monkeypatch.delenv(opencl_device.FAULT_VARIABLE, raising=False)
    opencl_device.forget()
    yield
    opencl_device.forget()


def items_of(result) -> dict[str, list[dict]]:
    document = json.loads(result.stdout)
    found: dict[str, list[dict]] = {}
    for item in document["items"]:
        found.setdefault(item["name"], []).append(item)
    return found


@pytest.mark.opencl
def test_doctor_names_the_device_and_exits_0_here() -> None:
    require_program("bwrap", "bubblewrap")
    result = CliRunner().invoke(handout_cli, ["doctor", "--json"])
    assert result.exit_code == 0, result.stdout
    items = items_of(result)
    assert [i["ok"] for i in items["python"]] == [True] and [i["ok"] for i in items["numpy"]] == [True]
    chosen = opencl_device.choose().label
    assert items["opencl"][-1] == {"name": "opencl", "ok": True, "detail": f"kernels are graded on {chosen}", "fix": ""}
    assert items["sandbox"][0]["ok"] is True and "OpenCL on" in items["sandbox"][0]["detail"]
    text = CliRunner().invoke(handout_cli, ["doctor"]).stdout
    assert text.splitlines()[-1] == "Everything the course needs works."
    assert any(line.startswith("ok   opencl  kernels are graded on ") for line in text.splitlines())


@pytest.mark.opencl
def test_a_cpu_the_compiler_does_not_know_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(opencl_device.FAULT_VARIABLE, "unknown-cpu")
    result = CliRunner().invoke(handout_cli, ["doctor"])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert any(
        line.startswith("warn opencl") and "skipped: error: unknown target CPU 'generic'" in line for line in lines
    )
    failing = [i for i, line in enumerate(lines) if line.startswith("FAIL opencl")]
    assert failing and "apt-get install pocl-opencl-icd" in lines[failing[0] + 1]
    assert lines[-1].startswith("Something the course needs does not work")


def test_no_sandbox_is_a_warning_for_a_student_and_a_failure_for_an_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap, "problem", lambda: "bubblewrap is not installed (apt-get install bubblewrap)")
    monkeypatch.setattr(doctor, "check_opencl", lambda: ([], opencl_device.Choice(None)))
    student = doctor.check_sandbox("student", opencl_device.Choice(None))
    operator = doctor.check_sandbox("operator", opencl_device.Choice(None))
    assert student.ok is None and "fine for a student" in student.detail
    assert operator.ok is False and operator.fix == "as root: `apt-get install bubblewrap`"
    assert doctor.healthy([student]) and not doctor.healthy([operator])


def test_the_operators_doctor_checks_the_queue(monkeypatch: pytest.MonkeyPatch, redis_server) -> None:
    assert doctor.check_queue(redis_server.url).ok is True
    down = doctor.check_queue("redis://127.0.0.1:1/0")
    assert down.ok is False and "does not answer" in down.detail and down.fix


def test_the_instructors_command_takes_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, str | None] = {}

    def report(role, as_json, queue=None, login=None):
        seen.update(role=role, queue=queue)
        return 0

    monkeypatch.setattr(doctor, "report", report)
    result = CliRunner().invoke(instructor_cli, ["doctor", "--queue", "redis://127.0.0.1:6379/0"])
    assert result.exit_code == 0 and seen == {"role": "operator", "queue": "redis://127.0.0.1:6379/0"}


def test_a_logged_in_student_gets_the_servers_word(monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.student.client import connection as client

    class Answering:
        def __init__(self, server, token, timeout=0):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def call(self, method, path):
            return 200, {"student": "ann@example.org"}

    class Refusing(Answering):
        def call(self, method, path):
            raise client.ClientError("this token is not valid")

    login = types.SimpleNamespace(server="http://127.0.0.1:8765", token="t", student="ann@example.org")
    monkeypatch.setattr(client, "Client", Answering)
    assert doctor.check_server(login).detail == "http://127.0.0.1:8765 answers; logged in as ann@example.org"
    monkeypatch.setattr(client, "Client", Refusing)
    refused = doctor.check_server(login)
    assert refused.ok is False and "this token is not valid" in refused.detail and "grade login" in refused.fix
