"""The JSON API's course handlers (grader/server/app.py): chapter quizzes, the instructor's term (regrade requests,
extensions), health, roster sync and rescoring."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grader.term import extensions, regrade, rescore
from grader.student.engine import catalogue
from grader import quiz as quiz_lib
from grader.quiz import graded, judging
from grader.student.errors import GraderError
from grader.server import lti_services
from grader.server.api_schema import ROW_ID, TEXT, TEXTS, body_object, takes
from grader.queue import records
from grader.queue.jobs import open_queue
from grader.student.store import Store
from grader.server.api_base import (
    API_PREFIX,
    MAX_JSON_BYTES,
    MAX_ID,
    ServerState,
    fail,
    state,
    db_store,
    who,
    instructor,
    student_of,
    path_id,
    read_json,
)

# --- quizzes --------------------------------------------------------------------------------------


def quiz_or_404(st: ServerState, chapter: str) -> quiz_lib.Quiz:
    for quiz in st.quizzes:
        if quiz.chapter == chapter:
            return quiz
    chapters = ", ".join(q.chapter for q in st.quizzes) or "none"
    raise fail(404, f"'{chapter}' is not a quiz chapter: chapters are {chapters}")


def public_question(posed: quiz_lib.Posed, st: graded.GradedStanding) -> dict[str, Any]:
    """A question as one student sees it before answering: the prompt rendered with their numbers,
    the choices in their order, their attempts; never a salt, digest, key, reference call or explanation."""
    question = posed.question
    return {
        "id": question.id,
        "kind": question.kind,
        "prompt": posed.prompt,
        "choices": [{"id": c.id, "text": c.text} for c in posed.choices],
        "params": dict(posed.values) or None,
        "tolerance": question.tolerance,
        "symbols": sorted(set(question.symbols.values())) or None,
        "points": question.points,
        "checkpoint": question.checkpoint,
        "attempts": st.allowed,
        "attempts_left": st.left,
        "answered_correctly": st.correct,
    }


def reference_or_503(quiz: quiz_lib.Quiz) -> None:
    """A chapter with parameterised questions needs the reference where the server runs (503 otherwise)."""
    try:
        quiz_lib.needs_reference(quiz)
    except quiz_lib.ReferenceUnavailableError as exc:
        raise fail(503, f"the course server cannot judge this chapter ({exc}); tell your instructor") from exc


async def list_quizzes(request: Request) -> Response:
    """GET /quizzes (own) and GET /students/{student}/quizzes (instructor): each chapter's standing."""
    st = state(request)
    store = db_store(request)
    student = student_of(who(request), request)
    answers = store.quiz_attempts(student)
    return JSONResponse(
        {"student": student, "chapters": [quiz_lib.chapter_progress(q, answers).to_json() for q in st.quizzes]}
    )


async def get_quiz(request: Request) -> Response:
    """GET /quizzes/{chapter}: the questions posed for the caller (their numbers and choice order), no keys.

    Each question says whether the caller has answered it correctly already
    (``grade quiz`` asks only the others unless ``--all``); ``standing`` is the chapter's.
    """
    st = state(request)
    store = db_store(request)
    principal = who(request)
    quiz = quiz_or_404(st, request.path_params["chapter"])
    reference_or_503(quiz)
    answers = store.quiz_attempts(principal.student)
    attempts = st.config.course.quiz_attempts
    return JSONResponse(
        {
            "student": principal.student,
            "chapter": quiz.chapter,
            "title": quiz.title,
            "standing": quiz_lib.chapter_progress(quiz, answers).to_json(),
            "questions": [
                public_question(quiz_lib.pose(q, principal.student), graded.standing(q, answers, attempts))
                for q in quiz.questions
            ],
        }
    )


def closed_answer(
    question: quiz_lib.Question, posed: quiz_lib.Posed, st: graded.GradedStanding
) -> tuple[int, dict[str, Any]]:
    """409 for an answer to a closed question (right already, or out of attempts): not judged, not recorded;
    the one-line reason, whether it counts as right, and its explanation (a closed question may be explained)."""
    return 409, {
        "error": " ".join(graded.closed_message(question, st).split()),
        "question": question.id,
        "correct": st.correct,
        "params": dict(posed.values) or None,
        "attempts_left": 0,
        "explanation": closed_explanation(posed),
    }


