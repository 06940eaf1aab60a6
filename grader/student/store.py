"""The progress store: every graded attempt and quiz answer, in one SQLite file.

Storage is a step after grading, never inside it: ``grade submit`` grades,
then calls :meth:`Store.record_report`. The file is opened through
sqlite-utils in WAL mode with a busy timeout, so a class of students (or
two terminals) can write at once, and each attempt is one transaction: a
crash or a kill mid-way leaves either the whole attempt or none of it, and
never touches earlier ones.

The schema is versioned with ``PRAGMA user_version`` and an ordered list of
migrations (``MIGRATIONS[k]`` takes version k to k+1, each in its own
transaction). Our files carry ``PRAGMA application_id = APPLICATION_ID``;
a file that is not SQLite, fails ``PRAGMA quick_check``, holds someone
else's tables, or has a newer schema is reported with :class:`StoreError`
and is never written to.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.student import jsonsafe
from grader.student.course import DEFAULT_COURSE, Course, Extension, counted_score, logged_by, parse_time
from grader.student.errors import StoreError
from grader.student.engine.model import GradeReport, exercise_seed

if TYPE_CHECKING:
    import sqlite_utils

APPLICATION_ID = 0x4E4F524D  # "NORM": marks a file as a normgrade progress database
SQLITE_NOTADB = 26  # SQLite's result code for a file whose header is not SQLite's
SERVING_SUFFIX = "-serving"  # <database>-serving: the server's lock file (pid and URL), see serve()
BUSY_TIMEOUT_MS = 5000
DB_ENV = "GRADE_DB"


def default_db_path(exercises_dir: Path) -> Path:
    """``$GRADE_DB`` when set, else ``<exercises_dir>/../.grade/progress.db``."""
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env)
    return Path(exercises_dir).resolve().parent / ".grade" / "progress.db"


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string (seconds precision)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --- migrations ---------------------------------------------------------------


def m1_core(db: sqlite_utils.Database) -> None:
    """Version 1: students, attempts, submissions (one per exercise), check_results."""
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.table("students").create({"name": str, "created_at": str}, pk="name")
    db.table("attempts").create(
        {
            "id": int,
            "student": str,
            "started_at": str,
            "duration": float,
            "grader_version": str,
            "files_hash": str,
            "score": float,
            "max_score": float,
        },
        pk="id",
        foreign_keys=[("student", "students", "name")],
    )
    db.table("submissions").create(
        {
            "id": int,
            "attempt_id": int,
            "student": str,
            "exercise": str,
            "score": float,
            "max_score": float,
            "status": str,
            "started_at": str,
            "duration": float,
            "grader_version": str,
            "files_hash": str,
            "seed": str,
            "message": str,
            "output": str,
        },
        pk="id",
        foreign_keys=[("attempt_id", "attempts", "id"), ("student", "students", "name")],
    )
    db.table("check_results").create(
        {
            "id": int,
            "submission_id": int,
            "name": str,
            "passed": int,
            "score": float,
            "max_score": float,
            "message": str,
            "misconception": str,
        },
        pk="id",
        foreign_keys=[("submission_id", "submissions", "id")],
    )
    db.table("submissions").create_index(["student", "exercise"])
    db.table("attempts").create_index(["student", "files_hash"])
    db.table("check_results").create_index(["submission_id"])


def m2_quiz(db: sqlite_utils.Database) -> None:
    """Version 2: quiz_attempts, one row per answered quiz question."""
    db.table("quiz_attempts").create(
        {
            "id": int,
            "student": str,
            "chapter": str,
            "question": str,
            "answer": str,
            "correct": int,
            "answered_at": str,
        },
        pk="id",
        foreign_keys=[("student", "students", "name")],
    )
    db.table("quiz_attempts").create_index(["student", "chapter"])


def m3_quiz_items(db: sqlite_utils.Database) -> None:
    """Version 3: per quiz answer, the rendered parameters (JSON, "" for a fixed question) and
    whether it was the student's first answer to that question (for item analysis)."""
    db.table("quiz_attempts").add_column("params", str, not_null_default="")
    db.table("quiz_attempts").add_column("first_try", int, not_null_default=0)


def m4_server(db: sqlite_utils.Database) -> None:
    """Version 4: the course server's roster, hashed tokens, upload jobs and their files.

    Only ``grade serve`` (and ``grade roster``) write these tables; see
    grader/queue/records.py.
    """
    db.table("roster").create({"student": str, "name": str, "email": str, "created_at": str}, pk="student")
    db.table("tokens").create(
        {"hash": str, "student": str, "role": str, "created_at": str, "revoked": int},
        pk="hash",
        defaults={"revoked": 0},
    )
    db.table("tokens").create_index(["student"])
    db.table("jobs").create(
        {
            "id": int,
            "student": str,
            "idempotency_key": str,
            "files_hash": str,
            "selectors": str,       # JSON list of the exercise ids to grade
            "status": str,          # received, queued, running, done, error
            "received_at": str,     # the upload time: what deadlines are judged by
            "tries": int,           # grading tries started (at most server.jobs.MAX_TRIES)
            "task_id": str,         # the queue's task id of the current try
            "worker": str,          # host:pid of the worker that began the current try
            "attempt_id": int,      # the recorded attempt, once done
            "error": str,           # why it could not be graded (status error), or a retry note
            "finished_at": str,
        },
        pk="id",
        foreign_keys=[("student", "students", "name")],
    )
    db.table("jobs").create_index(["student", "idempotency_key"], unique=True)
    db.table("jobs").create_index(["status"])
    db.table("job_files").create(
        {"job_id": int, "name": str, "content": bytes},
        pk=("job_id", "name"),
        foreign_keys=[("job_id", "jobs", "id")],
    )


