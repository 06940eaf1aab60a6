"""Grading through the server with the embedded queue (SqliteHuey): the report, kills, restarts, a corrupt database.

Each test grades one exercise (activations.ReLU, about half a second) so the
suite stays light on a shared 2-core machine; the kill tests use a submission
whose ReLU never returns, so that a job is certainly running when its worker
is killed.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from classgen import make_student
from grader.cli import cli
from grader.student.client.connection import Login, save_login
from grader.student.course import DEFAULT_COURSE
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.queue import records
from grader.course.solution import write_solution
from grader.student.store import Store
from server_util import Server, api, issue_tokens, kill_tree, solution_files, wait_for, wait_graded

RELU = ["activations.ReLU"]
UPLOAD = ["__init__.py", "base.py", "activations.py"]


def attempts_of(db: Path, student: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM attempts WHERE student = ?", [student]).fetchone()[0])
    finally:
        conn.close()


def submit(url: str, token: str, folder: Path, key: str | None = None) -> int:
    headers = {"Idempotency-Key": key} if key else {}
    response = api(
        url,
        token,
        "POST",
        "/submissions",
        json={"files": solution_files(folder, UPLOAD), "exercises": RELU},
        headers=headers,
    )
    assert response.status_code == 202, response.text
    return int(response.json()["id"])


# --- the student's commands against a server ---------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("graded")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, ["s1", "s2"])
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=1).start()
    try:
        yield {"root": root, "db": db, "url": server.url, "tokens": tokens, "teacher": teacher}
    finally:
        server.stop()


def logged_in(served: dict[str, Any], student: str, monkeypatch: pytest.MonkeyPatch) -> None:
    save_login(Login(served["url"], served["tokens"][student], student))


def test_remote_submit_prints_the_local_report_and_exit_status(
    served: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    folder = make_student(tmp_path / "partial", "partial")  # activations.py is the stub: ReLU is TODO
    runner = CliRunner()
    local_args = ["submit", "activations.ReLU", "--path", str(folder), "--student", "s1"]
    local_json = runner.invoke(cli, [*local_args, "--local", "--db", str(tmp_path / "own.db"), "--json"])
    local_text = runner.invoke(cli, [*local_args, "--local", "--db", str(tmp_path / "own.db")])
    logged_in(served, "s1", monkeypatch)
    remote_json = runner.invoke(cli, ["submit", "activations.ReLU", "--path", str(folder), "--json"])
    remote_text = runner.invoke(cli, ["submit", "activations.ReLU", "--path", str(folder)])
    assert local_json.exit_code == remote_json.exit_code == 1, remote_json.output
    assert json.loads(remote_json.stdout) == json.loads(local_json.stdout)
    assert json.loads(remote_json.stdout)["exercises"][0]["status"] == "not_implemented"
    assert remote_text.exit_code == 1 and remote_text.stdout == local_text.stdout
    assert attempts_of(served["db"], "s1") == 2

    correct = write_solution(tmp_path / "correct")
    full = runner.invoke(cli, ["submit", "activations.ReLU", "--path", str(correct)])
    assert full.exit_code == 0 and "PASS" in full.stdout
    queued = runner.invoke(cli, ["submit", "activations.ReLU", "--path", str(correct), "--no-wait", "--json"])
    assert queued.exit_code == 0 and json.loads(queued.stdout)["id"] > 0
    wait_graded(served["url"], served["tokens"]["s1"], json.loads(queued.stdout)["id"])

    progress = runner.invoke(cli, ["progress", "--json"])
    assert progress.exit_code == 0
    relu = next(
        e for c in json.loads(progress.stdout)["chapters"] for e in c["exercises"] if e["id"] == "activations.ReLU"
    )
    assert relu["best_score"] == 10.0 and relu["attempts"] == 4
    text = runner.invoke(cli, ["progress"])
    assert text.exit_code == 0 and "Progress of s1" in text.stdout
    local = runner.invoke(cli, ["progress", "--local", "--student", "s1", "--db", str(tmp_path / "own.db"), "--json"])
    assert json.loads(local.stdout)["student"] == "s1" and local.exit_code == 0


def test_a_long_poll_answers_when_the_job_closes(served: dict[str, Any], tmp_path: Path) -> None:
    import time

    token = served["tokens"]["s2"]
    job = submit(served["url"], token, write_solution(tmp_path / "good"))
    t0 = time.monotonic()
    doc = api(served["url"], token, "GET", f"/submissions/{job}", params={"wait": 30}).json()
    assert doc["status"] == "done" and doc["json"]["score"] == 10.0
    assert time.monotonic() - t0 < 25  # woken by the collector, not by the end of the wait
    bad = api(served["url"], token, "GET", f"/submissions/{job}", params={"wait": "soon"})
    assert bad.status_code == 400 and "wait must be a number" in bad.json()["error"]


def test_remote_quiz_from_an_answers_file(
    served: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server_util import posed_for, quiz_source, reference_value, right_answer

    logged_in(served, "s2", monkeypatch)
    source = quiz_source("activations")
    answers = {q.id: right_answer("activations", q, "s2", typed=False) for q in source.questions}
    params = {q.id for q in source.questions if q.answer_range is not None}
    assert params, "the chapter has parameterised questions"
    file = tmp_path / "answers.json"
    wrong = {**answers, "gelu-min-x": 0.5, "gelu-value": "not a number"}
    file.write_text(json.dumps(wrong), encoding="utf-8")
    first = CliRunner().invoke(cli, ["quiz", "activations", "--answers", str(file)])
    assert first.exit_code == 1, first.output
    n = len(source.questions)
    assert f"Q3/{n} gelu-min-x [checkpoint]: wrong\n  1 attempt(s) left:" in first.stdout, "no explanation yet"
    assert f"Q5/{n} gelu-value: wrong ('not a number' is not a number" in first.stdout
    elu = posed_for("activations", "elu-value", "s2")
    assert "  Your numbers: " + ", ".join(f"{k} = {v}" for k, v in elu.values.items()) in first.stdout
    assert "  Explanation: " + elu.explanation(reference_value("activations", "elu-value", "s2")) in first.stdout
    assert f"activations: {n - 2}/{n} correct" in first.stdout
    file.write_text(json.dumps(answers), encoding="utf-8")
    result = CliRunner().invoke(cli, ["quiz", "activations", "--answers", str(file), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["complete"] is True and doc["correct"] == doc["total"] == n and doc["student"] == "s2"
    rows = {q["id"]: q for q in doc["questions"]}
    assert all(rows[qid]["params"] == posed_for("activations", qid, "s2").values for qid in params)
    assert all(q["explanation"] for q in doc["questions"])
    listing = CliRunner().invoke(cli, ["quiz", "--json"])
    chapter = next(c for c in json.loads(listing.stdout)["chapters"] if c["chapter"] == "activations")
    assert chapter["complete"] is True
    text = CliRunner().invoke(cli, ["quiz"])
    assert text.exit_code == 0 and "Quizzes of s2" in text.stdout and "1 of 5 complete" in text.stdout
    conn = sqlite3.connect(served["db"])
    recorded = conn.execute("SELECT question, first_try FROM quiz_attempts WHERE student = 's2' ORDER BY id").fetchall()
    conn.close()
    assert len(recorded) == n + 1, "the unreadable answer was not recorded, closed questions were not judged again"
    assert [f for _, f in recorded[: n - 1]] == [1] * (n - 1)
    assert recorded[n - 1 :] == [("gelu-min-x", 0), ("gelu-value", 1)], "its first readable answer is its first try"
    file.write_text(json.dumps({"gelu-valeu": "a"}), encoding="utf-8")
    bad = CliRunner().invoke(cli, ["quiz", "activations", "--answers", str(file)])
    assert bad.exit_code == 2 and "is not a question of chapter 'activations'. Did you mean 'gelu-value'?" in bad.stderr


# --- kills ----------------------------------------------------------------------------------------------


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A server of its own (one worker), for tests that kill things."""
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["k1", "k2", "k3"])
    server = Server(db, f"sqlite:///{tmp_path / 'queue.db'}", workers=1)
    try:
        yield {"db": db, "server": server, "tokens": tokens, "teacher": teacher, "root": tmp_path}
    finally:
        server.stop()


