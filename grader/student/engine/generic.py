"""Generic diagnoses: what *kind* of wrong a result is, found from the reference's results (round 4).

The catalogue (``grader.mistakes``) names the mistakes somebody wrote down; this module names the
kinds of mistake nobody listed, from the data a check already has: the case's inputs, the
reference's results and the student's. Each family proposes a **claim** on the failing case (a
predicted result, or a statement about where the student differs), then checks it on **every**
case of the exercise: a claim is shown only when it holds on every case it touches (there it
reproduces the student, or its statement is true) and never predicts a difference where the
student has none (:func:`holds`). Families are tried in a fixed order, the most specific first
(:data:`ORDER`); the first claim that holds is named, with the family's id (``generic-scale``) as
the misconception and its own words.

Families that need nothing but data (they run offline on a case pack too), in the order tried
after the live ones below:

- ``generic-transpose``: an output is the expected one with its axes reversed;
- ``generic-scale``: an output is c times the expected one (c the same in every case, or the same
  known expression of each case's sizes and settings: 2, 1/2, 1/(1-p), p, m/(m-1), D, 1/D, ...);
- ``generic-offset``: an output is the expected one plus c;
- ``generic-region``: an output right everywhere but one place, in every case: for an activation,
  one side of x = 0 (or x = 0 itself); for any output, its last (or first) row or column (a loop
  one short, a tail skipped); or every case but those with one setting (``approximate='tanh'``,
  eval mode);
- ``generic-inplace`` (tried first): an array handed to the student (x, dout) was written into.

Named from a crash's error alone (:data:`CRASH_ORDER`, also for checks that never diagnose, through
:func:`name_crashes`): ``generic-none`` (a value left None: an unset variable, a missing return),
``generic-call`` (an argument missing or misplaced), ``generic-shape`` (operands whose shapes do not
fit), ``generic-key`` (a value read back under another key), ``generic-validation`` (the student's
own check rejecting a valid input).

Families that run the reference (live only: ``Expected.rerun`` runs the reference on a rewritten
script, ``Expected.terms`` and ``Expected.axis_variant`` compute the reference's formulas; a case
pack has no reference code and skips them), tried first in this order:

- ``generic-param``: the result is the reference's with one setting changed (a default eps of
  1.00001, momentum read as 1 - momentum, negative_slope ignored, bias=False by default);
- ``generic-mode``: training and eval swapped, or the state updated twice per forward;
- ``generic-function``: an activation's derivative taken at the output instead of the input, or
  another activation's derivative;
- ``generic-axes``: a normalisation's statistics (both, the mean or the variance alone), its
  parameter gradients' sums or its backward's means taken over other axes, by a rule that carries
  over to every input shape ("every axis", "axis 0 only", "the last axis only", ...);
- ``generic-terms``: the reference's backward written as a sum of named terms: the coefficients
  (least squares, checked exactly) that reproduce the student, a term missing, doubled, halved,
  with the wrong sign or another factor; or one term wrong by a factor that changes from one
  normalised group to the next while the others are right.

A generic diagnosis is combined with another difference the way round 3 combines known mistakes:
a claim may sit on top of a known mistake's variant (its results as the base instead of the
reference's), and then both are named (:class:`grader.student.engine.diagnosis.Combination`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from grader.student.engine.compare import same_as, scale_of
from grader.student.engine.diagnosis import Combination, Expected, KnownMistake, error_signature, numgrad_outputs
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
            k in predicted and same_as(_student(ctx, case, k), predicted[k], rtol, atol)
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
                if key not in _comparable_keys(ctx, name):
                    continue
                if same_as(value, base.outputs.get(key), rtol=1e-9, atol=1e-11):
                    continue  # the claim changes nothing here
                if not same_as(_student(ctx, name, key), value, rtol, atol):
                    return False
        return True
    assert claim.holds_on is not None
    if claim.about and not set(keys) <= set(claim.about):
        return False
    if not claim.holds_on(case):
        return False
    return all(claim.holds_on(name) is not False for name in ctx.cases if name != case)


def _student(ctx: "Context", case: str, key: str) -> np.ndarray | None:
    return ctx.student_result(case).outputs.get(key)


def _base(ctx: "Context", claim: Claim, case: str) -> ScriptResult:
    """The reference's result of ``case``, or the claim's known mistake's."""
    if claim.base is None:
        return ctx.reference.get(case) or ScriptResult()
    return ctx.run_mistake(claim.base, ctx.cases[case])


def _comparable_keys(ctx: "Context", case: str) -> list[str]:
    parts = ctx._comparable(case)
    return parts[2] if parts is not None else []


def differs(ctx: "Context", case: str, key: str, rtol: float = 1e-9, atol: float = 1e-11) -> bool:
    """The student's output ``key`` of ``case`` differs from the reference's (tightly)."""
    reference = ctx.reference.get(case)
    if reference is None or key not in reference.outputs:
        return False
    return not same_as(_student(ctx, case, key), reference.outputs[key], rtol, atol)


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


def _name_of(value: float, case: Case) -> str | None:
    for name, constant in known_constants(case):
        if abs(value - constant) <= 1e-9 * max(1.0, abs(constant)):
            return name
    return None


def _number(value: float) -> str:
    """``value`` with the fewest significant digits (6 to 15) that keep it to 1e-9 (1.000001, never 1)."""
    for digits in (6, 8, 10, 12, 15):
        text = f"{value:.{digits}g}"
        if abs(float(text) - value) <= 1e-9 * max(1e-300, abs(value)):
            return text
    return repr(value)


