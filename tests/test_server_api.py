"""The course server's API without grading (no workers): tokens, ownership, uploads, policies, quizzes.

One server for the module (``--workers 0``: uploads stay queued, nothing is
graded, so these tests cost no CPU); each test uses its own students.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import tomllib

from grader.server import app as app_lib
from grader.solution import write_solution
from server_util import Server, api, issue_tokens, solution_files

STUDENTS = ["ann", "bob", "rate", "conc", "idem", "late", "quiz", "up"]
PAST = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat(timespec="seconds").replace("+00:00", "Z")
COURSE = f'''
name = "API test course"
[rate_limit]
submissions = 3
per_minutes = 60
[[chapter]]
name = "linear"
due = {PAST}
'''


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("api")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, STUDENTS)
    course = root / "course.toml"
    course.write_text(COURSE, encoding="utf-8")
    folder = write_solution(root / "solution")
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=course).start()
    try:
        yield {"url": server.url, "tokens": tokens, "teacher": teacher, "db": db, "folder": folder, "server": server}
    finally:
        server.stop()


def upload(env: dict[str, Any], student: str, files: dict[str, str] | None = None,
           exercises: list[str] | None = None, key: str | None = None) -> Any:
    body = {"files": files if files is not None else solution_files(env["folder"], ["activations.py", "base.py", "__init__.py"]),
            "exercises": exercises if exercises is not None else ["activations.ReLU"]}
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


@pytest.mark.parametrize("method, path", [(m, p.replace("{id:int}", "1").replace("{chapter}", "activations")
                                          .replace("{student}", "ann")) for m, p, _, _ in app_lib.API])
def test_every_endpoint_refuses_missing_and_invalid_tokens(env: dict[str, Any], method: str, path: str) -> None:
    one_line_error(api(env["url"], None, method, path), 401, "run `grade login URL`")
    one_line_error(api(env["url"], "not-a-token", method, path), 401, "not valid")
    forged = env["tokens"]["ann"][:-2] + ("AA" if not env["tokens"]["ann"].endswith("AA") else "BB")
    one_line_error(api(env["url"], forged, method, path), 401, "not valid")


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
    bob_answer = api(url, bob, "POST", "/quizzes/activations/answers", json={"question": "gelu-why", "answer": "b"})
    assert bob_answer.status_code == 200 and bob_answer.json()["correct"] is True
    checked: set[tuple[str, str]] = set()

    def check(method: str, path: str) -> None:
        checked.add((method, path))

    # GET /me: oneself
    assert api(url, ann, "GET", "/me").json()["student"] == "ann"
    check("GET", "/me")
    # POST /submissions: the student comes from the token; a "student" field in the body is ignored
    doc = api(url, ann, "POST", "/submissions", json={
        "student": "bob", "files": solution_files(env["folder"], ["activations.py"]), "exercises": ["activations.ReLU"],
    }).json()
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
    check("GET", "/submissions/{id:int}")
    # GET /progress: one's own
    assert api(url, ann, "GET", "/progress", params={"student": "bob"}).json()["student"] == "ann"
    check("GET", "/progress")
    # GET /quizzes: one's own standing (bob's correct answer does not show)
    quizzes = api(url, ann, "GET", "/quizzes").json()
    assert quizzes["student"] == "ann"
    assert next(c for c in quizzes["chapters"] if c["chapter"] == "activations")["attempts"] == 0
    check("GET", "/quizzes")
    # GET /quizzes/{chapter}: the same public questions for everyone
    assert api(url, ann, "GET", "/quizzes/activations").status_code == 200
    check("GET", "/quizzes/{chapter}")
    # POST answers: recorded for the token's student only
    api(url, ann, "POST", "/quizzes/activations/answers", json={"student": "bob", "question": "gelu-why", "answer": "a"})
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
    for path in ("/students", "/students/{student}/submissions", "/students/{student}/progress",
                 "/students/{student}/quizzes"):
        check("GET", path)
    assert checked == {(m, p) for m, p, _, _ in app_lib.API}, "a new endpoint needs its ownership check here"


# --- uploads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "../activations.py", "/etc/passwd", "kernels/../base.py", "sub/activations.py", "kernels\\x.cl",
    "activations.PY", "notes.txt", "kernels/relu.CL", "kernels/sub/x.cl", ".activations.py", "activations.py/",
    "kernels/.cl", "", "base.py\x00.cl",
])
def test_unknown_names_and_path_traversal_are_refused(env: dict[str, Any], name: str) -> None:
    before = job_count(env["db"], "up")
    response = upload(env, "up", files={name: "x = 1\n", "activations.py": "x = 2\n"})
    one_line_error(response, 400, "is not an exercise file: upload only __init__.py, base.py")
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
            yield body[start:start + 65536]

    response = api(env["url"], env["tokens"]["up"], "POST", "/submissions", content=chunks())
    one_line_error(response, 413, "larger than 1048576 bytes")
    assert job_count(env["db"], "up") == before


@pytest.mark.parametrize("body, fragment", [
    (b"not json", "not JSON"), (b"[1, 2]", "must be a JSON object"), (b'{"files": {}}', "has no files"),
    (b'{"files": {"activations.py": 3}}', "must be text"),
    (b'{"files": {"activations.py": "x"}, "exercises": ["ReLUU"]}', "Did you mean"),
    (b'{"files": {"base.py": "x"}}', "holds no exercise file"),
])
def test_malformed_uploads_are_one_line_errors(env: dict[str, Any], body: bytes, fragment: str) -> None:
    response = api(env["url"], env["tokens"]["up"], "POST", "/submissions", content=body)
    one_line_error(response, 400, fragment)


def test_an_upload_is_stored_before_the_answer(env: dict[str, Any]) -> None:
    files = solution_files(env["folder"], ["activations.py", "base.py"])
    response = upload(env, "up", files=files)
    assert response.status_code == 202 and response.headers["location"].endswith(str(response.json()["id"]))
    conn = sqlite3.connect(env["db"])
    stored = dict(conn.execute("SELECT name, content FROM job_files WHERE job_id = ?", [response.json()["id"]]))
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
    one_line_error(refused, 403, "the deadline of chapter 'linear' (linear.Linear) passed at")
    everything = upload(env, "late", files=files, exercises=[])
    assert everything.status_code == 202 and "linear.Linear" not in everything.json()["exercises"]


def test_the_course_page(env: dict[str, Any]) -> None:
    import httpx

    page = httpx.get(env["url"] + "/", timeout=10)
    assert page.status_code == 200 and "API test course" in page.text and "linear" in page.text


# --- quizzes ------------------------------------------------------------------------------------------


def test_quiz_questions_come_without_keys_and_answers_are_judged_on_the_server(env: dict[str, Any]) -> None:
    url, token = env["url"], env["tokens"]["quiz"]
    repo = Path(__file__).resolve().parent.parent
    locked = json.loads((repo / "quizzes" / "activations.json").read_text(encoding="utf-8"))
    source = tomllib.loads((repo / "quizzes" / "source" / "activations.toml").read_text(encoding="utf-8"))
    response = api(url, token, "GET", "/quizzes/activations")
    text = response.text
    for q in locked["questions"]:
        assert q["salt"] not in text and all(d not in text for d in q["digests"])
        assert q["explanation"] not in text
    assert "salt" not in text and "digests" not in text and "explanation" not in text
    first = source["questions"][0]
    right = api(url, token, "POST", "/quizzes/activations/answers", json={"question": first["id"], "answer": first["answer"]})
    assert right.status_code == 200 and right.json()["correct"] is True
    assert right.json()["explanation"] == first["explanation"]
    wrong = api(url, token, "POST", "/quizzes/activations/answers", json={"question": first["id"], "answer": "a"})
    assert wrong.json()["correct"] is False
    unreadable = api(url, token, "POST", "/quizzes/activations/answers", json={"question": first["id"], "answer": "zz"})
    one_line_error(unreadable, 422, "answer with the number of one choice")
    standing = next(c for c in api(url, token, "GET", "/quizzes").json()["chapters"] if c["chapter"] == "activations")
    assert standing["attempts"] == 2  # the unreadable answer was not recorded
    one_line_error(api(url, token, "GET", "/quizzes/activatons"), 404, "not a quiz chapter")
    one_line_error(api(url, token, "POST", "/quizzes/activations/answers", json={"question": "nope", "answer": 1}),
                   400, "not a question of chapter")


# --- the student's commands: login and one-line errors -----------------------------------------------------


def run_cli(*args: str, input: str | None = None) -> Any:
    from click.testing import CliRunner

    from grader.cli import cli

    return CliRunner().invoke(cli, list(args), input=input)


def test_login_checks_the_token_and_keeps_it_private(env: dict[str, Any], tmp_path: Path) -> None:
    import os

    from grader.client import config_path, load_login

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
    from grader.client import Login, save_login

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
    assert closed.exit_code == 2 and "the deadline of chapter 'linear'" in closed.stderr
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
    repo = Path(__file__).resolve().parent.parent
    source = tomllib.loads((repo / "quizzes" / "source" / "dropout-weight-decay.toml").read_text(encoding="utf-8"))

    def typed(q: dict[str, Any]) -> str:
        answer = q["answer"]
        if isinstance(answer, list):
            return answer[0] if q["kind"] == "short" else ",".join(answer)
        return str(answer)

    assert source["questions"][0]["kind"] == "single"  # so "this is not an answer" is unreadable
    lines = ["this is not an answer"] + [typed(q) for q in source["questions"]]
    logged_in_as(env, "quiz")
    result = run_cli("quiz", "dropout-weight-decay", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("Correct.") == len(source["questions"])
    assert "Explanation:" in result.stdout and "Chapter dropout-weight-decay complete" in result.stdout
    assert result.stderr.count("Error:") == 1  # the unreadable answer was asked again
    standing = api(env["url"], env["tokens"]["quiz"], "GET", "/quizzes").json()
    chapter = next(c for c in standing["chapters"] if c["chapter"] == "dropout-weight-decay")
    assert chapter["attempts"] == len(source["questions"])  # and not recorded


def test_the_client_resends_a_lost_upload_with_the_same_key(env: dict[str, Any]) -> None:
    """The first request reaches the server but its answer is lost: the retry is the same submission."""
    import httpx

    from grader import client as client_lib

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
    assert busy.status_code == 503 and json.loads(busy.body)["error"].startswith("the course database is busy")
    bug = asyncio.run(app_lib.server_error(None, KeyError("x")))  # type: ignore[arg-type]
    assert bug.status_code == 500 and "the server failed (KeyError)" in json.loads(bug.body)["error"]
