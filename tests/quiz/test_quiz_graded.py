"""Graded quizzes on the course server: attempts that never reset, "Not this one." before the due
date, explanations only when attempts are spent or the due date passed, races that cannot buy
extra attempts, and judging that stays bounded and off the event loop."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx works the same here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from grader import quiz as quiz_lib
from grader.quiz import graded, judging
from grader.server import app as app_lib
from grader.server import web
from grader.student.course import load_course
from server_util import QUIZ_DIR, Server, api, issue_tokens, posed_for, quiz_source, right_answer, with_quiz_chapters

STUDENTS = ["brute", "race", "late", "early", "hostile", "other", "choice"]
FUTURE = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat(timespec="seconds").replace("+00:00", "Z")
PAST = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat(timespec="seconds").replace("+00:00", "Z")
COURSE = f"""
name = "graded quizzes"
[quiz]
attempts = 2
[[chapter]]
name = "activations"
due = {FUTURE}
[[chapter]]
name = "normalization"
due = {PAST}
late_penalty = 0.5
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("graded")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, STUDENTS)
    course = root / "course.toml"
    course.write_text(with_quiz_chapters(COURSE), encoding="utf-8")
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=course).start()
    try:
        yield {"url": server.url, "tokens": tokens, "db": db, "course": course}
    finally:
        server.stop()


def answer(env: dict[str, Any], student: str, chapter: str, question: str, raw: Any, shown: bool = False) -> Any:
    return api(
        env["url"],
        env["tokens"][student],
        "POST",
        f"/quizzes/{chapter}/answers",
        json={"question": question, "answer": raw, "shown": shown},
    )


def recorded(db: Path, student: str, question: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM quiz_attempts WHERE student = ? AND question = ?", [student, question]
            ).fetchone()[0]
        )
    finally:
        conn.close()


def source_question(chapter: str, question_id: str) -> Any:
    return next(q for q in quiz_source(chapter).questions if q.id == question_id)


# --- the rules, without a server ---------------------------------------------------------------------


def test_standing_counts_every_answer_until_the_first_right_one_and_never_resets() -> None:
    question = quiz_lib.load_quiz(QUIZ_DIR / "activations.json").question("gelu-why")
    rows = [{"chapter": "activations", "question": "gelu-why", "correct": c} for c in (False, False, False)]
    st = graded.standing(question, rows, course_attempts=2)
    assert (st.used, st.left, st.closed) == (3, 0, True), "no new round after the last attempt"
    right_then_wrong = [{"chapter": "activations", "question": "gelu-why", "correct": c} for c in (False, True, False)]
    st = graded.standing(question, right_then_wrong, course_attempts=3)
    assert st.correct and st.used == 2 and st.closed
    fresh = graded.standing(question, [], course_attempts=None)
    assert fresh.allowed == question.attempts and fresh.left == question.attempts and not fresh.closed
    assert graded.feedback(fresh.after(False)).startswith("Not this one.")
    assert graded.feedback(fresh.after(True)) == "Correct."


