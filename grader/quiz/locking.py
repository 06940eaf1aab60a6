"""Authors' sources and locking: ``quizzes/source/<chapter>.toml`` (plaintext answers) read and
checked, and turned into the locked ``quizzes/<chapter>.json`` (salted digests, no answer)."""

from __future__ import annotations

import json
import secrets
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.quiz.bank import _check_unique_and_checkpoint, _require, _validate_common, _validate_header, load_quiz
from grader.quiz.errors import AnswerFormatError, QuizError, QuizFileError
from grader.quiz.model import FORMAT, SALT_BYTES, SOURCE_FIELDS, Quiz, SourceQuestion, SourceQuiz
from grader.student.quiz.answers import canonical_answers, digest, formula_message, parse_number


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
        labelled_right = sorted(right_choices(question) & set(misconceptions_of(question)))
        if labelled_right:
            raise QuizFileError(
                path, qid, f"choice '{labelled_right[0]}' is right: only a wrong choice has a misconception"
            )
        questions.append(question)
    _check_unique_and_checkpoint(
        [q.id for q in questions], len([q for q in questions if q.data.get("checkpoint")]), path
    )
    return SourceQuiz(chapter, title, questions, path)


def right_choices(question: SourceQuestion) -> set[str]:
    """The ids of a choice question's right choices (``answer``: one id, or a list of ids); none for other kinds."""
    if question.kind not in ("single", "multiple"):
        return set()
    answer = question.answer
    return {answer} if isinstance(answer, str) else set(answer)


def misconceptions_of(question: SourceQuestion) -> dict[str, str]:
    """A choice question's labelled choices: choice id -> the misconception a student who picks it holds."""
    return {c["id"]: c["misconception"] for c in question.data.get("choices", []) if "misconception" in c}


def unlabelled_wrong_choices(source: SourceQuiz) -> list[str]:
    """``<question>/<choice>`` of every wrong choice that names no misconception (a complete source has none)."""
    return [
        f"{q.id}/{c.id}"
        for q in source.questions
        for c in q.choices
        if c.id not in right_choices(q) and c.id not in misconceptions_of(q)
    ]


def misconceptions(quiz_dir: str | Path) -> dict[tuple[str, str], str]:
    """The instructor's labels of the sources' wrong choices, keyed as the store records an answer:
    (``<chapter>/<question>``, ``choice:<id>``) -> the misconception. Read from ``quiz_dir/source`` only: the
    labels are never locked, so no handout holds them; {} where the sources are not on this machine."""
    labels: dict[tuple[str, str], str] = {}
    for path in sorted((Path(quiz_dir) / "source").glob("*.toml")):
        source = load_source(path)
        for q in source.questions:
            for choice, label in misconceptions_of(q).items():
                labels[(f"{source.chapter}/{q.id}", f"choice:{choice}")] = label
    return labels


# --- locking ---------------------------------------------------------------------


def exact_steps(answer: float, tolerance: float) -> int:
    """The bins per tolerance of a fixed numeric question: the smallest power of ten Q (10 to 1000) for which
    answer·Q/tolerance is a whole number, so the key ``num:<answer·Q/tolerance>`` lets the judge accept
    exactly |x - answer| <= tolerance (``grader.quiz.judging.numeric_candidates``); for an answer such as
    √(2/384), no power is exact and Q = 1000 keeps the accepted interval within t/2000 of the stated one
    (the judge tries 2Q + 1 keys per answer)."""
    for steps in (10, 100):
        k = answer * steps / tolerance
        if abs(k - round(k)) <= 1e-6:
            return steps
    return 1000


def source_digests(question: SourceQuestion, salt: str) -> list[str]:
    """The digests of a source question's accepted answers (numeric: the key ``num:<answer·Q/tolerance>``)."""
    out: list[str] = []
    for form in _answer_forms(question):
        if question.kind == "numeric":
            answer, tolerance = parse_number(form), float(question.tolerance or 0)
            messages = [f"num:{round(answer * exact_steps(answer, tolerance) / tolerance)}"]
        else:
            messages = canonical_answers(question, form)
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
        for key in ("ladder", "attempts", "symbols", "aliases", "subject", "params", "reference", "practice"):
            if key in q.data:
                locked[key] = q.data[key]
        locked["explanation"] = q.data["explanation"].strip()
        if "params" not in q.data:
            locked["salt"] = salt
            locked["digests"] = source_digests(q, salt)
            if q.kind == "numeric":
                locked["steps"] = exact_steps(parse_number(q.answer), float(q.tolerance or 0))
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
