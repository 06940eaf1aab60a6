"""`grade batch` and `grade report` through click's CliRunner, on a generated class."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from classgen import make_class
from grader.cli import cli
from grader.student.store import Store

KINDS = {"ada": "correct", "cy": "mistaken", "dee": "syntax", "gus": "hostile-import"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("GRADE_DB", "GRADE_STUDENT", "NO_COLOR", "GRADE_QUIZ_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def graded_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A class graded once per module on activations.ReLU and linear; returns its folder (class/, class.db)."""
    root = tmp_path_factory.mktemp("graded")
    make_class(root / "class", KINDS)
    result = CliRunner(env={"GRADE_DB": None}).invoke(
        cli, ["batch", str(root / "class"), "activations.ReLU", "linear", "--db", str(root / "class.db")]
    )
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def graded(graded_once: Path, tmp_path: Path) -> Path:
    """This test's copy of the graded class (class/ and class.db in the current folder); returns the database."""
    shutil.copytree(graded_once / "class", tmp_path / "class")
    with Store.open(graded_once / "class.db") as source, sqlite3.connect(tmp_path / "class.db") as target:
        source.db.conn.backup(target)
    target.close()
    return tmp_path / "class.db"


def test_batch_grades_records_and_summarises(graded: Path) -> None:
    with Store.open(graded) as store:
        assert store.students() == sorted(KINDS)
        assert store.best_scores("ada")["linear.Linear"]["last_status"] == "passed"
        assert store.best_scores("dee")["linear.Linear"]["last_status"] == "error"
        assert store.best_scores("gus")["linear.Linear"]["last_status"] == "error"
        assert store.best_scores("cy")["activations.ReLU"]["last_status"] == "failed"
        assert set(store.best_scores("ada")) == {"activations.ReLU", "linear.Linear"}


def test_batch_rerun_skips_and_force_regrades(graded: Path) -> None:
    runner = CliRunner()
    again = runner.invoke(cli, ["batch", "class", "activations.ReLU", "linear", "--db", "class.db"])
    assert again.exit_code == 0, again.output
    assert "4 students: 0 graded, 4 unchanged (skipped), 0 failed" in again.output
    forced = runner.invoke(cli, ["batch", "class", "linear", "--db", "class.db", "--force", "--jobs", "1", "--json"])
    assert forced.exit_code == 0, forced.output
    doc = json.loads(forced.stdout)
    assert doc["graded"] == 4 and doc["skipped"] == 0
    assert {o["student"]: o["score"] for o in doc["outcomes"]}["ada"] == 10.0
    with Store.open(graded) as store:
        assert len(store.attempts("ada")) == 2


def test_batch_student_that_cannot_be_graded_exits_1(tmp_path: Path) -> None:
    make_class(tmp_path / "class", {"ada": "correct"})
    (tmp_path / "class" / "empty").mkdir()
    result = CliRunner().invoke(cli, ["batch", "class", "linear", "--db", "class.db"])
    assert result.exit_code == 1, result.output
    assert "Not graded: empty: " in result.output and "has no exercise files" in result.output
    assert (
        "2 students: 1 graded, 0 unchanged (skipped), 1 could not be graded (error recorded), 0 failed" in result.output
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["batch", "class"], "Missing option '--db'"),
        (["batch", "missing", "--db", "c.db"], "'missing' is not a folder"),
        (["batch", "class", "lineer", "--db", "c.db"], "Did you mean 'linear'?"),
        (["report"], "Missing option '--db'"),
        (["report", "--db", "missing.db"], "'missing.db' does not exist"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "class" / "ada").mkdir(parents=True)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "c.db").exists()


def test_batch_refuses_a_foreign_database(tmp_path: Path) -> None:
    (tmp_path / "class" / "ada").mkdir(parents=True)
    (tmp_path / "c.db").write_text("not a database")
    result = CliRunner().invoke(cli, ["batch", "class", "--db", "c.db"])
    assert result.exit_code == 2 and "is not a normgrade progress database" in result.output
    assert (tmp_path / "c.db").read_text() == "not a database"


def test_report_csv_to_stdout(graded: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--db", str(graded), "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["student"] for r in rows] == sorted(KINDS)
    ada = rows[0]
    assert ada["total"] == "20" and ada["linear.Linear"] == "10" and ada["activations.ReLU"] == "10"
    assert ada["activations.GELU"] == ""  # never graded: empty cell
    assert "quiz:activations" in ada and ada["quiz:activations"] == "0"
    assert {r["linear.Linear"] for r in rows if r["student"] in ("dee", "gus")} == {"0"}


def test_report_html_to_file(graded: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--db", str(graded), "-o", "out/class.html"])
    assert result.exit_code == 0, result.output
    assert "Wrote the html report of 4 students to out/class.html" in result.stderr
    page = (tmp_path / "out" / "class.html").read_text(encoding="utf-8")
    # self-contained: no address to fetch (the pictures' SVG namespace is a name, never fetched)
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "src=" not in page and page.count("<script>") == 1
    assert page.count("<svg") >= 2 and '<table id="grid"' in page
    text = html.unescape(page)
    for name in KINDS:
        assert re.search(rf'<h2 id="student-\d+-title">{name}</h2>', text)
        assert f"normgrade report for {name}" in text  # the latest upload's report, as seen
    assert "relu-inplace" in text and "clamps the caller's array in place" in text
    assert "gelu-why" in text  # a quiz item from the course's quizzes


def test_report_json_matches_the_database(graded: Path) -> None:
    result = CliRunner().invoke(cli, ["report", "--db", str(graded), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["students"] == 4
    totals = {s["student"]: s["total"] for s in doc["students"]}
    assert totals["ada"] == 20 and totals["dee"] == 10 and totals["gus"] == 10
    relu = next(e for e in doc["exercises"] if e["id"] == "activations.ReLU")
    assert relu["passed"] == 3 and relu["mistakes"][0]["id"] == "relu-inplace"


def test_batch_progress_bar_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar is drawn on stderr (click hides it where stderr is no terminal, as under CliRunner)."""
    import grader.cli

    monkeypatch.setattr(grader.cli, "_show_progress", lambda: True)
    make_class(tmp_path / "class", {"ada": "correct", "bob": "correct"})
    result = CliRunner().invoke(cli, ["batch", "class", "linear", "--db", "class.db"])
    assert result.exit_code == 0, result.output
    assert "Grading" in result.stderr
    assert "2 students: 2 graded" in result.stdout
