"""The handout's quizzes: practice offline, and the answers file for Gradescope.

A handout quiz file (``quizzes/<chapter>.json``, format ``normgrade-practice-1``,
written by ``grade release``, :mod:`grader.quiz.handout`) holds each question's
prompt, choices, tolerance and the names a formula may use, never an answer, a
digest or an explanation in plain text. A parameterised question also holds its
prompt template and each parameter's possible values, so a student's own
question is posed here exactly as the graders pose it (:mod:`grader.student.quiz.posing`).

Practice: a parameterised question shows the *practice instance* (numbers no
graded student is ever drawn) and carries its explanation **sealed**: encrypted
with Fernet (``cryptography``: AES-128-CBC + HMAC-SHA256) under a key derived
with Scrypt from the canonical form of that instance's answer
(:mod:`grader.student.quiz.answers`) and a random salt; an answer that opens the seal
is right. A question with one key for everyone carries no seal (a seal over a
few choices or a numeric bin opens to a search), so offline it is asked and
its answer kept, and it is judged where the course grades quizzes. Nothing
offline is recorded as a grade.

``grade quiz CHAPTER --student ID`` poses the student's own questions (their
numbers, their choice order) and ``--save-answers FILE`` writes what they
typed into the file Gradescope reads: ``student = "ID"`` and one ``[chapter]``
table of question id = answer (choice numbers as shown).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from grader.student.quiz import posing
from grader.student.quiz.answers import AnswerFormatError, QuizError, canonical_answers, formula_message

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
    template: str = ""  # a parameterised question's prompt template ({{ name }})
    params: dict[str, list[Any]] = field(default_factory=dict)  # its parameters' possible values
    practice: dict[str, Any] = field(default_factory=dict)  # the practice instance's values (never a graded one)

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
        if self.params:
            doc["template"], doc["params"], doc["practice"] = self.template, self.params, self.practice
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
        return {
            "format": FORMAT,
            "chapter": self.chapter,
            "title": self.title,
            "questions": [q.to_json() for q in self.questions],
        }


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


def candidate_forms_shown(question: PracticeQuestion, raw: Any, shown: tuple[Choice, ...] | None) -> list[str]:
    """As ``candidate_forms``, choice numbers counted in the order shown."""
    if shown is not None and question.kind in ("single", "multiple"):
        return canonical_answers(question, raw, shown)
    return candidate_forms(question, raw)


def open_seal(question: PracticeQuestion, raw: Any, shown: tuple[Choice, ...] | None = None) -> str | None:
    """The explanation when ``raw`` is a right answer, None when it is not; AnswerFormatError when unreadable.
    ``shown``: the choices in the order displayed (their numbers); without it, numbers count in file order."""
    if not question.sealed:
        raise QuizError(
            f"question '{question.id}' is graded, not practised: answer it on your course's server "
            "or in your Gradescope upload"
        )
    for form in candidate_forms_shown(question, raw, shown):
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
            id=q["id"],
            kind=q["kind"],
            prompt=q["prompt"],
            choices=tuple(Choice(c["id"], c["text"]) for c in q.get("choices", [])),
            tolerance=q.get("tolerance"),
            points=float(q.get("points", 1.0)),
            symbols=dict(q.get("symbols", {})),
            subject=q.get("subject"),
            salt=q.get("salt", ""),
            sealed=tuple(q.get("sealed", [])),
            template=q.get("template", ""),
            params=dict(q.get("params", {})),
            practice=dict(q.get("practice", {})),
        )
        for q in doc["questions"]
    ]
    return PracticeQuiz(doc["chapter"], doc["title"] if "title" in doc else doc["chapter"], questions)


def chapters(folder: Path) -> list[str]:
    """The chapters of the handout quizzes in ``folder``, sorted."""
    return sorted(p.stem for p in folder.glob("*.json"))


@dataclass
class Posing:
    """A handout question as one student sees it: the prompt, the choices in their order, and
    whether it can be checked here (the practice instance of a parameterised question)."""

    question: PracticeQuestion
    prompt: str
    choices: tuple[Choice, ...]
    checkable: bool


def pose(question: PracticeQuestion, chapter: str, student: str | None) -> Posing:
    """``student``'s own question (their numbers, their choice order), or with None the practice one."""
    who = student or posing.PRACTICE_STUDENT
    choices = tuple(posing.choice_order(question.choices, who, chapter, question.id))
    if question.params and student:
        values = posing.draw_values(question.params, student, chapter, question.id, question.practice)
        return Posing(question, posing.render_prompt(question.template, values), choices, False)
    return Posing(question, question.prompt, choices, bool(question.sealed))


