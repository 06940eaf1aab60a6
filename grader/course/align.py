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
from grader.student.engine.crash_origin import code as _code
from grader.student.engine.crash_origin import locate_crash as _crash
from grader.student.engine.crash_origin import reads as _reads
from grader.student.engine.crash_origin import statement as _statement
from grader.student.engine.crash_origin import strings as _strings
from grader.student.engine.trace import Record, read, traced

RTOL = 1e-6
REDUCTIONS: tuple[tuple[str, dict[str, int]], ...] = (
    ("mean", {}),
    ("sum", {}),
    ("var", {"ddof": 0}),
    ("var", {"ddof": 1}),
    ("std", {"ddof": 0}),
    ("std", {"ddof": 1}),
)
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
                    return (
                        f"your value is {_reduction_words(how, kwargs, axes)} of the reference's `{_short(r)}`",
                        _reference_reduction(r, how, kwargs, reference),
                    )
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
    if (
        isinstance(student, ast.Constant)
        and isinstance(reference, ast.Constant)
        and isinstance(student.value, (int, float))
        and isinstance(reference.value, (int, float))
        and student.value != reference.value
    ):  # (a number: ``x > 1`` where the reference has ``x > 0``)
        return _plain(student), _plain(reference)
    if isinstance(student, named) and isinstance(reference, named):
        return None
    if (
        isinstance(student, ast.BinOp)
        and isinstance(reference, ast.BinOp)
        and type(student.op) is type(reference.op)
        and type(student.left) is not type(reference.left)
        and type(student.right) is not type(reference.right)
    ):  # grouped otherwise: ``c * x * 3`` for ``c * x ** 3``
        return _plain(student), _plain(reference)
    if type(student) is not type(reference):
        return _plain(student), _plain(reference)
    if isinstance(student, (ast.BinOp, ast.BoolOp, ast.UnaryOp, ast.Compare)) and type(
        getattr(student, "op", None)
    ) is not type(getattr(reference, "op", None)):
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
    same_name = [
        r
        for r in reference
        if r.role == s.role
        and r.role in ("assign", "return")
        and r.name.split(".")[-1] == last
        and r.value is not None
        and r.value.size == value.size
    ]
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


def locate(
    exercise_id: str,
    topic: str,
    student: ScriptResult,
    reference: ScriptResult,
    student_source: str,
    reference_text: str,
) -> dict[str, Any] | None:
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
        return _crash(topic, student, records, read(reference), lines, tree, _strings(reference_tree))
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


def _divergence(
    topic: str,
    s: Record,
    statement: ast.stmt | None,
    found: tuple[str, Record | None] | None,
    refs: list[Record],
    reference_tree: ast.Module,
    lines: list[str],
    guided: bool,
) -> dict[str, Any]:
    code = _code(lines, s.line)
    assert s.value is not None
    if found is not None:
        words, counterpart = found
    else:
        words, counterpart = "your value here matches nothing the reference computes", _nearest(s.value, s, refs)
    if not guided:  # (the words above quote the reference's code)
        return {
            "file": f"{topic}.py",
            "line": s.line,
            "code": code,
            "words": "your value here is the first that leaves the reference's computation",
        }
    if counterpart is not None:
        theirs = _reference_expression(counterpart, reference_tree)
        mine = _expression(statement)
        pair = differing(mine, theirs) if mine is not None and theirs is not None else None
        if pair is not None and found is None:
            words = f"where you have `{pair[0]}` the reference has `{pair[1]}`"
        elif theirs is not None:
            words += f"; the reference computes `{_plain(theirs)}` here"
    return {"file": f"{topic}.py", "line": s.line, "code": code, "words": words}
