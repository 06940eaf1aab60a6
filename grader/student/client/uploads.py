"""What an upload to the course server may hold: the known exercise files, size-capped.

Shared by the client (``grade submit`` collects exactly these files) and the
server (which refuses anything else, before storing a byte). Allowed names:

- ``__init__.py``, ``base.py`` (the package the grader loads) and one
  ``<topic>.py`` per CPU topic of ``grader.student.engine.catalogue``;
- ``kernels/<name>.cl`` with ``name`` made of lowercase letters, digits and ``_``.

Nothing else: no folders but ``kernels/``, no ``..``, no absolute paths, no
backslashes. Contents are UTF-8 text without NUL characters.
"""

from __future__ import annotations

import re
from pathlib import Path

from grader.student.engine import catalogue
from grader.student.errors import UsageError

MAX_FILE_BYTES = 256 * 1024  # one file
MAX_UPLOAD_BYTES = 1024 * 1024  # a whole request body (files plus JSON overhead)
MAX_FILES = 32
PACKAGE_FILES = ("__init__.py", "base.py")
_KERNEL_RE = re.compile(r"kernels/[a-z_][a-z0-9_]{0,63}\.cl")  # matched whole: "kernels/x.cl\n" is no name


def python_files() -> list[str]:
    """The Python file names an upload may hold, in a fixed order."""
    return list(PACKAGE_FILES) + [f"{topic}.py" for topic in catalogue.CPU_TOPICS]


def allowed_name(name: str) -> bool:
    """Whether ``name`` is a file an upload may hold (see the module docstring)."""
    return name in python_files() or bool(_KERNEL_RE.fullmatch(name))


def allowed_summary() -> str:
    """The allowed names in words, for error messages."""
    return ", ".join(python_files()) + ", kernels/*.cl"


def check_files(files: object) -> dict[str, str]:
    """Validate an upload's ``files`` mapping; UsageError (one line) on the first problem."""
    if not isinstance(files, dict) or not files:
        raise UsageError('the upload has no files: send {"files": {"activations.py": "..."}}')
    if len(files) > MAX_FILES:
        raise UsageError(f"the upload has {len(files)} files; at most {MAX_FILES} are accepted")
    checked: dict[str, str] = {}
    for name, text in files.items():
        shown = repr(name)[:80]
        if not isinstance(name, str) or not allowed_name(name):
            raise UsageError(f"{shown} is not an exercise file: upload only {allowed_summary()}")
        if not isinstance(text, str):
            raise UsageError(f"{shown}: the content must be text")
        if "\x00" in text:
            raise UsageError(f"{shown} contains NUL characters: upload the source text")
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{shown} is {size} bytes; files of at most {MAX_FILE_BYTES // 1024} KiB are accepted")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UsageError(f"{shown} is not valid UTF-8 text ({exc.reason})") from exc
        checked[name] = text
    if not any(n.endswith(".py") and n not in PACKAGE_FILES or n.endswith(".cl") for n in checked):
        raise UsageError(f"the upload holds no exercise file: upload some of {allowed_summary()}")
    return checked


def collect_files(folder: Path) -> dict[str, str]:
    """Read the allowed files present in a student's exercises folder (client side).

    Raises UsageError when the folder is missing, holds no exercise file, or a
    file is too large or not UTF-8 (the server would refuse it anyway).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"'{folder}' is not a folder: pass --path to the folder with your exercise files")
    names = [n for n in python_files() if (folder / n).is_file()]
    kernels = folder / "kernels"
    if kernels.is_dir():
        names += sorted(f"kernels/{p.name}" for p in kernels.glob("*.cl") if allowed_name(f"kernels/{p.name}"))
    files: dict[str, str] = {}
    for name in names:
        path = folder / name
        if path.is_symlink():
            raise UsageError(f"{path} is a symbolic link: upload the file itself")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{path} is {size} bytes; files of at most {MAX_FILE_BYTES // 1024} KiB are accepted")
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path} is not UTF-8 text: save it as UTF-8") from exc
    return check_files(files) if files else check_files({})
