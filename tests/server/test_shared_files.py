"""`grade serve` refuses to start on a course database its group or others may read (token hashes, keys), in
one line naming the file and the `chmod 600`, exit status 2; `--allow-shared-files` serves it with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.server.cli import serve_command
from grader.student.store import Store

NO_QUEUE = "nosuch://queue"  # past the check, the command stops here: nothing is served by these tests


@pytest.mark.parametrize("exposed", ["", "-wal"])
def test_grade_serve_refuses_a_database_others_can_read(tmp_path: Path, exposed: str) -> None:
    db = tmp_path / "course.db"
    Store.open(db).close()
    shared = tmp_path / f"course.db{exposed}"
    shared.touch()
    shared.chmod(0o640)
    result = CliRunner().invoke(serve_command, ["--db", str(db), "--queue", NO_QUEUE])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and f"run chmod 600 {shared}" in line and "--allow-shared-files" in line, line
    assert "mode 640" in line and "queue" not in line


def test_allow_shared_files_serves_it_with_a_warning(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    Store.open(db).close()
    db.chmod(0o644)
    result = CliRunner().invoke(serve_command, ["--db", str(db), "--queue", NO_QUEUE, "--allow-shared-files"])
    assert f"warning: {db} is readable by other users" in result.output
    assert NO_QUEUE in result.output  # went on to the next step (the queue), which stops this test


def test_an_owner_only_database_is_served_without_a_word(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    Store.open(db).close()
    result = CliRunner().invoke(serve_command, ["--db", str(db), "--queue", NO_QUEUE])
    assert "readable" not in result.output and NO_QUEUE in result.output