def closed_explanation(posed: quiz_lib.Posed) -> str:
    """The explanation of a closed question as posed for its student (a parameterised one with their numbers
    and the reference's answer to them): shown once the question is closed, never before."""
    expected = None
    if posed.question.parameterised:
        call = quiz_lib.params_lib.parse_reference(posed.question.reference, set(posed.values))
        expected = quiz_lib.params_lib.reference_answer(call, posed.values)
    return posed.explanation(expected)


@takes(body_object({"question": TEXT, "answer": {}, "shown": {"type": "boolean"}}, ("question", "answer")))
async def answer_quiz(request: Request) -> Response:
    """POST /quizzes/{chapter}/answers ``{"question", "answer", "shown"}``: judged once here, recorded, then told.

    The answer is judged as posed for the token's student (their numbers). With
    ``"shown": true`` choice numbers count in the order GET /quizzes/{chapter}
    lists them (what ``grade quiz`` shows); otherwise choices are named by id (an
    answers file's numbers count in file order, as locally). An unreadable or
    too complex answer is a 422 with the reason, not recorded, and costs no
    attempt. Each question allows a fixed number of judged attempts that never
    resets (``grader.quiz.graded``); an answer to a question answered correctly
    or out of attempts is a 409. Before the chapter's due date a wrong answer
    says only "Not this one."; the explanation comes with a correct answer, the
    last attempt, or any answer after the due date. Judging runs in a separate
    process with a time budget, awaited from a worker thread, so one hostile
    answer never holds up other requests.
    """
    st = state(request)
    store = db_store(request)
    principal = who(request)
    if principal.is_instructor:
        raise fail(403, "the instructor token cannot answer quizzes: log in with a student token")
    quiz = quiz_or_404(st, request.path_params["chapter"])
    doc = await read_json(request, MAX_JSON_BYTES)
    question_id = doc.get("question")
    if "answer" not in doc:
        raise fail(400, 'send {"question": ID, "answer": ...}: the body has no "answer"')
    try:
        question = quiz.question(str(question_id))
    except KeyError:
        raise fail(
            400,
            f"'{question_id}' is not a question of chapter '{quiz.chapter}': "
            f"list them with GET {API_PREFIX}/quizzes/{quiz.chapter}",
        ) from None
    shown = doc.get("shown", False)
    if not isinstance(shown, bool):
        raise fail(400, "shown must be true (choice numbers as listed) or false (choice ids)")
    status, answer = await judge_and_record(st, store, principal.student, quiz, question, doc.get("answer"), shown)
    return JSONResponse(answer, status_code=status)


async def judge_and_record(
    st: ServerState, store: Store, student: str, quiz: quiz_lib.Quiz, question: quiz_lib.Question, raw: Any, shown: bool
) -> tuple[int, dict[str, Any]]:
    """One answer of ``student``, judged as posed for them, recorded, then told: (200, the verdict) or (409,
    the question is closed, not judged); the API's POST .../answers and the student's page both go here.

    HTTPException 422 for an unreadable or too complex answer (not recorded, no attempt spent), 503 when the
    reference is missing. The rules are those of :func:`answer_quiz`.
    """
    attempts = st.config.course.quiz_attempts
    before = graded.standing(question, store.quiz_attempts(student), attempts)
    posed = quiz_lib.pose(question, student)
    if before.closed:
        return closed_answer(question, posed, before)
    try:
        verdict = await asyncio.to_thread(judging.judge_bounded, posed, raw, shown, None, student)
    except quiz_lib.AnswerFormatError as exc:
        raise fail(422, str(exc)) from exc
    except quiz_lib.ReferenceUnavailableError as exc:
        raise fail(503, f"the course server cannot judge this question ({exc}); tell your instructor") from exc
    # nothing was awaited from here on: the check and the record are one step for this event loop
    before = graded.standing(question, store.quiz_attempts(student), attempts)
    if before.closed:  # a concurrent answer used the last attempt while this one was judged
        return closed_answer(question, posed, before)
    first_try = store.record_quiz_answer(
        student, quiz.chapter, question.id, verdict.answer, verdict.correct, verdict.values
    )
    after = before.after(verdict.correct)
    due_passed = graded.past_due(st.config.course.quiz_due(quiz.chapter), datetime.now(timezone.utc))
    reveal = graded.reveals_explanation(after, due_passed)
    standing = quiz_lib.chapter_progress(quiz, store.quiz_attempts(student))
    return 200, {
        "question": question.id,
        "answer": verdict.answer,
        "correct": verdict.correct,
        "params": dict(verdict.values) or None,
        "first_try": first_try,
        "attempt": after.used,
        "attempts": after.allowed,
        "attempts_left": after.left,
        "feedback": graded.feedback(after),
        "explanation": posed.explanation(verdict.expected) if reveal else None,
        "chapter": standing.to_json(),
    }


