"""The student's own pages in a real browser (Playwright driving Debian's chromium), at 1280 and 390 px.

The journey of issue 35: an LTI launch as a student (the LMS fixture, bench/lms_platform.py) lands on
/student/, which shows the chapters; a quiz question answered in the browser is judged and its attempt
counted; an upload graded by the server's worker shows its report with its pictures; a regrade filed there is
answered by the instructor (from the dashboard, after their own launch) and the answer shows on the upload's
page; the same student logs in again with their token; another student's upload is 404. Then the keyboard
alone: the quiz (a choice, a formula with its live preview), the regrade form, every control reached by Tab
with a visible focus. Screenshots go to tests/artifacts/ (lti-student-*.png, student-*.png).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grader.course.solution import write_solution
from bench.lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User
from server_util import (
    Server,
    api,
    issue_tokens,
    quiz_source,
    right_answer,
    solution_files,
    wait_graded,
    with_quiz_chapters,
)
from a11y_util import focus_ring, unreached_by_tab
from student_pages_util import Seeded, served
from test_dashboard_browser import ARTIFACTS, Watched, browser  # noqa: F401  (the browser fixture)
from test_lti_browser import shoot

pytestmark = pytest.mark.slow


@pytest.fixture
def lti_course(tmp_path: Path) -> Iterator[tuple[Server, LmsPlatform, str]]:
    """``grade serve`` with one worker and an [lti] naming the LMS fixture; Ada and a teacher in the LMS, Bob on
    the roster only."""
    lms = LmsPlatform()
    lms.users = {
        "ada": User("lms-ada", "Ada Lovelace", "ada@example.org", [LEARNER]),
        "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR]),
    }
    lms.start()
    course = tmp_path / "course.toml"
    course.write_text(
        with_quiz_chapters(
            'name = "Deep networks (LTI)"\n'
            + lms.course_toml(contexts=[lms.context_id])
            + '\n[[chapter]]\nname = "init"\ndue = 2099-01-01T00:00:00Z\n'
        ),
        encoding="utf-8",
    )
    db = tmp_path / "course.db"
    bob = issue_tokens(db, ["bob"])[0]["bob"]
    server = Server(db, f"sqlite:///{tmp_path / 'queue.db'}", workers=1, course=course)
    try:
        server.start()
        lms.tool_url = server.url
        lms.tool_jwks = lambda: httpx.get(server.url + "/lti/jwks", timeout=10).json()
        yield server, lms, bob
    finally:
        server.stop()
        lms.stop()


def mistaken_init(folder: Path) -> dict[str, str]:
    """A hand-in whose kaiming_normal passes the variance where numpy takes the standard deviation."""
    write_solution(folder)
    init = (folder / "init.py").read_text(encoding="utf-8")
    kaiming = "std = _kaiming_std(fan_in, fan_out, mode, negative_slope)\n    return rng.normal(0.0, std, "
    wrong = init.replace(kaiming, kaiming.replace("std, ", "std ** 2, "), 1)
    assert wrong != init
    (folder / "init.py").write_text(wrong, encoding="utf-8")
    return solution_files(folder, ["__init__.py", "base.py", "init.py"])


def test_the_students_journey_from_the_lms(
    browser: Any,
    lti_course: tuple[Server, LmsPlatform, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    server, lms, bob = lti_course
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    # the launch lands on the student's own page, logged in, with the chapters in the course's order
    page.goto(lms.url + "/start?user=ada")
    page.wait_for_url(server.url + "/student/")
    assert page.locator("h1").inner_text() == "Your page"
    assert page.locator("header .who").inner_text() == "Signed in as ada@example.org"
    names = page.locator("#chapters + .scroll tbody a").all_inner_texts()
    assert names[0] == "init" and "activations" in names and "universal-approximation" in names
    token = page.locator("#login-command").inner_text().rsplit(" ", 1)[1]
    shoot(page, "student-home")
    # a quiz question answered in the browser: judged, its attempt counted
    page.locator('a[href="/student/chapters/activations"]').click()
    page.get_by_role("link", name="Answer the quiz here").click()
    page.wait_for_url(server.url + "/student/quizzes/activations")
    question = quiz_source("activations").questions[0]
    number = right_answer("activations", question, "ada@example.org", typed=True)
    page.locator(f"#a-{question.id}-{number}").check()
    page.locator(f"#q-{question.id} button[type=submit]").click()
    assert page.locator(f"#v-{question.id}").inner_text() == "Correct."
    assert "Answered correctly (1 of" in page.locator(f"#q-{question.id}").inner_text()
    standing = api(server.url, token, "GET", "/quizzes").json()["chapters"][0]
    assert standing["chapter"] == "activations" and standing["attempts"] == 1 and standing["questions_correct"] == 1
    shoot(page, "student-quiz")
    # an upload (as `grade submit` sends it), graded by the server's worker: its report with its pictures
    sent = api(
        server.url,
        token,
        "POST",
        "/submissions",
        json={"files": mistaken_init(tmp_path / "hand-in"), "exercises": ["init.kaiming_normal"]},
    ).json()
    done = wait_graded(server.url, token, sent["id"])
    assert done["status"] == "done", done
    page.goto(server.url + "/student/")
    page.get_by_role("link", name=f"Submission {sent['id']}", exact=True).click()
    page.wait_for_url(server.url + f"/student/submissions/{sent['id']}")
    assert "init-kaiming-variance-as-std" in page.locator(".ng-mistakes").inner_text()
    pictures = page.locator(".ng-figure svg[role=img]")
    assert pictures.count() >= 1 and pictures.first.is_visible()
    labels = page.eval_on_selector_all(
        "svg[role=img]",
        "els => els.map(e => e.getAttribute('aria-labelledby')"
        ".split(' ').map(id => document.getElementById(id).textContent).join(' '))",
    )
    assert labels and all(len(label) > 20 for label in labels), "every picture keeps its text alternative"
    shoot(page, "student-upload")
    # a regrade filed from the upload's page ...
    page.select_option("#r-exercise", "init.kaiming_normal")
    page.fill("#r-reason", "I take the square root on line 54, please look again")
    page.get_by_role("button", name="Ask for a regrade").click()
    page.wait_for_url(re.compile(r".*\?filed=1#regrades$"))
    assert "Open: waiting for the instructor's answer." in page.locator("#regrades ~ ul").inner_text()
    # ... answered by the instructor on the dashboard ...
    teacher = browser.new_context().new_page()
    teacher.goto(lms.url + "/start?user=prof")
    teacher.wait_for_url(server.url + "/instructor/")
    teacher.goto(server.url + "/instructor/term")
    request = api(server.url, token, "GET", "/regrades").json()["requests"][0]
    teacher.fill(f"#reply-{request['id']}", "Looked again: you are right about the square root.")
    teacher.fill(f"#score-{request['id']}", "9")
    teacher.locator(f'form[action="/instructor/term/regrades/{request["id"]}"] button').click()
    teacher.wait_for_url(re.compile(r".*/instructor/term\?saved=answer.*"))
    # ... and the answer shows on the upload's page
    page.goto(server.url + f"/student/submissions/{sent['id']}")
    answer = page.locator("#regrades ~ ul").inner_text()
    assert "Looked again: you are right about the square root." in answer and "Score set to 9." in answer
    assert watched.problems == []
    context.close()
    # the same student, logging in with the token in a fresh browser
    again = browser.new_context(viewport={"width": 390, "height": 900})
    watched = Watched(again.new_page())
    watched.page.goto(server.url + f"/student/submissions/{sent['id']}")
    watched.page.wait_for_url(re.compile(r".*/student/login\?next=.*"))
    watched.page.fill("#token", token)
    watched.page.get_by_role("button", name="Log in").click()
    watched.page.wait_for_url(server.url + f"/student/submissions/{sent['id']}")
    assert "Score set to 9." in watched.page.locator("#regrades ~ ul").inner_text()
    assert watched.problems == []
    # another student's upload is "not found", the same answer as for no upload at all
    bobs = api(
        server.url,
        bob,
        "POST",
        "/submissions",
        json={"files": {"init.py": "# bob's\n"}, "exercises": ["init.kaiming_normal"]},
    ).json()["id"]
    for job in (bobs, 10**9):
        shown = watched.page.goto(server.url + f"/student/submissions/{job}")
        assert shown is not None and shown.status == 404
        assert f"There is no submission {job} of yours" in watched.page.locator("main").inner_text()
        assert "bob" not in watched.page.content()
    again.close()


# --- the keyboard alone -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Seeded]]:
    """``grade serve`` (no worker) over the seeded course: ada's uploads stay in their states."""
    with served(tmp_path_factory.mktemp("student-keyboard")) as running:
        yield running


