"""Judging: a question posed for a student (their numbers, their choice order) and an answer
judged against the locked key or the reference (``pose``, ``judge``, ``grade_answers``)."""

from __future__ import annotations

import difflib
import hmac
import math
import multiprocessing
import resource
import threading
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from grader.quiz import params as params_lib
from grader.quiz.errors import AnswerFormatError, ReferenceUnavailableError
from grader.quiz.model import Choice, Posed, Question, Quiz, QuizResult, Verdict
from grader.student.quiz.answers import (
    _choice_ids,
    canonical_answers,
    check_numerals,
    digest,
    formula_message,
    parse_drawn_number,
    parse_number,
)
from grader.student.quiz import expr
from grader.student.errors import UsageError
from grader.student.quiz import posing


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
        values = params_lib.draw(specs, student, question.chapter, question.id, question.practice)
        prompt = params_lib.render(question.prompt, values)
    choices = posing.choice_order(question.choices, student, question.chapter, question.id)
    return Posed(question, values, prompt, tuple(choices))


def judge(posed: Posed, raw: Any, shown: bool = False) -> Verdict:
    """Judge one answer to a posed question; AnswerFormatError when unreadable (costs no attempt).

    ``shown``: choice numbers refer to the order the student saw. A parameterised
    question's answer is a number, never a formula in its parameters or a function such as Φ
    (``parse_drawn_number``: refused, costing no attempt); the reference computes its key
    (ReferenceUnavailableError when it is not installed).
    """
    question = posed.question
    order = posed.choices if shown else None
    answer = recorded_form(question, raw, order)
    if question.parameterised:
        value = parse_drawn_number(raw, posed.values)
        call = params_lib.parse_reference(question.reference, set(posed.values))
        expected = params_lib.reference_answer(call, posed.values)
        correct = abs(value - expected) <= float(question.tolerance or 0) * (1 + 1e-9)
        return Verdict(question.id, answer, correct, values=dict(posed.values), expected=expected)
    candidates = (
        numeric_candidates(question, raw) if question.kind == "numeric" else canonical_answers(question, raw, order)
    )
    if not _matches(question, candidates) and question.kind == "short" and question.symbols:
        candidates = [formula_message(question, raw, question.salt)]
    return Verdict(question.id, answer, _matches(question, candidates))


def preview(posed: Posed, raw: Any) -> str:
    """How an answer to a posed question is read, as the judge will read it, without judging it (the live
    preview of the student's page): a number's expression and value (a parameterised question's answer read as
    a number: no parameter's name, no function but sqrt), a formula with its subject stripped and each name as its symbol. AnswerFormatError with the
    judge's own one-line reason when the answer cannot be read; choice and plain text answers have none."""
    question = posed.question
    if question.kind == "numeric":
        if question.parameterised:
            parse_drawn_number(raw, posed.values)  # unreadable: the same reason judging gives
        else:
            parse_number(raw)
        return expr.reading(str(raw).strip(), number=True)
    if question.kind == "short" and question.symbols:
        formula_message(question, raw, question.salt)  # unreadable: the same reason judging gives
        return expr.reading(expr.strip_subject(str(raw), question.subject, question.symbols), question.symbols)
    raise AnswerFormatError("this answer is read as written: there is no formula to preview")


EXTRA_CANDIDATES = 2 * 10  # keys beyond 2·steps + 1 a fixed numeric answer may be judged against (rounding)


def numeric_candidates(question: Question, raw: Any) -> list[str]:
    """The keys a fixed numeric answer x may match: ``num:k`` for every k with |x - k·t/Q| <= t (t the
    tolerance, Q its ``steps``). The key is the answer's own k (answer = k·t/Q exactly), so a match means
    |x - answer| <= t: the tolerance exactly as stated."""
    return [f"num:{k}" for k in candidate_range(question, parse_number(raw))]


