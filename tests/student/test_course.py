"""course.toml parsing (one-line errors) and the one rule for which score counts, in store, progress and report."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.term import class_report
from grader.term import progress
from grader.cli import cli
from grader.student.course import Chapter, CourseError, counted_score, load_course
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.store import Store

DUE = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
COURSE = """
name = "Test course"
score = "{rule}"
[rate_limit]
submissions = 5
per_minutes = 10
[[chapter]]
name = "activations"
due = 2026-12-01T12:00:00Z
late_penalty = 0.5
late_until = 2026-12-03T12:00:00Z
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text, encoding="utf-8")
    return path


def row(score: float, when: str, status: str = "failed") -> dict[str, object]:
    return {"score": score, "max_score": 10.0, "status": status, "started_at": when}


def test_course_file_parses(tmp_path: Path) -> None:
    course = load_course(write(tmp_path, COURSE.format(rule="latest")))
    assert course.name == "Test course" and course.rule == "latest"
    assert course.rate_submissions == 5 and course.rate_minutes == 10
    chapter = course.chapter_of("activations.ReLU")
    assert chapter is not None and chapter.due == DUE and chapter.late_penalty == 0.5
    assert course.chapter_of("linear.Linear") is None
    assert chapter.closes_at() == datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('score = "highest"', 'score = \'highest\' is not a rule: use "best" or "latest"'),
        ('[[chapter]]\nname = "activations"\ndue = 2026-12-01', "due must be a date-time with its time zone"),
        ('[[chapter]]\nname = "activatons"', "Did you mean 'activations'?"),
        ('[[chapter]]\nname = "activations"\nlate_penalty = 2', "late_penalty must be a number from 0 to 1"),
        (
            '[[chapter]]\nname = "a"\nexercises = ["activations"]\n[[chapter]]\nname = "b"\nexercises = ["activations.ReLU"]',
            "activations.ReLU is in chapters 'a' and 'b'",
        ),
        ("names = 'x'", "unknown field 'names'"),
        ("name = ", "is not valid TOML"),
    ],
)
def test_bad_course_files_are_one_line_errors(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(CourseError) as info:
        load_course(write(tmp_path, text))
    message = str(info.value)
    assert fragment in message and "\n" not in message and str(tmp_path) in message


def test_missing_course_file(tmp_path: Path) -> None:
    with pytest.raises(CourseError, match="does not exist: pass --course"):
        load_course(tmp_path / "nope.toml")


def test_counted_score_best_latest_and_late() -> None:
    chapter = Chapter("activations", ("activations.ReLU",), DUE, 0.5, datetime(2026, 12, 3, tzinfo=timezone.utc))
    on_time, late, too_late = "2026-12-01T11:00:00+00:00", "2026-12-02T00:00:00+00:00", "2026-12-04T00:00:00+00:00"
    rows = [row(6.0, on_time), row(10.0, late), row(0.0, on_time)]
    best = counted_score(rows, chapter, "best")
    assert best.score == 6.0 and not best.late  # the late 10 counts 5, less than the 6 on time
    assert best.best_raw == 10.0 and best.latest == 0.0 and best.attempts == 3
    assert counted_score(rows, chapter, "latest").score == 0.0
    assert counted_score([row(10.0, late)], chapter, "best").score == 5.0
    assert counted_score([row(10.0, late)], chapter, "best").late
    assert counted_score([row(10.0, too_late)], chapter, "best").score == 0.0
    assert counted_score(rows, None, "best").score == 10.0  # no course: the best ever


def test_default_penalty_means_best_before_the_due_date() -> None:
    chapter = Chapter("activations", ("activations.ReLU",), DUE)  # late_penalty 1 by default
    rows = [row(4.0, "2026-12-01T00:00:00+00:00"), row(10.0, "2026-12-05T00:00:00+00:00")]
    assert counted_score(rows, chapter, "best").score == 4.0
    assert chapter.closes_at() == DUE


def record(store: Store, score: float, when: str) -> None:
    status = "passed" if score == 10.0 else "not_implemented"
    store.record_report(
        GradeReport("ann", [ExerciseResult("activations.ReLU", status, score, 10.0)]), "v", started_at=when
    )


def test_progress_report_and_server_share_the_rule(tmp_path: Path) -> None:
    """Full marks, then the folder replaced by stubs: `best` keeps 10 and says so; `latest` counts 0."""
    db = tmp_path / "class.db"
    with Store.open(db) as store:
        record(store, 10.0, "2026-11-30T00:00:00+00:00")
        record(store, 0.0, "2026-11-30T01:00:00+00:00")
        for rule, expected in (("best", 10.0), ("latest", 0.0)):
            course = load_course(write(tmp_path, COURSE.format(rule=rule)))
            summary = progress.summarize(store, "ann", ["activations.ReLU"], [], course=course)
            assert summary.score == expected
            report = class_report.build(store, ["activations.ReLU"], course=course)
            assert report.students[0].exercises["activations.ReLU"].best_score == expected
            assert store.best_scores("ann", course)["activations.ReLU"]["best_score"] == expected
    runner = CliRunner()
    write(tmp_path, COURSE.format(rule="best"))
    text = runner.invoke(
        cli, ["progress", "--student", "ann", "--db", str(db), "--course", str(tmp_path / "course.toml")]
    ).output
    assert "best   10/10" in text and "(latest attempt 0)" in text
    write(tmp_path, COURSE.format(rule="latest"))
    result = runner.invoke(
        cli, ["report", "--db", str(db), "--format", "csv", "--course", str(tmp_path / "course.toml")]
    )
    assert result.exit_code == 0, result.output
    header, line = result.output.splitlines()[:2]
    assert line.split(",")[header.split(",").index("activations.ReLU")] == "0"
    bad = runner.invoke(cli, ["report", "--db", str(db), "--course", str(tmp_path / "missing.toml")])
    assert bad.exit_code == 2 and "does not exist: pass --course" in bad.output


def test_the_field_reference_in_course_py_is_a_course_file_that_means_what_it_says() -> None:
    """The docstring course.example.toml points to parses as written, every top-level field where it belongs
    (a key written after an [[extension]] table would be a field of that extension)."""
    import textwrap
    import tomllib

    from grader.student import course as course_module
    from grader.student.course import parse_course

    assert course_module.__doc__ is not None
    example = textwrap.dedent(course_module.__doc__.split("::\n", 1)[1].split("\nWhich score counts")[0])
    doc = tomllib.loads(example)
    assert {
        "name",
        "score",
        "hand_in",
        "rate_limit",
        "chapter",
        "groups",
        "extension",
        "server",
        "quiz",
        "scaffolding",
        "lti",
    } == set(doc)
    course = parse_course(doc, Path("course.py"))
    assert course.hand_in == "server" and course.server_url == "https://grader.example.org"
    assert [e.student for e in course.extensions] == ["alice"] and course.quiz_attempts == 2 and course.lti


# --- [server] and hand_in: where the course is graded (the handout reads them) -------------------------


def test_a_course_names_its_server_and_the_hand_in_path(tmp_path: Path) -> None:
    course = load_course(write(tmp_path, '[server]\nurl = "https://grader.example.org/"\n'))
    assert course.server_url == "https://grader.example.org" and course.hand_in == "server"
    assert course.handout_json()["server"] == "https://grader.example.org"
    both = load_course(write(tmp_path, 'hand_in = "both"\n[server]\nurl = "http://127.0.0.1:8000"\n'))
    assert both.graded_on_server and both.graded_on_gradescope
    assert load_course(write(tmp_path, 'name = "x"\n')).hand_in == "gradescope"  # no server: Gradescope


@pytest.mark.parametrize(
    "text, message",
    [
        ('[server]\nurl = "grader.example.org"\n', "server.url = 'grader.example.org' is not a URL"),
        ('[server]\nhost = "x"\n', "[server] takes url = "),
        ('hand_in = "email"\n', 'hand_in = \'email\' is not a path: use "server", "gradescope" or "both"'),
        ('hand_in = "server"\n', "hand_in = 'server' needs the server's address: add [server] url"),
        ('[server]\nurl = "http://127.0.0.1:99999"\n', "has no valid port"),
    ],
)
def test_a_bad_server_or_hand_in_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CourseError) as caught:
        load_course(write(tmp_path, text))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_quiz_chapters_are_matched_by_name_or_mapped_never_guessed(tmp_path: Path) -> None:
    """Issue 43, bug 7: the example's chapter `init` matched no quiz `initialisation` silently (that quiz had no due
    date and the student's page listed both). A quiz chapter is held by the chapter of its name or the one whose
    `quiz = "..."` names it; one that matches none is an error naming the fix."""
    text = '[[chapter]]\nname = "init"\ndue = 2026-12-01T12:00:00Z\n'
    course = load_course(write(tmp_path, text))
    assert course.quiz_due("initialisation") is None
    with pytest.raises(CourseError) as found:
        course.check_quizzes(["init", "initialisation"])
    assert str(found.value) == (
        "quiz chapter 'initialisation' matches no chapter of the course (init): rename the "
        "chapter to 'initialisation', or add quiz = \"initialisation\" to the [[chapter]] that"
        " holds it"
    )
    mapped = load_course(write(tmp_path, text + 'quiz = "initialisation"\n'))
    mapped.check_quizzes(["initialisation"])
    assert mapped.quiz_due("initialisation") == DUE and mapped.quiz_due("init") is None
    assert mapped.chapter_of_quiz("initialisation") is mapped.chapters[0]
    load_course(write(tmp_path, "")).check_quizzes(["initialisation"])  # no chapters: no dates to match
    alone = load_course(
        write(
            tmp_path,
            text + '[[chapter]]\nname = "q"\nexercises = []\nquiz = "initialisation"\ndue = 2026-12-01T12:00:00Z\n',
        )
    )  # a chapter of its quiz alone
    assert alone.chapters[1].exercises == () and alone.quiz_due("initialisation") == DUE
    with pytest.raises(CourseError, match="exercises is empty: list topics or exercise ids"):
        load_course(write(tmp_path, '[[chapter]]\nname = "q"\nexercises = []\n'))
    twice = text + 'quiz = "activations"\n[[chapter]]\nname = "activations"\n'
    with pytest.raises(CourseError, match="chapters 'init' and 'activations' both hold quiz 'activations'"):
        load_course(write(tmp_path, twice))
    with pytest.raises(CourseError, match='quiz = "NAME" names its quiz chapter'):
        load_course(write(tmp_path, text + "quiz = 3\n"))


def test_grade_serve_and_grade_release_stop_at_an_unmatched_quiz_chapter(tmp_path: Path) -> None:
    """The check runs before anything is served or written: one line with the fix, exit 2 (a bad course file)."""
    course = write(tmp_path, '[[chapter]]\nname = "init"\n')
    for args in (
        ["serve", "--course", str(course), "--db", str(tmp_path / "c.db"), "--workers", "0"],
        ["release", "--out", str(tmp_path / "out"), "--course", str(course)],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "quiz chapter 'activations' matches no chapter of the course (init)" in lines[0]
        assert 'add quiz = "activations"' in lines[0]
    assert not (tmp_path / "out").exists() and not (tmp_path / "c.db").exists()
