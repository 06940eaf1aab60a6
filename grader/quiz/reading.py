"""Reading a text as a student hunting for answers would (the leak audit, :mod:`grader.course.leaks`).

Each function returns the candidate answers a text holds for one kind of question;
the audit tries every one with the question's own judge. Nothing here knows an
answer: it only reads.

- ``numbers``: every number as written, with a sign written against it
  (``-0.75``, ``−0.17`` with a unicode minus, ``[-1.2247, 0, 1.2247]``,
  ``(-0.75, 0)``), e-notation included;
- ``arithmetic``: every run of arithmetic, read as the judge reads a typed
  answer (``1/2 - 1/(2π)``, ``√(3/2)``, ``1.1^50``), cut at anything that is not
  arithmetic (``= , ; ≈ <`` and words), a minus dropped where it subtracts from
  a word (``x - 0.75``);
- ``formulas``: for a formula question, every span written in its own names
  (its symbols and aliases, its subject's words, the functions and constants
  the reader knows), whole, each side of ``=`` and each ``a = b``;
- ``instantiated``: for a formula question, every run of arithmetic with its sizes
  (whole numbers of 8 or more: ``N(0, 2/256)``, ``2/(256 + 256)``) written back
  as the question's symbols (``2/n_in``, ``2/(n_in + n_out)``): a formula shown
  with numbers put in;
- ``near_concept``: the numbers and arithmetic of each sentence that names a
  question's concept (two of its distinctive words, ``concept_words``);
- ``choices_quoted``: for a choice question, the choices whose text is quoted;
- ``phrases``: for a short text question, every phrase of one to three words
  within three words of a word of its prompt.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import unicodedata

from grader.quiz.errors import AnswerFormatError
from grader.quiz.model import Question
from grader.student.quiz import expr
from grader.student.quiz.answers import parse_number

MINUS = "-\u2212\u2013\u2012\ufe63\uff0d"
_NUMBER = re.compile(rf"(?<![\w.])[{MINUS}]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+\u2212]?\d+)?(?!\w)(?!\.\d)")
_ARITHMETIC = re.compile(rf"[{MINUS}0-9.\s+*/^·×⋅√π()\[\]²³½⁻⁰¹⁴⁵⁶⁷⁸⁹]+")
_OPERATOR = re.compile(rf"[+*/^·×⋅√π²³½⁻]|[\d)]\s*[{MINUS}]")
_LEADING = "+*/^·×⋅ \t\n"


def _ascii_minus(text: str) -> str:
    for minus in MINUS[1:]:
        text = text.replace(minus, "-")
    return text


def numbers(text: str) -> set[float]:
    """Every number written in ``text``, with its sign where one is written against it."""
    out: set[float] = set()
    for match in _NUMBER.finditer(text):
        value = float(_ascii_minus(match.group(0)))
        if math.isfinite(value):
            out.add(value)
    return out


def _trim(piece: str) -> str:
    """A piece of arithmetic without dangling operators or unmatched brackets at its ends."""
    previous = None
    while previous != piece:
        previous = piece
        piece = piece.strip(" \t\n").rstrip(_LEADING + MINUS).lstrip(_LEADING)
        if piece.count("(") > piece.count(")") and piece.startswith("("):
            piece = piece[1:]
        if piece.count(")") > piece.count("(") and piece.endswith(")"):
            piece = piece[:-1]
    return piece


@functools.lru_cache(maxsize=65536)
def _value(piece: str) -> float | None:
    """The number a piece of arithmetic stands for, read as the judge reads it (None: unreadable)."""
    try:
        return parse_number(piece)
    except AnswerFormatError:
        return None


def arithmetic(text: str) -> set[float]:
    """The value of every run of arithmetic in ``text`` (``1/2 - 1/(2π)``, ``√(3/2)``, ``1.1^50``)."""
    out: set[float] = set()
    for piece in arithmetic_pieces(text):
        value = _value(piece)
        if value is not None:
            out.add(value)
    return out


def arithmetic_pieces(text: str) -> list[str]:
    """Every run of arithmetic in ``text`` as written (what ``arithmetic`` reads)."""
    out: list[str] = []
    text = text.replace("[", "(").replace("]", ")")
    for match in _ARITHMETIC.finditer(text):
        if not _OPERATOR.search(match.group(0)):
            continue
        stripped = match.group(0).lstrip(" \t\n)")
        before = text[: match.end() - len(stripped)].rstrip()
        piece = _trim(stripped)
        if piece[:1] in MINUS and (before[-1:].isalnum() or before[-1:] == ")"):
            piece = _trim(piece[1:])  # "x - 0.75", "f(x) - 2/3": a difference whose left side is not arithmetic
        if _OPERATOR.search(piece) and re.search(r"\d|π", piece):
            out.append(piece)
    return out


SIZE = 8  # a whole number this large in a formula is a size put in (fan_in = 256), not one of its constants
MAX_PUT_IN = 16  # ways to write a run's sizes back as symbols tried per run


def instantiated(text: str, question: Question) -> set[str]:
    """Every run of arithmetic in ``text`` with sizes (whole numbers of at least SIZE), each size written back as
    one of ``question``'s symbols in every way (at most MAX_PUT_IN per run): ``2/(256 + 256)`` gives
    ``2/(n_in + n_out)`` among others. A formula shown with numbers put in is the formula."""
    symbols = sorted(set(question.symbols.values()))
    out: set[str] = set()
    if not symbols:
        return out
    for piece in arithmetic_pieces(text):
        sizes = [m for m in re.finditer(r"(?<![\d.])\d+(?![\d.])", piece) if int(m.group(0)) >= SIZE]
        if not sizes or len(symbols) ** len(sizes) > MAX_PUT_IN:
            continue
        for names in itertools.product(symbols, repeat=len(sizes)):
            written, end = [], 0
            for match, name in zip(sizes, names, strict=True):
                written += [piece[end : match.start()], f" {name} "]
                end = match.end()
            out.add(re.sub(r"\s+", " ", "".join(written) + piece[end:]).strip())
    return out


_SENTENCE = re.compile(r"(?<!\d)[.;!?](?!\d)|\n")


def concept_words(prompt: str, prompts: list[str], most: int = 3) -> set[str]:
    """A question's concept: the words of its prompt (four letters or more, not a common word) that at most
    ``most`` of the bank's ``prompts`` hold (``dropout`` is in many, ``naive`` in one)."""

    def words(text: str) -> set[str]:
        return {w.casefold() for w in re.findall(r"[^\W\d_]{4,}", text)} - _COMMON

    return {w for w in words(prompt) if sum(w in words(p) for p in prompts) <= most}


