"""The dashboard's insight pages (grader/server/insight_pages.py) over HTTP in-process: the class's mistakes of
the week (who made each, who fixed it on the next upload and how fast; a click lists the students and their
uploads; the CSV), and the item statistics (the unfair variant flagged, the IRT note on a small class). The
seeded course: tests/student_pages_util.py, plus uploads and quiz answers planted here."""

from __future__ import annotations

import csv
import io
import random
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from grader.queue import records
from grader.server import app as api
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.student.course import load_course
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store
from student_pages_util import NOW, seed

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

LN = "normalization.LayerNorm"


def upload(store: Store, course: Any, student: str, key: str, mistake: str | None, when: Any) -> int:
    """An upload of LayerNorm graded at ``when``: naming ``mistake``, or passed when None."""
    job = records.create_job(store, student, key, {"normalization.py": "# code\n"}, [LN], course, when).job
    check = CheckResult("forward", mistake is None, 10.0 if mistake is None else 0.0, 10.0, "", mistake)
    report = GradeReport(
        student, [ExerciseResult(LN, "passed" if mistake is None else "failed", check.score, 10.0, [check])], key
    )
    records.record_done(store, job, report, "test")
    return int(job["id"])


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, dict[str, str], dict]]:
    seeded = seed(tmp_path)  # ada: ln-batch-axis 5 days ago (never fixed)
    course = load_course(seeded.course)
    planted: dict[str, int] = {}
    with Store.open(seeded.db) as store:
        for k, name in enumerate(["cy", "dee", "eve"]):  # ln-no-keepdims, most frequent; cy and dee fix it
            planted[name] = upload(store, course, name, f"{name}-1", "ln-no-keepdims", NOW - timedelta(days=3))
            if k < 2:
                upload(store, course, name, f"{name}-2", None, NOW - timedelta(days=3, hours=-2 * (k + 1)))
        upload(store, course, "old", "old-1", "ln-eps-missing", NOW - timedelta(days=20))  # not this week
        rng = random.Random(7)  # a quiz class: variant n=8 of gelu-value is made unfair (everyone misses it)
        for s in range(3):  # three pick distractor a of dropout-test-time, one the right b
            store.record_quiz_answer(f"s{s}", "dropout-weight-decay", "dropout-test-time", "choice:a", False)
        store.record_quiz_answer("s3", "dropout-weight-decay", "dropout-test-time", "choice:b", True)
        for s in range(40):
            for q in ("gelu-why", "elu-value"):
                store.record_quiz_answer(f"s{s}", "activations", q, "1", rng.random() < 0.7)
            n = 8 if s % 2 else 16
            store.record_quiz_answer(
                f"s{s}", "activations", "gelu-value", "0.1", n == 16 and rng.random() < 0.9, {"n": n}
            )
    monkeypatch.setattr(api, "now_utc", lambda: NOW)
    config = ServerConfig(seeded.db, f"sqlite:///{tmp_path / 'queue.db'}", course)
    with TestClient(create_app(config, run_collector=False), base_url="http://127.0.0.1") as http:
        yield http, {"Authorization": f"Bearer {seeded.teacher}"}, planted


def test_the_most_frequent_mistake_of_the_week_first_with_who_fixed_it(client: Any) -> None:
    http, teacher, planted = client
    page = http.get("/instructor/mistakes", headers=teacher)
    assert page.status_code == 200
    text = page.text
    assert text.index("ln-no-keepdims") < text.index("ln-batch-axis")  # 3 students before 1
    assert "ln-eps-missing" not in text  # 20 days ago
    assert 'href="/instructor/mistakes"' in http.get("/instructor/", headers=teacher).text  # in the menu
    rows = list(csv.reader(io.StringIO(http.get("/instructor/mistakes.csv", headers=teacher).text)))
    assert rows[0][:4] == ["exercise", "mistake", "concept", "students"]
    assert rows[1] == [LN, "ln-no-keepdims", "normalization.axes", "3", "2", "3.0"]  # fixed after 2 h and 4 h
    detail = http.get(f"/instructor/mistakes/{LN}/ln-no-keepdims", headers=teacher)
    assert detail.status_code == 200
    for name in ("cy", "dee", "eve"):
        assert f'href="/instructor/students/{name}"' in detail.text and str(planted[name]) in detail.text
    assert http.get(f"/instructor/mistakes/{LN}/no-such", headers=teacher).status_code == 404
    earlier = http.get(
        "/instructor/mistakes.csv", params={"since": f"{NOW - timedelta(days=21):%Y-%m-%d}"}, headers=teacher
    )
    assert "ln-eps-missing" in earlier.text
    bad = http.get("/instructor/mistakes", params={"since": "last week"}, headers=teacher)
    assert bad.status_code == 400 and "write it as YYYY-MM-DD" in bad.text and "Traceback" not in bad.text


def test_item_statistics_flag_the_unfair_variant_and_say_why_there_is_no_irt(client: Any) -> None:
    http, teacher, _ = client
    page = http.get("/instructor/item-stats", headers=teacher)
    assert page.status_code == 200
    row = next(r for r in page.text.split("<tr>") if "activations/gelu-value" in r)
    assert "n=8: 0.00" in row and row.count("unfair") == 2  # both draws differ from each other by > 0.15
    assert "needs at least 200 students" in page.text and "this class has 40" in page.text
    assert 'href="/instructor/item-stats"' in page.text


def test_item_statistics_name_each_distractors_misconception(client: Any) -> None:
    http, teacher, _ = client
    page = http.get("/instructor/item-stats", headers=teacher)
    row = next(r for r in page.text.split("<tr>") if "dropout-weight-decay/dropout-test-time" in r)
    assert "choice:a: 75%" in row  # its share, and beside it what a student who picks it believes:
    assert "mixes up inverted dropout with the original, which scales at test time" in row


def test_the_insight_pages_are_the_instructors(client: Any) -> None:
    http, _, _ = client
    for path in ("/instructor/mistakes", "/instructor/mistakes.csv", "/instructor/item-stats"):
        assert http.get(path, follow_redirects=False).status_code in (303, 401), path
