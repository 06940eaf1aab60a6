"""``grade doctor``: what this machine can grade with, one line an item, a fix for each failure.

Items (:func:`run`), each an :class:`Item` (``ok``: True, False, or None for a warning that
costs nothing the course needs):

- **python**: the interpreter's version (3.11 or newer) and where it lives;
- **numpy**: its version and the BLAS it was built with;
- **opencl**: every OpenCL device with its probe's verdict (:mod:`grader.student.engine.opencl_device`:
  a build and a run of a small kernel), then the device grading would use;
- **sandbox**: bubblewrap starts, runs NumPy inside, and finds the same OpenCL device inside
  (its ICD, its library, the CPU topology and the address space the grading worker gets);
- **queue** (operators, ``--queue``): Redis answers a PING;
- **server** (a student logged in): the course server answers and accepts the saved token.

For a student the sandbox is a warning (their own code runs with process isolation); for an
operator (``role="operator"``: batch, the course server, Gradescope) it is required. The exit
status is 0 when every required item works. Nothing here needs the reference: the handout
ships it, and the instructor's ``grade doctor`` is the same command with the operator's items.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

from grader.student.sandbox import bwrap
from grader.student.engine import opencl_device

ROOT_FIX = (
    "as root: `apt-get install pocl-opencl-icd` (Debian's PoCL, LLVM 15: builds on CPUs newer than the pip PoCL knows)"
)
PIP_FIX = (
    "without root: `.venv/bin/pip install '.[opencl]'` in the handout (`.venv/bin/pip install -e"
    " '.[pocl]'` in the course repository); where that PoCL does not know the CPU either, Intel's CPU"
    " runtime from PyPI: `.venv/bin/pip install intel-opencl-rt intel-cmplr-lib-rt` and"
    " `export OCL_ICD_VENDORS=$PWD/.venv/lib/libintelocl.so` (about 900 MB)"
)


@dataclass
class Item:
    """One thing checked: ``ok`` True (works), False (the course needs it and it fails), None (a warning)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""

    def line(self) -> str:
        word = {True: "ok", False: "FAIL", None: "warn"}[self.ok]
        return f"{word:<5}{self.name:<8}{self.detail}" + (f"\n{'':13}fix: {self.fix}" if self.fix else "")


def check_python() -> Item:
    version = ".".join(str(v) for v in sys.version_info[:3])
    ok = sys.version_info >= (3, 11)
    return Item("python", ok, f"Python {version} ({sys.executable})", "" if ok else "install Python 3.11 or newer")


def check_numpy() -> Item:
    try:
        import numpy
    except Exception as exc:  # not installed, or a broken build
        return Item(
            "numpy",
            False,
            f"NumPy cannot be imported ({opencl_device.first_line(str(exc))})",
            "reinstall the grader: `.venv/bin/pip install .` (in the handout)",
        )
    return Item("numpy", True, f"NumPy {numpy.__version__}, BLAS: {blas_name(numpy)}")


def blas_name(numpy: Any) -> str:
    """The BLAS NumPy was built with ('openblas 0.3.27'), or 'unknown'."""
    try:
        config = numpy.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()
    except Exception:  # older NumPy: no dict mode
        return "unknown"


def check_opencl() -> tuple[list[Item], opencl_device.Choice]:
    """One item per device tried (every one: the cache is not used) and one for the device chosen."""
    choice = opencl_device.survey()
    items = [
        Item(
            "opencl",
            None if t.reason else True,
            f"{t.label}: "
            + (
                "builds and runs the probe kernel"
                if t.reason is None
                else f"skipped: {opencl_device.first_line(t.reason)}"
            ),
        )
        for t in choice.tried
    ]
    if choice.device is not None:
        opencl_device.remember(choice.as_dict())
        items.append(Item("opencl", True, f"kernels are graded on {choice.label}"))
    else:
        what = "no OpenCL device is installed" if not choice.tried else "no OpenCL device here builds a kernel"
        items.append(
            Item(
                "opencl",
                False,
                f"{what}: the kernel exercises cannot be graded (they are not_graded, never a zero)",
                f"{ROOT_FIX}; {PIP_FIX}",
            )
        )
    return items, choice


