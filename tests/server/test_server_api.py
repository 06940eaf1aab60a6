"""The course server's API without grading (no workers): tokens, ownership, uploads, policies, quizzes.

One server for the module (``--workers 0``: uploads stay queued, nothing is
graded, so these tests cost no CPU); each test uses its own students.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import tomllib

from grader.server import app as app_lib
from grader.course.solution import write_solution
from grader import quiz as quiz_lib
from server_util import (
    QUIZ_DIR,
    Server,
    api,
    issue_tokens,
    posed_for,
    quiz_source,
    reference_value,
    right_answer,
    solution_files,
    with_quiz_chapters,
)

STUDENTS = [
    "ann",
    "bob",
    "rate",
    "conc",
    "idem",
    "late",
    "quiz",
    "up",
    "keys",
    "para",
    "para2",
    "para3",
    "att",
    "retry",
]
PAST = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat(timespec="seconds").replace("+00:00", "Z")
COURSE = f"""
name = "API test course"
[rate_limit]
submissions = 3
per_minutes = 60
[[chapter]]
name = "linear"
due = {PAST}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("api")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, STUDENTS)
    course = root / "course.toml"
    course.write_text(with_quiz_chapters(COURSE), encoding="utf-8")
    folder = write_solution(root / "solution")
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=course).start()
    try:
        yield {"url": server.url, "tokens": tokens, "teacher": teacher, "db": db, "folder": folder, "server": server}
    finally:
        server.stop()


def upload(
    env: dict[str, Any],
    student: str,
    files: dict[str, str] | None = None,
    exercises: list[str] | None = None,
    key: str | None = None,
) -> Any:
    body = {
        "files": files
        if files is not None
        else solution_files(env["folder"], ["activations.py", "base.py", "__init__.py"]),
        "exercises": exercises if exercises is not None else ["activations.ReLU"],
    }
    headers = {"Idempotency-Key": key} if key else {}
    return api(env["url"], env["tokens"][student], "POST", "/submissions", json=body, headers=headers)


def job_count(db: Path, student: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE student = ?", [student]).fetchone()[0])
    finally:
        conn.close()


def one_line_error(response: Any, status: int, fragment: str) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert fragment in message and "\n" not in message


# --- tokens ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        (m, p.replace("{id}", "1").replace("{chapter}", "activations").replace("{student}", "ann"))
        for m, p, _, w in app_lib.API
        if w != "anyone"
    ],
)
def test_every_endpoint_refuses_missing_and_invalid_tokens(env: dict[str, Any], method: str, path: str) -> None:
    one_line_error(api(env["url"], None, method, path), 401, "run `grade login URL`")
    one_line_error(api(env["url"], "not-a-token", method, path), 401, "not valid")
    forged = env["tokens"]["ann"][:-2] + ("AA" if not env["tokens"]["ann"].endswith("AA") else "BB")
    one_line_error(api(env["url"], forged, method, path), 401, "not valid")


def test_the_health_needs_no_token_and_names_no_student(env: dict[str, Any]) -> None:
    doc = api(env["url"], None, "GET", "/health").json()
    assert set(doc) == {"ok", "selftest", "held", "unrecorded"} and set(doc["selftest"]) == {"cpu", "opencl"}
    assert doc["unrecorded"] == {"jobs": 0, "last_reason": None}
    assert "ann" not in str(doc)
    assert [w for _, p, _, w in app_lib.API if w == "anyone"] == ["anyone"]  # the one endpoint without a token


def test_tokens_are_stored_hashed(env: dict[str, Any]) -> None:
    conn = sqlite3.connect(env["db"])
    stored = [row[0] for row in conn.execute("SELECT hash FROM tokens")]
    conn.close()
    assert env["tokens"]["ann"] not in stored and all(len(h) == 64 for h in stored)


def test_me(env: dict[str, Any]) -> None:
    me = api(env["url"], env["tokens"]["ann"], "GET", "/me").json()
    assert me["student"] == "ann" and me["role"] == "student" and me["course"]["name"] == "API test course"


# --- a student reads only their own data, on every endpoint -------------------------------------------