def candidate_range(question: Question, x: float) -> range:
    """The k of :func:`numeric_candidates` for the value ``x``; AnswerFormatError when there are more than
    2·steps + 1 + EXTRA_CANDIDATES (an x so large that a double cannot tell its bins apart: ``1234567890123``
    to a tolerance of 0.001 would be millions of keys)."""
    t, steps = float(question.tolerance or 0), question.steps
    low, high = (x - t) * steps / t, (x + t) * steps / t
    slack = 1e-9 * max(1.0, abs(low), abs(high))
    keys = range(math.ceil(low - slack), math.floor(high + slack) + 1)
    if len(keys) > 2 * steps + 1 + EXTRA_CANDIDATES:
        raise AnswerFormatError(
            f"{x:g} is too large to judge to this question's tolerance ({t:g}): give the "
            "answer the question asks for, rounded"
        )
    return keys


def check_bounds(posed: Posed, raw: Any) -> None:
    """Refuse a numeric answer beyond the bounds before any judge starts (AnswerFormatError, one line, no
    attempt spent): each numeral within ``check_numerals``'s digits and magnitude, and a plain number to a
    fixed question within :func:`candidate_range`'s keys. Cheap: nothing is evaluated (no SymPy)."""
    question = posed.question
    if question.kind != "numeric":
        return
    text = check_numerals(raw)
    if question.parameterised:
        return
    try:
        x = float(raw) if isinstance(raw, (int, float)) else float(text)
    except ValueError:
        return  # an expression: its value is bounded in the judge (numeric_candidates)
    if math.isfinite(x):
        candidate_range(question, x)


def _matches(question: Question, candidates: list[str]) -> bool:
    return any(hmac.compare_digest(digest(question.salt, c), d) for c in candidates for d in question.digests)


def check_answer(question: Question, raw: Any, student: str = "", shown: bool = False) -> Verdict:
    """Judge one answer as written in an answers file (choice ids or file-order numbers; with ``shown``,
    choice numbers as ``student`` saw them)."""
    return judge(pose(question, student), raw, shown)


def grade_answer(question: Question, raw: Any, student: str = "", shown: bool = False) -> Verdict:
    """Like check_answer, but an unreadable answer is a wrong one carrying the reason."""
    try:
        return check_answer(question, raw, student, shown)
    except AnswerFormatError as exc:
        return Verdict(question.id, recorded_form(question, raw), False, str(exc))


def grade_answers(
    quiz: Quiz, answers: Mapping[str, Any], source: str = "answers", student: str = "", shown: bool = False
) -> QuizResult:
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
            result.verdicts[q.id] = grade_answer(q, answers[q.id], student, shown)
    return result


# --- bounded judging ----------------------------------------------------------------

JUDGE_SECONDS = 5.0  # the time budget of one judged answer (SymPy and the reference), away from the server's loop
JUDGES = 4  # judging processes at once; a request beyond waits for a slot (at most the time budget)
JUDGE_MEMORY = 512 * 1024 * 1024  # bytes a judging process may map beyond what it was forked with (RLIMIT_AS)
_SLOTS = threading.BoundedSemaphore(JUDGES)
_HOLDERS: set[str] = set()  # the students whose answer is being judged now: one judge each at most
_HOLDERS_LOCK = threading.Lock()
# fork: the child starts with SymPy and the reference already imported (a fresh interpreter would take
# seconds); the parent warms them up first (``warm_up``), so the child imports nothing under a lock.
_CONTEXT = multiprocessing.get_context("fork")


class TooComplexError(AnswerFormatError):
    """An answer that could not be judged within the time budget (refused, costs no attempt)."""


def _mapped_bytes() -> int:
    """The address space this process maps now (Linux: /proc/self/statm; 0 where it cannot be read)."""
    try:
        return int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _limit_memory(extra: int) -> None:
    """Cap this process's address space at what it maps now plus ``extra`` bytes: an answer that makes
    SymPy build a huge expression gets MemoryError (a refusal) instead of gigabytes of the server's memory."""
    now = _mapped_bytes()
    if now:
        resource.setrlimit(resource.RLIMIT_AS, (now + extra, now + extra))


