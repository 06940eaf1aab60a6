"""Reading quiz answers: the canonical forms an answer is judged by (no answers here).

Shared by the instructor's locked quizzes (``grader.quiz``: digests of these
forms) and the handout's practice quizzes (:mod:`grader.student.quiz.practice`:
explanations sealed under keys derived from these forms). Canonical forms:
``choice:<id>``, ``choices:<id>,<id>`` (sorted), ``num:<k>`` with
k = round(value * QUANT_STEPS / tolerance) (a candidate answer yields the bins
around its own), ``short:<normalised text>``, and for formula questions the
fingerprint ``expr:...`` of :mod:`grader.student.quiz.expr`.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from grader.student.quiz import expr
from grader.student.errors import GraderError

QUANT_STEPS = 10
MAX_ANSWER_CHARS = 200
MAX_DIGITS = 17  # significant digits of one numeral in a numeric answer (as many as a double's repr)
MAX_EXPONENT = 15  # |a numeral| below 10**MAX_EXPONENT (``1e300``, ``9223372036854775808`` are refused)
NUMERAL = re.compile(r"(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?")


class QuizError(GraderError):
    """A quiz problem the user can fix (one line)."""


class AnswerFormatError(QuizError):
    """An answer that cannot be read for its question's kind (the interactive quiz re-asks)."""


# --- answer normalisation -------------------------------------------------------

_TIMES = "*" + expr.TIMES
_SUPERSCRIPTS = {"\u00b2": "^2", "\u00b3": "^3", "\u207b\u00b9": "^-1"}


def _unify_symbols(text: str) -> str:
    """Superscripts to ``^n``, NFKC, unicode minus signs to ``-``, ``**`` to ``^``."""
    for sup, plain in _SUPERSCRIPTS.items():
        text = text.replace(sup, plain)
    text = unicodedata.normalize("NFKC", text)
    for minus in expr.MINUSES:
        text = text.replace(minus, "-")
    return text.replace("**", "^")


def normalise_text(text: str) -> str:
    """The canonical form of a short answer.

    Case-folded; Greek letters spelled out (σ -> sigma, φ -> phi), but Φ and ``Phi`` (the normal
    CDF) -> normcdf, kept apart from φ (the density); √ -> sqrt;
    unicode minus -> '-'; ``**`` -> ``^``; multiplication signs (* · × ⋅) and all
    whitespace, underscores and hyphens between words removed; parentheses
    around a single atom dropped (``sqrt(2)`` = ``√2``, ``x*Phi(x)`` = ``x·Φ(x)``);
    a trailing full stop dropped.
    """
    s = re.sub(r"Φ|\bPhi\b|\bPHI\b", "normcdf", _unify_symbols(text)).casefold()  # Φ the CDF, φ the density
    s = "".join(expr.GREEK.get(ch, ch) for ch in s)
    s = s.replace("√", "sqrt")
    for times in _TIMES:
        s = s.replace(times, "")
    s = re.sub(r"\s+", "", s)
    s = s.replace("_", "")
    s = re.sub(r"(?<=[a-z]{2})-(?=[a-z]{2})", "", s)
    previous = None
    while previous != s:
        previous = s
        s = re.sub(r"\(([a-z0-9.]+)\)", r"\1", s)
    return s.rstrip(".")


def check_numerals(text: Any) -> str:
    """The answer's text when every numeral in it is within bounds, read without evaluating anything; else
    AnswerFormatError (one line). A numeral has at most MAX_DIGITS significant digits and a magnitude below
    10**MAX_EXPONENT, so no answer makes its judge build millions of candidate keys."""
    if isinstance(text, bool):
        raise AnswerFormatError("expected a number, got true/false")
    if isinstance(text, float) and not math.isfinite(text):
        raise AnswerFormatError(f"'{text}' is not a finite number")
    raw = str(text).strip()
    if not raw:
        raise AnswerFormatError("expected a number, got nothing")
    for found in re.finditer(r"(?<![A-Za-z_])\d*\.?\d+(?:[eE][+-]?\d+)?", raw):
        whole, fraction, exponent = NUMERAL.fullmatch(found.group()).groups()  # type: ignore[union-attr]
        digits = (whole + (fraction or "")).lstrip("0")
        magnitude = len(whole.lstrip("0")) + int(exponent or 0)  # digits before the point, exponent applied
        if len(digits.rstrip("0")) > MAX_DIGITS or (digits and magnitude > MAX_EXPONENT):
            raise AnswerFormatError(
                f"'{found.group()[:20]}' is too large a number for an answer (at most "
                f"{MAX_DIGITS} significant digits and below 1e{MAX_EXPONENT}): round it"
            )
    return raw


