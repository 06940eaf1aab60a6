"""Where the student's computation leaves the reference's: dynamic alignment of two traced runs (round 5).

The student's topic file ran a failing case with its assignments recorded (``grader.student.engine.trace``,
in the sandbox); the reference runs the same case here with every intermediate recorded (its assignments
and each call, arithmetic and unary operation, inline ones too). :func:`locate` walks the student's
values in the order they were made and matches each against the reference's:

- a value **matches** when some reference value equals it (within 1e-6 relative), also up to
  keepdims (the same values, axes of length 1 aside) or a transpose;
- the **divergence** is the first student value (an array, made by an assignment or a return; a
  helper's argument is located where its caller assigns what the helper made of it) that matches nothing, while every value of the student's own that its line
  reads matched (or was never recorded: a module, a constant, an input);
- it is described **specifically** when it is a simple variant of a reference value: c times it (a
  factor, a sign), or a reduction (mean, sum, var or std, ddof 0 or 1) of a reference value over
  other axes than the reference's; else by the reference's corresponding value (the one of the same
  name, else of the same shape and nearest), and where the two lines' expressions differ, what the
  reference has there ("where you have `var` the reference has `running_var + eps`");
- a **crash** is located at the line of the student's file that raised, with the shape (or None) of
  each of the student's values that line reads, the line that made it, and the reference's shape of
  the value of the same name.

Only lines the student's code really executed are named (a record, or a traceback frame). The words
that quote the reference's code are said only at the ``guided`` scaffolding level (as a known
mistake's fix is); below it the location and the student's own values alone.
"""

from __future__ import annotations

import ast
import functools
import math
import re
import warnings
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from grader.student.engine.ops import Case, ScriptResult, run_script
from grader.student.engine.scaffolding import level_of
from grader.student.engine.trace import Record, read, traced

RTOL = 1e-6
REDUCTIONS: tuple[tuple[str, dict[str, int]], ...] = (("mean", {}), ("sum", {}), ("var", {"ddof": 0}), ("var", {"ddof": 1}), ("std", {"ddof": 0}),
              ("std", {"ddof": 1}))
MAX_REDUCED_SIZE = 20_000  # reference values larger than this are not reduced over other axes


def reference_trace(case: Case, topic: str) -> ScriptResult:
    """The reference's run of ``case`` with every intermediate of ``topic``'s file recorded."""
    from reference.opencl.emulation import reference_namespace

    run = traced(case, topic, expressions=True)
    return run_script(reference_namespace(), run.script, run.arrays)


def reference_source(topic: str) -> str:
    """The text of the reference's ``topic`` file."""
    import reference

    return (Path(reference.__file__).parent / f"{topic}.py").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- values


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        if a.size != b.size or np.squeeze(a).shape != np.squeeze(b).shape:
            return False
        a, b = np.squeeze(a), np.squeeze(b)
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size and np.all(np.isfinite(b)) else 1.0
    if a.size:  # the first elements already differ (most pairs compared): no need to compare them all
        x, y = float(a.flat[0]), float(b.flat[0])
        if math.isfinite(x) and math.isfinite(y) and abs(x - y) > 1e-8 * scale + RTOL * abs(y):
            return False
    with np.errstate(all="ignore"):
        return bool(np.allclose(a, b, rtol=RTOL, atol=1e-8 * scale, equal_nan=True))


def matches(value: np.ndarray, reference: list[Record]) -> bool:
    """``value`` equals some reference value (up to keepdims or a transpose)."""
    for r in reference:
        if r.value is None or r.value.size != value.size:
            continue
        if _same(value, r.value) or (r.value.ndim == 2 and _same(value, r.value.T)):
            return True
    return False


def _factor(value: np.ndarray, r: np.ndarray) -> float | None:
    """c with value = c r (c not 1 or 0), or None."""
    if value.shape != r.shape or not np.all(np.isfinite(r)) or not np.any(r) or not np.all(np.isfinite(value)):
        return None
    if np.ptp(r) == 0:  # a constant array (np.ones): any constant is some multiple of it, which says nothing
        return None
    c = float(np.sum(value * r) / np.sum(r * r))
    if c == 0 or abs(c - 1) < 1e-6 or not _same(value, c * r):
        return None
    return c