def test_a_student_reads_only_their_own_data_on_every_endpoint(env: dict[str, Any]) -> None:
    url, ann, bob, teacher = env["url"], env["tokens"]["ann"], env["tokens"]["bob"], env["teacher"]
    ann_job = upload(env, "ann").json()["id"]
    bob_job = upload(env, "bob").json()["id"]
    bob_answer = api(url, bob, "POST", "/quizzes/activations/answers", json={"question": "gelu-why", "answer": "c"})
    assert bob_answer.status_code == 200 and bob_answer.json()["correct"] is True
    checked: set[tuple[str, str]] = set()

    def check(method: str, path: str) -> None:
        checked.add((method, path))

    # GET /me: oneself
    assert api(url, ann, "GET", "/me").json()["student"] == "ann"
    check("GET", "/me")
    # POST /submissions: the student comes from the token; a "student" field in the body is ignored
    doc = api(
        url,
        ann,
        "POST",
        "/submissions",
        json={
            "student": "bob",
            "files": solution_files(env["folder"], ["activations.py"]),
            "exercises": ["activations.ReLU"],
        },
    ).json()
    assert doc["student"] == "ann"
    check("POST", "/submissions")
    # GET /submissions: only one's own
    own = api(url, ann, "GET", "/submissions", params={"student": "bob"}).json()
    assert own["student"] == "ann" and {s["student"] for s in own["submissions"]} == {"ann"}
    assert ann_job in {s["id"] for s in own["submissions"]} and bob_job not in {s["id"] for s in own["submissions"]}
    check("GET", "/submissions")
    # GET /submissions/{id}: someone else's is "not found" (its existence is not revealed)
    assert api(url, ann, "GET", f"/submissions/{ann_job}").status_code == 200
    one_line_error(api(url, ann, "GET", f"/submissions/{bob_job}"), 404, f"no submission {bob_job} of yours")
    one_line_error(api(url, ann, "GET", "/submissions/999999"), 404, "no submission 999999 of yours")
    check("GET", "/submissions/{id}")
    # GET /progress: one's own
    assert api(url, ann, "GET", "/progress", params={"student": "bob"}).json()["student"] == "ann"
    check("GET", "/progress")
    # GET /quizzes: one's own standing (bob's correct answer does not show)
    quizzes = api(url, ann, "GET", "/quizzes").json()
    assert quizzes["student"] == "ann"
    assert next(c for c in quizzes["chapters"] if c["chapter"] == "activations")["attempts"] == 0
    check("GET", "/quizzes")
    # GET /quizzes/{chapter}: posed for the token's student; bob's correct answer does not show
    ann_quiz = api(url, ann, "GET", "/quizzes/activations", params={"student": "bob"}).json()
    assert ann_quiz["student"] == "ann" and ann_quiz["standing"]["attempts"] == 0
    assert not any(q["answered_correctly"] for q in ann_quiz["questions"])
    gelu_value = next(q for q in ann_quiz["questions"] if q["id"] == "gelu-value")
    assert gelu_value["prompt"] == posed_for("activations", "gelu-value", "ann").prompt
    check("GET", "/quizzes/{chapter}")
    # POST answers: recorded for the token's student only
    api(
        url, ann, "POST", "/quizzes/activations/answers", json={"student": "bob", "question": "gelu-why", "answer": "a"}
    )
    bob_standing = api(url, teacher, "GET", "/students/bob/quizzes").json()
    assert next(c for c in bob_standing["chapters"] if c["chapter"] == "activations")["attempts"] == 1
    check("POST", "/quizzes/{chapter}/answers")
    # instructor endpoints: 403 for a student, the named student's data for the instructor
    for path in ("/students", "/students/bob/submissions", "/students/bob/progress", "/students/bob/quizzes"):
        one_line_error(api(url, ann, "GET", path), 403, "instructor only")
    assert "bob" in {s["student"] for s in api(url, teacher, "GET", "/students").json()["students"]}
    assert {s["id"] for s in api(url, teacher, "GET", "/students/bob/submissions").json()["submissions"]} == {bob_job}
    assert api(url, teacher, "GET", "/students/bob/progress").json()["student"] == "bob"
    assert api(url, teacher, "GET", f"/submissions/{bob_job}").json()["student"] == "bob"
    for path in (
        "/students",
        "/students/{student}/submissions",
        "/students/{student}/progress",
        "/students/{student}/quizzes",
    ):
        check("GET", path)
    # regrade requests (grader/term/regrade.py): only about one's own uploads, only one's own listed, answered by the
    # instructor; extensions (grader/term/extensions.py): the instructor's
    one_line_error(
        api(url, ann, "POST", "/regrades", json={"exercise": "activations.ReLU", "reason": "x", "submission": bob_job}),
        404,
        f"submission {bob_job}",
    )
    check("POST", "/regrades")
    assert api(url, ann, "GET", "/regrades", params={"student": "bob"}).json()["requests"] == []
    check("GET", "/regrades")
    one_line_error(api(url, ann, "POST", "/regrades/1/answer", json={"reply": "x"}), 403, "instructor only")
    check("POST", "/regrades/{id}/answer")
    one_line_error(api(url, ann, "GET", "/extensions"), 403, "instructor only")
    check("GET", "/extensions")
    one_line_error(api(url, ann, "POST", "/roster/sync", json={}), 403, "instructor only")  # (the LMS's roster)
    assert api(url, teacher, "POST", "/roster/sync", json={}).json()["summary"] == "0 members in 0 course(s): no change"
    check("POST", "/roster/sync")
    one_line_error(api(url, ann, "POST", "/rescore", json={}), 403, "instructor only")  # (rescoring the course)
    check("POST", "/rescore")
    one_line_error(
        api(
            url,
            ann,
            "POST",
            "/extensions",
            json={"student": "ann", "chapter": "linear", "due": "2030-01-01T00:00Z", "reason": "x"},
        ),
        403,
        "instructor only",
    )
    check("POST", "/extensions")
    # GET /health: anyone's, and no student's data: counts and the self-test
    health = api(url, ann, "GET", "/health").json()
    assert "bob" not in str(health) and "ann" not in str(health)
    check("GET", "/health")
    assert checked == {(m, p) for m, p, _, _ in app_lib.API}, "a new endpoint needs its ownership check here"


