"""The learning loop's pages in a real browser (Playwright, Debian's chromium) at 390 and 1280 px: the student's
practice page (answered on the page) and the dashboard's Class mistakes (a click to the students) and Item
statistics; axe-core finds no WCAG 2.2 A/AA violation, no page is wider than the window, no console error or
failed request; screenshots in tests/artifacts/loop-*.png."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from a11y_util import assert_accessible
from grader.queue import records
from grader.student.course import load_course
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.quiz.posing import PRACTICE_STUDENT
from grader.student.store import Store
from server_util import Server, quiz_source, right_answer
from student_pages_util import NOW, Seeded, seed
from test_dashboard_browser import ARTIFACTS, Watched, browser  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow
WIDTHS = (390, 1280)
LN = "normalization.LayerNorm"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Seeded]]:
    root = tmp_path_factory.mktemp("loop")
    seeded = seed(root)
    course = load_course(seeded.course)
    with Store.open(seeded.db) as store:
        for k, name in enumerate(["cy", "dee", "a-student-with-a-rather-long-identifier"]):
            for step, mistake in enumerate(["ln-no-keepdims", None if k < 2 else "ln-no-keepdims"]):
                job = records.create_job(
                    store,
                    name,
                    f"{name}-{step}",
                    {"normalization.py": "# code\n"},
                    [LN],
                    course,
                    NOW - timedelta(days=2, hours=-3 * step * (k + 1)),
                ).job
                check = CheckResult("forward", mistake is None, 10.0 if mistake is None else 0.0, 10.0, "", mistake)
                records.record_done(
                    store,
                    job,
                    GradeReport(
                        name,
                        [ExerciseResult(LN, "passed" if mistake is None else "failed", check.score, 10.0, [check])],
                        "h",
                    ),
                    "test",
                )
        rng = random.Random(3)
        for s in range(30):
            for q in ("gelu-why", "elu-value"):
                store.record_quiz_answer(f"s{s}", "activations", q, "1", rng.random() < 0.7)
            n = 8 if s % 2 else 16
            store.record_quiz_answer(f"s{s}", "activations", "gelu-value", "0.1", n == 16, {"n": n})
            store.record_quiz_answer(f"s{s}", "activations", "prelu-vs-leaky", f"choice:{'abcd'[s % 4]}", s % 4 == 0)
    server = Server(
        seeded.db, f"sqlite:///{root / 'queue.db'}", workers=0, course=seeded.course, extra=["--lease-timeout", "3600"]
    ).start()
    try:
        yield server, seeded
    finally:
        server.stop()


def look(watched: Watched, name: str, width: int) -> None:
    page = watched.page
    page.screenshot(path=str(ARTIFACTS / f"loop-{name}-{width}.png"), full_page=True)
    assert watched.overflow() <= 0, f"{name} is {watched.overflow()} px wider than {width} px"
    assert_accessible(page, f"{name} at {width} px")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_practice_page_is_answered_in_the_browser(
    browser: Any,
    site: tuple[Server, Seeded],  # noqa: F811
    width: int,
) -> None:
    server, seeded = site
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    try:
        page.goto(server.url + "/student/login")
        page.fill("#token", seeded.tokens["ada"])
        page.keyboard.press("Enter")
        page.wait_for_url(server.url + "/student/")
        page.get_by_role("link", name="Practice").first.click()
        page.wait_for_url(server.url + "/student/practice")
        look(watched, "practice", width)
        item = page.locator("#c-init-variance-vs-std")
        question_id = item.locator("input[name=question]").get_attribute("value")
        chapter, _, qid = str(question_id).partition("/")
        source = next(q for q in quiz_source(chapter).questions if q.id == qid)
        answer = right_answer(chapter, source, PRACTICE_STUDENT, typed=True) if width == 1280 else "12345.6"
        item.locator("input[name=answer]").fill(str(answer))
        item.get_by_role("button", name="Check the answer").click()
        page.wait_for_url(server.url + "/student/practice#result")
        verdict = page.locator("#verdict").inner_text()
        assert verdict.startswith("Right." if width == 1280 else "Not this one."), verdict
        look(watched, "practice-answered", width)
        assert watched.problems == []
    finally:
        context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_class_mistakes_and_item_statistics_pages(
    browser: Any,
    site: tuple[Server, Seeded],  # noqa: F811
    width: int,
) -> None:
    server, seeded = site
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    try:
        page.goto(server.url + "/instructor/")
        page.fill("#token", seeded.teacher)
        page.keyboard.press("Enter")
        page.wait_for_url(server.url + "/instructor/")
        page.get_by_role("link", name="Class mistakes").click()
        page.wait_for_url(server.url + "/instructor/mistakes")
        look(watched, "class-mistakes", width)
        page.get_by_role("link", name="ln-no-keepdims").click()
        page.wait_for_url(f"{server.url}/instructor/mistakes/{LN}/ln-no-keepdims")
        assert "a-student-with-a-rather-long-identifier" in page.inner_text("main")
        look(watched, "class-mistake", width)
        page.get_by_role("link", name="Item statistics").click()
        page.wait_for_url(server.url + "/instructor/item-stats")
        assert "unfair" in page.inner_text("main")
        assert "confuses PReLU with RReLU's random slope" in page.inner_text("main")  # a distractor's label
        look(watched, "item-stats", width)
        assert watched.problems == []
    finally:
        context.close()