def parse_number(text: str | int | float, values: Mapping[str, Any] | None = None) -> float:
    """Read a numeric answer with SymPy: ``0.4629``, ``4.63e-1``, ``5/3``, ``−1.2247``, ``1/√2``,
    ``1.1^50``, ``sqrt(2/n)`` where ``n`` is one of the question's ``values``.

    Raises AnswerFormatError (one line, what to write instead) when the text is
    not arithmetic, uses an unknown name, or is not a finite real number.
    """
    raw = check_numerals(text)
    if isinstance(text, (int, float)):
        return float(text)
    try:
        return expr.value(raw, values)
    except expr.ExpressionError as exc:
        raise AnswerFormatError(
            f"'{raw[:40]}' is not a number ({exc}): write e.g. 0.4629, 4.63e-1, 5/3 or sqrt(2/256)"
        ) from None


NUMBER_NAMES = ("sqrt", "pi", "e")  # what a drawn question's number may name: a calculator's square root and constants
_SHOWN_NAME = {"normcdf": "Φ", "phi": "φ", "sigma": "σ", "normpdf": "φ"}


def parse_drawn_number(text: str | int | float, params: Mapping[str, Any]) -> float:
    """A parameterised question's answer: a number, as a calculator gives it, never a formula.

    The answer is the value for the student's own numbers, so it may hold digits,
    ``+ - * / ^``, brackets, ``sqrt``, ``pi`` and ``e`` (``sqrt(2/(1.09*128))``), and
    nothing else: a parameter's name (``x``, ``fan_in``) or any other function (Φ, φ, σ,
    erf, exp, log, tanh, ...) is refused in one line (AnswerFormatError, no attempt
    spent), so the formula a text states for everyone (``x·Φ(x)``, ``a²·p/(1 - p)``)
    is not an answer: the question asks for what the formula gives.
    """
    if not isinstance(text, (int, float)):
        for name in expr.names(str(text)):
            if name in NUMBER_NAMES:
                continue
            if name in {k.casefold() for k in params}:
                raise AnswerFormatError(
                    f"write the number itself, not the formula: '{name}' is one of your values "
                    "(type its value instead; no attempt was used)"
                )
            if name not in expr.FUNCTIONS:
                continue  # an unknown word: parse_number says so
            shown = _SHOWN_NAME.get(name, name)
            raise AnswerFormatError(
                f"write the number itself, not the formula: work out {shown}(...) and type "
                "its value (sqrt, pi and e are fine; no attempt was used)"
            )
    return parse_number(text)


def symbol_table(data: Mapping[str, Any]) -> dict[str, str]:
    """Every name a student may type in a formula answer -> the symbol it stands for."""
    table = {name: name for name in data.get("symbols", [])}
    table.update(data.get("aliases", {}))
    return table


def _choice_ids(question: Any, raw: Any, shown: tuple[Any, ...] | None = None) -> list[str]:
    """Read choice answers: ids (``b``), numbers (``2``), a list, or ``a, c``.

    With ``shown`` (the order a student saw), only the numbers on screen are
    accepted; without it, numbers count in file order and ids are accepted.
    """
    if shown is not None:
        return _shown_choice_ids(shown, raw)
    ids = [c.id for c in question.choices]
    if isinstance(raw, bool):
        tokens: list[str] = []
    elif isinstance(raw, (list, tuple)):
        tokens = [str(t).strip() for t in raw]
    else:
        tokens = [t for t in re.split(r"[\s,;]+", str(raw).strip()) if t]
    if not tokens:
        raise AnswerFormatError(f"expected one of the choices 1-{len(ids)} (or {', '.join(ids)})")
    picked: list[str] = []
    for token in tokens:
        low = token.casefold().rstrip(".)")
        if low.isdigit() and 1 <= int(low) <= len(ids):
            choice = ids[int(low) - 1]
        elif low in ids:
            choice = low
        else:
            raise AnswerFormatError(f"'{token}' is not a choice: answer with 1-{len(ids)} (or {', '.join(ids)})")
        if choice not in picked:
            picked.append(choice)
    return picked


