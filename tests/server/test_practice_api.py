"""The practice loop on the course server (grader/server/practice_api.py), over HTTP in-process, time injected:
a student's mistakes are offered as practice instances, answers are reviews (no quiz attempt spent), the
concept comes back on schedule and is mastered after two clean retrievals; a question still open for grading is
never practised; the handout's review log merges with the server's on login (their union, replayed: no review
lost, a second merge changes nothing, a forged review refused); `grade practice` and `grade progress` ask the
server."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader.server import app as api
from grader.server import practice_api
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.student import practice_schedule as ps
from grader.student.client import remote
from grader.student.client.connection import Client, Login
from grader.student.course import load_course
from grader.student.quiz.posing import PRACTICE_STUDENT
from grader.student.store import Store
from server_util import quiz_source, right_answer
from student_pages_util import NOW, seed

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

CONCEPT = "init.variance-vs-std"  # ada's init-kaiming-variance-as-std (tests/student_pages_util.py)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Env:
    def __init__(self, client: TestClient, tokens: dict[str, str], teacher: str, db: Path, clock: Clock) -> None:
        self.client, self.tokens, self.teacher, self.db, self.clock = client, tokens, teacher, db, clock

    def api(self, who: str, method: str, path: str, **kwargs: Any) -> Any:
        token = self.teacher if who == "teacher" else self.tokens[who]
        return self.client.request(method, "/api/v1" + path, headers={"Authorization": f"Bearer {token}"}, **kwargs)

    def item(self, concept: str = CONCEPT) -> dict[str, Any]:
        doc = self.api("ada", "GET", "/practice").json()
        return next(i for i in doc["practise"] if i["concept"] == concept)

    def answer(self, question: str, right: bool, concept: str = CONCEPT) -> Any:
        chapter, _, qid = question.partition("/")
        source = next(q for q in quiz_source(chapter).questions if q.id == qid)
        typed = right_answer(chapter, source, PRACTICE_STUDENT, typed=True) if right else "12345.6"
        return self.api(
            "ada",
            "POST",
            "/practice/answers",
            json={"concept": concept, "question": question, "answer": str(typed), "shown": True},
        )


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    seeded = seed(tmp_path)
    clock = Clock()
    monkeypatch.setattr(api, "now_utc", clock)
    config = ServerConfig(seeded.db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(seeded.course))
    with TestClient(create_app(config, run_collector=False), base_url="http://127.0.0.1") as client:
        yield Env(client, seeded.tokens, seeded.teacher, seeded.db, clock)


def test_a_mistake_is_practised_on_schedule_without_spending_attempts_and_mastered(env: Env) -> None:
    attempts_before = env.api("ada", "GET", "/quizzes/initialisation").json()["standing"]
    item = env.item()
    assert item["question"]["id"] == "initialisation/xavier-uniform-a"  # a parameterised one: its practice numbers
    assert item["sections"] == ["initialisation.variance-propagation"]
    axes = env.item("normalization.axes")  # its questions have one key for everyone, still open for grading
    assert axes["question"] is None

    wrong = env.answer("initialisation/xavier-uniform-a", right=False)
    assert wrong.status_code == 200 and wrong.json()["correct"] is False and wrong.json()["explanation"]
    missed = ps.Entry(CONCEPT, {}, datetime.fromisoformat(wrong.json()["entry"]["due"]))
    assert missed.due.date() == (NOW + timedelta(days=1)).date() and wrong.json()["entry"]["streak"] == 0
    assert env.api("ada", "GET", "/quizzes/initialisation").json()["standing"] == attempts_before  # no attempt

    env.clock.now = missed.due  # the next day: due
    doc = env.api("ada", "GET", "/practice").json()
    assert [d["concept"] for d in doc["due"]] == [CONCEPT]
    first = env.answer(env.item()["question"]["id"], right=True).json()
    assert first["correct"] and first["entry"]["streak"] == 1 and not first["entry"]["mastered"]
    assert all(i["concept"] != CONCEPT for i in env.api("ada", "GET", "/practice").json()["practise"])

    env.clock.now = datetime.fromisoformat(first["entry"]["due"])  # back on its due date, another question
    question = env.item()["question"]["id"]
    assert question == "initialisation/kaiming-uniform-b"
    second = env.answer(question, right=True).json()
    assert second["entry"]["mastered"]
    env.clock.now += timedelta(days=90)
    assert all(i["concept"] != CONCEPT for i in env.api("ada", "GET", "/practice").json()["practise"])


def test_practice_never_judges_a_question_open_for_grading_or_a_bad_request(env: Env) -> None:
    open_question = env.api(
        "ada",
        "POST",
        "/practice/answers",
        json={"concept": "normalization.axes", "question": "normalization/norm-axes-instance", "answer": "1"},
    )
    assert open_question.status_code == 400 and "open for grading" in open_question.json()["error"]
    for body in (
        {"concept": "no.such", "question": "initialisation/xavier-uniform-a", "answer": "1"},
        {"concept": CONCEPT, "question": "activations/gelu-value", "answer": "1"},
        {"concept": CONCEPT, "answer": "1"},
        {"concept": CONCEPT, "question": "x", "answer": 1, "shown": 2},
    ):
        refused = env.api("ada", "POST", "/practice/answers", json=body)
        assert refused.status_code == 400 and "\n" not in refused.json()["error"], body
    unreadable = env.api(
        "ada",
        "POST",
        "/practice/answers",
        json={
            "concept": CONCEPT,
            "question": "initialisation/xavier-uniform-a",
            "answer": "not a number ((",
            "shown": True,
        },
    )
    assert unreadable.status_code == 422
    with Store.open(env.db) as store:
        assert store.practice_entries("ada") == []  # nothing refused was a review
    assert env.api("teacher", "GET", "/practice").status_code == 403


def test_an_offline_review_and_a_server_review_of_one_concept_both_survive_a_login(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    login = Login("http://127.0.0.1", env.tokens["ada"], "ada")
    monkeypatch.setattr(remote, "_client", lambda _: Client(login.server, login.token, transport=env.client._transport))
    local_db = tmp_path / "local" / "progress.db"
    local_db.parent.mkdir()
    yesterday = NOW - timedelta(days=1)
    with Store.open(local_db) as store:  # offline yesterday, on this machine: a miss
        ps.record_practice(
            store, "ada-laptop", CONCEPT, False, yesterday, question="initialisation/xavier-uniform-a", origin="local"
        )
    env.answer("initialisation/xavier-uniform-a", right=True)  # on the server now: a clean retrieval

    def kept() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        with Store.open(env.db) as server, Store.open(local_db) as local:
            return (
                server.practice_reviews("ada"),
                server.practice_entries("ada"),
                local.practice_reviews("ada"),
                local.practice_entries("ada"),
            )

    assert remote.merge_schedule(login, local_db, "ada-laptop") == 1
    server_log, server_rows, local_log, local_rows = kept()
    assert [(r["origin"], r["rating"]) for r in server_log] == [("local", "again"), ("server", "good")]
    assert local_log == server_log and local_rows == server_rows  # both sides keep the union
    (entry,) = [ps.from_row(r) for r in server_rows]
    assert entry == ps.replay(CONCEPT, [ps.review_from_row(r) for r in server_log])
    assert entry == ps.retrieved(ps.missed(None, CONCEPT, yesterday), True, NOW)  # the two, in time order
    before = kept()
    assert remote.merge_schedule(login, local_db, "ada-laptop") == 1  # merging twice changes nothing
    assert remote.merge_schedule(login, local_db, "ada") == 1  # nor does sending the union back
    assert kept() == before


def test_a_forged_or_malformed_review_is_refused_in_one_line(env: Env) -> None:
    env.answer("initialisation/xavier-uniform-a", right=True)
    with Store.open(env.db) as store:
        (held,) = store.practice_reviews("ada")
        schedule_before = store.practice_entries("ada")

    def offline(**change: Any) -> dict[str, Any]:  # a review made on the handout an hour ago (a fresh id)
        return {
            **ps.review_row(
                ps.new_review(CONCEPT, "initialisation/xavier-uniform-a", False, NOW - timedelta(hours=1), "local")
            ),
            **change,
        }

    first = offline()
    for bad, why in (
        (held, "made on the server"),  # the server's own review sent back: only offline ones are sent
        ({**held, "origin": "local", "rating": "again"}, "differs"),  # a kept review's id, altered
        ({**first, "rating": "good"}, "differs"),  # one id twice in the body, different contents
        (offline(concept="no.such"), "no concept"),
        (offline(question="activations/gelu-value"), "not of its concept"),
        (offline(reviewed_at=(NOW + timedelta(days=2)).isoformat()), "after now"),
        (offline(reviewed_at="2026-03-02T10:00:00"), "zone"),
        (offline(rating="easy"), "rating"),
        (offline(id="1"), "32 hex"),
        (offline(extra=1), "exactly"),
        ("a row", "exactly"),
    ):
        refused = env.api("ada", "POST", "/practice/schedule", json={"reviews": [first, bad]})
        assert refused.status_code == 400 and why in refused.json()["error"], (bad, refused.json())
        assert "\n" not in refused.json()["error"]
    for body in ({"reviews": "x"}, {"reviews": [first] * (practice_api.MAX_REVIEWS + 1)}):
        refused = env.api("ada", "POST", "/practice/schedule", json=body)
        assert refused.status_code == 400 and "at most" in refused.json()["error"]
    with Store.open(env.db) as store:  # nothing of a refused merge was kept
        assert store.practice_reviews("ada") == [held] and store.practice_entries("ada") == schedule_before
    accepted = env.api("ada", "POST", "/practice/schedule", json={"reviews": [first, first]})
    assert accepted.status_code == 200 and [r["id"] for r in accepted.json()["reviews"]] == [first["id"], held["id"]]


def test_entries_kept_before_the_review_log_merge_the_later_review_wins(env: Env) -> None:
    older = ps.missed(None, CONCEPT, NOW - timedelta(days=3))
    with Store.open(env.db) as store:
        store.save_practice_entries("ada", [ps.to_row(ps.missed(None, "optim.adamw", NOW - timedelta(days=2)))])
    env.answer("initialisation/xavier-uniform-a", right=True)  # the server's review of CONCEPT: now
    local = [older, ps.missed(None, "optim.sgd", NOW - timedelta(days=1))]
    merged = env.api("ada", "POST", "/practice/schedule", json={"entries": [ps.to_row(e) for e in local]})
    assert merged.status_code == 200
    rows = {r["concept"]: ps.from_row(r) for r in merged.json()["entries"]}
    assert set(rows) == {CONCEPT, "optim.adamw", "optim.sgd"}
    assert rows[CONCEPT].streak == 1 and rows[CONCEPT].reviewed == NOW  # the server's later review won
    assert rows["optim.sgd"] == local[1]
    with Store.open(env.db) as store:
        assert {r["concept"] for r in store.practice_entries("ada")} == set(rows)
    for bad in (
        {"entries": "x"},
        {"entries": [{"concept": CONCEPT}]},
        {"entries": [{**ps.to_row(older), "concept": "no.such"}]},
        {"entries": [{**ps.to_row(older), "card": '{"state": "x"}'}]},
        {"entries": [{**ps.to_row(older), "concept": ["a"]}]},
        {"entries": [1, None]},
        {"entries": [{**ps.to_row(older), "due": "2026-03-02T10:00:00"}]},
    ):
        refused = env.api("ada", "POST", "/practice/schedule", json=bad)
        assert refused.status_code == 400 and "\n" not in refused.json()["error"], bad


def test_grade_login_merges_and_grade_practice_and_progress_ask_the_server(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.student.cli import cli as student_cli

    login = Login("http://127.0.0.1", env.tokens["ada"], "ada")
    monkeypatch.setattr(remote, "_client", lambda _: Client(login.server, login.token, transport=env.client._transport))
    local_db = tmp_path / "local" / "progress.db"
    local_db.parent.mkdir()
    with Store.open(local_db) as store:
        store.save_practice_entries("ada-laptop", [ps.to_row(ps.missed(None, "optim.sgd", NOW))])
    assert remote.merge_schedule(login, local_db, "ada-laptop") == 1
    with Store.open(local_db) as store:
        assert [r["concept"] for r in store.practice_entries("ada")] == ["optim.sgd"]  # kept under the login's name
    assert remote.merge_schedule(login, tmp_path / "none.db", "ada") is None

    monkeypatch.setattr(remote, "remote_login", lambda *_: login)
    question = env.item()["question"]["id"]
    chapter, _, qid = question.partition("/")
    typed = right_answer(
        chapter, next(q for q in quiz_source(chapter).questions if q.id == qid), PRACTICE_STUDENT, typed=True
    )
    items = env.api("ada", "GET", "/practice").json()["practise"]
    answers = [str(typed) if i["concept"] == CONCEPT else "12345.6" for i in items if i["question"]]
    ran = CliRunner().invoke(student_cli, ["practice"], input="\n".join(answers) + "\n")
    assert ran.exit_code == 0, ran.output
    assert "not graded, no attempts spent" in ran.output and "Variance, standard deviation" in ran.output
    assert "Correct." in ran.output and "Explanation:" in ran.output
    progress = CliRunner().invoke(student_cli, ["progress"])
    assert progress.exit_code == 0, progress.output
    assert "Practice this (not graded, no attempts spent)" in progress.output


def test_the_practice_page_lists_what_is_due_and_answers_on_the_page(env: Env) -> None:
    bearer = {"Authorization": f"Bearer {env.tokens['ada']}"}
    env.answer("initialisation/xavier-uniform-a", right=False)  # a miss today: due tomorrow
    env.clock.now = NOW + timedelta(days=1, hours=1)
    page = env.client.get("/student/practice", headers=bearer)
    assert page.status_code == 200 and 'href="/student/practice"' in page.text
    due = page.text[page.text.index("Due today") : page.text.index("Practise now")]
    assert "Variance, standard deviation and the uniform bound" in due and 'href="#c-init-variance-vs-std"' in due
    assert 'id="c-init-variance-vs-std"' in page.text and "initialisation/xavier-uniform-a" in page.text
    assert 'href="/student/text/initialisation.html#variance-propagation"' in page.text  # the concept's section
    chapter, qid = "initialisation", "xavier-uniform-a"
    typed = right_answer(
        chapter, next(q for q in quiz_source(chapter).questions if q.id == qid), PRACTICE_STUDENT, typed=True
    )
    answered = env.client.post(
        "/student/practice",
        headers=bearer,
        data={"concept": CONCEPT, "question": f"{chapter}/{qid}", "answer": str(typed)},
    )
    assert answered.status_code == 200
    assert "Right." in answered.text and "Explanation." in answered.text and "comes back on" in answered.text
    refused = env.client.post(
        "/student/practice",
        headers=bearer,
        data={"concept": "normalization.axes", "question": "normalization/norm-axes-instance", "answer": "1"},
    )
    assert refused.status_code == 400 and "open for grading" in refused.text
    with Store.open(env.db) as store:
        assert store.quiz_attempts("ada") == []  # practice spent no attempt


def test_the_home_page_says_what_is_due_today(env: Env) -> None:
    bearer = {"Authorization": f"Bearer {env.tokens['ada']}"}
    assert 'id="practice-due"' not in env.client.get("/student/", headers=bearer).text
    env.answer("initialisation/xavier-uniform-a", right=False)
    env.clock.now = NOW + timedelta(days=1, hours=1)
    home = env.client.get("/student/", headers=bearer).text
    assert 'id="practice-due"' in home and 'href="/student/practice#c-init-variance-vs-std"' in home


def test_grade_login_sends_the_handouts_schedule(env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.student.client import connection

    transport = env.client._transport
    real_login = connection.login
    monkeypatch.setattr(connection, "login", lambda server, token: real_login(server, token, transport))
    monkeypatch.setattr(remote, "_client", lambda login: Client(login.server, login.token, transport=transport))
    monkeypatch.setenv("GRADE_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("GRADE_DB", str(tmp_path / "progress.db"))
    monkeypatch.setenv("GRADE_STUDENT", "ada-laptop")
    with Store.open(tmp_path / "progress.db") as store:
        ps.record_reviews(store, "ada-laptop", [ps.new_review("optim.sgd", None, False, NOW, "local")])
    from grader.student.commands import account as cli_account

    logged = CliRunner().invoke(cli_account.login_command, ["http://127.0.0.1", "--token", env.tokens["ada"]])
    assert logged.exit_code == 0, logged.output
    assert "Practice schedule merged with the server's (1 concept(s))" in logged.output
    with Store.open(env.db) as store, Store.open(tmp_path / "progress.db") as local:
        assert [r["concept"] for r in store.practice_entries("ada")] == ["optim.sgd"]
        assert store.practice_reviews("ada") == local.practice_reviews("ada-laptop")  # the review itself


def test_a_server_without_the_scheduler_says_so_in_one_line(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ps, "available", lambda: False)
    refused = env.answer("initialisation/xavier-uniform-a", right=True)
    assert refused.status_code == 503 and "fsrs" in refused.json()["error"]
    merged = env.api("ada", "POST", "/practice/schedule", json={"entries": []})
    assert merged.status_code == 503
    login = Login("http://127.0.0.1", env.tokens["ada"], "ada")
    monkeypatch.setattr(remote, "_client", lambda _: Client(login.server, login.token, transport=env.client._transport))
    with Store.open(tmp_path / "local.db") as store:
        store.save_practice_entries("ada", [ps.to_row(ps.missed(None, "optim.sgd", NOW))])
    assert remote.merge_schedule(login, tmp_path / "local.db", "ada") is None  # the login stands


def test_exam_mode_offers_no_practice_of_a_held_exercises_mistakes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded = seed(tmp_path, exam_release=NOW + timedelta(days=3))  # normalization's feedback held until then
    monkeypatch.setattr(api, "now_utc", lambda: NOW)
    config = ServerConfig(seeded.db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(seeded.course))
    with TestClient(create_app(config, run_collector=False), base_url="http://127.0.0.1") as client:
        doc = client.get("/api/v1/practice", headers={"Authorization": f"Bearer {seeded.tokens['ada']}"}).json()
    offered = [i["concept"] for i in doc["practise"]]
    assert CONCEPT in offered and "normalization.axes" not in offered  # LayerNorm's ln-batch-axis is held