# --------------------------------------------------------------------------- data-only families


def scale_claims(ctx: "Context", case: str, keys: list[str], base: KnownMistake | None) -> list[Claim]:
    """``generic-scale`` and ``generic-offset``: each differing key of ``case`` is c times (or c plus) the base's."""
    claims = []
    base_result = ctx.reference.get(case) if base is None else ctx.run_mistake(base, ctx.cases[case])
    differing = [
        k
        for k in keys
        if base_result is not None
        and k in base_result.outputs
        and not same_as(_student(ctx, case, k), base_result.outputs[k], 1e-9, 1e-11)
    ]
    if not differing or base_result is None:
        return []
    for family in ("generic-scale", "generic-offset"):
        factors = {}
        for key in differing:
            s, r = _student(ctx, case, key), base_result.outputs[key]
            if (
                s is None
                or s.shape != r.shape
                or s.dtype.kind != "f"
                or r.dtype.kind != "f"
                or not np.all(np.isfinite(s))
                or not np.all(np.isfinite(r))
            ):
                break
            if family == "generic-scale":
                denominator = float(np.sum(r * r))
                if denominator == 0:
                    break
                c = float(np.sum(s * r)) / denominator
                if abs(c - 1) < 1e-9 or c == 0:
                    break
            else:
                c = float(np.mean(s - r))
                if abs(c) <= 1e-9 * scale_of(r):
                    break
            factors[key] = c
        else:
            claims.append(_constant_claim(ctx, case, family, factors, base))
            if any(_name_of(c, ctx.cases[case]) for c in factors.values()):  # a size's name may be a coincidence
                claims.append(_constant_claim(ctx, case, family, factors, base, named=False))
    return claims


def _constant_claim(
    ctx: "Context", case: str, family: str, factors: dict[str, float], base: KnownMistake | None, named: bool = True
) -> Claim:
    """A claim that each key is c_k times (plus c_k) the base's, c_k named (``named``: the known constant of each
    case it equals here) or the same number in every case."""
    this = ctx.cases[case]
    names = {key: _name_of(c, this) if named else None for key, c in factors.items()}

    def constant(key: str, name: str) -> float | None:
        label = names[key]
        if label is None:
            return factors[key]
        found = dict(known_constants(ctx.cases[name]))
        return found.get(label)

    def predict(name: str) -> dict[str, np.ndarray] | None:
        result = ctx.reference.get(name) if base is None else ctx.run_mistake(base, ctx.cases[name])
        if result is None:
            return None
        out = {}
        for key in factors:
            value = result.outputs.get(key)
            c = constant(key, name)
            if value is None or c is None or value.dtype.kind != "f":
                continue
            out[key] = value * c if family == "generic-scale" else value + c
        return out

    said = []
    for key, c in factors.items():
        label = names[key]
        amount = label or _number(c)
        value = (
            ""
            if label is None or label == _number(c) or "/" not in label and not any(ch.isalpha() for ch in label)
            else f" (= {_number(c)} here)"
        )
        if family == "generic-scale":
            said.append(f"your {key} is {amount} times the expected value{value}")
        else:
            said.append(f"your {key} is the expected value plus {amount}{value}")
    words = (
        "; ".join(said)
        + ", in every case where it differs: a constant factor"
        + (" too many or missing." if family == "generic-scale" else " added to every value.")
    )
    return Claim(family, words[0].upper() + words[1:], predict=predict, base=base)


def region_claims(ctx: "Context", case: str, keys: list[str]) -> list[Claim]:
    """``generic-region``: right on one side of x = 0 (or away from 0), wrong only on the other; or right in
    every case but those with one setting."""
    claims = []
    this = ctx.cases[case]
    x = input_of(this)
    differing = [k for k in keys if differs(ctx, case, k, 1e-9, 1e-11)]
    if not differing:
        return []
    key = differing[0]
    regions = [
        ("x == 0", lambda v: v == 0, "at x = 0 only"),
        ("x < 0", lambda v: v < 0, "where x < 0 only: the x <= 0 branch is wrong"),
        ("x > 0", lambda v: v > 0, "where x > 0 only: the x > 0 branch is wrong"),
        ("x <= 0", lambda v: v <= 0, "where x <= 0 only: the x <= 0 branch is wrong"),
        ("x >= 0", lambda v: v >= 0, "where x >= 0 only: the x >= 0 branch is wrong"),
    ]
    s = _student(ctx, case, key)
    reference = ctx.reference[case].outputs[key]
    if s is not None and s.shape == reference.shape and s.ndim >= 1:
        claims += _index_claims(ctx, case, key)
    if (
        x is not None
        and s is not None
        and s.shape == x.shape == reference.shape
        and ctx.exercise_id.startswith(ELEMENTWISE)
    ):
        for _label, inside, said in regions:

            def holds_on(name: str, inside: Callable[[np.ndarray], np.ndarray] = inside) -> bool | None:
                x_here = input_of(ctx.cases[name])
                ref = ctx.reference.get(name)
                mine = _student(ctx, name, key)
                if (
                    x_here is None
                    or ref is None
                    or key not in ref.outputs
                    or mine is None
                    or mine.shape != x_here.shape
                    or ref.outputs[key].shape != x_here.shape
                ):
                    return None
                wrong = ~_close(mine, ref.outputs[key])
                return bool(np.all(inside(x_here)[wrong])) and (name != case or bool(np.any(wrong)))

            claims.append(
                Claim(
                    "generic-region",
                    f"Your {key} is right except {said} (it is right everywhere else, in every case).",
                    holds_on=holds_on,
                    about=(key,),
                )
            )
    mine = settings(this)
    for setting, value in mine.items():

        def holds_with(name: str, setting: str = setting, value: Any = value) -> bool | None:
            ref = ctx.reference.get(name)
            if ref is None or key not in ref.outputs or not _runs(ctx.cases[name]):
                return None
            has = settings(ctx.cases[name]).get(setting) == value
            wrong = not same_as(_student(ctx, name, key), ref.outputs[key], 1e-9, 1e-11)
            return has == wrong  # wrong in every case with the setting, right in every case without

        words = "in eval mode" if setting == "mode" else f"with {setting}={value!r}"
        running = [n for n in ctx.cases if key in _comparable_keys(ctx, n) and _runs(ctx.cases[n])]
        if any(settings(ctx.cases[n]).get(setting) != value for n in running):  # else the claim says nothing
            claims.append(
                Claim(
                    "generic-region",
                    f"Your {key} is wrong in every case {words} and right in every"
                    f" case without: the code that {'eval mode' if setting == 'mode' else 'this setting'}"
                    " selects is wrong.",
                    holds_on=holds_with,
                    about=(key,),
                )
            )
    return claims


