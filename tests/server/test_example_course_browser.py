"""The example course (docs/course.example.toml) served, and every page reachable from /instructor/ crawled.

`grade serve --course` with the example course (its [server] url's port swapped for a free one: the only
change) and no --port: it must listen where the url says. The course has what the docs show: groups, two
extensions (one of them the course file's: the Term page once answered 500 for it), an exam chapter, quiz
attempts, [lti] with two platforms. The database holds a roster, graded uploads with their files (a
similarity pair), an open regrade request, a dashboard extension and a rescoring. A real browser (Playwright,
Debian's chromium) logs in and follows every link of every dashboard page, breadth first: each answers 200
(downloads too), with no console error and no failed request; the Term page is looked at in screenshots at
1280 and 390 px (tests/artifacts/example-course-*.png).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
import pytest

from grader.server import roster
from grader.queue import records
from grader.student.course import load_course
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store, utc_now
from grader.term import extensions, regrade
from server_util import free_port, stop_process, wait_for
from test_dashboard_browser import ARTIFACTS, WIDTHS, Watched, browser  # noqa: F401  (the browser fixture)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "course.example.toml"
SOLUTIONS = REPO / "bench" / "similarity_class"
STUDENTS = [
    ("alice", "Alice Ahmed", "alice@uni.edu"),
    ("bob", "Bob Brown", "bob@uni.edu"),
    ("carol", "Carol Chen", "carol@uni.edu"),
    ("dan", "Dan Diaz", "dan@uni.edu"),
]
MAX_PAGES = 400
pytestmark = pytest.mark.slow


def seed(db: Path, course_file: Path) -> str:
    """The roster, graded uploads with files, a regrade request, a dashboard extension, a rescoring; the
    instructor's token."""
    course = load_course(course_file)
    dropout = (SOLUTIONS / "dropout_3.py").read_text(encoding="utf-8")
    with Store.open(db) as store:
        roster.import_roster(store, [roster.RosterEntry(*s) for s in STUDENTS])
        teacher = roster.issue_instructor_token(store)
        for k, (student, _, _) in enumerate(STUDENTS[:3]):
            files = {
                "dropout.py": dropout if k < 2 else (SOLUTIONS / "dropout_6.py").read_text(encoding="utf-8"),
                "activations.py": f"# {student}\n",
            }
            job = records.create_job(
                store,
                student,
                f"k-{student}",
                files,
                ["activations.ReLU", "dropout.dropout"],
                course,
                datetime(2026, 12, 8, 10, tzinfo=timezone.utc),
            ).job
            checks = [
                CheckResult("forward_1d", True, 5.0, 5.0, ""),
                CheckResult(
                    "backward_1d",
                    k == 0,
                    5.0 * (k == 0),
                    5.0,
                    "" if k == 0 else "dx differs at [0, 3]: got 0.0, expected 1.0",
                    None if k == 0 else "relu-inplace",
                ),
            ]
            report = GradeReport(
                student,
                [
                    ExerciseResult(
                        "activations.ReLU", "passed" if k == 0 else "failed", 10.0 if k == 0 else 5.0, 10.0, checks
                    )
                ],
                "h",
            )
            records.record_done(store, job, report, "0.1.0+000000000000")
        regrade.file_request(store, "bob", "activations.ReLU", "My backward follows the course text at x = 0.")
        extensions.grant(store, course, "bob", "", "normalization", "2026-12-20T23:59", "hospital stay", "instructor")
        with store.transaction() as sdb:
            sdb.table("rescorings").insert(
                {
                    "started_at": utc_now(),
                    "finished_at": utc_now(),
                    "grader_version": "0.1.0+111111111111",
                    "exercises": "[]",
                    "uploads": 3,
                    "errors": "[]",
                    "changes": json.dumps(
                        [
                            {
                                "student": "bob",
                                "exercise": "activations.ReLU",
                                "before": 5.0,
                                "after": 10.0,
                                "max_score": 10.0,
                                "flipped": ["upload of 2026-12-08T10:00:00+00:00: backward_1d failed -> passed"],
                            }
                        ]
                    ),
                }
            )
    return teacher


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("example-course")
    port = free_port()
    course = root / "course.toml"  # the example course, its port swapped for a free one (the only change)
    course.write_text(
        EXAMPLE.read_text(encoding="utf-8").replace("127.0.0.1:8000", f"127.0.0.1:{port}"), encoding="utf-8"
    )
    db = root / "course.db"
    teacher = seed(db, course)
    log = root / "serve.log"
    with open(log, "wb") as fh:  # no --port: `grade serve` listens where [server] url says
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.cli", "serve", "--course", str(course), "--db", str(db), "--workers", "0"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return httpx.get(url + "/api/v1/", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, 60, "grade serve --course docs/course.example.toml to answer on its [server] url", 0.1)
        yield {"url": url, "teacher": teacher, "log": log}
    finally:
        stop_process(proc)