def _shown_choice_ids(shown: tuple[Any, ...], raw: Any) -> list[str]:
    """Choice numbers as displayed (1 = the first line shown) -> ids."""
    tokens = [t for t in re.split(r"[\s,;]+", str(raw).strip()) if t] if not isinstance(raw, bool) else []
    if not tokens:
        raise AnswerFormatError(f"expected the number of a choice, 1-{len(shown)}")
    picked: list[str] = []
    for token in tokens:
        low = token.rstrip(".)")
        if not (low.isdigit() and 1 <= int(low) <= len(shown)):
            raise AnswerFormatError(f"'{token}' is not a choice: answer with 1-{len(shown)}")
        choice = shown[int(low) - 1].id
        if choice not in picked:
            picked.append(choice)
    return picked


def canonical_answers(question: Any, raw: Any, shown: tuple[Any, ...] | None = None) -> list[str]:
    """The canonical message(s) to test for an answer (several only for numeric bins).

    Raises AnswerFormatError when ``raw`` cannot be read for the question's kind.
    Short formula answers are matched separately (``formula_message``).
    """
    kind = question.kind
    if kind == "single":
        picked = _choice_ids(question, raw, shown)
        if len(picked) != 1:
            raise AnswerFormatError("this question has one answer: give a single choice")
        return [f"choice:{picked[0]}"]
    if kind == "multiple":
        return ["choices:" + ",".join(sorted(_choice_ids(question, raw, shown)))]
    if kind == "numeric":
        tol = float(question.tolerance)  # validated > 0 when the file was loaded
        k = round(parse_number(raw) * QUANT_STEPS / tol)
        return [f"num:{k + d}" for d in range(-(QUANT_STEPS + 1), QUANT_STEPS + 2)]
    if kind == "short":
        if isinstance(raw, (list, tuple, dict, bool)) or raw is None:
            raise AnswerFormatError("expected a short text answer")
        text = normalise_text(str(raw))
        if not text:
            raise AnswerFormatError("expected a short text answer, got nothing")
        if len(text) > MAX_ANSWER_CHARS:
            raise AnswerFormatError(f"expected a short answer, got {len(text)} characters")
        return [f"short:{text}"]
    raise AnswerFormatError(f"unknown question kind '{kind}'")


def numeric_window(answer: float, tolerance: float) -> tuple[float, float]:
    """The numbers ``canonical_answers`` judges the same as ``answer``, as an interval (lo, hi).

    With step s = tolerance / QUANT_STEPS and k = round(answer / s), a number x is right when one of its bins,
    round(x / s) ± (QUANT_STEPS + 1), is k: when x / s lies within k ± (QUANT_STEPS + 1.5), so
    lo = (k - QUANT_STEPS - 1.5)·s and hi = (k + QUANT_STEPS + 1.5)·s (the handout's pages judge their
    practice numbers offline with it)."""
    k = round(answer * QUANT_STEPS / tolerance)  # as canonical_answers computes a bin
    return ((k - QUANT_STEPS - 1.5) * tolerance / QUANT_STEPS, (k + QUANT_STEPS + 1.5) * tolerance / QUANT_STEPS)


def digest(salt: str, message: str) -> str:
    """HMAC-SHA256(key=salt, msg=message) as hex."""
    return hmac.new(bytes.fromhex(salt), message.encode("utf-8"), hashlib.sha256).hexdigest()


def formula_message(question: Any, raw: Any, salt: str) -> str:
    """The fingerprint message of a formula answer (``expr:...``); AnswerFormatError when unreadable."""
    try:
        return expr.fingerprint(
            expr.strip_subject(str(raw), question.subject, question.symbols), question.symbols, salt
        )
    except expr.ExpressionError as exc:
        raise AnswerFormatError(str(exc)) from None