def running_worker(url: str, token: str, job_id: int, attempt: int) -> int:
    """Wait until try ``attempt`` of a job is running; the pid of its worker."""

    def started() -> int | None:
        doc = api(url, token, "GET", f"/submissions/{job_id}").json()
        if doc["status"] == "running" and doc["tries"] == attempt and doc["worker"]:
            return int(doc["worker"].rsplit(":", 1)[1])
        return None

    return wait_for(started, 60, f"try {attempt} of submission {job_id} to run")


@pytest.mark.slow
def test_a_worker_killed_mid_job_is_retried_once_then_held_and_graded_once_after_a_self_test(
    fresh: dict[str, Any],
) -> None:
    server = fresh["server"].start()
    token = fresh["tokens"]["k1"]
    looping = make_student(fresh["root"] / "loop", "loop")  # ReLU.forward never returns
    job = submit(server.url, token, looping)
    first = running_worker(server.url, token, job, 1)
    kill_tree(first)
    second = running_worker(server.url, token, job, 2)
    assert second != first
    kill_tree(second)
    # killed on both tries (jobs.MAX_TRIES): held, not an error; the self-test it asks for passes, and it is
    # sent again and graded, once (its loop times out in the sandbox, as any loop does)
    final = wait_graded(server.url, token, job)
    assert final["status"] == "done" and final["tries"] == 3
    assert attempts_of(fresh["db"], "k1") == 1
    good = submit(server.url, token, write_solution(fresh["root"] / "good"))  # the worker pool recovered
    assert wait_graded(server.url, token, good)["status"] == "done"
    assert attempts_of(fresh["db"], "k1") == 2


