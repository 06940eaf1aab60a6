"""The progress store: schema, recording, robustness (kills, corrupt and foreign files, concurrency)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sqlite_utils

import grader.student.store as store_mod
from grader.student.errors import StoreError
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import APPLICATION_ID, SCHEMA_VERSION, Store, default_db_path


def make_report(student: str = "alice", n_exercises: int = 2, files_hash: str = "h1") -> GradeReport:
    exercises = []
    for k in range(n_exercises):
        checks = [
            CheckResult("forward", True, 6.0, 6.0, "ok"),
            CheckResult(
                "backward",
                k % 2 == 0,
                4.0 if k % 2 == 0 else 0.0,
                4.0,
                "dx differs at [0, 1]",
                None if k % 2 == 0 else "bn-wrong-axis",
            ),
        ]
        score = sum(c.score for c in checks)
        exercises.append(
            ExerciseResult(f"topic.Ex{k}", "passed" if score == 10 else "failed", score, 10.0, checks, duration=0.5)
        )
    return GradeReport(student, exercises, files_hash)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "sub" / ".grade" / "progress.db"


def test_open_creates_folder_file_wal_and_latest_schema(db_path: Path) -> None:
    with Store.open(db_path) as store:
        assert store.version == SCHEMA_VERSION
        assert store.db.journal_mode == "wal"
        assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        assert store.db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert {"students", "attempts", "submissions", "check_results", "quiz_attempts"} <= set(store.db.table_names())
    assert db_path.is_file()


def test_record_report_round_trip(db_path: Path) -> None:
    with Store.open(db_path) as store:
        first = store.record_report(make_report(), "0.1.0", started_at="2026-01-01T00:00:00+00:00")
        second = store.record_report(make_report(files_hash="h2"), "0.1.0")
        assert second > first
        subs = store.submissions(student="alice")
        assert [s["exercise"] for s in subs] == ["topic.Ex0", "topic.Ex1"] * 2
        row = subs[1]
        assert row["score"] == 6.0 and row["max_score"] == 10.0 and row["status"] == "failed"
        assert row["started_at"] == "2026-01-01T00:00:00+00:00"
        assert row["grader_version"] == "0.1.0" and row["files_hash"] == "h1"
        assert row["duration"] == 0.5
        checks = store.check_results(row["id"])
        assert [c["name"] for c in checks] == ["forward", "backward"]
        assert checks[1]["passed"] is False and checks[1]["misconception"] == "bn-wrong-axis"
        assert checks[1]["message"] == "dx differs at [0, 1]"
        assert store.submissions(exercise="topic.Ex0", student="bob") == []
        attempts = store.attempts("alice")
        assert [a["files_hash"] for a in attempts] == ["h1", "h2"]
        assert attempts[0]["score"] == 16.0 and attempts[0]["max_score"] == 20.0
        assert store.students() == ["alice"]


def test_a_not_graded_exercise_leaves_no_score(db_path: Path) -> None:
    """The grader's machine failed on it: no submissions row, so no best score, no count, no attempt of it."""
    report = GradeReport(
        "alice",
        [
            ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, [CheckResult("forward", True, 10.0, 10.0)]),
            ExerciseResult("kernels.relu_forward", "not_graded", 0.0, 10.0, [], "no OpenCL device (`grade doctor`)"),
        ],
        files_hash="h",
    )
    with Store.open(db_path) as store:
        store.record_report(report, "0.1.0")
        assert [s["exercise"] for s in store.submissions(student="alice")] == ["activations.ReLU"]
        attempt = store.attempts("alice")[0]
        assert (attempt["score"], attempt["max_score"]) == (10.0, 10.0)


def test_best_scores_keeps_best_and_last_status(db_path: Path) -> None:
    with Store.open(db_path) as store:
        good = GradeReport("alice", [ExerciseResult("a.X", "passed", 10.0, 10.0)])
        bad = GradeReport("alice", [ExerciseResult("a.X", "error", 0.0, 10.0, message="crashed")])
        store.record_report(good, "v")
        store.record_report(bad, "v")
        best = store.best_scores("alice")
        assert best == {
            "a.X": {
                "best_score": 10.0,
                "max_score": 10.0,
                "last_status": "error",
                "attempts": 2,
                "latest_score": 0.0,
                "best_raw": 10.0,
                "late": False,
            }
        }
        assert store.best_scores("nobody") == {}


def test_quiz_attempts(db_path: Path) -> None:
    with Store.open(db_path) as store:
        store.record_quiz_answer("bob", "normalization", "q1", "b", True)
        store.record_quiz_answer("carol", "normalization", "q1", "a", False)
        rows = store.quiz_attempts("bob")
        assert len(rows) == 1
        assert rows[0]["chapter"] == "normalization" and rows[0]["answer"] == "b"
        assert rows[0]["correct"] is True
        assert len(store.quiz_attempts()) == 2
        assert store.students() == ["bob", "carol"]