# Exercises whose outputs are elementwise functions of x (where "the x < 0 branch" means something).
ELEMENTWISE = ("activations.",)


def _index_claims(ctx: "Context", case: str, key: str) -> list[Claim]:
    """Right everywhere but the last (or first) index along one axis, in every case: a loop one short, a tail
    skipped, an off-by-one slice."""
    claims = []
    for where, pick in (
        ("the last index along axis 0 (the last row)", lambda a: (-1,)),
        ("the first index along axis 0 (the first row)", lambda a: (0,)),
        ("the last index along the last axis", lambda a: (Ellipsis, -1)),
        ("the first index along the last axis", lambda a: (Ellipsis, 0)),
    ):

        def holds_on(name: str, pick: Callable[[np.ndarray], tuple[Any, ...]] = pick) -> bool | None:
            ref = ctx.reference.get(name)
            mine = _student(ctx, name, key)
            if (
                ref is None
                or key not in ref.outputs
                or mine is None
                or mine.shape != ref.outputs[key].shape
                or mine.ndim == 0
                or mine.size < 2
            ):
                return None
            wrong = ~_close(mine, ref.outputs[key])
            inside = np.zeros(wrong.shape, dtype=bool)
            inside[pick(wrong)] = True
            if np.all(inside):
                return None  # the slice is everything: this says nothing here
            return bool(np.all(inside[wrong])) and (name != case or bool(np.any(wrong)))

        claims.append(
            Claim(
                "generic-region",
                f"Your {key} is right except at {where}, in every case: a loop that"
                " stops one short, a skipped tail or an off-by-one slice.",
                holds_on=holds_on,
                about=(key,),
            )
        )
    return claims


def transpose_claims(ctx: "Context", case: str, keys: list[str]) -> list[Claim]:
    """``generic-transpose``: an output is the expected one with its axes reversed (a transposed operand)."""
    claims = []
    for key in keys:
        s, r = _student(ctx, case, key), (ctx.reference.get(case) or ScriptResult()).outputs.get(key)
        if s is None or r is None or r.ndim < 2 or s.shape != r.T.shape or not same_as(s, r.T):
            continue

        def predict(name: str, key: str = key) -> dict[str, np.ndarray] | None:
            value = (ctx.reference.get(name) or ScriptResult()).outputs.get(key)
            return None if value is None or value.ndim < 2 else {key: value.T}

        claims.append(
            Claim(
                "generic-transpose",
                f"Your {key} is the expected {key} transposed (its axes reversed),"
                " in every case: an operand transposed, or the product's factors"
                " swapped.",
                predict=predict,
            )
        )
    return claims