@pytest.mark.slow
def test_a_worker_killed_once_is_retried_and_recorded_once(fresh: dict[str, Any]) -> None:
    server = fresh["server"].start()
    token = fresh["tokens"]["k2"]
    job = submit(server.url, token, make_student(fresh["root"] / "loop", "loop"))
    kill_tree(running_worker(server.url, token, job, 1))
    final = wait_graded(server.url, token, job)  # try 2 runs to the exercise's time limit
    assert final["status"] == "done" and final["tries"] == 2
    assert final["json"]["exercises"][0]["status"] == "timeout"
    assert attempts_of(fresh["db"], "k2") == 1


def test_server_killed_with_jobs_pending_loses_none_and_counts_each_once(fresh: dict[str, Any]) -> None:
    server = fresh["server"].start()
    folder = write_solution(fresh["root"] / "good")
    jobs = {student: submit(server.url, fresh["tokens"][student], folder) for student in ("k1", "k2")}
    server.kill()  # SIGKILL: no shutdown; its worker dies with it (whatever it was doing)
    # an upload stored just before a crash, never enqueued (the window between the row and the queue):
    with Store.open(fresh["db"]) as store:
        stored = records.create_job(
            store,
            "k3",
            "crash-window",
            solution_files(folder, UPLOAD),
            RELU,
            DEFAULT_COURSE,
            datetime.now(timezone.utc),
        )
    jobs["k3"] = int(stored.job["id"])
    server.start()
    for student, job in jobs.items():
        final = wait_graded(server.url, fresh["tokens"][student], job)
        assert final["status"] == "done", final
        assert final["json"]["score"] == 10.0
        assert attempts_of(fresh["db"], student) == 1


def test_a_result_is_recorded_once_however_often_it_is_collected(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        job = records.create_job(
            store, "ann", "k", {"activations.py": "x = 1\n"}, RELU, DEFAULT_COURSE, datetime.now(timezone.utc)
        ).job
        report = GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)])
        assert records.record_done(store, job, report, "v") is not None
        assert records.record_done(store, job, report, "v") is None
        assert len(store.attempts("ann")) == 1
        row = records.job(store, job["id"])
        assert row is not None and row["status"] == "done"


