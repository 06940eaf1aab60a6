"""A grader killed outright leaves its copy of a hand-in in /tmp only until the next grader starts.

Each private folder holds a lock for its maker's lifetime (grader/student/sandbox/private_tmp.py);
the next folder made with the same prefix removes the folders whose lock is free.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from grader.student.sandbox.private_tmp import OWNER, PrivateFolder, sweep_abandoned
from grader.student.sandbox.runner import Limits, Workspace

ROOT = Path(__file__).resolve().parents[3]

HOLD = """
import sys
{make}
print(folder, flush=True)
sys.stdin.read()  # until the test closes stdin (or kills this process)
"""


def start_holder(make: str) -> tuple[subprocess.Popen[str], Path]:
    """A process that made a folder with ``make`` (binding ``folder``) and keeps running; and that folder."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(make=make)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def stop(proc: subprocess.Popen[str], kill: bool) -> None:
    """SIGKILL the holder (kill) or let it end by closing its stdin; wait, and close its pipes."""
    assert proc.stdin is not None and proc.stdout is not None
    if kill:
        proc.send_signal(signal.SIGKILL)
    proc.stdin.close()
    proc.wait()
    proc.stdout.close()


def test_the_folder_of_a_killed_maker_is_removed_by_the_next_one_and_a_live_ones_is_not() -> None:
    prefix = f"normgrade-test-{secrets.token_hex(4)}-"
    make = f"from grader.student.sandbox.private_tmp import PrivateFolder\nfolder = PrivateFolder({prefix!r}).path"
    killed, abandoned = start_holder(make)
    alive, held = start_holder(make)
    (abandoned / "copy.py").write_text("the hand-in")
    (abandoned / "copy.py").chmod(0o444)
    unlocked = Path(f"/tmp/{prefix}no-owner")  # being made, or made before the locks: left alone
    unlocked.mkdir()
    try:
        stop(killed, kill=True)
        with PrivateFolder(prefix) as mine:
            assert (mine / OWNER).exists()
            assert not abandoned.exists()
            assert held.is_dir() and unlocked.is_dir()
            assert sweep_abandoned(prefix) == []  # this one's own and the live one's are held
        assert not mine.exists()
    finally:
        stop(alive, kill=False)
        unlocked.rmdir()
    assert sweep_abandoned(prefix) == [held]  # its maker ended without removing it: now it goes too


def test_a_killed_graders_job_folder_is_gone_once_the_next_grading_starts() -> None:
    make = (
        "from grader.student.sandbox.runner import Limits, Workspace\n"
        "folder = Workspace(Limits(sandbox=False), False).private"
    )
    proc, private = start_holder(make)
    assert any(p.name == "limits.json" for p in private.rglob("*"))
    stop(proc, kill=True)
    assert private.exists()
    workspace = Workspace(Limits(sandbox=False), False)
    try:
        assert not private.exists()
    finally:
        workspace.close()
    assert not workspace.private.exists()
    assert os.path.basename(workspace.private).startswith("normgrade-")