def _number(c: float) -> str:
    for name, v in (("-1", -1.0), ("2", 2.0), ("1/2", 0.5), ("-2", -2.0), ("-1/2", -0.5)):
        if abs(c - v) < 1e-9:
            return name
    return f"{c:.4g}"


def _reduced(r: np.ndarray, how: str, kwargs: dict[str, Any], axes: tuple[int, ...]) -> np.ndarray | None:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return np.asarray(getattr(np, how)(r, axis=axes, **kwargs))
        except (ValueError, TypeError):
            return None


def _reduction_words(how: str, kwargs: dict[str, Any], axes: tuple[int, ...]) -> str:
    ddof = f", ddof={kwargs['ddof']}" if kwargs.get("ddof") else ""
    axis = axes[0] if len(axes) == 1 else axes
    return f"np.{how}(..., axis={axis}{ddof})"


def variant(value: np.ndarray, reference: list[Record]) -> tuple[str, Record | None] | None:
    """Words saying which simple variant of a reference value ``value`` is (and the reference value the
    reference computes in its place), or None."""
    for r in reference:
        if r.value is None or r.value.size < 2:
            continue
        c = _factor(value, r.value)
        if c is not None:
            what = "the opposite sign of" if c == -1 else f"{_number(c)} times"
            return f"your value is {what} the reference's `{_short(r)}`", r
    for r in reference:
        if r.value is None or r.value.ndim < 2 or r.value.size > MAX_REDUCED_SIZE:
            continue
        for how, kwargs in REDUCTIONS:
            for n in range(1, r.value.ndim):
                for axes in combinations(range(r.value.ndim), n):
                    if math.prod(d for i, d in enumerate(r.value.shape) if i not in axes) != value.size:
                        continue  # (its size tells, before any reduction: most are not reduced at all)
                    out = _reduced(r.value, how, kwargs, axes)
                    if out is None or out.size != value.size or out.size < 2 or not _same(value, out):
                        continue
                    if matches(out, reference):
                        continue  # the reference computes it too: no variant
                    return f"your value is {_reduction_words(how, kwargs, axes)} of the reference's `{_short(r)}`", \
                        _reference_reduction(r, how, kwargs, reference)
    return None


def _reference_reduction(r: Record, how: str, kwargs: dict[str, Any], reference: list[Record]) -> Record | None:
    """The reduction of ``r`` the reference does compute (its axes), or None."""
    assert r.value is not None
    for other_how, other_kwargs in [(how, kwargs)] + [x for x in REDUCTIONS if x[0] == how]:
        for n in range(1, r.value.ndim + 1):
            for axes in combinations(range(r.value.ndim), n):
                out = _reduced(r.value, other_how, other_kwargs, axes)
                if out is None:
                    continue
                for candidate in reference:
                    if candidate.value is not None and candidate.value.size == out.size and _same(candidate.value, out):
                        return candidate
    return None


def _short(r: Record) -> str:
    return r.name if len(r.name) <= 60 else r.name[:57] + "..."


# --------------------------------------------------------------------------- source


def _statement(tree: ast.Module, line: int) -> ast.stmt | None:
    """The innermost statement that starts on ``line`` (a simple one before an ``if`` or a loop there)."""
    return _statements(tree).get(line)


@functools.lru_cache(maxsize=8)
def _statements(tree: ast.Module) -> dict[int, ast.stmt]:
    """Each line's statement as :func:`_statement` finds it, for a whole tree at once (a tree is walked once)."""
    found: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and (node.lineno not in found or not hasattr(node, "body")):
            found[node.lineno] = node
    return found


