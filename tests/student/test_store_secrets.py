"""Secret files (tokens, a saved login) are written owner-only from their first byte (grader.student.store.write_owner_only)."""

from __future__ import annotations

import os
from pathlib import Path

from grader.server import roster
from grader.student.store import write_owner_only


def test_a_secret_file_is_0600_whatever_the_umask_and_whatever_was_there(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("old")
    path.chmod(0o644)
    old = os.umask(0)
    try:
        write_owner_only(path, "id,token\nann,secret\n")
    finally:
        os.umask(old)
    assert path.read_text() == "id,token\nann,secret\n" and path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["tokens.csv"]  # no temporary left


def test_a_link_planted_at_the_temporary_name_is_never_followed(tmp_path: Path) -> None:
    """A writable folder shared with others: a link at ``tokens.csv.tmp`` must not receive the tokens."""
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("")
    elsewhere.chmod(0o666)
    (tmp_path / "tokens.csv.tmp").symlink_to(elsewhere)
    entry = roster.RosterEntry("ann", "Ann", "ann@example.org")
    roster.write_tokens(tmp_path / "tokens.csv", [(entry, "secret-token")])
    assert elsewhere.read_text() == "" and "secret-token" in (tmp_path / "tokens.csv").read_text()
    assert (tmp_path / "tokens.csv").stat().st_mode & 0o777 == 0o600
