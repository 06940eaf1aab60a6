"""grader.student.sandbox.runner + grader.student.sandbox.worker on tiny scripts of our own: limits, restarts, capture,
results."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grader.student.engine.ops import Case
from grader.student.sandbox.runner import (
    Job,
    Limits,
    death_message,
    human_bytes,
    run_cases,
)
from grader.student.sandbox.results import MalformedResults, decode_results
from grader.student.sandbox.worker import encode_results

TOY = """
import os
import sys

import numpy as np


class Double:
    def forward(self, x):
        print("forward called")
        return 2 * x


PROCESS_TOKEN = float(int.from_bytes(os.urandom(6), "little"))  # differs between processes (pids need not)


class Pid:
    def forward(self, x):
        return np.array([PROCESS_TOKEN])


class Env:
    def forward(self, x):
        threads = float(os.environ.get("OMP_NUM_THREADS", "-1"))
        here = float(os.getcwd() == os.path.dirname(os.path.abspath(__file__)))
        stdin = float(len(sys.stdin.read()))
        return np.array([threads, here, stdin])


class Loop:
    def forward(self, x):
        while True:
            pass


class Spin:
    def forward(self, x):
        n = 0
        while True:
            n += 1


class Segfault:
    def forward(self, x):
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)


class HardExit:
    def forward(self, x):
        os._exit(3)


class Raises:
    def forward(self, x):
        raise ValueError("bad input")


class Chatty:
    def forward(self, x):
        print("y" * 300_000)
        os.write(1, b"z" * 200_000)
        return x


class ImportsGrader:
    def forward(self, x):
        import grader.student.engine.compare
        return x


class ImportsReferenceDynamically:
    def forward(self, x):
        import importlib
        importlib.import_module("refer" + "ence")
        return x


class LeavesDaemon:
    def forward(self, x):
        import _posixsubprocess
        err_r, err_w = os.pipe()
        script = b"setsid /bin/sh -c 'while :; do :; done' stray-daemon </dev/null >/dev/null 2>&1 &"
        pid = _posixsubprocess.fork_exec(
            [b"/bin/sh", b"-c", script], [b"/bin/sh"], True, (err_w,), None, None,
            -1, -1, -1, -1, -1, -1, err_r, err_w, True, False, -1, None, None, None, -1, None, False)
        os.close(err_w)
        os.waitpid(pid, 0)
        return x


class CountsLiveProcesses:
    def forward(self, x):
        alive = 0
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    alive += entry.isdigit() and f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except OSError:
                pass
        return np.array([float(alive)])


CALLS = [0]  # state a first run leaves in the module


class Counter:
    def forward(self, x):
        CALLS[0] += 1
        return np.array([float(CALLS[0]), PROCESS_TOKEN])  # (the token: drawn when the module is imported)


class Strings:
    def forward(self, x):
        return ["a", "b"]


class Huge:
    def forward(self, x):
        return np.ones(2_000_000)
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "student"
    root.mkdir()
    (root / "toy.py").write_text(textwrap.dedent(TOY))
    return root


def forward_job(cls: str, timeout: float = 20.0, needs_opencl: bool = False, cases: int = 1) -> Job:
    """A job whose cases build ``toy.<cls>`` and record its forward of x = [0, 1, 2]."""
    script: list[dict[str, Any]] = [
        {"op": "new", "var": "m", "cls": f"toy.{cls}"},
        {"op": "call", "var": "m", "method": "forward", "args": [{"array": "x"}], "out": "y"},
    ]
    return Job(
        f"toy.{cls}",
        [Case(f"case{k}", script, {"x": np.arange(3.0)}) for k in range(cases)],
        timeout,
        needs_opencl,
    )


FAST = Limits(wall_s=3.0, memory_bytes=1 << 30)