def _reads(statement: ast.stmt | None) -> list[str]:
    """What a statement reads, as the trace names it: names, attributes, subscripts (``x``, ``self.m[key]``)."""
    if statement is None:
        return []
    value = getattr(statement, "value", None) or getattr(statement, "test", None) or getattr(statement, "iter", None)
    names: list[str] = []
    for node in ast.walk(value) if value is not None else []:
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(getattr(node, "ctx", None),
                                                                                    ast.Load):
            names.append(ast.unparse(node))  # (as the trace names what an assignment to it recorded)
    if isinstance(statement, ast.AugAssign):  # (``x += 1`` reads x)
        names.append(ast.unparse(statement.target))
    for target in getattr(statement, "targets", []):  # (``grad[i] = ...`` reads grad, ``self.m[k] = ...`` self.m)
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            names.append(ast.unparse(target.value))
    return names


def _code(lines: list[str], line: int) -> str:
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _expression(statement: ast.stmt | None) -> ast.expr | None:
    if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)):
        return statement.value
    return None


def _plain(node: ast.AST) -> str:
    """Source text without ``self.`` and ``np.`` (what a student reads)."""
    return re.sub(r"\b(self|np|numpy)\.", "", ast.unparse(node))


def differing(student: ast.AST, reference: ast.AST) -> tuple[str, str] | None:
    """The first place (outermost) where two expressions differ in structure, as (student's, reference's)
    source; names and attributes count as alike (the two name their variables differently)."""
    named = (ast.Name, ast.Attribute, ast.Constant)
    if isinstance(student, ast.Constant) and isinstance(reference, ast.Constant) and \
            isinstance(student.value, (int, float)) and isinstance(reference.value, (int, float)) and \
            student.value != reference.value:  # (a number: ``x > 1`` where the reference has ``x > 0``)
        return _plain(student), _plain(reference)
    if isinstance(student, named) and isinstance(reference, named):
        return None
    if isinstance(student, ast.BinOp) and isinstance(reference, ast.BinOp) and \
            type(student.op) is type(reference.op) and type(student.left) is not type(reference.left) and \
            type(student.right) is not type(reference.right):  # grouped otherwise: ``c * x * 3`` for ``c * x ** 3``
        return _plain(student), _plain(reference)
    if type(student) is not type(reference):
        return _plain(student), _plain(reference)
    if isinstance(student, (ast.BinOp, ast.BoolOp, ast.UnaryOp, ast.Compare)) and \
            type(getattr(student, "op", None)) is not type(getattr(reference, "op", None)):
        return _plain(student), _plain(reference)
    if isinstance(student, ast.Call) and _plain(student.func) != _plain(reference.func):  # type: ignore[attr-defined]
        return _plain(student), _plain(reference)
    a = [c for c in ast.iter_child_nodes(student) if not isinstance(c, (ast.expr_context, ast.operator, ast.unaryop))]
    b = [c for c in ast.iter_child_nodes(reference) if not isinstance(c, (ast.expr_context, ast.operator, ast.unaryop))]
    if len(a) != len(b):
        return _plain(student), _plain(reference)
    for x, y in zip(a, b, strict=True):
        found = differing(x, y)
        if found is not None:
            return found
    return None


def _reference_expression(r: Record, reference_tree: ast.Module) -> ast.expr | None:
    if r.role == "expr":
        try:
            return ast.parse(r.name, mode="eval").body
        except SyntaxError:
            return None
    return _expression(_statement(reference_tree, r.line))


# --------------------------------------------------------------------------- locating


def _nearest(value: np.ndarray, s: Record, reference: list[Record]) -> Record | None:
    """The reference value that stands where ``value`` (the student's ``s``) does: the same name (last part) in the
    same role (an assignment, a return), in the same function where the reference has it there; else the same
    shape and nearest."""
    last = s.name.split(".")[-1]
    same_name = [r for r in reference if r.role == s.role and r.role in ("assign", "return")
                 and r.name.split(".")[-1] == last and r.value is not None and r.value.size == value.size]
    same_function = [r for r in same_name if r.function == s.function]
    if same_function or same_name:
        return (same_function or same_name)[0]
    best, best_error = None, np.inf
    for r in reference:
        if r.value is None or r.value.shape != value.shape or r.role not in ("assign", "expr", "return"):
            continue
        with np.errstate(all="ignore"):
            error = float(np.max(np.abs(value - r.value)) / max(1e-12, float(np.max(np.abs(r.value)))))
        if error < best_error:
            best, best_error = r, error
    return best


