"""grader.term.batch: finding submissions, grading a class in parallel, skipping unchanged work, resuming after a
kill."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from classgen import MIXED_CLASS, exercises_folder, make_class, make_student
from grader.term import batch
from grader.student.errors import SetupError, UsageError
from grader.course.grading import files_hash
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.sandbox.runner import Limits
from grader.student.store import Store

SELECTED = ["activations", "linear"]
VERSION = "test"


# --- a stand-in for grader.course.grading.grade: fast, records its calls ------------------------------


class FakeGrade:
    """Grades every folder 10/10 on linear.Linear with its real files hash; records who was graded."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail or {}
        self.lock = threading.Lock()

    def __call__(self, path: Path, selectors: list[str] | None, student: str, limits: Limits | None) -> GradeReport:
        with self.lock:
            self.calls.append(student)
        if student in self.fail:
            raise self.fail[student]
        result = ExerciseResult("linear.Linear", "passed", 10.0, 10.0, [CheckResult("forward", True, 10.0, 10.0)])
        return GradeReport(student, [result], files_hash=files_hash(Path(path)))


def small_class(root: Path, names: list[str]) -> dict[str, Path]:
    """Students with one tiny exercise file each (enough for the fake grader)."""
    folders = {}
    for name in names:
        folder = root / name / "exercises" if name.endswith("nested") else root / name
        folder.mkdir(parents=True)
        (folder / "linear.py").write_text(f"# {name}\n")
        folders[name] = folder
    return folders


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "class.db") as s:
        yield s


# --- finding the submissions -----------------------------------------------------------------


def test_find_submissions_flat_nested_hidden_and_files(tmp_path: Path) -> None:
    (tmp_path / "zoe" / "exercises").mkdir(parents=True)
    (tmp_path / "amy").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "notes.txt").write_text("not a student")
    found = batch.find_submissions(tmp_path)
    assert [s.student for s in found] == ["amy", "zoe"]
    assert found[0].path == tmp_path / "amy"
    assert found[1].path == tmp_path / "zoe" / "exercises"


def test_find_submissions_refuses_missing_or_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="is not a folder"):
        batch.find_submissions(tmp_path / "missing")
    with pytest.raises(SetupError, match="no student subfolders"):
        batch.find_submissions(tmp_path)


def test_unknown_selector_raises_before_grading(tmp_path: Path, store: Store) -> None:
    small_class(tmp_path / "class", ["amy"])
    fake = FakeGrade()
    with pytest.raises(UsageError, match="Did you mean"):
        batch.run_batch(tmp_path / "class", store, VERSION, ["lineer"], grade_fn=fake)
    assert fake.calls == []


# --- recording, skipping, forcing (fake grader) ---------------------------------------------------


def test_each_student_recorded_once_then_skipped_when_unchanged(tmp_path: Path, store: Store) -> None:
    small_class(tmp_path / "class", ["amy", "bob-nested", "cy"])
    fake = FakeGrade()
    seen: list[str] = []
    first = batch.run_batch(
        tmp_path / "class",
        store,
        VERSION,
        ["linear"],
        jobs=2,
        grade_fn=fake,
        on_outcome=lambda o: seen.append(o.student),
    )
    assert sorted(fake.calls) == ["amy", "bob-nested", "cy"]
    assert sorted(seen) == ["amy", "bob-nested", "cy"]
    assert first.count("graded") == 3 and first.ok
    assert [len(store.attempts(n)) for n in ("amy", "bob-nested", "cy")] == [1, 1, 1]

    fake.calls.clear()
    second = batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], grade_fn=fake)
    assert fake.calls == []
    assert second.count("skipped") == 3
    assert {o.score for o in second.outcomes} == {10.0}
    assert "3 unchanged (skipped)" in second.line()


