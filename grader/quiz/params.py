"""Parameterised questions: numbers drawn per student, a prompt rendered with
them (Jinja2), and an answer that only the reference implementation computes.

A question declares, in its source and in its locked file alike:

    [questions.params]
    x   = { low = -2.5, high = 2.5, step = 0.1, exclude = [0] }   # a grid
    fan = { choices = [64, 128, 256] }                             # a list
    reference = "gelu(x=x)"                                        # a probe call

Values are drawn from ``exercise_seed(student, "quiz.<chapter>.<id>")``, so a
student always sees the same numbers and two students (almost always)
different ones. The reference call names a probe of ``grader.quiz.probes``
with keyword arguments that are parameters, numbers or lists of them; it is
read with ``ast`` and never evaluated as code.
"""

from __future__ import annotations

import ast
import functools
import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from types import ModuleType
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from grader.student.quiz import posing
from grader.quiz.errors import ReferenceUnavailableError
from grader.quiz.probes import PROBES

Number = int | float
_SPEC_KEYS = {"low", "high", "step", "exclude", "choices"}
MAX_GRID = 100_000


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: a grid low, low + step, ..., high (minus ``exclude``), or a list of choices."""

    name: str
    values: tuple[Number, ...]

    @classmethod
    def from_dict(cls, name: str, raw: Any) -> "ParamSpec":
        """Validate an author's table; ValueError with a one-line reason when it is wrong."""
        if not isinstance(raw, dict) or not raw or set(raw) - _SPEC_KEYS:
            raise ValueError(f"parameter '{name}' needs {{ low, high, step }} or {{ choices = [...] }}")
        if "choices" in raw:
            if set(raw) != {"choices"}:
                raise ValueError(f"parameter '{name}': 'choices' goes alone")
            choices = raw["choices"]
            if not isinstance(choices, list) or not choices or not all(_is_number(c) for c in choices):
                raise ValueError(f"parameter '{name}': choices must be a non-empty list of numbers")
            return cls(name, tuple(choices))
        missing = [k for k in ("low", "high", "step") if k not in raw]
        if missing:
            raise ValueError(f"parameter '{name}' is missing '{missing[0]}'")
        low, high, step = raw["low"], raw["high"], raw["step"]
        if not all(_is_number(v) for v in (low, high, step)) or not step > 0 or not high >= low:
            raise ValueError(f"parameter '{name}': low <= high and step > 0 must be numbers")
        count = round((high - low) / step)
        if count > MAX_GRID or not math.isclose(low + count * step, high, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(f"parameter '{name}': (high - low) must be a whole number of steps (at most {MAX_GRID})")
        exclude = raw.get("exclude", [])
        if not isinstance(exclude, list) or not all(_is_number(v) for v in exclude):
            raise ValueError(f"parameter '{name}': exclude must be a list of numbers")
        places = max(_decimals(v) for v in (low, high, step))
        integral = all(isinstance(v, int) for v in (low, high, step))
        values = []
        for k in range(count + 1):
            v = low + k * step if integral else round(low + k * step, places)
            if not any(math.isclose(v, e, abs_tol=1e-12) for e in exclude):
                values.append(v)
        if not values:
            raise ValueError(f"parameter '{name}': every value is excluded")
        return cls(name, tuple(values))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _decimals(v: Number) -> int:
    exponent = Decimal(repr(v)).as_tuple().exponent
    return max(0, -int(exponent)) if isinstance(exponent, int) else 0


def parse_specs(raw: Any) -> dict[str, ParamSpec]:
    """The ``params`` table of a question, validated, by name."""
    if not isinstance(raw, dict) or not raw:
        raise ValueError("'params' must be a table of parameters")
    for name in raw:
        if not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"parameter name '{name}' must be an identifier")
    return {name: ParamSpec.from_dict(name, spec) for name, spec in sorted(raw.items())}


def draw(
    specs: Mapping[str, ParamSpec],
    student: str,
    chapter: str,
    question_id: str,
    practice: Mapping[str, Number] | None = None,
) -> dict[str, Number]:
    """The student's values, in name order, from the student's seed for this question (never the practice
    instance's, unless the student is the practice one: ``grader.student.quiz.posing.draw_values``)."""
    return posing.draw_values(
        {name: spec.values for name, spec in specs.items()}, student, chapter, question_id, practice
    )


