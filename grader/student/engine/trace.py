"""Recording what a topic file's own code computes, line by line (round 5's dynamic alignment).

A ``trace`` op at the head of a script (``{"op": "trace", "topic": "normalization"}``) compiles the topic's
file again with its assignments instrumented and runs the rest of the script on that copy: after each
assignment in a function (``x = ...``, ``x += ...``, ``a, b = ...``, ``self.mean = ...``, ``self.m[k] = ...``), at each
``return`` and for each argument on entry, the value is recorded as ``(line, function, name, value)``. With
``"expressions": true`` (the reference, run by the instructor) every call, arithmetic and unary operation
is recorded too, named by its source text: the reference's intermediates, inline ones included.

Records travel as ordinary outputs of the case (numeric arrays, so they cross the sandbox like any
output), under keys ``~trace/<seq>/<line>/<function>/<role>/<kind>/<name>``: role ``arg``, ``assign``,
``return`` or ``expr``; kind ``v`` (the value is the array), ``none`` (the value was None), ``big`` or
``t`` (not recorded: too large, or not numeric; the array holds its shape). :func:`read` turns a result
back into :class:`Record` s. Runs in the sandbox beside the student's code: imports nothing above
``grader.student``.
"""

from __future__ import annotations

import ast
import functools
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.student.engine.ops import MORE_OPS, Case, ScriptResult

PREFIX = "~trace/"
MAX_RECORDS = 4000  # a loop over rows records each pass: the first ones are kept
MAX_ELEMENTS = 200_000  # a larger value is recorded by its shape alone
MAX_TOTAL_ELEMENTS = 4_000_000  # (32 MB of float64) once recorded, the rest by their shapes alone
RECORDER = "__grader_trace__"


@dataclass
class Record:
    """One recorded value: order, line of the topic file, function, role, name (or source text), value."""

    seq: int
    line: int
    function: str
    role: str
    name: str
    kind: str  # "v", "none", "big", "t"
    value: np.ndarray | None  # the value (kind "v"), else None
    size: tuple[int, ...] | None = None  # the shape of a value recorded by its shape alone (kinds "big", "t")

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The value's shape (None for None, or a value without one)."""
        return tuple(self.value.shape) if self.value is not None else self.size


def traced(case: Case, topic: str, expressions: bool = False) -> Case:
    """``case`` with a trace op of ``topic`` at its head and no numgrad ops (named ``<case>~trace``)."""
    script = [op for op in case.script if op.get("op") != "numgrad"]
    op: dict[str, Any] = {"op": "trace", "topic": topic, "expressions": expressions}
    return Case(f"{case.name}~trace", [op] + script, case.arrays)


def is_traced(case: Case) -> bool:
    """Whether ``case`` runs with its lines recorded (its outputs may then carry :data:`PREFIX` keys)."""
    return any(op.get("op") == "trace" for op in case.script)


def read(result: ScriptResult) -> list[Record]:
    """The records of a traced run, in the order they were made."""
    records = []
    for key, value in result.outputs.items():
        if not key.startswith(PREFIX):
            continue
        seq, line, function, role, kind, name = key[len(PREFIX) :].split("/", 5)
        array = np.asarray(value)
        records.append(
            Record(
                int(seq),
                int(line),
                function,
                role,
                name,
                kind,
                array if kind == "v" else None,
                tuple(int(v) for v in array.ravel()) if kind in ("big", "t") and array.size else None,
            )
        )
    return sorted(records, key=lambda r: r.seq)


# --------------------------------------------------------------------------- instrumentation