def test_results_come_back_as_arrays(folder: Path) -> None:
    outcome = run_cases(folder, [forward_job("Double", cases=2)], FAST)["toy.Double"]
    assert outcome.status == "ok", outcome.message
    assert list(outcome.results) == ["case0", "case1"]
    for result in outcome.results.values():
        assert result.error is None
        np.testing.assert_array_equal(result.outputs["y"], [0.0, 2.0, 4.0])
    assert outcome.output == "forward called\nforward called\n"


def test_child_environment(folder: Path) -> None:
    outcome = run_cases(folder, [forward_job("Env")], FAST)["toy.Env"]
    threads, cwd_is_student_folder, stdin_bytes = outcome.results["case0"].outputs["y"]
    assert threads == 1.0
    assert cwd_is_student_folder == 0.0
    assert stdin_bytes == 0.0


def test_student_exceptions_are_case_errors(folder: Path) -> None:
    outcome = run_cases(folder, [forward_job("Raises")], FAST)["toy.Raises"]
    assert outcome.status == "ok"
    error = outcome.results["case0"].error
    assert error is not None and error["type"] == "ValueError" and error["message"] == "bad input"


def test_timeout_kills_and_a_fresh_child_continues(folder: Path) -> None:
    jobs = [forward_job("Pid"), forward_job("Loop"), forward_job("Pid", cases=2)]
    jobs[2].id = "toy.Pid.again"
    jobs[2].cases[0].script[0]["cls"] = "toy.Pid"
    outcomes = run_cases(folder, jobs, Limits(wall_s=2.0, parallel=1))
    assert outcomes["toy.Loop"].status == "timeout"
    message = outcomes["toy.Loop"].message  # the line is the loop's first or second (where the dump caught it)
    assert message in (f"timed out after 2 s in Loop.forward (toy.py, line {n}) (infinite loop?)" for n in (32, 33))
    before = outcomes["toy.Pid"].results["case0"].outputs["y"][0]
    after = outcomes["toy.Pid.again"].results["case0"].outputs["y"][0]
    assert outcomes["toy.Pid.again"].status == "ok"
    assert before != after  # the hung child was replaced


def test_jobs_share_a_child_while_it_is_healthy(folder: Path) -> None:
    first, second = forward_job("Pid"), forward_job("Pid")
    second.id = "toy.Pid.second"
    outcomes = run_cases(folder, [first, second], Limits(wall_s=5.0, parallel=1))
    pids = {o.results["case0"].outputs["y"][0] for o in outcomes.values()}
    assert len(pids) == 1


def test_cpu_limit_is_a_timeout(folder: Path) -> None:
    outcome = run_cases(folder, [forward_job("Spin")], Limits(wall_s=60.0, cpu_s=1.0))["toy.Spin"]
    assert outcome.status == "timeout"
    assert "1 s of CPU time" in outcome.message


def test_segfault_is_reported_and_others_still_run(folder: Path) -> None:
    outcomes = run_cases(folder, [forward_job("Segfault"), forward_job("Double")], FAST)
    assert outcomes["toy.Segfault"].status == "crashed"
    assert outcomes["toy.Segfault"].message == "killed by signal 11 (segfault) during toy.Segfault"
    assert outcomes["toy.Double"].status == "ok"


def test_hard_exit_is_reported(folder: Path) -> None:
    outcomes = run_cases(folder, [forward_job("HardExit"), forward_job("Double")], Limits(wall_s=3.0, parallel=1))
    assert outcomes["toy.HardExit"].status == "crashed"
    assert outcomes["toy.HardExit"].message == (
        "the process exited with status 3 during toy.HardExit (sys.exit/os._exit in your code?)"
    )
    assert outcomes["toy.Double"].status == "ok"


def test_output_is_bounded(folder: Path) -> None:
    limits = Limits(wall_s=5.0, output_bytes=1000)
    outcome = run_cases(folder, [forward_job("Chatty")], limits)["toy.Chatty"]
    assert outcome.status == "ok"
    head, _, rest = outcome.output.partition("\n[... ")
    cut, _, tail = rest.partition("\n")
    assert head == "y" * 1000
    assert tail == "z" * 4096  # the end of what was written to fd 1 directly is kept: where the code stopped
    assert cut == "494.9 KB more output cut]"  # 300_001 - 1000 printed + 200_000 - 4096 written to fd 1