def check_practice(specs: Mapping[str, ParamSpec], practice: Any) -> dict[str, Number]:
    """A question's ``practice`` instance: a number for every parameter (it may lie outside the graded values,
    so that its answer is nobody's graded answer); ValueError otherwise."""
    if not isinstance(practice, dict) or set(practice) != set(specs) or not all(map(_is_number, practice.values())):
        raise ValueError(f"'practice' must give every parameter a number ({', '.join(sorted(specs))})")
    return dict(practice)


# --- the reference call -------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceCall:
    """A probe and its keyword arguments (parameters, numbers, lists of them)."""

    probe: str
    arguments: dict[str, Any]

    def resolve(self, values: Mapping[str, Number]) -> dict[str, Any]:
        """The arguments with the parameters replaced by their values."""
        return {k: _substitute(v, values) for k, v in self.arguments.items()}


@dataclass(frozen=True)
class _Param:
    name: str
    sign: int = 1


def _substitute(node: Any, values: Mapping[str, Number]) -> Any:
    if isinstance(node, _Param):
        return node.sign * values[node.name]
    if isinstance(node, list):
        return [_substitute(n, values) for n in node]
    return node


def parse_reference(text: Any, names: set[str]) -> ReferenceCall:
    """Read ``probe(arg=param, arg=[p, -q], arg=0.5)``; ValueError with the reason otherwise."""
    if not isinstance(text, str):
        raise ValueError("'reference' must be a probe call such as \"gelu(x=x)\"")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"reference '{text}' is not a call such as \"gelu(x=x)\"") from None
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name) or tree.args:
        raise ValueError(f"reference '{text}' must be probe(name=value, ...) with keyword arguments")
    if tree.func.id not in PROBES:
        raise ValueError(f"unknown reference probe '{tree.func.id}' (known: {', '.join(sorted(PROBES))})")

    def convert(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"reference '{text}' uses '{node.id}', which is not a parameter")
            return _Param(node.id)
        if isinstance(node, ast.Constant) and _is_number(node.value):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            return -convert(node.operand)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name):
            return _Param(convert(node.operand).name, -1)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [convert(e) for e in node.elts]
        raise ValueError(f"reference '{text}': arguments are parameters, numbers or lists of them")

    arguments = {kw.arg: convert(kw.value) for kw in tree.keywords if kw.arg is not None}
    if len(arguments) != len(tree.keywords):
        raise ValueError(f"reference '{text}' must name every argument")
    return ReferenceCall(tree.func.id, arguments)


def import_reference() -> ModuleType:
    """The ``reference`` package; ReferenceUnavailableError (one line) when it cannot be imported."""
    try:
        return importlib.import_module("reference")
    except ImportError as exc:
        raise ReferenceUnavailableError(
            f"questions with numbers drawn for you are judged by the reference implementation, which cannot "
            f"be imported here ({exc}): take this quiz where the course grader runs"
        ) from None


def reference_answer(call: ReferenceCall, values: Mapping[str, Number]) -> float:
    """Run the probe on the reference with the student's values."""
    return float(PROBES[call.probe](import_reference(), **call.resolve(values)))


# --- rendering -----------------------------------------------------------------------

signed = posing.signed  # the Jinja filter ``signed``: ``+ 2`` or ``- 3``


def decimals(value: float, places: int = 4) -> str:
    """The Jinja filter ``decimals``: ``{{ answer | decimals(4) }}`` is ``0.1235``, and a value that rounds to
    zero is ``0.0000``, never ``-0.0000``."""
    text = f"{float(value):.{int(places)}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def paren(value: float) -> str:
    """The Jinja filter ``paren``: a negative number in brackets, so ``0.05·{{ w | paren }}`` reads
    ``0.05·(-2.0)``, never ``0.05·-2.0``."""
    return f"({value})" if value < 0 else str(value)


_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)
_ENV.filters.update(signed=signed, decimals=decimals, paren=paren)


@functools.lru_cache(maxsize=1024)
def _compiled(template: str) -> Any:
    """A template compiled once (compiling costs far more than rendering; a prompt is posed again and again)."""
    return _ENV.from_string(template)


def render(template: str, values: Mapping[str, Any]) -> str:
    """The template with the values filled in; ValueError naming the problem otherwise."""
    try:
        return _compiled(template).render(**values)
    except TemplateError as exc:
        raise ValueError(f"template cannot be rendered ({exc.message or exc})") from None
