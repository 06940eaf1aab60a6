"""A crash located in the student's own file from its traced run and the reference's names, shapes and kinds.

The student's topic file ran a failing case with its assignments recorded
(``grader.student.engine.trace``). :func:`locate_crash` names the line that made
the crash: the line that raised, or where a value it reads became None, took a
shape the reference's value of the same name never has, or where a dict key
looked up and missing was stored. It needs of the reference only its records'
names, roles, kinds and shapes (no value, no line) and the string keys its file
names: what a case pack may carry without giving an answer away, so the handout
locates crashes offline (``grade release`` stores them: grader/course/packs.py).
Value divergences need the reference's values: grader/course/align.py, live only.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Any

from grader.student.engine.ops import ScriptResult
from grader.student.engine.trace import Record

FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def statement(tree: ast.Module, line: int) -> ast.stmt | None:
    """The innermost statement that starts on ``line`` (a simple one before an ``if`` or a loop there)."""
    return statements(tree).get(line)


@functools.lru_cache(maxsize=8)
def statements(tree: ast.Module) -> dict[int, ast.stmt]:
    """Each line's statement as :func:`statement` finds it, for a whole tree at once (a tree is walked once)."""
    found: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and (node.lineno not in found or not hasattr(node, "body")):
            found[node.lineno] = node
    return found


def reads(statement: ast.stmt | None) -> list[str]:
    """What a statement reads, as the trace names it: names, attributes, subscripts (``x``, ``self.m[key]``)."""
    if statement is None:
        return []
    value = getattr(statement, "value", None) or getattr(statement, "test", None) or getattr(statement, "iter", None)
    names: list[str] = []
    for node in ast.walk(value) if value is not None else []:
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(
            getattr(node, "ctx", None), ast.Load
        ):
            names.append(ast.unparse(node))  # (as the trace names what an assignment to it recorded)
    if isinstance(statement, ast.AugAssign):  # (``x += 1`` reads x)
        names.append(ast.unparse(statement.target))
    for target in getattr(statement, "targets", []):  # (``grad[i] = ...`` reads grad, ``self.m[k] = ...`` self.m)
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            names.append(ast.unparse(target.value))
    return names


def code(lines: list[str], line: int) -> str:
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def strings(tree: ast.Module) -> set[str]:
    """Every string constant of a file (the reference's: the keys it names)."""
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def last_made(records: list[Record], name: str) -> Record | None:
    """The last record that gave the student's ``name`` its value (for an attribute, ``bn.mean`` and
    ``self.mean`` alike: a helper names the layer otherwise), or None."""
    made = [r for r in records if r.name == name and r.role in ("assign", "arg")]
    if "." in name:  # (the latest of either: ``bn.dgamma = None`` in a helper after ``self.dgamma = None``)
        made += [
            r
            for r in records
            if r.role == "assign" and r.name.split(".")[-1] == name.split(".")[-1] and "." in r.name and r.name != name
        ]
    return max(made, key=lambda r: r.seq) if made else None


