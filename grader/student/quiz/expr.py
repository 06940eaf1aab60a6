"""Typed answers read by SymPy: numbers (``1.1^50``, ``sqrt(2/n)``, ``4.63e-1``) and
expressions (``2/n_in``, ``Var(W) = 2/n``, ``σ(z)(1 − σ(z))``).

Input is never evaluated as Python: it is capped in length (``MAX_CHARS``), in
tokens (``MAX_TOKENS``), in parenthesis depth (``MAX_DEPTH``) and in nested
function calls (``MAX_CALL_DEPTH``: ``phi(phi(phi(phi(x))))`` is refused, as
each level multiplies SymPy's work), split into tokens
(numbers, names, ``+ - * / ^ ( ) , =``), and every name must be a declared
symbol, one of its aliases, a known function or a constant (``pi``, ``e``); only
then does ``sympy.parsing.sympy_parser.parse_expr`` build the expression, with
a local dictionary holding exactly those names, implicit multiplication and
``^`` as power, and ``evaluate=False`` so that nothing is computed before the
exponents are checked (``9^9^9`` is refused instead of hanging).

φ (and ``phi``) is the standard normal density, Φ (and ``Phi``, ``normcdf``) its
CDF, as in the course text (GELU'(x) = Φ(x) + x·φ(x)); ``sech``, ``cosh`` and
``sinh`` are read too (``sech²(z)`` = ``1/cosh(z)^2`` = ``1 - tanh(z)^2``).

Every problem is an ``ExpressionError`` whose message is one line saying what
to write instead; the quiz turns it into an unreadable answer, which costs no
attempt.

Two expressions are judged equal by *fingerprint*: their values at a few sample
points of the declared symbols (points drawn from the question's salt, values
in [0.6, 3.4]), computed with 30 significant digits and written with 12. Equal
functions give equal fingerprints; different ones differ at random points
(the Schwartz-Zippel argument), so the locked file can store the digest of a
fingerprint instead of the expression.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from tokenize import TokenError
from collections.abc import Mapping, Sequence
from typing import Any

MAX_CHARS = 200
MAX_TOKENS = 80
MAX_DEPTH = 6
MAX_CALL_DEPTH = 3
MAX_EXPONENT = 1000.0
MAX_DECIMAL_EXPONENT = 300
FINGERPRINT_POINTS = 3
FINGERPRINT_DIGITS = 12

GREEK = {  # a Greek letter spelled out: the names short answers and expressions read
    "α": "alpha",
    "β": "beta",
    "γ": "gamma",
    "δ": "delta",
    "ε": "epsilon",
    "ϵ": "epsilon",
    "η": "eta",
    "θ": "theta",
    "λ": "lambda",
    "μ": "mu",
    "ξ": "xi",
    "π": "pi",
    "ρ": "rho",
    "σ": "sigma",
    "ς": "sigma",
    "τ": "tau",
    "φ": "phi",
    "ϕ": "phi",
    "ψ": "psi",
    "ω": "omega",
}
_GREEK = {**GREEK, "λ": "lam"}  # "lambda" is a Python keyword, which SymPy's parser cannot take as a name
_CDF = re.compile(r"Φ|\bPhi\b|\bPHI\b")
MINUSES = "\u2212\u2012\u2013\u2014\ufe63\uff0d"  # unicode minus signs, read as '-'
TIMES = "\u00b7\u22c5\u00d7\u2219\u2022"  # multiplication signs other than '*'

_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_TOKEN = re.compile(
    r"\s+|(?P<num>(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)|(?P<name>[a-z_][a-z0-9_]*)|(?P<op>\*\*|[-+*/^(),=])"
)
_FUNCTION_POWER = re.compile(r"\b([a-z]+)\s*\^\s*\(?(\d+)\)?\s*\(")

FUNCTIONS = (
    "sqrt",
    "exp",
    "log",
    "ln",
    "erf",
    "erfc",
    "tanh",
    "sech",
    "cosh",
    "sinh",
    "sigmoid",
    "sigma",
    "phi",
    "normcdf",
    "normpdf",
)
CONSTANTS = ("pi", "e")


class ExpressionError(ValueError):
    """Typed text that cannot be read as the expected kind of answer (one line)."""


def _plain(text: str) -> str:
    """Unicode to the ASCII notation the tokenizer reads (case-folded)."""
    s = text.replace("½", "(1/2)").replace("√", "sqrt")
    s = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+", lambda m: "^(" + m.group(0).translate(_SUPERSCRIPT) + ")", s)
    s = unicodedata.normalize("NFKC", s).replace("\u2044", "/")
    for minus in MINUSES:
        s = s.replace(minus, "-")
    for times in TIMES:
        s = s.replace(times, "*")
    s = _CDF.sub(" normcdf ", s)  # before case-folding: Φ / Phi is the CDF, φ / phi the density
    s = "".join(f" {_GREEK[ch]} " if ch in _GREEK else ch for ch in s.casefold())
    s = re.sub(r"sqrt\s*(\d+(?:\.\d+)?|pi\b|e\b|[a-z_][a-z0-9_]*)", r"sqrt(\1)", s)
    return s.replace("**", "^")


def _move_function_powers(s: str) -> str:
    """``tanh^2(z)`` -> ``tanh(z)^2``, the usual shorthand for a power of a function value."""
    while (m := _FUNCTION_POWER.search(s)) is not None:
        depth, end = 1, m.end()
        while end < len(s) and depth:
            depth += {"(": 1, ")": -1}.get(s[end], 0)
            end += 1
        if depth:
            raise ExpressionError("unbalanced parentheses")
        s = f"{s[: m.start()]}{m.group(1)}({s[m.end() : end - 1]})^{m.group(2)}{s[end:]}"
    return s


def names(text: str) -> list[str]:
    """The names a typed answer holds, in order, as the reader spells them (``Φ`` as ``normcdf``, ``σ`` as
    ``sigma``, ``√`` as ``sqrt``); nothing is checked or computed."""
    return [m.group("name") for m in _TOKEN.finditer(_plain(str(text))) if m.group("name")]


def _check_tokens(s: str, names: Sequence[str]) -> None:
    """Refuse any character or name outside the whitelist, with the name said, and anything too
    complex to judge quickly (too many tokens, parentheses or function calls nested too deep)."""
    pos, tokens, previous = 0, 0, ""
    stack: list[bool] = []  # per open parenthesis: whether it opens a function call
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if m is None:
            raise ExpressionError(f"unexpected character '{s[pos]}'")
        if m.group(0).isspace():
            pos = m.end()
            continue
        tokens += 1
        if tokens > MAX_TOKENS:
            raise ExpressionError(
                f"the answer is too complex to judge (over {MAX_TOKENS} symbols): write it more simply"
            )
        number = m.group("num")
        if number is not None and (previous == "num" or s[m.end() : m.end() + 1] == "."):
            raise ExpressionError(
                f"'{s[m.start() : m.end() + 2].strip()}...' is not a number: write one decimal point "
                "per number and an operator between numbers"
            )
        op = m.group("op")
        if op == ",":  # no function takes two arguments: a comma makes a pair (SymPy's Tuple), never a value
            raise ExpressionError("write one number or expression, without commas (1024, not 1,024)")
        if op == "(":
            stack.append(previous in FUNCTIONS)
            if len(stack) > MAX_DEPTH or sum(stack) > MAX_CALL_DEPTH:
                raise ExpressionError(
                    "the answer is too complex to judge (parentheses or function calls nested too "
                    "deep): write it more simply"
                )
        elif op == ")":
            if not stack:  # ")(" balances by count, yet SymPy's reader fails on it
                raise ExpressionError("unbalanced parentheses")
            if previous == "(":  # "g()" would be g times an empty pair
                raise ExpressionError("empty parentheses: write what they hold")
            stack.pop()
        previous = "num" if number is not None else (m.group("name") or op or "")
        if number is not None and "e" in number and abs(int(number.split("e")[1])) > MAX_DECIMAL_EXPONENT:
            raise ExpressionError(f"'{number}' is beyond 1e±{MAX_DECIMAL_EXPONENT}, not a plausible answer")
        name = m.group("name")
        if name is not None and name not in names and name not in FUNCTIONS and name not in CONSTANTS:
            if not names:
                raise ExpressionError(f"unknown name '{name}'")
            raise ExpressionError(f"unknown symbol '{name}': this answer may use {', '.join(names)}")
        pos = m.end()
    if s.count("(") != s.count(")"):
        raise ExpressionError("unbalanced parentheses")


def _namespace(symbols: Mapping[str, Any], display: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """(local_dict, global_dict) for parse_expr: the declared symbols, functions and constants only.

    ``display``: σ, Φ and φ stay named functions (``σ(z)``), for showing how an answer was read;
    otherwise they are their formulas, for computing.
    """
    import sympy as sp

    t = sp.Symbol("t")
    if display:
        sigma, cdf, pdf = sp.Function("σ"), sp.Function("Φ"), sp.Function("φ")
    else:
        sigma = sp.Lambda(t, 1 / (1 + sp.exp(-t)))
        cdf = sp.Lambda(t, (1 + sp.erf(t / sp.sqrt(2))) / 2)
        pdf = sp.Lambda(t, sp.exp(-(t**2) / 2) / sp.sqrt(2 * sp.pi))
    local = {
        "sqrt": sp.sqrt,
        "exp": sp.exp,
        "log": sp.log,
        "ln": sp.log,
        "erf": sp.erf,
        "erfc": sp.erfc,
        "tanh": sp.tanh,
        "sech": sp.sech,
        "cosh": sp.cosh,
        "sinh": sp.sinh,
        "sigmoid": sigma,
        "sigma": sigma,
        "normcdf": cdf,
        "phi": pdf,
        "normpdf": pdf,
        "pi": sp.pi,
        "e": sp.E,
    }
    local.update(symbols)
    glob = {name: getattr(sp, name) for name in ("Add", "Mul", "Pow", "Integer", "Float", "Rational", "Symbol")}
    glob["__builtins__"] = {}
    return local, glob


def _subject_form(text: str, symbols: Mapping[str, str] | None) -> str:
    """A subject as written, in one spelling: no spaces, ASCII primes, ``sigmoid`` as ``σ``, each name a
    question's symbol stands for as that symbol (``tanh'(x)`` is ``tanh'(z)`` where ``x`` is an alias of ``z``)."""
    s = re.sub(r"\s+", "", _plain(text.replace("′", "'").replace("’", "'"))).replace("sigmoid", "sigma")
    names = {k.casefold(): v for k, v in (symbols or {}).items()}
    return re.sub(r"[a-z_][a-z0-9_]*", lambda m: names.get(m.group(0), m.group(0)), s)


