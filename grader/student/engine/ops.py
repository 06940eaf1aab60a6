"""The case interpreter: runs a small JSON "script" of ops against a namespace.

A namespace is any object whose attributes are the topic modules
(``ns.normalization.BatchNorm1d``): the student's ``exercises`` package loaded
in the sandboxed child, the ``reference`` package, or a mistake variant (in
the parent). Scripts contain only op names and values, never code, so the
child can run them without trusting the parent, and the parent can run the
very same script on the reference and on every known mistake.

This module runs inside the untrusted child next to the student's code: it
imports nothing from ``reference`` and nothing from the grader beyond itself
(``grader.student.engine.ops_opencl`` is imported lazily, only by the ``cl_kernel`` op).

Values inside ops (resolved by :meth:`Env.resolve`):

- ``{"array": KEY}``: a fresh copy of input array ``KEY`` (student code never
  sees our arrays);
- ``{"rng": SEED}``: a fresh ``np.random.default_rng(SEED)``;
- ``{"var": NAME}``: an object bound earlier (``new``, ``let``, ``var=`` of
  ``call``/``func``, ``target``);
- ``{"tuple": [...]}`` and ``{"dict": {...}}``: a tuple or dict of values;
- JSON scalars and lists (lists are resolved element by element).

Ops (one dict each, key ``"op"``):

=========  ==========================================  ==============================================
op         fields                                      effect
=========  ==========================================  ==============================================
new        var, cls, args?, kwargs?                    ``var = ns.<topic>.<Cls>(*args, **kwargs)``
let        var, value                                  ``var = value`` (bind an input copy to watch it)
set        var, attr, value                            ``setattr`` (dotted attr: ``bn.gamma``)
call       var, method, args?, kwargs?, out?, to?      ``var.<method>(...)``; ``out`` records the
                                                       result, ``to`` binds it to a variable
func       fn, args?, kwargs?, out?, to?               ``ns.<topic>.<fn>(...)``, same ``out``/``to``
get        var, attr, out                              records ``var.<attr>`` (dotted; a part is a
                                                       key when the object is a dict)
is_none    var, attr, out                              records ``var.<attr> is None`` (bool array)
output     value, out                                  records any value (mutation checks)
numgrad    var, x, dout, out, h?, wrt?                 central differences of
                                                       ``sum(var.forward(x) * dout)`` w.r.t. ``x``,
                                                       or w.r.t. the array attribute ``wrt``
target     var, name                                   binds the named function ``TARGETS[name]``
eval_fn    var, x, out                                 records ``var(x)`` (a callable made earlier)
cl_kernel  see grader/student/engine/checks/kernels.py                ``grader.student.engine.ops_opencl.run_cl_kernel(ns, op, env)``
trace      topic, expressions?                         the rest runs on ``topic``'s file instrumented
                                                       (``grader.student.engine.trace``, in MORE_OPS)
=========  ==========================================  ==============================================

Every recorded output goes through ``np.asarray`` (then is copied) and must be
a numeric array (bool, int or float); anything else stops the case with a
``BadOutputError`` ("forward returned a list of str: expected a float64 array").
Output keys are unique within a case. ``numgrad`` stops with a ``NumgradError``
when forward's output does not have dout's shape.

The first exception raised while running an op stops the script; it is stored
in ``ScriptResult.error`` as ``{"type", "message", "traceback", "where"}``
where ``traceback`` keeps only the frames inside the namespace's own files.
``run_script`` never raises for anything the student's code does (SystemExit
included); only ``KeyboardInterrupt`` and malformed scripts (``ScriptError``,
a grader bug) propagate. Warnings raised while the script runs are captured
(not printed, never turned into errors) into ``ScriptResult.warnings``; as
``warnings.catch_warnings`` changes process-wide state, scripts run one at a
time in a process (a lock), which keeps threaded callers correct.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from grader.student.engine.opserrors import ScriptError

# Ops a module further up registers when it is imported (op name -> fn(env, op)): grader.student.engine.trace's
# "trace" (it imports this module, so this module cannot import it).
MORE_OPS: dict[str, Callable[["Env", dict[str, Any]], None]] = {}

MAX_TRACEBACK_FRAMES = 8
MAX_WARNINGS = 10
# warnings.catch_warnings swaps process-wide state: one script at a time per process.
_WARNINGS_LOCK = threading.RLock()


class BadOutputError(Exception):
    """Student code produced a value that cannot be recorded as a numeric array."""


class NumgradError(Exception):
    """Central differences cannot run: forward's output does not match dout, or the parameter is no float64 array."""