def locate_crash(
    topic: str,
    student: ScriptResult,
    records: list[Record],
    reference: list[Record],
    lines: list[str],
    tree: ast.Module,
    reference_keys: set[str],
) -> dict[str, Any] | None:
    """The line of ``topic``'s file that raised, and the shapes (or None) of the values it reads.

    ``records``: the student's traced run; ``reference``: the reference's records of the same case (their names,
    roles, kinds and shapes are read, never a value); ``reference_keys``: the string keys the reference's file
    names (:func:`strings`); ``lines`` and ``tree``: the student's file.

    Where one of those values is None, the location is the line that made it None: its assignment, or for
    a helper's argument the caller's line (the traceback's frame above). A value read back as None by the
    case itself (``BadOutputError``: ``dgamma returned None``) is located at the assignment that set it so.
    """
    assert student.error is not None
    error = f"{student.error.get('type')}: {student.error.get('message', '')}".strip()
    frames = [m for m in FRAME.finditer(student.error.get("traceback", "")) if Path(m["file"]).name == f"{topic}.py"]
    if not frames:
        read_back = re.match(r"(\w+) returned None", student.error.get("message", ""))
        made = last_made(records, "self." + read_back.group(1)) if read_back else None
        if made is not None and made.kind == "none":
            return {
                "file": f"{topic}.py",
                "line": made.line,
                "code": code(lines, made.line),
                "words": f"`{made.name}` is set to None here and read back as None ({error})",
            }
        bad = not_numeric(records, reference)
        if bad is None:
            return None
        what = "None" if bad.kind == "none" else "not an array of numbers"
        return {
            "file": f"{topic}.py",
            "line": bad.line,
            "code": code(lines, bad.line),
            "words": f"`{bad.name}` is {what} here where the reference's is numbers ({error})",
        }
    line = int(frames[-1]["line"])
    key = key_origin(
        student.error, line, tree, {r.line for r in records} | {int(f["line"]) for f in frames}, reference_keys
    )
    if key is not None:
        return {
            "file": f"{topic}.py",
            "line": key[0],
            "code": code(lines, key[0]),
            "words": f"{key[1]}; line {line} (`{code(lines, line)}`) then raised {error}",
        }
    parts = []
    origin: tuple[int, str] | None = None
    for name in dict.fromkeys(reads(statement(tree, line))):
        last = last_made(records, name)
        if last is None:
            continue
        if last.kind == "none":
            if last.role == "arg" and len(frames) > 1:  # the caller's line, or where what it passes became None
                caller = int(frames[-2]["line"])
                passed = none_origin(reads(statement(tree, caller)), records, tree)
                last = passed if passed is not None else last
                if passed is None:
                    origin = origin or (
                        caller,
                        f"this line passes None as `{name}`; line {line} (`{code(lines, line)}`) then raised {error}",
                    )
            if last.role == "assign":
                last = none_origin([last.name], records, tree) or last
                said = f"`{name}` is None (from line {last.line}: `{code(lines, last.line)}`)"
                origin = origin or (
                    last.line,
                    f"`{last.name}` is None from here; line {line} (`{code(lines, line)}`) then raised {error}",
                )
            else:
                said = f"`{name}` is None (passed by the caller)"
        elif last.shape is not None and last.shape != ():
            said = f"`{name}` has shape {last.shape}" + (
                f" from line {last.line} (`{code(lines, last.line)}`)" if last.role == "assign" else ""
            )
            theirs = [
                r
                for r in reference
                if r.role in ("assign", "arg") and r.name.split(".")[-1] == name.split(".")[-1] and r.shape is not None
            ]
            if theirs and last.shape not in shapes(last, reference):
                said += f"; the reference's `{theirs[-1].name}` has shape {theirs[-1].shape}"
        else:
            continue
        parts.append(said)
    test = raising_test(tree, line) if origin is None else None
    if test is not None:
        none = none_origin(reads(statement(tree, test)), records, tree)  # (a test reading a None: where it began)
        origin = (
            (
                none.line,
                f"`{none.name}` is None from here; the test on line {test} then sent the input to the"
                f" `raise` on line {line} ({error})",
            )
            if none is not None
            else (test, f"this test sends the input to the `raise` on line {line} ({error})")
        )
    if origin is None:
        shaped = shape_origin(list(reads(statement(tree, line))), records, reference, tree)
        if shaped is not None:
            parted, counterpart = shaped
            origin = (
                parted.line,
                f"`{parted.name}` has shape {parted.shape} here where the reference's"
                f" `{counterpart.name}` has shape {counterpart.shape}; line {line}"
                f" (`{code(lines, line)}`) then raised {error}",
            )
    if origin is not None:
        return {"file": f"{topic}.py", "line": origin[0], "code": code(lines, origin[0]), "words": origin[1]}
    words = f"raised {error}" + (" — " + "; ".join(parts) if parts else "")
    return {"file": f"{topic}.py", "line": line, "code": code(lines, line), "words": words}


def counterpart(s: Record, reference: list[Record]) -> Record | None:
    """The reference's record of the same name made in the same role, in the same function if it has one there
    (the last such), else in any."""
    last = s.name.split(".")[-1]
    named = [r for r in reference if r.role == s.role and r.name.split(".")[-1] == last]
    same_function = [r for r in named if r.function == s.function]
    found = same_function or named
    return found[-1] if found else None


def shapes(s: Record, reference: list[Record]) -> set[tuple[int, ...] | None]:
    """Every shape the reference gives the name of ``s`` in its role (in the same function if it has it there)."""
    last = s.name.split(".")[-1]
    named = [r for r in reference if r.role == s.role and r.name.split(".")[-1] == last]
    return {r.shape for r in ([r for r in named if r.function == s.function] or named)}


def none_origin(names: list[str], records: list[Record], tree: ast.Module) -> Record | None:
    """The first assignment that made one of ``names`` None, followed back: ``g = self.buffers[key]`` is None
    because ``self.buffers[key] = None`` made it so; or None when none of them is None."""

    def assigned(name: str) -> Record | None:
        made = last_made([r for r in records if r.role == "assign"], name)
        return made if made is not None and made.kind == "none" else None

    made = next((m for m in map(assigned, names) if m is not None), None)
    while made is not None:
        earlier = next(
            (m for m in map(assigned, reads(statement(tree, made.line))) if m is not None and m.seq < made.seq), None
        )
        if earlier is None:
            return made
        made = earlier
    return None