def locate(exercise_id: str, topic: str, student: ScriptResult, reference: ScriptResult, student_source: str,
           reference_text: str) -> dict[str, Any] | None:
    """``{"file", "line", "code", "words"}`` where the student's run leaves the reference's, or None."""
    lines = student_source.splitlines()
    try:
        tree = ast.parse(student_source)
        reference_tree = _parsed(reference_text)
    except SyntaxError:
        return None
    guided = level_of(exercise_id) == "guided"
    records = read(student)
    refs = [_numbers(r) for r in read(reference) if r.value is not None]
    if student.error is not None and student.error.get("where") == "trace":
        return None  # the trace itself could not start: nothing located
    if student.error is not None:
        return _crash(topic, student, records, read(reference), lines, tree, reference_tree)
    state: dict[str, bool] = {}  # a name of the student's: whether its latest value matched
    for s in records:
        if s.value is None or s.value.dtype.kind == "b" or (s.value.ndim == 0 and s.value.dtype.kind != "f"):
            # (a count, an index, a flag: never where a computation leaves; a float number is, e.g. a std)
            state[s.name] = True
            continue
        if s.role == "arg":  # made by the caller's line: it is located there, once assigned
            state[s.name] = matches(s.value, refs)
            continue
        if matches(s.value, refs):
            state[s.name] = True
            continue
        statement = _statement(tree, s.line)
        if not all(state.get(name, True) for name in _reads(statement)):
            state[s.name] = False  # made from a value that already left the reference's: not where it left
            continue
        found = variant(s.value, refs) if s.value.size >= 2 else None
        return _divergence(topic, s, statement, found, refs, reference_tree, lines, guided)
    return None


def _numbers(r: Record) -> Record:
    """``r`` with a flag array (a dropout mask) as 0.0 and 1.0: compared, scaled and subtracted as numbers."""
    if r.value is None or r.value.dtype.kind != "b":
        return r
    return Record(r.seq, r.line, r.function, r.role, r.name, r.kind, r.value.astype(np.float64), r.size)


@functools.lru_cache(maxsize=16)
def _parsed(text: str) -> ast.Module:
    """The reference's file parsed (once per text: each location reads it)."""
    return ast.parse(text)


def _divergence(topic: str, s: Record, statement: ast.stmt | None, found: tuple[str, Record | None] | None,
                refs: list[Record], reference_tree: ast.Module, lines: list[str], guided: bool) -> dict[str, Any]:
    code = _code(lines, s.line)
    assert s.value is not None
    if found is not None:
        words, counterpart = found
    else:
        words, counterpart = "your value here matches nothing the reference computes", _nearest(s.value, s, refs)
    if not guided:  # (the words above quote the reference's code)
        return {"file": f"{topic}.py", "line": s.line, "code": code,
                "words": "your value here is the first that leaves the reference's computation"}
    if counterpart is not None:
        theirs = _reference_expression(counterpart, reference_tree)
        mine = _expression(statement)
        pair = differing(mine, theirs) if mine is not None and theirs is not None else None
        if pair is not None and found is None:
            words = f"where you have `{pair[0]}` the reference has `{pair[1]}`"
        elif theirs is not None:
            words += f"; the reference computes `{_plain(theirs)}` here"
    return {"file": f"{topic}.py", "line": s.line, "code": code, "words": words}


_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _made(records: list[Record], name: str) -> Record | None:
    """The last record that gave the student's ``name`` its value (for an attribute, ``bn.mean`` and
    ``self.mean`` alike: a helper names the layer otherwise), or None."""
    made = [r for r in records if r.name == name and r.role in ("assign", "arg")]
    if "." in name:  # (the latest of either: ``bn.dgamma = None`` in a helper after ``self.dgamma = None``)
        made += [r for r in records if r.role == "assign" and r.name.split(".")[-1] == name.split(".")[-1]
                 and "." in r.name and r.name != name]
    return max(made, key=lambda r: r.seq) if made else None