# --- uploads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "../activations.py",
        "/etc/passwd",
        "kernels/../base.py",
        "sub/activations.py",
        "kernels\\x.cl",
        "activations.PY",
        "notes.txt",
        "kernels/relu.CL",
        "kernels/sub/x.cl",
        ".activations.py",
        "activations.py/",
        "kernels/.cl",
        "",
        "base.py\x00.cl",
    ],
)
def test_unknown_names_and_path_traversal_are_refused(env: dict[str, Any], name: str) -> None:
    before = job_count(env["db"], "up")
    response = upload(env, "up", files={name: "x = 1\n", "activations.py": "x = 2\n"})
    expected = "holds U+0000" if "\x00" in name else "is not an exercise file: upload only __init__.py, base.py"
    one_line_error(response, 400, expected)  # a NUL is refused with any other text that cannot be taken
    assert job_count(env["db"], "up") == before


def test_a_request_larger_than_the_cap_is_refused(env: dict[str, Any]) -> None:
    before = job_count(env["db"], "up")
    huge = {"activations.py": "#" * (2 * 1024 * 1024)}
    one_line_error(upload(env, "up", files=huge), 413, "at most 1048576 are accepted")
    big_file = {"activations.py": "#" * (300 * 1024)}
    one_line_error(upload(env, "up", files=big_file), 400, "files of at most 256 KiB")
    body = b'{"files": {"activations.py": "' + b"#" * (2 * 1024 * 1024) + b'"}}'

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    response = api(env["url"], env["tokens"]["up"], "POST", "/submissions", content=chunks())
    one_line_error(response, 413, "larger than 1048576 bytes")
    assert job_count(env["db"], "up") == before


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"files": {}}', "has no files"),
        (b'{"files": {"activations.py": 3}}', "must be text"),
        (b'{"files": {"activations.py": "x"}, "exercises": ["ReLUU"]}', "Did you mean"),
        (b'{"files": {"base.py": "x"}}', "holds no exercise file"),
    ],
)
def test_malformed_uploads_are_one_line_errors(env: dict[str, Any], body: bytes, fragment: str) -> None:
    response = api(env["url"], env["tokens"]["up"], "POST", "/submissions", content=body)
    one_line_error(response, 400, fragment)


