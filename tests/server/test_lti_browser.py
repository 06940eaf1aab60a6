"""A full LTI 1.3 launch in a real browser: Playwright (Debian's chromium) follows the OIDC redirects.

``grade serve`` runs with a course.toml whose [lti] names the LMS fixture
(bench/lms_platform.py, in this process, on a loopback port) and one
embedded worker. The browser opens the LMS's link; the pages' forms post
themselves (login initiation, the platform's form_post of the id_token) and
it lands on the student's own page, which shows their token once. A quiz
answer made with that token changes a counted score; the score poster and
the worker post it, and the fixture receives it. An instructor's launch
opens the dashboard and its LMS page. Screenshots at 390 and 1280 px go to
tests/artifacts/.

**Inside the LMS's iframe.** A cross-site frame needs two sites and https
(SameSite=None cookies must be Secure). We chose real TLS over flags: the
test makes a self-signed certificate for ``tool.test``, ``lms.test`` and
``evil.test`` with ``cryptography``, serves the tool (create_app under
uvicorn, in this process) and the LMS's pages over https on 127.0.0.1, and
starts Chromium with ``--host-resolver-rules`` mapping those names to
127.0.0.1 (nothing leaves loopback) and a context that accepts the
certificate (``ignore_https_errors``). Chromium also runs with
``--test-third-party-cookie-phaseout``, as browsers that block third-party
cookies do: only the launch's Partitioned cookies survive in the frame. The
LMS's course page frames the launch; the dashboard (instructor) and the
student's own page render inside it, and a page of another site
framing the same launch is refused by the browser (frame-ancestors).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from a11y_util import assert_accessible
from conftest import require_program
from bench.lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User
from server_util import Server, api, quiz_source, right_answer, wait_for

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
WIDTHS = (390, 1280)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    """One Playwright for the module's browsers (a second sync_playwright cannot start beside the first)."""
    require_program("chromium", "chromium")
    playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' installs playwright")
    with playwright_api.sync_playwright() as p:
        yield p


def sandbox_args() -> list[str]:
    return ["--no-sandbox"] if os.geteuid() == 0 else []


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=sandbox_args())
    yield launched
    launched.close()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Server, LmsPlatform]]:
    lms = LmsPlatform()
    lms.users = {
        "ada": User("lms-ada", "Ada Lovelace", "ada@example.org", [LEARNER]),
        "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR]),
    }
    lms.start()
    course = tmp_path / "course.toml"
    course.write_text('name = "Deep networks (LTI)"\n' + lms.course_toml(contexts=[lms.context_id]))
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


def test_a_full_launch_in_the_browser_and_the_score_reaches_the_lms(
    browser: Any, running: tuple[Server, LmsPlatform]
) -> None:
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
    answer = api(
        server.url,
        token,
        "POST",
        "/quizzes/activations/answers",
        json={"question": question.id, "answer": right_answer("activations", question, me["student"], typed=False)},
    )
    assert answer.status_code == 200 and answer.json()["correct"], answer.text
    received = wait_for(
        lambda: [s for s in lms.scores if s["userId"] == "lms-ada"],
        90,
        "the LMS fixture to receive the quiz score",
        interval=0.2,
    )
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
    assert_accessible(refused, "a refused launch")
    shoot(refused, "refused")
    assert errors == []


# --- inside the LMS's iframe, over https ------------------------------------------------------------------

NAMES = ("tool.test", "lms.test", "evil.test")


