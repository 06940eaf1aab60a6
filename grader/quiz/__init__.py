"""Comprehension checkpoints: chapter quizzes with locked answer keys.

Authors write plaintext answers in ``quizzes/source/<chapter>.toml``; ``grade
quiz lock`` turns each source into ``quizzes/<chapter>.json``, the file a
student reads, which keeps the question, its choices, tolerance and
explanation but stores the answer only as salted digests (as okpy locks its
conceptual questions):

    digest = HMAC-SHA256(key = salt, msg = canonical answer)

with a random 16-byte salt per question. Canonical answers:

- single choice: ``choice:<id>``; multiple select: ``choices:<id>,<id>`` with the
  ids sorted (ids are stable, independent of display order);
- short answer: ``short:<normalised text>``, one digest per accepted form
  (normalised for case, spaces and simple notation, see ``normalise_text``);
  a question that declares ``symbols`` also stores, per form that is a
  formula, the digest of its fingerprint (``grader.student.expr``: its values at
  sample points drawn from the salt), so ``2/fan_in``, ``Var(W) = 2/n`` and
  ``4/(2 n_in)`` all match ``2/n_in``;
- numeric, tolerance t: ``num:<k>`` with k = round(value * QUANT_STEPS / t).
  A candidate x is accepted when one of the bins k_x - (QUANT_STEPS + 1) ...
  k_x + (QUANT_STEPS + 1) matches, so every |x - answer| <= t is accepted and
  every |x - answer| > (1 + 2 / QUANT_STEPS) * t is rejected.

A *parameterised* numeric question (``params`` and ``reference``,
``grader.quiz.params``) has no key at all: its locked form keeps the prompt
template, the parameter ranges and the reference call, and it is judged by
running the reference on the student's numbers (|x - answer| <= t).

Each student sees a question *posed* (``pose``): parameters drawn and the
prompt rendered, choices shuffled in a stable per-student order. A question
allows ``attempts`` tries in a session (default 2 for a checkpoint, else 1);
an unreadable answer costs none. A chapter is complete when each of its
checkpoint questions has at least one correct recorded attempt.
"""

from __future__ import annotations

import difflib
import hmac
import json
import keyword
import math
import os
import random
import re
import secrets
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from grader.student.answers import (  # noqa: F401  (re-exported: the quiz's public names)
    MAX_ANSWER_CHARS,
    QUANT_STEPS,
    _choice_ids,
    canonical_answers,
    digest,
    formula_message,
    normalise_text,
    parse_number,
    symbol_table,
)
from grader.student.errors import UsageError
from grader.student.quiz_text import (  # noqa: F401  (re-exported: what a session shows, shared with the handout)
    KIND_HINTS,
    ChapterProgress,
    answer_hint,
    attempt_label,
    feedback_line,
    format_listing,
    load_answers,
    session_intro,
    show_question,
    summary_text,
)
from grader.student.model import exercise_seed
from grader.student import expr
from grader.quiz import params as params_lib
from grader.quiz.errors import (
    AnswerFormatError,
    QuizError,
    QuizFileError,
    ReferenceUnavailableError,
    UnknownChapterError,
)

KINDS = ("single", "multiple", "numeric", "short")
CHAPTER_ORDER = (
    "activations",
    "normalization",
    "dropout-weight-decay",
    "initialisation",
    "universal-approximation",
)
FORMAT = "normgrade-quiz-1"
SALT_BYTES = 16
QUIZ_DIR_ENV = "GRADE_QUIZ_DIR"
CHECKPOINT_ATTEMPTS = 2

_ID_RE = re.compile(r"^[a-z][a-z0-9-]*$")
_COMMON_FIELDS = {
    "id", "kind", "prompt", "explanation", "choices", "tolerance", "points", "checkpoint", "ladder",
    "attempts", "symbols", "aliases", "subject", "params", "reference",
}
LOCKED_FIELDS = _COMMON_FIELDS | {"salt", "digests"}
SOURCE_FIELDS = _COMMON_FIELDS | {"answer", "wrong", "answer_range"}



# --- data ---------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """One option of a choice question; ``id`` is stable, the display number is not."""

    id: str
    text: str