def test_changed_files_are_regraded_and_force_regrades_all(tmp_path: Path, store: Store) -> None:
    folders = small_class(tmp_path / "class", ["amy", "bob", "cy"])
    fake = FakeGrade()
    batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], grade_fn=fake)
    (folders["bob"] / "linear.py").write_text("# bob, second try\n")
    fake.calls.clear()
    summary = batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], grade_fn=fake)
    assert fake.calls == ["bob"]
    assert summary.count("graded") == 1 and summary.count("skipped") == 2
    assert len(store.attempts("bob")) == 2

    fake.calls.clear()
    batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], force=True, grade_fn=fake)
    assert sorted(fake.calls) == ["amy", "bob", "cy"]
    assert [len(store.attempts(n)) for n in ("amy", "bob", "cy")] == [2, 3, 2]


def test_a_wider_selection_regrades_unchanged_folders(tmp_path: Path, store: Store) -> None:
    small_class(tmp_path / "class", ["amy"])
    fake = FakeGrade()
    batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], grade_fn=fake)
    assert batch.is_unchanged(store, "amy", files_hash(tmp_path / "class" / "amy"), ["linear.Linear"])
    assert not batch.is_unchanged(
        store, "amy", files_hash(tmp_path / "class" / "amy"), ["linear.Linear", "activations.ReLU"]
    )
    fake.calls.clear()
    batch.run_batch(tmp_path / "class", store, VERSION, ["linear", "activations.ReLU"], grade_fn=fake)
    assert fake.calls == ["amy"]


def test_a_student_that_cannot_be_graded_does_not_stop_the_others(tmp_path: Path, store: Store) -> None:
    small_class(tmp_path / "class", ["amy", "bob", "cy", "dee"])
    fake = FakeGrade(fail={"bob": SetupError("'bob' has no exercise files"), "cy": RuntimeError("boom")})
    summary = batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], jobs=2, grade_fn=fake)
    outcome = {o.student: o for o in summary.outcomes}
    assert outcome["amy"].status == outcome["dee"].status == "graded"
    assert outcome["bob"].status == "error" and "no exercise files" in outcome["bob"].message
    assert outcome["cy"].status == "error" and "RuntimeError: boom" in outcome["cy"].message
    assert "grader bug" in outcome["cy"].message
    assert store.students() == ["amy", "bob", "cy", "dee"]  # an error verdict is recorded for each
    assert {row["status"] for row in store.submissions(student="bob")} == {"error"}
    assert not summary.ok
    # the ones that could not be graded are tried again on the next run, the graded ones are not
    fake.calls.clear()
    batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], grade_fn=fake)
    assert sorted(fake.calls) == ["bob", "cy"]


def dying_grade(path: Path, selectors: list[str] | None, student: str, limits: Limits | None) -> GradeReport:
    """Runs in a grading process: kills that process for 'always-dies', and once for 'dies-once'."""
    marker = Path(path) / "died-once"
    if student == "always-dies" or (student == "dies-once" and not marker.exists()):
        marker.write_text("x")
        os._exit(3)
    return FakeGrade()(path, selectors, student, limits)