def self_signed(folder: Path) -> tuple[str, str]:
    """A certificate and key for NAMES (and 127.0.0.1), made here with cryptography; (certfile, keyfile)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "normgrade test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in NAMES] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(certfile), str(keyfile)


@pytest.fixture(scope="module")
def framing_browser(playwright: Any) -> Iterator[Any]:
    """Chromium resolving NAMES to 127.0.0.1 and blocking third-party cookies (as browsers now do)."""
    args = [
        "--host-resolver-rules=" + ", ".join(f"MAP {n} 127.0.0.1" for n in NAMES),
        "--test-third-party-cookie-phaseout",
    ] + sandbox_args()
    launched = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=args)
    yield launched
    launched.close()


@pytest.fixture
def framed(tmp_path: Path) -> Iterator[tuple[str, LmsPlatform]]:
    """The tool at https://tool.test:PORT (uvicorn with TLS, in this process) and the LMS at https://lms.test:PORT."""
    import threading

    import uvicorn

    from grader.server import lti
    from grader.server.app import ServerConfig
    from grader.server.web import create_app
    from grader.student.course import DEFAULT_COURSE
    from grader.student.store import Store
    from server_util import HOST, free_port

    certfile, keyfile = self_signed(tmp_path)
    lms = LmsPlatform()
    lms.users = {
        "ada": User("lms-ada", "Ada Lovelace", "ada@example.org", [LEARNER]),
        "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR]),
    }
    lms.start().start_tls(certfile, keyfile, "lms.test")
    port = free_port()
    tool = f"https://tool.test:{port}"
    db = tmp_path / "course.db"
    table = {
        "tool_url": tool,
        "platform": [lms.platform_table(contexts=[lms.context_id], frame_origins=[lms.browser_url])],
    }
    (tmp_path / "no-quizzes").mkdir()
    config = ServerConfig(
        db,
        f"sqlite:///{tmp_path / 'queue.db'}",
        DEFAULT_COURSE.__class__(name="Deep networks (LTI)", lti=table),
        quiz_dir=tmp_path / "no-quizzes",
    )
    app = create_app(config, run_collector=False)
    app.state.lti_poster_enabled = False

    def tool_jwks() -> dict[str, Any]:
        with Store.open(db) as store:
            return lti.public_jwks(store)

    lms.tool_url, lms.tool_jwks = tool, tool_jwks
    server = uvicorn.Server(
        uvicorn.Config(
            app, host=HOST, port=port, log_level="warning", lifespan="on", ssl_certfile=certfile, ssl_keyfile=keyfile
        )
    )
    thread = threading.Thread(target=server.run, name="tool-tls", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 30, "the tool to listen over https")
        yield tool, lms
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        lms.stop()


def test_the_launch_renders_inside_an_iframe_of_the_platform(
    framing_browser: Any, framed: tuple[str, LmsPlatform]
) -> None:
    tool, lms = framed
    context = framing_browser.new_context(ignore_https_errors=True)
    try:
        framed_dashboard_and_student(framing_browser, context, tool, lms)
    finally:
        context.close()  # its keep-alive connections too: the servers stop at once


def framed_dashboard_and_student(framing_browser: Any, context: Any, tool: str, lms: LmsPlatform) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(lms.browser_url + "/course?user=prof")  # the teacher opens the tool in the course's navigation
    frame = page.frame_locator("#tool")
    frame.locator("h1", has_text="Class overview").wait_for(timeout=60_000)  # the dashboard, framed
    assert page.url.startswith(lms.browser_url)  # the LMS's page stays on top
    frame.locator("a[href='/instructor/lti']").first.click()  # the frame's session cookie works on the next page
    frame.locator("h1", has_text="LMS connection").wait_for(timeout=60_000)
    shoot(page, "iframe-dashboard")
    cookies = {c["name"]: c for c in context.cookies() if c["domain"] == "tool.test"}
    assert cookies["normgrade_session"]["sameSite"] == "None" and cookies["normgrade_session"]["secure"]
    assert cookies["normgrade_session"].get("partitionKey"), cookies["normgrade_session"]  # in the LMS's jar
    assert errors == []

    other = framing_browser.new_context(ignore_https_errors=True)
    try:
        student = other.new_page()
        student.goto(lms.browser_url + "/course?user=ada")
        student.frame_locator("#tool").locator("h1", has_text="Your page").wait_for(timeout=60_000)
        assert (
            student.frame_locator("#tool")
            .locator("#login-command")
            .inner_text()
            .startswith(f".venv/bin/grade login {tool} --token ")
        )
        shoot(student, "iframe-student")
    finally:
        other.close()


def test_another_site_cannot_frame_the_launch(framing_browser: Any, framed: tuple[str, LmsPlatform]) -> None:
    """evil.test serves the same course page: the browser refuses to show the tool in its frame."""
    _, lms = framed
    context = framing_browser.new_context(ignore_https_errors=True)
    try:
        page = context.new_page()
        with page.expect_event("console", predicate=lambda m: "frame-ancestors" in m.text, timeout=60_000) as refused:
            page.goto(f"https://evil.test:{lms.tls_port}/course?user=ada")
        assert "has been blocked" in refused.value.text
        assert f"frame-ancestors {lms.browser_url}" in refused.value.text
        assert "Your page" not in page.frame_locator("#tool").locator("body").inner_text(timeout=10_000)
    finally:
        context.close()