def _child(conn: Connection, work: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Run in the judging process (its memory capped): send ("ok", work(*args)) or (error kind, one line)."""
    try:
        _limit_memory(JUDGE_MEMORY)
        conn.send(("ok", work(*args)))
    except AnswerFormatError as exc:
        conn.send(("format", str(exc)))
    except ReferenceUnavailableError as exc:
        conn.send(("reference", str(exc)))
    except MemoryError:
        conn.send(("format", "this answer needs too much memory to judge: write it more simply"))
    except Exception as exc:  # reported in the parent as an unreadable answer, never a traceback
        conn.send(("format", f"this answer cannot be judged ({type(exc).__name__}): write it more simply"))
    finally:
        conn.close()


def warm_up() -> None:
    """Import and exercise SymPy's reader once in this process, so judging children fork ready."""
    expr.fingerprint("x*normcdf(x) + sqrt(2)/2", {"x": "x"}, "00" * 16)
    try:
        params_lib.import_reference()
    except ReferenceUnavailableError:
        pass  # chapters with drawn numbers answer 503 where the reference is missing


def judge_bounded(
    posed: Posed, raw: Any, shown: bool = False, seconds: float | None = None, who: str | None = None
) -> Verdict:
    """``judge`` in a separate process that is killed after ``seconds``: TooComplexError (one line,
    no attempt spent) when it runs out of time. An answer beyond the bounds of :func:`check_bounds` is refused
    before a judge starts; ``who`` (the student) may hold one judge at a time. Blocking: the server calls it
    through a worker thread, so its event loop keeps answering other students meanwhile."""
    check_bounds(posed, raw)
    return _bounded(judge, (posed, raw, shown), seconds, who)


def preview_bounded(posed: Posed, raw: Any, seconds: float | None = None, who: str | None = None) -> str:
    """``preview`` under the same bounds as ``judge_bounded`` (its own process, the same slots and time)."""
    check_bounds(posed, raw)
    return _bounded(preview, (posed, raw), seconds, who)


def _bounded(work: Callable[..., Any], args: tuple[Any, ...], seconds: float | None, who: str | None = None) -> Any:
    """``work(*args)`` in a judging process (one of JUDGES slots, at most one per ``who``), killed after
    ``seconds``."""
    seconds = JUDGE_SECONDS if seconds is None else seconds
    with _HOLDERS_LOCK:
        if who is not None and who in _HOLDERS:
            raise TooComplexError(
                "your previous answer is still being judged: send this one when it is done (no attempt was used)"
            )
        if who is not None:
            _HOLDERS.add(who)
    try:
        if not _SLOTS.acquire(timeout=seconds):
            raise TooComplexError("every judge is busy: send the answer again in a moment (no attempt was used)")
        try:
            return _in_child(work, args, seconds)
        finally:
            _SLOTS.release()
    finally:
        if who is not None:
            with _HOLDERS_LOCK:
                _HOLDERS.discard(who)


def _in_child(work: Callable[..., Any], args: tuple[Any, ...], seconds: float) -> Any:
    """One judging process, killed after ``seconds``."""
    parent, child = _CONTEXT.Pipe(duplex=False)
    process = _CONTEXT.Process(target=_child, args=(child, work, args), daemon=True)
    process.start()
    child.close()
    try:
        if not parent.poll(seconds):
            raise TooComplexError(
                "this answer is too complex to judge in time: write it more simply (no attempt was used)"
            )
        kind, payload = parent.recv()
    except EOFError:
        raise TooComplexError(
            "this answer could not be judged (the judge stopped): write it more simply (no attempt was used)"
        ) from None
    finally:
        parent.close()
        if process.is_alive():
            process.kill()
        process.join()
    if kind == "ok":
        return payload
    if kind == "reference":
        raise ReferenceUnavailableError(payload)
    raise AnswerFormatError(payload)