class _Instrument(ast.NodeTransformer):
    """Adds a recorder call after each assignment, around each return value and (optionally) each expression."""

    def __init__(self, expressions: bool, source: str) -> None:
        self.expressions = expressions
        self.source = source
        self.function = "<module>"

    def _call(self, node: ast.AST, role: str, name: str, value: ast.expr) -> ast.Call:
        args = [
            ast.Constant(getattr(node, "lineno", 0)),
            ast.Constant(self.function),
            ast.Constant(role),
            ast.Constant(name),
            value,
        ]
        return ast.Call(func=ast.Name(RECORDER, ast.Load()), args=args, keywords=[])

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        entry = [
            ast.Expr(self._call(node, "arg", a.arg, ast.Name(a.arg, ast.Load())))
            for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if a.arg != "self"
        ]
        node.body = entry + node.body
        self.function = outer
        return node

    def _after(self, node: ast.stmt, targets: list[ast.expr]) -> list[ast.stmt]:
        if self.function == "<module>":
            return [node]
        recorded: list[ast.stmt] = [node]
        for target in targets:
            for name_node in _named(target):
                name = ast.unparse(name_node)
                load = ast.parse(name, mode="eval").body
                recorded.append(ast.Expr(self._call(node, "assign", name, load)))
        return recorded

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        return self._after(node, node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        self.generic_visit(node)
        return self._after(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        self.generic_visit(node)
        return self._after(node, [node.target]) if node.value is not None else node

    def visit_Return(self, node: ast.Return) -> Any:
        self.generic_visit(node)
        if node.value is not None and self.function != "<module>":
            node.value = self._call(node, "return", "return", node.value)
        return node

    def _expression(self, node: ast.expr) -> ast.expr:
        if not self.expressions or self.function == "<module>":  # (a student's run: its expressions not recorded)
            self.generic_visit(node)
            return node
        text = ast.unparse(node)  # (before its parts are wrapped)
        self.generic_visit(node)
        return self._call(node, "expr", text, node)

    visit_BinOp = _expression
    visit_Call = _expression
    visit_UnaryOp = _expression


def _named(target: ast.expr) -> list[ast.expr]:
    """The names an assignment target binds: a name, an attribute, a subscript, each of a tuple's."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for element in target.elts for n in _named(element)]
    if isinstance(target, ast.Starred):
        return _named(target.value)
    if isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):  # (a subscript: the item assigned)
        return [target]
    return []


def instrument(source: str, filename: str, expressions: bool = False) -> types.CodeType:
    """``source`` compiled with its recorder calls (line numbers as the file numbers them)."""
    tree = _Instrument(expressions, source).visit(ast.parse(source, filename))
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


@functools.lru_cache(maxsize=32)
def _instrumented(source: str, filename: str, expressions: bool) -> types.CodeType:
    """:func:`instrument`, kept by its text: a file traced again (a second case, the next grading's reference)
    is not parsed and compiled again; each trace still executes it in a module of its own."""
    return instrument(source, filename, expressions)


class Recorder:
    """Writes each record into ``outputs`` (a script's recorded outputs) under its trace key."""

    def __init__(self, outputs: dict[str, np.ndarray]) -> None:
        self.outputs = outputs
        self.count = 0
        self.elements = 0

    def __call__(self, line: int, function: str, role: str, name: str, value: Any) -> Any:
        if self.count >= MAX_RECORDS:
            return value
        kind, array = _recorded(value)
        if kind == "v" and self.elements + array.size > MAX_TOTAL_ELEMENTS:  # kept small: by its shape alone
            kind, array = "big", np.asarray(array.shape, dtype=np.int64)
        self.elements += array.size
        self.outputs[f"{PREFIX}{self.count:05d}/{line}/{function}/{role}/{kind}/{name}"] = array
        self.count += 1
        return value


def _recorded(value: Any) -> tuple[str, np.ndarray]:
    """(kind, array) of a value: a numeric copy, or its shape (too large, not numeric), or nothing (None)."""
    if value is None:
        return "none", np.zeros(0)
    if isinstance(value, (np.ndarray, np.generic, int, float, bool)) and not isinstance(value, type):
        array = np.array(value, copy=True)
        if array.dtype.kind in "biuf":
            if array.size > MAX_ELEMENTS:
                return "big", np.asarray(array.shape, dtype=np.int64)
            return "v", array
    return "t", np.asarray(
        getattr(value, "shape", ()) if isinstance(getattr(value, "shape", None), tuple) else (), dtype=np.int64
    )


class _Overlay:
    """A namespace that is ``base`` except for one topic module."""

    def __init__(self, base: Any, topic: str, module: types.ModuleType) -> None:
        self._base, self._topic, self._module = base, topic, module

    def __getattr__(self, name: str) -> Any:
        return self._module if name == self._topic else getattr(self._base, name)


def start(env: Any, topic: str, expressions: bool = False) -> None:
    """The ``trace`` op: ``env`` runs the rest of its script on an instrumented copy of ``topic``'s file."""
    original = getattr(env.ns, topic)
    filename = original.__file__
    with open(filename, encoding="utf-8") as handle:
        source = handle.read()
    module = types.ModuleType(original.__name__)
    module.__file__ = filename
    module.__package__ = original.__package__
    module.__spec__ = original.__spec__
    setattr(module, RECORDER, Recorder(env.outputs))
    exec(_instrumented(source, filename, expressions), module.__dict__)  # noqa: S102 (the topic's own code)
    env.ns = _Overlay(env.ns, topic, module)


def _trace_op(env: Any, op: dict[str, Any]) -> None:
    start(env, str(op["topic"]), bool(op.get("expressions")))


MORE_OPS["trace"] = _trace_op