def test_an_upload_is_stored_before_the_answer(env: dict[str, Any]) -> None:
    files = solution_files(env["folder"], ["activations.py", "base.py"])
    response = upload(env, "up", files=files)
    assert response.status_code == 202 and response.headers["location"].endswith(str(response.json()["id"]))
    conn = sqlite3.connect(env["db"])
    stored = dict(
        conn.execute(
            "SELECT f.name, COALESCE(b.content, f.content) FROM job_files f LEFT JOIN blobs b "
            "ON b.sha256 = f.sha256 WHERE f.job_id = ?",
            [response.json()["id"]],
        )
    )
    conn.close()
    assert {k: v.decode() for k, v in stored.items()} == files


def test_idempotent_retries_of_an_upload(env: dict[str, Any]) -> None:
    first = upload(env, "idem", key="retry-key-1")
    again = upload(env, "idem", key="retry-key-1")
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"] and again.json()["replayed"] is True
    assert job_count(env["db"], "idem") == 1
    other = upload(env, "idem", files={"activations.py": "changed = 1\n"}, key="retry-key-1")
    one_line_error(other, 409, "used for different files")
    assert job_count(env["db"], "idem") == 1


def test_rate_limit(env: dict[str, Any]) -> None:
    for n in range(3):
        assert upload(env, "rate", key=f"r{n}").status_code == 202
    refused = upload(env, "rate", key="r3")
    one_line_error(refused, 429, "3 submissions per 60 minutes; try again in")
    assert 1 <= int(refused.headers["retry-after"]) <= 3600
    assert upload(env, "rate", key="r0").status_code == 202  # a retry of an accepted upload is not a new one
    assert job_count(env["db"], "rate") == 3


def test_concurrent_submissions_of_one_student(env: dict[str, Any]) -> None:
    """Eight at once against a limit of 3: exactly 3 stored, the others refused, no error."""
    statuses: list[int] = []
    lock = threading.Lock()

    def send(n: int) -> None:
        response = upload(env, "conc", key=f"c{n}")
        with lock:
            statuses.append(response.status_code)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [202] * 3 + [429] * 5
    assert job_count(env["db"], "conc") == 3


def test_a_passed_deadline_is_refused_with_the_date(env: dict[str, Any]) -> None:
    files = solution_files(env["folder"], ["linear.py", "activations.py"])
    refused = upload(env, "late", files=files, exercises=["linear"])
    one_line_error(refused, 403, "chapter 'linear' closed at")
    everything = upload(env, "late", files=files, exercises=[])
    assert everything.status_code == 202 and "linear.Linear" not in everything.json()["exercises"]


def test_the_course_page(env: dict[str, Any]) -> None:
    import httpx

    page = httpx.get(env["url"] + "/", timeout=10)
    assert page.status_code == 200 and "API test course" in page.text and "linear" in page.text


# --- quizzes ------------------------------------------------------------------------------------------


def answer(
    env: dict[str, Any],
    student: str,
    question: str,
    raw: Any,
    shown: bool | str | None = None,
    chapter: str = "activations",
) -> Any:
    body: dict[str, Any] = {"question": question, "answer": raw}
    if shown is not None:
        body["shown"] = shown
    return api(env["url"], env["tokens"][student], "POST", f"/quizzes/{chapter}/answers", json=body)


def recorded(db: Path, student: str) -> list[tuple[str, str, int, str, int]]:
    """(question, answer, correct, params, first_try) of the student's recorded quiz answers, oldest first."""
    conn = sqlite3.connect(db)
    try:
        return [
            tuple(r)
            for r in conn.execute(
                "SELECT question, answer, correct, params, first_try FROM quiz_attempts WHERE student = ? ORDER BY id",
                [student],
            )
        ]
    finally:
        conn.close()


PUBLIC_FIELDS = {
    "id",
    "kind",
    "prompt",
    "choices",
    "params",
    "tolerance",
    "symbols",
    "points",
    "checkpoint",
    "attempts",
    "attempts_left",
    "answered_correctly",
}