# --- the instructor's term: regrade requests, extensions (grader/term/regrade.py, grader/term/extensions.py) ----------


def _text(doc: dict[str, Any], key: str) -> str:
    """A string field of a JSON body ("" when absent; 400 when it is not text or a number)."""
    value = doc.get(key, "")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise fail(400, f"{key} must be text")
    return str(value)


@takes(body_object({"exercise": TEXT, "reason": TEXT, "submission": ROW_ID}, ("exercise", "reason")))
async def create_regrade(request: Request) -> Response:
    """POST /regrades: file a regrade request {exercise, reason, submission?} about one of your uploads."""
    principal = who(request)
    if principal.is_instructor:
        raise fail(403, "the instructor answers regrade requests: log in with a student token to file one")
    doc = await read_json(request, MAX_JSON_BYTES)
    job_id = doc.get("submission")
    if job_id is not None and records.row_id(job_id) is None:
        raise fail(400, f"submission must be the id of one of your submissions (a number from 1 to {MAX_ID})")
    try:
        row = regrade.file_request(
            db_store(request), principal.student, _text(doc, "exercise"), _text(doc, "reason"), job_id
        )
    except regrade.RegradeError as exc:
        raise fail(exc.status, str(exc)) from exc
    return JSONResponse(regrade.public(row), status_code=201)


@takes(query={"status": {"enum": ["open", "answered"]}})
async def list_regrades(request: Request) -> Response:
    """GET /regrades: your regrade requests and their answers (the instructor: everyone's, ?status=open)."""
    principal = who(request)
    status = request.query_params.get("status") or None
    if status not in (None, "open", "answered"):
        raise fail(400, "status is open or answered")
    if principal.is_instructor:
        return JSONResponse({"requests": regrade.requests(db_store(request), None, status)})
    rows = regrade.requests(db_store(request), principal.student, status)
    return JSONResponse({"requests": [regrade.public(r) for r in rows]})


@takes(body_object({"reply": TEXT, "score": {"type": ["number", "string"]}}, ("reply",)), path={"id": ROW_ID})
async def answer_regrade(request: Request) -> Response:
    """POST /regrades/{id}/answer (instructor): {reply, score?}; a score is written as an override."""
    principal = instructor(request)
    doc = await read_json(request, MAX_JSON_BYTES)
    try:
        row = regrade.answer(
            db_store(request),
            path_id(request, what="a regrade request id", hint="use the # of GET /api/v1/regrades"),
            _text(doc, "reply"),
            _text(doc, "score"),
            principal.student or "instructor",
        )
    except regrade.RegradeError as exc:
        raise fail(exc.status, str(exc)) from exc
    return JSONResponse(row)


async def list_extensions(request: Request) -> Response:
    """GET /extensions (instructor): every extension, the course file's then those granted here."""
    instructor(request)
    st = state(request)
    return JSONResponse({"extensions": extensions.listing(db_store(request), st.config.course)})