# Run inside the sandbox with the grading worker's environment and address-space limit.
INSIDE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
import numpy
from grader.student.engine import opencl_device
print(json.dumps(opencl_device.survey().as_dict()))
"""


def check_sandbox(role: str, outside: opencl_device.Choice) -> Item:
    """bubblewrap starts, NumPy imports inside, and the device chosen outside is chosen inside too."""
    required = role == "operator"
    problem = bwrap.problem()
    if problem is not None:
        note = "" if required else " (your own code then runs with process isolation: fine for a student)"
        return Item(
            "sandbox",
            False if required else None,
            f"the OS sandbox is off: {problem}{note}",
            f"as root: `apt-get install {bwrap.INSTALL_HINT.split()[-1]}`",
        )
    from grader.student.sandbox.private_tmp import PrivateFolder
    from grader.student.sandbox.runner import Limits

    folder = PrivateFolder("normgrade-doctor-")
    try:
        job = folder.path / "job"
        job.mkdir(mode=0o755)
        code = INSIDE.format(memory=Limits().opencl_memory_bytes)
        argv = bwrap.wrap([sys.executable, "-c", code], job, 64 << 20, bwrap.environment(bwrap.BUNDLE_MOUNT))
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Item("sandbox", False, f"the sandbox did not run NumPy: {exc}", "")
    finally:
        folder.remove()
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return Item(
            "sandbox",
            False,
            f"the sandbox starts but the grading worker's Python fails in it: {last[:200]}",
            "run `grade doctor --json` and report it",
        )
    try:
        inside = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Item("sandbox", False, "the sandbox ran NumPy but said nothing readable", "")
    if outside.device is not None and inside.get("device") is None:
        reasons = "; ".join(
            f"{t['device']}: {opencl_device.first_line(t.get('reason') or '')}" for t in inside.get("tried", [])
        )
        return Item(
            "sandbox",
            False,
            f"NumPy runs in the sandbox, but no OpenCL device does ({reasons or 'none'})",
            "run `grade doctor --json` and report it: the sandbox must show the device's files",
        )
    where = f", OpenCL on {inside['device']}" if inside.get("device") else ""
    return Item("sandbox", True, f"bubblewrap runs NumPy{where}")


def check_queue(url: str) -> Item:
    """Redis answers a PING at ``url`` (the scaled-out queue)."""
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3).ping()
    except Exception as exc:
        return Item(
            "queue",
            False,
            f"Redis at {url} does not answer ({opencl_device.first_line(str(exc))})",
            "start redis-server, or check the URL given to --queue",
        )
    return Item("queue", True, f"Redis at {url} answers")


def check_server(login: Any) -> Item:
    """The course server of the saved login answers and knows the token."""
    from grader.student.client.connection import Client, ClientError

    try:
        with Client(login.server, login.token, timeout=10.0) as client:
            _status, me = client.call("GET", "/me")
    except ClientError as exc:
        return Item("server", False, f"{login.server}: {exc}", "check your network, or `grade login` again")
    return Item("server", True, f"{login.server} answers; logged in as {me.get('student', login.student)}")


def run(role: str = "student", queue: str | None = None, login: Any = None) -> list[Item]:
    """Every item for ``role`` ('student' or 'operator'); ``queue``: a Redis URL; ``login``: a saved login."""
    items = [check_python(), check_numpy()]
    opencl, choice = check_opencl()
    items += opencl
    items.append(check_sandbox(role, choice))
    if queue:
        items.append(check_queue(queue))
    if login is not None:
        items.append(check_server(login))
    return items


def healthy(items: list[Item]) -> bool:
    """Whether everything the course needs works (warnings do not count)."""
    return all(item.ok is not False for item in items)


def as_json(items: list[Item]) -> str:
    return json.dumps({"ok": healthy(items), "items": [asdict(item) for item in items]}, indent=2)


def report(role: str, as_json_output: bool, queue: str | None = None, login: Any = None) -> int:
    """Print every item (text or ``--json``); the exit status: 0 when the course's needs are met, else 1."""
    import click

    items = run(role, queue, login)
    if as_json_output:
        click.echo(as_json(items))
    else:
        for item in items:
            click.echo(item.line())
        click.echo(
            "Everything the course needs works."
            if healthy(items)
            else "Something the course needs does not work: see the fix beside each FAIL."
        )
    return 0 if healthy(items) else 1