def _runs(case: Case) -> bool:
    """Whether ``case`` runs the layer or function (a forward or a call), not only its constructor."""
    return any(o.get("op") == "func" or o.get("op") == "call" and o.get("method") == "forward" for o in case.script)


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: a and b agree (the matching tolerance, scaled by b)."""
    with np.errstate(invalid="ignore"):
        return np.isclose(a, b, rtol=1e-9, atol=1e-11 * scale_of(b), equal_nan=True)


def inplace_claims(ctx: "Context", case: str, keys: list[str]) -> list[Claim]:
    """``generic-inplace``: an array handed to the student was written into (what it became, when we can tell)."""
    claims = []
    for key in keys:
        if not key.endswith("_after"):
            continue
        after = _student(ctx, case, key)
        if after is None:
            continue
        outputs = ctx.student_result(case).outputs
        became = next((k for k in ("y", "dx") if k in outputs and same_as(after, outputs[k]) and k != key), None)
        what = {
            "x_after": "forward wrote into the x it was given",
            "x_after_backward": "backward wrote into the x that forward was given",
            "dout_after": "backward wrote into the dout it was given",
        }.get(key, f"the parameter array {key[: -len('_after')]} handed to the layer was written into")
        words = (
            what[0].upper()
            + what[1:]
            + (
                f": afterwards it holds your {became} (the result was computed in place in the caller's array)."
                if became
                else ": an in-place operation (-=, *=, [...] =) on the caller's array."
            )
        )

        def holds_on(name: str, key: str = key) -> bool | None:
            return True if name == case else None

        claims.append(Claim("generic-inplace", words, holds_on=holds_on, about=(key,)))
    return claims


NONE_MARKS = ("NoneType", "returned None", "array of object", "not None", "None as")
SHAPE_MARKS = (
    "could not be broadcast",
    "cannot reshape",
    "not aligned",
    "mismatch in its core dimension",
    "is out of bounds for axis",
    "tuple index out of range",
    "index out of range",
)
CALL_MARKS = (
    "missing 1 required",
    "missing 2 required",
    "missing 3 required",
    "missing required argument",
    "positional argument",
    "either both or neither",
    "unexpected keyword argument",
    "required positional",
)


def crash_claims(ctx: "Context", case: str) -> list[Claim]:
    """What a crash's error says about its cause, on the case it stops (where the reference does not stop):

    ``generic-none`` (a value left None: an unset variable, a missing return), ``generic-shape`` (operands whose
    shapes do not fit: a reshape for the wrong axes, a transpose, a reduction without keepdims), ``generic-call``
    (a function called with an argument missing or misplaced), ``generic-key`` (a value read back under a key it
    was not stored under), ``generic-validation`` (the student's own input check rejecting a valid input).
    """
    error = ctx.student_result(case).error
    reference = ctx.reference.get(case)
    if (
        not error
        or error.get("type")
        in ("NotImplementedError", "NoResult", "MemoryError", "KeyboardInterrupt", "Timeout", "SystemExit")
        or (reference is not None and error_signature(reference) is not None)
    ):
        return []
    kind, text = error.get("type", ""), error.get("message", "")
    message = f"{kind}: {text}"[:160]
    where = error.get("where") or "your code"
    claims = []

    def here(name: str) -> bool | None:
        return True if name == case else None

    if any(mark in message for mark in NONE_MARKS):
        claims.append(
            Claim(
                "generic-none",
                f"{where} used a value that is None ({message}): a variable never"
                " assigned, an attribute forward did not set, or a function that"
                " returns nothing.",
                holds_on=here,
            )
        )
    if kind in ("TypeError", "ValueError") and any(mark in text for mark in CALL_MARKS):
        claims.append(
            Claim(
                "generic-call",
                f"{where} called a function with an argument missing or in the wrong place ({message}).",
                holds_on=here,
            )
        )
    if kind in ("ValueError", "IndexError", "AxisError") and any(mark in text for mark in SHAPE_MARKS):
        claims.append(
            Claim(
                "generic-shape",
                f"{where} combined arrays whose shapes do not fit ({message}): an"
                " operand reshaped for the wrong axes, transposed, or reduced without"
                " keepdims.",
                holds_on=here,
            )
        )
    if kind == "KeyError":
        claims.append(
            Claim(
                "generic-key",
                f"{where} read back a value under a key it was never stored under"
                f" ({message}): the name used to store it differs.",
                holds_on=here,
            )
        )
    lines = (error.get("traceback") or "").rstrip().splitlines()
    frames = [line for line in lines if line.strip().startswith("File ")]
    own_file = f'"{ctx.exercise_id.split(".")[0]}.py"' in (frames[-1] if frames else "")
    if kind == "ValueError" and lines and lines[-1].strip().startswith("raise") and own_file:
        # the exercise's own check raised, in its own file (not another exercise's check that a wrong call tripped)
        claims.append(
            Claim(
                "generic-validation",
                f"{where} raised ValueError on a valid input ({message}): its"
                " check of the arguments or of the input's shape is wrong.",
                holds_on=here,
            )
        )
    return claims


# --------------------------------------------------------------------------- families that run the reference


def rerun(ctx: "Context", case: Case, script: list[dict[str, Any]]) -> ScriptResult | None:
    """The reference on ``script`` with ``case``'s arrays (None where no reference code runs: a case pack)."""
    run = getattr(ctx.expected, "rerun", None)
    if run is None:
        return None
    return ctx._memoised("rerun", repr(script), case.name, lambda: run(script, case.arrays))


def _without_numgrad(script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for op in script if op.get("op") != "numgrad"]


def _rewrite_claim(
    ctx: "Context", family: str, words: str, rewrite: Callable[[Case], list[dict[str, Any]] | None]
) -> Claim:
    """A reproducing claim: the reference on each case's rewritten script (None: the rewrite does not apply)."""

    def predict(name: str) -> dict[str, np.ndarray] | None:
        case = ctx.cases[name]
        script = rewrite(case)
        if script is None:
            return None
        result = rerun(ctx, case, _without_numgrad(script))
        if result is None or result.error is not None:
            return None
        return dict(result.outputs)

    return Claim(family, words, predict=predict)


def param_claims(ctx: "Context", case: str, keys: list[str], rtol: float, atol: float) -> list[Claim]:
    """``generic-param``: the reference with one numeric or boolean setting changed reproduces the student.

    The value is solved for on the failing case (Gauss-Newton on the outputs, from the setting's value);
    then read as a rule over every case: a default that differs (cases without the setting), or the given
    value read another way (1 - v, the default, 2v, v/2, v^2, sqrt(v), 1/v, -v).
    """
    signature = getattr(ctx.expected, "signature", None)
    this = ctx.cases[case]
    op = constructor(this)
    if signature is None or op is None:
        return []
    target = op.get("cls") or op.get("fn")
    defaults = signature(target)
    if not defaults or target != ctx.exercise_id:
        return []
    claims = []
    given = op.get("kwargs") or {}
    for name, default in defaults.items():
        value = given.get(name, default)
        candidates: list[bool] | list[float]
        if isinstance(default, bool):
            candidates = [not value]
        elif isinstance(default, float) and isinstance(value, (int, float)):
            candidates = _solve(ctx, this, op, name, float(value), keys)
        else:
            continue
        for found in candidates:
            claim = _param_claim(ctx, op, name, default, given, found)
            if claim is not None:
                claims.append(claim)
    return claims


def _with_setting(case: Case, op: dict[str, Any], name: str, value: Any) -> list[dict[str, Any]]:
    """``case``'s script with setting ``name`` = ``value`` on every op that makes the tested layer or function."""
    target = op.get("cls") or op.get("fn")
    script = []
    for o in case.script:
        if o.get("op") in ("new", "func") and (o.get("cls") or o.get("fn")) == target:
            o = dict(o, kwargs=dict(o.get("kwargs") or {}, **{name: value}))
        script.append(o)
    return script


def _solve(ctx: "Context", case: Case, op: dict[str, Any], name: str, start: float, keys: list[str]) -> list[float]:
    """Values v of setting ``name`` for which the reference reproduces the student on ``keys``: Gauss-Newton on the
    outputs from ``start`` and from 1 - start, at most 12 steps each, given up when a step does not halve the
    residual (memoised per case, setting and keys)."""
    return ctx._memoised(
        "solve", f"{name}:{start}:{','.join(keys)}", case.name, lambda: _gauss_newton(ctx, case, op, name, start, keys)
    )


def _gauss_newton(
    ctx: "Context", case: Case, op: dict[str, Any], name: str, start: float, keys: list[str]
) -> list[float]:
    students = [s for s in (_student(ctx, case.name, k) for k in keys) if s is not None]
    if len(students) != len(keys):
        return []
    target = np.concatenate([np.ravel(s) for s in students])
    if target.dtype.kind != "f" or not np.all(np.isfinite(target)):
        return []

    def outputs(v: float) -> np.ndarray | None:
        result = rerun(ctx, case, _without_numgrad(_with_setting(case, op, name, v)))
        if result is None or result.error is not None or any(k not in result.outputs for k in keys):
            return None
        out = np.concatenate([np.ravel(result.outputs[k]) for k in keys])
        return out.astype(np.float64) if out.shape == target.shape and out.dtype.kind in "fiu" else None

    found: list[float] = []
    for v in dict.fromkeys([start, 1.0 - start]):
        residual = float("inf")
        for _ in range(12):
            here = outputs(v)
            if here is None:
                break
            now = float(np.linalg.norm(target - here))
            if now > 0.5 * residual and now > 1e-12 * max(1.0, float(np.linalg.norm(target))):
                break  # not converging: no value of this setting explains the student
            residual = now
            h = 1e-6 * max(1.0, abs(v))
            there = outputs(v + h)
            if there is None:
                break
            slope = (there - here) / h
            denominator = float(np.dot(slope, slope))
            if denominator == 0:
                break
            step = float(np.dot(slope, target - here)) / denominator
            v += step
            if abs(step) <= 1e-12 * max(1.0, abs(v)):
                break
        final = outputs(v) if np.isfinite(v) else None
        if (
            final is not None
            and v != start
            and np.allclose(
                final, target, rtol=1e-9, atol=1e-11 * max(1.0, float(np.max(np.abs(target))) if target.size else 1.0)
            )
            and all(abs(v - f) > 1e-9 * max(1.0, abs(f)) for f in found)
        ):
            found.append(v)  # (only a value that reproduces the student: the setting matters here)
    return found


def _param_claim(
    ctx: "Context", op: dict[str, Any], name: str, default: Any, given: dict[str, Any], found: Any
) -> Claim | None:
    """The rule behind ``found`` (the value the student behaves as if ``name`` had), as a claim over every case."""
    target = op.get("cls") or op.get("fn")
    if name not in given:  # this case uses the default: the student's default differs

        def rewrite(case: Case) -> list[dict[str, Any]] | None:
            o = constructor(case)
            if o is None or (o.get("cls") or o.get("fn")) != target or name in (o.get("kwargs") or {}):
                return None
            return _with_setting(case, o, name, found)

        shown = found if isinstance(found, bool) else _number(found)
        return _rewrite_claim(
            ctx,
            "generic-param",
            f"Your default {name} behaves as {shown}; it must be"
            f" {default!r} (every case that leaves {name} unset agrees).",
            rewrite,
        )
    value = given[name]
    rules: list[tuple[str, Callable[[Any], Any]]]
    if isinstance(default, bool):
        rules = [("ignored (the default is used)", lambda v: default)] if value != default else []
    else:
        rules = [
            ("read as 1 - " + name, lambda v: 1.0 - v),
            ("ignored (the default is used)", lambda v: default),
            ("doubled", lambda v: 2.0 * v),
            ("halved", lambda v: v / 2.0),
            ("squared", lambda v: v * v),
            ("read as its square root", lambda v: math.sqrt(v) if v >= 0 else float("nan")),
            ("inverted (1/" + name + ")", lambda v: 1.0 / v if v else float("nan")),
            ("negated", lambda v: -v),
        ]
    for said, rule in rules:
        try:
            if abs(float(rule(value)) - float(found)) > 1e-7 * max(1.0, abs(float(found))):
                continue
        except (TypeError, ValueError):
            continue

        def rewrite_by(case: Case, rule: Callable[[Any], Any] = rule) -> list[dict[str, Any]] | None:
            o = constructor(case)
            if o is None or (o.get("cls") or o.get("fn")) != target or name not in (o.get("kwargs") or {}):
                return None
            return _with_setting(case, o, name, rule((o.get("kwargs") or {})[name]))

        return _rewrite_claim(
            ctx,
            "generic-param",
            f"Your code behaves as if {name} were {said}: with {name}={value!r} it acts as {_number(float(found))}.",
            rewrite_by,
        )
    return None


def mode_claims(ctx: "Context", case: str) -> list[Claim]:
    """``generic-mode``: eval behaving as training, training as eval, or the state updated twice per forward."""
    claims = []

    def is_layer(case: Case) -> bool:
        op = constructor(case)
        return op is not None and op.get("op") == "new" and op.get("cls") == ctx.exercise_id

    def to_training(case: Case) -> list[dict[str, Any]] | None:
        if not is_layer(case) or not any(o.get("method") == "eval" for o in case.script):
            return None
        return [o for o in case.script if not (o.get("op") == "call" and o.get("method") == "eval")]

    def to_eval(case: Case) -> list[dict[str, Any]] | None:
        if not is_layer(case) or any(o.get("method") in ("eval", "train") for o in case.script):
            return None
        script = []
        for o in case.script:
            script.append(o)
            if o.get("op") == "new" and o.get("cls") == ctx.exercise_id:
                script.append({"op": "call", "var": o["var"], "method": "eval"})
        return script

    def twice(case: Case) -> list[dict[str, Any]] | None:
        if not is_layer(case) or any(o.get("method") == "eval" for o in case.script):
            return None
        script = []
        for o in case.script:
            if o.get("op") == "call" and o.get("method") == "forward":
                script.append({k: v for k, v in o.items() if k not in ("out", "to")})
            script.append(o)
        return script

    claims.append(
        _rewrite_claim(
            ctx,
            "generic-mode",
            "In eval mode your layer behaves as in training (batch statistics, state updated, dropout active).",
            to_training,
        )
    )
    claims.append(
        _rewrite_claim(
            ctx,
            "generic-mode",
            "In training your layer behaves as in eval mode (it uses the stored state and does not update it).",
            to_eval,
        )
    )
    claims.append(
        _rewrite_claim(
            ctx,
            "generic-mode",
            "Your layer updates its state twice per training forward (the running statistics move two steps).",
            twice,
        )
    )
    return claims


ACTIVATIONS = ("Sigmoid", "Tanh", "ReLU", "LeakyReLU", "ELU", "GELU", "SiLU")


def function_claims(ctx: "Context", case: str) -> list[Claim]:
    """``generic-function``: an activation's backward equal to its derivative at the output y, or to another
    activation's derivative at x (the forward right)."""
    if not ctx.exercise_id.startswith("activations.") or ctx.exercise_id == "activations.PReLU":
        return []

    def backward_from(cls: str, at_output: bool) -> Callable[[Case], list[dict[str, Any]] | None]:
        def rewrite(case: Case) -> list[dict[str, Any]] | None:
            script: list[dict[str, Any]] = []
            seen_forward = False
            for o in case.script:
                if o.get("op") == "call" and o.get("method") == "forward" and o.get("var") == "m" and not seen_forward:
                    seen_forward = True
                    script.append(dict(o, to="_y_generic"))
                    source = {"var": "_y_generic"} if at_output else o["args"][0]
                    script.append(
                        {
                            "op": "new",
                            "var": "_m_generic",
                            "cls": cls,
                            "kwargs": {} if cls != ctx.exercise_id else (constructor(case) or {}).get("kwargs", {}),
                        }
                    )
                    script.append({"op": "call", "var": "_m_generic", "method": "forward", "args": [source]})
                    continue
                if o.get("op") == "call" and o.get("method") == "backward" and o.get("var") == "m":
                    o = dict(o, var="_m_generic")
                script.append(o)
            if not seen_forward or not any(
                o.get("var") == "_m_generic" and o.get("method") == "backward" for o in script
            ):
                return None
            return script

        return rewrite

    name = ctx.exercise_id.split(".")[1]
    claims = [
        _rewrite_claim(
            ctx,
            "generic-function",
            f"Your backward takes {name}'s derivative at the output y instead of at the input x.",
            backward_from(ctx.exercise_id, True),
        )
    ]
    for other in ACTIVATIONS:
        if other != name:
            claims.append(
                _rewrite_claim(
                    ctx,
                    "generic-function",
                    f"Your backward is {other}'s derivative, not {name}'s (your forward is {name}'s).",
                    backward_from(f"activations.{other}", False),
                )
            )
    return claims


def _terms(ctx: "Context", name: str) -> dict[str, Any] | None:
    """``Expected.terms`` of case ``name`` (the student's own previous state where a term needs it), or None."""
    terms_of = getattr(ctx.expected, "terms", None)
    if terms_of is None:
        return None
    return terms_of(ctx.cases[name], ctx.student_result(name).outputs)


def term_claims(ctx: "Context", case: str, keys: list[str]) -> list[Claim]:
    """``generic-terms``: the student's outputs as the reference's named terms with other coefficients (one set for
    the check's outputs made of the same terms), or one term wrong by a factor constant within each normalised
    group (``Expected.terms``, live only)."""
    decomposition = _terms(ctx, case)
    if not decomposition:
        return []
    claims = []
    groups_of: dict[tuple[str, ...], list[str]] = {}
    for key in keys:
        if key in decomposition:
            groups_of.setdefault(tuple(n for n, _ in decomposition[key][0]), []).append(key)
    for names, members in groups_of.items():
        if not any(differs(ctx, case, key) for key in members):
            continue
        students = [_student(ctx, case, key) for key in members]
        if any(
            s is None or any(t.shape != s.shape for _, t in decomposition[key][0])
            for s, key in zip(students, members, strict=True)
        ):
            continue
        stacked = [
            np.concatenate([np.ravel(decomposition[key][0][i][1]) for key in members]) for i in range(len(names))
        ]
        coefficients = _fit_coefficients(np.concatenate([np.ravel(s) for s in students if s is not None]), stacked)
        if coefficients is not None:
            claims.append(_terms_claim(ctx, case, members, list(names), coefficients))
    for key in keys:
        if key in decomposition and differs(ctx, case, key):
            terms, groups = decomposition[key]
            for index, (term_name, _) in enumerate(terms):
                claim = _group_factor_claim(ctx, case, key, index, term_name, groups)
                if claim is not None:
                    claims.append(claim)
    return claims


def _fit_coefficients(student: np.ndarray, terms: list[np.ndarray]) -> tuple[float, ...] | None:
    """Coefficients a with student = sum a_i term_i exactly (least squares, then checked), not all one; None
    when no such combination reproduces the student."""
    matrix = np.stack([np.ravel(t) for t in terms], axis=1)
    if not np.all(np.isfinite(matrix)) or not np.all(np.isfinite(student)):
        return None
    solution, _, rank, _ = np.linalg.lstsq(matrix, np.ravel(student), rcond=None)
    if rank < len(terms):
        return None
    coefficients = tuple(float(round(c)) if abs(c - round(c)) < 1e-9 else float(c) for c in solution)
    if all(abs(c - coefficients[0]) < 1e-9 for c in coefficients):
        return None  # all one (right), or every term scaled alike: generic-scale says that
    if not same_as(student, sum(c * t for c, t in zip(coefficients, terms, strict=True))):
        return None
    return coefficients


def _said(coefficient: float, case: Case) -> str:
    """How a term with this coefficient differs from the reference's (which has 1)."""
    plain = {
        0.0: "is missing",
        -1.0: "has the wrong sign",
        2.0: "is doubled",
        0.5: "is halved",
        -2.0: "is doubled with the wrong sign",
        -0.5: "is halved with the wrong sign",
    }
    for value, words in plain.items():
        if abs(coefficient - value) < 1e-9:
            return words
    name = _name_of(coefficient, case)
    return f"is multiplied by {name} (= {_number(coefficient)})" if name else f"is multiplied by {_number(coefficient)}"


def _terms_claim(
    ctx: "Context", case: str, keys: list[str], names: list[str], coefficients: tuple[float, ...]
) -> Claim:
    """The student's ``keys`` as the reference's terms with ``coefficients``, the same in every case."""
    wrong = [
        f"the term {n} {_said(c, ctx.cases[case])}"
        for n, c in zip(names, coefficients, strict=True)
        if abs(c - 1) > 1e-9
    ]
    right = [n for n, c in zip(names, coefficients, strict=True) if abs(c - 1) <= 1e-9]
    subject = keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} and {keys[-1]}"
    words = (
        f"In your {subject}, "
        + " and ".join(wrong)
        + (f"; the other terms ({', '.join(right)}) are right." if right else ".")
    )

    def predict(name: str) -> dict[str, np.ndarray] | None:
        decomposition = _terms(ctx, name)
        if not decomposition:
            return None
        found = {}
        for key, (terms, _) in decomposition.items():
            if [n for n, _ in terms] == names:  # the same terms (another form of the function says nothing)
                found[key] = sum(c * t for c, (_, t) in zip(coefficients, terms, strict=True))
        return found or None

    return Claim("generic-terms", words, predict=predict)