def test_the_course_file_sets_the_attempts(tmp_path: Path) -> None:
    path = tmp_path / "course.toml"
    path.write_text(COURSE, encoding="utf-8")
    course = load_course(path)
    assert course.quiz_attempts == 2
    assert course.quiz_due("activations") is not None and course.quiz_due("universal-approximation") is None
    path.write_text("[quiz]\nattempts = 0\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"\[quiz\] takes attempts = N"):
        load_course(path)


# --- on the server -----------------------------------------------------------------------------------


def test_a_multiple_select_cannot_be_brute_forced(env: dict[str, Any]) -> None:
    sq = source_question("activations", "dead-relu-remedies")
    ids = [c.id for c in sq.choices]
    subsets = [
        list(s)
        for n in range(1, len(ids) + 1)
        for s in itertools.combinations(ids, n)
        if sorted(s) != sorted(sq.answer)
    ]
    first = answer(env, "brute", "activations", sq.id, subsets[0]).json()
    assert first["correct"] is False and first["feedback"] == "Not this one. (1 attempt(s) left)"
    assert first["explanation"] is None, "before the due date a wrong answer says nothing more"
    second = answer(env, "brute", "activations", sq.id, subsets[1]).json()
    assert second["attempts_left"] == 0 and second["explanation"] == sq.data["explanation"].strip()
    for subset in subsets[2:] + [sq.answer]:  # every other subset, and the key itself: refused, never judged
        response = answer(env, "brute", "activations", sq.id, subset)
        assert response.status_code == 409 and "no attempts left (2 of 2 used)" in response.json()["error"]
    assert recorded(env["db"], "brute", sq.id) == 2
    listed = {
        q["id"]: q for q in api(env["url"], env["tokens"]["brute"], "GET", "/quizzes/activations").json()["questions"]
    }
    assert listed[sq.id]["attempts_left"] == 0 and listed[sq.id]["answered_correctly"] is False


def test_concurrent_answers_cannot_buy_extra_attempts(env: dict[str, Any]) -> None:
    sq = source_question("activations", "gelu-why")
    wrong = [c.id for c in sq.choices if c.id != sq.answer]
    results: list[int] = []

    def send(choice: str) -> None:
        results.append(answer(env, "race", "activations", sq.id, choice).status_code)

    threads = [threading.Thread(target=send, args=(wrong[i % len(wrong)],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # each is judged (200), refused as closed (409) or, while another of theirs is judged, refused unjudged (422)
    assert results.count(200) <= 2 and set(results) <= {200, 409, 422}
    assert recorded(env["db"], "race", sq.id) == results.count(200)


def test_after_the_due_date_a_wrong_answer_is_explained(env: dict[str, Any]) -> None:
    question = next(q for q in quiz_source("normalization").questions if q.kind == "single")
    wrong = next(c.id for c in question.choices if c.id != question.answer)
    late = answer(env, "late", "normalization", question.id, wrong).json()
    assert late["correct"] is False and late["attempts_left"] == 1
    assert late["explanation"] == question.data["explanation"].strip(), "past the due date: explained"
    early_q = source_question("activations", "gelu-why")
    early = answer(
        env, "early", "activations", early_q.id, next(c.id for c in early_q.choices if c.id != early_q.answer)
    ).json()
    assert early["explanation"] is None and early["attempts_left"] == 1


def test_a_right_answer_is_explained_and_closes_the_question(env: dict[str, Any]) -> None:
    sq = source_question("activations", "gelu-why")
    shown = right_answer("activations", sq, "choice", typed=True)
    right = answer(env, "choice", "activations", sq.id, shown, shown=True).json()
    assert right["correct"] is True and right["feedback"] == "Correct." and right["explanation"]
    again = answer(env, "choice", "activations", sq.id, shown, shown=True)
    assert again.status_code == 409 and "answered correctly already" in again.json()["error"]
    assert again.json()["correct"] is True and again.json()["explanation"] == right["explanation"], "it still counts"


def test_choices_are_shuffled_per_student() -> None:
    orders = {tuple(c.id for c in posed_for("activations", "gelu-why", f"s{i}").choices) for i in range(40)}
    assert len(orders) > 6, "students see the choices in different orders"


def test_a_hostile_answer_is_refused_in_one_line_and_others_are_answered(env: dict[str, Any]) -> None:
    crafted = "phi(" * 9 + "x" + ")" * 9  # 12-108 s of SymPy before the reader was bounded
    outcome: dict[str, Any] = {}

    def hostile() -> None:
        outcome["hostile"] = answer(env, "hostile", "activations", "gelu-definition", crafted)

    thread = threading.Thread(target=hostile)
    thread.start()
    other = api(env["url"], env["tokens"]["other"], "GET", "/quizzes/activations")
    thread.join()
    assert other.status_code == 200 and other.json()["student"] == "other"
    refused = outcome["hostile"]
    assert refused.status_code == 422 and "too complex to judge" in refused.json()["error"]
    assert "\n" not in refused.json()["error"] and recorded(env["db"], "hostile", "gelu-definition") == 0


# --- judging off the event loop, with a time budget -------------------------------------------------------

_started = multiprocessing.get_context("fork").Event()
_release = multiprocessing.get_context("fork").Event()


def _stuck_judge(posed: Any, raw: Any, shown: bool = False) -> Any:
    """A judge (or a preview) that never finishes on its own (in the judging child): it says it started, then
    hangs."""
    _started.set()
    _release.wait()
    while True:
        pass


def _dying_judge(posed: Any, raw: Any, shown: bool = False) -> Any:
    """A judge that says it started, waits to be released, then dies without an answer."""
    _started.set()
    _release.wait()
    os._exit(3)


@pytest.mark.parametrize("work, bounded", [("judge", "judge_bounded"), ("preview", "preview_bounded")])
def test_a_judge_that_never_ends_is_stopped_and_refused(
    monkeypatch: pytest.MonkeyPatch, work: str, bounded: str
) -> None:
    """The judge, and the live preview of an answer under the judge's bounds: killed after the time budget."""
    monkeypatch.setattr(judging, work, _stuck_judge)
    _release.set()
    posed = posed_for("activations", "gelu-why", "someone")
    with pytest.raises(judging.TooComplexError, match="too complex to judge in time"):
        getattr(judging, bounded)(posed, "a", seconds=0.5)
    assert not [p for p in multiprocessing.active_children() if p.is_alive()], "the judging process was killed"


def test_the_event_loop_answers_others_while_an_answer_is_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "course.db"
    tokens, _ = issue_tokens(db, ["slow", "fast"])
    config = app_lib.ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", quiz_dir=QUIZ_DIR)
    monkeypatch.setattr(judging, "judge", _dying_judge)
    _started.clear()
    _release.clear()
    order: list[str] = []
    with TestClient(web.create_app(config, run_collector=False)) as client:

        def slow() -> None:
            response = client.post(
                "/api/v1/quizzes/activations/answers",
                json={"question": "gelu-why", "answer": "a"},
                headers={"Authorization": f"Bearer {tokens['slow']}"},
            )
            order.append(f"slow {response.status_code} {response.json().get('error', '')}")

        thread = threading.Thread(target=slow)
        thread.start()
        assert _started.wait(60), "the answer is being judged"
        fast = client.get("/api/v1/quizzes", headers={"Authorization": f"Bearer {tokens['fast']}"})
        order.append(f"fast {fast.status_code}")
        _release.set()  # only now may the judge go on (it dies: the answer is refused, not judged)
        thread.join()
    assert order[0] == "fast 200", "another student was answered while the first answer was judged"
    assert order[1].startswith("slow 422") and "could not be judged" in order[1]


def test_judging_processes_are_bounded_in_number() -> None:
    """A flood of answers never forks more than JUDGES judging processes: the rest wait, then are refused."""
    posed = posed_for("activations", "gelu-why", "someone")
    taken = [judging._SLOTS.acquire(timeout=5) for _ in range(judging.JUDGES)]
    try:
        assert all(taken)
        with pytest.raises(judging.TooComplexError, match="every judge is busy"):
            judging.judge_bounded(posed, "a", seconds=0.2)
    finally:
        for _ in taken:
            judging._SLOTS.release()
    assert judging.judge_bounded(posed, "a").question_id == "gelu-why"


# --- bounds before judging: magnitude, digits, candidates; memory; one judge per student --------------------


@pytest.mark.parametrize(
    "answer", ["1234567890123", "9223372036854775808", "1e300", 1e300, 2**63, "1e300*2", "12345678.1234567891"]
)
def test_a_huge_numeric_answer_is_refused_before_any_judge_starts(monkeypatch: pytest.MonkeyPatch, answer: Any) -> None:
    def no_judge(*args: Any) -> Any:
        raise AssertionError("a judge was started")

    monkeypatch.setattr(judging, "_in_child", no_judge)
    questions = ["gelu-min-value", "sigmoid-max-derivative"]  # fixed: each key's bins counted
    questions += ["gelu-value"] if answer != "1234567890123" else []  # drawn: compared, no keys; numerals bounded
    for question in questions:
        posed = posed_for("activations", question, "hostile")
        for bounded in (judging.judge_bounded, judging.preview_bounded):
            with pytest.raises(quiz_lib.AnswerFormatError, match="too large") as refused:
                bounded(posed, answer)
            assert "\n" not in str(refused.value)


def test_a_modest_numeric_answer_is_judged_as_before() -> None:
    posed = posed_for("activations", "gelu-min-value", "someone")
    for answer in ("-0.17", "0.4629", "5/3", "1e-300", "-170e-3"):
        assert judging.judge_bounded(posed, answer).question_id == "gelu-min-value"


def test_an_expression_too_large_for_the_tolerance_is_refused_in_its_judge_at_once() -> None:
    posed = posed_for("activations", "gelu-min-value", "someone")  # tolerance 0.005: 1e12 has no usable bins
    with pytest.raises(quiz_lib.AnswerFormatError, match="too large to judge to this question's tolerance"):
        judging.judge_bounded(posed, "10^12", seconds=60)


def _hog(posed: Any, raw: Any, shown: bool = False) -> Any:
    """A judge that maps 4 GiB (untouched: without a memory limit it costs nothing and returns)."""
    import numpy as np

    return int(np.empty(4 * 1024**3, dtype=np.uint8).nbytes)


def test_a_judge_has_a_memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judging, "judge", _hog)
    posed = posed_for("activations", "gelu-why", "someone")
    with pytest.raises(quiz_lib.AnswerFormatError, match="too much memory"):
        judging.judge_bounded(posed, "a", seconds=60)


def test_one_student_holds_one_judge_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a student's answer is judged, their next one is refused at once (no attempt); others are judged."""
    monkeypatch.setattr(judging, "judge", _dying_judge)
    _started.clear()
    _release.clear()
    posed = posed_for("activations", "gelu-why", "hostile")
    outcome: dict[str, str] = {}

    def answer(student: str) -> None:
        try:
            judging.judge_bounded(posed, "a", seconds=60, who=student)
        except quiz_lib.AnswerFormatError as exc:
            outcome[student] = str(exc)

    threads = [threading.Thread(target=answer, args=("hostile",))]
    threads[0].start()
    try:
        assert _started.wait(60), "the first answer is being judged"
        with pytest.raises(judging.TooComplexError, match="your previous answer is still being judged"):
            judging.judge_bounded(posed, "a", seconds=60, who="hostile")
        threads.append(threading.Thread(target=answer, args=("other",)))
        threads[1].start()
    finally:
        _release.set()
        for thread in threads:
            thread.join()
    assert "could not be judged" in outcome["hostile"] and "could not be judged" in outcome["other"]
    assert not judging._HOLDERS
