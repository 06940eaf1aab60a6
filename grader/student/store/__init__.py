"""The progress store: every graded attempt and quiz answer, and the course server's tables, in one SQLite file.

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

The package is the database's one owner: no module outside it issues SQL (tests/test_sql_owner.py).

- ``schema``: every table, as the ordered migrations; ``files``: where the file is and whether it is ours;
  ``lock``: who writes it (the serving lock); ``database``: :class:`Store`, opening and transactions;
- one module per table (or tables written together), holding its queries as functions of a
  ``sqlite_utils.Database``: ``students``, ``results`` (attempts, submissions, check results), ``quiz``,
  ``practice``, ``overrides``, ``extensions``, ``roster``, and the course server's.
"""

from __future__ import annotations

from grader.student.store.clock import utc_now
from grader.student.store.database import Store
from grader.student.store.files import (
    BUSY_TIMEOUT_MS,
    DB_ENV,
    DEFAULT_EXERCISES_DIR,
    default_db_path,
    exposed,
    inspect_file,
    write_owner_only,
)
from grader.student.store.lock import SERVING_SUFFIX, DatabaseServed, Serving, serve, served_by, serving_file
from grader.student.store.results import also_of_text, figure_of_text, figure_text
from grader.student.store.schema import (
    APPLICATION_ID,
    LTI_SCHEMA,
    MIGRATIONS,
    SCHEMA_VERSION,
    m3_quiz_items,
    m11_lti,
)

__all__ = [
    "APPLICATION_ID",
    "BUSY_TIMEOUT_MS",
    "DB_ENV",
    "DEFAULT_EXERCISES_DIR",
    "LTI_SCHEMA",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SERVING_SUFFIX",
    "DatabaseServed",
    "Serving",
    "Store",
    "also_of_text",
    "default_db_path",
    "exposed",
    "figure_of_text",
    "figure_text",
    "inspect_file",
    "m3_quiz_items",
    "m11_lti",
    "serve",
    "served_by",
    "serving_file",
    "utc_now",
    "write_owner_only",
]
