"""Where a stopped child was: the student's code in a ``faulthandler`` dump, named by its function.

The worker registers :mod:`faulthandler` on SIGUSR1 (the parent asks) and on
SIGXCPU (its CPU budget ran out), writing the stack of every thread to a pipe
of its own. This module reads such a dump: :func:`student_frame` finds the
innermost frame in the student's folder (most recent call first), and
:func:`enclosing_function` names the function around that line from the
student's own source, parsed here (faulthandler prints only the bare function
name, and ``forward`` alone does not tell ``Tanh.forward`` from
``Sigmoid.forward``).

The dump comes from the student's process, which may write anything on that
pipe: a forged dump can only name a place in the student's own files, and the
only use of a place is to word the student's own timeout and to stop another
of their own exercises that is stuck in a place that already ran out of time.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from grader.student.sanitize import clean_text

_FRAME = re.compile(r'^\s*File "(?P<file>[^"\n]+)", line (?P<line>\d+) in (?P<name>\S+)')


@dataclass(frozen=True)
class Place:
    """A line of the student's code: ``file`` relative to their folder, the enclosing ``function``."""

    file: str
    line: int
    function: str

    @property
    def key(self) -> tuple[str, str]:
        """Two samples of one loop: same file, same function (the line moves around the loop)."""
        return (self.file, self.function)

    def describe(self) -> str:
        """'Tanh.forward (activations.py, line 13)'."""
        return f"{self.function} ({self.file}, line {self.line})"


def student_frame(dump: str, folder: str) -> tuple[str, int] | None:
    """(path relative to ``folder``, line) of the innermost frame below ``folder`` in a dump, or None."""
    prefix = folder.rstrip("/") + "/"
    for line in dump.splitlines():
        match = _FRAME.match(line)
        if match and match["file"].startswith(prefix):
            return match["file"][len(prefix) :], int(match["line"])
    return None


def enclosing_function(source: bytes, line: int) -> str:
    """The qualified name of the innermost function or class around ``line`` ('Tanh.forward'), or '<module>'."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "<module>"
    names: list[str] = []
    body: list[ast.stmt] = list(tree.body)
    while True:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if first <= line <= (node.end_lineno or node.lineno):
                    names.append(node.name)
                    body = list(node.body)
                    break
        else:
            return ".".join(names) or "<module>"


def locate(dump: str, folder: str, files: dict[str, bytes]) -> Place | None:
    """The student's innermost place in ``dump`` (``files``: the ingested sources), or None."""
    found = student_frame(dump, folder)
    if found is None or found[0] not in files:
        return None
    rel, line = found
    return Place(clean_text(rel, 200), line, clean_text(enclosing_function(files[rel], line), 200))
