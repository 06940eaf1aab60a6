"""Secrets in the authoring repository (issue 43): the repository's .gitignore ignores tokens and the database's
side files, and `grade roster import -o` warns when it writes tokens where git would take them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from click.testing import CliRunner

from grader.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)


def test_the_repository_ignores_tokens_and_database_side_files(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    for name in ("tokens.csv", "course.db", "course.db-wal", "course.db-shm", "course.db-serving"):
        assert git(tmp_path, "check-ignore", "-q", name).returncode == 0, name


def test_roster_import_warns_of_tokens_git_would_commit(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email\nzoe,Zoe,zoe@example.org\nyan,Yan,yan@example.org\n")
    args = ["roster", "import", str(roster), "--db", str(tmp_path / "c.db"), "-o", str(tmp_path / "tokens.csv")]
    warned = CliRunner().invoke(cli, args)
    assert warned.exit_code == 0, warned.output
    assert "does not ignore it: add 'tokens.csv' to .gitignore" in warned.stderr
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    quiet = CliRunner().invoke(cli, args + ["--reissue"])
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output
    outside = tmp_path.parent / f"{tmp_path.name}-tokens.csv"  # not in any work tree: nothing to say
    alone = CliRunner().invoke(cli, args[:-1] + [str(outside), "--reissue"])
    assert alone.exit_code == 0 and alone.stderr == "", alone.output
