"""The frame of the generic diagnoses (``grader.student.engine.generic``): what a family reads, proposes and
how its proposal is judged.

The ``Context`` a family reads (declared here, below the checks); the families' order (:data:`ORDER`, the most
specific first; :data:`CRASH_ORDER` for crashes) and their fixes (:data:`FIXES`); :class:`GenericMistake` (the
name shown); :class:`Claim` (a family's proposal: a prediction of the student's outputs, or a statement about
where they differ) and the rule that judges it, :func:`holds`: a claim is shown only when it holds on every case
it touches and never predicts a difference where the student has none. Then what a case says about itself (its
layer or function, settings, input x and the named constants of its sizes and settings), which the families read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from grader.student.engine.compare import same_as
from grader.student.engine.diagnosis import Combination, Expected, KnownMistake
from grader.student.engine.ops import Case, ScriptResult


class Context(Protocol):
    """What a generic diagnosis reads of a check's context (grader.student.engine.checks.context.Context is one).

    Declared here, below the checks, so the checks import this module and not the other way round.
    """

    exercise_id: str
    cases: dict[str, Case]
    expected: Expected

    @property
    def reference(self) -> Any: ...

    def student_result(self, case: str) -> ScriptResult: ...

    def run_mistake(self, mistake: KnownMistake, case: Case) -> ScriptResult: ...

    def _comparable(self, name: str) -> tuple[ScriptResult, ScriptResult, list[str]] | None: ...

    def _memoised(self, question: str, mistake_id: str, case: str, compute: Callable[[], Any]) -> Any: ...

    def _pool(self) -> list[KnownMistake]: ...

    def _touches(self, mistake: KnownMistake, case: str) -> bool: ...


# The families, in the order they are tried (the most specific first).
ORDER = (
    "generic-inplace",
    "generic-param",
    "generic-mode",
    "generic-function",
    "generic-axes",
    "generic-terms",
    "generic-transpose",
    "generic-scale",
    "generic-offset",
    "generic-region",
)
# Named from a crash's error alone (:func:`crash_claims`), in this order.
CRASH_ORDER = ("generic-none", "generic-call", "generic-shape", "generic-key", "generic-validation")

FIXES = {
    "generic-inplace": "Work on copies: x = x - mu (never x -= mu), mask = x > 0 (never mask = x).",
    "generic-param": "Check that setting against the exercise's docstring (its default, and how it is read).",
    "generic-mode": "Training uses the batch and updates the state once per forward; eval uses the state and"
    " changes nothing.",
    "generic-function": "Differentiate the function of this exercise, at its input x.",
    "generic-terms": "Write the formula again term by term and compare each term of yours with it.",
    "generic-axes": "Reduce over the axes the exercise's docstring names (keepdims=True where the result is"
    " broadcast back).",
    "generic-transpose": "Check the order of the factors of each product and which operand is transposed.",
    "generic-scale": "Look for a factor that should not be there (or one that is missing).",
    "generic-offset": "Look for a term added to (or missing from) every value.",
    "generic-region": "Look at the code of the branch or setting named: the rest is right.",
    "generic-none": "Give that variable its value before use (and return what the method must return).",
    "generic-shape": "Print the shapes of the operands: reduce with keepdims=True or reshape to the right axis.",
    "generic-call": "Compare the call with the function's signature (every argument, in its place).",
    "generic-key": "Store and read the value under one name.",
    "generic-validation": "Check the condition that raises: it must reject only what the docstring rejects.",
}


@dataclass
class GenericMistake(KnownMistake):
    """A generic diagnosis: the family's id, what was found (words), and the family's fix."""

    def explain(self, level: str | None = None) -> str:
        """'Generic diagnosis <family>: <what was found> Fix: <fix>' (the words are said at every level:
        they restate the student's own numbers, never the course's formula)."""
        return f"Generic diagnosis {self.id}: {self.sentence}" + (f" Hint: {self.fix}" if self.fix else "")


# --------------------------------------------------------------------------- claims


@dataclass
class Claim:
    """A proposed generic diagnosis: its family, its words, and how to judge it on any case.

    ``predict(case) -> {key: array}`` (a reproducing claim: the student's outputs where the claim
    says they differ), or ``holds_on(case) -> bool | None`` (a statement: True where it is true,
    False where it is false, None where it says nothing). ``base`` is a known mistake whose results
    replace the reference's (the claim is that mistake plus this one), or None.
    """

    family: str
    words: str
    predict: Callable[[str], dict[str, np.ndarray] | None] | None = None
    holds_on: Callable[[str], bool | None] | None = None
    base: KnownMistake | None = None
    # A statement's outputs: it explains a check only when the check's keys are among them (empty: a crash's).
    about: tuple[str, ...] = ()

    def mistake(self, exercise: str) -> KnownMistake:
        generic = GenericMistake(self.family, exercise, self.words, FIXES.get(self.family, ""))
        if self.base is None:
            return generic
        parts = list(getattr(self.base, "parts", []) or [self.base])
        return Combination(f"{self.base.id}+{self.family}", exercise, "", "", parts=parts + [generic])


def holds(ctx: "Context", claim: Claim, case: str, keys: list[str], rtol: float, atol: float) -> bool:
    """Whether ``claim`` explains the failing ``keys`` of ``case`` and holds on every case it touches.

    A reproducing claim must equal the student on ``keys`` of ``case``, and on every case, wherever
    its prediction differs from the base (the reference, or the known mistake's variant), equal the
    student (so it never predicts a difference the student does not have). A statement must be
    true on ``case`` and on every case where it says something.
    """
    if claim.predict is not None:
        predicted = claim.predict(case)
        base = _base(ctx, claim, case)
        if not predicted or not all(
            k in predicted and same_as(student_output(ctx, case, k), predicted[k], rtol, atol)
            for k in keys
            if k in base.outputs
        ):
            return False
        if not any(k in predicted and not same_as(predicted[k], base.outputs.get(k), 1e-9, 1e-11) for k in keys):
            return False  # it changes none of the failing outputs here: it explains nothing
        for name in ctx.cases:
            prediction = predicted if name == case else claim.predict(name)
            if not prediction:
                continue
            base = _base(ctx, claim, name)
            for key, value in prediction.items():
                if key not in comparable_keys(ctx, name):
                    continue
                if same_as(value, base.outputs.get(key), rtol=1e-9, atol=1e-11):
                    continue  # the claim changes nothing here
                if not same_as(student_output(ctx, name, key), value, rtol, atol):
                    return False
        return True
    assert claim.holds_on is not None
    if claim.about and not set(keys) <= set(claim.about):
        return False
    if not claim.holds_on(case):
        return False
    return all(claim.holds_on(name) is not False for name in ctx.cases if name != case)


def student_output(ctx: "Context", case: str, key: str) -> np.ndarray | None:
    return ctx.student_result(case).outputs.get(key)


def _base(ctx: "Context", claim: Claim, case: str) -> ScriptResult:
    """The reference's result of ``case``, or the claim's known mistake's."""
    if claim.base is None:
        return ctx.reference.get(case) or ScriptResult()
    return ctx.run_mistake(claim.base, ctx.cases[case])


def comparable_keys(ctx: "Context", case: str) -> list[str]:
    parts = ctx._comparable(case)
    return parts[2] if parts is not None else []


def differs(ctx: "Context", case: str, key: str, rtol: float = 1e-9, atol: float = 1e-11) -> bool:
    """The student's output ``key`` of ``case`` differs from the reference's (tightly)."""
    reference = ctx.reference.get(case)
    if reference is None or key not in reference.outputs:
        return False
    return not same_as(student_output(ctx, case, key), reference.outputs[key], rtol, atol)


# --------------------------------------------------------------------------- what a case says about itself


def constructor(case: Case) -> dict[str, Any] | None:
    """The first ``new`` or ``func`` op of ``case`` (the layer or function under test)."""
    return next((op for op in case.script if op.get("op") in ("new", "func")), None)


def settings(case: Case) -> dict[str, Any]:
    """The keyword settings of ``case``'s layer or function (scalars only) and its mode ('eval' when set)."""
    op = constructor(case) or {}
    found = {k: v for k, v in (op.get("kwargs") or {}).items() if isinstance(v, (int, float, str, bool))}
    if any(o.get("op") == "call" and o.get("method") == "eval" for o in case.script):
        found["mode"] = "eval"
    return found


def input_of(case: Case) -> np.ndarray | None:
    """The case's input x (array ``x``), or None."""
    x = case.arrays.get("x")
    return None if x is None else np.asarray(x)


def known_constants(case: Case) -> list[tuple[str, float]]:
    """Named constants of a case: numbers, its numeric settings q (q, 1/q, 1-q, 1/(1-q), ...) and its sizes n
    (N, C, D, m values per statistic: n, 1/n, n/(n-1), (n-1)/n)."""
    named: list[tuple[str, float]] = [
        ("2", 2.0),
        ("1/2", 0.5),
        ("3", 3.0),
        ("1/3", 1 / 3),
        ("4", 4.0),
        ("1/4", 0.25),
        ("-1", -1.0),
        ("-2", -2.0),
        ("-1/2", -0.5),
        ("sqrt(2)", math.sqrt(2)),
        ("1/sqrt(2)", 1 / math.sqrt(2)),
        ("sqrt(2/pi)", math.sqrt(2 / math.pi)),
        ("sqrt(pi/2)", math.sqrt(math.pi / 2)),
        ("pi", math.pi),
        ("2 pi", 2 * math.pi),
        ("1/(2 pi)", 1 / (2 * math.pi)),
        ("sqrt(2 pi)", math.sqrt(2 * math.pi)),
        ("1/sqrt(2 pi)", 1 / math.sqrt(2 * math.pi)),
    ]
    x = input_of(case)
    if x is not None and x.ndim >= 1:
        sizes = {"N (the batch)": x.shape[0], "D (the last axis)": x.shape[-1]}
        if x.ndim >= 2:
            sizes["C (axis 1)"] = x.shape[1]
            sizes["m (values per channel)"] = x.size // x.shape[1]
            sizes["m (values per sample)"] = x.size // x.shape[0]
            sizes["m (values per row)"] = x.shape[-1]
        for name, n in sizes.items():
            if n > 1:
                short = name.split(" ")[0]
                named += [
                    (name, float(n)),
                    (f"1/{short}", 1.0 / n),
                    (f"{short}/({short} - 1), {name}", n / (n - 1)),
                    (f"({short} - 1)/{short}, {name}", (n - 1) / n),
                ]
    for name, q in settings(case).items():  # after the sizes: a size given as a setting reads as the size
        if isinstance(q, bool) or not isinstance(q, (int, float)) or q in (0, 1):
            continue
        named += [(name, q), (f"1/{name}", 1 / q), (f"1 - {name}", 1 - q), (f"-{name}", -q)]
        if q != 1:
            named += [
                (f"1/(1 - {name})", 1 / (1 - q)),
                (f"{name}/(1 - {name})", q / (1 - q)),
                (f"(1 - {name})/{name}", (1 - q) / q),
            ]
    return named


def name_of(value: float, case: Case) -> str | None:
    for name, constant in known_constants(case):
        if abs(value - constant) <= 1e-9 * max(1.0, abs(constant)):
            return name
    return None


def number_text(value: float) -> str:
    """``value`` with the fewest significant digits (6 to 15) that keep it to 1e-9 (1.000001, never 1)."""
    for digits in (6, 8, 10, 12, 15):
        text = f"{value:.{digits}g}"
        if abs(float(text) - value) <= 1e-9 * max(1e-300, abs(value)):
            return text
    return repr(value)