def strip_subject(text: str, subject: str | None, symbols: Mapping[str, str] | None = None) -> str:
    """``Var(W) = 2/n`` -> ``2/n`` when the question's subject is ``Var(W)`` (either side of '='; ``symbols``:
    the names a student may type, so that ``tanh'(x) = ...`` reads where ``x`` stands for ``z``)."""
    if "=" not in text:
        return text
    sides = text.split("=")
    key = _subject_form(subject, symbols) if subject else None
    sides = [side.replace("[", "(").replace("]", ")") for side in sides]
    if len(sides) == 2 and key is not None:
        left, right = (_subject_form(side, symbols) for side in sides)
        if left == key:
            return sides[1]
        if right == key:
            return sides[0]
    hint = f"'{subject} = ...' or " if subject else ""
    raise ExpressionError(f"write {hint}just the expression")


def parse(text: str, symbols: Mapping[str, str] | None = None, display: bool = False) -> Any:
    """A SymPy expression from typed text.

    ``symbols`` maps each name a student may type to the canonical symbol it
    stands for (``{"n_in": "n_in", "n": "n_in", "fan_in": "n_in"}``); names
    outside it, the functions and the constants are refused. ``display``: the
    expression as written, for :func:`reading` (decimals kept, σ, Φ, φ named),
    never for computing.
    """
    import sympy as sp
    from sympy.parsing.sympy_parser import (
        auto_number,
        convert_xor,
        implicit_application,
        implicit_multiplication,
        parse_expr,
        rationalize,
    )

    if not isinstance(text, str):
        text = str(text)
    raw = text.strip()
    if not raw:
        raise ExpressionError("the answer is empty")
    if len(raw) > MAX_CHARS:
        raise ExpressionError(f"the answer has {len(raw)} characters; keep it under {MAX_CHARS}")
    names = {k.casefold(): v for k, v in (symbols or {}).items()}
    s = _move_function_powers(_plain(raw))
    canonical = sorted(set(names.values()))
    if len(canonical) == 1:  # "σ - σ²" for σ(z) - σ(z)²: the usual shorthand when there is one variable
        s = re.sub(r"\b(sigma|sigmoid|tanh|sech)\b(?!\s*\()", rf"\1({canonical[0]})", s)
    if "=" in s:
        raise ExpressionError("write only the value or expression, without '='")
    _check_tokens(s, sorted(names))
    local, glob = _namespace({k: sp.Symbol(v, positive=True) for k, v in names.items()}, display)
    # rationalize: decimals become exact fractions, so every value is computed to 30 digits
    transformations: tuple[Any, ...] = (
        auto_number,
        rationalize,
        convert_xor,
        implicit_multiplication,
        implicit_application,
    )
    if display:
        transformations = (auto_number, convert_xor, implicit_multiplication, implicit_application)
    try:
        expr = parse_expr(s, local_dict=local, global_dict=glob, transformations=transformations, evaluate=False)
    except (SyntaxError, TypeError, ValueError, AttributeError, NameError, TokenError) as exc:
        raise ExpressionError("cannot be read as a formula: check the operators and parentheses") from exc
    if not isinstance(expr, sp.Basic) or isinstance(expr, (sp.Lambda, sp.FunctionClass)):
        raise ExpressionError("cannot be read as a formula: a function needs its argument, e.g. sqrt(2)")
    if not display:
        _check_exponents(expr)
    return expr


