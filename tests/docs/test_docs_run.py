"""Every documented path runs as written: each shell block of README.md, docs/*.md and the handout's README.

Each page runs in a scratch course of its own (tests/docs/shell_pages.py says how a line runs): a copy of
the repository's tracked files (what a reader cloned) beside an empty folder for `grade release --out
../release`, with what the page says the reader has (a roster.csv, a submissions/ folder of three students,
a course.toml, a course database, a Redis server, an LMS). The pages that say `grade ...` run with the
repository's virtual environment activated (`source .venv/bin/activate`, as README.md says); those that say
`.venv/bin/grade` find it there. The course's own path is one sequence: docs/operator.md (the instructor
releases with docs/course.example.toml and serves it; the students install the handout), then the handout's
README that release wrote (every block, in the handout, against that server), then docs/quizzes.md's answers
file (in the handout). README.md's `make grade` installs a virtual environment of its own.

What may differ from the text, and only that: the placeholders the text shows (EXERCISE, CHAPTER, ID,
[EXERCISE|TOPIC ...], HOST:6379 and Redis's port, the example course's port 8000, the token `grade login`
asks for), and the example course's dates, moved ahead by whole days so that its chapters still lie ahead of
today (the order and gaps kept): a test must not expire with the term. A block is skipped only with a
written reason (`<!-- skip: next "reason" -->`); a fence without a language fails.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from conftest import require_program
from shell_pages import Page, run_page

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
EXAMPLE_COURSE = "docs/course.example.toml"
EXAMPLE_DATES_FROM = datetime(2026, 11, 30, tzinfo=timezone.utc)  # the example course's dates lie after this
ROSTER = [
    ("alice", "Alice Ahmed", "alice@uni.edu"),
    ("bob", "Bob Brown", "bob@uni.edu"),
    ("carol", "Carol Chen", "carol@uni.edu"),
    ("dan", "Dan Diaz", "dan@uni.edu"),
]
CLASS = {"ada": "correct", "ben": "partial", "cy": "mistaken"}  # a submissions/ folder (tests/classgen.py)
QUIZ_ANSWERS = "1\n" * 400  # typed at `grade quiz`: the first choice, or 1, to every question
pytestmark = pytest.mark.slow


# --- scratch courses ----------------------------------------------------------------------------------------


def tracked_files() -> list[str]:
    """The repository's files as a clone has them (git's list; without git, every file but caches and .venv)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        return [name for name in listed.stdout.decode().split("\0") if name and (REPO / name).is_file()]
    skip = {".git", ".venv", "__pycache__", ".grade", ".pytest_cache", "artifacts"}
    return [
        p.relative_to(REPO).as_posix()
        for p in REPO.rglob("*")
        if p.is_file() and not skip & set(p.relative_to(REPO).parts)
    ]


def shifted_dates(text: str, now: datetime) -> str:
    """The example course with its dates moved ahead by whole days, enough that they lie after ``now``."""
    days = max(0, (now - EXAMPLE_DATES_FROM).days + 1)

    def shift(match: re.Match[str]) -> str:
        when = datetime.fromisoformat(match.group(0).replace("Z", "+00:00")) + timedelta(days=days)
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", shift, text)


