"""`grade rescore`: every stored upload graded again on the queue (in the sandbox), recorded beside the old result,
and the students whose counted score changed listed with before/after and the checks that flipped; on the
embedded queue and on Redis with two worker processes."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader.term import class_report, rescore
from grader.course import grading
from grader.cli import cli
from grader.queue import records
from grader.course.solution import write_solution
from grader.student.course import DEFAULT_COURSE
from grader.student.client.wire import report_to_dict
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.store import Store
from server_util import Redis, solution_files, start_worker, stop_process

RELU = ["activations.ReLU"]
UPLOAD = ["__init__.py", "base.py", "activations.py"]


def store_upload(db: Path, student: str, files: dict[str, str], report: GradeReport) -> int:
    """An upload and its recorded result, as the server leaves them; the job id."""
    with Store.open(db) as store:
        job = records.create_job(
            store, student, f"k-{student}", files, RELU, DEFAULT_COURSE, datetime.now(timezone.utc)
        ).job
        assert records.record_done(store, job, report, "old-grader") is not None
        return int(job["id"])


def with_first_check_failed(report: GradeReport) -> GradeReport:
    """The report an earlier, buggy grader gave: the first check failed where it passes."""
    exercise = report.exercises[0]
    first = dataclasses.replace(exercise.checks[0], passed=False, score=0.0, message="wrong by the old check")
    score = exercise.score - exercise.checks[0].score
    bad = dataclasses.replace(exercise, status="failed", score=score, checks=[first, *exercise.checks[1:]])
    return dataclasses.replace(report, exercises=[bad])


@pytest.fixture(scope="module")
def uploads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """ann's correct code, once recorded wrongly (an old check's bug); bob's, recorded right."""
    root = tmp_path_factory.mktemp("rescore")
    folder = write_solution(root / "good")
    files = solution_files(folder, UPLOAD)
    right = {s: grading.grade(folder, RELU, s) for s in ("ann", "bob")}
    assert all(r.full_marks for r in right.values())
    return {
        "files": files,
        "ann": with_first_check_failed(right["ann"]),
        "bob": right["bob"],
        "check": right["ann"].exercises[0].checks[0].name,
    }


def course_db(tmp_path: Path, uploads: dict[str, object]) -> Path:
    db = tmp_path / "course.db"
    store_upload(db, "ann", uploads["files"], uploads["ann"])  # type: ignore[arg-type]
    store_upload(db, "bob", uploads["files"], uploads["bob"])  # type: ignore[arg-type]
    return db


def counted(db: Path, student: str) -> float:
    with Store.open(db) as store:
        return float(store.best_scores(student)["activations.ReLU"]["best_score"])


def check_rescored(db: Path, uploads: dict[str, object], output: str) -> None:
    old_score = uploads["ann"].score  # type: ignore[attr-defined]
    assert f"ann  activations.ReLU  {old_score:g} -> 10 of 10" in output, output
    assert f"{uploads['check']} failed -> passed" in output
    assert "bob" not in output  # graded again, unchanged
    assert counted(db, "ann") == 10.0
    with Store.open(db) as store:
        report = class_report.build(store, RELU)  # the dashboard and the gradebook exports count the new result
        ann = report.student("ann")
        assert ann is not None and ann.exercises["activations.ReLU"].best_score == 10.0
        rows = store.submissions(student="ann", superseded=True)
        old, new = rows
        assert old["score"] == old_score and old["grader_version"] == "old-grader"  # still readable
        assert old["superseded_by"] == new["id"] and new["superseded_by"] is None
        assert new["started_at"] == old["started_at"]  # the upload's time: deadlines judge the upload
        assert not store.check_results(old["id"])[0]["passed"] and store.check_results(new["id"])[0]["passed"]
        last = rescore.last_rescoring(store)
        assert last is not None and last["uploads"] == 2 and last["changes"][0]["student"] == "ann"
        job = next(iter(store.db.query("SELECT * FROM jobs WHERE student = 'ann'")))
        in_force = records.report_of(store, job)
        assert in_force is not None and in_force.exercises[0].score == 10.0  # the job's report is the one in force


