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


def test_the_embedded_queue_is_created_owner_only_and_a_shared_one_stops_serve_and_worker(tmp_path: Path) -> None:
    """The SQLite queue holds every upload and report: created 0600 whatever the umask; readable by others, it
    stops `grade serve` and `grade worker` the same way."""
    import os

    from grader.queue.jobs import open_queue
    from grader.server.cli import worker_command

    queue = tmp_path / "course-queue.db"
    old = os.umask(0o022)
    try:
        open_queue(f"sqlite://{queue}").pending()
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert queue.name in modes and set(modes.values()) == {0o600}, modes  # its -wal and -shm too
    queue.chmod(0o644)
    db = tmp_path / "course.db"
    Store.open(db).close()
    for command, args in [(serve_command, ["--db", str(db)]), (worker_command, [])]:
        result = CliRunner().invoke(command, [*args, "--queue", f"sqlite://{queue}"])
        assert result.exit_code == 2, result.output
        assert f"{queue} is readable by other users (mode 644): it holds the students' uploads" in result.output
        assert f"run chmod 600 {queue}" in result.output and "\n" not in result.output.strip()