def links_of(page: Any, base: str) -> list[str]:
    """The same-site links of the page (fragments dropped), in document order."""
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    out = []
    for href in hrefs:
        url = urldefrag(urljoin(page.url, href)).url
        if url.startswith(base + "/") and url not in out:
            out.append(url)
    return out


def test_every_page_reachable_from_the_dashboard_answers_200(browser: Any, site: dict[str, Any]) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    try:
        page.goto(site["url"] + "/instructor/")
        page.fill("#token", site["teacher"])
        page.click("button[type=submit]")
        page.wait_for_url(site["url"] + "/instructor/")
        queue, seen, visited = [site["url"] + "/instructor/"], set[str](), list[str]()
        while queue and len(visited) < MAX_PAGES:
            url = queue.pop(0)
            if url in seen:
                continue
            seen.add(url)
            fetched = context.request.get(url)  # the session's cookie; downloads too
            assert fetched.status == 200, f"{url}: HTTP {fetched.status}"
            visited.append(urlsplit(url).path)
            if not fetched.headers.get("content-type", "").startswith(
                "text/html"
            ) or "attachment" in fetched.headers.get("content-disposition", ""):
                continue
            answer = page.goto(url)
            assert answer is not None and answer.status == 200, url
            if urlsplit(url).path.startswith("/instructor"):  # follow the dashboard's links, not beyond
                queue += [u for u in links_of(page, site["url"]) if u not in seen and "/logout" not in u]
        assert watched.problems == [], watched.problems
    finally:
        context.close()
    paths = set(visited)
    for expected in (
        "/instructor/",
        "/instructor/term",
        "/instructor/similarity",
        "/instructor/quizzes",
        "/instructor/lti",
        "/instructor/students/carol",
        "/instructor/exercises/activations.ReLU",
        "/instructor/similarity/dropout/alice/bob",
        "/instructor/export/canvas.csv",
        "/instructor/export/moodle.csv",
        "/instructor/export/class.json",
    ):
        assert expected in paths, f"{expected} is not reachable from /instructor/ ({len(paths)} pages seen)"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_term_page_of_the_example_course_reads_at_this_width(
    browser: Any,
    site: dict[str, Any],  # noqa: F811
    width: int,
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    try:
        watched.page.goto(site["url"] + "/instructor/term")
        watched.page.fill("#token", site["teacher"])
        watched.page.click("button[type=submit]")
        watched.page.wait_for_url(site["url"] + "/instructor/term")
        text = watched.page.inner_text("main")
        assert "medical note seen 2026-12-10" in text and "course.toml" in text  # the course file's extension
        assert "group team-3" in text and "hospital stay" in text and "Open regrade requests (1)" in text
        watched.page.screenshot(path=str(ARTIFACTS / f"example-course-term-{width}.png"), full_page=True)
        assert watched.overflow() <= 0
        assert watched.problems == []
    finally:
        context.close()
