"""Kernels grade the same inside the bubblewrap sandbox as outside it, as root and as an ordinary user.

The sandbox must show the chosen OpenCL device what it needs to start (its ICD file in
/etc/OpenCL/vendors, its library, the CPU topology under /sys that PoCL's hwloc reads, the
address space of a kernel worker): before it did, Debian's PoCL was invisible to a root-run
worker and aborted a user's ("failed to find sysfs cpu topology directory").
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require_program
from grader.course.grading import grade
from grader.course.solution import write_solution
from grader.student.sandbox.runner import Limits

pytestmark = pytest.mark.opencl

WRONG_RELU = """
__kernel void relu_forward(__global const float *x, __global float *y, const int n)
{ int i = get_global_id(0); if (i >= n) return; y[i] = x[i] > 0.0f ? 2.0f * x[i] : 0.0f; }
"""


def verdicts(folder: Path, sandbox: bool) -> dict[str, tuple[str, float]]:
    report = grade(folder, ["kernels"], "alice", Limits(sandbox=sandbox, wall_s=20.0))
    return {e.id: (e.status, e.score) for e in report.exercises}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = write_solution(tmp_path_factory.mktemp("kernels") / "exercises")
    source = (folder / "kernels" / "activations.cl").read_text()
    start = source.index("__kernel void relu_forward")
    end = source.index("__kernel", start + 1)
    (folder / "kernels" / "activations.cl").write_text(source[:start] + WRONG_RELU + source[end:])
    return folder


def test_the_same_verdicts_in_and_out_of_the_sandbox(kernels: Path) -> None:
    require_program("bwrap", "bubblewrap")
    inside, outside = verdicts(kernels, True), verdicts(kernels, False)
    assert inside == outside
    assert inside.pop("kernels.relu_forward")[0] == "failed"
    assert set(inside.values()) == {("passed", 10.0)}


def readable_by_others(path: Path) -> bool:
    """Whether every folder above ``path`` can be entered, and ``path`` read, by a user who owns none of them."""
    path = path.resolve()
    for folder in [*reversed(path.parents)]:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & stat.S_IROTH)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder an ordinary user can reach (pytest's own base folder is its owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="normgrade-user-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_an_ordinary_user_grades_the_solutions_kernels_in_the_sandbox(shared_tmp: Path) -> None:
    """As uid 65534 (no home, no rights): the sandbox's unprivileged path (a user namespace) finds the device."""
    require_program("bwrap", "bubblewrap")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to become an ordinary user")
    if not readable_by_others(Path(sys.executable)) or not readable_by_others(Path(__file__)):
        pytest.skip(
            f"the Python installation ({os.path.realpath(sys.executable)}) or this checkout is not readable "
            "by an ordinary user here"
        )
    tmp_path = shared_tmp
    folder = write_solution(tmp_path / "exercises")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "GRADE_CONFIG": str(tmp_path / "config.json"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "grader.cli",
            "submit",
            "kernels",
            "--path",
            str(folder),
            "--db",
            str(tmp_path / "p.db"),
            "--student",
            "nobody",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "This upload: 70/70 (100.0%), 7 of 7 exercises at full marks" in done.stdout
    assert "sandbox is off" not in done.stderr


@pytest.mark.parametrize(
    "vendors, expected",
    [("with-icd", ("passed", 10.0)), ("empty", ("not_graded", 0.0)), ("missing", ("not_graded", 0.0))],
)
def test_ocl_icd_vendors_is_read_alike_in_and_out_of_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vendors: str, expected: tuple[str, float]
) -> None:
    """The ICD loader's OCL_ICD_VENDORS as the loader reads it, on both sides of the sandbox: a folder holding
    an .icd file (mounted into the sandbox where the grader sees it: under /tmp, the sandbox's own scratch)
    gives that vendor; an empty folder or a missing path gives none, so kernels are not_graded (never a zero),
    even where pyopencl's wheel bundles a loader that would find its own PoCL."""
    require_program("bwrap", "bubblewrap")
    icds = sorted(Path("/etc/OpenCL/vendors").glob("*.icd"))
    if not icds:
        pytest.skip("no system OpenCL vendor (/etc/OpenCL/vendors/*.icd) to point OCL_ICD_VENDORS at")
    folder = write_solution(tmp_path / "exercises")
    chosen = Path(tempfile.mkdtemp(prefix="normgrade-vendors-"))  # below /tmp: not otherwise in the sandbox
    chosen.chmod(0o755)  # readable by the worker's own uid, as /etc/OpenCL/vendors is
    try:
        if vendors == "with-icd":
            shutil.copy(icds[0], chosen / icds[0].name)
        monkeypatch.setenv("OCL_ICD_VENDORS", str(chosen if vendors != "missing" else chosen / "nothing"))
        monkeypatch.setenv("GRADE_OPENCL_CACHE", str(tmp_path / "device-cache.json"))
        for sandbox in (False, True):
            report = grade(folder, ["kernels.relu_forward"], "alice", Limits(sandbox=sandbox, wall_s=20.0))
            (result,) = report.exercises
            assert (result.status, result.score) == expected, (sandbox, result.message)
            if expected[0] == "not_graded":
                assert "OCL_ICD_VENDORS" in result.message and "grade doctor" in result.message
    finally:
        shutil.rmtree(chosen, ignore_errors=True)


def test_an_ocl_icd_vendors_folder_shows_the_sandbox_its_icd_files_and_nothing_else(tmp_path: Path) -> None:
    """The grader's OCL_ICD_VENDORS may name any folder (a home, a course's folder): the sandbox gets an empty
    folder there holding only the .icd files, never the folder itself with what else it keeps."""
    from grader.student.sandbox.bwrap import vendors_args

    folder = tmp_path / "vendors"
    folder.mkdir()
    (folder / "pocl.icd").write_text("libpocl.so.2\n")
    (folder / "course.db").write_text("secrets")
    (folder / "sub.icd").mkdir()  # a folder named like a vendor file: not a file, not mounted
    args = vendors_args({"OCL_ICD_VENDORS": str(folder)})
    binds = [args[i + 1 : i + 3] for i, a in enumerate(args) if a in ("--ro-bind", "--bind")]
    assert binds == [[str(folder / "pocl.icd"), str(folder / "pocl.icd")]]
    assert ["--perms", "0755", "--dir", str(folder)] == args[args.index(str(folder)) - 3 : args.index(str(folder)) + 1]
    single = vendors_args({"OCL_ICD_VENDORS": str(folder / "pocl.icd")})  # one vendor's file: that file alone
    assert [single[i + 1 : i + 3] for i, a in enumerate(single) if a == "--ro-bind"] == [[str(folder / "pocl.icd")] * 2]
    assert vendors_args({"OCL_ICD_VENDORS": str(tmp_path / "missing")}) == []
    assert vendors_args({"OCL_ICD_VENDORS": "relative/path"}) == []