def _group_factor_claim(
    ctx: "Context", case: str, key: str, index: int, term_name: str, groups: tuple[int, ...] | None
) -> Claim | None:
    """Term ``index`` wrong by a factor constant within each group (axes ``groups`` index the groups), the rest right:
    the student's difference from the reference is that term times a per-group factor, in every case."""
    if groups is None:
        return None

    def holds_on(name: str) -> bool | None:
        decomposition = _terms(ctx, name)
        ref = ctx.reference.get(name)
        if not decomposition or key not in decomposition or ref is None or key not in ref.outputs:
            return None
        terms, _ = decomposition[key]
        if terms[index][0] != term_name:
            return None  # another form of the function: this term is not in it
        s = _student(ctx, name, key)
        r = ref.outputs[key]
        if s is None or s.shape != r.shape:
            return False
        difference = s - r
        term = terms[index][1]
        if same_as(s, r, 1e-9, 1e-11):
            return None if name != case else False
        axes = tuple(a for a in range(term.ndim) if a not in groups)
        tt = np.sum(term * term, axis=axes, keepdims=True)
        factor = np.where(tt > 0, np.sum(difference * term, axis=axes, keepdims=True) / np.where(tt > 0, tt, 1), 0)
        return same_as(s, r + factor * term)

    return Claim(
        "generic-terms",
        f"In your {key}, the term {term_name} is wrong by a factor that changes from one"
        " normalised group to the next; the other terms are right.",
        holds_on=holds_on,
        about=(key,),
    )