def tab_to(page: Any, selector: str, limit: int = 400) -> None:
    """Press Tab until the element ``selector`` has the focus (with a visible ring)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement === document.querySelector({selector!r})"):
            style, width = focus_ring(page)
            assert style != "none" and width == "3px", f"{selector} has no visible focus"
            return
    raise AssertionError(f"Tab never reached {selector}")


def test_every_control_is_reached_by_tab(browser: Any, seeded_server: tuple[Server, Seeded]) -> None:  # noqa: F811
    server, seeded = seeded_server
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = Watched(context.new_page()).page
    try:
        page.goto(server.url + "/student/login")
        assert unreached_by_tab(page) == []
        page.fill("#token", seeded.tokens["ada"])
        page.keyboard.press("Enter")  # the form submits from its field
        page.wait_for_url(server.url + "/student/")
        for path in (
            "/student/",
            "/student/chapters/normalization",
            "/student/quizzes/activations",
            f"/student/submissions/{seeded.jobs['pictures']}",
            f"/student/submissions/{seeded.jobs['queued']}",
        ):
            page.goto(server.url + path)
            assert unreached_by_tab(page) == [], path
    finally:
        context.close()


def test_the_keyboard_alone_answers_a_quiz_and_asks_for_a_regrade(
    browser: Any,  # noqa: F811
    seeded_server: tuple[Server, Seeded],
) -> None:
    server, seeded = seeded_server
    context = browser.new_context(viewport={"width": 390, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    try:
        page.goto(server.url + "/student/login")
        tab_to(page, "#token")
        page.keyboard.type(seeded.tokens["ada"])
        page.keyboard.press("Enter")
        page.wait_for_url(server.url + "/student/")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.className") == "skip"  # the skip link comes first
        # a choice: Tab into the group, the arrows to the right choice, Tab to the button, Enter
        page.goto(server.url + "/student/quizzes/initialisation")
        question = next(q for q in quiz_source("initialisation").questions if q.kind == "single")
        number = int(right_answer("initialisation", question, "ada", typed=True))
        tab_to(page, f"#a-{question.id}-1")
        for _ in range(number - 1):
            page.keyboard.press("ArrowDown")
        if number == 1:
            page.keyboard.press("Space")
        assert page.is_checked(f"#a-{question.id}-{number}")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Check the answer"
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(rf".*#q-{question.id}$"))
        assert page.locator(f"#v-{question.id}").inner_text() == "Correct."
        # a formula: typed, read back as it is typed (the live preview, announced politely), sent with Enter
        formula = next(q for q in quiz_source("initialisation").questions if q.kind == "short" and q.symbols)
        tab_to(page, f"#a-{formula.id}")
        page.keyboard.type("2 / (n_in + n_out)")
        preview = page.locator(f"#p-{formula.id}")
        assert preview.get_attribute("aria-live") == "polite"
        pytest.importorskip("playwright.sync_api").expect(preview).to_have_text("Read as: 2/(n_in + n_out)")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(rf".*#q-{formula.id}$"))
        assert page.locator(f"#v-{formula.id}").inner_text() == "Correct."
        # the regrade form: the exercise chosen with the arrows, the reason typed, sent with Enter on the button
        page.goto(server.url + f"/student/submissions/{seeded.jobs['pictures']}")
        tab_to(page, "#r-exercise")
        page.keyboard.press("ArrowDown")
        assert page.input_value("#r-exercise") == "init.kaiming_normal"
        page.keyboard.press("Tab")
        page.keyboard.type("The variance check reads my std as a variance.")
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*\?filed=1#regrades$"))
        assert "init.kaiming_normal" in page.locator("#regrades ~ ul").inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "student-regrade-filed-390.png"), full_page=True)
        assert watched.problems == []
    finally:
        context.close()


# --- the course text on the student's page (issue 46) -------------------------------------------------------


@pytest.mark.parametrize("width,question_id", [(1280, "bn-dgamma"), (390, "bn-dx-constant")])
def test_a_student_reads_a_section_and_answers_its_checkpoint(
    browser: Any,
    seeded_server: tuple[Server, Seeded],  # noqa: F811
    width: int,
    question_id: str,
) -> None:
    from a11y_util import assert_accessible
    from grader.course import text as course_text

    if not (course_text.KATEX_DIR / "katex.min.js").is_file():
        pytest.skip("KaTeX is not installed: `make text-deps` (npm ci in text/)")
    server, seeded = seeded_server
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    page = watched.page
    elsewhere: list[str] = []
    page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(server.url) else None)
    try:
        page.goto(server.url + "/student/login")
        page.fill("#token", seeded.tokens["ada"])
        page.keyboard.press("Enter")
        page.wait_for_url(server.url + "/student/")
        page.click("text=Course text")
        page.wait_for_url(server.url + "/student/text/")
        page.goto(server.url + "/student/text/normalization.html#batchnorm-backward")
        page.wait_for_load_state("networkidle")
        section = page.locator("#batchnorm-backward")
        assert section.locator(".katex-display").count() >= 5, "the derivation's maths is typeset by KaTeX"
        assert page.locator(".katex-error").count() == 0
        assert page.evaluate("document.fonts.check('16px KaTeX_Main')"), "KaTeX's fonts come from the server"
        ARTIFACTS.mkdir(exist_ok=True)
        section.screenshot(path=str(ARTIFACTS / f"student-text-section-{width}.png"))
        assert_accessible(page, f"/student/text/normalization.html at {width} px")
        # the checkpoint's question: its form on the quiz page, answered there, then back to the section
        section.locator(f'aside.checkpoint a[href$="#q-{question_id}"]').click()
        page.wait_for_url(re.compile(rf".*/student/quizzes/normalization\?section=batchnorm-backward#q-{question_id}$"))
        question = next(q for q in quiz_source("normalization").questions if q.id == question_id)
        answer = right_answer("normalization", question, "ada", typed=True)
        box = page.locator(f"#q-{question_id}")
        if question.kind == "single":
            box.locator(f"#a-{question_id}-{answer}").check()
        else:  # typing asks for the live preview: it is read back before the form is sent (else leaving the page
            # would abort it, a failed request)
            box.locator(f"#a-{question_id}").fill(answer)
            pytest.importorskip("playwright.sync_api").expect(page.locator(f"#p-{question_id}")).to_contain_text(
                "Read as"
            )
        box.locator("button", has_text="Check the answer").click()
        page.wait_for_url(re.compile(rf".*\?section=batchnorm-backward#q-{question_id}$"))
        assert page.locator(f"#v-{question_id}").inner_text() == "Correct."
        page.locator(f"#q-{question_id}").screenshot(path=str(ARTIFACTS / f"student-text-checkpoint-{width}.png"))
        page.locator(f"#q-{question_id}").get_by_role("link", name="Back to §normalization.batchnorm-backward").click()
        page.wait_for_url(server.url + "/student/text/normalization.html#batchnorm-backward")
        assert watched.problems == [] and elsewhere == []
    finally:
        context.close()