@dataclass
class Question:
    """A locked question: everything a student may read, the answer only as digests."""

    id: str
    kind: str
    prompt: str
    explanation: str
    salt: str
    digests: tuple[str, ...]
    choices: tuple[Choice, ...] = ()
    tolerance: float | None = None
    points: float = 1.0
    checkpoint: bool = False
    ladder: str | None = None
    chapter: str = ""
    attempts: int = 1
    symbols: dict[str, str] = field(default_factory=dict)
    subject: str | None = None
    params: dict[str, Any] | None = None
    reference: str | None = None

    @property
    def parameterised(self) -> bool:
        """True when the answer is computed by the reference from the student's numbers."""
        return self.params is not None


@dataclass
class Posed:
    """A question as one student sees it: drawn values, rendered prompt, choices in display order."""

    question: Question
    values: dict[str, Any]
    prompt: str
    choices: tuple[Choice, ...]

    def explanation(self, answer: float | None = None) -> str:
        """The explanation, rendered with the values (and ``answer`` for a parameterised question)."""
        if not self.question.parameterised:
            return self.question.explanation
        return params_lib.render(self.question.explanation, {**self.values, "answer": answer})


@dataclass
class Quiz:
    """A chapter's locked quiz."""

    chapter: str
    title: str
    questions: list[Question]
    path: Path

    @property
    def checkpoints(self) -> list[Question]:
        """The questions that must be answered correctly to complete the chapter."""
        return [q for q in self.questions if q.checkpoint]

    def question(self, question_id: str) -> Question:
        """The question with this id (KeyError when absent)."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(question_id)


@dataclass
class SourceQuestion:
    """An author's question: the public fields plus ``answer`` and optional ``wrong`` samples."""

    data: dict[str, Any]
    answer: Any
    wrong: list[Any]
    answer_range: tuple[float, float] | None = None

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def kind(self) -> str:
        return str(self.data["kind"])

    @property
    def choices(self) -> tuple[Choice, ...]:
        return tuple(Choice(c["id"], c["text"]) for c in self.data.get("choices", []))

    @property
    def tolerance(self) -> float | None:
        return self.data.get("tolerance")

    @property
    def symbols(self) -> dict[str, str]:
        return symbol_table(self.data)

    @property
    def subject(self) -> str | None:
        return self.data.get("subject")


@dataclass
class SourceQuiz:
    """A chapter's author source (plaintext answers)."""

    chapter: str
    title: str
    questions: list[SourceQuestion]
    path: Path


@dataclass
class Verdict:
    """One graded answer: the form recorded in the store, correctness, or why it was unreadable."""

    question_id: str
    answer: str
    correct: bool
    error: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    expected: float | None = None  # a parameterised question's reference answer (shown after judging)


@dataclass
class QuizResult:
    """The verdicts of one pass through a chapter (unanswered questions have no verdict)."""

    quiz: Quiz
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    posed: dict[str, Posed] = field(default_factory=dict)

    def explanation(self, question: Question) -> str:
        """The explanation of an answered question, rendered with the student's numbers."""
        verdict = self.verdicts.get(question.id)
        posed = self.posed.get(question.id)
        if posed is None:
            return question.explanation
        return posed.explanation(verdict.expected if verdict else None)

    @property
    def score(self) -> float:
        return sum(q.points for q in self.quiz.questions if self._correct(q.id))

    @property
    def max_score(self) -> float:
        return sum(q.points for q in self.quiz.questions)

    @property
    def correct_count(self) -> int:
        return sum(1 for q in self.quiz.questions if self._correct(q.id))

    @property
    def all_correct(self) -> bool:
        """True when every question of the chapter was answered correctly in this pass."""
        return self.correct_count == len(self.quiz.questions)

    def _correct(self, question_id: str) -> bool:
        verdict = self.verdicts.get(question_id)
        return verdict is not None and verdict.correct

    def to_json(self, student: str, complete: bool) -> dict[str, Any]:
        """The ``--json`` document of a graded chapter."""
        questions = []
        for q in self.quiz.questions:
            v = self.verdicts.get(q.id)
            questions.append(
                {
                    "id": q.id,
                    "kind": q.kind,
                    "checkpoint": q.checkpoint,
                    "points": q.points,
                    "answered": v is not None,
                    "answer": v.answer if v else None,
                    "correct": bool(v and v.correct),
                    "error": v.error if v else None,
                    "params": (v.values or None) if v else None,
                    "explanation": self.explanation(q) if v else None,
                }
            )
        return {
            "student": student,
            "chapter": self.quiz.chapter,
            "score": self.score,
            "max_score": self.max_score,
            "correct": self.correct_count,
            "total": len(self.quiz.questions),
            "complete": complete,
            "questions": questions,
        }