def test_failure_inside_the_attempt_leaves_no_half_attempt(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store.open(db_path) as store:
        store.record_report(make_report(files_hash="earlier"), "v")
        calls = []

        def exploding_seed(student: str, exercise_id: str) -> int:
            calls.append(exercise_id)
            if len(calls) == 2:  # after the attempt row and the first submission + checks
                raise RuntimeError("killed mid-attempt")
            return 1

        monkeypatch.setattr(store_mod.results, "exercise_seed", exploding_seed)
        with pytest.raises(RuntimeError):
            store.record_report(make_report(student="zed", files_hash="half"), "v")
        assert len(calls) == 2
        assert [a["files_hash"] for a in store.attempts()] == ["earlier"]
        assert len(store.submissions()) == 2
        assert store.students() == ["alice"]
        total_checks = store.db.execute("SELECT count(*) FROM check_results").fetchone()[0]
        assert total_checks == 4
        # the connection is usable afterwards
        monkeypatch.undo()
        store.record_report(make_report(files_hash="later"), "v")
        assert [a["files_hash"] for a in store.attempts()] == ["earlier", "later"]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
    from grader.student.store import Store

    path, student, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    store = Store.open(path)
    for i in range(count):
        exercises = [
            ExerciseResult(f"t.E{k}", "failed", 1.0, 10.0,
                           [CheckResult(f"c{j}", j == 0, float(j == 0), 1.0, "m" * 200) for j in range(10)])
            for k in range(20)
        ]
        store.record_report(GradeReport(student, exercises, f"{student}-{i}"), "v")
        print(f"recorded {i}", flush=True)
    store.close()
    """
)


def run_writer(path: Path, student: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), student, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assert_whole_attempts(path: Path) -> int:
    """Every attempt in the file has all 20 submissions and 200 checks; return the attempt count."""
    with Store.open(path) as store:
        attempts = store.attempts()
        for attempt in attempts:
            n_subs, n_checks = store.db.execute(
                "SELECT count(DISTINCT s.id), count(c.id) FROM submissions s "
                "LEFT JOIN check_results c ON c.submission_id = s.id WHERE s.attempt_id = ?",
                [attempt["id"]],
            ).fetchone()
            assert (n_subs, n_checks) == (20, 200)
        orphans = store.db.execute(
            "SELECT count(*) FROM submissions WHERE attempt_id NOT IN (SELECT id FROM attempts)"
        ).fetchone()[0]
        assert orphans == 0
        return len(attempts)


def test_sigkill_while_writing_keeps_earlier_attempts_whole(db_path: Path) -> None:
    proc = run_writer(db_path, "killed", 100_000)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        assert line.startswith("recorded")
        seen += 1
        if seen == 5:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    count = assert_whole_attempts(db_path)
    assert count >= 5
    # and the file still accepts new attempts
    with Store.open(db_path) as store:
        store.record_report(make_report(), "v")


def test_two_concurrent_writers_both_succeed(db_path: Path) -> None:
    Store.open(db_path).close()
    procs = [run_writer(db_path, name, 15) for name in ("w1", "w2")]
    for proc in procs:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        assert out.count("recorded") == 15
    assert assert_whole_attempts(db_path) == 30
    with Store.open(db_path) as store:
        assert store.students() == ["w1", "w2"]


def assert_refused_and_untouched(path: Path, fragment: str, wal_mode: bool = False) -> None:
    """Opening ``path`` raises a one-line StoreError and changes no byte of it.

    A WAL-mode file may gain empty -wal/-shm companions from the read-only
    inspection; any other file gains no companion at all.
    """
    before = path.read_bytes()
    siblings = set(path.parent.iterdir())
    with pytest.raises(StoreError) as info:
        Store.open(path)
    message = str(info.value)
    assert str(path) in message and "not a normgrade progress database" in message
    assert fragment in message and "pass another --db" in message
    assert "\n" not in message
    assert path.read_bytes() == before
    if not wal_mode:
        assert set(path.parent.iterdir()) == siblings


def test_random_bytes_file_is_reported_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "progress.db"
    path.write_bytes(bytes(range(256)) * 40)
    assert_refused_and_untouched(path, "not an SQLite file")


def test_corrupt_sqlite_file_is_reported_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "progress.db"
    with Store.open(path) as store:
        store.record_report(make_report(), "v")
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for leftover in (tmp_path / "progress.db-wal", tmp_path / "progress.db-shm"):
        leftover.unlink(missing_ok=True)
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for offset in range(page_size, len(data), 7):  # keep the header page, scramble the rest
        data[offset] = (data[offset] * 31 + 17) % 256
    path.write_bytes(bytes(data))
    assert_refused_and_untouched(path, "corrupt", wal_mode=True)


def test_foreign_sqlite_database_is_reported_and_left_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("INSERT INTO users (email) VALUES ('a@example.org')")
    conn.close()
    assert_refused_and_untouched(path, "users")


def test_newer_schema_is_reported_and_left_unchanged(db_path: Path) -> None:
    Store.open(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    assert_refused_and_untouched(db_path, f"schema version {SCHEMA_VERSION + 1}", wal_mode=True)


def test_folder_instead_of_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="a folder"):
        Store.open(tmp_path)


def test_empty_existing_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "progress.db"
    path.touch()
    with Store.open(path) as store:
        assert store.version == SCHEMA_VERSION


def test_migration_from_version_1_to_2_keeps_data(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    old = Store(sqlite_utils.Database(sqlite3.connect(db_path), execute_plugins=False), db_path)
    old.migrate(target=1)
    assert old.version == 1
    assert "quiz_attempts" not in old.db.table_names()
    old.record_report(make_report(), "0.0.9")
    old.close()
    with Store.open(db_path) as store:
        assert store.version == SCHEMA_VERSION
        assert len(store.submissions("alice")) == 2
        assert store.attempts()[0]["grader_version"] == "0.0.9"
        store.record_quiz_answer("alice", "normalization", "q1", "c", True)
        assert store.quiz_attempts("alice")[0]["correct"] is True


def test_default_db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRADE_DB", raising=False)
    assert default_db_path(tmp_path / "exercises") == tmp_path / ".grade" / "progress.db"
    monkeypatch.setenv("GRADE_DB", str(tmp_path / "elsewhere.db"))
    assert default_db_path(tmp_path / "exercises") == tmp_path / "elsewhere.db"


def test_further_mistakes_of_a_check_survive_the_store(db_path: Path) -> None:
    """A check explained by two known mistakes keeps both through the store ("and also"), as the server's report
    of an upload and the dashboard rebuild it from there; a check with one keeps an empty list."""
    two = CheckResult(
        "running_var_ema", False, 0.0, 2.0, "differs", "bn-biased-running-var", also=["bn-running-var-plus-eps"]
    )
    report = GradeReport(
        "alice",
        [
            ExerciseResult(
                "normalization.BatchNorm1d", "failed", 8.0, 10.0, [CheckResult("forward", True, 8.0, 8.0), two]
            )
        ],
    )
    with Store.open(db_path) as store:
        store.record_report(report, "0.1.0")
        submission = store.submissions(student="alice")[0]
        rows = store.check_results(submission["id"])
    assert [r["also"] for r in rows] == [[], ["bn-running-var-plus-eps"]]
    assert rows[1]["misconception"] == "bn-biased-running-var"


def test_a_writing_command_opens_a_new_database_in_a_new_folder(tmp_path: Path) -> None:
    """Store.open(writer=...) holds the file against a server starting; the folder is made as before."""
    path = tmp_path / "new" / "folder" / "class.db"
    serving = path.with_name("class.db-serving")

    def flocks() -> list[str]:
        inode = str(serving.stat().st_ino)
        return [
            line
            for line in Path("/proc/locks").read_text().splitlines()
            if " FLOCK " in line and f" {os.getpid()} " in line and line.split()[5].endswith(":" + inode)
        ]

    with Store.open(path, writer="grade batch") as store:
        assert store.version == SCHEMA_VERSION
        assert [line.split()[3] for line in flocks()] == ["READ"]  # a command's shared hold
    assert flocks() == []  # ended with the store


def test_a_figure_holding_inf_nan_and_1e308_survives_the_store(db_path: Path) -> None:
    """An overflowing student's figure (inf, -inf, NaN, the largest floats, NumPy values) is recorded, and read back
    with the same numbers: non-finite ones as floats again."""
    import math

    import numpy as np

    figure = {
        "kind": "elements",
        "received": [math.inf, -math.inf, math.nan, 1e308, -1.7976931348623157e308, 5e-324],
        "axes": [{"axis": 0, "error": [np.float32(np.inf), np.float16(2.5), np.int64(7)]}],
        "summary": "y: received inf",
    }
    check = CheckResult("forward", False, 0.0, 1.0, "forward returned inf", None, figure, [], figure)
    report = GradeReport("alice", [ExerciseResult("activations.GELU", "failed", 0.0, 10.0, [check])])
    with Store.open(db_path) as store:
        store.record_report(report, "0.1.0")
        row = store.check_results(store.submissions(student="alice")[0]["id"])[0]
    for stored in (row["figure"], row["instructor_figure"]):
        received = stored["received"]
        assert received[:2] == [math.inf, -math.inf] and math.isnan(received[2])
        assert received[3:] == [1e308, -1.7976931348623157e308, 5e-324]
        assert stored["axes"][0]["error"] == [math.inf, 2.5, 7]


def test_a_new_database_and_its_wal_are_owner_only_whatever_the_umask(db_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with Store.open(db_path) as store:
            store.db.execute("CREATE TABLE IF NOT EXISTS t (x)")
            modes = {p.name: p.stat().st_mode & 0o777 for p in db_path.parent.iterdir() if p.is_file()}
    finally:
        os.umask(old)
    assert modes[db_path.name] == 0o600 and all(mode == 0o600 for mode in modes.values()), modes
    assert store_mod.exposed(db_path) is None


def test_a_database_others_can_read_is_named_with_the_fix(db_path: Path) -> None:
    Store.open(db_path).close()
    db_path.chmod(0o644)
    warning = store_mod.exposed(db_path)
    assert warning is not None and "644" in warning and f"chmod 600 {db_path}" in warning and "\n" not in warning