@pytest.mark.parametrize("chapter", quiz_lib.CHAPTER_ORDER)
def test_quiz_questions_are_posed_for_the_student_and_come_without_keys(env: dict[str, Any], chapter: str) -> None:
    locked = json.loads((QUIZ_DIR / f"{chapter}.json").read_text(encoding="utf-8"))
    source = tomllib.loads((QUIZ_DIR / "source" / f"{chapter}.toml").read_text(encoding="utf-8"))
    response = api(env["url"], env["tokens"]["keys"], "GET", f"/quizzes/{chapter}")
    assert response.status_code == 200
    text = response.text
    for q in locked["questions"]:
        assert q.get("salt", "salt") not in text and all(d not in text for d in q.get("digests", []))
        assert q.get("reference", "reference") not in text
        explanation = posed_for(chapter, q["id"], "keys").explanation(0.0).split("{{")[0]
        assert q["explanation"] not in text and explanation[:40] not in text
    for word in ("salt", "digests", "explanation", "reference", "answer_range", '"answer"', "wrong"):
        assert word not in text, word
    doc = response.json()
    assert doc["student"] == "keys" and doc["chapter"] == chapter and doc["standing"]["chapter"] == chapter
    assert [q["id"] for q in doc["questions"]] == [q["id"] for q in source["questions"]]
    for q in doc["questions"]:
        assert set(q) == PUBLIC_FIELDS
        posed = posed_for(chapter, q["id"], "keys")
        assert q["prompt"] == posed.prompt and "{{" not in q["prompt"]
        assert [c["id"] for c in q["choices"]] == [c.id for c in posed.choices], "the student's own order"
        assert (q["params"] or {}) == posed.values
        assert q["attempts"] == posed.question.attempts and q["checkpoint"] == posed.question.checkpoint
        assert q["symbols"] == (sorted(set(posed.question.symbols.values())) or None)
        assert q["answered_correctly"] is False


def test_two_students_get_their_own_numbers(env: dict[str, Any]) -> None:
    docs = {s: api(env["url"], env["tokens"][s], "GET", "/quizzes/activations").json() for s in ("para", "para2")}
    for qid in ("gelu-value", "elu-value", "prelu-dalpha"):
        mine, theirs = ({q["id"]: q for q in docs[s]["questions"]}[qid] for s in ("para", "para2"))
        assert mine["params"] == posed_for("activations", qid, "para").values
        assert theirs["params"] == posed_for("activations", qid, "para2").values
    assert any(
        {q["id"]: q for q in docs["para"]["questions"]}[qid]["prompt"]
        != {q["id"]: q for q in docs["para2"]["questions"]}[qid]["prompt"]
        for qid in ("gelu-value", "elu-value", "prelu-dalpha")
    ), "two students see different numbers"
    again = api(env["url"], env["tokens"]["para"], "GET", "/quizzes/activations").json()
    assert again["questions"] == docs["para"]["questions"], "the same student always sees the same"


def test_a_parameterised_question_is_judged_with_the_students_own_numbers(env: dict[str, Any]) -> None:
    posed = posed_for("activations", "gelu-value", "para")
    other = posed_for("activations", "gelu-value", "para2")
    assert posed.values != other.values  # (else the wrong-numbers check below proves nothing)
    mine = reference_value("activations", "gelu-value", "para")
    theirs = reference_value("activations", "gelu-value", "para2")
    assert abs(mine - theirs) > posed.question.tolerance
    wrong = answer(env, "para2", "gelu-value", repr(mine))
    assert wrong.status_code == 200 and wrong.json()["correct"] is False, "another student's answer is wrong"
    right = answer(env, "para", "gelu-value", repr(mine)).json()
    assert right["correct"] is True and right["params"] == posed.values and right["first_try"] is True
    assert right["explanation"] == posed.explanation(mine) and f"{mine:.4f}" in right["explanation"]
    assert "{{" not in right["explanation"]
    x = posed.values["x"]
    one_line_error(
        answer(env, "para", "gelu-value", mine + 10 * posed.question.tolerance), 409, "answered correctly already"
    )
    rows = recorded(env["db"], "para")
    assert [(r[0], r[2], r[4]) for r in rows] == [("gelu-value", 1, 1)], "a closed question records nothing"
    assert all(json.loads(r[3]) == {"x": x} for r in rows), "the drawn numbers are recorded"
    assert json.loads(recorded(env["db"], "para2")[0][3]) == other.values
    # a formula in their own x is no answer to a parameterised question (issue 46): refused, no attempt spent
    one_line_error(
        answer(env, "para3", "gelu-value", "x/2*(1 + erf(x/sqrt(2)))"), 422, "write the number itself, not the formula"
    )
    assert recorded(env["db"], "para3") == []