def axes_claims(ctx: "Context", case: str, keys: list[str]) -> list[Claim]:
    """``generic-axes``: statistics (or the mean, or the variance alone) or the parameter gradients' sums taken over
    other axes than the reference's, by a rule that carries over to every input (``Expected.axis_variants``)."""
    variants = getattr(ctx.expected, "axis_variants", None)  # (the live source's: Expected.axis_variants)
    variant_of = getattr(ctx.expected, "axis_variant", None)
    if variants is None or variant_of is None:
        return []
    claims: list[Claim] = []
    for rule, what, array, axes in variants(ctx.cases[case], keys):

        def predict(name: str, rule: str = rule, what: str = what) -> dict[str, np.ndarray] | None:
            return variant_of(ctx.cases[name], rule, what)

        subject = {
            "statistics": "statistics are",
            "mean": "mean is",
            "variance": "variance is",
            "parameter gradients": "parameter gradients (dgamma, dbeta) are",
            "dgamma": "dgamma is",
            "dbeta": "dbeta is",
            "db": "db is",
            "backward means": "backward's means (of g and of g * x_hat) are",
            "the mean of g": "backward's mean of g = dout * gamma is",
            "the mean of g * x_hat": "backward's mean of g * x_hat is",
        }[what]
        verb = "summed" if what in ("parameter gradients", "dgamma", "dbeta", "db") else "taken"
        claims.append(
            Claim(
                "generic-axes",
                f"Your {subject} {verb} over {rule}, in every case (for {array}: axes"
                f" {axes}); those are not the exercise's axes.",
                predict=predict,
            )
        )
    return claims