def test_a_job_begun_and_finished_between_two_collector_passes_still_names_its_worker(tmp_path: Path) -> None:
    """A fast job's lease and result can both arrive before the collector looks: the worker is still
    recorded (from the lease), not left empty (the collector used to note it only while running)."""
    from grader.queue.collector import Collector
    from grader.queue.jobs import lease_key, open_queue, task_id
    from grader.student.client.wire import report_to_dict

    db, url = tmp_path / "course.db", f"sqlite:///{tmp_path / 'queue.db'}"
    collector, queue = Collector(db, url, "v"), open_queue(url)
    with Store.open(db) as store:
        job_id = int(
            records.create_job(
                store, "ann", "k", {"activations.py": "x = 1\n"}, RELU, DEFAULT_COURSE, datetime.now(timezone.utc)
            ).job["id"]
        )
        collector.tick(store, queue)  # enqueued: queued
        tid = task_id(job_id, 1)
        queue.huey.put(lease_key(tid), {"host": "machine-b", "pid": 4242, "at": 0.0, "beat": 0})  # a worker elsewhere
        report = GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)])
        queue.huey.put(tid, {"ok": True, "report": report_to_dict(report)})
        collector.tick(store, queue)
        job = records.job(store, job_id)
        assert job is not None and job["status"] == "done" and job["worker"] == "machine-b:4242"
        assert len(store.attempts("ann")) == 1


# --- start-up ---------------------------------------------------------------------------------------------


def test_a_corrupt_database_at_start_up_is_reported_and_not_overwritten(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    with Store.open(db) as store:
        store.record_report(GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)]), "v")
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    for offset in range(4096, len(data), 7):
        data[offset] = (data[offset] * 31 + 17) % 256
    db.write_bytes(bytes(data))
    for leftover in (tmp_path / "course.db-wal", tmp_path / "course.db-shm"):
        leftover.unlink(missing_ok=True)
    before = db.read_bytes()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.cli",
            "serve",
            "--db",
            str(db),
            "--port",
            "0",
            "--workers",
            "0",
            "--queue",
            f"sqlite:///{tmp_path / 'queue.db'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a normgrade progress database (corrupt" in lines[0] and str(db) in lines[0]
    assert db.read_bytes() == before


def test_bad_course_file_and_queue_stop_grade_serve_with_one_line(tmp_path: Path) -> None:
    course = tmp_path / "course.toml"
    course.write_text('score = "highest"\n', encoding="utf-8")
    base = [sys.executable, "-m", "grader.cli", "serve", "--db", str(tmp_path / "c.db"), "--workers", "0"]
    bad_course = subprocess.run([*base, "--course", str(course)], capture_output=True, text=True, timeout=120)
    assert bad_course.returncode == 2 and "is not a rule" in bad_course.stderr
    assert len(bad_course.stderr.strip().splitlines()) == 1
    bad_queue = subprocess.run([*base, "--queue", "amqp://x"], capture_output=True, text=True, timeout=120)
    assert bad_queue.returncode == 2 and "is not a queue URL" in bad_queue.stderr


def test_a_port_in_use_stops_grade_serve_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "grader.cli",
                "serve",
                "--db",
                str(tmp_path / "c.db"),
                "--workers",
                "0",
                "--port",
                str(port),
                "--queue",
                f"sqlite:///{tmp_path / 'q.db'}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_worker_refuses_a_task_with_a_path_outside_its_folder(tmp_path: Path) -> None:
    from grader.queue.jobs import open_queue

    queue = open_queue(f"sqlite:///{tmp_path / 'queue.db'}")
    result = queue.task.call_local(1, 1, "ann", RELU, {"../escaped.py": "x = 1\n", "activations.py": "x = 2\n"})
    assert result["ok"] is False and "is not an exercise file" in result["error"]