def test_attempts_rule_unreadable_answers_and_first_try(env: dict[str, Any]) -> None:
    source = quiz_source("activations")
    sq = next(q for q in source.questions if q.id == "gelu-min-x")
    posed = posed_for("activations", "gelu-min-x", "att")
    assert posed.question.checkpoint and posed.question.attempts == 2
    first = answer(env, "att", "gelu-min-x", "0.5").json()
    assert (first["correct"], first["attempt"], first["attempts_left"], first["explanation"]) == (False, 1, 1, None)
    assert first["first_try"] is True
    unreadable = answer(env, "att", "gelu-min-x", "minus three quarters")
    one_line_error(unreadable, 422, "'minus three quarters' is not a number")
    second = answer(env, "att", "gelu-min-x", "0.5").json()
    assert (second["correct"], second["attempt"], second["attempts_left"]) == (False, 2, 0), "unreadable cost nothing"
    assert second["explanation"] == sq.data["explanation"].strip()
    one_line_error(answer(env, "att", "gelu-min-x", str(sq.answer)), 409, "no attempts left (2 of 2 used)")
    one_attempt = answer(env, "att", "gelu-min-value", "5").json()
    assert one_attempt["correct"] is False and one_attempt["attempts_left"] == 0 and one_attempt["explanation"]
    assert [(r[0], r[2], r[4]) for r in recorded(env["db"], "att")] == [
        ("gelu-min-x", 0, 1),
        ("gelu-min-x", 0, 0),
        ("gelu-min-value", 0, 1),
    ], "the unreadable answer and the answer after the last attempt were not recorded"
    quiz = {
        q["id"]: q for q in api(env["url"], env["tokens"]["att"], "GET", "/quizzes/activations").json()["questions"]
    }
    assert quiz["gelu-min-x"]["answered_correctly"] is False and quiz["gelu-min-x"]["attempts_left"] == 0
    assert quiz["gelu-min-value"]["answered_correctly"] is False


def test_choices_are_ids_or_the_numbers_shown(env: dict[str, Any]) -> None:
    order = [c.id for c in posed_for("activations", "dead-relu-cause", "keys").choices]
    key = (
        quiz_source("activations")
        .questions[[q.id for q in quiz_source("activations").questions].index("dead-relu-cause")]
        .answer
    )
    shown_number = str(order.index(key) + 1)
    one_line_error(
        answer(env, "keys", "dead-relu-cause", key, shown=True),
        422,
        f"'{key}' is not a choice: answer with 1-{len(order)}",
    )
    one_line_error(answer(env, "keys", "dead-relu-cause", "zz"), 422, "'zz' is not a choice")
    one_line_error(answer(env, "keys", "dead-relu-cause", key, shown="yes"), 400, "shown must be true")
    one_line_error(
        api(
            env["url"],
            env["tokens"]["keys"],
            "POST",
            "/quizzes/activations/answers",
            json={"question": "dead-relu-cause"},
        ),
        400,
        'no "answer"',
    )
    one_line_error(api(env["url"], env["tokens"]["keys"], "GET", "/quizzes/activatons"), 404, "not a quiz chapter")
    one_line_error(answer(env, "keys", "nope", 1), 400, "not a question of chapter")
    one_line_error(
        api(
            env["url"],
            env["teacher"],
            "POST",
            "/quizzes/activations/answers",
            json={"question": "dead-relu-cause", "answer": key},
        ),
        403,
        "cannot answer quizzes",
    )
    assert answer(env, "keys", "dead-relu-cause", shown_number, shown=True).json()["correct"] is True
    one_line_error(answer(env, "keys", "dead-relu-cause", key), 409, "answered correctly already")
    assert answer(env, "keys", "dead-relu-remedies", "a").json()["attempt"] == 1, "choice ids are read without shown"
    rows = recorded(env["db"], "keys")
    assert [(r[0], r[1], r[2]) for r in rows][0] == ("dead-relu-cause", key, 1) and len(rows) == 2


# --- the student's commands: login and one-line errors -----------------------------------------------------