def raising_test(tree: ast.Module, line: int) -> int | None:
    """For a ``raise`` on ``line`` that an ``if`` (or ``elif``) decides: the line of that test, or None.

    (A valid input refused by ``raise ValueError(...)``: the test sent it there, not the raise.)
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.test.lineno != line:
            for branch in (node.body, node.orelse):
                if any(isinstance(child, ast.Raise) and child.lineno == line for child in branch):
                    return node.test.lineno
    return None


def not_numeric(records: list[Record], reference: list[Record]) -> Record | None:
    """The first of the student's values (an assignment or a return) that is None or not numbers (an array of
    objects, e.g. ``np.where(mask, dout, None)``) where the reference's counterpart is numbers, or None."""
    for s in records:
        if s.role in ("assign", "return") and s.kind in ("none", "t"):
            theirs = counterpart(s, reference)
            if theirs is not None and theirs.kind in ("v", "big"):
                return s
    return None


def shape_origin(
    names: list[str], records: list[Record], reference: list[Record], tree: ast.Module
) -> tuple[Record, Record] | None:
    """The earliest assignment, among the values ``names`` were made from (followed back through the lines that
    made them), whose shape differs from its counterpart's in the reference, with that counterpart; or None.

    (A broadcast error on line 158 reading ``inv_std`` of shape (4,) made from ``var`` of shape (4,) on line 156:
    the reference's ``var`` has shape (4, 1), so line 156 is where the shapes parted.)
    """
    found: tuple[Record, Record] | None = None
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        made = last_made(records, name)
        if made is None or made.role != "assign" or made.kind not in ("v", "big"):
            continue
        theirs = counterpart(made, reference)
        if theirs is None or theirs.shape is None or made.shape in shapes(made, reference):
            continue  # (a loop makes a name in several shapes: any of them is the reference's)
        if found is None or made.seq < found[0].seq:
            found = (made, theirs)
        todo.extend(reads(statement(tree, made.line)))
    return found


def key_origin(
    error: dict[str, Any], line: int, tree: ast.Module, executed: set[int], reference_keys: set[str]
) -> tuple[int, str] | None:
    """For a KeyError of a string key raised on ``line``: the line of the student's file that stored the key
    wrongly, with words, or None.

    The keys a file stores are its dict literals' keys and the constants of its subscript assignments
    (``self.cache = {"x_hat": ...}``, ``grads["W"] = ...``), in statements that ran. The key looked up is
    stored on another line: that line named it (``{"W1x": ...}`` looked up by an optimiser that reads each key
    of the dict). Else the stored key nothing reads back and nearest the one looked up (``"inv_std"`` read,
    ``"inv_sdt"`` stored): the stored key's own line (a dict literal over several lines: the key's line), when
    the reference names the key looked up and not the one stored (else the key read may be the wrong one: the
    line that raised says so itself).
    """
    import difflib

    if error.get("type") != "KeyError":
        return None
    try:
        key = ast.literal_eval(str(error.get("message", "")))
    except (ValueError, SyntaxError):
        return None
    if not isinstance(key, str):
        return None
    stored: list[tuple[int, str]] = []  # (the key's line, the key)
    loaded: set[str] = set()
    for statement in ast.walk(tree):
        if not isinstance(statement, ast.stmt) or hasattr(statement, "body") or statement.lineno not in executed:
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Dict):
                stored += [
                    (k.lineno, k.value) for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
                ]
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                if isinstance(node.ctx, ast.Store):
                    stored.append((node.slice.lineno, node.slice.value))
                else:
                    loaded.add(node.slice.value)
    named = [at for at, k in stored if k == key and at != line]
    if named:
        return named[0], f"this line stores the key '{key}' that is then looked up and missing"
    unread = {k: at for at, k in stored if k not in loaded and k != key}
    near = difflib.get_close_matches(key.lower(), [k.lower() for k in unread], n=1, cutoff=0.6)
    if not near:
        return None
    wrong = next(k for k in unread if k.lower() == near[0])
    if key not in reference_keys or wrong in reference_keys:
        return None
    return unread[wrong], f"this line stores the key '{wrong}', and the key '{key}' is looked up"


# --------------------------------------------------------------------------- what a case pack carries

CARRIED_ROLES = ("assign", "arg", "return")  # the records a crash's location reads of the reference's
KEY = re.compile(r"[A-Za-z_]\w{0,39}")  # a string of the reference's file that may be a key (never a message)


def shapes_document(records: list[Record]) -> list[list[Any]]:
    """The reference's records as a case pack carries them: [function, role, name, kind, shape or None] each, in
    order, of the roles :func:`locate_crash` reads; no value and no line of the reference's file."""
    return [
        [r.function, r.role, r.name, r.kind, None if r.shape is None else list(r.shape)]
        for r in records
        if r.role in CARRIED_ROLES
    ]


def shapes_records(document: list[list[Any]]) -> list[Record]:
    """The records of :func:`shapes_document`, read back (a value's shape as its ``size``, the value None)."""
    return [
        Record(seq, 0, function, role, name, kind, None, None if shape is None else tuple(int(n) for n in shape))
        for seq, (function, role, name, kind, shape) in enumerate(document)
    ]


def carried_keys(source: str) -> list[str]:
    """The string constants of the reference's file that may be dict keys (identifiers), sorted."""
    return sorted(k for k in strings(ast.parse(source)) if KEY.fullmatch(k))
