"""One course through its whole life, from the student handout alone (issue 21).

The instructor writes a course.toml that names the server, releases the
course with ``grade release --course``, imports a roster and runs ``grade
serve`` on a loopback port. A student has only the handout: it is installed
into a fresh virtual environment (no ``grader`` but the handout's, no
``reference``), and its own ``grade`` does everything: ``grade login`` asks
for the token alone (the URL comes from the release), ``grade submit`` hands
in the whole folder (the hidden checks run on the server; a known mistake is
named; the late chapter says what counts; the closed chapter is listed), the
report printed is the instructor's view of the same upload, ``grade quiz`` is
judged and recorded by the server, ``grade progress`` is the server's record,
and the instructor's Canvas export holds the counted scores. The same handout
folder, uploaded to the Gradescope bundle of the same release, is graded too.

Dependencies of the fresh environment come from this test's environment
through a .pth line (offline; its editable install of this repository is not
run), and the test checks that the handout declares each of them.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.course.solution import write_solution
from grader.student.feedback.report import format_text
from grader.student.client.wire import report_from_dict
from server_util import Server, api, free_port, quiz_source, right_answer

pytestmark = pytest.mark.slow

STUDENT = "ada"
# Answered right through the server (and in the Gradescope upload): two questions of the activations quiz.
QUIZ_RIGHT = ("gelu-why", "gelu-min-x")
MISTAKE = ("bn.momentum * var * m / (m - 1)", "bn.momentum * var")  # bn-biased-running-var


def course_toml(port: int) -> str:
    """activations: due in the past, late work counts 70 %, still open; init (its quiz: initialisation): closed;
    normalization: due later; every other quiz chapter held by a chapter without dates."""
    return f"""name = "Deep networks, building blocks"
[server]
url = "http://127.0.0.1:{port}"

[[chapter]]
name = "activations"
due = 2026-01-07T23:59:00Z
late_penalty = 0.3
late_until = 2099-12-31T23:59:00Z

[[chapter]]
name = "init"
quiz = "initialisation"
due = 2026-01-07T23:59:00Z

[[chapter]]
name = "normalization"
exercises = ["normalization", "blocks"]
due = 2099-12-31T23:59:00Z

[[chapter]]
name = "dropout"
quiz = "dropout-weight-decay"

[[chapter]]
name = "approximation"
quiz = "universal-approximation"
"""


def install_handout(student: Path, venv: Path) -> Path:
    """``grade`` of a fresh virtual environment holding the handout alone; checks what it can import."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    venv.chmod(0o755)  # readable by the sandbox's user, as any virtual environment
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    done = subprocess.run(pip + ["--no-index", "--no-build-isolation", str(student)], capture_output=True, text=True)
    if done.returncode != 0:  # a setuptools here that cannot build offline: pip's isolated build
        done = subprocess.run(pip + [str(student)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    declared = tomllib.loads((student / "pyproject.toml").read_text())["project"]
    modules = {
        "numpy": "numpy",
        "click": "click",
        "sqlite-utils": "sqlite_utils",
        "sympy": "sympy",
        "cryptography": "cryptography",
        "httpx": "httpx",
        "pyopencl": "pyopencl",
    }
    names = [
        re.split(r"[<>=\[ ]", d)[0] for d in declared["dependencies"] + declared["optional-dependencies"]["opencl"]
    ]
    imports = [modules[n] for n in names if n in modules]
    assert {"httpx", "numpy", "click"} <= set(imports), names
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u, grader, "
            + ", ".join(sorted(set(imports) - {"pyopencl"}))
            + "; print(grader.__file__); print(u.find_spec('reference'), u.find_spec('grader.quiz'),"
            " u.find_spec('grader.server'), u.find_spec('grader.course'))",
        ],
        capture_output=True,
        text=True,
        cwd=venv,
    )
    assert probe.returncode == 0, probe.stderr
    where, missing = probe.stdout.splitlines()
    assert where.startswith(str(venv)) and missing == "None None None None"
    return venv / "bin" / "grade"


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("course")
    root.chmod(0o755)
    port = free_port()
    (root / "course.toml").write_text(course_toml(port))
    released = CliRunner().invoke(
        cli, ["release", "--out", str(root / "release"), "--course", str(root / "course.toml")]
    )
    assert released.exit_code == 0, released.output
    grade = install_handout(root / "release" / "student", root / "venv")
    (root / "roster.csv").write_text(
        f"id,name,email\n{STUDENT},Ada Lovelace,ada@example.org\nbob,Bob,bob@example.org\n"
    )
    db = root / "course.db"
    imported = CliRunner().invoke(
        cli, ["roster", "import", str(root / "roster.csv"), "--db", str(db), "-o", str(root / "tokens.csv")]
    )
    assert imported.exit_code == 0, imported.output
    with open(root / "tokens.csv", newline="") as fh:
        tokens = {row["id"]: row["token"] for row in csv.DictReader(fh)}
    teacher = CliRunner().invoke(cli, ["roster", "instructor", "--db", str(db)]).output.strip()
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=1, course=root / "course.toml", port=port).start()
    # The student's folder: a copy of the handout, the exercises solved, with one classic mistake.
    work = root / "ada-handout"
    shutil.copytree(root / "release" / "student", work)
    write_solution(work / "exercises")
    source = (work / "exercises" / "normalization.py").read_text()
    assert MISTAKE[0] in source
    (work / "exercises" / "normalization.py").write_text(source.replace(*MISTAKE))
    try:
        yield {
            "root": root,
            "grade": grade,
            "url": server.url,
            "token": tokens[STUDENT],
            "tokens": tokens,
            "teacher": teacher,
            "work": work,
            "release": root / "release",
            "server": server,
        }
    finally:
        server.stop()


def student_runs(
    course: dict[str, Any], *args: str, stdin: str = "", who: str = STUDENT, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The handout's own ``grade ARGS`` in the student's folder (no terminal: a new session, no colour)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_DB", "PYTHONPATH", "GRADE_TOKEN")}
    env.update({"GRADE_CONFIG": str(course["root"] / f"{who}-login.json"), "NO_COLOR": "1"})
    return subprocess.run(
        [str(course["grade"]), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd or course["work"],
        env=env,
        timeout=600,
        start_new_session=True,
    )


def test_a_student_takes_part_in_the_course_with_the_handout_alone(course: dict[str, Any]) -> None:
    readme = (course["release"] / "student" / "README.md").read_text()
    assert course["url"] in readme and "| activations | activations | - | 2026-01-07 23:59 UTC | counts 70% |" in readme
    assert "not SciPy" in readme and ".venv/bin/pip install '.[opencl]'" in readme

    # grade login: the URL comes from the release; only the token is asked for.
    login = student_runs(course, "login", stdin=course["token"] + "\n")
    assert login.returncode == 0, login.stderr
    assert f"Logged in to Deep networks, building blocks at {course['url']} as {STUDENT} (student)" in login.stdout

    # grade submit: everything, to the server (hidden checks).
    submit = student_runs(course, "submit")
    assert submit.returncode == 1, submit.stdout + submit.stderr  # the mistake keeps it short of full marks
    assert "Closed: chapter 'init' closed at 2026-01-07 23:59 UTC; not graded: init." in submit.stderr
    submission = int(re.search(r"Submission (\d+) received by", submit.stderr).group(1))  # type: ignore[union-attr]
    text = submit.stdout.rstrip("\n")
    relu = next(line for line in text.splitlines() if " activations.ReLU " in line)
    assert relu.endswith("10/10  (late: counts 70%)")
    assert "normalization.BatchNorm1d" in text and "init." not in text

    # The instructor's view of the same upload: the same report, with the server's late list (notes and total).
    doc = api(course["url"], course["teacher"], "GET", f"/submissions/{submission}").json()
    assert doc["student"] == STUDENT and doc["status"] == "done"
    seen = format_text(report_from_dict(doc["report"]), late_shares={i["exercise"]: i["counts"] for i in doc["late"]})
    assert text == seen
    assert " counted (" in text.splitlines()[-1]  # the total that counts, not the graded one under the late notes
    named = {c["misconception"] for e in doc["json"]["exercises"] for c in e["checks"] if c["misconception"]}
    assert "bn-biased-running-var" in named
    again = student_runs(course, "result", str(submission))  # the stored submission's report, shown later
    assert again.returncode == 1 and again.stdout == submit.stdout
    dashboard = httpx.get(
        f"{course['url']}/instructor/students/{STUDENT}",
        headers={"Authorization": f"Bearer {course['teacher']}"},
        timeout=30,
    )
    assert dashboard.status_code == 200 and text in html.unescape(dashboard.text)  # late notes and total too

    # grade quiz on the server: an answers file with two right answers (ids from the author's source).
    source = quiz_source("activations")
    answers = {
        q.id: right_answer("activations", q, STUDENT, typed=False) for q in source.questions if q.id in QUIZ_RIGHT
    }
    (course["work"] / "answers.json").write_text(json.dumps(answers))
    quiz = student_runs(course, "quiz", "activations", "--answers", "answers.json")
    questions = len(source.questions)  # the chapter's count, read from its quiz (never kept here)
    assert quiz.returncode == 1, quiz.stdout + quiz.stderr  # two of them
    for question in QUIZ_RIGHT:
        assert re.search(rf"Q\d+/\d+ {question}( \[checkpoint\])?: correct", quiz.stdout), quiz.stdout
    listing = student_runs(course, "quiz")
    assert listing.returncode == 0 and re.search(rf"activations\s+{questions} questions .* in progress", listing.stdout)

    # grade progress: the server's record, labelled.
    progress = student_runs(course, "progress")
    assert progress.returncode == 0, progress.stderr
    assert progress.stdout.splitlines()[0] == f"Progress of {STUDENT} (the course server's record, {course['url']})"
    assert re.search(r"activations\.ReLU\s+best\s+7/10 .*late: penalised", progress.stdout), progress.stdout
    assert re.search(rf"quiz: \d/\d+ checkpoints, 2/{questions} questions correct", progress.stdout), progress.stdout
    # what can still gain points: not a closed or late-full exercise (the practice offer follows it)
    next_line = next(line for line in progress.stdout.splitlines() if line.startswith("Next:"))
    assert next_line.startswith("Next: normalization.BatchNorm1d (failed"), next_line

    # The instructor's Canvas CSV holds the counted scores: 70 % of each late activation, the quiz's points.
    canvas = httpx.get(
        f"{course['url']}/instructor/export/canvas.csv",
        headers={"Authorization": f"Bearer {course['teacher']}"},
        timeout=30,
    )
    assert canvas.status_code == 200, canvas.text
    rows = list(csv.reader(io.StringIO(canvas.text)))
    header, row = rows[0], next(r for r in rows if len(r) > 2 and r[2] == STUDENT)
    cell = dict(zip(header, row, strict=True))
    points = {q.id: float(q.data.get("points", 1.0)) for q in source.questions}
    activations = [e for e in doc["report"]["exercises"] if e["id"].startswith("activations.")]
    assert float(cell["Exercises: activations"]) == pytest.approx(sum(0.7 * e["score"] for e in activations))
    assert float(cell["Exercises: init"]) == 0
    quiz_column = next(h for h in header if h.startswith("Quiz: ") and "ctivation" in h)
    assert float(cell[quiz_column]) == pytest.approx(sum(points[q] for q in QUIZ_RIGHT))


def test_the_same_handout_makes_a_gradescope_upload_that_the_bundle_grades(
    course: dict[str, Any], tmp_path: Path
) -> None:
    """The student's exercises/ folder and a quiz-answers.toml as the README shows, graded by the bundle."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(course["release"] / "autograder" / "autograder.zip") as zf:
        zf.extractall(root)
    shutil.copytree(
        course["work"] / "exercises",
        root / "submission" / "exercises",
        ignore=shutil.ignore_patterns("__pycache__", ".grade"),
    )
    # The file `grade quiz activations --student EMAIL --save-answers quiz-answers.toml` writes: the choice as
    # numbered for that student (choices are shuffled per student), under the student's own name.
    from grader import quiz as quiz_lib

    email = "ada@example.org"
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"email": email, "name": "Ada"}]}))
    question = next(
        q for q in quiz_lib.resolve_chapter("activations", quiz_lib.default_quiz_dir()).questions if q.id == "gelu-why"
    )
    shown = [c.id for c in quiz_lib.pose(question, email).choices].index("c") + 1
    (root / "submission" / "quiz-answers.toml").write_text(
        f'student = "{email}"\n[activations]\ngelu-why = "{shown}"\n'
    )
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "AUTOGRADER_ROOT": str(root),
        "PYTHON": sys.executable,
    }
    done = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True, env=env, timeout=600)
    results = json.loads((root / "results" / "results.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    assert done.returncode == 0, done.stderr[-2000:]
    batchnorm = next(t for name, t in tests.items() if "normalization.BatchNorm1d" in name)
    relu = next(t for name, t in tests.items() if "activations.ReLU" in name)
    assert relu["score"] == 10 and batchnorm["score"] < batchnorm["max_score"]
    assert tests["quiz activations"]["score"] == 1


def test_an_import_beyond_numpy_and_the_standard_library_is_refused_here_and_on_the_server(
    course: dict[str, Any], tmp_path: Path
) -> None:
    """The same one-line reason from the handout's public checks and from the server's hidden checks."""
    work = tmp_path / "bob-handout"
    shutil.copytree(course["release"] / "student", work, ignore=shutil.ignore_patterns(".grade"))
    write_solution(work / "exercises")
    source = (work / "exercises" / "activations.py").read_text()
    (work / "exercises" / "activations.py").write_text("from scipy.special import erf\n" + source)
    reason = (
        "activations.py line 1 imports 'scipy': a submission may import only numpy and the Python standard "
        "library (math, functools, ...), so this file scores zero; remove the import"
    )
    local = student_runs(course, "submit", "activations.ReLU", who="bob", cwd=work)
    assert local.returncode == 1 and reason in local.stdout and "ERROR" in local.stdout, local.stdout + local.stderr
    login = student_runs(course, "login", stdin=course["tokens"]["bob"] + "\n", who="bob", cwd=work)
    assert login.returncode == 0, login.stderr
    remote = student_runs(course, "submit", "activations.ReLU", who="bob", cwd=work)
    assert remote.returncode == 1 and reason in remote.stdout and "received by" in remote.stderr, remote.stderr
