"""The practice loop on the course server: a student's schedule, what to practise now, practice answers.

A graded upload that names a mistake puts its concept on the student's schedule (the collector,
:func:`grader.queue.collector.Collector`; :mod:`grader.student.practice_schedule`). Here:

- ``GET /practice``: what to practise now (the concepts due today, then those of the current mistakes without a
  clean retrieval), each with one question posed as its *practice instance*, and the whole schedule.
- ``POST /practice/answers`` ``{"concept", "question": "chapter/id", "answer", "shown"}``: judged by the
  quizzes' judge (the same bounded process as a graded answer), **not recorded as a quiz attempt and no attempt
  spent**; the verdict is a review of the concept (right: a clean retrieval; wrong: a miss).
- ``POST /practice/schedule`` ``{"reviews": [...], "entries": [...]}``: the handout's offline review log and
  schedule (``grade login``): the union of its reviews and the server's (each review id once:
  :func:`grader.student.practice_schedule.merge_logs`) is kept and replayed into each concept's entry
  (:func:`grader.student.practice_schedule.merge_entries`; an entry kept before the log: the later review wins);
  the union and the schedule are answered for the handout to keep too.

Which questions practice may pose (:func:`practicable`): a parameterised question's practice instance (numbers no
graded student is ever drawn), and a question with one key for everyone only once the student's graded attempts
at it are over (answered right or out of attempts): practice never tells an answer still open for grading.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grader import quiz as quiz_lib
from grader.quiz import graded, judging
from grader.server import app as api
from grader.server.api_schema import TEXT, Schema, body_object, takes
from grader.student import practice_schedule as schedule
from grader.student.quiz.concepts import CONCEPTS
from grader.student.quiz.posing import PRACTICE_STUDENT
from grader.student.store import Store

MAX_ENTRIES = 500  # schedule rows one merge may send (a course has a few dozen concepts)
MAX_REVIEWS = 1000  # reviews one merge may send: those made offline (about 150 bytes each)
MAX_MERGE_BYTES = 256 * 1024  # a merge's body: MAX_REVIEWS reviews and a course's schedule rows fit
CLOCK_SLACK = timedelta(hours=1)  # how far ahead of the server's clock a handout's review may be


def practicable(st: api.ServerState, store: Store, student: str) -> dict[str, quiz_lib.Question]:
    """The served questions ``student`` may practise, by ``chapter/id`` (the rule of the module's docstring)."""
    answers = store.quiz_attempts(student)
    allowed = st.config.course.quiz_attempts
    return {
        f"{quiz.chapter}/{q.id}": q
        for quiz in st.quizzes
        for q in quiz.questions
        if q.parameterised or graded.standing(q, answers, allowed).closed
    }


def posed_practice(question: quiz_lib.Question) -> quiz_lib.Posed:
    """The practice instance of a question: posed for the practice student (its numbers, its choice order)."""
    return quiz_lib.pose(question, PRACTICE_STUDENT)


def entry_json(entry: schedule.Entry) -> dict[str, Any]:
    """One concept's schedule as the API and the pages show it."""
    concept = CONCEPTS.get(entry.concept)
    return {
        "concept": entry.concept,
        "title": concept.title if concept else entry.concept,
        "due": entry.due.isoformat(),
        "streak": entry.streak,
        "mastered": entry.mastered,
        "reviewed": entry.reviewed.isoformat() if entry.reviewed else None,
    }


def due_today(store: Store, student: str, now: datetime) -> list[dict[str, Any]]:
    """The student's concepts due today (:func:`grader.student.practice_schedule.due_today`), as the pages show
    them: the practice page's due list and the line of the student's home page."""
    return [
        entry_json(e) for e in schedule.due_today([schedule.from_row(r) for r in store.practice_entries(student)], now)
    ]


def practice_doc(st: api.ServerState, store: Store, student: str, now: datetime) -> dict[str, Any]:
    """What ``GET /practice`` answers: ``practise`` (concept, title, sections, the question posed for practice or
    None when none can be), ``due`` (the concepts due today) and ``schedule`` (every entry)."""
    entries = [schedule.from_row(row) for row in store.practice_entries(student)]
    streaks = {e.concept: e.streak for e in entries}
    questions = practicable(st, store, student)
    items = []
    course = store.effective_course(st.config.course)

    def shown(exercise: str) -> bool:  # exam mode: a held exercise's mistakes are not told, nor offered
        chapter = course.chapter_of(exercise, student)
        return chapter is None or not chapter.feedback_hidden(now)

    for concept_id in schedule.to_practise(store, student, now, shown):
        concept = CONCEPTS.get(concept_id)
        question_id = schedule.question_for(concept_id, streaks.get(concept_id, 0), set(questions))
        question = None
        if question_id is not None:
            posed = posed_practice(questions[question_id])
            question = {
                "id": question_id,
                "kind": posed.question.kind,
                "prompt": posed.prompt,
                "choices": [{"id": c.id, "text": c.text} for c in posed.choices],
                "tolerance": posed.question.tolerance,
            }
        items.append(
            {
                "concept": concept_id,
                "title": concept.title if concept else concept_id,
                "sections": list(concept.sections) if concept else [],
                "question": question,
            }
        )
    return {
        "student": student,
        "practise": items,
        "due": due_today(store, student, now),
        "schedule": [entry_json(e) for e in entries],
    }


async def practise_answer(
    st: api.ServerState,
    store: Store,
    student: str,
    concept: str,
    question_id: str,
    raw: Any,
    shown: bool,
    now: datetime,
) -> dict[str, Any]:
    """One practice answer: judged on the practice instance, recorded as a review of ``concept`` only (no quiz
    attempt). HTTPException 400 for a concept or question practice does not pose, 422 for an unreadable answer."""
    if not schedule.available():
        raise api.fail(503, f"the course server cannot keep practice: {schedule.UNAVAILABLE}; tell your instructor")
    if concept not in CONCEPTS:
        raise api.fail(
            400, f"'{concept}' is not a concept of the course: GET {api.API_PREFIX}/practice lists what to practise"
        )
    question = practicable(st, store, student).get(question_id)
    if question is None or question_id not in CONCEPTS[concept].questions:
        raise api.fail(
            400,
            f"'{question_id}' is not a question to practise {concept} with (a question still "
            f"open for grading is answered in its quiz): GET {api.API_PREFIX}/practice",
        )
    posed = posed_practice(question)
    try:
        verdict = await asyncio.to_thread(judging.judge_bounded, posed, raw, shown, None, student)
    except quiz_lib.AnswerFormatError as exc:
        raise api.fail(422, str(exc)) from exc
    except quiz_lib.ReferenceUnavailableError as exc:
        raise api.fail(503, f"the course server cannot judge this question ({exc}); tell your instructor") from exc
    entry = schedule.record_practice(
        store, student, concept, verdict.correct, now, question=question_id, origin="server"
    )
    return {
        "concept": concept,
        "question": question_id,
        "correct": verdict.correct,
        "explanation": posed.explanation(verdict.expected),
        "entry": entry_json(entry),
    }


def _student(request: Request) -> str:
    principal = api.who(request)
    if principal.is_instructor:
        raise api.fail(403, "practice is a student's: log in with a student token")
    return principal.student


async def get_practice(request: Request) -> Response:
    """GET /practice: what to practise now (one question per concept, not graded), what is due, the schedule."""
    student = _student(request)
    return JSONResponse(practice_doc(api.state(request), api.db_store(request), student, api.now_utc()))


@takes(
    body_object(
        {"concept": TEXT, "question": TEXT, "answer": {}, "shown": {"type": "boolean"}},
        ("concept", "question", "answer"),
    )
)
async def answer_practice(request: Request) -> Response:
    """POST /practice/answers {"concept", "question", "answer", "shown"}: judged, a review; no attempt spent."""
    student = _student(request)
    doc = await api.read_json(request, api.MAX_JSON_BYTES)
    if "answer" not in doc or not isinstance(doc.get("concept"), str) or not isinstance(doc.get("question"), str):
        raise api.fail(400, 'send {"concept": ID, "question": "chapter/id", "answer": ...}')
    shown = doc.get("shown", False)
    if not isinstance(shown, bool):
        raise api.fail(400, "shown must be true (choice numbers as listed) or false (choice ids)")
    verdict = await practise_answer(
        api.state(request),
        api.db_store(request),
        student,
        doc["concept"],
        doc["question"],
        doc["answer"],
        shown,
        api.now_utc(),
    )
    return JSONResponse(verdict)


REVIEW_ROW: Schema = body_object(
    {
        "id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "concept": TEXT,
        "question": {"type": ["string", "null"]},
        "rating": {"enum": list(schedule.RATINGS)},
        "reviewed_at": {"type": "string", "format": "date-time"},
        "origin": {"enum": ["local"]},
    },
    ("id", "concept", "question", "rating", "reviewed_at", "origin"),
    closed=True,
)


def sent_reviews(rows: list[Any], now: datetime) -> list[schedule.Review]:
    """The reviews a handout sends to merge, each checked: a review row
    (:func:`grader.student.practice_schedule.review_from_row`) made offline (``origin`` local: the server's own reviews are the server's), of a concept of the
    course and one of its questions (or none: an upload's miss), not after ``now`` plus :data:`CLOCK_SLACK`.
    HTTPException 400, naming the first row refused, for any other."""
    reviews = []
    for number, row in enumerate(rows, start=1):
        try:
            review = schedule.review_from_row(row)
        except ValueError as exc:
            raise api.fail(400, f"review {number} is not one ({exc}): send the rows `grade login` sends") from exc
        concept = CONCEPTS.get(review.concept)
        if review.origin != "local":
            raise api.fail(
                400,
                f"review {number} says it was made on the server: send only the reviews made offline (origin local)",
            )
        if concept is None or (review.question is not None and review.question not in concept.questions):
            raise api.fail(400, f"review {number} names no concept of the course, or a question not of its concept")
        if review.at > now + CLOCK_SLACK:
            raise api.fail(
                400, f"review {number} was made after now ({review.at.isoformat()}): check this machine's clock"
            )
        reviews.append(review)
    return reviews


@takes(
    body_object(
        {
            "entries": {"type": "array", "items": {"type": "object"}, "maxItems": MAX_ENTRIES},
            "reviews": {"type": "array", "items": REVIEW_ROW, "maxItems": MAX_REVIEWS},
        },
        closed=True,
    )
)
async def merge_schedule(request: Request) -> Response:
    """POST /practice/schedule {"reviews": [...], "entries": [...]}: merge the handout's review log with the
    server's (their union, each review once) and replay it into the schedule; keep both, answer both."""
    student = _student(request)
    store = api.db_store(request)
    doc = await api.read_json(request, MAX_MERGE_BYTES)
    if not schedule.available():
        raise api.fail(503, f"the course server cannot keep practice: {schedule.UNAVAILABLE}; tell your instructor")
    rows, sent = doc.get("entries", []), doc.get("reviews", [])
    if (
        not doc
        or not set(doc) <= {"entries", "reviews"}
        or not (
            isinstance(rows, list) and len(rows) <= MAX_ENTRIES and isinstance(sent, list) and len(sent) <= MAX_REVIEWS
        )
    ):
        raise api.fail(
            400,
            f'send {{"reviews": [review rows], "entries": [schedule rows]}} (at most {MAX_REVIEWS} '
            f"reviews and {MAX_ENTRIES} rows)",
        )
    try:
        local = [schedule.from_row(row) for row in rows]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise api.fail(
            400, f"a schedule row is not one ({type(exc).__name__}: {str(exc)[:80]}): send the rows `grade login` sends"
        ) from exc
    if not all(isinstance(e.concept, str) and e.concept in CONCEPTS and schedule.usable(e) for e in local):
        raise api.fail(400, "a schedule row names no concept of the course, or its card or times are not FSRS's")
    reviews = sent_reviews(sent, api.now_utc())
    try:
        log = schedule.merge_logs(reviews, [schedule.review_from_row(r) for r in store.practice_reviews(student)])
    except ValueError as exc:
        raise api.fail(400, f"{exc}: send the rows `grade login` sends") from exc
    held = [schedule.from_row(row) for row in store.practice_entries(student)]
    merged = schedule.merge_entries(log, local, held)
    store.save_practice_entries(
        student, [schedule.to_row(e) for e in merged], [schedule.review_row(r) for r in reviews]
    )
    return JSONResponse(
        {"entries": [schedule.to_row(e) for e in merged], "reviews": [schedule.review_row(r) for r in log]}
    )


# The practice API: (method, path under the API prefix, handler, who may call it), beside the course server's
# own table (grader/server/app.py API); grader/server/web.py mounts, lists and describes both.
API: list[tuple[str, str, Any, str]] = [
    ("GET", "/practice", get_practice, "student"),
    ("POST", "/practice/answers", answer_practice, "student"),
    ("POST", "/practice/schedule", merge_schedule, "student"),
]
