"""The store's schema: every table of the database, as an ordered list of migrations.

The schema is versioned with ``PRAGMA user_version``: ``MIGRATIONS[k]`` takes version k to k+1, each run in its
own transaction by :meth:`grader.student.store.Store.migrate`. Our files carry ``PRAGMA application_id =
APPLICATION_ID``. Every table lives here, the course server's (roster, tokens, jobs, LTI's) included; the
queries on a table live in the module of the package that owns it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils

APPLICATION_ID = 0x4E4F524D  # "NORM": marks a file as a normgrade progress database


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
            "selectors": str,  # JSON list of the exercise ids to grade
            "status": str,  # received, queued, running, done, error
            "received_at": str,  # the upload time: what deadlines are judged by
            "tries": int,  # grading tries started (at most server.jobs.MAX_TRIES)
            "task_id": str,  # the queue's task id of the current try
            "worker": str,  # host:pid of the worker that began the current try
            "attempt_id": int,  # the recorded attempt, once done
            "error": str,  # why it could not be graded (status error), or a retry note
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
            "score": float,  # NULL: the override is withdrawn, the graded score counts again
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
            "student": str,  # a student id, or NULL for a group's
            "grp": str,  # a group of course.toml's [groups], or NULL for a student's
            "chapter": str,
            "due": str,  # NULL: withdraws the student's earlier dashboard extensions of the chapter
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
            "exercises": str,  # JSON list of the exercise ids rescored ([] : all)
            "uploads": int,  # uploads graded again
            "changes": str,  # JSON list of the changed counted scores (grader.term.rescore.Change)
            "errors": str,  # JSON list of uploads that could not be graded again, with the reason
        },
        pk="id",
    )
    db.table("regrade_requests").create(
        {
            "id": int,
            "student": str,
            "exercise": str,
            "job_id": int,  # the upload (server job) the request is about; NULL when graded locally
            "submission_id": int,  # the result asked about
            "reason": str,
            "created_at": str,
            "status": str,  # open, answered
            "reply": str,
            "override": float,  # the score set by the answer (NULL: the graded score stands)
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
    """Version 11: the LTI 1.3 tables (grader/server/lti/, lti_services/), in the store's schema like the others.

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
    db.table("practice_schedule").create(
        {"student": str, "concept": str, "card": str, "due": str, "streak": int, "mastered": int, "reviewed": str},
        pk=("student", "concept"),
    )


def m13_check_locations(db: sqlite_utils.Database) -> None:
    """Version 13: where a failing check's computation leaves the reference's (``CheckResult.where``, round 5's
    location: ``{"file", "line", "code"}``) as compact JSON, NULL when nothing was located."""
    db.table("check_results").add_column("location", str)


def m14_practice_reviews(db: sqlite_utils.Database) -> None:
    """Version 14: the practice review log, one row per review (:class:`grader.student.practice_schedule.Review`):
    its id (unique, so a merge replayed adds nothing twice), the concept, the question asked (None: a graded
    upload's miss), the rating (``again``/``good``), when (ISO 8601 UTC) and where it was made
    (``local``/``server``). A concept's schedule row is the replay of its reviews."""
    db.table("practice_reviews").create(
        {"student": str, "id": str, "concept": str, "question": str, "rating": str, "reviewed_at": str, "origin": str},
        pk=("student", "id"),
        not_null={"concept", "rating", "reviewed_at", "origin"},
    )
    db.execute("CREATE INDEX practice_reviews_by_time ON practice_reviews (student, concept, reviewed_at)")


Migration = Callable[["sqlite_utils.Database"], None]
MIGRATIONS: list[Migration] = [
    m1_core,
    m2_quiz,
    m3_quiz_items,
    m4_server,
    m5_score_overrides,
    m6_term,
    m7_check_figures,
    m8_held_jobs,
    m9_file_blobs,
    m10_instructor_figures,
    m11_lti,
    m12_practice_schedule,
    m13_check_locations,
    m14_practice_reviews,
]
SCHEMA_VERSION = len(MIGRATIONS)