@dataclass
class Case:
    """One graded scenario: a script of ops plus its named input arrays."""

    name: str
    script: list[dict[str, Any]]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class ScriptResult:
    """What running a case produced: recorded outputs, the error that stopped it, warnings.

    ``error`` is None or ``{"type", "message", "traceback", "where"}``;
    ``warnings`` lists "Category: message (in Class.method, line N of file.py)" strings (at most
    MAX_WARNINGS): each blamed on the call that raised it (:func:`warnings_in` selects by method).
    """

    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: dict[str, str] | None = None
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- targets


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    """softmax over the last axis: exp(x - max) / sum(exp(x - max))."""
    z = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return z / np.sum(z, axis=-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) computed without overflow."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_TARGET_FORMULAS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sin_2pi": lambda x: np.sin(2.0 * np.pi * x),  # sin(2 pi x)
    "cube": lambda x: x**3 - 2.0 * x,  # x^3 - 2x
    "exp_sin": lambda x: np.exp(np.sin(x)),  # e^sin(x)
    "x_tanh": lambda x: x * np.tanh(x),  # x tanh(x)
    "softmax_rows": _softmax_rows,  # softmax over the last axis
    "gauss_bump": lambda x: np.exp(-((x - 0.5) ** 2) / 0.02),  # e^(-(x-0.5)^2 / 0.02)
    "smooth_step": lambda x: _sigmoid(20.0 * (x - 0.5)),  # sigmoid(20 (x - 0.5))
    "abs_shift": lambda x: np.abs(x - 0.3),  # |x - 0.3| (a kink at 0.3)
}


def _as_target(formula: Callable[[np.ndarray], np.ndarray]) -> Callable[[Any], np.ndarray]:
    """The formula applied to ``np.asarray(x, float64)``."""
    return lambda x: formula(np.asarray(x, dtype=np.float64))


TARGETS: dict[str, Callable[[Any], np.ndarray]] = {name: _as_target(f) for name, f in _TARGET_FORMULAS.items()}
"""Named functions for ``numerical_gradient`` and ``fit_function`` cases (``target`` op)."""


# --------------------------------------------------------------------------- helpers