def recorded_form(question: Question, raw: Any, shown: tuple[Choice, ...] | None = None) -> str:
    """The answer as stored in the progress database: choice ids, or the text given."""
    if question.kind in ("single", "multiple"):
        try:
            return ",".join(_choice_ids(question, raw, shown))
        except AnswerFormatError:
            pass
    if isinstance(raw, (list, tuple)):
        return ",".join(str(r) for r in raw)
    return str(raw).strip()


def pose(question: Question, student: str) -> Posed:
    """The question as ``student`` sees it: drawn values, rendered prompt, shuffled choices.

    The same student always gets the same values and order (seeded by
    ``exercise_seed``); the prompt of a fixed question is shown as written.
    """
    values: dict[str, Any] = {}
    prompt = question.prompt
    if question.params is not None:
        specs = params_lib.parse_specs(question.params)
        values = params_lib.draw(specs, student, question.chapter, question.id)
        prompt = params_lib.render(question.prompt, values)
    choices = list(question.choices)
    random.Random(exercise_seed(student, f"quiz.{question.chapter}.{question.id}.choices")).shuffle(choices)
    return Posed(question, values, prompt, tuple(choices))


def judge(posed: Posed, raw: Any, shown: bool = False) -> Verdict:
    """Judge one answer to a posed question; AnswerFormatError when unreadable (costs no attempt).

    ``shown``: choice numbers refer to the order the student saw. A parameterised
    question runs the reference (ReferenceUnavailableError when it is not installed).
    """
    question = posed.question
    order = posed.choices if shown else None
    answer = recorded_form(question, raw, order)
    if question.parameterised:
        value = parse_number(raw, posed.values)
        call = params_lib.parse_reference(question.reference, set(posed.values))
        expected = params_lib.reference_answer(call, posed.values)
        correct = abs(value - expected) <= float(question.tolerance or 0) * (1 + 1e-9)
        return Verdict(question.id, answer, correct, values=dict(posed.values), expected=expected)
    candidates = canonical_answers(question, raw, order)
    if not _matches(question, candidates) and question.kind == "short" and question.symbols:
        candidates = [formula_message(question, raw, question.salt)]
    return Verdict(question.id, answer, _matches(question, candidates))


def _matches(question: Question, candidates: list[str]) -> bool:
    return any(hmac.compare_digest(digest(question.salt, c), d) for c in candidates for d in question.digests)


def check_answer(question: Question, raw: Any, student: str = "") -> Verdict:
    """Judge one answer as written in an answers file (choice ids or file-order numbers)."""
    return judge(pose(question, student), raw)


def grade_answer(question: Question, raw: Any, student: str = "") -> Verdict:
    """Like check_answer, but an unreadable answer is a wrong one carrying the reason."""
    try:
        return check_answer(question, raw, student)
    except AnswerFormatError as exc:
        return Verdict(question.id, recorded_form(question, raw), False, str(exc))


# --- loading and validation -------------------------------------------------------


