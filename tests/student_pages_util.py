"""A course with one student's uploads in every state, for the tests of the student's pages (HTTP, browser, axe).

``seed(root)`` writes ``root/course.toml`` and ``root/course.db``: students ada and bob with tokens, the
instructor's token; ada's uploads, each stored as the server stores one (``records.create_job``), then left
in one state: graded with pictures (hidden checks of known mistakes, tests/figures_util.py), graded after a
due date (late), queued behind another, running, retried after a lost worker, and closed as not graded; bob
has one graded upload (the one ada must never see). Nothing runs: the pages are read as the server would
show them at that moment (``run_collector=False`` in-process, or ``grade serve --workers 0``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from grader.queue import records
from grader.student.course import Course, load_course
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store

from figures_util import graded
from server_util import Server, issue_tokens, with_quiz_chapters

NOW = datetime.now(timezone.utc).replace(microsecond=0)
PAST_DUE = NOW - timedelta(days=3)  # activations: due then, late work counts 70 % until LATE_UNTIL
LATE_UNTIL = NOW + timedelta(days=30)
FUTURE_DUE = NOW + timedelta(days=10)  # normalization: due then; ada's extension moves it to EXTENDED
EXTENDED = NOW + timedelta(days=17)
EXTENSION_REASON = "medical note, week 3"


def _toml_time(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def course_toml(attempts: int = 2, exam_release: datetime | None = None) -> str:
    """The course: activations (past due, late counts 70 %), normalization (due later; ada's extension), init (its
    quiz: initialisation)."""
    exam = "" if exam_release is None else f"release_feedback = {_toml_time(exam_release)}\n"
    return (
        f'name = "Deep networks (student pages)"\n\n[quiz]\nattempts = {attempts}\n\n'
        f'[[chapter]]\nname = "activations"\ndue = {_toml_time(PAST_DUE)}\nlate_penalty = 0.3\n'
        f"late_until = {_toml_time(LATE_UNTIL)}\n\n"
        f'[[chapter]]\nname = "normalization"\ndue = {_toml_time(FUTURE_DUE)}\n{exam}\n'
        f'[[chapter]]\nname = "init"\nquiz = "initialisation"\ndue = {_toml_time(FUTURE_DUE)}\n\n'
        f'[[extension]]\nstudent = "ada"\nchapter = "normalization"\ndue = {_toml_time(EXTENDED)}\n'
        f'reason = "{EXTENSION_REASON}"\n'
    )


@dataclass
class Seeded:
    """What :func:`seed` wrote: the files, the tokens and ada's uploads by state (job ids)."""

    db: Path
    course: Path
    tokens: dict[str, str]
    teacher: str
    jobs: dict[str, int]


def _stored(store: Store, course: Course, student: str, key: str, ids: list[str], when: datetime) -> dict[str, Any]:
    """An upload stored as the server stores one (its row and files), received at ``when``."""
    files = {f"{ids[0].split('.')[0]}.py": "# the student's code\n"}
    return records.create_job(store, student, key, files, ids, course, when).job


def seed(root: Path, attempts: int = 2, exam_release: datetime | None = None) -> Seeded:
    """Write the course and the uploads (module docstring) under ``root``."""
    course = root / "course.toml"
    course.write_text(with_quiz_chapters(course_toml(attempts, exam_release)), encoding="utf-8")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, ["ada", "bob"])
    jobs: dict[str, int] = {}
    rules = load_course(course)
    with Store.open(db) as store:
        pictures = _stored(
            store, rules, "ada", "pictures", ["normalization.LayerNorm", "init.kaiming_normal"], NOW - timedelta(days=5)
        )
        report = GradeReport(
            "ada",
            [
                graded("normalization.LayerNorm", "ln-batch-axis"),
                graded("init.kaiming_normal", "init-kaiming-variance-as-std"),
            ],
            "h1",
        )
        records.record_done(store, pictures, report, "test")
        jobs["pictures"] = int(pictures["id"])
        late = _stored(store, rules, "ada", "late", ["activations.ReLU"], NOW - timedelta(days=1))
        relu = [CheckResult("forward", True, 5.0, 5.0), CheckResult("backward", True, 5.0, 5.0)]
        records.record_done(
            store,
            late,
            GradeReport("ada", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, relu)], "h2"),
            "test",
        )
        jobs["late"] = int(late["id"])
        other = _stored(store, rules, "bob", "bob", ["activations.ReLU"], NOW - timedelta(hours=3))
        records.record_done(
            store,
            other,
            GradeReport("bob", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, relu)], "h3"),
            "test",
        )
        jobs["bob"] = int(other["id"])
        error = _stored(store, rules, "ada", "error", ["activations.GELU"], NOW - timedelta(hours=2))
        records.mark_queued(store, int(error["id"]), 1, f"job-{error['id']}-try-1")
        records.record_error(store, int(error["id"]), "the worker stopped twice while grading (out of memory)")
        jobs["error"] = int(error["id"])
        running = _stored(store, rules, "ada", "running", ["activations.ELU"], NOW - timedelta(minutes=30))
        records.mark_queued(store, int(running["id"]), 1, f"job-{running['id']}-try-1")
        records.mark_running(store, int(running["id"]), "grader-1:4242")
        jobs["running"] = int(running["id"])
        retried = _stored(store, rules, "ada", "retried", ["activations.SiLU"], NOW - timedelta(minutes=20))
        records.mark_queued(store, int(retried["id"]), 2, f"job-{retried['id']}-try-2", "the worker's lease expired")
        jobs["retried"] = int(retried["id"])
        queued = _stored(store, rules, "ada", "queued", ["activations.Tanh"], NOW - timedelta(minutes=10))
        jobs["queued"] = int(queued["id"])
    return Seeded(db, course, tokens, teacher, jobs)


@contextmanager
def served(root: Path, **seeding: Any) -> Iterator[tuple[Server, Seeded]]:
    """The seeded course under ``root``, served by ``grade serve`` with no worker and a lease timeout of an hour,
    so that every upload stays in its state while a test reads the pages; stopped on leaving."""
    seeded = seed(root, **seeding)
    server = Server(
        seeded.db, f"sqlite:///{root / 'queue.db'}", workers=0, course=seeded.course, extra=["--lease-timeout", "3600"]
    ).start()
    try:
        yield server, seeded
    finally:
        server.stop()