def near_concept(text: str, concept: set[str]) -> set[float]:
    """The numbers and arithmetic of each sentence of ``text`` that holds two words of ``concept`` (a plain number
    such as 0.6 or 2 is everywhere; written where the text speaks of the question's concept, it answers it)."""
    out: set[float] = set()
    for sentence in _SENTENCE.split(text):
        found = {w.casefold() for w in re.findall(r"[^\W\d_]{4,}", sentence)} & concept
        if len(found) >= 2:
            out |= numbers(sentence) | arithmetic(sentence)
    return out


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FORMULA_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|\s+|.", re.S)
_FORMULA_CHARS = set(MINUS + "+*/^()[]·×⋅√²³½⁻⁰¹⁴⁵⁶⁷⁸⁹'′=") | set(expr._GREEK) | {"Φ"}


def _vocabulary(question: Question) -> set[str]:
    """The words a formula answer to ``question`` may hold: its names, its subject's words, the reader's functions."""
    words = {name.casefold() for name in question.symbols}
    words |= {w.casefold() for w in _WORD.findall(question.subject or "")}
    return words | set(expr.FUNCTIONS) | set(expr.CONSTANTS)


def formulas(text: str, question: Question) -> set[str]:
    """The spans of ``text`` written in ``question``'s own names that hold one of its symbols: whole, each side
    of '=', and each 'a = b' (a subject and its formula)."""
    vocabulary, symbols = _vocabulary(question), {name.casefold() for name in question.symbols}
    out: set[str] = set()
    span: list[str] = []

    def close() -> None:
        piece = "".join(span).strip()
        span.clear()
        sides = [_trim(side) for side in piece.split("=")]
        out.update(side for side in sides if side)
        out.update(f"{a} = {b}" for a, b in zip(sides, sides[1:], strict=False) if a and b)

    for token in _FORMULA_TOKEN.findall(text):
        if token.isspace():
            if span:
                span.append(" ")
        elif _WORD.fullmatch(token) and token.casefold() not in vocabulary:
            close()
        elif _WORD.fullmatch(token) or token[0].isdigit() or token in _FORMULA_CHARS:
            span.append(token)
        else:
            close()
    close()
    return {f for f in out if any(w.casefold() in symbols for w in _WORD.findall(f))}


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", _ascii_minus(unicodedata.normalize("NFKC", text))).casefold()


def choices_quoted(text: str, question: Question) -> list[str]:
    """The ids of ``question``'s choices whose text ``text`` quotes."""
    normal = _normal(text)
    found = []
    for choice in question.choices:
        quoted = re.escape(_normal(choice.text).strip().rstrip("."))
        if quoted and re.search(rf"(?<!\w){quoted}(?!\w)", normal):
            found.append(choice.id)
    return found


_COMMON = {
    "which",
    "what",
    "with",
    "that",
    "this",
    "under",
    "from",
    "into",
    "have",
    "does",
    "when",
    "where",
    "there",
    "their",
    "them",
    "they",
    "than",
    "then",
    "these",
    "those",
    "words",
    "each",
    "every",
    "over",
    "about",
}


def phrases(text: str, question: Question) -> set[str]:
    """The phrases of one to three words within three words of a word of ``question``'s prompt (four letters or
    more, not a common word): where a text names what the prompt asks for."""
    anchors = {w.casefold() for w in re.findall(r"[^\W\d_]{4,}", question.prompt)} - _COMMON
    words = re.findall(r"[\w∞^]+(?:[-'][\w∞^]+)*", text)
    out: set[str] = set()
    for i, word in enumerate(words):
        if word.casefold() not in anchors:
            continue
        window = words[max(0, i - 3) : i + 4]
        for n in (1, 2, 3):
            out.update(" ".join(window[j : j + n]) for j in range(len(window) - n + 1))
    return out