def m5_score_overrides(db: sqlite_utils.Database) -> None:
    """Version 5: the instructor's manual score overrides, an append-only log.

    The latest row of a (student, exercise) is the one in force; a row with a
    NULL score withdraws the override. Every row carries the required comment.
    Written only by the course server's dashboard (grader/server/dashboard.py).
    """
    db.table("score_overrides").create(
        {
            "id": int,
            "student": str,
            "exercise": str,
            "score": float,      # NULL: the override is withdrawn, the graded score counts again
            "comment": str,
            "author": str,
            "created_at": str,
        },
        pk="id",
    )
    db.table("score_overrides").create_index(["student", "exercise"])


def m6_term(db: sqlite_utils.Database) -> None:
    """Version 6: the instructor's term (docs/term.md): extensions, rescorings, regrade requests.

    - ``extensions``: the dashboard's log of extensions (append-only; a row with
      a NULL due withdraws the student's earlier ones of that chapter), read by
      :meth:`Store.effective_course` after the course file's own.
    - ``submissions.superseded_by``: the id of the submission row that grades
      the same upload again (``grade rescore``); NULL for the row in force. The
      old row and its checks stay as they were. ``submissions.rescoring_id``:
      the rescoring that wrote a row (NULL: graded at upload).
    - ``rescorings``: one row per ``grade rescore`` (its time, grader version,
      exercises, and the changed counted scores as JSON).
    - ``regrade_requests``: a student's request about one upload's result and
      the instructor's answer (a reply, and optionally an override).
    """
    db.table("submissions").add_column("superseded_by", int)
    db.table("submissions").add_column("rescoring_id", int)
    db.table("extensions").create(
        {
            "id": int,
            "student": str,      # a student id, or NULL for a group's
            "grp": str,          # a group of course.toml's [groups], or NULL for a student's
            "chapter": str,
            "due": str,          # NULL: withdraws the student's earlier dashboard extensions of the chapter
            "late_penalty": float,
            "late_until": str,
            "reason": str,
            "author": str,
            "created_at": str,
        },
        pk="id",
    )
    db.table("rescorings").create(
        {
            "id": int,
            "started_at": str,
            "finished_at": str,
            "grader_version": str,
            "exercises": str,    # JSON list of the exercise ids rescored ([] : all)
            "uploads": int,      # uploads graded again
            "changes": str,      # JSON list of the changed counted scores (grader.term.rescore.Change)
            "errors": str,       # JSON list of uploads that could not be graded again, with the reason
        },
        pk="id",
    )
    db.table("regrade_requests").create(
        {
            "id": int,
            "student": str,
            "exercise": str,
            "job_id": int,           # the upload (server job) the request is about; NULL when graded locally
            "submission_id": int,    # the result asked about
            "reason": str,
            "created_at": str,
            "status": str,           # open, answered
            "reply": str,
            "override": float,       # the score set by the answer (NULL: the graded score stands)
            "answered_by": str,
            "answered_at": str,
        },
        pk="id",
    )
    db.table("regrade_requests").create_index(["student"])
    db.table("regrade_requests").create_index(["status"])



def m7_check_figures(db: sqlite_utils.Database) -> None:
    """Version 7: a failing check's picture data (``CheckResult.figure``, grader/student/feedback/figures.py) as compact
    JSON, NULL when none: the server's report of an upload and the dashboard draw from it; and the further
    known mistakes behind it (``CheckResult.also``, "and also ..."), a JSON list, NULL when none."""
    db.table("check_results").add_column("figure", str)
    db.table("check_results").add_column("also", str)


def m8_held_jobs(db: sqlite_utils.Database) -> None:
    """Version 8: a server job's held exercises (``not_graded``: the grader's machine failed), graded again by the
    server itself (grader/queue/records.py, docs/server.md "Held uploads").

    - ``jobs.held``: JSON list of the exercise ids held, waiting for the machine to be fixed (NULL: none);
      ``held_reason``: why, in one line; ``held_at``: when the job was last held;
    - ``jobs.grading``: JSON list of the exercise ids the current round grades (NULL: every one of the upload);
    - ``jobs.first_try``: the current round's first try (task ids count on: ``job-<id>-try-<n>``);
    - ``jobs.regrades``: rounds started again for held exercises (the back-off grows with them);
    - ``jobs.rate_free``: 1 when none of the upload's exercises was graded in its first round (it counts against
      no rate limit).
    """
    for name in ("held", "held_reason", "held_at", "grading"):
        db.table("jobs").add_column(name, str)
    db.table("jobs").add_column("first_try", int, not_null_default=1)
    db.table("jobs").add_column("regrades", int, not_null_default=0)
    db.table("jobs").add_column("rate_free", int, not_null_default=0)


def m9_file_blobs(db: sqlite_utils.Database) -> None:
    """Version 9: uploaded files are content-addressed (``grader.queue.records.store_files``).

    ``blobs`` holds each distinct file content once, keyed by its sha256; a
    ``job_files`` row names it in ``sha256`` (its own ``content`` NULL), so a
    ``base.py`` every student uploads, or a class graded again by ``grade
    batch``, is stored once. Rows written before keep their ``content``.
    """
    db.table("blobs").create({"sha256": str, "content": bytes}, pk="sha256")
    db.table("job_files").add_column("sha256", str)


def m10_instructor_figures(db: sqlite_utils.Database) -> None:
    """Version 10: a hidden check's full picture, its expected values drawn (``CheckResult.instructor_figure``), as
    compact JSON, NULL when none: only the instructor's dashboard reads it; what a student is served is
    ``figure``."""
    db.table("check_results").add_column("instructor_figure", str)


LTI_SCHEMA = """
CREATE TABLE IF NOT EXISTS lti_keys (kid TEXT PRIMARY KEY, private_pem TEXT NOT NULL, created_at TEXT NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0, signs_from REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS lti_states (state TEXT PRIMARY KEY, nonce TEXT NOT NULL, issuer TEXT NOT NULL,
    client_id TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS lti_states_created ON lti_states (created);
CREATE TABLE IF NOT EXISTS lti_nonces (nonce TEXT PRIMARY KEY, issuer TEXT NOT NULL, used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS lti_contexts (key TEXT PRIMARY KEY, issuer TEXT NOT NULL, client_id TEXT NOT NULL,
    deployment_id TEXT NOT NULL, context_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
    memberships_url TEXT NOT NULL DEFAULT '', lineitems_url TEXT NOT NULL DEFAULT '',
    scopes TEXT NOT NULL DEFAULT '[]', updated_at TEXT NOT NULL, lineitem_url TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS lti_bindings (issuer TEXT NOT NULL, client_id TEXT NOT NULL, context_id TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '', bound_at TEXT NOT NULL, bound_by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (issuer, client_id, context_id));
CREATE TABLE IF NOT EXISTS lti_users (issuer TEXT NOT NULL, sub TEXT NOT NULL, student TEXT NOT NULL,
    PRIMARY KEY (issuer, sub));
CREATE TABLE IF NOT EXISTS lti_members (context_key TEXT NOT NULL, sub TEXT NOT NULL, student TEXT NOT NULL,
    role TEXT NOT NULL, status TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (context_key, sub));
CREATE TABLE IF NOT EXISTS lti_tokens (hash TEXT PRIMARY KEY, student TEXT NOT NULL, issuer TEXT NOT NULL,
    sub TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lti_line_items (context_key TEXT NOT NULL, resource_id TEXT NOT NULL, url TEXT NOT NULL,
    label TEXT NOT NULL, score_maximum REAL NOT NULL, PRIMARY KEY (context_key, resource_id));
CREATE TABLE IF NOT EXISTS lti_scores (id INTEGER PRIMARY KEY AUTOINCREMENT, context_key TEXT NOT NULL,
    student TEXT NOT NULL, sub TEXT NOT NULL, resource_id TEXT NOT NULL, label TEXT NOT NULL,
    score_given REAL NOT NULL, score_maximum REAL NOT NULL, timestamp TEXT NOT NULL, status TEXT NOT NULL,
    tries INTEGER NOT NULL DEFAULT 0, task_id TEXT, queued_at REAL, next_try REAL NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '', posted_at TEXT, missing_since REAL);
CREATE INDEX IF NOT EXISTS lti_scores_open ON lti_scores (status);
CREATE INDEX IF NOT EXISTS lti_scores_item ON lti_scores (context_key, sub, resource_id);
CREATE TABLE IF NOT EXISTS lti_refusals (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,
    issuer TEXT NOT NULL, reason TEXT NOT NULL);
"""
# LTI columns added after a table's first release: (table, column, definition), added to older databases
LTI_ADDED_COLUMNS = (
    ("lti_keys", "signs_from", "REAL NOT NULL DEFAULT 0"),
    ("lti_contexts", "lineitem_url", "TEXT NOT NULL DEFAULT ''"),
)


def m11_lti(db: sqlite_utils.Database) -> None:
    """Version 11: the LTI 1.3 tables (grader/server/lti.py, lti_services.py), in the store's schema like the others.

    Before, the server created them itself beside the versioned schema (``CREATE TABLE IF NOT EXISTS``, columns
    added when missing): a course database of that time has some of them, maybe without a later column, and
    keeps every row.
    """
    for statement in LTI_SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    for table, column, definition in LTI_ADDED_COLUMNS:
        if column not in {c.name for c in db[table].columns}:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


def m12_practice_schedule(db: sqlite_utils.Database) -> None:
    """Version 12: the spaced-retrieval schedule, one row per student and concept
    (:mod:`grader.student.practice_schedule`): FSRS's card as JSON, when it is due, the clean streak, mastery and
    the last review (ISO 8601 UTC)."""
    db.table("practice_schedule").create({"student": str, "concept": str, "card": str, "due": str, "streak": int,
                                    "mastered": int, "reviewed": str}, pk=("student", "concept"))


def m13_check_locations(db: sqlite_utils.Database) -> None:
    """Version 13: where a failing check's computation leaves the reference's (``CheckResult.where``, round 5's
    location: ``{"file", "line", "code"}``) as compact JSON, NULL when nothing was located."""
    db.table("check_results").add_column("location", str)


Migration = Callable[["sqlite_utils.Database"], None]
MIGRATIONS: list[Migration] = [
    m1_core, m2_quiz, m3_quiz_items, m4_server, m5_score_overrides, m6_term, m7_check_figures, m8_held_jobs,
    m9_file_blobs, m10_instructor_figures, m11_lti, m12_practice_schedule, m13_check_locations,
]
SCHEMA_VERSION = len(MIGRATIONS)


def figure_text(figure: dict[str, Any] | None) -> str | None:
    """A figure as the compact JSON stored in ``check_results.figure`` (None stays NULL); inf and NaN are kept in
    the marked form of :mod:`grader.student.jsonsafe`."""
    return None if figure is None else jsonsafe.dumps(figure, separators=(",", ":"))


def also_of_text(text: str | None) -> list[str]:
    """The stored further mistakes of a check back ([] for NULL or anything that is not a list of ids)."""
    try:
        ids = json.loads(text) if text else []
    except ValueError:
        return []
    return [str(i) for i in ids] if isinstance(ids, list) else []


def figure_of_text(text: str | None) -> dict[str, Any] | None:
    """The stored figure back; None for NULL or anything that is not a JSON object (never an exception)."""
    if not text:
        return None
    try:
        figure = jsonsafe.loads(text)
    except (ValueError, RecursionError):
        return None
    return figure if isinstance(figure, dict) else None


# --- opening safely -----------------------------------------------------------


def _refuse(path: Path, reason: str) -> StoreError:
    reason = " ".join(reason.split())  # one line, whatever SQLite's message holds
    return StoreError(f"{path} is not a normgrade progress database ({reason}): pass another --db")


def exposed(path: Path) -> str | None:
    """One line when the database file (token hashes, the LTI key) may be read by its group or others, with
    the command that makes it owner-only; None when it is 0600 (or missing)."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return f"{path} is readable by other users (mode {mode:o}): it holds token hashes and keys; run chmod 600 {path}"


def inspect_file(path: Path) -> int:
    """Check, without writing, that ``path`` is ours or empty; return its schema version.

    Raises StoreError for a non-SQLite or corrupt file, a foreign database
    (tables we do not know and no application_id marker) or a newer schema.
    The file is read through SQLite alone, never with a plain ``open()``:
    closing any descriptor of a file drops every POSIX lock the process holds
    on it (SQLite's documented pitfall), and SQLite keeps its own descriptors
    open while one of its connections in the process holds a lock, so an
    inspection never takes a server's lock away from it.
    """
    try:
        if path.stat().st_size == 0:
            return 0  # an empty file is a new database
    except OSError as exc:
        raise StoreError(f"cannot read {path} ({exc.strerror}): pass another --db") from exc
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} ({exc}): pass another --db") from exc
    try:
        check = [row[0] for row in conn.execute("PRAGMA quick_check")]
        if check != ["ok"]:
            raise _refuse(path, "corrupt: " + "; ".join(str(c) for c in check[:3]))
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreError(f"{path} is locked by another process ({exc}): try again") from exc
        raise _refuse(path, str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) == SQLITE_NOTADB:
            raise _refuse(path, "not an SQLite file") from exc
        raise _refuse(path, f"corrupt: {exc}") from exc
    finally:
        conn.close()
    if app_id != APPLICATION_ID:
        if tables or version:
            shown = ", ".join(sorted(tables)[:5]) or "none"
            raise _refuse(path, f"it holds tables normgrade does not know: {shown}")
        return 0
    if version > SCHEMA_VERSION:
        raise _refuse(
            path, f"schema version {version} is newer than this grader's {SCHEMA_VERSION}; upgrade normgrade"
        )
    return version


# --- who writes a database: the one process serving it, or (while none does) a command -----------------


def serving_file(path: Path) -> Path:
    """``<database>-serving``: the file a server's lock sits on, holding its pid and URL."""
    return path.with_name(path.name + SERVING_SUFFIX)


@dataclass
class _Hold:
    """This process's ``flock`` on one database's serving file: one descriptor, shared by its users."""

    fd: int
    serving: int = 0  # Serving claims of this process (exclusive lock while > 0)
    writers: int = 0  # stores opened by a writing command (shared lock while > 0 and not serving)


_HOLDS: dict[str, _Hold] = {}
_HOLDS_LOCK = threading.Lock()


def _key(path: Path) -> str:
    return str(path.resolve())


def _record(path: Path) -> dict[str, Any]:
    """What a server wrote in the serving file ({"pid", "url", "since"}; {} when there is nothing readable)."""
    try:
        doc = json.loads(serving_file(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _owner_text(path: Path) -> str:
    """Who serves ``path``, from its serving file: "pid N at URL" (empty when unreadable)."""
    doc = _record(path)
    if "pid" not in doc:
        return ""
    return f"pid {doc['pid']}" + (f" at {doc['url']}" if doc.get("url") else "")


def _held_exclusively(path: Path) -> bool:
    """Whether another process holds the serving file's lock exclusively (a server), not shared or not at all."""
    import fcntl

    try:
        fd = os.open(serving_file(path), os.O_RDONLY)
    except OSError:
        return False  # never served
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # the serving file, never the database: no SQLite lock is dropped; our probe ends


def served_by(path: Path | str) -> dict[str, Any] | None:
    """The serving file's record (pid, url) when *another* process serves ``path`` now, else None."""
    path = Path(path)
    with _HOLDS_LOCK:
        if _key(path) in _HOLDS:
            return None  # this process holds it: it serves it, or a command of ours writes it
        if not _held_exclusively(path):
            return None
    return _record(path)


def _open_serving_file(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # a new database's folder, as Store.open makes it
        return os.open(serving_file(path), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create {serving_file(path)} ({exc.strerror}): pass another --db") from exc


class DatabaseServed(StoreError):
    """A command would write a database that a running server owns (one line: who serves it, what to do)."""

    def __init__(self, path: Path, command: str, owner: str) -> None:
        super().__init__(
            f"{path} is served by grade serve ({owner or 'another process'}): `{command}` does not write a "
            "database a server owns; use the server (its dashboard or API), or stop it and run this again")
        self.path = path
        self.owner = owner


def _hold_for_writer(path: Path, command: str) -> str:
    """A shared lock on the serving file for a writing command: refused while another process serves."""
    import fcntl

    key = _key(path)
    with _HOLDS_LOCK:
        hold = _HOLDS.get(key)
        if hold is None:
            fd = _open_serving_file(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise DatabaseServed(path, command, _owner_text(path)) from None
            hold = _HOLDS[key] = _Hold(fd)
        hold.writers += 1
    return key


def _release(key: str, serving: bool) -> None:
    import fcntl

    with _HOLDS_LOCK:
        hold = _HOLDS.get(key)
        if hold is None:
            return
        if serving:
            hold.serving -= 1
        else:
            hold.writers -= 1
        if serving and hold.serving <= 0:
            os.ftruncate(hold.fd, 0)  # no stale pid or URL is ever shown for a server that is gone
        if hold.serving <= 0 and hold.writers <= 0:
            del _HOLDS[key]
            os.close(hold.fd)  # closing the descriptor ends its flock
        elif hold.serving <= 0:
            fcntl.flock(hold.fd, fcntl.LOCK_SH)  # back to a writing command's shared lock


def _serving(path: Path) -> bool:
    with _HOLDS_LOCK:
        hold = _HOLDS.get(_key(path))
        return hold is not None and hold.serving > 0


class Serving:
    """This process serves a database: it alone writes it until :meth:`release` (``grade serve``).

    :func:`serve` takes an exclusive ``flock`` on ``<database>-serving`` and
    writes the process's pid and URL there; a writing command in another
    process (:meth:`Store.open` with ``writer``) is refused in one line while
    it is held, and a server does not start while such a command runs. The
    lock is a BSD ``flock`` on a file of its own, so SQLite's POSIX locks on
    the database are never touched by it; the kernel drops it when the
    process ends, however it ends.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self._key: str | None = key

    def release(self) -> None:
        if self._key is not None:
            _release(self._key, serving=True)
            self._key = None


def serve(path: Path | str, url: str = "") -> Serving:
    """Claim ``path`` for this process (the server); StoreError in one line when another holds it."""
    import fcntl

    path = Path(path)
    key = _key(path)
    with _HOLDS_LOCK:
        hold = _HOLDS.get(key)
        fd = hold.fd if hold is not None else _open_serving_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if hold is None:
                os.close(fd)
            else:  # a command of this process still writes: keep its shared lock (a conversion may drop it)
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if _held_exclusively(path):
                raise StoreError(f"{path} is already served by another grade serve "
                                 f"({_owner_text(path) or 'another process'})") from None
            raise StoreError(f"{path} is open in another grade command: wait for it to finish, then start the "
                             "server again") from None
        if hold is None:
            hold = _HOLDS[key] = _Hold(fd)
        hold.serving += 1
        record = json.dumps({"pid": os.getpid(), "url": url, "since": utc_now()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
    return Serving(path, key)


class Store:
    """An open progress database. Use :meth:`Store.open`; close it (or use ``with``)."""

    def __init__(self, db: sqlite_utils.Database, path: Path) -> None:
        self.db = db
        self.path = path
        self._hold: str | None = None  # a writing command's key in _HOLDS (Store.open's writer)

    # -- lifecycle --

    @classmethod
    def open(cls, path: Path | str, writer: str | None = None) -> "Store":
        """Open (creating folder and file when missing) and migrate to SCHEMA_VERSION: THE way to open a file.

        Every process and thread opens a database here. The file is inspected
        first (:func:`inspect_file`, through SQLite alone, so a server's locks
        are never dropped), except in the process that serves it
        (:func:`serve`), where it was inspected when claimed: its threads'
        connections open directly. ``writer`` names a command that writes
        (``"grade roster import"``): it is refused with :class:`DatabaseServed`
        while another process serves the file, and holds the file against a
        server starting until the store is closed.
        """
        path = Path(path)
        if path.is_dir():
            raise _refuse(path, "a folder")
        hold = _hold_for_writer(path, writer) if writer is not None else None
        try:
            store = cls._connect(path, inspect=path.exists() and not _serving(path))
        except BaseException:
            if hold is not None:
                _release(hold, serving=False)
            raise
        store._hold = hold
        return store

    @classmethod
    def _connect(cls, path: Path, inspect: bool) -> "Store":
        if inspect:
            inspect_file(path)
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create {path.parent} ({exc}): pass another --db") from exc
        try:
            if not path.exists():  # owner-only from the start (it holds token hashes and keys); SQLite gives
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # its -wal and -shm the same mode
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
        except OSError as exc:
            raise StoreError(f"cannot create {path} ({exc}): pass another --db") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path} ({exc}): pass another --db") from exc
        import sqlite_utils  # here: it imports NumPy, which `grade submit` loads after starting its workers

        try:
            db = sqlite_utils.Database(conn, execute_plugins=False)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA foreign_keys = ON")
            if db.journal_mode != "wal":
                db.enable_wal()
            store = cls(db, path)
            store.migrate()
        except sqlite3.OperationalError as exc:
            conn.close()
            raise StoreError(f"cannot use {path} ({exc}): pass another --db") from exc
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise _refuse(path, str(exc)) from exc
        return store

    def close(self) -> None:
        """Close the connection (and end a writing command's hold on the file)."""
        self.db.close()
        if self._hold is not None:
            _release(self._hold, serving=False)
            self._hold = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        """The schema version stored in the file (PRAGMA user_version)."""
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction (BEGIN IMMEDIATE: waits for the write lock up to the busy timeout)."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def migrate(self, target: int = SCHEMA_VERSION) -> None:
        """Apply MIGRATIONS[version:target], each in one transaction with its version bump."""
        for index in range(target):
            with self.transaction() as db:
                # re-read inside the lock: another process may have migrated meanwhile
                current = int(db.execute("PRAGMA user_version").fetchone()[0])
                if current > index:
                    continue
                MIGRATIONS[index](db)
                db.execute(f"PRAGMA user_version = {index + 1}")

    # -- writing --

    def _ensure_student(self, db: sqlite_utils.Database, student: str, when: str) -> None:
        db.execute("INSERT OR IGNORE INTO students (name, created_at) VALUES (?, ?)", [student, when])

    def save_practice_entries(self, student: str, rows: list[dict[str, Any]]) -> None:
        """Write a student's schedule rows (:func:`grader.student.practice_schedule.to_row`), replacing each
        concept's row, in one transaction."""
        with self.transaction() as db:
            self._ensure_student(db, student, utc_now())
            for row in rows:
                db.table("practice_schedule").upsert({"student": student, **row}, pk=("student", "concept"))

    def record_report(
        self,
        report: GradeReport,
        grader_version: str,
        started_at: str | None = None,
        also: Callable[[sqlite_utils.Database, int], None] | None = None,
        into: int | None = None,
    ) -> int:
        """Record a whole graded attempt in one transaction; return the attempt id.

        One ``attempts`` row, one ``submissions`` row per graded exercise, one
        ``check_results`` row per check; a ``not_graded`` exercise (the grader's
        machine failed) leaves no row: it is no score of the student's. ``also(db, attempt_id)``, when given,
        runs inside the same transaction (the server marks its job done there,
        so an attempt is recorded exactly once). ``into``: an attempt recorded
        before, which the rows join (its score, max score and duration grow by
        the report's): the server's held exercises, graded later, belong to
        the upload's one attempt. Raises StoreError when the file is locked
        past the busy timeout or cannot be written.
        """
        when = started_at or utc_now()
        duration = sum(e.duration for e in report.exercises)
        try:
            with self.transaction() as db:
                self._ensure_student(db, report.student, when)
                if into is None:
                    attempt_id = db.table("attempts").insert(
                        {
                            "student": report.student,
                            "started_at": when,
                            "duration": duration,
                            "grader_version": grader_version,
                            "files_hash": report.files_hash,
                            "score": report.score,
                            "max_score": report.max_score,
                        }
                    ).last_pk
                else:
                    attempt_id = into
                    db.execute("UPDATE attempts SET score = score + ?, max_score = max_score + ?, "
                               "duration = duration + ? WHERE id = ?", [report.score, report.max_score, duration, into])
                assert attempt_id is not None  # an insert sets last_pk
                for ex in report.graded_exercises:
                    submission_id = db.table("submissions").insert(
                        {
                            "attempt_id": attempt_id,
                            "student": report.student,
                            "exercise": ex.id,
                            "score": ex.score,
                            "max_score": ex.max_score,
                            "status": ex.status,
                            "started_at": when,
                            "duration": ex.duration,
                            "grader_version": grader_version,
                            "files_hash": report.files_hash,
                            "seed": str(exercise_seed(report.student, ex.id)),
                            "message": ex.message,
                            "output": ex.output,
                        }
                    ).last_pk
                    db.table("check_results").insert_all(
                        {
                            "submission_id": submission_id,
                            "name": c.name,
                            "passed": int(c.passed),
                            "score": c.score,
                            "max_score": c.max_score,
                            "message": c.message,
                            "misconception": c.misconception,
                            # the column exists from version 7 on; a report without pictures never names it
                            **({"figure": figure_text(c.figure)} if c.figure is not None else {}),
                            **({"instructor_figure": figure_text(c.instructor_figure)}
                               if c.instructor_figure is not None else {}),
                            **({"also": json.dumps(list(c.also))} if c.also else {}),
                            **({"location": json.dumps(c.to_json()["where"])} if c.where else {}),
                        }
                        for c in ex.checks
                    )
                if also is not None:
                    also(db, int(attempt_id))
        except sqlite3.OperationalError as exc:
            raise StoreError(f"could not record the attempt in {self.path} ({exc})") from exc
        return int(attempt_id)

    def record_quiz_answer(
        self, student: str, chapter: str, question: str, answer: str, correct: bool,
        params: dict[str, Any] | None = None,
    ) -> bool:
        """Record one judged quiz answer with its parameters; return whether it was the
        student's first answer to that question (stored as ``first_try``)."""
        when = utc_now()
        try:
            with self.transaction() as db:
                self._ensure_student(db, student, when)
                earlier = db.execute(
                    "SELECT 1 FROM quiz_attempts WHERE student = ? AND chapter = ? AND question = ? LIMIT 1",
                    [student, chapter, str(question)],
                ).fetchone()
                db.table("quiz_attempts").insert(
                    {
                        "student": student,
                        "chapter": chapter,
                        "question": str(question),
                        "answer": str(answer),
                        "correct": int(bool(correct)),
                        "answered_at": when,
                        "params": json.dumps(params, sort_keys=True) if params else "",
                        "first_try": int(earlier is None),
                    }
                )
        except sqlite3.OperationalError as exc:
            raise StoreError(f"could not record the quiz answer in {self.path} ({exc})") from exc
        return earlier is None

    # -- reading --

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        return list(self.db.query(sql, params))

    def students(self) -> list[str]:
        """Every student with at least one recorded attempt or quiz answer, sorted."""
        return [r["name"] for r in self._rows("SELECT name FROM students ORDER BY name", [])]

    def attempts(self, student: str | None = None) -> list[dict[str, Any]]:
        """Attempt rows (id, student, started_at, duration, grader_version, files_hash, score, max_score), oldest
        first."""
        where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
        return self._rows(f"SELECT * FROM attempts {where} ORDER BY id", params)

    def submissions(
        self, student: str | None = None, exercise: str | None = None, superseded: bool = False
    ) -> list[dict[str, Any]]:
        """Submission rows, oldest upload first (then in the order recorded), optionally for one student and/or
        exercise. (A server's held exercise is recorded later, timed at its upload: it takes the upload's place.)

        Rows graded again by ``grade rescore`` are left out (their successor is
        in force) unless ``superseded``.
        """
        clauses: list[str] = [] if superseded else ["superseded_by IS NULL"]
        params: list[Any] = []
        if student is not None:
            clauses.append("student = ?")
            params.append(student)
        if exercise is not None:
            clauses.append("exercise = ?")
            params.append(exercise)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return self._rows(f"SELECT * FROM submissions {where} ORDER BY started_at, id", params)

    def check_results(self, submission_id: int) -> list[dict[str, Any]]:
        """The check rows of a submission in order; ``figure``, ``instructor_figure`` and ``where`` (the stored
        ``location``) are parsed dicts (None when none or unreadable)."""
        return [dict(row, figure=figure_of_text(row.get("figure")), also=also_of_text(row.get("also")),
                     instructor_figure=figure_of_text(row.get("instructor_figure")),
                     where=figure_of_text(row.get("location")))
                for row in self._check_rows(submission_id)]

    def _check_rows(self, submission_id: int) -> list[dict[str, Any]]:
        """The check rows of one submission, in grading order; ``passed`` as bool."""
        rows = self._rows(
            "SELECT * FROM check_results WHERE submission_id = ? ORDER BY id", [submission_id]
        )
        for row in rows:
            row["passed"] = bool(row["passed"])
        return rows

    def best_scores(self, student: str, course: Course | None = None) -> dict[str, dict[str, Any]]:
        """Per exercise, the score that counts under the course's rule (``grader.student.course.counted_score``).

        Keys: ``best_score`` (the counted score: the best ever without a course
        file), ``max_score``, ``last_status`` (of the latest submission),
        ``attempts``, ``latest_score`` (the latest attempt's score), ``best_raw``
        (the best score ever, before any late penalty) and ``late`` (the
        counted attempt was late).
        """
        course = course or DEFAULT_COURSE
        rows_by_exercise: dict[str, list[dict[str, Any]]] = {}
        for row in self.submissions(student=student):
            rows_by_exercise.setdefault(row["exercise"], []).append(row)
        best: dict[str, dict[str, Any]] = {}
        course = self.effective_course(course)
        for exercise, rows in rows_by_exercise.items():
            counted = counted_score(rows, course.chapter_of(exercise, student), course.rule)
            best[exercise] = {
                "best_score": counted.score,
                "max_score": counted.max_score,
                "last_status": counted.last_status,
                "attempts": counted.attempts,
                "latest_score": counted.latest,
                "best_raw": counted.best_raw,
                "late": counted.late,
            }
        return best

    def current_mistakes(self, student: str) -> list[dict[str, Any]]:
        """(exercise, misconception) named by the failing checks of a student's current (unsuperseded, not passed)
        submissions, in check order: what "practice this" offers."""
        return self._rows(
            "SELECT s.exercise, c.misconception FROM check_results c JOIN submissions s ON s.id = c.submission_id "
            "WHERE s.student = ? AND c.passed = 0 AND c.misconception IS NOT NULL AND c.misconception != '' "
            "AND s.status != 'passed' AND s.superseded_by IS NULL ORDER BY c.id", [student])

    def practice_entries(self, student: str) -> list[dict[str, Any]]:
        """A student's spaced-retrieval rows (``practice_schedule``), by concept."""
        return [{k: v for k, v in row.items() if k != "student"} for row in self.db.query(
            "SELECT * FROM practice_schedule WHERE student = ? ORDER BY concept", [student])]

    def quiz_attempts(self, student: str | None = None) -> list[dict[str, Any]]:
        """Quiz answer rows, oldest first; ``correct`` as bool."""
        where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
        rows = self._rows(f"SELECT * FROM quiz_attempts {where} ORDER BY id", params)
        for row in rows:
            row["correct"] = bool(row["correct"])
        return rows

    # -- reading for the instructor's dashboard (grader/server/dashboard.py, grader/term/class_report.py) --

    def submission_rows(self) -> list[dict[str, Any]]:
        """Every submission's scoring columns (no output), oldest upload first: one query for a whole class."""
        return self._rows(
            "SELECT id, attempt_id, student, exercise, score, max_score, status, started_at, message "
            "FROM submissions WHERE superseded_by IS NULL ORDER BY started_at, id", [])

    def diagnosed_mistakes(self, student: str | None = None, exercise: str | None = None) -> list[dict[str, Any]]:
        """(submission_id, misconception) of every failing check with a named mistake, in check order
        (of one student and/or one exercise when given)."""
        where, params = "", list[str]()
        if student is not None:
            where, params = where + " AND s.student = ?", params + [student]
        if exercise is not None:
            where, params = where + " AND s.exercise = ?", params + [exercise]
        return self._rows(
            "SELECT c.submission_id, c.misconception FROM check_results c JOIN submissions s "
            "ON s.id = c.submission_id WHERE c.passed = 0 AND c.misconception IS NOT NULL "
            f"AND c.misconception != '' AND s.status != 'passed' AND s.superseded_by IS NULL{where} ORDER BY c.id",
            params)

    def failing_checks(self, exercise: str) -> list[dict[str, Any]]:
        """Every failing check of one exercise: student, submission id, name, misconception, message."""
        return self._rows(
            "SELECT s.student, c.submission_id, c.name, c.misconception, c.message FROM check_results c "
            "JOIN submissions s ON s.id = c.submission_id WHERE s.exercise = ? AND c.passed = 0 "
            "AND s.superseded_by IS NULL ORDER BY c.id",
            [exercise])

    def score_overrides(self, student: str | None = None) -> list[dict[str, Any]]:
        """The override log (all students, or one), oldest first."""
        where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
        return self._rows(f"SELECT * FROM score_overrides {where} ORDER BY id", params)

    # -- extensions (docs/term.md) --

    def extension_log(self, student: str | None = None) -> list[dict[str, Any]]:
        """The dashboard's extension log (all students, or one), oldest first."""
        if not self.db["extensions"].exists():
            return []
        where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
        return self._rows(f"SELECT * FROM extensions {where} ORDER BY id", params)

    def effective_course(self, course: Course | None = None) -> Course:
        """The course with the dashboard's extensions after the course file's (``Course.with_extensions``).

        Every caller of the counted-score rule that has a store asks for its
        chapters here, so an extension granted from the dashboard counts
        everywhere at once.
        """
        course = course or DEFAULT_COURSE
        if course.log_applied:
            return course
        log = self.extension_log()
        if not log:
            return course
        items: list[Extension | tuple[str | None, str | None, str]] = []
        for row in log:
            if row["due"] is None:
                items.append((row["student"], row["grp"], row["chapter"]))
                continue
            items.append(Extension(
                chapter=row["chapter"], due=parse_time(row["due"]), reason=row["reason"] or "",
                student=row["student"], group=row["grp"], late_penalty=row["late_penalty"],
                late_until=None if row["late_until"] is None else parse_time(row["late_until"]),
                source=f"{logged_by(row['author'])} at {row['created_at']}",
            ))
        return replace(course.with_extensions(items), log_applied=True)

    def add_extension(self, student: str | None, group: str | None, chapter: str, due: datetime | None,
                      reason: str, author: str, late_penalty: float | None = None,
                      late_until: datetime | None = None) -> int:
        """Append one extension of a student or a group to the log (``due`` None: withdraw theirs for that
        chapter); its id. Validate it first (``course.check_extension``)."""
        row = {
            "student": student, "grp": group, "chapter": chapter,
            "due": None if due is None else due.isoformat(timespec="seconds"),
            "late_penalty": late_penalty,
            "late_until": None if late_until is None else late_until.isoformat(timespec="seconds"),
            "reason": reason, "author": author, "created_at": utc_now(),
        }
        try:
            with self.transaction() as db:
                extension_id = db.table("extensions").insert(row).last_pk
                assert extension_id is not None  # an insert sets last_pk
                return int(extension_id)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"could not record the extension in {self.path} ({exc})") from exc

    def roster_entries(self) -> dict[str, dict[str, Any]]:
        """The course server's roster, id -> {student, name, email} (empty without a roster)."""
        return {r["student"]: r for r in self._rows("SELECT student, name, email FROM roster", [])}

    def quiz_answer_summary(self) -> list[dict[str, Any]]:
        """Per student and quiz chapter: answers given (``answers``), the questions answered right at
        least once (``right``, a set) and the time of the latest answer (``last_at``)."""
        rows = self._rows(
            "SELECT student, chapter, COUNT(*) AS answers, MAX(answered_at) AS last_at, "
            "GROUP_CONCAT(CASE WHEN correct THEN question END, char(31)) AS right "
            "FROM quiz_attempts GROUP BY student, chapter", [])
        for row in rows:
            row["right"] = set(row["right"].split("\x1f")) if row["right"] else set()
        return rows

    def quiz_answer_rows(self) -> list[dict[str, Any]]:
        """Every quiz answer's student, chapter, question, answer and correct (bool), oldest first."""
        rows = self._rows("SELECT student, chapter, question, answer, correct FROM quiz_attempts ORDER BY id", [])
        for row in rows:
            row["correct"] = bool(row["correct"])
        return rows