def _crash(topic: str, student: ScriptResult, records: list[Record], reference: list[Record], lines: list[str],
           tree: ast.Module, reference_tree: ast.Module) -> dict[str, Any] | None:
    """The line of ``topic``'s file that raised, and the shapes (or None) of the values it reads.

    Where one of those values is None, the location is the line that made it None: its assignment, or for
    a helper's argument the caller's line (the traceback's frame above). A value read back as None by the
    case itself (``BadOutputError``: ``dgamma returned None``) is located at the assignment that set it so.
    """
    assert student.error is not None
    error = f"{student.error.get('type')}: {student.error.get('message', '')}".strip()
    frames = [m for m in _FRAME.finditer(student.error.get("traceback", "")) if Path(m["file"]).name == f"{topic}.py"]
    if not frames:
        read_back = re.match(r"(\w+) returned None", student.error.get("message", ""))
        made = _made(records, "self." + read_back.group(1)) if read_back else None
        if made is not None and made.kind == "none":
            return {"file": f"{topic}.py", "line": made.line, "code": _code(lines, made.line),
                    "words": f"`{made.name}` is set to None here and read back as None ({error})"}
        bad = _not_numeric(records, reference)
        if bad is None:
            return None
        what = "None" if bad.kind == "none" else "not an array of numbers"
        return {"file": f"{topic}.py", "line": bad.line, "code": _code(lines, bad.line),
                "words": f"`{bad.name}` is {what} here where the reference's is numbers ({error})"}
    line = int(frames[-1]["line"])
    key = _key_origin(student.error, line, tree, {r.line for r in records} | {int(f["line"]) for f in frames},
                      _strings(reference_tree))
    if key is not None:
        return {"file": f"{topic}.py", "line": key[0], "code": _code(lines, key[0]),
                "words": f"{key[1]}; line {line} (`{_code(lines, line)}`) then raised {error}"}
    parts = []
    origin: tuple[int, str] | None = None
    for name in dict.fromkeys(_reads(_statement(tree, line))):
        last = _made(records, name)
        if last is None:
            continue
        if last.kind == "none":
            if last.role == "arg" and len(frames) > 1:  # the caller's line, or where what it passes became None
                caller = int(frames[-2]["line"])
                passed = _none_origin(_reads(_statement(tree, caller)), records, tree)
                last = passed if passed is not None else last
                if passed is None:
                    origin = origin or (caller, f"this line passes None as `{name}`; line {line}"
                                                f" (`{_code(lines, line)}`) then raised {error}")
            if last.role == "assign":
                last = _none_origin([last.name], records, tree) or last
                said = f"`{name}` is None (from line {last.line}: `{_code(lines, last.line)}`)"
                origin = origin or (last.line, f"`{last.name}` is None from here; line {line}"
                                               f" (`{_code(lines, line)}`) then raised {error}")
            else:
                said = f"`{name}` is None (passed by the caller)"
        elif last.shape is not None and last.shape != ():
            said = f"`{name}` has shape {last.shape}" + \
                (f" from line {last.line} (`{_code(lines, last.line)}`)" if last.role == "assign" else "")
            theirs = [r for r in reference if r.role in ("assign", "arg") and r.name.split(".")[-1] == name.split(".")[-1]
                      and r.shape is not None]
            if theirs and last.shape not in _shapes(last, reference):
                said += f"; the reference's `{theirs[-1].name}` has shape {theirs[-1].shape}"
        else:
            continue
        parts.append(said)
    test = _raising_test(tree, line) if origin is None else None
    if test is not None:
        none = _none_origin(_reads(_statement(tree, test)), records, tree)  # (a test reading a None: where it began)
        origin = (none.line, f"`{none.name}` is None from here; the test on line {test} then sent the input to the"
                             f" `raise` on line {line} ({error})") if none is not None else \
            (test, f"this test sends the input to the `raise` on line {line} ({error})")
    if origin is None:
        shaped = _shape_origin(list(_reads(_statement(tree, line))), records, reference, tree)
        if shaped is not None:
            parted, counterpart = shaped
            origin = (parted.line, f"`{parted.name}` has shape {parted.shape} here where the reference's"
                                   f" `{counterpart.name}` has shape {counterpart.shape}; line {line}"
                                   f" (`{_code(lines, line)}`) then raised {error}")
    if origin is not None:
        return {"file": f"{topic}.py", "line": origin[0], "code": _code(lines, origin[0]), "words": origin[1]}
    words = f"raised {error}" + (" — " + "; ".join(parts) if parts else "")
    return {"file": f"{topic}.py", "line": line, "code": _code(lines, line), "words": words}