def reading(
    text: str, symbols: Mapping[str, str] | None = None, values: Mapping[str, float] | None = None, number: bool = False
) -> str:
    """How a typed answer is read, in one line: the expression as the judge parses it, with ``^`` for powers
    and ``·`` for every multiplication, implicit ones included (``1/2n`` -> ``1·n_in/2``: n over 2), each name
    as the symbol it stands for, σ, Φ and φ by name; with ``number``, ``= its value`` too (``values``: the
    question's parameters, usable by name).

    Shows what was read, never whether it is right: the live preview of an answer box. ExpressionError
    (the same one-line reasons as judging) when the text cannot be read.
    """
    import sympy as sp

    table = dict(symbols or {})
    table.update({name: name for name in values or {}})
    shown = sp.sstr(parse(text, table, display=True), order="none", full_prec=False)
    shown = re.sub(r"\bE\b", "e", shown.replace("**", "^").replace("*", "·"))
    if number:
        result = f"{value(text, values):.6g}"
        shown += "" if result == shown else f" = {result}"
    return shown


def _check_exponents(expr: Any, subs: Mapping[Any, Any] | None = None) -> None:
    """Refuse powers (and exp) whose exponent exceeds MAX_EXPONENT in size, innermost first, so that
    nothing huge is ever computed (``9^9^9``, ``exp(exp(100))``); symbols take their ``subs`` values."""
    import sympy as sp

    for node in sp.postorder_traversal(expr):
        if isinstance(node, sp.Pow):
            exponent = node.exp
        elif isinstance(node, sp.exp):
            exponent = node.args[0]
        else:
            continue
        if exponent.free_symbols and subs is None:
            continue
        try:
            size = abs(complex(exponent.evalf(15, subs=dict(subs or {}))))
        except (TypeError, ValueError, OverflowError, ZeroDivisionError):
            size = math.inf
        if not size <= MAX_EXPONENT:
            raise ExpressionError(f"an exponent larger than {MAX_EXPONENT:g} is not a plausible answer")


