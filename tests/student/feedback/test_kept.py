"""The kept report and its web page (grader/student/feedback/kept.py), shared by local and remote `grade submit`."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grader.student.client import remote
from grader.student.client.connection import Submitted
from grader.student.client.wire import report_from_dict
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.errors import UsageError
from grader.student.feedback.kept import last_report_path, save_last_report, write_html_report


@pytest.fixture()
def report() -> GradeReport:
    check = CheckResult(
        "forward",
        False,
        0.0,
        5.0,
        "first significant difference at [0]: 1.0 != 2.0",
        figure={"kind": "elements", "title": "forward", "summary": "1 of 4 differ", "data": {}},
    )
    return GradeReport("ada", [ExerciseResult("activations.ReLU", "failed", 5.0, 10.0, [check])], "abc")


def test_the_report_is_kept_beside_the_exercises_folder_with_its_figures(tmp_path: Path, report: GradeReport) -> None:
    exercises = tmp_path / "exercises"
    exercises.mkdir()
    save_last_report(report, exercises)
    kept = last_report_path(exercises)
    assert kept == tmp_path.resolve() / ".grade" / "last-report.json"
    assert report_from_dict(json.loads(kept.read_text())) == report


def test_a_report_that_cannot_be_kept_is_one_warning_line(
    tmp_path: Path, report: GradeReport, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".grade").write_text("a file where the folder goes")
    save_last_report(report, tmp_path / "exercises")
    err = capsys.readouterr().err
    assert err.startswith("Warning: the report was not kept for `grade view`:") and err.count("\n") == 1


def test_the_page_is_written_or_a_one_line_usage_error(tmp_path: Path, report: GradeReport) -> None:
    write_html_report(report, tmp_path / "page" / "report.html")
    assert (tmp_path / "page" / "report.html").read_text().startswith("<!DOCTYPE html>")
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    with pytest.raises(
        UsageError, match=r"^cannot write the web page to '.*notes.txt/r.html': .*: choose another --html FILE$"
    ):
        write_html_report(report, tmp_path / "notes.txt" / "r.html")


@pytest.mark.parametrize("where", ["report.html", ".grade/last-report.html", "out/deep/r.html"])
def test_the_page_links_to_the_section_in_the_text_beside_the_exercises(
    tmp_path: Path, report: GradeReport, where: str
) -> None:
    """`grade submit --html report.html` in the handout's folder wrote ../text/ (a folder above the handout)."""
    import re
    from urllib.parse import urldefrag

    handout = tmp_path / "handout"
    (handout / "exercises").mkdir(parents=True)
    page = handout / where
    write_html_report(report, page, exercises_dir=handout / "exercises")
    links = re.findall(r'Read <a href="([^"]*)"', page.read_text())
    assert links, "a failing exercise links to its section"
    target, anchor = urldefrag(links[0])
    assert (page.parent / target).resolve() == (handout / "text" / "activations.html").resolve() and anchor == "relu"


def test_a_remote_submission_keeps_its_report_and_a_bad_html_path_is_one_line_exit_2(
    tmp_path: Path, report: GradeReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "exercises").mkdir()
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    done = Submitted(7, "done", report, None, {"id": 7, "status": "done"})

    @click.command()
    @click.argument("html")
    def show(html: str) -> None:
        click.get_current_context().exit(remote.print_report(done, "text", {}, tmp_path / "exercises", Path(html)))

    good = CliRunner().invoke(show, [str(tmp_path / "report.html")], catch_exceptions=False)
    assert good.exit_code == 1 and "activations.ReLU" in good.output
    assert (tmp_path / "report.html").exists() and last_report_path(tmp_path / "exercises").exists()
    bad = CliRunner().invoke(show, [str(tmp_path / "notes.txt" / "report.html")], catch_exceptions=False)
    assert bad.exit_code == 2 and "activations.ReLU" in bad.output  # the report was printed first
    assert bad.output.rstrip().splitlines()[-1].startswith("Error: cannot write the web page")
    assert "Traceback" not in bad.output