def test_dry_run_then_rescore_on_the_embedded_queue(tmp_path: Path, uploads: dict[str, object]) -> None:
    db = course_db(tmp_path, uploads)
    runner = CliRunner()
    dry = runner.invoke(cli, ["rescore", "--db", str(db), "--workers", "1", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "Dry run: 2 uploads graded again" in dry.output and "1 counted score would change" in dry.output
    assert counted(db, "ann") == uploads["ann"].score  # type: ignore[attr-defined]
    with Store.open(db) as store:
        assert rescore.last_rescoring(store) is None
        assert all(r["superseded_by"] is None for r in store.submissions(superseded=True))
    out = tmp_path / "changes.csv"
    real = runner.invoke(cli, ["rescore", "--db", str(db), "--workers", "1", "activations", "--csv", str(out)])
    assert real.exit_code == 0, real.output
    check_rescored(db, uploads, real.output)
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert [(r["student"], r["after"]) for r in rows] == [("ann", "10")] and "failed -> passed" in rows[0]["flipped"]
    again = runner.invoke(cli, ["rescore", "--db", str(db), "--workers", "1"])
    assert again.exit_code == 0 and "0 counted scores changed" in again.output, again.output
    with Store.open(db) as store:  # the second rescoring superseded the first one's rows, the first still readable
        assert len(store.submissions(student="ann", superseded=True)) == 3
        assert len(store.submissions(student="ann")) == 1


def test_nothing_to_rescore_is_one_line(tmp_path: Path, uploads: dict[str, object]) -> None:
    db = course_db(tmp_path, uploads)
    result = CliRunner().invoke(cli, ["rescore", "--db", str(db), "--workers", "0", "linear.Linear"])
    assert result.exit_code == 2 and "nothing to rescore" in result.output
    missing = CliRunner().invoke(cli, ["rescore", "--db", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_no_worker_means_listed_as_not_graded_and_nothing_recorded(tmp_path: Path, uploads: dict[str, object]) -> None:
    db = course_db(tmp_path, uploads)
    result = CliRunner().invoke(cli, ["rescore", "--db", str(db), "--workers", "0", "--timeout", "1"])
    assert result.exit_code == 0 and "0 uploads graded again" in result.output
    assert result.output.count("not graded again") == 2 and "is a `grade worker` running" in result.output
    assert counted(db, "ann") == uploads["ann"].score  # type: ignore[attr-defined]


def test_a_worker_that_cannot_grade_leaves_the_recorded_result_and_says_why(
    tmp_path: Path, uploads: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exercise back ``not_graded`` (its worker's self-test fails, the sandbox cannot start there) is the
    machine's fault: listed as not graded again with the reason, never recorded over the old result."""
    db = course_db(tmp_path, uploads)
    reason = "this worker's self-test fails for them: bubblewrap is not installed (apt-get install bubblewrap)"

    def refused(
        store: Store, queue: object, found: list[tuple[dict[str, Any], list[str]]], *args: object, **kwargs: object
    ) -> dict[int, dict[str, object]]:
        return {
            int(job["id"]): {
                "ok": True,
                "report": report_to_dict(
                    GradeReport(
                        str(job["student"]),
                        [ExerciseResult("activations.ReLU", "not_graded", 0.0, 10.0, [], reason)],
                        "h",
                        [],
                        True,
                    )
                ),
            }
            for job, _ in found
        }

    monkeypatch.setattr(rescore, "grade_again", refused)
    with Store.open(db) as store:
        outcome = rescore.rescore(store, None, DEFAULT_COURSE, [], "new")  # type: ignore[arg-type]
    assert outcome.uploads == 0 and outcome.changes == [] and len(outcome.errors) == 2
    assert all(
        "bubblewrap is not installed" in e["error"] and "recorded result stands" in e["error"] for e in outcome.errors
    )
    assert counted(db, "ann") == uploads["ann"].score  # type: ignore[attr-defined]
    with Store.open(db) as store:
        assert all(
            r["superseded_by"] is None and r["status"] != "not_graded" for r in store.submissions(superseded=True)
        )


def test_without_bubblewrap_rescore_ends_at_once_not_graded_then_heals_when_run_again(
    tmp_path: Path, uploads: dict[str, object]
) -> None:
    """The workers `grade rescore` starts cannot run without bubblewrap: it says so for each upload at once (it
    waited for --timeout, 600 s, before), records no zero, and a run once bubblewrap is back rescores the same
    stored files."""
    db = course_db(tmp_path, uploads)
    no_bwrap = tmp_path / "bin"  # this machine's programs, bubblewrap left out
    no_bwrap.mkdir()
    for folder in (Path("/usr/bin"), Path("/bin")):
        for program in folder.iterdir():
            if program.name != "bwrap" and not (no_bwrap / program.name).exists():
                (no_bwrap / program.name).symlink_to(program)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{no_bwrap}"}
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "rescore", "--db", str(db), "--workers", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # (the timeout: a hang fails)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("bubblewrap is not installed") == 2 and "0 uploads graded again" in done.stdout
    assert "recorded result stands" in done.stdout and "exited" not in done.stderr  # no worker started
    assert counted(db, "ann") == uploads["ann"].score  # type: ignore[attr-defined]
    healed = CliRunner().invoke(cli, ["rescore", "--db", str(db), "--workers", "1"])
    assert healed.exit_code == 0, healed.output
    check_rescored(db, uploads, healed.output)


def test_rescore_on_redis_with_two_worker_processes(
    tmp_path: Path, uploads: dict[str, object], redis_server: Redis
) -> None:
    db = course_db(tmp_path, uploads)
    workers = [start_worker(redis_server.url, 1, tmp_path / f"worker-{k}.log") for k in range(2)]
    try:
        result = CliRunner().invoke(cli, ["rescore", "--db", str(db), "--queue", redis_server.url, "--workers", "0"])
    finally:
        for proc in workers:
            stop_process(proc)
    assert result.exit_code == 0, result.output
    check_rescored(db, uploads, result.output)
    import redis

    left = redis.Redis.from_url(redis_server.url).keys("*rescore*")
    assert left == [], left  # every result was read and removed from the queue


def test_the_dashboard_shows_the_last_rescoring(tmp_path: Path, uploads: dict[str, object]) -> None:
    import warnings

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from server_util import issue_tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    db = course_db(tmp_path, uploads)
    _, teacher = issue_tokens(db, ["ann", "bob"])
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}"), run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        headers = {"Authorization": f"Bearer {teacher}"}
        assert "No rescoring yet" in client.get("/instructor/term", headers=headers).text
        result = CliRunner().invoke(cli, ["rescore", "--db", str(db), "--workers", "1"])
        assert result.exit_code == 0, result.output
        page = client.get("/instructor/term", headers=headers).text
        assert "Rescoring 1: 2 uploads graded again" in page and "1 counted score changed" in page
        assert f"{uploads['check']} failed -&gt; passed" in page


def test_a_class_graded_with_grade_batch_can_be_rescored(tmp_path: Path) -> None:
    """docs/instructor.md teaches `grade batch` first: its database keeps what it graded (each distinct file once),
    so `grade rescore --dry-run` on a freshly batch-graded class of three exits 0 and lists no change, and a
    batch run again stores no file twice."""
    from classgen import make_class

    make_class(tmp_path / "submissions", {"ada": "correct", "ben": "partial", "cy": "mistaken"})
    db = tmp_path / "class.db"
    runner = CliRunner()
    graded = runner.invoke(cli, ["batch", str(tmp_path / "submissions"), "--db", str(db), "--jobs", "2", "activations"])
    assert graded.exit_code == 0, graded.output
    with Store.open(db) as store:
        kept = list(store.db.query("SELECT id, student, status, attempt_id FROM jobs ORDER BY student"))
        assert [(k["student"], k["status"]) for k in kept] == [("ada", "done"), ("ben", "done"), ("cy", "done")]
        assert all(k["attempt_id"] is not None for k in kept)
        blobs = store.db.execute("SELECT count(*) FROM blobs").fetchone()[0]
        names = store.db.execute("SELECT count(*) FROM job_files").fetchone()[0]
        assert blobs < names  # ada's and cy's base.py, linear.py ... are one blob each
        files = records.job_files(store, int(kept[0]["id"]))
    assert files["activations.py"] == (tmp_path / "submissions" / "ada" / "activations.py").read_text()
    dry = runner.invoke(cli, ["rescore", "--db", str(db), "--workers", "1", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "Dry run: 3 uploads graded again" in dry.output and "0 counted scores would change" in dry.output
    again = runner.invoke(cli, ["batch", str(tmp_path / "submissions"), "--db", str(db), "--force", "activations"])
    assert again.exit_code == 0, again.output
    with Store.open(db) as store:
        assert store.db.execute("SELECT count(*) FROM blobs").fetchone()[0] == blobs  # nothing stored twice
        assert store.db.execute("SELECT count(*) FROM jobs").fetchone()[0] == 6


def test_a_rescoring_is_told_apart_by_the_grader_version(tmp_path: Path) -> None:
    """The recorded version is normgrade's and a digest of what judges (checks, mistakes, reference): a fix of a
    check changes it while pyproject.toml's version stays the same."""
    import re

    from grader.course.grading import grader_version, judge_digest

    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "a.py").write_text("x = 1\n")
    before = judge_digest(tmp_path, ("reference",))
    (tmp_path / "reference" / "__pycache__").mkdir()
    (tmp_path / "reference" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"cache")
    assert judge_digest(tmp_path, ("reference",)) == before  # caches do not count
    (tmp_path / "reference" / "a.py").write_text("x = 2\n")
    assert judge_digest(tmp_path, ("reference",)) != before
    assert re.fullmatch(r"\d+\.\d+\.\d+\+[0-9a-f]{12}", grader_version()), grader_version()
    assert grader_version().endswith("+" + judge_digest())


@pytest.mark.server
def test_rescore_while_serving_goes_through_the_server(tmp_path: Path, uploads: dict[str, object]) -> None:
    """Issue 43, bug 6: `grade rescore` refused a served database ("use the server") and neither the dashboard nor
    the API could rescore. Now the CLI goes through the server (its queue and workers, no downtime), with the diff
    of whose grade changed; uploads are taken meanwhile; the Term page's button does the same."""
    import re

    import httpx

    from server_util import Server, issue_tokens

    db = course_db(tmp_path, uploads)
    tokens, teacher = issue_tokens(db, ["ann", "bob"])
    server = Server(db, f"sqlite:///{tmp_path / 'queue.db'}", workers=1).start()
    try:
        refused = CliRunner().invoke(cli, ["rescore", "--db", str(db)], env={"GRADE_TOKEN": ""})
        assert refused.exit_code != 0 and "Pass --token <instructor token>" in refused.output
        assert "press Rescore now on the dashboard's Term page" in refused.output
        live = CliRunner().invoke(cli, ["rescore", "--db", str(db), "--token", teacher])
        assert live.exit_code == 0, live.output
        check_rescored(db, uploads, live.output)
        assert httpx.get(server.url + "/api/v1/health", timeout=10).status_code == 200  # it served throughout
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {teacher}"}, timeout=120) as web:
            term = web.get("/instructor/term").text
            csrf = re.search(r'name="csrf" value="([^"]*)"', term)
            assert csrf is not None and "Rescore now" in term
            again = web.post("/instructor/term/rescore", data={"csrf": csrf.group(1), "exercises": "activations"})
            assert again.status_code == 200 and "2 uploads graded again" in again.text, again.text[-2000:]
            assert web.post("/api/v1/rescore", json={"exercises": 3}).status_code == 400
    finally:
        server.stop()
