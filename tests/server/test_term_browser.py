"""The term pages in a real browser (Playwright, Debian's chromium) at 390 and 1280 px: no console error, no failed
request, no horizontal overflow; the regrade answer and the extension forms submitted through the session (CSRF);
screenshots in tests/artifacts/term-*.png."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from conftest import require_program
from grader.term import regrade
from grader.queue import records
from grader.student.course import DEFAULT_COURSE
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store, utc_now
from server_util import Server, issue_tokens, with_quiz_chapters

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SOLUTIONS = Path(__file__).resolve().parents[2] / "bench" / "similarity_class"
WIDTHS = (390, 1280)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_program("chromium", "chromium")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' installs playwright")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # chromium refuses its sandbox as root
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=shutil.which("chromium"), args=args)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("term")
    db = root / "course.db"
    _, teacher = issue_tokens(db, ["ann", "bob", "a-student-with-a-rather-long-identifier"])
    due = (datetime.now(timezone.utc) + timedelta(days=3)).isoformat(timespec="seconds").replace("+00:00", "Z")
    course = root / "course.toml"
    course.write_text(
        with_quiz_chapters(
            f'[[chapter]]\nname = "activations"\ndue = {due}\nlate_penalty = 0.3\n[groups]\nteam-1 = ["ann", "bob"]\n'
        ),
        encoding="utf-8",
    )
    dropout = (SOLUTIONS / "dropout_3.py").read_text(encoding="utf-8")
    with Store.open(db) as store:
        for student, files in (
            ("ann", {"activations.py": "# ann\n", "dropout.py": dropout}),
            ("bob", {"dropout.py": dropout}),
            ("a-student-with-a-rather-long-identifier", {"dropout.py": dropout}),
        ):
            job = records.create_job(
                store, student, "k", files, ["activations.ReLU"], DEFAULT_COURSE, datetime.now(timezone.utc)
            ).job
            checks = [
                CheckResult("forward_1d", True, 5.0, 5.0, ""),
                CheckResult(
                    "backward_1d",
                    False,
                    0.0,
                    5.0,
                    "dx differs from the expected values at [0, 3]: got 0.0, expected 1.0 " + "x" * 200,
                    "relu-inplace",
                ),
            ]
            records.record_done(
                store,
                job,
                GradeReport(student, [ExerciseResult("activations.ReLU", "failed", 5.0, 10.0, checks)], "h"),
                "v1",
            )
        regrade.file_request(
            store,
            "ann",
            "activations.ReLU",
            "My backward follows equation 3.2 of the course text; the check expects the other "
            "convention at x = 0. " * 3,
        )
        with store.transaction() as sdb:
            sdb.table("rescorings").insert(
                {
                    "started_at": utc_now(),
                    "finished_at": utc_now(),
                    "grader_version": "0.1.0",
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
                                "flipped": ["upload of 2026-12-01T10:00:00+00:00: backward_1d failed -> passed"],
                            }
                        ]
                    ),
                }
            )
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=course).start()
    try:
        yield {"url": server.url, "teacher": teacher, "db": db}
    finally:
        server.stop()


def watched_page(browser: Any, width: int) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    return context, page, problems


def log_in(site: dict[str, Any], page: Any, path: str) -> None:
    page.goto(site["url"] + path)
    page.fill("#token", site["teacher"])
    page.click("button[type=submit]")
    page.wait_for_url(site["url"] + path)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_term_pages_read_at_this_width(browser: Any, site: dict[str, Any], width: int) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    context, page, problems = watched_page(browser, width)
    try:
        log_in(site, page, "/instructor/term")
        for name, path in (
            ("term", "/instructor/term"),
            ("similarity", "/instructor/similarity"),
            ("pair", "/instructor/similarity/dropout/ann/bob"),
        ):
            page.goto(site["url"] + path)
            page.screenshot(path=str(ARTIFACTS / f"term-{name}-{width}.png"), full_page=True)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{name} is {overflow} px wider than {width} px"
            assert page.locator("h1").first.is_visible()
        assert page.locator("mark").count() >= 2
        assert problems == []
    finally:
        context.close()


def test_answer_and_extension_forms_through_the_session(browser: Any, site: dict[str, Any]) -> None:
    context, page, problems = watched_page(browser, 1280)
    try:
        log_in(site, page, "/instructor/term")
        assert "Open regrade requests (1)" in page.inner_text("main")
        page.fill("textarea[name=reply]", "You are right; the score is corrected.")
        page.fill("input[name=score]", "8.5")
        page.click("#requests button[type=submit]")
        page.wait_for_url(site["url"] + "/instructor/term?saved=answer#requests")
        assert "Answer saved." in page.inner_text("main") and "Open regrade requests (0)" in page.inner_text("main")
        page.fill("#ext-student", "bob")
        page.fill("#ext-due", "2030-01-10T12:00")
        page.fill("#ext-reason", "sports tournament, letter from the coach")
        page.click("#extensions button[type=submit]")
        page.wait_for_url(site["url"] + "/instructor/term?saved=extension#extensions")
        assert "sports tournament, letter from the coach" in page.inner_text("#extensions")
        assert problems == []
    finally:
        context.close()
    with Store.open(site["db"]) as store:
        assert store.extension_log("bob")[0]["due"] == "2030-01-10T12:00:00+00:00"
        assert regrade.requests(store, "ann")[0]["override"] == 8.5