def scratch_course(root: Path, port: int, venv: bool = True) -> Path:
    """``root/course``: the repository's tracked files, the example course at ``port`` with its dates ahead,
    its copy course.toml, roster.csv, and (``venv``) the repository's .venv (a link: nothing installs there)."""
    course = root / "course"
    for name in tracked_files():
        (course / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, course / name)
    example = shifted_dates((REPO / EXAMPLE_COURSE).read_text(encoding="utf-8"), datetime.now(timezone.utc))
    example = example.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    (course / EXAMPLE_COURSE).write_text(example, encoding="utf-8")
    (course / "course.toml").write_text(example, encoding="utf-8")
    with open(course / "roster.csv", "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([("id", "name", "email"), *ROSTER])
    if venv:
        (course / ".venv").symlink_to(VENV, target_is_directory=True)
    return course


def reader_env(root: Path, activated: bool) -> dict[str, str]:
    """The reader's environment: their own login file, no colour, a browser that opens nothing; with the
    repository's .venv activated or not."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GRADE_DB", "GRADE_TOKEN", "GRADE_STUDENT", "PYTHONPATH", "VIRTUAL_ENV", "GRADE_CONFIG")
    }
    env.update(
        GRADE_CONFIG=str(root / "login" / "config.json"),
        NO_COLOR="1",
        BROWSER="true",
        JUPYTER_RUNTIME_DIR=str(root / "jupyter-runtime"),
        IPYTHONDIR=str(root / "ipython"),
        JUPYTER_CONFIG_DIR=str(root / "jupyter-config"),
    )
    if os.geteuid() == 0:  # a student is not root; this machine (CI) is: Jupyter's server refuses root unless told
        (root / "jupyter-config").mkdir(exist_ok=True)
        (root / "jupyter-config" / "jupyter_server_config.py").write_text("c.ServerApp.allow_root = True\n")
    if activated:
        env.update(PATH=f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(VENV))
    return env


def new_page(root: Path, base: Path, activated: bool, redis: Any = None) -> Page:
    page = Page(base, reader_env(root, activated), logs=root)
    port = re.search(r"127\.0\.0\.1:(\d+)", (root / "course" / EXAMPLE_COURSE).read_text()).group(1)  # type: ignore[union-attr]
    page.placeholders = [
        (r"\[EXERCISE\|TOPIC \.\.\.\]", lambda: "activations.ReLU"),
        (r"\bEXERCISE\b", lambda: "activations.ReLU"),
        (r"\bCHAPTER\b", lambda: "activations"),
        (r"\bID\b", page.last_submission),
        (r"127\.0\.0\.1:8000", lambda: f"127.0.0.1:{port}"),
    ]
    if redis is not None:
        address = redis.url.split("//", 1)[1].split("/", 1)[0]
        page.placeholders.append((r"(?:HOST|127\.0\.0\.1):6379", lambda: address))
    page.stdin = [
        (re.compile(r"\bgrade login\b"), lambda: token_of(root / "course" / "tokens.csv", "alice") + "\n"),
        (re.compile(r"\bgrade quiz \w"), lambda: QUIZ_ANSWERS),
    ]
    return page


def token_of(tokens_csv: Path, student: str) -> str:
    with open(tokens_csv, newline="", encoding="utf-8") as fh:
        return next(row["token"] for row in csv.DictReader(fh) if row["id"] == student)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[tuple[Path, list[Page]]]:
    """A scratch root; every page made in it has its background commands stopped at the end."""
    from server_util import free_port

    tmp_path.chmod(0o755)  # readable by the sandbox's user, as a reader's home folder is
    (tmp_path / "port").write_text(str(free_port()))
    pages: list[Page] = []
    try:
        yield tmp_path, pages
    finally:
        for page in pages:
            page.stop()


def course_in(scratch: tuple[Path, list[Page]], activated: bool, redis: Any = None, venv: bool = True) -> Page:
    root, pages = scratch
    course = scratch_course(root, int((root / "port").read_text()), venv)
    page = new_page(root, course, activated, redis)
    pages.append(page)
    return page


# --- the pages ---------------------------------------------------------------------------------------------

DESIGN_PAGES = sorted(f"docs/design/{p.name}" for p in (REPO / "docs" / "design").glob("*.md"))  # beside the map
PAGES = [
    "README.md",
    "docs/authoring.md",
    "docs/design.md",
    "docs/feedback.md",
    "docs/instructor.md",
    "docs/lti.md",
    "docs/measured.md",
    "docs/operator.md",
    "docs/quizzes.md",
    "docs/server.md",
    "docs/student.md",
    "docs/term.md",
    *DESIGN_PAGES,
]


def test_every_page_of_the_docs_is_run_here() -> None:
    found = ["README.md"] + sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md"))
    assert sorted(found) == sorted(PAGES), "a new page needs its scratch course in tests/docs/test_docs_run.py"


@pytest.mark.parametrize("name", ["docs/authoring.md", "docs/design.md", "docs/measured.md", *DESIGN_PAGES])
def test_pages_without_commands_label_every_block(name: str, tmp_path: Path) -> None:
    """No shell block to run; every fence says what it holds (a bare one fails)."""
    page = Page(tmp_path, reader_env(tmp_path, False), logs=tmp_path)
    assert run_page(REPO / name, page) == [] and page.ran == []


def test_readme_make_grade_installs_and_grades(scratch: tuple[Path, list[Page]]) -> None:
    """`make grade` in a fresh clone: its own .venv, then `grade submit` on the stubs (make passes status 1)."""
    require_program("make", "make")
    page = course_in(scratch, activated=False, venv=False)
    skipped = run_page(REPO / "README.md", page)
    assert [s.split(": ", 1)[1] for s in skipped] == [
        "make test runs the whole suite, and tests/docs/ (which runs this page) is part of it"
    ]
    assert "NOT_IMPLEMENTED" in page.outputs[-1] and (page.base / ".venv" / "bin" / "grade").exists()


def test_instructor_page(scratch: tuple[Path, list[Page]], redis_server: Any) -> None:
    """Release, batch (local, then on Redis with a `grade worker`), the reports, Gradescope's results."""
    from classgen import make_class

    page = course_in(scratch, activated=True, redis=redis_server)
    make_class(page.base / "submissions", CLASS)
    run_page(REPO / "docs/instructor.md", page)
    assert (page.base.parent / "release" / "student" / "README.md").exists()
    canvas = (page.base / "canvas.csv").read_text()
    assert "Alice Ahmed" in canvas and ",ada," in canvas  # the roster's names, and the batch's folders
    assert '"tests"' in (page.base / "results.json").read_text()  # Gradescope's results file


def test_server_page(scratch: tuple[Path, list[Page]], redis_server: Any) -> None:
    """The roster and tokens, `grade serve` on the course's port, then on Redis with a separate `grade worker`."""
    page = course_in(scratch, activated=True, redis=redis_server)
    run_page(REPO / "docs/server.md", page)
    assert "serve" in page.running and "worker" in page.running


def test_term_page(scratch: tuple[Path, list[Page]]) -> None:
    """Rescoring and similarity on a course database: a class of three graded with `grade batch`."""
    from click.testing import CliRunner

    from classgen import make_class
    from grader.cli import cli

    page = course_in(scratch, activated=True)
    make_class(page.base / "submissions", CLASS)
    graded = CliRunner().invoke(
        cli,
        [
            "batch",
            str(page.base / "submissions"),
            "--db",
            str(page.base / "course.db"),
            "activations",
            "normalization",
            "dropout",
        ],
    )
    assert graded.exit_code == 0, graded.output
    run_page(REPO / "docs/term.md", page)
    assert (page.base / "changes.csv").exists()


def test_student_page(scratch: tuple[Path, list[Page]]) -> None:
    page = course_in(scratch, activated=False)
    run_page(REPO / "docs/student.md", page)
    assert len(page.ran) == 3 and all(r.endswith("-> 1") for r in page.ran)  # the stubs: short of full marks


def test_feedback_page(scratch: tuple[Path, list[Page]]) -> None:
    page = course_in(scratch, activated=True)
    run_page(REPO / "docs/feedback.md", page)
    assert (page.base / "report.html").exists() and (page.base / ".grade" / "last-report.html").exists()
    assert f"Report page written to {page.base / 'report.html'}" in page.outputs[0]


def test_lti_page(scratch: tuple[Path, list[Page]]) -> None:
    """`grade roster sync` after an instructor's launch from the LMS (the LMS of bench/lms_platform.py) bound the
    course, run as the page shows it: with the server stopped (while it runs, the sync goes through it with an
    instructor token: tests/server/test_database_owner.py)."""
    import httpx

    from grader.server import lti
    from grader.student.store import Store
    from bench.lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User
    from server_util import Server
    from test_lti import launch

    page = course_in(scratch, activated=True)
    lms = LmsPlatform()
    lms.users = {
        "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR]),
        "new": User("lms-new", "Newton Isaac", "newton@example.org", [LEARNER]),
    }
    lms.start()
    db = page.base / "course.db"
    (page.base / "course.toml").write_text('name = "LTI course"\n' + lms.course_toml(), encoding="utf-8")

    def tool_jwks() -> dict[str, Any]:
        with Store.open(db) as own:
            return lti.public_jwks(own)

    server = Server(db, f"sqlite:///{page.base / 'queue.db'}", workers=0, course=page.base / "course.toml").start()
    try:
        lms.tool_jwks, lms.tool_url = tool_jwks, server.url
        with httpx.Client(base_url=server.url, follow_redirects=False, timeout=30) as client:
            assert launch(client, lms, "prof").status_code < 400
        server.stop()
        run_page(REPO / "docs/lti.md", page)
        assert "new student" in page.outputs[-1] and (page.base / "tokens.csv").exists()
    finally:
        server.stop()
        lms.stop()


def test_the_course_from_the_operators_page_to_the_students_handout(
    scratch: tuple[Path, list[Page]], redis_server: Any
) -> None:
    """docs/operator.md (serve the example course, release it, the students install the handout), then every
    block of the handout's README in the handout against that server, then docs/quizzes.md's answers file."""
    root, _ = scratch
    page = course_in(scratch, activated=False, redis=redis_server)
    run_page(REPO / "docs/operator.md", page)
    handout = root / "release" / "student"
    assert (handout / ".venv" / "bin" / "grade").exists()
    page.base = handout
    readme = run_page(handout / "README.md", page)
    assert readme == []
    for leftover in ("build", "normgrade_student.egg-info"):
        assert not (handout / leftover).exists(), f"`pip install .` left {leftover} in the handout"
    assert (handout / "activations.html").exists() and (handout / "report.html").exists()
    assert any("regrade request #1" in o.lower() for o in page.outputs)
    run_page(REPO / "docs/quizzes.md", page)
    answers = (handout / "quiz-answers.toml").read_text()
    assert 'student = "ann@example.org"' in answers and "[activations]" in answers
