"""Ingest: copy a student's hand-in into a grading job before anything of it runs.

The grader never grades (or mounts) the student's folder in place. It reads
the exercise files out of it into memory, under caps checked before a byte is
read, and writes them into the job's own folder, which the sandbox mounts
read-only. What is taken:

- ``*.py`` files whose names are Python identifiers, at the top of the folder
  or in sub-folders (identifier names, at most :data:`MAX_DEPTH` deep);
- ``kernels/*.cl`` files.

What is refused, each with a one-line reason in :attr:`Ingested.refused`
(reported, never graded): symbolic links (``normalization.py`` pointing at a
classmate's file), hard links (a second name for the reference or for
someone else's file), devices, FIFOs, sockets, and files that are not
exercise files. Hidden entries (``.git``, ``.ipynb_checkpoints``) and
``__pycache__`` are skipped silently.

Caps (``IngestError``, the whole hand-in refused, before reading): more than
:data:`MAX_ENTRIES` entries looked at, more than :data:`MAX_FILES` exercise
files, one larger than :data:`MAX_FILE_BYTES`, or more than
:data:`MAX_TOTAL_BYTES` in all. Files are opened with ``O_NOFOLLOW`` relative
to their folder's descriptor and checked again with ``fstat`` on the open
descriptor, so a file swapped for a link between the listing and the read is
refused too.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.student.errors import GraderError
from grader.student.sanitize import clean_text

MAX_ENTRIES = 2000
MAX_FILES = 64
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 8 << 20
MAX_DEPTH = 3
KERNELS_DIR = "kernels"


class IngestError(GraderError):
    """The hand-in cannot be graded at all (too many or too large files, not a folder)."""


@dataclass
class Ingested:
    """The exercise files of a hand-in (relative POSIX path -> bytes) and what was refused, with why.

    ``refused`` keys are the entries' relative paths as found (``normalization.py``,
    ``notes/``); the reasons are cleaned for printing.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # relative path -> one-line reason

    def files_hash(self) -> str:
        """sha256 over the files: sorted relative paths and contents (what ``grade batch`` compares)."""
        digest = hashlib.sha256()
        for name in sorted(self.files):
            data = self.files[name]
            digest.update(name.encode() + b"\0")
            digest.update(len(data).to_bytes(8, "little") + data)
        return digest.hexdigest()

    def write_into(self, folder: Path) -> None:
        """Write the files below ``folder`` (created), world-readable, read-only."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in sorted(self.files.items()):
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o444)


def _wanted(rel: tuple[str, ...], is_dir: bool, kernels_at_top: bool = False) -> bool:
    """Whether an entry at relative path ``rel`` is part of an exercises folder (``.cl`` at the top too, if asked)."""
    name = rel[-1]
    if is_dir:
        return name.isidentifier() and len(rel) <= MAX_DEPTH
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem.isidentifier():
        return False
    if suffix == "py":
        return True
    return suffix == "cl" and (rel[:-1] == (KERNELS_DIR,) or (kernels_at_top and len(rel) == 1))


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refusal(shown: str, st: os.stat_result) -> str | None:
    """Why a listed exercise file cannot be taken (None: it can)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{shown} is {_kind(st.st_mode)}: hand in the file itself"
    if st.st_nlink > 1:
        return f"{shown} has {st.st_nlink} hard links (another name for someone else's file?): hand in a plain copy"
    return None


def read_submission(folder: Path | str, kernels_at_top: bool = False) -> Ingested:
    """The exercise files of ``folder`` and the refusals; IngestError when a cap is exceeded.

    ``kernels_at_top``: ``.cl`` files at the top of the folder are taken as
    ``kernels/<name>`` (a Gradescope upload of loose files).
    """
    root = Path(folder)
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise IngestError(f"'{clean_text(root)}' cannot be opened as a folder ({exc.strerror})") from None
    result = Ingested()
    seen = total = 0  # entries looked at, bytes taken
    pending: list[tuple[int, tuple[str, ...]]] = [(top, ())]
    try:
        while pending:
            dir_fd, prefix = pending.pop()
            try:
                seen, total = _read_folder(dir_fd, prefix, result, pending, seen, total, kernels_at_top)
            finally:
                if dir_fd != top:
                    os.close(dir_fd)
    finally:
        for dir_fd, _ in pending:
            if dir_fd != top:
                os.close(dir_fd)
        os.close(top)
    return result


def _read_folder(
    dir_fd: int,
    prefix: tuple[str, ...],
    result: Ingested,
    pending: list[tuple[int, tuple[str, ...]]],
    seen: int,
    total: int,
    kernels_at_top: bool,
) -> tuple[int, int]:
    """Take the wanted files of one folder into ``result`` and queue its wanted sub-folders.

    ``seen`` and ``total`` are the entries looked at and the bytes taken so far; returns them updated.
    """
    for entry in sorted(os.scandir(dir_fd), key=lambda e: e.name):
        seen += 1
        if seen > MAX_ENTRIES:
            raise IngestError(
                f"the hand-in holds more than {MAX_ENTRIES} files and folders: hand in only your exercises folder"
            )
        name = entry.name
        rel = prefix + (name,)
        key = "/".join(rel)
        shown = clean_text(key)
        if name.startswith(".") or name == "__pycache__":
            continue
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if _wanted(rel, is_dir=True):
                pending.append((os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd), rel))
            else:
                result.refused[key + "/"] = f"{shown}/ is not part of an exercises folder: ignored"
            continue
        if not _wanted(rel, is_dir=False, kernels_at_top=kernels_at_top):
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                result.refused[key] = f"{shown} is {_kind(st.st_mode)}: ignored"
            else:
                result.refused[key] = f"{shown} is not an exercise file (.py, or kernels/*.cl): ignored"
            continue
        reason = _refusal(shown, st)
        if reason:
            result.refused[key] = reason
            continue
        if len(result.files) >= MAX_FILES:
            raise IngestError(
                f"the hand-in has more than {MAX_FILES} exercise files: hand in only your exercises folder"
            )
        if st.st_size > MAX_FILE_BYTES or total + st.st_size > MAX_TOTAL_BYTES:
            raise IngestError(
                f"{shown} is {st.st_size} bytes: exercise files are limited to {MAX_FILE_BYTES >> 20} MiB "
                f"each and {MAX_TOTAL_BYTES >> 20} MiB in all"
            )
        data = _read_file(dir_fd, name, shown, result.refused, key)
        if data is not None:
            total += len(data)
            stored = f"{KERNELS_DIR}/{name}" if name.endswith(".cl") and len(rel) == 1 else key
            result.files[stored] = data
    return seen, total


def _read_file(dir_fd: int, name: str, shown: str, refused: dict[str, str], rel: str) -> bytes | None:
    """Read one listed file through an O_NOFOLLOW descriptor, re-checked with fstat (None: refused)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        refused[rel] = f"{shown} cannot be read ({exc.strerror}): hand in the file itself"
        return None
    try:
        st = os.fstat(fd)
        reason = _refusal(shown, st)
        if reason or st.st_size > MAX_FILE_BYTES:
            refused[rel] = reason or f"{shown} grew while it was read: hand it in again"
            return None
        chunks = []
        left = st.st_size + 1  # one byte more than announced: a file that grows is refused
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > st.st_size:
            refused[rel] = f"{shown} grew while it was read: hand it in again"
            return None
        return data
    finally:
        os.close(fd)
