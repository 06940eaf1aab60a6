"""A refusal answers in the kind the asker reads (grader/server/errors.py): a form sent from a page gets a page.

One ``grade serve`` (no workers) for the module: forms of the dashboard and of the student's pages refused by
the text rule (grader/server/text_input.py) answer a styled HTML page with the one line and a link back, status
400; the API, and a script asking for JSON, still get ``{"error": ...}``. The page of a refused form meets WCAG
2.2 AA (axe-core) at 1280 and 390 px.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a11y_util import assert_accessible
from server_util import Server, issue_tokens
from test_dashboard_browser import WIDTHS, browser, open_page  # noqa: F401  (the browser fixture)

NUL_FORM = b"token=a%00b&next=%2Finstructor%2F"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("error-pages")
    tokens, teacher = issue_tokens(root / "course.db", ["ann"])
    server = Server(root / "course.db", f"sqlite:///{root / 'queue.db'}", workers=0).start()
    try:
        yield {"url": server.url, "ann": tokens["ann"], "teacher": teacher}
    finally:
        server.stop()


def assert_page(answer: httpx.Response, status: int, line: str, back: str) -> None:
    """An HTML page (not JSON) with ``status``, the refusal's line and a link back to ``back``."""
    assert answer.status_code == status, answer.text[:300]
    assert answer.headers["content-type"].startswith("text/html"), answer.text[:300]
    assert line in answer.text and f'href="{back}"' in answer.text, answer.text
    assert "Content-Security-Policy" in answer.headers


@pytest.mark.parametrize("path, back", [("/instructor/login", "/instructor/"), ("/student/login", "/student/")])
def test_a_login_form_refused_by_the_text_rule_answers_a_page_with_a_link_back(
    env: dict[str, Any], path: str, back: str
) -> None:
    answer = httpx.post(env["url"] + path, content=NUL_FORM, headers={**FORM, "Accept": "text/html"}, timeout=30)
    assert_page(answer, 400, "U+0000", back)


def test_a_dashboard_form_refused_by_the_text_rule_answers_a_page(env: dict[str, Any]) -> None:
    answer = httpx.post(
        env["url"] + "/instructor/overrides",
        content=b"student=ann&exercise=a%01b&score=1",
        headers={**FORM, "Authorization": f"Bearer {env['teacher']}"},
        timeout=30,
    )
    assert_page(answer, 400, "U+0001", "/instructor/")


def test_a_page_not_found_is_a_page_too(env: dict[str, Any]) -> None:
    assert_page(httpx.get(env["url"] + "/instructor/no-such-page", timeout=30), 404, "Not Found", "/instructor/")
    assert_page(httpx.get(env["url"] + "/nowhere", timeout=30), 404, "Not Found", "/student/")


def test_the_api_and_a_script_asking_for_json_still_get_json(env: dict[str, Any]) -> None:
    api = httpx.post(
        env["url"] + "/api/v1/regrades",
        json={"exercise": "a\x00", "reason": "r"},
        headers={"Authorization": f"Bearer {env['ann']}", "Accept": "text/html"},
        timeout=30,
    )
    assert api.status_code == 400 and "U+0000" in api.json()["error"]
    script = httpx.post(
        env["url"] + "/instructor/login", content=NUL_FORM, headers={**FORM, "Accept": "application/json"}, timeout=30
    )
    assert script.status_code == 400 and "U+0000" in script.json()["error"]


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_of_a_refused_form_meets_wcag_2_2_aa(
    browser: Any,
    env: dict[str, Any],
    width: int,  # noqa: F811
    tmp_path: Path,
) -> None:
    context, watched = open_page(browser, width)
    page = watched.page
    try:
        for login, heading in [("/instructor/login", "Bad Request"), ("/student/login", "Bad Request")]:
            page.goto(env["url"] + login)
            page.fill("#token", "a\x01b")  # a control character: refused by the text rule
            page.get_by_role("button", name="Log in").click()
            page.wait_for_selector("h1")
            assert page.inner_text("h1") == heading and "U+0001" in page.inner_text("main")
            assert_accessible(page, f"the refusal of {login} at {width} px")
            page.screenshot(
                path=str(tmp_path / f"refused-{login.strip('/').replace('/', '-')}-{width}.png"), full_page=True
            )
    finally:
        context.close()