def run_cli(*args: str, input: str | None = None) -> Any:
    from click.testing import CliRunner

    from grader.cli import cli

    return CliRunner().invoke(cli, list(args), input=input)


def test_login_checks_the_token_and_keeps_it_private(env: dict[str, Any], tmp_path: Path) -> None:
    import os

    from grader.student.client.connection import config_path, load_login

    bad = run_cli("login", env["url"], input="wrong-token\n")
    assert bad.exit_code == 2 and "the token is not valid" in bad.stderr and not config_path().exists()
    good = run_cli("login", env["url"], input=env["tokens"]["ann"] + "\n")
    assert good.exit_code == 0 and "as ann (student)" in good.stdout
    assert env["tokens"]["ann"] not in good.output  # the prompt does not echo it
    assert os.stat(config_path()).st_mode & 0o777 == 0o600
    login = load_login()
    assert login is not None and login.student == "ann" and login.token == env["tokens"]["ann"]
    assert run_cli("logout").exit_code == 0 and not config_path().exists()


def logged_in_as(env: dict[str, Any], student: str, url: str | None = None, token: str | None = None) -> None:
    from grader.student.client.connection import Login, save_login

    save_login(Login(url or env["url"], token or env["tokens"][student], student))


def test_one_line_errors_of_the_remote_commands(env: dict[str, Any], tmp_path: Path) -> None:
    folder = str(env["folder"])
    # the server is down (nothing listens on this port)
    from server_util import free_port

    logged_in_as(env, "late", url=f"http://127.0.0.1:{free_port()}")
    for args in (["submit", "--path", folder], ["progress"], ["quiz"]):
        down = run_cli(*args)
        assert down.exit_code == 2 and "cannot reach the course server" in down.stderr
        assert "the server may be down" in down.stderr and len(down.stderr.strip().splitlines()) == 1
    # a token that is no longer valid (revoked, expired)
    logged_in_as(env, "late", token="revoked-or-expired")
    expired = run_cli("progress")
    assert expired.exit_code == 2 and "run `grade login URL` again" in expired.stderr
    # a passed deadline
    logged_in_as(env, "late")
    closed = run_cli("submit", "linear", "--path", folder)
    assert closed.exit_code == 2 and "chapter 'linear' closed at" in closed.stderr
    assert len(closed.stderr.strip().splitlines()) == 1
    # a rate limit hit (the student `rate` used their 3 uploads in test_rate_limit, or uses them here)
    logged_in_as(env, "rate")
    for _ in range(4):
        limited = run_cli("submit", "activations.ReLU", "--path", folder, "--no-wait")
        if limited.exit_code == 2:
            break
    assert limited.exit_code == 2 and "rate limit reached" in limited.stderr and "try again in" in limited.stderr
    # --server that is not the saved login
    other = run_cli("progress", "--server", "http://127.0.0.1:1")
    assert other.exit_code == 2 and "you are not logged in to http://127.0.0.1:1" in other.stderr
    # not a normgrade server
    logged_in_as(env, "late", url=env["url"] + "/nothing-here")
    strange = run_cli("progress")
    assert strange.exit_code == 2 and strange.stderr.count("\n") == 1