def _require(data: Mapping[str, Any], key: str, types: type | tuple[type, ...], file: Path, qid: str | None) -> Any:
    if key not in data:
        raise QuizFileError(file, qid, f"missing field '{key}'")
    value = data[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _as_tuple(types):
        raise QuizFileError(file, qid, f"field '{key}' has the wrong type ({type(value).__name__})")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _validate_common(raw: Any, file: Path, allowed: set[str], index: int) -> str:
    """Check the fields every question has (locked or source); return its id."""
    if not isinstance(raw, dict):
        raise QuizFileError(file, f"#{index + 1}", "a question must be a table/object")
    qid = raw.get("id")
    if not isinstance(qid, str):
        raise QuizFileError(file, f"#{index + 1}", "missing field 'id'")
    if not _ID_RE.match(qid):
        raise QuizFileError(file, qid, "the id must be lower-case letters, digits and '-'")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        if "answer" in unknown and "salt" in allowed:
            raise QuizFileError(file, qid, "a locked file must not hold a plaintext 'answer'")
        raise QuizFileError(file, qid, f"unknown field '{unknown[0]}'")
    kind = _require(raw, "kind", str, file, qid)
    if kind not in KINDS:
        raise QuizFileError(file, qid, f"unknown kind '{kind}' (expected one of {', '.join(KINDS)})")
    _require(raw, "prompt", str, file, qid)
    _require(raw, "explanation", str, file, qid)
    if not raw["prompt"].strip() or not raw["explanation"].strip():
        raise QuizFileError(file, qid, "prompt and explanation must not be empty")
    if kind in ("single", "multiple"):
        choices = _require(raw, "choices", list, file, qid)
        if len(choices) < 2:
            raise QuizFileError(file, qid, "a choice question needs at least 2 choices")
        seen: set[str] = set()
        for choice in choices:
            if not isinstance(choice, dict) or set(choice) != {"id", "text"}:
                raise QuizFileError(file, qid, "each choice needs exactly 'id' and 'text'")
            cid, text = choice["id"], choice["text"]
            if not isinstance(cid, str) or not _ID_RE.match(cid) or not isinstance(text, str):
                raise QuizFileError(file, qid, f"choice id {cid!r} must be a lower-case slug with a text")
            if cid in seen:
                raise QuizFileError(file, qid, f"duplicate choice id '{cid}'")
            seen.add(cid)
    elif "choices" in raw:
        raise QuizFileError(file, qid, f"a {kind} question has no choices")
    if kind == "numeric":
        tol = _require(raw, "tolerance", (int, float), file, qid)
        if not tol > 0 or not math.isfinite(tol):
            raise QuizFileError(file, qid, "tolerance must be a positive number")
    elif "tolerance" in raw:
        raise QuizFileError(file, qid, f"a {kind} question has no tolerance")
    if "points" in raw:
        points = _require(raw, "points", (int, float), file, qid)
        if not points > 0:
            raise QuizFileError(file, qid, "points must be positive")
    if "checkpoint" in raw:
        _require(raw, "checkpoint", bool, file, qid)
    if "ladder" in raw:
        _require(raw, "ladder", str, file, qid)
    if "attempts" in raw:
        attempts = _require(raw, "attempts", int, file, qid)
        if attempts < 1:
            raise QuizFileError(file, qid, "attempts must be at least 1")
    _validate_symbols(raw, file, qid, kind)
    _validate_params(raw, file, qid, kind)
    return qid


def _validate_symbols(raw: Mapping[str, Any], file: Path, qid: str, kind: str) -> None:
    """``symbols`` (names), ``aliases`` (name -> symbol) and ``subject`` belong to short formula answers."""
    if not any(k in raw for k in ("symbols", "aliases", "subject")):
        return
    if kind != "short":
        raise QuizFileError(file, qid, "symbols, aliases and subject belong to short (formula) questions")
    symbols = _require(raw, "symbols", list, file, qid)
    if not symbols or not all(isinstance(n, str) and re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in symbols):
        raise QuizFileError(file, qid, "symbols must be a list of lower-case names such as \"n_in\"")
    aliases = raw.get("aliases", {})
    if not isinstance(aliases, dict) or not all(
        isinstance(k, str) and re.fullmatch(r"[a-z][a-z0-9_]*", k) and v in symbols for k, v in aliases.items()
    ):
        raise QuizFileError(file, qid, "aliases must map lower-case names to one of the symbols")
    clash = sorted(n for n in symbol_table(raw) if n in expr.FUNCTIONS + expr.CONSTANTS or keyword.iskeyword(n))
    if clash:
        raise QuizFileError(file, qid, f"'{clash[0]}' is a function, constant or Python keyword, not a symbol")
    if "subject" in raw:
        _require(raw, "subject", str, file, qid)


def _validate_params(raw: Mapping[str, Any], file: Path, qid: str, kind: str) -> None:
    """``params`` and ``reference`` go together, on numeric questions, and must parse."""
    if "params" not in raw and "reference" not in raw:
        return
    if kind != "numeric" or "params" not in raw or "reference" not in raw:
        raise QuizFileError(file, qid, "a parameterised question is numeric and has both 'params' and 'reference'")
    try:
        specs = params_lib.parse_specs(raw["params"])
        params_lib.parse_reference(raw["reference"], set(specs))
        sample = {name: spec.values[0] for name, spec in specs.items()}
        params_lib.render(raw["prompt"], sample)
        params_lib.render(raw["explanation"], {**sample, "answer": 0.0})
    except ValueError as exc:
        raise QuizFileError(file, qid, str(exc)) from None


def _validate_header(doc: Any, file: Path) -> tuple[str, str, list[Any]]:
    if not isinstance(doc, dict):
        raise QuizFileError(file, None, "the file must hold a table/object")
    chapter = _require(doc, "chapter", str, file, None)
    if chapter != file.stem:
        raise QuizFileError(file, None, f"chapter '{chapter}' does not match the file name '{file.stem}'")
    title = _require(doc, "title", str, file, None)
    questions = _require(doc, "questions", list, file, None)
    if not questions:
        raise QuizFileError(file, None, "no questions")
    return chapter, title, questions


def _check_unique_and_checkpoint(ids: list[str], checkpoints: int, file: Path) -> None:
    seen: set[str] = set()
    for qid in ids:
        if qid in seen:
            raise QuizFileError(file, qid, "duplicate question id")
        seen.add(qid)
    if checkpoints == 0:
        raise QuizFileError(file, None, "no checkpoint question: mark at least one with checkpoint = true")


def load_quiz(path: str | Path) -> Quiz:
    """Load and validate a locked quiz file (JSON). Raises QuizFileError."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuizFileError(path, None, f"cannot be read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise QuizFileError(path, None, f"not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if isinstance(doc, dict) and doc.get("format") != FORMAT:
        raise QuizFileError(path, None, f"'format' must be '{FORMAT}' (run `grade quiz lock`)")
    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k not in ("format", "source")}
    chapter, title, raw_questions = _validate_header(doc, path)
    questions: list[Question] = []
    for index, raw in enumerate(raw_questions):
        qid = _validate_common(raw, path, LOCKED_FIELDS, index)
        salt, digests = "", []
        if "params" in raw:
            if "salt" in raw or "digests" in raw:
                raise QuizFileError(path, qid, "a parameterised question has no salt or digests: the reference judges it")
        else:
            salt = _require(raw, "salt", str, path, qid)
            if not re.fullmatch(r"[0-9a-f]{32,}", salt):
                raise QuizFileError(path, qid, "salt must be at least 16 bytes of lower-case hex")
            digests = _require(raw, "digests", list, path, qid)
            if not digests or not all(isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) for d in digests):
                raise QuizFileError(path, qid, "digests must be a non-empty list of SHA-256 hex digests")
        checkpoint = bool(raw.get("checkpoint", False))
        questions.append(
            Question(
                id=qid,
                kind=raw["kind"],
                prompt=raw["prompt"],
                explanation=raw["explanation"],
                salt=salt,
                digests=tuple(digests),
                choices=tuple(Choice(c["id"], c["text"]) for c in raw.get("choices", [])),
                tolerance=float(raw["tolerance"]) if "tolerance" in raw else None,
                points=float(raw.get("points", 1)),
                checkpoint=checkpoint,
                ladder=raw.get("ladder"),
                chapter=chapter,
                attempts=int(raw.get("attempts", CHECKPOINT_ATTEMPTS if checkpoint else 1)),
                symbols=symbol_table(raw),
                subject=raw.get("subject"),
                params=raw.get("params"),
                reference=raw.get("reference"),
            )
        )
    _check_unique_and_checkpoint([q.id for q in questions], len([q for q in questions if q.checkpoint]), path)
    return Quiz(chapter, title, questions, path)


def _answer_forms(question: SourceQuestion) -> list[Any]:
    """The accepted answers of a source question as a list (short answers may list several; none when parameterised)."""
    if question.answer_range is not None:
        return []
    if question.kind == "short" and isinstance(question.answer, list):
        return list(question.answer)
    return [question.answer]


def _parameterised_source(raw: Mapping[str, Any], path: Path, qid: str) -> SourceQuestion:
    """A parameterised source question: no answer (the reference computes it), an answer_range to test."""
    if "answer" in raw or "wrong" in raw:
        raise QuizFileError(path, qid, "a parameterised question has no 'answer' or 'wrong': the reference computes it")
    bounds = _require(raw, "answer_range", list, path, qid)
    if len(bounds) != 2 or not all(isinstance(b, (int, float)) for b in bounds) or not bounds[0] < bounds[1]:
        raise QuizFileError(path, qid, "answer_range must be [low, high] with low < high")
    data = {k: v for k, v in raw.items() if k != "answer_range"}
    return SourceQuestion(data, None, [], answer_range=(float(bounds[0]), float(bounds[1])))


def _formula_form(question: SourceQuestion, form: Any) -> bool:
    """True when an accepted short form reads as a formula in the question's symbols."""
    try:
        formula_message(question, form, "00" * SALT_BYTES)
    except AnswerFormatError:
        return False
    return True


def load_source(path: str | Path) -> SourceQuiz:
    """Load and validate an author source file (TOML, plaintext answers). Raises QuizFileError."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise QuizFileError(path, None, f"cannot be read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise QuizFileError(path, None, f"not valid TOML ({exc})") from exc
    chapter, title, raw_questions = _validate_header(doc, path)
    questions: list[SourceQuestion] = []
    for index, raw in enumerate(raw_questions):
        qid = _validate_common(raw, path, SOURCE_FIELDS, index)
        if "params" in raw:
            questions.append(_parameterised_source(raw, path, qid))
            continue
        if "answer_range" in raw:
            raise QuizFileError(path, qid, "answer_range belongs to parameterised questions")
        if "answer" not in raw:
            raise QuizFileError(path, qid, "missing field 'answer'")
        wrong = raw.get("wrong", [])
        if not isinstance(wrong, list):
            raise QuizFileError(path, qid, "field 'wrong' must be a list of wrong answers")
        data = {k: v for k, v in raw.items() if k not in ("answer", "wrong")}
        question = SourceQuestion(data, raw["answer"], wrong)
        forms = _answer_forms(question)
        if not forms:
            raise QuizFileError(path, qid, "no accepted answer")
        for form in forms:
            try:
                canonical_answers(question, form)
            except AnswerFormatError as exc:
                raise QuizFileError(path, qid, f"answer {form!r}: {exc}") from None
        if question.symbols and not any(_formula_form(question, f) for f in forms):
            raise QuizFileError(path, qid, "declares symbols but no accepted answer is a formula in them")
        if question.kind == "single" and not isinstance(question.answer, str):
            raise QuizFileError(path, qid, "the answer of a single-choice question is one choice id")
        questions.append(question)
    _check_unique_and_checkpoint(
        [q.id for q in questions], len([q for q in questions if q.data.get("checkpoint")]), path
    )
    return SourceQuiz(chapter, title, questions, path)


# --- locking ---------------------------------------------------------------------


def source_digests(question: SourceQuestion, salt: str) -> list[str]:
    """The digests of a source question's accepted answers (numeric: the centre bin only)."""
    out: list[str] = []
    for form in _answer_forms(question):
        candidates = canonical_answers(question, form)
        messages = [candidates[len(candidates) // 2]]  # numeric: the answer's own bin
        if question.symbols and _formula_form(question, form):
            messages.append(formula_message(question, form, salt))
        for message in messages:
            value = digest(salt, message)
            if value not in out:
                out.append(value)
    return out


def lock_quiz(source: SourceQuiz, previous: Quiz | None = None) -> dict[str, Any]:
    """The locked document for a source. Salts of questions already in ``previous`` are reused,
    so relocking an unchanged source gives an identical file."""
    old_salts = {q.id: q.salt for q in previous.questions} if previous else {}
    questions = []
    for q in source.questions:
        salt = old_salts.get(q.id) or secrets.token_hex(SALT_BYTES)
        locked: dict[str, Any] = {
            "id": q.id,
            "kind": q.kind,
            "prompt": q.data["prompt"].strip(),
        }
        if "choices" in q.data:
            locked["choices"] = [{"id": c["id"], "text": c["text"]} for c in q.data["choices"]]
        if "tolerance" in q.data:
            locked["tolerance"] = q.data["tolerance"]
        locked["points"] = q.data.get("points", 1)
        locked["checkpoint"] = bool(q.data.get("checkpoint", False))
        for key in ("ladder", "attempts", "symbols", "aliases", "subject", "params", "reference"):
            if key in q.data:
                locked[key] = q.data[key]
        locked["explanation"] = q.data["explanation"].strip()
        if "params" not in q.data:
            locked["salt"] = salt
            locked["digests"] = source_digests(q, salt)
        questions.append(locked)
    return {
        "format": FORMAT,
        "chapter": source.chapter,
        "title": source.title,
        "source": f"source/{source.path.name}",
        "questions": questions,
    }


def dump_locked(doc: Mapping[str, Any]) -> str:
    """The text of a locked file: indented JSON, UTF-8, one trailing newline."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


@dataclass
class LockOutcome:
    """What ``lock_all`` did (or, with check, would do) to one locked file."""

    path: Path
    status: str  # "unchanged", "written", "stale", "orphan"
    detail: str = ""


def lock_all(quiz_dir: str | Path, check: bool = False) -> list[LockOutcome]:
    """Lock every ``source/*.toml`` into ``<chapter>.json``; with check, write nothing and
    report locked files that differ from their source ("stale") or have none ("orphan")."""
    quiz_dir = Path(quiz_dir)
    sources = sorted((quiz_dir / "source").glob("*.toml"))
    if not sources:
        raise QuizError(f"no quiz sources in {quiz_dir / 'source'}: nothing to lock")
    outcomes: list[LockOutcome] = []
    for src_path in sources:
        source = load_source(src_path)
        target = quiz_dir / f"{source.chapter}.json"
        previous: Quiz | None = None
        old_text = target.read_text(encoding="utf-8") if target.exists() else None
        if old_text is not None:
            try:
                previous = load_quiz(target)
            except QuizFileError:
                previous = None
        new_text = dump_locked(lock_quiz(source, previous))
        if new_text == old_text:
            outcomes.append(LockOutcome(target, "unchanged"))
        elif check:
            detail = "missing" if old_text is None else "differs from its source"
            outcomes.append(LockOutcome(target, "stale", detail))
        else:
            target.write_text(new_text, encoding="utf-8")
            outcomes.append(LockOutcome(target, "written"))
    chapters = {p.stem for p in sources}
    for locked in sorted(quiz_dir.glob("*.json")):
        if locked.stem not in chapters:
            outcomes.append(LockOutcome(locked, "orphan", "has no source"))
    return outcomes


# --- finding chapters ------------------------------------------------------------


def default_quiz_dir() -> Path:
    """``$GRADE_QUIZ_DIR`` when set, else the ``quizzes/`` folder of this checkout."""
    env = os.environ.get(QUIZ_DIR_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "quizzes"


def _chapter_key(chapter: str) -> tuple[int, str]:
    order = CHAPTER_ORDER.index(chapter) if chapter in CHAPTER_ORDER else len(CHAPTER_ORDER)
    return (order, chapter)


def chapter_ids(quiz_dir: str | Path) -> list[str]:
    """The chapters with a locked file in ``quiz_dir``, in course order."""
    quiz_dir = Path(quiz_dir)
    if not quiz_dir.is_dir():
        raise QuizError(f"no quiz folder at {quiz_dir}: pass --quiz-dir or set {QUIZ_DIR_ENV}")
    return sorted((p.stem for p in quiz_dir.glob("*.json")), key=_chapter_key)


def load_all(quiz_dir: str | Path) -> list[Quiz]:
    """Every locked quiz in ``quiz_dir``, in course order (QuizFileError on the first bad one)."""
    return [load_quiz(Path(quiz_dir) / f"{c}.json") for c in chapter_ids(quiz_dir)]


def resolve_chapter(name: str, quiz_dir: str | Path) -> Quiz:
    """Load the chapter called ``name``; UnknownChapterError with a did-you-mean otherwise."""
    chapters = chapter_ids(quiz_dir)
    if name in chapters:
        return load_quiz(Path(quiz_dir) / f"{name}.json")
    low = name.casefold()
    guesses = [c for c in chapters if c.startswith(low) or low in c]
    guesses = guesses or difflib.get_close_matches(low, chapters, n=1, cutoff=0.5)
    if guesses:
        raise UnknownChapterError(f"'{name}' is not a quiz chapter. Did you mean '{guesses[0]}'?")
    raise UnknownChapterError(f"'{name}' is not a quiz chapter. Chapters: {', '.join(chapters)}.")


# --- grading ---------------------------------------------------------------------


def grade_answers(quiz: Quiz, answers: Mapping[str, Any], source: str = "answers", student: str = "") -> QuizResult:
    """Grade a mapping question id -> answer for ``student`` (whose numbers parameterised questions use);
    unknown ids raise UsageError, missing ones stay unanswered."""
    known = {q.id for q in quiz.questions}
    unknown = [k for k in answers if k not in known]
    if unknown:
        guess = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" Did you mean '{guess[0]}'?" if guess else ""
        raise UsageError(f"{source}: '{unknown[0]}' is not a question of chapter '{quiz.chapter}'.{hint}")
    result = QuizResult(quiz)
    for q in quiz.questions:
        if q.id in answers:
            result.posed[q.id] = pose(q, student)
            result.verdicts[q.id] = grade_answer(q, answers[q.id], student)
    return result


def chapter_progress(quiz: Quiz, attempts: Iterable[Mapping[str, Any]]) -> ChapterProgress:
    """A chapter's standing from store rows (keys chapter, question, correct)."""
    ids = {q.id for q in quiz.questions}
    correct: set[str] = set()
    count = 0
    for row in attempts:
        if row["chapter"] != quiz.chapter or row["question"] not in ids:
            continue
        count += 1
        if row["correct"]:
            correct.add(row["question"])
    checkpoints = {q.id for q in quiz.checkpoints}
    return ChapterProgress(
        chapter=quiz.chapter,
        title=quiz.title,
        questions=len(quiz.questions),
        checkpoints=len(checkpoints),
        checkpoints_correct=len(checkpoints & correct),
        questions_correct=len(correct),
        attempts=count,
    )


# --- the interactive session -----------------------------------------------------

AnswerHook = Callable[[Question, Verdict], None]


def _read_answer(posed: Posed, prompt_text: str) -> Verdict:
    """Prompt until the answer is readable (an unreadable one is a one-line reason and costs nothing)."""

    def read(raw: str) -> Verdict:
        try:
            return judge(posed, raw, shown=True)
        except AnswerFormatError as exc:
            raise click.UsageError(str(exc)) from None

    return click.prompt(prompt_text, value_proc=read)


def attempt_number(question: Question, answers: Iterable[Mapping[str, Any]]) -> int:
    """Which attempt (1 .. ``question.attempts``) the student's next answer to ``question`` is, from
    their recorded answers (store rows, oldest first): the wrong answers since the last correct one,
    counted in rounds of ``attempts`` (after a round's last attempt a new round starts, as a new
    session asks again). The course server, which has no session, judges attempts by this."""
    wrong = 0
    for row in answers:
        if row["chapter"] == question.chapter and row["question"] == question.id:
            wrong = 0 if row["correct"] else wrong + 1
    return wrong % question.attempts + 1


def ask_question(posed: Posed, number: int, total: int, on_answer: AnswerHook | None = None) -> Verdict:
    """Show one posed question and judge up to ``attempts`` answers; the explanation follows a
    correct answer or the last wrong one. Every judged answer goes to ``on_answer``."""
    question = posed.question
    show_question(number, total, posed.prompt, (c.text for c in posed.choices), question.checkpoint)
    hint = answer_hint(question.kind, question.tolerance, posed.values)
    verdict = None
    for attempt in range(1, question.attempts + 1):
        verdict = _read_answer(posed, attempt_label(attempt, question.attempts, hint))
        if on_answer is not None:
            on_answer(question, verdict)
        click.echo(feedback_line(verdict.correct, question.attempts - attempt))
        if verdict.correct:
            break
    assert verdict is not None  # attempts >= 1, validated on load
    click.echo(f"Explanation: {posed.explanation(verdict.expected)}")
    return verdict


def run_session(
    quiz: Quiz,
    student: str = "",
    on_answer: AnswerHook | None = None,
    skip: Iterable[str] = (),
) -> QuizResult:
    """Ask the questions of ``quiz`` not in ``skip`` (those already answered correctly), posed for
    ``student``, through click; call ``on_answer`` for every judged answer; print a summary."""
    skipped = set(skip)
    todo = [q for q in quiz.questions if q.id not in skipped]
    done = len(quiz.questions) - len(todo)
    session_intro(quiz.title, len(quiz.questions), len(quiz.checkpoints), done)
    result = QuizResult(quiz)
    for number, question in enumerate(todo, 1):
        posed = pose(question, student)
        result.posed[question.id] = posed
        result.verdicts[question.id] = ask_question(posed, number, len(todo), on_answer)
    click.echo("")
    before = f" ({done} answered correctly before.)" if done else ""
    click.echo(summary_line(result) + before)
    return result


def summary_line(result: QuizResult) -> str:
    """One line: questions right, points, checkpoints right in this pass."""
    cps = result.quiz.checkpoints
    return summary_text(
        result.quiz.chapter, result.correct_count, len(result.quiz.questions), result.score, result.max_score,
        sum(1 for q in cps if result._correct(q.id)), len(cps),
    )


def correct_questions(quiz: Quiz, attempts: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ids of ``quiz``'s questions with at least one correct row in ``attempts`` (store rows)."""
    ids = {q.id for q in quiz.questions}
    return {
        row["question"] for row in attempts
        if row["chapter"] == quiz.chapter and row["question"] in ids and row["correct"]
    }


def needs_reference(quiz: Quiz) -> None:
    """ReferenceUnavailableError (one line) when the chapter has parameterised questions and the
    reference implementation cannot be imported here; nothing otherwise."""
    if any(q.parameterised for q in quiz.questions):
        try:
            params_lib.import_reference()
        except ReferenceUnavailableError as exc:
            raise ReferenceUnavailableError(f"chapter '{quiz.chapter}': {exc}") from None
