"""docs/course.example.toml is the course the docs describe, and the fixture of every command that takes --course.

It holds every block of course file the docs show (each ```toml block of README.md and docs/*.md that is a
course file: its tables and fields are all in the example), parses, and every command with a --course option
loads it and gets past it (a table below names how each is run; a new such command must be added). `grade
serve --course` is run by the browser suite's crawler (tests/server/test_example_course_browser.py) and the docs
test (tests/docs/test_docs_run.py); `grade release --course` here.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.student.course import load_course
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.store import Store

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "course.example.toml"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# The top-level names a course file takes (grader.student.course.parse_course): a ```toml block of the docs
# made only of these is a course file's; others (a quiz source's params, say) are not.
COURSE_FIELDS = {
    "name",
    "score",
    "rate_limit",
    "chapter",
    "scaffolding",
    "groups",
    "extension",
    "lti",
    "server",
    "hand_in",
    "quiz",
}


def toml_blocks() -> Iterator[tuple[str, str]]:
    """(where, text) of every ```toml block of the docs."""
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^( *)```toml\n(.*?)^\1```", text, re.S | re.M):
            body = "\n".join(line[len(match.group(1)) :] for line in match.group(2).splitlines())
            yield f"{path.relative_to(REPO)}:{text[: match.start()].count(chr(10)) + 1}", body


def key_paths(doc: Any, prefix: str = "") -> set[str]:
    """Every table and field of a TOML document as a dotted path ([[arrays]] of tables merged)."""
    out: set[str] = set()
    if isinstance(doc, list) and doc and all(isinstance(item, dict) for item in doc):
        for item in doc:
            out |= key_paths(item, prefix)
        return out
    if isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{prefix}.{key}" if prefix else key
            out.add(path)
            if key != "exercises" or not prefix.startswith("scaffolding"):  # exercise ids are values, not fields
                out |= key_paths(value, path)
    return out


def test_the_example_course_holds_every_block_the_docs_show() -> None:
    example = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    have = key_paths(example)
    course_blocks = 0
    for where, body in toml_blocks():
        doc = tomllib.loads(body)  # every toml block of the docs is valid TOML
        if not set(doc) <= COURSE_FIELDS:
            continue  # a quiz source (docs/quizzes.md), not a course file
        course_blocks += 1
        missing = {p for p in key_paths(doc) if not p.startswith("scaffolding.exercises.")} - have
        assert not missing, f"{where}: {sorted(missing)} not in docs/course.example.toml"
    assert course_blocks >= 6  # scaffolding, groups + extension, exam chapter, quiz, two LTI platforms


def test_the_example_course_parses_with_its_exam_extensions_groups_and_lti() -> None:
    from grader.server import lti

    course = load_course(EXAMPLE)
    assert [c.name for c in course.chapters] == [
        "activations",
        "normalization",
        "initialisation",
        "kernels",
        "dropout",
        "approximation",
    ]
    # issue 43: the exam chapter is named as its quiz, so the quiz has the chapter's due date (and one row)
    assert course.quiz_due("initialisation") == course.chapters[2].due is not None
    assert course.chapter_of("blocks.MLPBlock") is course.chapters[1]
    exam = course.chapters[2]
    assert exam.opens is not None and exam.release_feedback is not None and exam.show_score
    assert {e.student or e.group for e in course.extensions} == {"carol", "team-3"}
    assert course.groups == {"team-3": ("alice", "bob")} and course.quiz_attempts == 2
    assert course.server_url == "http://127.0.0.1:8000" and course.hand_in == "server"
    assert [p.name for p in lti.platforms_of(course).platforms] == ["Canvas", "Moodle"]


def commands_with_course(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands_with_course(command, (*prefix, name))
        elif any("--course" in getattr(p, "opts", []) for p in command.params):
            yield (*prefix, name)


@pytest.fixture
def class_db(tmp_path: Path) -> Path:
    """A course database with one graded attempt (a late one for carol: her extension decides what counts)."""
    db = tmp_path / "course.db"
    with Store.open(db) as store:
        store.record_report(
            GradeReport("carol", [ExerciseResult("normalization.RMSNorm", "passed", 10.0, 10.0)]),
            "v",
            started_at="2026-12-16T10:00:00+00:00",
        )
    return db


# How each command that takes --course is run here, and what it must say (it got past the course file).
RUNS: dict[tuple[str, ...], tuple[list[str], int, str]] = {
    ("report",): (["report", "--db", "{db}", "--format", "csv", "--course", "{course}"], 0, "carol"),
    ("progress",): (
        ["progress", "--db", "{db}", "--student", "carol", "--course", "{course}"],
        0,
        "your extension: medical note seen 2026-12-10",
    ),
    ("rescore",): (
        ["rescore", "--db", "{db}", "--course", "{course}", "--dry-run", "--workers", "0"],
        2,
        "nothing to rescore",
    ),
    ("roster", "sync"): (
        ["roster", "sync", "--db", "{db}", "--course", "{course}", "-o", "{tmp}/tokens.csv"],
        2,
        "no LMS course to sync yet",
    ),
    ("serve",): ([], 0, ""),  # tests/server/test_example_course_browser.py, tests/docs/test_docs_run.py
    ("release",): ([], 0, ""),  # test_grade_release_takes_the_example_course below (slow)
}


def test_every_command_that_takes_a_course_loads_the_example(class_db: Path, tmp_path: Path) -> None:
    found = set(commands_with_course())
    assert found == set(RUNS), f"a command with --course needs its run here: {sorted(found ^ set(RUNS))}"
    for command, (args, status, says) in RUNS.items():
        if not args:
            continue
        filled = [a.format(db=class_db, course=EXAMPLE, tmp=tmp_path) for a in args]
        result = CliRunner().invoke(cli, filled)
        assert result.exit_code == status and says in result.output, (command, result.output)
        assert "course.example.toml" not in result.output, (command, result.output)  # no complaint about it


@pytest.mark.slow
def test_grade_release_takes_the_example_course(tmp_path: Path) -> None:
    """Its server, hand-in path, chapters (the exam's too) and scaffolding go into the handout."""
    import json

    result = CliRunner().invoke(cli, ["release", "--out", str(tmp_path / "release"), "--course", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "`grade login` in the handout goes to http://127.0.0.1:8000" in result.output
    handout = tmp_path / "release" / "student"
    settings = json.loads((handout / "grader" / "student" / "course.json").read_text())
    assert settings["server"] == "http://127.0.0.1:8000" and "initialisation" in [
        c["name"] for c in settings["chapters"]
    ]
    readme = (handout / "README.md").read_text()
    # the exam chapter says it is one: when it opens and when its feedback comes (issue 43)
    assert (
        "| initialisation | init | 2026-12-10 09:00 UTC | 2026-12-10 11:00 UTC | counts nothing | 2026-12-10 11:00 UTC |"
        " exam: 2026-12-10 14:00 UTC |"
    ) in readme
    assert (
        'Exam chapters (initialisation): an upload is graded at once, but its report shows each exercise as "received,'
        ' feedback at T"' in readme
    )
    levels = json.loads((handout / "grader" / "student" / "engine" / "scaffolding.json").read_text())
    assert levels["exercises"]["normalization.BatchNorm1d"] == "derive"