def test_interactive_remote_quiz_reasks_unreadable_answers(env: dict[str, Any]) -> None:
    chapter = "dropout-weight-decay"
    source = quiz_source(chapter)
    first = source.questions[0]
    assert first.kind == "single"  # so "this is not an answer" is unreadable
    lines = ["this is not an answer"] + [right_answer(chapter, q, "quiz", typed=True) for q in source.questions]
    logged_in_as(env, "quiz")
    result = run_cli("quiz", chapter, input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    n = len(source.questions)
    out = result.stdout
    assert out.count("Correct.") == n and "Not this one." not in out
    posed = posed_for(chapter, first.id, "quiz")
    # each question shows its id (what --answers FILE names), as the local quiz does
    assert f"Q1/{n} {first.id} [checkpoint]: {posed.prompt}" in out or f"Q1/{n} {first.id}: {posed.prompt}" in out
    assert f"  1. {posed.choices[0].text}\n" in out, "choices in the student's own order"
    assert f"Error: 'this' is not a choice: answer with 1-{len(posed.choices)}\n" in out
    assert out.count("Error:") == 1, "the unreadable answer was asked again"
    param = next(q for q in source.questions if q.answer_range is not None)
    assert posed_for(chapter, param.id, "quiz").prompt in out, "the student's own numbers"
    assert (
        f"Explanation: {posed_for(chapter, param.id, 'quiz').explanation(reference_value(chapter, param.id, 'quiz'))}"
        in out
    )
    assert f"{chapter}: {n}/{n} correct" in out and f"Chapter {chapter} complete" in out
    standing = api(env["url"], env["tokens"]["quiz"], "GET", "/quizzes").json()
    chapter_row = next(c for c in standing["chapters"] if c["chapter"] == chapter)
    assert chapter_row["attempts"] == n  # and not recorded
    again = run_cli("quiz", chapter)
    assert again.exit_code == 0 and f"Every question of {chapter} is answered correctly already" in again.stdout


def test_remote_retry_asks_only_what_is_not_yet_right_and_gives_attempts(env: dict[str, Any]) -> None:
    chapter = "activations"
    source = quiz_source(chapter)
    last = next(q for q in reversed(source.questions) if q.data.get("checkpoint"))  # two attempts
    for q in source.questions:
        if q.id != last.id:
            assert answer(env, "retry", q.id, right_answer(chapter, q, "retry", typed=False)).json()["correct"]
    logged_in_as(env, "retry")
    posed = posed_for(chapter, last.id, "retry")
    wrong = next(str(i) for i, c in enumerate(posed.choices, 1) if c.id not in last.answer)
    n = len(source.questions)
    failed = run_cli("quiz", chapter, input=f"{wrong}\n{wrong}\n")
    assert failed.exit_code == 1, failed.output
    out = failed.stdout
    assert f"{n - 1} already answered correctly; asking the other 1." in out and re.search(
        r"Q1/1 [a-z0-9-]+ \[checkpoint\]: ", out
    )
    assert out.index("Not this one. 1 attempt left.") < out.index("Attempt 2 of 2")
    assert out.index("Attempt 2 of 2") < out.index("Not this one.\nExplanation: ")
    assert f"({n - 1} answered correctly before.)" in out and f"Chapter {chapter} not complete yet" in out
    again = run_cli("quiz", chapter, input=f"{right_answer(chapter, last, 'retry', typed=True)}\n")
    assert again.exit_code == 1 and f"1 question(s) of {chapter} have no attempts left" in again.stdout
    assert "nothing left to answer" in again.stdout, "attempts never reset: a new session does not ask again"
    rows = recorded(env["db"], "retry")
    assert [(r[2], r[4]) for r in rows if r[0] == last.id] == [(0, 1), (0, 0)]


def test_the_client_resends_a_lost_upload_with_the_same_key(env: dict[str, Any]) -> None:
    """The first request reaches the server but its answer is lost: the retry is the same submission."""
    import httpx

    from grader.student.client import connection as client_lib

    real = httpx.HTTPTransport()
    posts: list[str] = []

    class LosesFirstAnswer(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = real.handle_request(request)
            if request.method == "POST":
                posts.append(request.headers["idempotency-key"])
                if len(posts) == 1:
                    response.read()
                    response.close()
                    raise httpx.ReadError("connection reset after the server answered")
            return response

        def close(self) -> None:
            real.close()

    with client_lib.Client(env["url"], env["tokens"]["idem"], transport=LosesFirstAnswer()) as client:
        before = job_count(env["db"], "idem")
        done = client_lib.submit(client, env["folder"], ["activations.ReLU"], wait=False)
    assert len(posts) == 2 and posts[0] == posts[1]
    assert job_count(env["db"], "idem") == before + 1
    assert done.status in ("received", "queued")


def test_unexpected_failures_are_one_line_json() -> None:
    import asyncio

    from grader.student.errors import StoreError

    busy = asyncio.run(app_lib.server_error(None, StoreError("could not record (database is locked)")))  # type: ignore[arg-type]
    assert busy.status_code == 503 and json.loads(bytes(busy.body))["error"].startswith("the course database is busy")
    bug = asyncio.run(app_lib.server_error(None, KeyError("x")))  # type: ignore[arg-type]
    assert bug.status_code == 500 and "the server failed (KeyError)" in json.loads(bytes(bug.body))["error"]
