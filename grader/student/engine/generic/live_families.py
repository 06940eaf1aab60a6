"""The generic families that run the reference (live only: ``Expected.rerun`` runs the reference on a rewritten
script, ``Expected.terms`` and ``Expected.axis_variant`` compute the reference's formulas; a case pack has no
reference code and these families skip), tried first in this order:

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
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from grader.student.engine.compare import same_as
from grader.student.engine.generic.claims import (
    Claim,
    Context,
    constructor,
    differs,
    name_of,
    number_text,
    student_output,
)
from grader.student.engine.ops import Case, ScriptResult


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
    students = [s for s in (student_output(ctx, case.name, k) for k in keys) if s is not None]
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

        shown = found if isinstance(found, bool) else number_text(found)
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
            f"Your code behaves as if {name} were {said}: with {name}={value!r} it acts as {number_text(float(found))}.",
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
        students = [student_output(ctx, case, key) for key in members]
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
    name = name_of(coefficient, case)
    return (
        f"is multiplied by {name} (= {number_text(coefficient)})"
        if name
        else f"is multiplied by {number_text(coefficient)}"
    )


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
        s = student_output(ctx, name, key)
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