@pytest.mark.slow
def test_a_try_past_the_job_timeout_is_retried_and_the_first_result_counts_once(fresh: dict[str, Any]) -> None:
    """A worker on another machine cannot be seen dying: a try that overruns --job-timeout is tried again."""
    server = fresh["server"]
    server.extra = ["--job-timeout", "2"]
    server.start()
    token = fresh["tokens"]["k1"]
    job = submit(server.url, token, make_student(fresh["root"] / "loop", "loop"))  # runs 10 s to its time limit

    def retried() -> dict[str, Any] | None:
        doc = api(server.url, token, "GET", f"/submissions/{job}").json()
        return doc if doc["tries"] == 2 else None

    wait_for(retried, 60, "the overrun try to be enqueued again")
    final = wait_graded(server.url, token, job)
    assert final["status"] == "done" and final["json"]["exercises"][0]["status"] == "timeout"
    assert attempts_of(fresh["db"], "k1") == 1
    good = submit(server.url, token, write_solution(fresh["root"] / "good"))  # the revoked try 2 is skipped
    assert wait_graded(server.url, token, good)["status"] == "done"
    assert attempts_of(fresh["db"], "k1") == 2


# --- what the client needs to say: late shares, closed chapters, no server path ----------------------------


def test_a_late_upload_says_what_share_counts_and_closed_chapters_are_listed(tmp_path: Path) -> None:
    from datetime import timedelta

    from grader.server.app import ServerConfig, job_json
    from grader.student.course import parse_course

    now = datetime.now(timezone.utc)
    course = parse_course(
        {
            "chapter": [
                {
                    "name": "activations",
                    "due": now - timedelta(days=1),
                    "late_penalty": 0.3,
                    "late_until": now + timedelta(days=1),
                },
                {"name": "linear", "due": now - timedelta(days=2)},
            ]
        },
        tmp_path / "course.toml",
    )
    config = ServerConfig(tmp_path / "course.db", "", course)
    with Store.open(tmp_path / "course.db") as store:
        job = records.create_job(store, "ann", "k", {"activations.py": "x = 1\n"}, RELU, course, now).job
        doc = job_json(store, job, config)
        assert doc["where"] == "queued" and doc["phase"] == "queued" and doc["max_tries"] == 2 and "late" not in doc
        assert [c["chapter"] for c in doc["closed_chapters"]] == ["linear"]
        assert "linear.Linear" in doc["closed_chapters"][0]["exercises"]
        report = GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)])
        records.record_done(store, job, report, "v")
        row = records.job(store, job["id"])
        assert row is not None
        doc = job_json(store, row, config)
        assert doc["late"] == [
            {
                "exercise": "activations.ReLU",
                "chapter": "activations",
                "score": 10.0,
                "max_score": 10.0,
                "counts": 0.7,
                "counted_score": 7.0,
                "due": (now - timedelta(days=1)).isoformat(timespec="minutes"),
            }
        ]
        on_time = job_json(store, row, ServerConfig(tmp_path / "c.db", ""))
        assert on_time["late"] == [] and on_time["closed_chapters"] == []


def test_a_report_from_the_worker_names_no_server_folder(tmp_path: Path) -> None:
    from grader.queue import jobs

    queue = jobs.open_queue(f"sqlite:///{tmp_path / 'queue.db'}")
    leaky = "class ReLU:\n    def __init__(self):\n        raise RuntimeError(__file__)\n"
    saved, jobs.SANDBOX = jobs.SANDBOX, False
    try:
        result = queue.task.call_local(10, 1, "ann", RELU, {"activations.py": leaky, "__init__.py": "", "base.py": ""})
    finally:
        jobs.SANDBOX = saved
    text = json.dumps(result)
    assert result["ok"] and "RuntimeError: activations.py" in text
    assert "normgrade-" not in text and "/tmp" not in text
    message = jobs.without_folder(
        "folder /tmp/normgrade-job10-x1/exercises has no base.py", Path("/tmp/normgrade-job10-x1")
    )
    assert message == "folder your exercises folder has no base.py"