def _counterpart(s: Record, reference: list[Record]) -> Record | None:
    """The reference's record of the same name made in the same role, in the same function if it has one there
    (the last such), else in any."""
    last = s.name.split(".")[-1]
    named = [r for r in reference if r.role == s.role and r.name.split(".")[-1] == last]
    same_function = [r for r in named if r.function == s.function]
    found = same_function or named
    return found[-1] if found else None


def _shapes(s: Record, reference: list[Record]) -> set[tuple[int, ...] | None]:
    """Every shape the reference gives the name of ``s`` in its role (in the same function if it has it there)."""
    last = s.name.split(".")[-1]
    named = [r for r in reference if r.role == s.role and r.name.split(".")[-1] == last]
    return {r.shape for r in ([r for r in named if r.function == s.function] or named)}


def _none_origin(names: list[str], records: list[Record], tree: ast.Module) -> Record | None:
    """The first assignment that made one of ``names`` None, followed back: ``g = self.buffers[key]`` is None
    because ``self.buffers[key] = None`` made it so; or None when none of them is None."""
    def assigned(name: str) -> Record | None:
        made = _made([r for r in records if r.role == "assign"], name)
        return made if made is not None and made.kind == "none" else None

    made = next((m for m in map(assigned, names) if m is not None), None)
    while made is not None:
        earlier = next((m for m in map(assigned, _reads(_statement(tree, made.line)))
                        if m is not None and m.seq < made.seq), None)
        if earlier is None:
            return made
        made = earlier
    return None


def _raising_test(tree: ast.Module, line: int) -> int | None:
    """For a ``raise`` on ``line`` that an ``if`` (or ``elif``) decides: the line of that test, or None.

    (A valid input refused by ``raise ValueError(...)``: the test sent it there, not the raise.)
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.test.lineno != line:
            for branch in (node.body, node.orelse):
                if any(isinstance(child, ast.Raise) and child.lineno == line for child in branch):
                    return node.test.lineno
    return None


def _not_numeric(records: list[Record], reference: list[Record]) -> Record | None:
    """The first of the student's values (an assignment or a return) that is None or not numbers (an array of
    objects, e.g. ``np.where(mask, dout, None)``) where the reference's counterpart is numbers, or None."""
    for s in records:
        if s.role in ("assign", "return") and s.kind in ("none", "t"):
            theirs = _counterpart(s, reference)
            if theirs is not None and theirs.kind in ("v", "big"):
                return s
    return None


def _shape_origin(names: list[str], records: list[Record], reference: list[Record],
                  tree: ast.Module) -> tuple[Record, Record] | None:
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
        made = _made(records, name)
        if made is None or made.role != "assign" or made.kind not in ("v", "big"):
            continue
        theirs = _counterpart(made, reference)
        if theirs is None or theirs.shape is None or made.shape in _shapes(made, reference):
            continue  # (a loop makes a name in several shapes: any of them is the reference's)
        if found is None or made.seq < found[0].seq:
            found = (made, theirs)
        todo.extend(_reads(_statement(tree, made.line)))
    return found


def _strings(tree: ast.Module) -> set[str]:
    """Every string constant of a file (the reference's: the keys it names)."""
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def _key_origin(error: dict[str, Any], line: int, tree: ast.Module, executed: set[int],
                reference_keys: set[str]) -> tuple[int, str] | None:
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
                stored += [(k.lineno, k.value) for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
                    isinstance(node.slice.value, str):
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
