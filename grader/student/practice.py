"""The handout's quizzes: questions and choices, and (in practice mode) sealed explanations.

A handout quiz file (``quizzes/<chapter>.json``, format ``normgrade-practice-1``,
written by ``grade release``) holds each question's prompt, choices, tolerance
and the names a formula may use, and never an answer, a digest or an
explanation in plain text. Where a course server or Gradescope scores the
quizzes, that is all it holds. In practice mode each question also carries a
random salt and its explanation **sealed**: encrypted with Fernet
(``cryptography``: AES-128-CBC + HMAC-SHA256) under a key derived with Scrypt
from one canonical form of a right answer (``grader.student.answers``) and the
salt, once per accepted form. An answer whose canonical form opens a seal is
right, and the explanation is what it opens; nothing else opens it.

This is practice, not assessment: an answer space as small as a choice list or
a numeric bin can always be searched by anyone who tries (Scrypt makes each
try cost about 50 ms, no more), so offline scores are never recorded as grades.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from grader.student.answers import AnswerFormatError, QuizError, canonical_answers, formula_message

FORMAT = "normgrade-practice-1"
SALT_BYTES = 16
# Scrypt cost: n = 2^14, r = 8 (16 MiB, ~50 ms a key), the interactive setting of its authors.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
TRIES = 2  # tries per question in a practice session


@dataclass(frozen=True)
class Choice:
    """One option of a choice question (numbered in file order)."""

    id: str
    text: str


@dataclass
class PracticeQuestion:
    """A question as a handout holds it: no answer; ``sealed`` explanations in practice mode."""

    id: str
    kind: str
    prompt: str
    choices: tuple[Choice, ...] = ()
    tolerance: float | None = None
    points: float = 1.0
    symbols: dict[str, str] = field(default_factory=dict)
    subject: str | None = None
    salt: str = ""
    sealed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": self.id, "kind": self.kind, "prompt": self.prompt, "points": self.points}
        if self.choices:
            doc["choices"] = [{"id": c.id, "text": c.text} for c in self.choices]
        if self.tolerance is not None:
            doc["tolerance"] = self.tolerance
        if self.symbols:
            doc["symbols"] = self.symbols
        if self.subject:
            doc["subject"] = self.subject
        if self.sealed:
            doc["salt"], doc["sealed"] = self.salt, list(self.sealed)
        return doc


@dataclass
class PracticeQuiz:
    """A chapter's handout quiz."""

    chapter: str
    title: str
    questions: list[PracticeQuestion]

    @property
    def practice(self) -> bool:
        """Whether the file carries sealed explanations (answers can be checked offline)."""
        return any(q.sealed for q in self.questions)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "chapter": self.chapter, "title": self.title,
                "questions": [q.to_json() for q in self.questions]}


def derive_key(message: str, salt: str) -> bytes:
    """The Fernet key for canonical answer form ``message`` and the question's hex ``salt`` (Scrypt)."""
    kdf = Scrypt(salt=bytes.fromhex(salt), length=32, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P)
    return base64.urlsafe_b64encode(kdf.derive(message.encode("utf-8")))


def seal(explanation: str, messages: list[str], salt: str) -> tuple[str, ...]:
    """``explanation`` encrypted once under each accepted form's key (what ``grade release`` stores)."""
    return tuple(Fernet(derive_key(m, salt)).encrypt(explanation.encode("utf-8")).decode("ascii") for m in messages)


def new_salt() -> str:
    """A fresh random salt (hex)."""
    return os.urandom(SALT_BYTES).hex()


def candidate_forms(question: PracticeQuestion, raw: Any) -> list[str]:
    """The canonical forms of an answer (several for a numeric one: the bins around it); AnswerFormatError."""
    forms = canonical_answers(question, raw)
    if question.kind == "short" and question.symbols:
        try:
            forms.append(formula_message(question, raw, question.salt))
        except AnswerFormatError:
            pass  # not a formula: the text form alone is tried
    return forms


def open_seal(question: PracticeQuestion, raw: Any) -> str | None:
    """The explanation when ``raw`` is a right answer, None when it is not; AnswerFormatError when unreadable."""
    if not question.sealed:
        raise QuizError(f"question '{question.id}' has no practice key: your course scores quizzes on its server")
    for form in candidate_forms(question, raw):
        fernet = Fernet(derive_key(form, question.salt))
        for token in question.sealed:
            try:
                return fernet.decrypt(token.encode("ascii")).decode("utf-8")
            except InvalidToken:
                continue
    return None


def load_practice(path: str | Path) -> PracticeQuiz:
    """Read a handout quiz file; QuizError (one line) when it is not one."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise QuizError(f"cannot read the quiz file {path} ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise QuizError(f"{path} is not a handout quiz ({FORMAT}): use the quizzes/ folder of your handout")
    questions = [
        PracticeQuestion(
            id=q["id"], kind=q["kind"], prompt=q["prompt"],
            choices=tuple(Choice(c["id"], c["text"]) for c in q.get("choices", [])),
            tolerance=q.get("tolerance"), points=float(q.get("points", 1.0)), symbols=dict(q.get("symbols", {})),
            subject=q.get("subject"), salt=q.get("salt", ""), sealed=tuple(q.get("sealed", [])),
        )
        for q in doc["questions"]
    ]
    return PracticeQuiz(doc["chapter"], doc.get("title", doc["chapter"]), questions)


def chapters(folder: Path) -> list[str]:
    """The chapters of the handout quizzes in ``folder``, sorted."""
    return sorted(p.stem for p in folder.glob("*.json"))


def ask(question: PracticeQuestion, number: int, total: int, read: Callable[[str], str],
        say: Callable[[str], None]) -> bool:
    """Pose one question (``TRIES`` tries; an unreadable answer costs none, an empty one skips); True when right."""
    say(f"\nQuestion {number}/{total} [{question.kind}]: {question.prompt}")
    for index, choice in enumerate(question.choices, start=1):
        say(f"  {index}. {choice.text}")
    tries = 0
    while tries < TRIES:
        raw = read("Your answer (empty to skip): ")
        if not raw.strip():
            say("  Skipped.")
            return False
        try:
            explanation = open_seal(question, raw)
        except AnswerFormatError as exc:
            say(f"  {exc}")
            continue
        tries += 1
        if explanation is not None:
            say(f"  Right. {explanation}")
            return True
        say("  Not this one." + (" Try again." if tries < TRIES else " Re-read the chapter and come back."))
    return False


def run_practice(quiz: PracticeQuiz, read: Callable[[str], str], say: Callable[[str], None]) -> tuple[int, int]:
    """A practice session over every question of ``quiz``: (right, total). Nothing is recorded."""
    if not quiz.practice:
        raise QuizError(f"the quiz '{quiz.chapter}' has no practice keys: answer it on your course's server or"
                        " Gradescope")
    say(f"{quiz.title} ({len(quiz.questions)} questions; practice: nothing is recorded)")
    right = sum(ask(q, i, len(quiz.questions), read, say) for i, q in enumerate(quiz.questions, start=1))
    say(f"\n{right}/{len(quiz.questions)} right.")
    return right, len(quiz.questions)


__all__ = ["FORMAT", "PracticeQuestion", "PracticeQuiz", "load_practice", "open_seal", "run_practice", "seal"]
