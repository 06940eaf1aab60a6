"""The policy x view matrix's browser tier (tests/term/test_standing.py): a course served by `grade serve`, its
pages in chromium, at 1280 and 390 px, checked with axe-core, for the two cases a student's eye must not get past:
an exam chapter's upload held ("received, feedback at T", no score, no checks) and a `derive` stub's upload (the
named mistake's hint, never its fix); the instructor's drill-down of the same student sees both uploads whole, with
the same counted total as the model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from a11y_util import assert_accessible
from exam_util import FIX, NOW, batchnorm_report, iso
from grader.queue import records
from grader.student import standing
from grader.student.course import counted_score, load_course
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store
from server_util import Server, issue_tokens, with_quiz_chapters
from test_dashboard_browser import ARTIFACTS, Watched, browser  # noqa: F401  (the browser fixture)


pytestmark = pytest.mark.slow

COURSE = (
    f'[[chapter]]\nname = "activations"\nopens = {iso(-2)}\ndue = {iso(1)}\nrelease_feedback = {iso(3)}\n'
    f'[[chapter]]\nname = "normalization"\ndue = {iso(24)}\n'
    '[scaffolding.exercises]\n"normalization.BatchNorm1d" = "derive"\n'
)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("standing-browser")
    (root / "course.toml").write_text(with_quiz_chapters(COURSE), encoding="utf-8")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, ["ann"])
    exam = GradeReport(
        "ann",
        [
            ExerciseResult(
                "activations.ReLU", "failed", 5.0, 10.0, [CheckResult("backward", False, 0.0, 5.0, "SECRET dx differs")]
            )
        ],
        "h",
    )
    jobs = {}
    with Store.open(db) as store:
        loaded = load_course(root / "course.toml")
        for name, report, files in (
            ("exam", exam, {"activations.py": "# a\n"}),
            ("derive", batchnorm_report(), {"normalization.py": "# n\n"}),
        ):
            job = records.create_job(
                store, "ann", name, files, [e.id for e in report.exercises], loaded, NOW - timedelta(minutes=5)
            ).job
            records.record_done(store, job, report, "v")
            jobs[name] = int(job["id"])
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=root / "course.toml").start()
    try:
        yield {"url": server.url, "ann": tokens["ann"], "teacher": teacher, "jobs": jobs, "db": db, "course": loaded}
    finally:
        server.stop()


def widest_table(page: Any) -> float:
    """The right edge of the widest table of the page's main, in CSS pixels (the window's width: it fits)."""
    return float(
        page.evaluate(
            "Math.max(0, ...Array.from(document.querySelectorAll('main table'))"
            ".map(t => t.getBoundingClientRect().right))"
        )
    )


def logged_in(browser: Any, course: dict[str, Any], width: int, who: str) -> tuple[Any, Watched]:  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    login = "/instructor/login" if who == "teacher" else "/student/login"
    watched.page.goto(course["url"] + login)
    watched.page.fill("#token", course[who])
    watched.page.click("button[type=submit]")
    watched.page.wait_for_url(course["url"] + login.replace("login", ""))
    return context, watched


@pytest.mark.parametrize("width", [1280, 390])
def test_the_student_page_holds_the_exam_and_withholds_the_fix(
    browser: Any,
    course: dict[str, Any],  # noqa: F811
    width: int,
) -> None:
    context, watched = logged_in(browser, course, width, "ann")
    page = watched.page
    try:
        page.goto(f"{course['url']}/student/submissions/{course['jobs']['exam']}")
        text = page.inner_text("main")
        release = standing.format_time(datetime.fromisoformat(iso(3).replace("Z", "+00:00")))
        assert f"received, feedback at {release}" in text and "SECRET" not in text
        assert "0/0" not in text and "0 / 0" not in text and "5/10" not in text
        assert "This upload: none shown yet" in text
        assert_accessible(page, f"held exam upload at {width}px")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"standing-exam-held-{width}.png"), full_page=True)
        # the "received, feedback at T" cell wraps: no table wider than the window, no horizontal scroll
        assert watched.overflow() <= 0 and widest_table(page) <= width, (width, widest_table(page))
        page.goto(f"{course['url']}/student/submissions/{course['jobs']['derive']}")
        text = page.inner_text("main")
        assert FIX not in text and "running_var follows the biased batch variance" in text
        assert "This upload: 4/8 (50.0%)" in text
        assert_accessible(page, f"derive upload at {width}px")
        page.screenshot(path=str(ARTIFACTS / f"standing-derive-{width}.png"), full_page=True)
        page.goto(f"{course['url']}/student/chapters/activations")
        assert "opens at" not in page.inner_text("main") and f"feedback at {release}" in page.inner_text("main")
        assert watched.problems == [] and watched.overflow() <= 0
    finally:
        context.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_drill_down_shows_the_instructor_the_model_total(
    browser: Any,
    course: dict[str, Any],  # noqa: F811
    width: int,
) -> None:
    context, watched = logged_in(browser, course, width, "teacher")
    page = watched.page
    try:
        page.goto(f"{course['url']}/instructor/students/ann")
        text = page.inner_text("main")
        loaded = course["course"]
        with Store.open(course["db"]) as store:
            total = sum(
                counted_score(store.submissions("ann", e), loaded.chapter_of(e, "ann"), loaded.rule).score
                for e in ("activations.ReLU", "normalization.BatchNorm1d")
            )
        assert total == 9.0 and re.search(r"^9 / \d+\nexercise points", text, re.M)  # the held score counts for them
        whole = page.text_content("main") or ""  # (the reports sit in closed <details>)
        assert "SECRET dx differs" in whole and FIX in whole  # the instructor sees every upload whole
        # ... and the held score marked as the model says it: held from the student until T
        release = standing.format_time(datetime.fromisoformat(iso(3).replace("Z", "+00:00")))
        assert f"held from the student until {release}" in text
        assert_accessible(page, f"drill-down at {width}px")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"standing-drill-down-{width}.png"), full_page=True)
        page.goto(f"{course['url']}/instructor/")  # the overview's cell: the held score with its dagger
        cell = page.locator("td[title*='activations.ReLU']")
        assert cell.inner_text().startswith("5") and "\u2020" in cell.inner_text()
        assert f"held from the student until {release}" in (cell.get_attribute("title") or "")
        assert_accessible(page, f"overview with a held score at {width}px")
        page.screenshot(path=str(ARTIFACTS / f"standing-overview-{width}.png"), full_page=True)
        assert watched.problems == []
    finally:
        context.close()
