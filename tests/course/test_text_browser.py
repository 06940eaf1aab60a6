"""The course text's pages in Chromium (grader/course/text.py build_pages, as `grade release` and `grade read
--html` write them): at 1280 and 390 px a page with maths and a checkpoint typesets every formula with the
bundled KaTeX, shows no console error, requests nothing from anywhere but the server that serves it, and
axe-core finds no WCAG 2.2 A/AA violation; a checkpoint's practice question (the handout's, as `grade release`
makes it) is answered in the page, wrong then right, offline. Screenshots go to tests/artifacts/ (look at them)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from a11y_util import assert_accessible
from grader.course import text as course_text
from grader.course.student_handout import page_practice
from test_dashboard_browser import ARTIFACTS, WIDTHS, Watched, browser  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built pages, served over http on loopback (a page's requests can then be told from elsewhere's)."""
    if not (course_text.KATEX_DIR / "katex.min.js").is_file():
        pytest.skip("KaTeX is not installed: `make text-deps` (npm ci in text/)")
    out = tmp_path_factory.mktemp("text-pages")
    course_text.build_pages(
        out, questions={"bn-dgamma": "What is dL/dγ?", "bn-dx-constant": "What is dL/dx?"}, practice=page_practice()
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_text_page_typesets_its_maths_and_shows_its_checkpoint(browser: Any, served: str, width: int) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    elsewhere: list[str] = []
    watched.page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(served) else None)
    try:
        watched.page.goto(f"{served}/normalization.html#batchnorm-backward")
        watched.page.wait_for_load_state("networkidle")
        section = watched.page.locator("#batchnorm-backward")
        assert section.locator(".katex-display").count() >= 5, "the derivation's display maths is typeset"
        assert section.locator("math").count() > 10, "MathML for screen readers (htmlAndMathml)"
        assert watched.page.locator(".katex-error").count() == 0, "every formula parses"
        checkpoint = section.locator("aside.checkpoint")
        assert "bn-dgamma" in checkpoint.inner_text() and "grade quiz normalization" in checkpoint.inner_text()
        assert watched.page.evaluate("document.fonts.check('16px KaTeX_Main')"), "KaTeX's fonts load from beside"
        assert watched.overflow() == 0, "no horizontal scrolling of the page (wide formulas scroll in their box)"
        ARTIFACTS.mkdir(exist_ok=True)
        section.screenshot(path=str(ARTIFACTS / f"text-batchnorm-backward-{width}.png"))
        watched.page.screenshot(path=str(ARTIFACTS / f"text-normalization-top-{width}.png"))
        assert_accessible(watched.page, f"normalization.html at {width} px")
        assert watched.problems == [] and elsewhere == []
    finally:
        context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_practice_question_is_answered_in_the_page_wrong_then_right(browser: Any, served: str, width: int) -> None:  # noqa: F811
    practice = page_practice()["bn-running-var-batches"]
    right, wrong = (practice.low + practice.high) / 2, practice.high + (practice.high - practice.low)
    context = browser.new_context(viewport={"width": width, "height": 900})
    watched = Watched(context.new_page())
    elsewhere: list[str] = []
    watched.page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith(served) else None)
    try:
        watched.page.goto(f"{served}/normalization.html#batchnorm-running-stats")
        watched.page.wait_for_load_state("networkidle")
        checkpoint = watched.page.locator("#batchnorm-running-stats aside.checkpoint")
        assert "grade quiz normalization" in checkpoint.inner_text(), "the pointer to `grade quiz` stays"
        form = checkpoint.locator('form.practice[data-question="bn-running-var-batches"]')
        assert practice.prompt in form.inner_text()
        answer, feedback, explanation = (
            form.get_by_label("Your answer"),
            form.locator(".feedback"),
            form.locator(".explanation"),
        )
        answer.fill("a lot")
        form.get_by_role("button", name="Check").click()
        assert "Write a number" in feedback.inner_text() and answer.get_attribute("aria-invalid") == "true"
        answer.fill(f"{wrong:.4f}")
        form.get_by_role("button", name="Check").click()
        assert "Not this one" in feedback.inner_text() and explanation.is_hidden()
        ARTIFACTS.mkdir(exist_ok=True)
        checkpoint.screenshot(path=str(ARTIFACTS / f"text-practice-wrong-{width}.png"))
        answer.fill(f"{right:.4f}".replace("-", "\u2212"))  # as a student may paste it
        form.get_by_role("button", name="Check").click()
        assert "Right" in feedback.inner_text() and explanation.is_visible()
        assert "§" not in explanation.inner_text() or explanation.locator("a").count() > 0
        checkpoint.screenshot(path=str(ARTIFACTS / f"text-practice-right-{width}.png"))
        assert watched.overflow() == 0
        assert_accessible(watched.page, f"normalization.html practice at {width} px")
        assert watched.problems == [] and elsewhere == []
    finally:
        context.close()
