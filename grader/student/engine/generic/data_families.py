"""The generic families that need nothing but data (they run offline on a case pack too): the case's inputs, the
reference's results and the student's. In the order tried, after the live ones (``generic-inplace`` before all):

- ``generic-transpose``: an output is the expected one with its axes reversed;
- ``generic-scale``: an output is c times the expected one (c the same in every case, or the same
  known expression of each case's sizes and settings: 2, 1/2, 1/(1-p), p, m/(m-1), D, 1/D, ...);
- ``generic-offset``: an output is the expected one plus c;
- ``generic-region``: an output right everywhere but one place, in every case: for an activation,
  one side of x = 0 (or x = 0 itself); for any output, its last (or first) row or column (a loop
  one short, a tail skipped); or every case but those with one setting (``approximate='tanh'``,
  eval mode);
- ``generic-inplace`` (tried first): an array handed to the student (x, dout) was written into.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from grader.student.engine.compare import same_as, scale_of
from grader.student.engine.diagnosis import KnownMistake
from grader.student.engine.generic.claims import (
    Claim,
    Context,
    comparable_keys,
    differs,
    input_of,
    known_constants,
    name_of,
    number_text,
    settings,
    student_output,
)
from grader.student.engine.ops import Case, ScriptResult


def scale_claims(ctx: "Context", case: str, keys: list[str], base: KnownMistake | None) -> list[Claim]:
    """``generic-scale`` and ``generic-offset``: each differing key of ``case`` is c times (or c plus) the base's."""
    claims = []
    base_result = ctx.reference.get(case) if base is None else ctx.run_mistake(base, ctx.cases[case])
    differing = [
        k
        for k in keys
        if base_result is not None
        and k in base_result.outputs
        and not same_as(student_output(ctx, case, k), base_result.outputs[k], 1e-9, 1e-11)
    ]
    if not differing or base_result is None:
        return []
    for family in ("generic-scale", "generic-offset"):
        factors = {}
        for key in differing:
            s, r = student_output(ctx, case, key), base_result.outputs[key]
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
            if any(name_of(c, ctx.cases[case]) for c in factors.values()):  # a size's name may be a coincidence
                claims.append(_constant_claim(ctx, case, family, factors, base, named=False))
    return claims


def _constant_claim(
    ctx: "Context", case: str, family: str, factors: dict[str, float], base: KnownMistake | None, named: bool = True
) -> Claim:
    """A claim that each key is c_k times (plus c_k) the base's, c_k named (``named``: the known constant of each
    case it equals here) or the same number in every case."""
    this = ctx.cases[case]
    names = {key: name_of(c, this) if named else None for key, c in factors.items()}

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
        amount = label or number_text(c)
        value = (
            ""
            if label is None or label == number_text(c) or "/" not in label and not any(ch.isalpha() for ch in label)
            else f" (= {number_text(c)} here)"
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
    s = student_output(ctx, case, key)
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
                mine = student_output(ctx, name, key)
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
            wrong = not same_as(student_output(ctx, name, key), ref.outputs[key], 1e-9, 1e-11)
            return has == wrong  # wrong in every case with the setting, right in every case without

        words = "in eval mode" if setting == "mode" else f"with {setting}={value!r}"
        running = [n for n in ctx.cases if key in comparable_keys(ctx, n) and _runs(ctx.cases[n])]
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
            mine = student_output(ctx, name, key)
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
        s, r = student_output(ctx, case, key), (ctx.reference.get(case) or ScriptResult()).outputs.get(key)
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
        after = student_output(ctx, case, key)
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