@takes(
    body_object(
        {k: TEXT for k in ("student", "group", "chapter", "due", "reason", "late_until")}
        | {"late_penalty": {"type": ["number", "string"]}},
        ("chapter", "due", "reason"),
    )
)
async def create_extension(request: Request) -> Response:
    """POST /extensions (instructor): {student or group, chapter, due, reason, late_penalty?, late_until?}."""
    principal = instructor(request)
    doc = await read_json(request, MAX_JSON_BYTES)
    st = state(request)
    try:
        row = extensions.grant(
            db_store(request),
            st.config.course,
            _text(doc, "student"),
            _text(doc, "group"),
            _text(doc, "chapter"),
            _text(doc, "due"),
            _text(doc, "reason"),
            principal.student or "instructor",
            _text(doc, "late_penalty"),
            _text(doc, "late_until"),
            via="API",
        )
    except GraderError as exc:
        raise fail(400, str(exc)) from exc
    return JSONResponse(row, status_code=201)


# --- health ------------------------------------------------------------------------------------------


async def get_health(request: Request) -> Response:
    """GET /health: what the workers can grade (the self-test of each kind) and how many uploads are held.

    ``ok`` is true when the last self-test passed every kind; ``selftest`` is
    per kind (``cpu``: NumPy exercises, ``opencl``: kernel exercises) ``ok``
    (null before the first run), ``reason``, ``exercise``, ``checked_at``
    (null without a collector); ``held`` counts the held uploads and their
    exercises; ``unrecorded`` counts the results since the server started that
    could not be recorded (each of those jobs ended ``error``) with the last
    reason (null when none). No token needed: it names no student.
    """
    st = state(request)
    test = st.selftest
    verdicts = test.as_json() if test is not None else None
    held = records.held_jobs(db_store(request))
    collector = st.collector
    return JSONResponse(
        {
            "ok": verdicts is not None and all(v["ok"] for v in verdicts.values()),
            "selftest": verdicts,
            "held": {"uploads": len(held), "exercises": sum(len(records.held_ids(j)) for j in held)},
            "unrecorded": {
                "jobs": collector.unrecorded if collector is not None else 0,
                "last_reason": collector.last_unrecorded if collector is not None else None,
            },
        }
    )


@takes(body_object({}, closed=True))
async def sync_roster(request: Request) -> Response:
    """POST /roster/sync (instructor, body {}): pull the LMS's membership into the roster now; the new tokens.

    ``grade roster sync`` comes here while the server runs (only the server
    writes the database it serves); the dashboard's button does the same sync.
    """
    instructor(request)
    extra = sorted(await read_json(request, MAX_JSON_BYTES))
    if extra:
        raise fail(400, f"the roster sync takes no fields ({extra[0][:40]!r} given): send {{}}")
    result = await lti_services.sync_in_thread(request.app)
    return JSONResponse(result.to_json())


@takes(body_object({"exercises": TEXTS, "dry_run": {"type": "boolean"}}))
async def rescore_now(request: Request) -> Response:
    """POST /rescore (instructor, body {"exercises": [...], "dry_run": false}): grade the stored uploads again.

    A served course is rescored live (grader/term/rescore.py, on the server's own queue and workers: uploads
    go on being taken meanwhile); the answer is the outcome with whose counted score changed, as `grade rescore`
    prints it (``text``). `grade rescore` comes here while the server runs; the dashboard's Term page too.
    """
    instructor(request)
    doc = await read_json(request, MAX_JSON_BYTES)
    selectors, dry_run = doc.get("exercises", []), doc.get("dry_run", False)
    if (
        not isinstance(selectors, list)
        or not all(isinstance(x, str) for x in selectors)
        or not isinstance(dry_run, bool)
    ):
        raise fail(400, 'send {"exercises": [exercise ids or topics], "dry_run": false}')
    try:
        outcome = await rescore_in_thread(request.app, catalogue.resolve(selectors) if selectors else [], dry_run)
    except GraderError as exc:
        raise fail(400, str(exc)) from exc
    return JSONResponse(outcome.to_json())


async def rescore_in_thread(app: Any, exercises: list[str], dry_run: bool = False) -> rescore.Outcome:
    """A rescoring of the served course on a connection of its own in a worker thread (the loop goes on)."""
    st: ServerState = app.state.normgrade

    def run() -> rescore.Outcome:
        with Store.open(st.config.db_path) as store:
            return rescore.rescore(
                store,
                open_queue(st.config.queue_url),
                store.effective_course(st.config.course),
                exercises,
                st.grader_version,
                dry_run,
                timeout=float(st.config.job_timeout),
            )

    return await asyncio.to_thread(run)
