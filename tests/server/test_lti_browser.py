"""A full LTI 1.3 launch in a real browser: Playwright (Debian's chromium) follows the OIDC redirects.

``grade serve`` runs with a course.toml whose [lti] names the LMS fixture
(tests/lms_platform.py, in this process, on a loopback port) and one
embedded worker. The browser opens the LMS's link; the pages' forms post
themselves (login initiation, the platform's form_post of the id_token) and
it lands on the student's own page, which shows their token once. A quiz
answer made with that token changes a counted score; the score poster and
the worker post it, and the fixture receives it. An instructor's launch
opens the dashboard and its LMS page. Screenshots at 390 and 1280 px go to
tests/artifacts/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import require_program
from lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User
from server_util import Server, api, quiz_source, right_answer, wait_for

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
WIDTHS = (390, 1280)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_program("chromium", "chromium")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' installs playwright")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=shutil.which("chromium"), args=args)
        yield launched
        launched.close()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Server, LmsPlatform]]:
    lms = LmsPlatform()
    lms.users = {"ada": User("lms-ada", "Ada Lovelace", "ada@example.org", [LEARNER]),
                 "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR])}
    lms.start()
    course = tmp_path / "course.toml"
    course.write_text('name = "Deep networks (LTI)"\n' + lms.course_toml())
    server = Server(tmp_path / "course.db", f"sqlite:///{tmp_path / 'queue.db'}", workers=1, course=course)
    try:
        server.start()
        lms.tool_url = server.url
        lms.tool_jwks = lambda: httpx.get(server.url + "/lti/jwks", timeout=10).json()
        yield server, lms
    finally:
        server.stop()
        lms.stop()


def shoot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), f"{name} overflows"
        page.screenshot(path=str(ARTIFACTS / f"lti-{name}-{width}.png"), full_page=True)


def test_a_full_launch_in_the_browser_and_the_score_reaches_the_lms(browser: Any,
                                                                   running: tuple[Server, LmsPlatform]) -> None:
    server, lms = running
    errors: list[str] = []
    context = browser.new_context()
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(lms.url + "/start?user=ada")
    page.wait_for_url(server.url + "/student/")  # the launch opens the student's own page, logged in
    assert page.locator("h1").inner_text() == "Your page"
    command = page.locator("#login-command").inner_text()
    assert command.startswith(f".venv/bin/grade login {server.url} --token ")
    shoot(page, "student")
    token = command.rsplit(" ", 1)[1]
    me = api(server.url, token, "GET", "/me").json()
    assert me["student"] == "ada@example.org" and me["role"] == "student"

    question = quiz_source("activations").questions[0]  # a choice question: one point when right
    answer = api(server.url, token, "POST", "/quizzes/activations/answers",
                 json={"question": question.id, "answer": right_answer("activations", question, me["student"],
                                                                        typed=False)})
    assert answer.status_code == 200 and answer.json()["correct"], answer.text
    received = wait_for(lambda: [s for s in lms.scores if s["userId"] == "lms-ada"], 90,
                        "the LMS fixture to receive the quiz score", interval=0.2)
    assert received[-1]["scoreGiven"] > 0 and received[-1]["gradingProgress"] == "FullyGraded"
    assert [i["resourceId"] for i in lms.line_items] == ["quiz:activations"]

    teacher = browser.new_context().new_page()
    teacher.goto(lms.url + "/start?user=prof")
    teacher.wait_for_url(server.url + "/instructor/")
    assert "Class overview" in teacher.content()
    # The LMS has the score before the poster's next round marks it posted: wait on that state, not a tick.
    def posted() -> bool:
        teacher.goto(server.url + "/instructor/lti")
        return "1 posted" in teacher.locator("main").inner_text()

    wait_for(posted, 90, "the dashboard to show the score posted", interval=0.3)
    shoot(teacher, "dashboard")

    refused = context.new_page()
    refused.goto(server.url + "/lti/launch")
    assert "Launch refused" in refused.content()
    shoot(refused, "refused")
    assert errors == []
