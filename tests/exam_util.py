"""A course served in-process for the tests of a student's standing (tests/term/test_standing.py) and of exam mode
(tests/term/test_exam_mode.py): its course.toml written from a text, a database with ann's and the instructor's
tokens, the app without its collector, the times around one fixed NOW, and the upload of BatchNorm1d whose
named mistake carries a fix (what a `derive` stub withholds)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import grader.mistakes  # noqa: F401  (registers the known mistakes' sentences, fixes and hints)
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.student.course import load_course
from grader.student.engine.diagnosis import known_mistake
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from server_util import issue_tokens

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NOW = datetime.now(timezone.utc)

FIX = "var * m / (m - 1)"  # the fix of bn-biased-running-var: the derivation a `derive` stub withholds


def batchnorm_report() -> GradeReport:
    """A BatchNorm1d graded as the server grades it (every exercise guided): its message carries the fix."""
    mistake = known_mistake("bn-biased-running-var")
    assert mistake is not None and FIX in mistake.explain("guided")
    checks = [
        CheckResult("forward", True, 4.0, 4.0),
        CheckResult(
            "running stats",
            False,
            0.0,
            4.0,
            mistake.explain("guided") + "\nrunning_var differs",
            "bn-biased-running-var",
        ),
    ]
    return GradeReport("ann", [ExerciseResult("normalization.BatchNorm1d", "failed", 4.0, 8.0, checks)], "h")


def iso(hours: float) -> str:
    """NOW + ``hours`` as a TOML date-time."""
    return (NOW + timedelta(hours=hours)).isoformat(timespec="seconds").replace("+00:00", "Z")


@contextmanager
def served(tmp_path: Path, text: str) -> Iterator[dict[str, Any]]:
    """The course ``text`` served: {"client", "db", "ann" (her token), "teacher" (the instructor's)}."""
    (tmp_path / "course.toml").write_text(text, encoding="utf-8")
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["ann"])
    app = create_app(
        ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(tmp_path / "course.toml")),
        run_collector=False,
    )
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield {"client": client, "db": db, "ann": tokens["ann"], "teacher": teacher}


def get(env: dict[str, Any], who: str, path: str) -> Any:
    """GET /api/v1``path`` as ``who`` ("ann" or "teacher")."""
    return env["client"].get("/api/v1" + path, headers={"Authorization": f"Bearer {env[who]}"})