def test_a_dead_grading_process_costs_one_retry(tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool is rebuilt; the students it held are graded again alone; only the one that kills it fails."""
    small_class(tmp_path / "class", ["always-dies", "amy", "bob", "dies-once"])
    monkeypatch.setattr(batch, "_grade_in_worker", dying_grade)
    summary = batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], jobs=2)
    outcome = {o.student: o for o in summary.outcomes}
    assert sorted(outcome) == ["always-dies", "amy", "bob", "dies-once"]
    assert outcome["always-dies"].status == "error"
    assert "grading process died twice" in outcome["always-dies"].message
    assert {outcome[n].status for n in ("amy", "bob", "dies-once")} == {"graded"}
    assert store.students() == ["always-dies", "amy", "bob", "dies-once"]


def test_jobs_grade_students_at_the_same_time(tmp_path: Path, store: Store) -> None:
    """With jobs=2 two students are in grade() at once: both wait at a barrier only the other can open."""
    small_class(tmp_path / "class", ["amy", "bob"])
    barrier = threading.Barrier(2, timeout=60)
    fake = FakeGrade()

    def meeting(path: Path, selectors: list[str] | None, student: str, limits: Limits | None) -> GradeReport:
        barrier.wait()  # BrokenBarrierError (a failed outcome) if the students ran one after the other
        return fake(path, selectors, student, limits)

    summary = batch.run_batch(tmp_path / "class", store, VERSION, ["linear"], jobs=2, grade_fn=meeting)
    assert summary.count("graded") == 2, summary.outcomes


# --- the real grader on a generated class ----------------------------------------------------------


@pytest.mark.slow
def test_mixed_class_end_to_end(tmp_path: Path, store: Store) -> None:
    """Correct, partial, mistaken, broken and hostile students: each graded in isolation, all recorded."""
    make_class(tmp_path / "class", MIXED_CLASS)
    summary = batch.run_batch(tmp_path / "class", store, VERSION, SELECTED, jobs=2, limits=Limits(wall_s=4))
    assert summary.ok and summary.count("graded") == len(MIXED_CLASS)
    assert store.students() == sorted(MIXED_CLASS)

    def status(student: str, exercise: str) -> str:
        return store.best_scores(student)[exercise]["last_status"]

    def score(student: str) -> float:
        return store.attempts(student)[-1]["score"]

    full = score("ada")
    assert full == store.attempts("ada")[-1]["max_score"] == 90.0
    assert {status("ben", f"activations.{n}") for n in ("Sigmoid", "ReLU", "GELU")} == {"not_implemented"}
    assert status("ben", "linear.Linear") == "passed"
    assert status("cy", "activations.ReLU") == "failed"
    relu = store.submissions("cy", "activations.ReLU")[-1]
    assert "relu-inplace" in {c["misconception"] for c in store.check_results(relu["id"])}
    assert status("dee", "linear.Linear") == "error"  # syntax error
    assert status("eli", "activations.ReLU") == "timeout"  # the busy loop was stopped ...
    assert status("eli", "activations.GELU") == "passed"  # ... and the rest of eli was graded
    assert status("fay", "activations.ReLU") == "error"  # the child aborted
    assert status("gus", "linear.Linear") == "error"  # imports reference
    assert status("hal", "activations.ReLU") == "failed"  # numpy patched in the child only
    for student in ("dee", "eli", "fay", "gus", "hal"):
        assert 0 < score(student) < full


def _recorded(db: Path) -> dict[str, int]:
    """Attempts per student, read with a separate connection (0 rows while the table does not exist)."""
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.OperationalError:
        return {}
    try:
        return dict(conn.execute("SELECT student, count(*) FROM attempts GROUP BY student").fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()


def _processes_in(tmp: Path) -> list[int]:
    """Pids of live processes started with TMPDIR=tmp (the batch's grading processes and their children)."""
    mark = f"TMPDIR={tmp}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark in env and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_for_no_processes_in(tmp: Path) -> None:
    if not Path("/proc/self/environ").exists():
        return  # no /proc: nothing to look at
    deadline = time.monotonic() + 120
    while _processes_in(tmp):
        assert time.monotonic() < deadline, f"processes outlived the killed batch: {_processes_in(tmp)}"
        time.sleep(0.1)


@pytest.mark.slow
def test_killed_batch_leaves_an_intact_database_and_resumes(tmp_path: Path) -> None:
    """SIGKILL `grade batch` while one student is held mid-grading; the re-run grades only the rest.

    The held student waits until the test deletes its hold file, so the kill
    always lands while that student is being graded: no timing decides the outcome.
    """
    hold = tmp_path / "hold"
    hold.write_text("hold")
    kinds = {"amy": "correct", "bob": "partial", "cat": "held", "dan": "mistaken", "eve": "correct", "fox": "syntax"}
    make_class(tmp_path / "class", kinds, hold=hold)
    db = tmp_path / "class.db"
    env = dict(os.environ, TMPDIR=str(tmp_path), GRADE_DB="")
    command = [
        sys.executable,
        "-c",
        "from grader.cli import main; main()",
        "batch",
        str(tmp_path / "class"),
        *SELECTED,
        "--db",
        str(db),
        "--jobs",
        "1",
        "--timeout",
        "600",
    ]
    log = tmp_path / "first.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 300
            while not _recorded(db):
                assert proc.poll() is None, f"grade batch ended before recording anyone:\n{log.read_text()}"
                assert time.monotonic() < deadline, "nobody was recorded within 300 s"
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            hold.unlink()  # releases the held student's orphaned worker too
    assert proc.returncode == -signal.SIGKILL
    _wait_for_no_processes_in(tmp_path)  # grading processes and sandbox children end with the batch

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    before = _recorded(db)
    assert before and "cat" not in before and set(before.values()) == {1}
    with Store.open(db) as store:
        ids_before = {name: [a["id"] for a in store.attempts(name)] for name in before}

    rerun = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{len(before)} unchanged (skipped)" in rerun.stdout
    assert f"{len(kinds) - len(before)} graded" in rerun.stdout
    assert _recorded(db) == {name: 1 for name in kinds}
    with Store.open(db) as store:
        assert {name: [a["id"] for a in store.attempts(name)] for name in before} == ids_before
        assert store.best_scores("cat")["activations.ReLU"]["last_status"] == "passed"
        for name in kinds:  # every exercise of every student recorded once
            assert len(store.submissions(name)) == 9


def test_classgen_lays_out_flat_and_nested_students(tmp_path: Path) -> None:
    folders = make_class(tmp_path / "class", {"a": "correct", "b": "partial"})
    assert folders["a"] == tmp_path / "class" / "a"
    assert folders["b"] == tmp_path / "class" / "b" / "exercises"
    assert exercises_folder(tmp_path / "class" / "b") == folders["b"]
    assert (folders["a"] / "kernels").is_dir()
    assert "NotImplementedError" in (folders["b"] / "activations.py").read_text()
    with pytest.raises(ValueError, match="hold file"):
        make_student(tmp_path / "x", "held")


def test_a_grading_process_keeps_no_reference_results_between_students(tmp_path: Path) -> None:
    """Every student has seeds of their own: cached reference results would never hit and only grow."""
    from grader.course import grading
    from grader.course.solution import write_solution

    folder = write_solution(tmp_path / "exercises")
    report = batch._grade_in_worker(folder, ["activations.ReLU"], "amy", Limits())
    assert report.exercises[0].status == "passed"
    assert grading._REFERENCE_CACHE == {}


# --- exercises the grader's machine could not grade -------------------------------------------------------------


class HalfBrokenGrade(FakeGrade):
    """linear.Linear graded; kernels.relu_forward not graded (no device builds a kernel) while ``broken``."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True
        self.asked: list[list[str]] = []

    def __call__(self, path: Path, selectors: list[str] | None, student: str, limits: Limits | None) -> GradeReport:
        with self.lock:
            self.asked.append(list(selectors or []))
        results = []
        for exercise_id in selectors or []:
            if exercise_id == "kernels.relu_forward" and self.broken:
                results.append(
                    ExerciseResult(
                        exercise_id,
                        "not_graded",
                        0.0,
                        10.0,
                        [],
                        "no OpenCL device here can build and run a kernel (`grade doctor` shows more)",
                    )
                )
            else:
                results.append(ExerciseResult(exercise_id, "passed", 10.0, 10.0))
        return GradeReport(student, results, files_hash=files_hash(Path(path)))


def test_not_graded_exercises_are_not_recorded_and_the_next_run_grades_them_alone(tmp_path: Path, store: Store) -> None:
    small_class(tmp_path / "class", ["amy", "bob"])
    fake = HalfBrokenGrade()
    ids = ["linear.Linear", "kernels.relu_forward"]
    summary = batch.run_batch(tmp_path / "class", store, VERSION, ids, grade_fn=fake)
    outcome = {o.student: o for o in summary.outcomes}
    assert outcome["amy"].status == "graded" and outcome["amy"].not_graded == ["kernels.relu_forward"]
    assert "no OpenCL device" in outcome["amy"].message
    assert {r["exercise"] for r in store.submissions(student="amy")} == {"linear.Linear"}  # nobody's zero
    assert summary.exit_status == 2 and summary.ok
    assert "2 exercise(s) of 2 student(s) not graded (the grader's machine)" in summary.line()
    line = summary.not_graded_line()
    assert line.startswith("NOT_GRADED: 2 exercise(s) of 2 student(s) were not graded") and "grade doctor" in line
    assert summary.to_json()["not_graded"] == 2
    fake.asked.clear()
    again = batch.run_batch(tmp_path / "class", store, VERSION, ids, grade_fn=fake)  # still broken: held again
    assert fake.asked == [["kernels.relu_forward"]] * 2 and again.exit_status == 2
    fake.broken, fake.asked = False, []
    healed = batch.run_batch(tmp_path / "class", store, VERSION, ids, grade_fn=fake)
    assert fake.asked == [["kernels.relu_forward"]] * 2 and healed.exit_status == 0  # the missing ones alone
    assert sorted(r["exercise"] for r in store.submissions(student="amy")) == sorted(ids)
    fake.asked = []
    last = batch.run_batch(tmp_path / "class", store, VERSION, ids, grade_fn=fake)
    assert fake.asked == [] and last.count("skipped") == 2


def test_a_hand_in_none_of_whose_exercises_was_graded_records_nothing(tmp_path: Path, store: Store) -> None:
    small_class(tmp_path / "class", ["amy"])
    summary = batch.run_batch(tmp_path / "class", store, VERSION, ["kernels.relu_forward"], grade_fn=HalfBrokenGrade())
    assert [o.status for o in summary.outcomes] == ["not_graded"]
    assert store.attempts("amy") == [] and summary.exit_status == 2


@pytest.mark.slow
@pytest.mark.opencl
def test_grade_batch_on_a_machine_whose_compiler_does_not_know_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real pipeline in spawned grading processes, the fault passed into their sandboxes: the kernel is
    not graded (never error, never 0), the rest is, the exit status is 2 with one line naming `grade doctor`;
    the next run, on a fixed machine, grades the kernel alone."""
    from click.testing import CliRunner

    from grader.cli import cli
    from grader.course.solution import write_solution

    root = tmp_path / "class"
    write_solution(root / "amy" / "exercises")
    db = tmp_path / "class.db"
    args = ["batch", str(root), "activations.ReLU", "kernels.relu_forward", "--db", str(db), "-j", "1"]
    monkeypatch.setenv("GRADE_OPENCL_FAULT", "unknown-cpu")
    broken = CliRunner().invoke(cli, args)
    assert broken.exit_code == 2, broken.output
    assert "1 exercise(s) of 1 student(s) not graded" in broken.stdout
    errors = [line for line in broken.stderr.splitlines() if line.startswith("Error: NOT_GRADED")]
    assert len(errors) == 1 and "unknown target CPU 'generic'" in errors[0] and "grade doctor" in errors[0]
    with Store.open(db) as store:
        assert [(r["exercise"], r["score"]) for r in store.submissions(student="amy")] == [("activations.ReLU", 10.0)]
    monkeypatch.delenv("GRADE_OPENCL_FAULT")
    fixed = CliRunner().invoke(cli, args)
    assert fixed.exit_code == 0, fixed.output
    with Store.open(db) as store:
        rows = store.submissions(student="amy")
        assert [(r["exercise"], r["score"]) for r in rows] == [
            ("activations.ReLU", 10.0),
            ("kernels.relu_forward", 10.0),
        ]
