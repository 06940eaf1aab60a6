"""The question bank: reading and validating locked quiz files, finding chapters, reading
answers files (a flat table, or one table per chapter as Gradescope reads it)."""

from __future__ import annotations

import difflib
import json
import keyword
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader.quiz import params as params_lib
from grader.quiz.errors import QuizError, QuizFileError, UnknownChapterError
from grader.quiz.model import (
    CHAPTER_ORDER,
    CHECKPOINT_ATTEMPTS,
    FORMAT,
    KINDS,
    LOCKED_FIELDS,
    QUIZ_DIR_ENV,
    Choice,
    Question,
    Quiz,
    _ID_RE,
)
from grader.student.quiz import expr
from grader.student.quiz.answers import symbol_table
from grader.student.quiz.quiz_text import (  # noqa: F401  (what a session shows: shared with the handout)
    answers_for,
    load_answers,
)


def _require(data: Mapping[str, Any], key: str, types: type | tuple[type, ...], file: Path, qid: str | None) -> Any:
    if key not in data:
        raise QuizFileError(file, qid, f"missing field '{key}'")
    value = data[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in _as_tuple(types):
        raise QuizFileError(file, qid, f"field '{key}' has the wrong type ({type(value).__name__})")
    return value


LOCKED_CHOICE_FIELDS = {"id", "text"}
SOURCE_CHOICE_FIELDS = {"id", "text", "misconception"}  # the instructor's label of a wrong choice: never locked


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _validate_common(raw: Any, file: Path, allowed: set[str], index: int) -> str:
    """Check the fields every question has (locked or source); return its id."""
    if not isinstance(raw, dict):
        raise QuizFileError(file, f"#{index + 1}", "a question must be a table/object")
    qid = raw.get("id")
    if not isinstance(qid, str):
        raise QuizFileError(file, f"#{index + 1}", "missing field 'id'")
    if not _ID_RE.fullmatch(qid):
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
        fields = LOCKED_CHOICE_FIELDS if "salt" in allowed else SOURCE_CHOICE_FIELDS
        for choice in choices:
            if not isinstance(choice, dict) or not LOCKED_CHOICE_FIELDS <= set(choice) <= fields:
                raise QuizFileError(file, qid, f"each choice needs 'id' and 'text', and may have only {sorted(fields)}")
            if "misconception" in choice and not (
                isinstance(choice["misconception"], str) and choice["misconception"].strip()
            ):
                raise QuizFileError(file, qid, f"choice {choice['id']!r}: the misconception must be a non-empty text")
            cid, text = choice["id"], choice["text"]
            if not isinstance(cid, str) or not _ID_RE.fullmatch(cid) or not isinstance(text, str):
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
        raise QuizFileError(file, qid, 'symbols must be a list of lower-case names such as "n_in"')
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
        if "practice" in raw:
            raise QuizFileError(file, qid, "'practice' belongs to parameterised questions")
        return
    if kind != "numeric" or "params" not in raw or "reference" not in raw:
        raise QuizFileError(file, qid, "a parameterised question is numeric and has both 'params' and 'reference'")
    try:
        specs = params_lib.parse_specs(raw["params"])
        params_lib.parse_reference(raw["reference"], set(specs))
        if "practice" in raw:
            params_lib.check_practice(specs, raw["practice"])
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


def _steps(raw: Mapping[str, Any], path: Path, qid: str) -> int:
    """A fixed numeric question's ``steps`` (10 when absent: files locked before it existed)."""
    steps = raw.get("steps", 10)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 100_000:
        raise QuizFileError(path, qid, "steps must be a whole number from 1 to 100000 (run `grade quiz lock`)")
    return steps


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
                raise QuizFileError(
                    path, qid, "a parameterised question has no salt or digests: the reference judges it"
                )
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
                practice=raw.get("practice"),
                steps=_steps(raw, path, qid),
                reference=raw.get("reference"),
            )
        )
    _check_unique_and_checkpoint([q.id for q in questions], len([q for q in questions if q.checkpoint]), path)
    return Quiz(chapter, title, questions, path)


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