def ask(
    posed: Posing,
    number: int,
    total: int,
    read: Callable[[str], str],
    say: Callable[[str], None],
    section: str | None = None,
    tries_allowed: int = TRIES,
) -> tuple[bool, str | None]:
    """Pose one question: (right, the answer typed or None when skipped). A checkable question allows
    ``tries_allowed`` tries (an unreadable answer costs none); another is asked once and kept, not judged.
    ``section``: the address of the section whose checkpoint holds the question (shown, and reread after the
    last wrong try)."""
    question = posed.question
    where = f" (§{section})" if section else ""
    say(f"\nQuestion {number}/{total} {question.id} [{question.kind}]{where}: {posed.prompt}")
    for index, choice in enumerate(posed.choices, start=1):
        say(f"  {index}. {choice.text}")
    if not posed.checkable:
        say("  (graded where your course grades quizzes: your answer is kept for --save-answers, not checked here)")
    tries = 0
    while tries < tries_allowed:
        raw = read("Your answer (empty to skip): ")
        if not raw.strip():
            say("  Skipped.")
            return False, None
        try:
            if not posed.checkable:
                canonical_answers(question, raw, posed.choices if question.choices else None)  # readable?
                say("  Kept.")
                return False, raw.strip()
            explanation = open_seal(question, raw, posed.choices)
        except AnswerFormatError as exc:
            say(f"  {exc}")
            continue
        tries += 1
        if explanation is not None:
            say(f"  Right. {explanation}")
            return True, raw.strip()
        reread = f"§{section} (grade read {section})" if section else "the chapter"
        say("  Not this one." + (" Try again." if tries < tries_allowed else f" Re-read {reread} and come back."))
    return False, raw.strip()


def run_practice(
    quiz: PracticeQuiz,
    read: Callable[[str], str],
    say: Callable[[str], None],
    student: str | None = None,
    sections: Mapping[str, str] | None = None,
) -> tuple[int, int, dict[str, str]]:
    """A session over every question of ``quiz`` (posed for ``student``, else the practice instance):
    (right, checkable, the answers typed by question id). Nothing is recorded. ``sections``: question id -> the
    address of the section whose checkpoint holds it (``coursetext.checkpoint_sections``)."""
    posed = [pose(q, quiz.chapter, student) for q in quiz.questions]
    checkable = sum(p.checkable for p in posed)
    whose = f"posed for {student}" if student else "practice numbers"
    say(
        f"{quiz.title} ({len(quiz.questions)} questions, {whose}; {checkable} can be checked here; nothing is recorded)"
    )
    right, answers = 0, {}
    for i, p in enumerate(posed, start=1):
        ok, typed = ask(p, i, len(posed), read, say, (sections or {}).get(p.question.id))
        right += ok
        if typed is not None:
            answers[p.question.id] = typed
    say(f"\n{right}/{checkable} checked here right; {len(answers)} answer(s) kept.")
    return right, checkable, answers


def run_spaced(
    store: Any,
    student: str,
    quizzes: dict[str, PracticeQuiz],
    read: Callable[[str], str],
    say: Callable[[str], None],
    now: datetime,
) -> list[tuple[str, bool]]:
    """A spaced-retrieval session offline: each concept to practise now
    (:func:`grader.student.practice_schedule.to_practise`) asks one question of its own that the handout can
    check (the practice instance, :func:`grader.student.practice_schedule.question_for`), with one try: a
    retrieval is clean only at the first answer. Each answer is recorded as a review in the student's schedule
    in ``store``; a skipped question is none. Returns (concept, right) per answered concept."""
    from grader.student import practice_schedule as schedule
    from grader.student.quiz.concepts import CONCEPTS

    checkable = {f"{quiz.chapter}/{q.id}": (quiz, q) for quiz in quizzes.values() for q in quiz.questions if q.sealed}
    concepts = schedule.to_practise(store, student, now)
    if not concepts:
        say("Nothing to practise today: a graded upload that names a mistake puts its concept here.")
        return []
    say(f"Practice ({len(concepts)} concept(s); not graded, no attempts spent): one question each, one try.")
    done = []
    for number, concept in enumerate(concepts, start=1):
        title = CONCEPTS[concept].title if concept in CONCEPTS else concept
        question_id = schedule.question_for(concept, schedule.streak_of(store, student, concept), set(checkable))
        if question_id is None:
            say(f"\n{title}: no question of it can be checked here; practise it on your course's server.")
            continue
        quiz, question = checkable[question_id]
        say(f"\n{title}")
        right, typed = ask(pose(question, quiz.chapter, None), number, len(concepts), read, say, tries_allowed=1)
        if typed is None:
            continue
        entry = schedule.record_practice(store, student, concept, right, now, question=question_id, origin="local")
        say("  Mastered: two clean retrievals in a row." if entry.mastered else f"  Back on {entry.due:%Y-%m-%d}.")
        done.append((concept, right))
    return done


def _toml_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def save_answers(path: str | Path, student: str, chapter: str, answers: dict[str, str]) -> None:
    """Add one chapter's answers to the Gradescope answers file (other chapters kept, this one merged)."""
    import tomllib

    path = Path(path)
    doc: dict[str, Any] = {}
    if path.exists():
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise QuizError(f"{path} is not an answers file ({exc}): choose another --save-answers file") from exc
        if doc.get("student", student) != student:
            raise QuizError(
                f"{path} holds the answers of '{doc['student']}', not '{student}': choose another --save-answers file"
            )
    tables = {k: v for k, v in doc.items() if isinstance(v, dict)}
    tables[chapter] = {**tables.get(chapter, {}), **answers}
    lines = [
        "# Quiz answers for Gradescope: upload this file with your exercises (grade quiz --save-answers)",
        f"student = {_toml_value(student)}",
    ]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{qid} = {_toml_value(str(ans))}" for qid, ans in table.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


__all__ = [
    "FORMAT",
    "PracticeQuestion",
    "PracticeQuiz",
    "load_practice",
    "open_seal",
    "pose",
    "run_practice",
    "run_spaced",
    "save_answers",
    "seal",
]
