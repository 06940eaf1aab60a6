"""The banner and the held uploads page in a real browser (Playwright driving Debian's chromium).

A server in this process (test_held_server's fixture) whose workers' self-test
fails for kernel exercises, with one kernel upload held: at 390 and 1280 px the
overview and the term page carry the banner (role alert, its link reaching the
held page), the held page lists the upload, nothing scrolls sideways and the
console stays clean. Screenshots go to tests/artifacts/ (ignored by git).
"""

from __future__ import annotations

from typing import Any

import pytest

from server_util import api, wait_for
from test_dashboard_browser import ARTIFACTS, WIDTHS, Watched, browser, open_page  # noqa: F401 (fixture)
from test_held_server import KERNEL, health, publish, served  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def held(served: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    publish(served, {"cpu": True, "opencl": False})
    wait_for(lambda: health(served)["selftest"]["opencl"]["ok"] is False, 30, "the server to adopt the self-test")
    body = {"files": {"kernels/activations.cl": "__kernel void relu_forward() {}\n"}, "exercises": [KERNEL]}
    answer = api(served["url"], served["token"], "POST", "/submissions", json=body)
    assert answer.status_code == 202, answer.text
    job_id = int(answer.json()["id"])
    wait_for(lambda: health(served)["held"]["uploads"] == 1, 30, "the upload to be held")
    return {**served, "job": job_id}


def log_in(served: dict[str, Any], watched: Watched) -> None:  # noqa: F811  (the served fixture)
    watched.page.goto(served["url"] + "/instructor/")
    watched.page.fill("#token", served["teacher"])
    watched.page.click("button[type=submit]")
    watched.page.wait_for_url(served["url"] + "/instructor/")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_banner_and_the_held_page_read_at_this_width(
    browser: Any,
    held: dict[str, Any],  # noqa: F811
    width: int,
) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    context, watched = open_page(browser, width)
    page = watched.page
    try:
        log_in(held, watched)
        for name, path in (("overview", "/instructor/"), ("term", "/instructor/term")):
            page.goto(held["url"] + path)
            page.screenshot(path=str(ARTIFACTS / f"held-banner-{name}-{width}.png"), full_page=True)
            banner = page.locator(".grading-banner[role=alert]")
            assert banner.is_visible()
            text = banner.inner_text()
            assert "Kernel exercises are not being graded" in text and "1 upload held" in text
            assert watched.overflow() <= 0, f"{name} is wider than {width} px"
        page.click(".grading-banner a")
        page.wait_for_url(held["url"] + "/instructor/held")
        page.screenshot(path=str(ARTIFACTS / f"held-page-{width}.png"), full_page=True)
        assert page.locator("h1", has_text="Held uploads").is_visible()
        assert page.locator("#held ~ div table tbody tr").count() == 1
        assert KERNEL in page.inner_text("main") and "fails: refused" in page.inner_text("main")
        assert watched.overflow() <= 0 and watched.problems == []
    finally:
        context.close()
