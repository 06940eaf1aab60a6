"""The open database: :class:`Store`, THE way every process and thread opens, migrates and writes it.

Each table's queries live in the module that owns it (results, quiz, practice, overrides, extensions, roster,
...); a :class:`Store` method opens the transaction and turns a locked file into a :class:`StoreError`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.student.course import DEFAULT_COURSE, Course, counted_score
from grader.student.engine.model import GradeReport
from grader.student.errors import StoreError
from grader.student.store import extensions, overrides, practice, quiz, results, roster, students
from grader.student.store.clock import utc_now
from grader.student.store.files import BUSY_TIMEOUT_MS, inspect_file, refuse
from grader.student.store.lock import hold_for_writer, release_hold, serving_here
from grader.student.store.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    import sqlite_utils


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
            raise refuse(path, "a folder")
        hold = hold_for_writer(path, writer) if writer is not None else None
        try:
            store = cls._connect(path, inspect=path.exists() and not serving_here(path))
        except BaseException:
            if hold is not None:
                release_hold(hold, serving=False)
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
            raise refuse(path, str(exc)) from exc
        return store

    def close(self) -> None:
        """Close the connection (and end a writing command's hold on the file)."""
        self.db.close()
        if self._hold is not None:
            release_hold(self._hold, serving=False)
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

    def save_practice_entries(
        self, student: str, rows: list[dict[str, Any]], reviews: list[dict[str, Any]] | None = None
    ) -> None:
        """Write a student's schedule rows (:func:`grader.student.practice_schedule.to_row`), replacing each
        concept's row, and append the ``reviews`` they were replayed from to the log (a review id already kept is
        skipped: :func:`grader.student.practice_schedule.review_row`), in one transaction."""
        with self.transaction() as db:
            students.ensure(db, student, utc_now())
            practice.add_reviews(db, student, reviews or [])
            practice.save(db, student, rows)

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
        try:
            with self.transaction() as db:
                return results.record(db, report, grader_version, started_at or utc_now(), also, into)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"could not record the attempt in {self.path} ({exc})") from exc

    def record_quiz_answer(
        self,
        student: str,
        chapter: str,
        question: str,
        answer: str,
        correct: bool,
        params: dict[str, Any] | None = None,
    ) -> bool:
        """Record one judged quiz answer with its parameters; return whether it was the
        student's first answer to that question (stored as ``first_try``)."""
        when = utc_now()
        try:
            with self.transaction() as db:
                students.ensure(db, student, when)
                return quiz.record_answer(db, student, chapter, question, answer, correct, params, when)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"could not record the quiz answer in {self.path} ({exc})") from exc

    def add_extension(
        self,
        student: str | None,
        group: str | None,
        chapter: str,
        due: datetime | None,
        reason: str,
        author: str,
        late_penalty: float | None = None,
        late_until: datetime | None = None,
    ) -> int:
        """Append one extension of a student or a group to the log (``due`` None: withdraw theirs for that
        chapter); its id. Validate it first (``course.check_extension``)."""
        try:
            with self.transaction() as db:
                return extensions.add(
                    db, student, group, chapter, due, reason, author, late_penalty, late_until, utc_now()
                )
        except sqlite3.OperationalError as exc:
            raise StoreError(f"could not record the extension in {self.path} ({exc})") from exc

    # -- reading: each a query of the module that owns the table --

    def students(self) -> list[str]:
        """Every student with at least one recorded attempt or quiz answer, sorted."""
        return students.names(self.db)

    def attempts(self, student: str | None = None) -> list[dict[str, Any]]:
        """Attempt rows, oldest first (:func:`results.attempts`)."""
        return results.attempts(self.db, student)

    def submissions(
        self, student: str | None = None, exercise: str | None = None, superseded: bool = False
    ) -> list[dict[str, Any]]:
        """Submission rows in force (or all, ``superseded``), oldest upload first (:func:`results.submissions`)."""
        return results.submissions(self.db, student, exercise, superseded)

    def check_results(self, submission_id: int) -> list[dict[str, Any]]:
        """The check rows of a submission in order (:func:`results.check_results`)."""
        return results.check_results(self.db, submission_id)

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
        """(exercise, misconception) of a student's current failing checks (:func:`results.current_mistakes`)."""
        return results.current_mistakes(self.db, student)

    def practice_entries(self, student: str) -> list[dict[str, Any]]:
        """A student's spaced-retrieval rows (``practice_schedule``), by concept."""
        return practice.entries(self.db, student)

    def practice_reviews(self, student: str, concept: str | None = None) -> list[dict[str, Any]]:
        """A student's practice review log (``practice_reviews``; one ``concept``'s or all), in time order."""
        return practice.reviews(self.db, student, concept)

    def quiz_attempts(self, student: str | None = None) -> list[dict[str, Any]]:
        """Quiz answer rows, oldest first; ``correct`` as bool."""
        return quiz.attempts(self.db, student)

    # -- reading for the instructor's dashboard (grader/server/dashboard.py, grader/term/class_report.py) --

    def submission_rows(self) -> list[dict[str, Any]]:
        """Every submission's scoring columns (no output), oldest upload first: one query for a whole class."""
        return results.submission_rows(self.db)

    def diagnosed_mistakes(self, student: str | None = None, exercise: str | None = None) -> list[dict[str, Any]]:
        """(submission_id, misconception) of every failing check with a named mistake
        (:func:`results.diagnosed_mistakes`)."""
        return results.diagnosed_mistakes(self.db, student, exercise)

    def failing_checks(self, exercise: str) -> list[dict[str, Any]]:
        """Every failing check of one exercise: student, submission id, name, misconception, message."""
        return results.failing_checks(self.db, exercise)

    def score_overrides(self, student: str | None = None) -> list[dict[str, Any]]:
        """The override log (all students, or one), oldest first."""
        return overrides.log(self.db, student)

    def extension_log(self, student: str | None = None) -> list[dict[str, Any]]:
        """The dashboard's extension log (all students, or one), oldest first."""
        return extensions.log(self.db, student)

    def effective_course(self, course: Course | None = None) -> Course:
        """The course with the dashboard's extensions after the course file's (``Course.with_extensions``).

        Every caller of the counted-score rule that has a store asks for its
        chapters here, so an extension granted from the dashboard counts
        everywhere at once.
        """
        return extensions.effective_course(self.db, course)

    def roster_entries(self) -> dict[str, dict[str, Any]]:
        """The course server's roster, id -> {student, name, email} (empty without a roster)."""
        return roster.entries(self.db)

    def quiz_answer_summary(self) -> list[dict[str, Any]]:
        """Per student and quiz chapter: answers (count), the questions answered right (a set), last_at."""
        return quiz.answer_summary(self.db)

    def quiz_answer_rows(self) -> list[dict[str, Any]]:
        """Every quiz answer's student, chapter, question, answer, correct (bool) and params, oldest first."""
        return quiz.answer_rows(self.db)