# --------------------------------------------------------------------------- the search


def name_crashes(ctx: "Context", results: list[Any]) -> list[Any]:
    """``results`` with each failing, unnamed check whose message shows a case's crash named by that crash's
    cause (:func:`crash_claims`): checks of every kind (statistical, custom) report a crash the same way."""
    from dataclasses import replace

    named = []
    for r in results:
        if not r.passed and not r.misconception:
            for case in ctx.cases:
                error = ctx.student_result(case).error
                if (
                    error
                    and error.get("message")
                    and f"{error.get('type')}: {error['message']}" in r.message
                    or error
                    and error.get("type") == "BadOutputError"
                    and error.get("message", "") in r.message
                ):
                    found = _first(ctx, crash_claims(ctx, case), case, [], 0.0, 0.0)
                    if found is not None:
                        r = replace(r, misconception=found.id, message=found.explain() + "\n" + r.message)
                    break
        named.append(r)
    return named


def find(
    ctx: "Context",
    case: str,
    keys: list[str],
    rtol: float,
    atol: float,
    match_error: bool = False,
    match_warnings: Any = False,
) -> KnownMistake | None:
    """The first generic claim, in :data:`ORDER`, that explains ``keys`` of ``case`` and holds on every case.

    Memoised per (case, keys, tolerances) in the Context; a claim that held for one check is tried first for
    the next (one mistake usually fails several checks).
    """
    question = f"{','.join(keys)}|{rtol}|{atol}|{match_error}|{match_warnings}"
    return ctx._memoised(
        "generic", question, case, lambda: _find(ctx, case, keys, rtol, atol, match_error, match_warnings)
    )