def value(text: str, values: Mapping[str, float] | None = None) -> float:
    """The real number a typed answer stands for; the question's parameters may be used by name."""
    import sympy as sp

    values = dict(values or {})
    expr = parse(text, {name: name for name in values})
    return _finite(expr, text, {sp.Symbol(k, positive=True): sp.Float(v, 30) for k, v in values.items()})


def _finite(expr: Any, text: str, subs: Mapping[Any, Any] | None = None) -> float:
    """The value of ``expr`` (symbols given by ``subs``) to 30 digits, evaluated numerically without
    rebuilding the expression, so no exact huge integer is ever formed."""
    _check_exponents(expr, subs or {})
    try:
        number = complex(expr.evalf(30, subs=dict(subs or {})))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise ExpressionError(f"'{text.strip()}' is not a number") from None
    if abs(number.imag) > 1e-12 * max(1.0, abs(number.real)) or not math.isfinite(number.real):
        raise ExpressionError(f"'{text.strip()}' is not a finite real number")
    return number.real


def sample_points(salt: str, canonical: Sequence[str]) -> list[dict[str, float]]:
    """FINGERPRINT_POINTS points for the canonical symbols, drawn from the salt (values in [0.6, 3.4])."""
    points = []
    for i in range(FINGERPRINT_POINTS):
        point = {}
        for name in canonical:
            h = hashlib.sha256(f"{salt}\0{i}\0{name}".encode()).digest()
            point[name] = 0.6 + 2.8 * int.from_bytes(h[:8], "little") / 2**64
        points.append(point)
    return points


def fingerprint(text: str, symbols: Mapping[str, str], salt: str) -> str:
    """``expr:<v1>,<v2>,<v3>``: the expression's values at the salt's sample points, 12 digits.

    A value that is not a finite real number is written ``nan`` (it matches no key).
    """
    import sympy as sp

    expr = parse(text, symbols)
    canonical = sorted(set(symbols.values()))
    parts = []
    for point in sample_points(salt, canonical):
        subs = {sp.Symbol(k, positive=True): sp.Float(v, 30) for k, v in point.items()}
        try:
            number = _finite(expr, text, subs)
            parts.append(f"{number:.{FINGERPRINT_DIGITS}g}")
        except ExpressionError:
            parts.append("nan")
    return "expr:" + ",".join(parts)