def describe(value: Any) -> str:
    """A short description of a value's type for messages: 'None', 'a list of str', 'an array of object'."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype}"
    if isinstance(value, (list, tuple)):
        kinds = sorted({type(v).__name__ for v in value})
        inner = "/".join(kinds) if kinds else "nothing"
        return f"a {type(value).__name__} of {inner}"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name}"


def as_numeric(value: Any, source: str) -> np.ndarray:
    """``np.asarray(value)`` copied, or BadOutputError unless it is a bool/int/float array."""
    if value is None:
        raise BadOutputError(f"{source} returned None: a missing return? (expected a float64 array)")
    try:
        array = np.array(np.asarray(value), copy=True)
    except Exception as exc:  # ragged lists, objects whose __array__ fails
        raise BadOutputError(f"{source} returned {describe(value)} ({exc}): expected a float64 array") from None
    if array.dtype.kind not in "biuf":
        raise BadOutputError(f"{source} returned {describe(value)}: expected a float64 array")
    return array


def _student_dirs(ns: Any) -> list[str]:
    """Folders whose frames are shown in tracebacks: the namespace package and its topic modules."""
    dirs: list[str] = []
    for path in getattr(ns, "__path__", None) or []:
        dirs.append(os.path.abspath(path))
    for value in list(vars(ns).values()) if hasattr(ns, "__dict__") else []:
        file = getattr(value, "__file__", None)
        if isinstance(file, str):
            dirs.append(os.path.dirname(os.path.abspath(file)))
    return sorted(set(dirs))


def _format_traceback(exc: BaseException, dirs: list[str]) -> str:
    """The traceback lines of frames inside ``dirs`` (the student's files), last frames only."""
    lines: list[str] = []
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.abspath(frame.filename)
        root = next((d for d in dirs if path.startswith(d + os.sep)), None)
        if root is None:
            continue
        shown = os.path.relpath(path, root)
        lines.append(f'  File "{shown}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    if len(lines) > 2 * MAX_TRACEBACK_FRAMES:
        lines = ["  ..."] + lines[-2 * MAX_TRACEBACK_FRAMES :]
    return "\n".join(lines)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except BaseException:  # a student exception with a broken __str__
        return "<exception message could not be printed>"


def _field(op: dict[str, Any], name: str) -> Any:
    if name not in op:
        raise ScriptError(f"op {op.get('op')!r} needs field {name!r}: {op}")
    return op[name]


def _split(dotted: str) -> tuple[str, str]:
    if not isinstance(dotted, str) or "." not in dotted:
        raise ScriptError(f"expected 'topic.Name', got {dotted!r}")
    topic, name = dotted.split(".", 1)
    return topic, name


def _get_path(obj: Any, attr: str) -> Any:
    """``obj.a.b`` for ``"a.b"``; a part is a dict key when the object is a dict."""
    for part in attr.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


# --------------------------------------------------------------------------- environment


class Env:
    """The state of one running script: variables, input arrays and recorded outputs."""

    def __init__(self, ns: Any, arrays: dict[str, np.ndarray]) -> None:
        self.ns = ns
        self.arrays = arrays
        self.vars: dict[str, Any] = {}
        self.outputs: dict[str, np.ndarray] = {}

    def resolve(self, value: Any) -> Any:
        """Turn a script value into a Python value (see the module docstring)."""
        if isinstance(value, dict):
            if len(value) != 1:
                raise ScriptError(f"a value dict has exactly one key: {value}")
            ((kind, arg),) = value.items()
            if kind == "array":
                if arg not in self.arrays:
                    raise ScriptError(f"no input array {arg!r}")
                return np.array(self.arrays[arg], copy=True)
            if kind == "rng":
                return np.random.default_rng(arg)
            if kind == "var":
                if arg not in self.vars:
                    raise ScriptError(f"no variable {arg!r}")
                return self.vars[arg]
            if kind == "tuple":
                return tuple(self.resolve(v) for v in arg)
            if kind == "dict":
                return {k: self.resolve(v) for k, v in arg.items()}
            raise ScriptError(f"unknown value kind {kind!r}")
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        return value

    def record(self, out: str, value: Any, source: str) -> None:
        """Record ``value`` as output ``out`` (a numeric array copy; keys are unique)."""
        if out in self.outputs:
            raise ScriptError(f"output key {out!r} recorded twice")
        self.outputs[out] = as_numeric(value, source)

    def args(self, op: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        return [self.resolve(a) for a in op.get("args", [])], {
            k: self.resolve(v) for k, v in op.get("kwargs", {}).items()
        }


# --------------------------------------------------------------------------- ops


def _numgrad(env: Env, op: dict[str, Any]) -> np.ndarray:
    """Central differences (f(t+h) - f(t-h)) / 2h of f = sum(var.forward(x) * dout).

    t is x itself, or the array attribute ``wrt`` of the object (restored after).
    """
    obj = env.vars[_field(op, "var")]
    x = np.array(env.resolve(_field(op, "x")), dtype=np.float64)
    dout = np.asarray(env.resolve(_field(op, "dout")), dtype=np.float64)
    h = float(op.get("h", 1e-5))
    wrt = op.get("wrt")
    if wrt is None:
        target = x
    else:
        target = getattr(obj, wrt)
        if not isinstance(target, np.ndarray) or target.dtype != np.float64:
            raise NumgradError(f"{wrt} is {describe(target)}: expected a float64 array")

    def loss() -> float:
        y = as_numeric(obj.forward(x.copy()), "forward")
        if y.shape != dout.shape:
            raise NumgradError(f"forward returned shape {y.shape} while dout has shape {dout.shape}")
        return float(np.sum(y * dout))

    grad = np.zeros(target.shape, dtype=np.float64)
    for idx in np.ndindex(target.shape):
        old = target[idx]
        target[idx] = old + h
        plus = loss()
        target[idx] = old - h
        minus = loss()
        target[idx] = old
        grad[idx] = (plus - minus) / (2.0 * h)
    return grad


def _run_op(env: Env, op: dict[str, Any]) -> None:
    """Execute one op (raises whatever the student's code raises)."""
    ns = env.ns
    kind = _field(op, "op")
    if kind == "new":
        topic, name = _split(_field(op, "cls"))
        cls = getattr(getattr(ns, topic), name)
        args, kwargs = env.args(op)
        env.vars[_field(op, "var")] = cls(*args, **kwargs)
    elif kind == "let":
        env.vars[_field(op, "var")] = env.resolve(_field(op, "value"))
    elif kind == "set":
        obj = env.vars[_field(op, "var")]
        path = _field(op, "attr").split(".")
        owner = _get_path(obj, ".".join(path[:-1])) if len(path) > 1 else obj
        setattr(owner, path[-1], env.resolve(_field(op, "value")))
    elif kind in ("call", "func"):
        if kind == "call":
            method = _field(op, "method")
            target = getattr(env.vars[_field(op, "var")], method)
            source = method
        else:
            topic, name = _split(_field(op, "fn"))
            target = getattr(getattr(ns, topic), name)
            source = name
        args, kwargs = env.args(op)
        result = target(*args, **kwargs)
        if "to" in op:
            env.vars[op["to"]] = result
        if "out" in op:
            env.record(op["out"], result, source)
    elif kind == "get":
        attr = _field(op, "attr")
        env.record(_field(op, "out"), _get_path(env.vars[_field(op, "var")], attr), attr)
    elif kind == "is_none":
        value = _get_path(env.vars[_field(op, "var")], _field(op, "attr"))
        env.record(_field(op, "out"), np.array(value is None), "is_none")
    elif kind == "output":
        env.record(_field(op, "out"), env.resolve(_field(op, "value")), "output")
    elif kind == "numgrad":
        env.record(_field(op, "out"), _numgrad(env, op), "numgrad")
    elif kind == "target":
        name = _field(op, "name")
        if name not in TARGETS:
            raise ScriptError(f"unknown target {name!r}")
        env.vars[_field(op, "var")] = TARGETS[name]
    elif kind == "eval_fn":
        fn = env.vars[_field(op, "var")]
        env.record(_field(op, "out"), fn(env.resolve(_field(op, "x"))), "your returned function")
    elif kind == "cl_kernel":
        ops_opencl = importlib.import_module(
            "grader.student.engine.ops_opencl"
        )  # lazily: only kernel cases need OpenCL
        ops_opencl.run_cl_kernel(ns, op, env)
    elif kind in MORE_OPS:  # "trace": registered by grader.student.engine.trace when it is imported
        MORE_OPS[kind](env, op)
    else:
        raise ScriptError(f"unknown op {kind!r}")


def _where(op: dict[str, Any], env: Env) -> str:
    """A short description of an op for error messages: 'BatchNorm1d.forward', 'init.kaiming_normal'."""
    kind = op.get("op")
    owner = env.vars.get(op.get("var", ""), None)
    owner_name = type(owner).__name__ if owner is not None else str(op.get("var"))
    if kind == "new":
        return f"{op.get('cls')}(...)"
    if kind == "call":
        return f"{owner_name}.{op.get('method')}"
    if kind == "func":
        return str(op.get("fn"))
    if kind in ("get", "set", "is_none"):
        return f"{owner_name}.{op.get('attr')}"
    if kind == "numgrad":
        return f"central differences of {owner_name}.forward"
    if kind == "eval_fn":
        return "your returned function"
    return str(kind)


def run_script(ns: Any, script: list[dict[str, Any]], arrays: dict[str, np.ndarray]) -> ScriptResult:
    """Run ``script`` against namespace ``ns``; never raises for what the student's code does."""
    env = Env(ns, arrays)
    error: dict[str, str] | None = None
    with (
        _WARNINGS_LOCK,
        warnings.catch_warnings(record=True) as caught,
        np.errstate(over="warn", invalid="warn", divide="warn", under="ignore"),  # NumPy's defaults
    ):
        warnings.simplefilter("always")
        raised_in: list[str] = []  # the op (method) each caught warning was raised in
        for op in script:
            if not isinstance(op, dict):
                raise ScriptError(f"an op is a dict, got {op!r}")
            try:
                _run_op(env, op)
            except (ScriptError, KeyboardInterrupt):
                raise
            except BaseException as exc:  # SystemExit, MemoryError, RecursionError included
                error = {
                    "type": type(exc).__name__,
                    "message": _safe_str(exc),
                    "traceback": _format_traceback(exc, _student_dirs(ns)),
                    "where": _where(op, env),
                }
                break
            finally:
                raised_in += [_where(op, env)] * (len(caught) - len(raised_in))
    dirs = _student_dirs(ns)
    messages = [
        _warning_text(w, where, dirs) for w, where in zip(caught[:MAX_WARNINGS], raised_in, strict=False)
    ]  # the first few
    return ScriptResult(outputs=env.outputs, error=error, warnings=messages)


def _warning_text(w: warnings.WarningMessage, where: str, dirs: list[str]) -> str:
    """'Category: message (in ELU.backward, line 42 of activations.py)': the call and, in the student's own
    files, the line that raised it (a warning is blamed on the method that raised it, not on the case)."""
    path = os.path.abspath(str(w.filename or ""))
    root = next((d for d in dirs if path.startswith(d + os.sep)), None)
    line = f", line {w.lineno} of {os.path.relpath(path, root)}" if root is not None else ""
    return f"{w.category.__name__}: {w.message} (in {where}{line})"


_RAISED_IN = re.compile(r" \(in ([^,)]+)(?:, line \d+ of [^)]*)?\)$")


def warning_method(text: str) -> str:
    """The method a warning text says it was raised in ('backward' of '... (in ELU.backward, line 4 of a.py)')."""
    found = _RAISED_IN.search(text)
    return found.group(1).rsplit(".", 1)[-1] if found else ""


def warnings_in(result: "ScriptResult", methods: bool | tuple[str, ...]) -> list[str]:
    """The warnings of ``result`` raised in ``methods`` (method names such as 'forward'), or all with True."""
    if methods is True:
        return list(result.warnings)
    if not methods:
        return []
    return [w for w in result.warnings if warning_method(w) in methods]