def _find(
    ctx: "Context", case: str, keys: list[str], rtol: float, atol: float, match_error: bool, match_warnings: Any
) -> KnownMistake | None:
    if match_warnings and not keys:
        return None
    result = ctx.student_result(case)
    keys = [k for k in keys if k not in numgrad_outputs(ctx.cases[case])]
    if match_error or (result.error is not None and not keys):
        claims = crash_claims(ctx, case)
        return _first(ctx, claims, case, [], rtol, atol)
    if not keys or any(_student(ctx, case, k) is None for k in keys):
        return _first(ctx, crash_claims(ctx, case), case, [], rtol, atol)
    keys = [k for k in keys if differs(ctx, case, k, rtol, atol)]
    if not keys:
        return None  # the values are right (a dtype, or a warning): the check's message says what is wrong
    held: list[Claim] = ctx._memoised("generic-held", "", "", list)
    found = _first(ctx, held, case, keys, rtol, atol)
    if found is not None:
        return found
    for family in ORDER:
        claims = _claims(ctx, family, case, keys, rtol, atol)
        for claim in claims:
            if holds(ctx, claim, case, keys, rtol, atol):
                held.append(claim)
                return claim.mistake(ctx.exercise_id)
    return None


def _claims(ctx: "Context", family: str, case: str, keys: list[str], rtol: float, atol: float) -> list[Claim]:
    if family == "generic-inplace":
        return inplace_claims(ctx, case, keys)
    if family == "generic-param":
        return param_claims(ctx, case, keys, rtol, atol)
    if family == "generic-mode":
        return mode_claims(ctx, case)
    if family == "generic-function":
        return function_claims(ctx, case)
    if family == "generic-terms":
        return term_claims(ctx, case, keys)
    if family == "generic-axes":
        return axes_claims(ctx, case, keys)
    if family == "generic-transpose":
        return transpose_claims(ctx, case, keys)
    if family == "generic-scale":
        found = scale_claims(ctx, case, keys, None)
        for base in ctx._pool()[:8]:
            if ctx._touches(base, case):
                found += scale_claims(ctx, case, keys, base)
        return [c for c in found if c.family == "generic-scale"]
    if family == "generic-offset":
        return [c for c in scale_claims(ctx, case, keys, None) if c.family == "generic-offset"]
    if family == "generic-region":
        return region_claims(ctx, case, keys)
    return []


def _first(
    ctx: "Context", claims: list[Claim], case: str, keys: list[str], rtol: float, atol: float
) -> KnownMistake | None:
    for claim in claims:
        if holds(ctx, claim, case, keys, rtol, atol):
            return claim.mistake(ctx.exercise_id)
    return None


__all__ = ["GenericMistake", "ORDER", "find", "holds", "known_constants"]