def test_where_a_job_is_in_one_word_and_one_line() -> None:
    from grader.server.app import phase, where

    base = {
        "id": 7,
        "status": "queued",
        "tries": 1,
        "max_tries": 2,
        "queue_position": 3,
        "worker": None,
        "retry_reason": None,
        "error": None,
    }
    assert (phase(base), where(base)) == ("queued", "queued (3 ahead)")
    running = {**base, "status": "running", "worker": "vm:42", "queue_position": 0}
    assert (phase(running), where(running)) == ("running", "running on worker vm:42")
    retried = {
        **running,
        "tries": 2,
        "retry_reason": "try 1: the grading worker (process 41) stopped in the middle of the job",
    }
    assert phase(retried) == "retried"
    assert where(retried) == (
        "running on worker vm:42, try 2 of 2 (after try 1: the grading worker (process 41) "
        "stopped in the middle of the job)"
    )
    failed = {**base, "status": "error", "error": "grading took longer than 600 s, on each of 2 tries: submit again"}
    assert (phase(failed), where(failed)) == (
        "error",
        "not graded: grading took longer than 600 s, on each of 2 tries: submit again",
    )


def test_grade_serve_listens_on_the_port_of_the_courses_server_url(tmp_path: Path) -> None:
    """`grade serve --course` without --port: where [server] url says (the handout points there); an https url is
    a reverse proxy's, so the default; --port wins; a url with a bad port is a one-line error of the course file."""
    import httpx

    from grader.server.cli import DEFAULT_PORT, listen_port
    from server_util import free_port, stop_process, wait_for

    assert listen_port(None, "http://127.0.0.1:8123") == 8123
    assert listen_port(None, "http://grader.lan") == 80
    assert listen_port(None, "https://grader.example.edu") == DEFAULT_PORT
    assert listen_port(None, None) == DEFAULT_PORT
    assert listen_port(9000, "http://127.0.0.1:8123") == 9000
    port = free_port()
    course = tmp_path / "course.toml"
    course.write_text(f'[server]\nurl = "http://127.0.0.1:{port}"\n', encoding="utf-8")
    log = tmp_path / "serve.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "grader.cli",
                "serve",
                "--course",
                str(course),
                "--db",
                str(tmp_path / "c.db"),
                "--workers",
                "0",
                "--queue",
                f"sqlite:///{tmp_path / 'q.db'}",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def up() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, 60, "grade serve to answer on the course's port", interval=0.1)
        assert f"students reach it at http://127.0.0.1:{port}" in log.read_text()
    finally:
        stop_process(proc)
    course.write_text('[server]\nurl = "http://127.0.0.1:99999"\n', encoding="utf-8")
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.cli",
            "serve",
            "--course",
            str(course),
            "--db",
            str(tmp_path / "c.db"),
            "--workers",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "has no valid port" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_an_overflowing_upload_is_recorded_and_the_next_upload_is_graded(
    served: dict[str, Any], tmp_path: Path
) -> None:
    """The upload whose GELU.forward returns ``x * 1e308 * 10`` once stopped all grading (its figures held inf):
    it is recorded with its non-finite values, and the correct upload after it is graded too."""
    from test_cli_submit import overflowing_gelu

    token = served["tokens"]["s1"]
    gelu = ["activations.GELU"]
    bad = api(
        served["url"],
        token,
        "POST",
        "/submissions",
        json={"files": solution_files(overflowing_gelu(tmp_path / "overflow"), UPLOAD), "exercises": gelu},
    )
    good = api(
        served["url"],
        token,
        "POST",
        "/submissions",
        json={"files": solution_files(write_solution(tmp_path / "good"), UPLOAD), "exercises": gelu},
    )
    assert bad.status_code == good.status_code == 202, (bad.text, good.text)
    second = wait_graded(served["url"], token, int(good.json()["id"]))
    assert second["status"] == "done" and second["json"]["score"] == 10.0
    first = wait_graded(served["url"], token, int(bad.json()["id"]))
    assert first["status"] == "done" and first["json"]["score"] == 0.0
    messages = [c["message"] for c in first["json"]["exercises"][0]["checks"]]
    assert any("values are nan or inf: " in m for m in messages)
    health = httpx.get(served["url"] + "/api/v1/health", timeout=30).json()
    assert health["unrecorded"] == {"jobs": 0, "last_reason": None}
