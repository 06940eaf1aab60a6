"""``grade roster import roster.csv``: the class list, and one token per student.

The roster CSV has a header with the columns ``id,name,email`` (more columns
are ignored). ``id`` is what the student is known by everywhere (the seed of
their hidden checks, the gradebook row): letters, digits and ``._@-``, at
most 64 characters, and never ``instructor`` (in any case): instructor tokens
are a separate kind of identity (their role), and a roster id that looked like
one is refused in one line rather than shared. Importing again adds new students and updates names and
e-mails; existing students keep their token unless ``--reissue``.

The new tokens are written to a CSV (``id,name,email,token``) readable only
by the instructor (mode 0600), for handing out; the database keeps only
their hashes, so a lost token is replaced with ``--reissue``, not recovered.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from grader.student.errors import UsageError
from grader.server import auth
from grader.student.store import Store, utc_now, write_owner_only
from grader.student.store import roster as store_roster

ID_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")  # matched whole (fullmatch): "ann\n" is no id
MAX_ROSTER_BYTES = 10 * 1024 * 1024
RESERVED_IDS = frozenset({auth.INSTRUCTOR})  # compared in lower case: the instructor is another kind of identity


@dataclass(frozen=True)
class RosterEntry:
    """One student of the roster."""

    id: str
    name: str
    email: str


def read_roster(path: Path) -> list[RosterEntry]:
    """Parse the roster CSV; UsageError (one line, with the row number) on the first bad row."""
    try:
        if path.stat().st_size > MAX_ROSTER_BYTES:
            raise UsageError(f"{path} is larger than 10 MB: is it the roster CSV?")
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError as exc:
        raise UsageError(f"{path} does not exist: pass the roster CSV (columns id,name,email)") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text: save the roster as UTF-8 CSV") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror})") from exc
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in ("id", "name", "email") if c not in header]
    if missing:
        raise UsageError(f"{path}: the header lacks {', '.join(missing)}: the first line must be id,name,email")
    reader.fieldnames = header
    entries: list[RosterEntry] = []
    seen: set[str] = set()
    for number, row in enumerate(reader, start=2):
        student = (row.get("id") or "").strip()
        if not ID_RE.fullmatch(student):
            raise UsageError(f"{path} line {number}: id {student!r} is not valid: use 1 to 64 letters, digits or ._@-")
        if student.lower() in RESERVED_IDS:
            raise UsageError(
                f"{path} line {number}: id {student!r} is reserved for the instructor's token: "
                "give that student another id"
            )
        if student in seen:
            raise UsageError(f"{path} line {number}: id {student!r} appears twice: give each student one row")
        seen.add(student)
        entries.append(RosterEntry(student, (row.get("name") or "").strip(), (row.get("email") or "").strip()))
    if not entries:
        raise UsageError(f"{path} has no students: add one row per student under the header id,name,email")
    return entries


def import_roster(store: Store, entries: list[RosterEntry], reissue: bool = False) -> list[tuple[RosterEntry, str]]:
    """Add or update the students, issue tokens (new students, or all with ``reissue``), in one transaction.

    Returns the (entry, token) pairs issued; earlier tokens of a reissued student are revoked.
    """
    issued: list[tuple[RosterEntry, str]] = []
    now = utc_now()
    for entry in entries:  # read_roster refuses them; a caller building entries itself is refused here
        if entry.id.lower() in RESERVED_IDS:
            raise UsageError(
                f"roster id {entry.id!r} is reserved for the instructor's token: give that student another id"
            )
    with store.transaction() as db:
        for entry in entries:
            known = store_roster.add_or_update(db, entry.id, entry.name, entry.email, now)
            if known and not reissue:
                continue
            auth.revoke_all(db, entry.id)
            issued.append((entry, auth.issue(db, entry.id, "student")))
    return issued


def issue_instructor_token(store: Store) -> str:
    """A new instructor token (earlier instructor tokens stay valid until revoked)."""
    with store.transaction() as db:
        return auth.issue(db, "instructor", auth.INSTRUCTOR)


def write_tokens(path: Path, issued: list[tuple[RosterEntry, str]]) -> None:
    """Write ``id,name,email,token`` rows to ``path``, created with mode 0600 (never readable by others:
    grader.student.store.write_owner_only)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # plain lines: `cut -d, -f4` gives the token
    writer.writerow(["id", "name", "email", "token"])
    for entry, token in issued:
        writer.writerow([entry.id, entry.name, entry.email, token])
    write_owner_only(path, buffer.getvalue())


def unignored_secret(path: Path) -> str:
    """A one-line warning when ``path`` (a tokens file) lies in a git work tree that does not ignore it, so that a
    `git add .` would commit the students' tokens; "" when it is ignored, outside any work tree, or git is absent."""
    folder = path.resolve().parent
    try:
        inside = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True, timeout=10
        )
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return ""
        ignored = subprocess.run(
            ["git", "-C", str(folder), "check-ignore", "-q", path.name], capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    if ignored.returncode == 0:
        return ""
    return (
        f"Warning: {path} holds students' tokens inside a git work tree that does not ignore it: add "
        f"'{path.name}' to .gitignore, or write the tokens outside the repository with -o FILE."
    )


def roster(store: Store) -> list[dict[str, str]]:
    """The roster rows (student, name, email), sorted by id."""
    return store_roster.rows(store.db)