def test_a_daemon_left_by_one_job_is_gone_before_the_next(folder: Path) -> None:
    """A CPU hog started in its own session by exercise k must not run on into k+1 (or a classmate's turn)."""
    from conftest import require_program

    require_program("bwrap", "bubblewrap")
    limits = Limits(wall_s=10.0, parallel=1, sandbox=True)
    outcomes = run_cases(folder, [forward_job("LeavesDaemon"), forward_job("CountsLiveProcesses")], limits)
    assert outcomes["toy.LeavesDaemon"].status == "ok"
    alive = outcomes["toy.CountsLiveProcesses"].results["case0"].outputs["y"][0]
    assert alive == 2.0  # the PID namespace's init and the worker: the daemon was killed between the jobs


def test_runtime_import_guard(folder: Path) -> None:
    outcomes = run_cases(folder, [forward_job("ImportsGrader"), forward_job("ImportsReferenceDynamically")], FAST)
    for name, package in (("toy.ImportsGrader", "grader"), ("toy.ImportsReferenceDynamically", "reference")):
        error = outcomes[name].results["case0"].error
        assert error is not None and error["type"] == "ImportError"
        assert error["message"] == f"importing {package!r} from a submission is not allowed"


def test_non_numeric_output_is_a_case_error(folder: Path) -> None:
    outcome = run_cases(folder, [forward_job("Strings")], FAST)["toy.Strings"]
    assert outcome.status == "ok"
    error = outcome.results["case0"].error
    assert error is not None and error["type"] == "BadOutputError"


def test_results_beyond_the_results_limit_are_an_error(folder: Path) -> None:
    limits = Limits(wall_s=5.0, results_bytes=1 << 20, parallel=1)
    outcomes = run_cases(folder, [forward_job("Huge"), forward_job("Double")], limits)
    assert outcomes["toy.Huge"].status == "error"
    assert outcomes["toy.Huge"].message.startswith("toy.Huge returned more than 1 MiB of results")
    assert outcomes["toy.Double"].status == "ok"


def test_topic_that_does_not_import_is_an_error(folder: Path) -> None:
    (folder / "broken.py").write_text("x = (\n")
    job = forward_job("Double")
    job.id = "broken.Double"
    outcome = run_cases(folder, [job, forward_job("Double")], FAST)
    assert outcome["broken.Double"].status == "error"
    assert outcome["broken.Double"].message.startswith("broken.py failed to import: broken.py line 1:")
    assert outcome["toy.Double"].status == "ok"


def test_missing_topic_file(folder: Path) -> None:
    job = forward_job("Double")
    job.id = "nowhere.Double"
    outcome = run_cases(folder, [job], FAST)["nowhere.Double"]
    assert outcome.status == "error"
    assert outcome.message.startswith("nowhere.py is missing from")


def test_a_kernel_worker_without_a_device_still_runs_cases(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No device: the kernel worker starts and runs what needs no device (a stub is read, not built)."""
    monkeypatch.setenv("GRADE_OPENCL_FAULT", "no-device")
    outcome = run_cases(folder, [forward_job("Double", needs_opencl=True)], FAST)["toy.Double"]
    assert outcome.status == "ok"


def test_a_worker_that_cannot_start_is_the_graders_fault(folder: Path) -> None:
    """Before any student code runs in it, a worker that dies (here: too little memory for NumPy) is not
    the student's error: every job of its kind is not_graded, the message naming `grade doctor`."""
    starved = Limits(wall_s=3.0, memory_bytes=48 << 20)
    outcomes = run_cases(folder, [forward_job("Double"), forward_job("Pid")], starved)
    for outcome in outcomes.values():
        assert outcome.status == "not_graded", outcome
        assert "the grader's worker did not start" in outcome.message and "grade doctor" in outcome.message


@pytest.mark.opencl
def test_kernel_jobs_run_in_their_own_child(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POCL_CACHE_DIR", "/tmp/pocl-cache")
    cpu, kernel = forward_job("Pid"), forward_job("Pid", needs_opencl=True)
    kernel.id = "toy.Pid.kernel"
    outcomes = run_cases(folder, [cpu, kernel], Limits(wall_s=20.0, parallel=1))
    assert outcomes["toy.Pid.kernel"].status == "ok", outcomes["toy.Pid.kernel"].message
    pids = {o.results["case0"].outputs["y"][0] for o in outcomes.values()}
    assert len(pids) == 2


def test_no_jobs() -> None:
    assert run_cases(Path("."), [], FAST) == {}


# --- reading results -----------------------------------------------------------


def good_document() -> dict:
    return {"status": "ok", "message": "", "cases": [{"name": "case0", "outputs": {"y": "c0_o0"}, "error": None}]}


def arrays_bytes(arrays: dict[str, np.ndarray], compressed: bool = False, pickled: bool = False) -> bytes:
    import io
    import zipfile

    # numpy's stub reads **arrays as possibly naming allow_pickle (a bool); the names here are c<k>_o<k>
    buffer = io.BytesIO()
    if pickled:
        raw = io.BytesIO()
        np.save(raw, np.array([object()], dtype=object), allow_pickle=True)
        with zipfile.ZipFile(buffer, "w") as z:
            z.writestr("c0_o0.npy", raw.getvalue())
    elif compressed:
        np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    else:
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def decode(document: object, arrays: bytes, job: Job | None = None) -> dict:
    _, results = decode_results(
        json.dumps(document).encode(), arrays, (job or forward_job("Double")).cases, FAST.results_bytes
    )
    return results


def test_decode_reads_what_the_worker_encodes() -> None:
    outcome = {"status": "ok", "message": "", "cases": [("case0", {"y": np.ones(3)}, None, ["careful"])]}
    document, arrays = encode_results(outcome, dropped=0)
    _, results = decode_results(document, arrays, forward_job("Double").cases, FAST.results_bytes)
    np.testing.assert_array_equal(results["case0"].outputs["y"], np.ones(3))
    assert results["case0"].warnings == ["careful"]


@pytest.mark.parametrize(
    "document",
    [
        "not a dict",
        {"status": "fine"},
        {"status": "ok", "cases": [{"name": "another case", "outputs": {}, "error": None}]},
        {"status": "ok", "cases": [{"name": "case0", "outputs": {"y": "missing_key"}, "error": None}]},
        {"status": "ok", "cases": [{"name": "case0", "outputs": [], "error": None}]},
        {"status": "ok", "cases": [{"name": "case0", "outputs": {}, "error": "a string"}]},
        {"status": "ok", "cases": [{"name": "case0", "outputs": {"not_declared": "c0_o0"}, "error": None}]},
    ],
)
def test_malformed_results_are_refused(document: object) -> None:
    with pytest.raises(MalformedResults):
        decode(document, arrays_bytes({"c0_o0": np.ones(3)}))


def test_pickled_arrays_are_refused() -> None:
    with pytest.raises(MalformedResults, match="unreadable arrays"):
        decode(good_document(), arrays_bytes({}, pickled=True))


def test_compressed_arrays_are_refused_before_inflating() -> None:
    """A decompression bomb: 800 MB of zeros compress to under 1 MB; refused unread."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("c0_o0.npy", "w", force_zip64=True) as member:
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": "<f8", "fortran_order": False, "shape": (100_000_000,)}
            )
            member.write(header.getvalue())
            chunk = bytes(1 << 20)
            for _ in range(800):
                member.write(chunk)
    data = buffer.getvalue()
    assert len(data) < 2_000_000
    with pytest.raises(MalformedResults, match="compressed or larger"):
        decode(good_document(), data)


def test_deeply_nested_result_json_is_refused() -> None:
    document = ("[" * 100_000 + "]" * 100_000).encode()
    with pytest.raises(MalformedResults, match="no readable status"):
        decode_results(document, b"", forward_job("Double").cases, FAST.results_bytes)


def test_strings_from_the_worker_are_cleaned() -> None:
    document = good_document()
    document["cases"][0]["error"] = {"type": "ValueError", "message": "\x1b[2J\x1b[HTotal: 340/340 \udcff"}
    error = decode(document, arrays_bytes({"c0_o0": np.ones(3)}))["case0"].error
    assert "\x1b" not in error["message"] and "\\x1b[2J" in error["message"]
    error["message"].encode("utf-8")  # no lone surrogate left


# --- messages ----------------------------------------------------------------------


def test_death_messages() -> None:
    assert death_message(-9, "x.Y", 2 << 30, 10) == (
        "crashed",
        "the process was killed: out of memory? (limit 2 GiB)",
    )
    assert death_message(-24, "x.Y", 2 << 30, 10)[0] == "timeout"  # SIGXCPU
    assert death_message(-6, "x.Y", 2 << 30, 10)[1] == "killed by signal 6 (abort; out of memory?) during x.Y"


def test_human_bytes() -> None:
    assert human_bytes(2 << 30) == "2 GiB"
    assert human_bytes(512 << 20) == "512 MiB"
    assert human_bytes(3_200_000) == "3.2 MB"
    assert human_bytes(12) == "12 bytes"


def test_a_prestarted_worker_runs_the_first_job(folder: Path) -> None:
    from grader.student.sandbox.runner import Workspace

    limits = Limits(wall_s=5.0, parallel=1)
    workspace = Workspace(limits, limits.sandboxed())
    workspace.prestart(False)
    started = workspace._started[False][0]
    outcomes = run_cases(folder, [forward_job("Double")], limits, workspace=workspace)
    assert outcomes["toy.Double"].status == "ok"
    assert workspace._started[False] == []  # taken by the slot, not left idle
    assert started.proc.poll() is not None and not workspace.private.exists()  # closed with the run


def test_a_kept_workspace_runs_a_second_round_on_its_worker_with_the_module_loaded_afresh(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The location's traced run: the same submission, the worker the first run ended with (one start in all),
    and the student's module imported anew (a counter it keeps starts again at 1)."""
    from grader.student.sandbox import workspace as workspace_module
    from grader.student.sandbox.runner import Workspace

    starts: list[bool] = []

    class Counted(workspace_module.Child):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            starts.append(True)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(workspace_module, "Child", Counted)
    limits = Limits(wall_s=10.0, parallel=1)
    workspace = Workspace(limits, limits.sandboxed())
    workspace.prestart(False)  # (as grading does: a worker started by the slot's thread would die with it)
    first = run_cases(folder, [forward_job("Counter", cases=2)], limits, workspace=workspace, keep=True)
    assert [first["toy.Counter"].results[f"case{k}"].outputs["y"][0] for k in range(2)] == [1.0, 2.0]
    assert workspace.private.exists() and len(workspace._started[False]) == 1  # open, its worker parked
    parked = workspace._started[False][0]
    second = run_cases(folder, [forward_job("Counter")], limits, workspace=workspace)
    y = second["toy.Counter"].results["case0"].outputs["y"]
    assert y[0] == 1.0, "the second round saw the module the first one left"
    assert y[1] != first["toy.Counter"].results["case0"].outputs["y"][1]  # (a token drawn on import: drawn again)
    assert len(starts) == 1  # the same worker ran both rounds
    assert parked.proc.poll() is not None and not workspace.private.exists()  # closed after the last round


def test_a_workspace_nobody_used_leaves_no_process_and_no_folder() -> None:
    from grader.student.sandbox.runner import Workspace

    limits = Limits()
    workspace = Workspace(limits, limits.sandboxed())
    workspace.prestart(False)
    workspace.prestart(True)
    children = workspace._started[False] + workspace._started[True]
    workspace.close()
    workspace.close()  # a second close does nothing
    assert all(child.proc.poll() is not None for child in children)
    assert not workspace.private.exists()
