"""Private temporary folders that a killed grader leaves behind only until the next one starts.

A grading run copies the hand-in into a private folder under the system's
temporary directory (the job folder of :class:`grader.student.sandbox.runner.Workspace`,
a server job's upload). A grader killed outright (SIGKILL, the out-of-memory
killer, a power cut) cannot remove it. So each folder holds an exclusive
``flock`` on its ``.owner`` file for as long as the process that made it
lives: the kernel drops that lock when the process dies, however it dies, and
in whatever PID namespace it ran. Making a folder first sweeps the folders of
the same prefix, owned by this user, whose lock can be taken: their makers
are gone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

OWNER = ".owner"


class PrivateFolder:
    """A folder (0700) under the temporary directory, locked for this process's lifetime; ``remove()`` it."""

    def __init__(self, prefix: str) -> None:
        sweep_abandoned(prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        # Locked before it gets the name a sweeper looks for: a folder is never seen unlocked while alive.
        claiming = self.path / (OWNER + ".new")
        self._fd: int | None = os.open(claiming, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        os.rename(claiming, self.path / OWNER)

    def remove(self) -> None:
        """Delete the folder and everything in it (a second call does nothing)."""
        remove_tree(self.path)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.remove()


def remove_tree(path: Path) -> None:
    """``rm -rf path``, also where parts were made read-only (a job folder's files are, for the sandbox)."""
    for entry in [path, *path.rglob("*")]:
        try:
            if not entry.is_symlink():
                entry.chmod(0o700)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def sweep_abandoned(prefix: str) -> list[Path]:
    """Remove the folders ``<tmp>/<prefix>*`` of this user whose maker died; returns them.

    A folder with no ``.owner`` (being made, or made before these locks) is
    left alone; so is one whose lock is held (its maker is alive).
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
                continue
            fd = os.open(os.path.join(entry.path, OWNER), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # held: its maker is alive
            remove_tree(Path(entry.path))
            removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed
