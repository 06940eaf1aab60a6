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

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.student.course import DEFAULT_COURSE, Course, Extension, counted_score, parse_time
from grader.student.errors import StoreError
from grader.student.engine.model import GradeReport, exercise_seed

if TYPE_CHECKING:
    import sqlite_utils

APPLICATION_ID = 0x4E4F524D  # "NORM": marks a file as a normgrade progress database
SQLITE_HEADER = b"SQLite format 3\x00"
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
    db["students"].create({"name": str, "created_at": str}, pk="name")
    db["attempts"].create(
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
    db["submissions"].create(
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
    db["check_results"].create(
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
    db["submissions"].create_index(["student", "exercise"])
    db["attempts"].create_index(["student", "files_hash"])
    db["check_results"].create_index(["submission_id"])


def m2_quiz(db: sqlite_utils.Database) -> None:
    """Version 2: quiz_attempts, one row per answered quiz question."""
    db["quiz_attempts"].create(
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
    db["quiz_attempts"].create_index(["student", "chapter"])


def m3_quiz_items(db: sqlite_utils.Database) -> None:
    """Version 3: per quiz answer, the rendered parameters (JSON, "" for a fixed question) and
    whether it was the student's first answer to that question (for item analysis)."""
    db["quiz_attempts"].add_column("params", str, not_null_default="")
    db["quiz_attempts"].add_column("first_try", int, not_null_default=0)


def m4_server(db: sqlite_utils.Database) -> None:
    """Version 4: the course server's roster, hashed tokens, upload jobs and their files.

    Only ``grade serve`` (and ``grade roster``) write these tables; see
    grader/server/records.py.
    """
    db["roster"].create({"student": str, "name": str, "email": str, "created_at": str}, pk="student")
    db["tokens"].create(
        {"hash": str, "student": str, "role": str, "created_at": str, "revoked": int},
        pk="hash",
        defaults={"revoked": 0},
    )
    db["tokens"].create_index(["student"])
    db["jobs"].create(
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
    db["jobs"].create_index(["student", "idempotency_key"], unique=True)
    db["jobs"].create_index(["status"])
    db["job_files"].create(
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
    db["score_overrides"].create(
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
    db["score_overrides"].create_index(["student", "exercise"])


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
    db["submissions"].add_column("superseded_by", int)
    db["submissions"].add_column("rescoring_id", int)
    db["extensions"].create(
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
    db["rescorings"].create(
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
    db["regrade_requests"].create(
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
    db["regrade_requests"].create_index(["student"])
    db["regrade_requests"].create_index(["status"])



def m7_check_figures(db: sqlite_utils.Database) -> None:
    """Version 7: a failing check's picture data (``CheckResult.figure``, grader/student/feedback/figures.py) as compact
    JSON, NULL when none: the server's report of an upload and the dashboard draw from it; and the further
    known mistakes behind it (``CheckResult.also``, "and also ..."), a JSON list, NULL when none."""
    db["check_results"].add_column("figure", str)
    db["check_results"].add_column("also", str)


def m8_instructor_figures(db: sqlite_utils.Database) -> None:
    """Version 8: a hidden check's full picture, its expected values drawn (``CheckResult.instructor_figure``), as
    compact JSON, NULL when none: only the instructor's dashboard reads it; what a student is served is
    ``figure``."""
    db["check_results"].add_column("instructor_figure", str)



Migration = Callable[["sqlite_utils.Database"], None]
MIGRATIONS: list[Migration] = [
    m1_core, m2_quiz, m3_quiz_items, m4_server, m5_score_overrides, m6_term, m7_check_figures,
    m8_instructor_figures,
]
SCHEMA_VERSION = len(MIGRATIONS)


def figure_text(figure: dict[str, Any] | None) -> str | None:
    """A figure as the compact JSON stored in ``check_results.figure`` (None stays NULL)."""
    return None if figure is None else json.dumps(figure, separators=(",", ":"), allow_nan=False)


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
        figure = json.loads(text)
    except ValueError:
        return None
    return figure if isinstance(figure, dict) else None


# --- opening safely -----------------------------------------------------------


def _refuse(path: Path, reason: str) -> StoreError:
    reason = " ".join(reason.split())  # one line, whatever SQLite's message holds
    return StoreError(f"{path} is not a normgrade progress database ({reason}): pass another --db")


def inspect_file(path: Path) -> int:
    """Check, without writing, that ``path`` is ours or empty; return its schema version.

    Raises StoreError for a non-SQLite or corrupt file, a foreign database
    (tables we do not know and no application_id marker) or a newer schema.
    """
    try:
        with open(path, "rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read {path} ({exc.strerror}): pass another --db") from exc
    if not header:
        return 0  # an empty file is a new database
    if header != SQLITE_HEADER:
        raise _refuse(path, "not an SQLite file")
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


class Store:
    """An open progress database. Use :meth:`Store.open`; close it (or use ``with``)."""

    def __init__(self, db: sqlite_utils.Database, path: Path) -> None:
        self.db = db
        self.path = path

    # -- lifecycle --

    @classmethod
    def open(cls, path: Path | str, inspect: bool = True) -> "Store":
        """Open (creating folder and file when missing) and migrate to SCHEMA_VERSION.

        ``inspect=False`` skips :func:`inspect_file`, for a second connection in a
        process that already holds one open on ``path`` (the course server's
        threads): inspect_file reads the header with a plain ``open()``, and
        closing that file descriptor drops every POSIX lock this process holds on
        the file, after which another process may think the database unused and
        remove its WAL while we still write to it.
        """
        path = Path(path)
        if path.is_dir():
            raise _refuse(path, "a folder")
        if path.exists() and inspect:
            inspect_file(path)
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create {path.parent} ({exc}): pass another --db") from exc
        try:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
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
        """Close the connection."""
        self.db.close()

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

    def record_report(
        self,
        report: GradeReport,
        grader_version: str,
        started_at: str | None = None,
        also: Callable[[sqlite_utils.Database, int], None] | None = None,
    ) -> int:
        """Record a whole graded attempt in one transaction; return the attempt id.

        One ``attempts`` row, one ``submissions`` row per graded exercise, one
        ``check_results`` row per check; a ``not_graded`` exercise (the grader's
        machine failed) leaves no row: it is no score of the student's. ``also(db, attempt_id)``, when given,
        runs inside the same transaction (the server marks its job done there,
        so an attempt is recorded exactly once). Raises StoreError when the file
        is locked past the busy timeout or cannot be written.
        """
        when = started_at or utc_now()
        try:
            with self.transaction() as db:
                self._ensure_student(db, report.student, when)
                attempt_id = db["attempts"].insert(
                    {
                        "student": report.student,
                        "started_at": when,
                        "duration": sum(e.duration for e in report.exercises),
                        "grader_version": grader_version,
                        "files_hash": report.files_hash,
                        "score": report.score,
                        "max_score": report.max_score,
                    }
                ).last_pk
                for ex in report.graded_exercises:
                    submission_id = db["submissions"].insert(
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
                    db["check_results"].insert_all(
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
                db["quiz_attempts"].insert(
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
        """Attempt rows (id, student, started_at, duration, grader_version, files_hash, score, max_score), oldest first."""
        where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
        return self._rows(f"SELECT * FROM attempts {where} ORDER BY id", params)

    def submissions(
        self, student: str | None = None, exercise: str | None = None, superseded: bool = False
    ) -> list[dict[str, Any]]:
        """Submission rows, oldest first, optionally for one student and/or exercise.

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
        return self._rows(f"SELECT * FROM submissions {where} ORDER BY id", params)

    def check_results(self, submission_id: int) -> list[dict[str, Any]]:
        """The check rows of a submission in order; ``figure`` and ``instructor_figure`` are parsed dicts (None when
        none or unreadable)."""
        return [dict(row, figure=figure_of_text(row.get("figure")), also=also_of_text(row.get("also")),
                     instructor_figure=figure_of_text(row.get("instructor_figure")))
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

    def quiz_attempts(self, student: str | None = None) -> list[dict[str, Any]]:
        """Quiz answer rows, oldest first; ``correct`` as bool."""
        where, params = ("WHERE student = ?", [student]) if student is not None else ("", [])
        rows = self._rows(f"SELECT * FROM quiz_attempts {where} ORDER BY id", params)
        for row in rows:
            row["correct"] = bool(row["correct"])
        return rows

    # -- reading for the instructor's dashboard (grader/server/dashboard.py, grader/term/class_report.py) --

    def submission_rows(self) -> list[dict[str, Any]]:
        """Every submission's scoring columns (no output), oldest first: one query for a whole class."""
        return self._rows(
            "SELECT id, attempt_id, student, exercise, score, max_score, status, started_at, message "
            "FROM submissions WHERE superseded_by IS NULL ORDER BY id", [])

    def diagnosed_mistakes(self, student: str | None = None, exercise: str | None = None) -> list[dict[str, Any]]:
        """(submission_id, misconception) of every failing check with a named mistake, in check order
        (of one student and/or one exercise when given)."""
        where, params = "", []
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
                source=f"dashboard, {row['author']} at {row['created_at']}",
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
                return int(db["extensions"].insert(row).last_pk)
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
