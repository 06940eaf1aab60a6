"""Scaffolding levels: how much of each derivation the stubs in ``exercises/`` give away.

Each stub is written once, in ``exercises/``, with the parts that give the
answer marked by block markers on lines of their own (inside a docstring, or
inside a ``/* ... */`` comment of a ``.cl`` file, where a leading ``*`` is
allowed)::

    [derive]
    the definitions that a student at `derive` still gets (a forward's formula,
    what to cache) but that `contract` leaves out
    [/derive]
    [guided]
    the derived answer: a backward's closed form, an update rule's factor,
    an initialiser's constant, a kernel's reduction strategy
    [/guided]

A block ``[L] ... [/L]`` is shown at level L and at every level that gives
more away (``contract`` < ``derive`` < ``guided``); the marker lines
themselves never show in a rendered stub. Text outside any block (signatures,
shapes, conventions, errors to raise, what must not be mutated, the course
section to read) shows at every level. Blocks do not nest.

In the instructor repository ``exercises/`` is the marked source and works as
it is (the markers are plain docstring or comment lines); ``grade release``
renders the handout's stubs with :func:`render_tree` at the course's levels.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from grader.student.errors import GraderError
from grader.student.engine.scaffolding import DEFAULT_LEVEL, LEVELS  # from least to most given away

MARKED = ("derive", "guided")  # the block kinds
_MARKER = re.compile(r"\s*(?:\*\s*)?\[(/?)(derive|guided)\]\s*")
_CLOSING_QUOTES = re.compile(r'\s*("""|\'\'\')\s*')


class ScaffoldError(GraderError):
    """A stub's markers are malformed, or a level is unknown (one line: the file, the line, what to do)."""


def check_level(level: str, where: str = "level") -> str:
    """``level`` when it is one of LEVELS, else ScaffoldError naming ``where``."""
    if level not in LEVELS:
        raise ScaffoldError(f"{where} = {level!r} is not a scaffolding level: use one of {', '.join(LEVELS)}")
    return level


def shows(block: str, level: str) -> bool:
    """Whether a ``[block]`` shows at ``level``."""
    return LEVELS.index(level) >= LEVELS.index(block)


def blocks(text: str, name: str = "<stub>") -> list[tuple[str, list[str]]]:
    """The marked blocks of a stub's text, in order: (kind, the lines between its markers)."""
    found: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        marker = _MARKER.fullmatch(line)
        if marker is None:
            if current is not None:
                current[1].append(line)
            continue
        closing, kind = marker.group(1) == "/", marker.group(2)
        if not closing and current is not None:
            raise ScaffoldError(
                f"{name}:{number}: [{kind}] opens inside [{current[0]}]: close it first with [/{current[0]}]"
            )
        if closing and (current is None or current[0] != kind):
            raise ScaffoldError(f"{name}:{number}: [/{kind}] closes no open [{kind}]")
        if closing:
            found.append(current)  # type: ignore[arg-type]
            current = None
        else:
            current = (kind, [])
    if current is not None:
        raise ScaffoldError(f"{name}: [{current[0]}] is never closed: add [/{current[0]}]")
    return found


def render(text: str, level: str, name: str = "<stub>") -> str:
    """A stub's text at ``level``: marker lines dropped, blocks that do not show there dropped with them.

    Where a dropped block leaves two blank lines in a row, one goes; where it
    leaves a blank line just before a docstring's closing quotes, that goes.
    """
    check_level(level)
    blocks(text, name)  # validates the markers (one-line ScaffoldError)
    out: list[str] = []
    hidden = dropped = False
    for line in text.splitlines():
        marker = _MARKER.fullmatch(line)
        if marker is not None:
            hidden = marker.group(1) != "/" and not shows(marker.group(2), level)
            dropped = True
            continue
        if hidden:
            continue
        if dropped and _blank(line) and out and _blank(out[-1]):
            continue  # the dropped block sat between two blank lines: keep one
        if dropped and _CLOSING_QUOTES.fullmatch(line) and out and _blank(out[-1]):
            out.pop()
        dropped = False
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _blank(line: str) -> bool:
    """An empty line of a docstring, or of a ``/* ... */`` comment (`` *``)."""
    return line.strip() in ("", "*")


def exercises_in(relative: str, text: str) -> dict[str, tuple[int, int]]:
    """The exercises a stub file defines, with the (first, last) line of each (1-based).

    ``relative`` is the path under ``exercises/`` (``normalization.py``,
    ``kernels/activations.cl``). A ``.py`` file: its top-level classes and
    functions named in the catalogue. A ``.cl`` file: every ``__kernel``, and
    the whole file for each (a kernel file renders at one level).
    """
    from grader.student.engine.catalogue import TOPIC_EXERCISES

    if relative.endswith(".cl"):
        lines = text.count("\n") + 1
        return {f"kernels.{name}": (1, lines) for name in re.findall(r"__kernel\s+void\s+(\w+)", text)}
    topic = relative.removesuffix(".py")
    names = set(TOPIC_EXERCISES.get(topic, ()))
    return {
        f"{topic}.{node.name}": (node.lineno, node.end_lineno or node.lineno)
        for node in ast.parse(text).body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in names
    }


def render_stub(relative: str, text: str, levels: Mapping[str, str], default: str = DEFAULT_LEVEL) -> str:
    """A stub file rendered with each exercise at its own level (``levels``: exercise id -> level).

    The lines of a definition render at its exercise's level; the rest of the
    file (module docstring, imports) and a ``.cl`` file as a whole at the
    level that gives most away among the file's exercises, so that a student
    never loses a statement that one of the file's exercises promises.
    """
    spans = exercises_in(relative, text)
    chosen = {e: check_level(levels.get(e, default), e) for e in spans}
    file_level = max(chosen.values(), key=LEVELS.index, default=check_level(default))
    lines = text.splitlines(keepends=True)
    cuts = sorted(((first, last, chosen[e]) for e, (first, last) in spans.items() if relative.endswith(".py")))
    out: list[str] = []
    position = 1
    for first, last, level in cuts:
        out.append(render("".join(lines[position - 1 : first - 1]), file_level, relative))
        out.append(render("".join(lines[first - 1 : last]), level, relative))
        position = last + 1
    out.append(render("".join(lines[position - 1 :]), file_level, relative))
    return "".join(out)


def render_tree(source: Path, target: Path, levels: Mapping[str, str], default: str = DEFAULT_LEVEL) -> None:
    """Write every stub of ``source`` (an ``exercises/`` folder) into ``target``, rendered (caches left out)."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if not path.is_file() or "__pycache__" in relative.split("/"):
            continue
        dest = target / relative
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix in (".py", ".cl"):
            dest.write_text(render_stub(relative, path.read_text(encoding="utf-8"), levels, default), encoding="utf-8")
        else:
            shutil.copyfile(path, dest)


__all__ = [
    "DEFAULT_LEVEL",
    "LEVELS",
    "ScaffoldError",
    "blocks",
    "check_level",
    "exercises_in",
    "render",
    "render_stub",
    "render_tree",
    "shows",
]
