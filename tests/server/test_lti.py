"""LTI 1.3: the launch (and every refusal), launch = login, the roster sync (NRPS) and the scores (AGS).

The tool is the course server (``create_app`` served by uvicorn in a thread
on a loopback port, no collector; an httpx client with its cookie jar plays
the browser); the platform is bench/lms_platform.py on
a loopback port. Score posting runs the server's ScorePoster one tick at a
time (``now`` passed in: no test waits on a clock) and the queue's tasks
one by one (``huey.dequeue`` + ``huey.execute``), as a worker would.
"""

from __future__ import annotations

import contextlib
import html
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils
from joserfc.jwk import RSAKey
import httpx
import uvicorn

from grader.server import limits, lti, lti_services, roster
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.queue.jobs import open_queue
from grader.student.course import DEFAULT_COURSE, CourseError, load_course
from grader.student.store import MIGRATIONS, SCHEMA_VERSION, Store, m11_lti
from bench.lms_platform import (
    AGS,
    INSTITUTION_ADMIN,
    INSTRUCTOR,
    LEARNER,
    SYSTEM_ADMIN,
    LmsPlatform,
    User,
    auth_url_params,
    launch,
    login_redirect,
)
from server_util import HOST, free_port, issue_tokens, wait_for


@pytest.fixture
def lms() -> Iterator[LmsPlatform]:
    platform = LmsPlatform()
    platform.titles["course-202"] = "Another course"
    platform.users = {
        "ada": User("lms-ada", "Ada Lovelace", "ada@example.org", [LEARNER]),
        "new": User("lms-new", "Newton Isaac", "newton@example.org", [LEARNER]),
        "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR]),
        "other-prof": User("lms-op", "Other Teacher", "op@example.org", [INSTRUCTOR], contexts=("course-202",)),
        "other-student": User("lms-os", "Other Student", "os@example.org", [LEARNER], contexts=("course-202",)),
    }
    platform.start()
    yield platform
    platform.stop()


@contextlib.contextmanager
def serve_tool(tmp_path: Path, lms: LmsPlatform, lti_table: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The course server for ``lti_table`` on a loopback port (uvicorn in a thread), with a roster and a teacher."""
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["s1"])
    with Store.open(db) as store:  # the roster knows Ada by her e-mail under another id
        roster.import_roster(store, [roster.RosterEntry("s2", "Ada L.", "ADA@example.org")])
    course = DEFAULT_COURSE.__class__(name="LTI course", lti=lti_table)
    config = ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", course)
    app = create_app(config, run_collector=False)
    app.state.lti_poster_enabled = False  # the tests run the poster's ticks themselves
    side = Store.open(db)

    def tool_jwks() -> dict[str, Any]:  # what GET /lti/jwks answers (read in the platform's thread)
        with Store.open(db) as own:
            return lti.public_jwks(own)

    lms.tool_jwks = tool_jwks
    port = free_port()
    lms.tool_url = url = f"http://{HOST}:{port}"
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="tool", daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the tool to listen")
    try:
        with httpx.Client(base_url=url, follow_redirects=False, timeout=30) as client:
            yield {
                "client": client,
                "db": db,
                "app": app,
                "store": side,
                "teacher": teacher,
                "config": config,
                "tokens": tokens,
                "url": url,
            }
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        side.close()


@pytest.fixture
def tool(tmp_path: Path, lms: LmsPlatform) -> Iterator[dict[str, Any]]:
    """The course server bound to the LMS course course-101 in course.toml (``contexts``)."""
    with serve_tool(tmp_path, lms, lms.lti_table(contexts=[lms.context_id])) as served:
        yield served


@pytest.fixture
def unbound(tmp_path: Path, lms: LmsPlatform) -> Iterator[dict[str, Any]]:
    """The course server with no ``contexts``: its first instructor launch binds the LMS course."""
    with serve_tool(tmp_path, lms, lms.lti_table()) as served:
        yield served


def landed(client: httpx.Client, page: Any) -> tuple[str, str]:
    """A student's launch lands on their own page, logged in: (the student it shows, the token it shows once)."""
    assert page.status_code == 200 and "url=/student/" in page.text, page.text
    home = client.get("/student/")
    assert home.status_code == 200, home.text
    student = home.text.split("Signed in as <strong>")[1].split("<")[0]
    token = home.text.split("--token ")[1].split("<")[0].strip() if "--token " in home.text else ""
    return student, token


def score_given(lms: LmsPlatform, sub: str, item: int) -> float:
    """The scoreGiven of the latest score the platform received for ``sub`` on line item ``item`` (one must have come)."""
    score = lms.latest_score(sub, item)
    assert score is not None, f"no score for {sub} on line item {item}"
    return score["scoreGiven"]


def start_login(client: httpx.Client, lms: LmsPlatform, **changes: str) -> dict[str, str]:
    """Login initiation only; the auth request's parameters (state, nonce)."""
    redirect = login_redirect(client, lms, **changes)
    assert redirect.status_code == 302
    return auth_url_params(redirect.headers["location"])


def refusals(store: Store) -> list[str]:
    return [r["reason"] for r in store.db.query("SELECT reason FROM lti_refusals ORDER BY id")]


# --- configuration ------------------------------------------------------------------------------------


def test_lti_platforms_are_read_from_course_toml(tmp_path: Path, lms: LmsPlatform) -> None:
    path = tmp_path / "course.toml"
    second = (
        '\n[[lti.platform]]\nname = "Moodle"\nissuer = "https://moodle.example.edu"\nclient_id = "abc"\n'
        'auth_url = "https://moodle.example.edu/mod/lti/auth.php"\n'
        'token_url = "https://moodle.example.edu/mod/lti/token.php"\n'
        'jwks_url = "https://moodle.example.edu/mod/lti/certs.php"\ndeployments = ["1", "2"]\n'
    )
    path.write_text(
        'name = "c"\n'
        + lms.course_toml(contexts=["course-101"])
        + second
        + 'contexts = ["7"]\nframe_origins = ["https://*.instructure.com", "https://lms.example.edu:8443"]\n'
    )
    config = lti.platforms_of(load_course(path))
    assert [p.name for p in config.platforms] == ["Test LMS", "Moodle"]
    assert config.platforms[1].deployments == ("1", "2")
    assert config.find("https://moodle.example.edu", None).client_id == "abc"
    assert config.platforms[0].contexts == ("course-101",) and config.platforms[1].contexts == ("7",)
    assert config.platforms[0].framing == (lms.url,)  # by default the issuer's origin (Moodle's site)
    assert config.frame_origins() == (lms.url, "https://*.instructure.com", "https://lms.example.edu:8443")


@pytest.mark.parametrize(
    "table, fragment",
    [
        ({"platform": [{"issuer": "x"}]}, "needs client_id"),
        (
            {
                "platform": [
                    {
                        "issuer": "i",
                        "client_id": "c",
                        "auth_url": "ftp://a",
                        "token_url": "https://t",
                        "jwks_url": "https://j",
                        "deployments": ["d"],
                    }
                ]
            },
            r"auth_url must be an http\(s\) URL",
        ),
        (
            {
                "platform": [
                    {
                        "issuer": "i",
                        "client_id": "c",
                        "auth_url": "https://a",
                        "token_url": "https://t",
                        "jwks_url": "https://j",
                        "deployments": [],
                    }
                ]
            },
            "needs deployments",
        ),
        ({"platforms": []}, "unknown field lti.platforms"),
        ({"contexts": ["x"]}, "unknown field lti.contexts: .* go in each"),
        (
            {
                "platform": [
                    {
                        "issuer": "i",
                        "client_id": "c",
                        "auth_url": "https://a",
                        "token_url": "https://t",
                        "jwks_url": "https://j",
                        "deployments": ["d"],
                        "contexts": "course-1",
                    }
                ]
            },
            "contexts must be a list",
        ),
        (
            {
                "platform": [
                    {
                        "issuer": "i",
                        "client_id": "c",
                        "auth_url": "https://a",
                        "token_url": "https://t",
                        "jwks_url": "https://j",
                        "deployments": ["d"],
                        "frame_origins": ["https://lms.example.edu/course"],
                    }
                ]
            },
            "is not an origin",
        ),
        (
            {
                "platform": [
                    {
                        "issuer": "i",
                        "client_id": "c",
                        "auth_url": "https://a",
                        "token_url": "https://t",
                        "jwks_url": "https://j",
                        "deployments": ["d"],
                        "frame_origins": ["https://a.edu; script-src *"],
                    }
                ]
            },
            "is not an origin",
        ),
    ],
)
def test_a_bad_lti_table_is_one_line_naming_the_field(table: dict[str, Any], fragment: str) -> None:
    with pytest.raises(lti.LtiConfigError, match=fragment):
        lti.parse_lti(table)


def test_course_toml_lti_must_be_a_table(tmp_path: Path) -> None:
    path = tmp_path / "course.toml"
    path.write_text('lti = "yes"\n')
    with pytest.raises(CourseError, match=r"\[lti\] must be a table"):
        load_course(path)


# --- the tool's keys ---------------------------------------------------------------------------------


def test_the_jwks_publishes_the_next_key_before_it_signs(tool: dict[str, Any]) -> None:
    client, store = tool["client"], tool["store"]
    answer = client.get("/lti/jwks")
    first = answer.json()["keys"]
    assert answer.headers["cache-control"] == f"max-age={lti.JWKS_MAX_AGE_S}"
    assert len(first) == 1 and first[0]["kty"] == "RSA" and "d" not in first[0] and "p" not in first[0]
    assert client.get("/lti/jwks").json()["keys"] == first  # kept, not made again
    now = time.time() - 3 * lti.JWKS_MAX_AGE_S  # the rotations happened on a clock of our own, now in the past
    second_kid = lti.rotate_key(store, now=now)
    assert [k["kid"] for k in client.get("/lti/jwks").json()["keys"]] == [second_kid, first[0]["kid"]]
    assert lti.signing_key(store, now).kid == first[0]["kid"]  # published now, signing later
    assert lti.signing_key(store, now + lti.JWKS_MAX_AGE_S - 1).kid == first[0]["kid"]
    assert lti.signing_key(store, now + lti.JWKS_MAX_AGE_S).kid == second_kid
    with pytest.raises(lti.RotationWaiting, match=f"the next key {second_kid} is published and signs from"):
        lti.rotate_key(store, now=now + 10)  # a second rotation while the next key waits
    later = now + lti.JWKS_MAX_AGE_S + 1
    third_kid = lti.rotate_key(store, now=later)
    assert lti.signing_key(store, later).kid == second_kid
    assert [k["kid"] for k in client.get("/lti/jwks").json()["keys"]] == [third_kid, second_kid]  # the first retired
    assert lti.signing_key(store).kid == third_kid  # (its time has come on the real clock)


def test_a_platform_caching_our_jwks_takes_every_token_request_across_a_rotation(
    tool: dict[str, Any], lms: LmsPlatform
) -> None:
    """The platform keeps a copy of our JWKS for JWKS_MAX_AGE_S and does not fetch it for an unknown kid."""
    store = tool["store"]
    start = time.time()
    clock = [start]
    lms.clock = lambda: clock[0]
    lms.jwks_cache_s = lti.JWKS_MAX_AGE_S
    platform = lti.platforms_of(tool["config"].course).platforms[0]
    connector = lti_services.ServiceConnector(store, clock=lambda: clock[0])
    scopes = [lti_services.SCOPE_SCORE]
    try:
        connector.token(platform, scopes)  # the platform fetches (and keeps) our key set now
        lti.rotate_key(store, now=start)
        for offset in (1.0, lti.JWKS_MAX_AGE_S - 1.0, lti.JWKS_MAX_AGE_S + 1.0):  # before and after the switch
            clock[0] = start + offset
            connector.cache.clear()
            connector.token(platform, scopes)
        assert lms.token_requests == ["ok"] * 4
        # what switching at once did: the platform's fresh copy lacks the key that signs, and the request fails
        signing = lti.signing_key(store, clock[0]).kid
        lms.cached_jwks = (clock[0], {"keys": [k for k in lti.public_jwks(store)["keys"] if k["kid"] != signing]})
        connector.cache.clear()
        with pytest.raises(lti_services.ServiceError, match="answered 401"):
            connector.token(platform, scopes)
    finally:
        connector.close()


def test_an_older_course_database_gains_the_new_columns_and_keeps_its_key(tmp_path: Path) -> None:
    """A course database of version 10 whose lti_keys and lti_contexts the server made as their first release did:
    the store's migration 11 adds the columns and the other tables, nothing is lost."""
    path = tmp_path / "course.db"
    old = Store(sqlite_utils.Database(sqlite3.connect(path), execute_plugins=False), path)
    old.migrate(target=MIGRATIONS.index(m11_lti))
    with old.transaction() as db:
        db.execute(
            "CREATE TABLE lti_keys (kid TEXT PRIMARY KEY, private_pem TEXT NOT NULL, "
            "created_at TEXT NOT NULL, retired INTEGER NOT NULL DEFAULT 0)"
        )
        db.execute(
            "CREATE TABLE lti_contexts (key TEXT PRIMARY KEY, issuer TEXT NOT NULL, client_id TEXT NOT "
            "NULL, deployment_id TEXT NOT NULL, context_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '', "
            "memberships_url TEXT NOT NULL DEFAULT '', lineitems_url TEXT NOT NULL DEFAULT '', "
            "scopes TEXT NOT NULL DEFAULT '[]', updated_at TEXT NOT NULL)"
        )
        key = RSAKey.generate_key(2048, parameters={"kid": "old-key"})
        db.table("lti_keys").insert(
            {
                "kid": "old-key",
                "private_pem": key.as_pem(private=True).decode(),
                "created_at": "2026-01-01T00:00:00+00:00",
                "retired": 0,
            }
        )
    old.close()
    with Store.open(path) as store:
        assert store.version == SCHEMA_VERSION
        assert lti.signing_key(store).kid == "old-key"  # signs as before (signs_from 0)
        assert "lineitem_url" in {c.name for c in store.db["lti_contexts"].columns}
        assert {"lti_scores", "lti_tokens", "lti_refusals"} <= set(store.db.table_names())


def test_a_new_course_database_holds_the_lti_tables_from_the_store_alone(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        assert {t for t in store.db.table_names() if t.startswith("lti_")} >= {"lti_keys", "lti_scores", "lti_users"}


# --- the launch ----------------------------------------------------------------------------------------


def test_login_initiation_redirects_to_the_platform_with_state_and_nonce(
    tool: dict[str, Any], lms: LmsPlatform
) -> None:
    answer = login_redirect(tool["client"], lms)
    assert answer.status_code == 302
    params = auth_url_params(answer.headers["location"])
    assert answer.headers["location"].startswith(lms.url + "/auth?")
    assert params["scope"] == "openid" and params["response_type"] == "id_token"
    assert params["response_mode"] == "form_post" and params["prompt"] == "none"
    assert params["client_id"] == lms.client_id and params["redirect_uri"] == lms.tool_url + "/lti/launch"
    assert params["login_hint"] == "ada" and len(params["nonce"]) > 20
    assert answer.cookies.get(lti.STATE_COOKIE) == params["state"]


def test_a_student_launch_matches_the_roster_by_email_then_by_sub(tool: dict[str, Any], lms: LmsPlatform) -> None:
    client, store = tool["client"], tool["store"]
    student, token = landed(client, launch(client, lms, "ada"))
    assert student == "s2"  # matched by e-mail (case aside)
    me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).json()
    assert me["student"] == "s2" and me["role"] == "student"
    assert "--token" not in client.get("/student/").text  # shown once
    student, second = landed(client, launch(client, lms, "ada"))  # found by (iss, sub) now; the first launch's
    assert student == "s2" and second != token  # token stops working
    assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert list(store.db.query("SELECT student FROM lti_users WHERE sub = 'lms-ada'")) == [{"student": "s2"}]
    context = next(iter(store.db.query("SELECT * FROM lti_contexts")))
    assert context["lineitems_url"].endswith("/ags/course-101/lineitems")
    assert context["memberships_url"].endswith("/nrps/course-101")


def test_an_unknown_learner_joins_the_roster(tool: dict[str, Any], lms: LmsPlatform) -> None:
    assert landed(tool["client"], launch(tool["client"], lms, "new"))[0] == "newton@example.org"
    assert "newton@example.org" in [r["student"] for r in roster.roster(tool["store"])]


def test_an_instructor_launch_opens_the_dashboard(tool: dict[str, Any], lms: LmsPlatform) -> None:
    client = tool["client"]
    page = launch(client, lms, "prof")
    assert page.status_code == 200 and "url=/instructor/" in page.text
    assert "--token" not in page.text  # the instructor's token is never shown
    dashboard = client.get("/instructor/")
    assert dashboard.status_code == 200 and "Class overview" in dashboard.text
    lms_page = client.get("/instructor/lti")
    assert lms_page.status_code == 200 and "Scores waiting for the LMS" in lms_page.text


def post_launch(client: httpx.Client, id_token: str, state: str) -> Any:
    return client.post("/lti/launch", data={"id_token": id_token, "state": state})


@pytest.mark.parametrize(
    "case, status, fragment",
    [
        ("wrong audience", 403, "not this tool's client id"),
        ("expired", 403, "has expired"),
        ("unknown platform", 403, "is not registered with this course"),
        ("bad signature", 403, "signature does not verify"),
        ("wrong nonce", 403, "nonce is not the one this login sent"),
        ("unknown deployment", 403, "deployment 'other-deployment'"),
        ("wrong message type", 400, "message type 'LtiDeepLinkingRequest'"),
        ("wrong version", 400, "LTI version '1.1'"),
        ("azp", 403, "authorized party (azp)"),
        ("issued long ago", 403, "issued at a time too far from now"),
        ("target elsewhere", 400, "target link 'https://evil.example.org/lti/launch' is not this tool"),
        ("no target", 400, "target link None is not this tool"),
    ],
)
def test_bad_launches_are_refused_with_a_page_and_logged(
    tool: dict[str, Any], lms: LmsPlatform, case: str, status: int, fragment: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = tool["client"]
    params = start_login(client, lms)
    user = lms.users["ada"]
    now = int(time.time())
    changes_of: dict[str, dict[str, Any]] = {
        "wrong audience": {"aud": "someone-else", "azp": None},
        "expired": {"exp": now - 3600, "iat": now - 3900},
        "unknown platform": {"iss": "https://evil.example.org"},
        "unknown deployment": {lti.CLAIM + "deployment_id": "other-deployment"},
        "wrong message type": {lti.CLAIM + "message_type": "LtiDeepLinkingRequest"},
        "wrong version": {lti.CLAIM + "version": "1.1"},
        "azp": {"aud": [lms.client_id, "other"], "azp": "other"},
        "issued long ago": {"iat": now - 7200},
        "target elsewhere": {lti.CLAIM + "target_link_uri": "https://evil.example.org/lti/launch"},
        "no target": {lti.CLAIM + "target_link_uri": None},
    }
    changes = changes_of.get(case, {})
    kid = lms.key.kid
    assert kid is not None
    key = RSAKey.generate_key(2048, parameters={"kid": kid}) if case == "bad signature" else None
    nonce = "not-the-nonce" if case == "wrong nonce" else params["nonce"]
    token = lms.id_token(lms.claims(user, nonce, **changes), key)
    with caplog.at_level(logging.WARNING, logger="normgrade.lti"):
        answer = post_launch(client, token, params["state"])
    assert answer.status_code == status, answer.text
    assert "Launch refused" in answer.text and fragment in html.unescape(answer.text)  # (quotes shown escaped)
    assert "--token" not in answer.text
    assert any(fragment in r.getMessage() for r in caplog.records)
    assert fragment in refusals(tool["store"])[-1]


def test_a_good_token_passes_the_same_chain(tool: dict[str, Any], lms: LmsPlatform) -> None:
    """The correct case of the refusals above: the same hand-made launch, nothing changed."""
    params = start_login(tool["client"], lms)
    token = lms.id_token(lms.claims(lms.users["ada"], params["nonce"]))
    assert landed(tool["client"], post_launch(tool["client"], token, params["state"]))[0] == "s2"


def test_a_replayed_launch_is_refused(tool: dict[str, Any], lms: LmsPlatform) -> None:
    client = tool["client"]
    params = start_login(client, lms)
    token = lms.id_token(lms.claims(lms.users["ada"], params["nonce"]))
    assert post_launch(client, token, params["state"]).status_code == 200
    replay = post_launch(client, token, params["state"])
    assert replay.status_code == 403 and "already used" in replay.text


def test_a_launch_without_this_browsers_state_cookie_is_refused(tool: dict[str, Any], lms: LmsPlatform) -> None:
    client = tool["client"]
    params = start_login(client, lms)
    token = lms.id_token(lms.claims(lms.users["ada"], params["nonce"]))
    client.cookies.clear()
    answer = post_launch(client, token, params["state"])
    assert answer.status_code == 400 and "state does not match" in answer.text


def test_login_initiation_from_an_unknown_platform_is_refused(tool: dict[str, Any], lms: LmsPlatform) -> None:
    answer = login_redirect(tool["client"], lms, iss="https://evil.example.org")
    assert answer.status_code == 403 and "is not registered with this course" in answer.text
    other = login_redirect(tool["client"], lms, target_link_uri="https://evil.example.org/x")
    assert other.status_code == 400 and "is not on this server" in other.text


def test_a_garbage_id_token_is_refused_in_one_line(tool: dict[str, Any], lms: LmsPlatform) -> None:
    params = start_login(tool["client"], lms)
    answer = post_launch(tool["client"], "not.a.jwt", params["state"])
    assert answer.status_code == 400 and "not a readable JWT" in answer.text


def test_the_instructor_landing_cookie_over_http_is_strict_and_the_page_forwards(
    tool: dict[str, Any], lms: LmsPlatform
) -> None:
    page = launch(tool["client"], lms, "prof")
    cookie = page.headers["set-cookie"]
    assert "normgrade_session=" in cookie and "samesite=strict" in cookie.lower() and "Partitioned" not in cookie
    assert "Secure" not in cookie  # plain http: no frame can keep a cookie, the tool works in a new window


def test_over_https_the_launch_cookies_work_in_a_cross_site_frame(tmp_path: Path, lms: LmsPlatform) -> None:
    """tool_url https: the state and session cookies are SameSite=None; Secure; Partitioned."""
    table = {**lms.lti_table(contexts=[lms.context_id]), "tool_url": "https://grader.example.edu"}
    with serve_tool(tmp_path, lms, table) as tool:
        answer = login_redirect(tool["client"], lms, target_link_uri="https://grader.example.edu/lti/launch")
        assert answer.status_code == 302, answer.text
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(lti.STATE_COOKIE + "=") and "Path=/lti" in cookie
        assert "SameSite=none" in cookie and "Secure" in cookie and cookie.endswith("; Partitioned")
        assert "HttpOnly" in cookie
        params = auth_url_params(answer.headers["location"])
        claims = lms.claims(
            lms.users["prof"],
            params["nonce"],
            **{lti.CLAIM + "target_link_uri": "https://grader.example.edu/lti/launch"},
        )
        landed = tool["client"].post(
            "/lti/launch",
            data={"id_token": lms.id_token(claims), "state": params["state"]},
            headers={"Cookie": f"{lti.STATE_COOKIE}={params['state']}"},
        )
        assert landed.status_code == 200 and "url=/instructor/" in landed.text, landed.text
        session = landed.headers["set-cookie"]
        assert session.startswith("normgrade_session=") and "Path=/instructor" in session
        assert "SameSite=none" in session and "Secure" in session and session.endswith("; Partitioned")


def framing_of(answer: httpx.Response) -> tuple[str, str | None]:
    policy = answer.headers["content-security-policy"]
    directive = next(d.strip() for d in policy.split(";") if d.strip().startswith("frame-ancestors"))
    return directive, answer.headers.get("x-frame-options")


def test_only_the_launch_and_the_pages_it_lands_on_may_be_framed_by_the_platforms(
    tool: dict[str, Any], lms: LmsPlatform
) -> None:
    client = tool["client"]
    allowed = f"frame-ancestors {lms.url}"
    page = launch(client, lms, "prof")
    assert framing_of(page) == (allowed, None)  # the launch's landing page
    dashboard = client.get("/instructor/")  # a page with its own CSP (its script's hash) keeps that, framed
    assert framing_of(dashboard) == (allowed, None)
    assert "script-src 'sha256-" in dashboard.headers["content-security-policy"]
    assert framing_of(client.get("/instructor/lti")) == (allowed, None)
    assert framing_of(login_redirect(client, lms, iss="https://evil.example.org")) == (allowed, None)  # a refusal
    for path in ("/", "/api/v1/", "/lti/jwks", "/lti/config", "/api/v1/me", "/instructorx"):
        assert framing_of(client.get(path)) == ("frame-ancestors 'none'", "DENY"), path


def test_without_platforms_nothing_may_be_framed(tmp_path: Path, lms: LmsPlatform) -> None:
    with serve_tool(tmp_path, lms, {}) as tool:
        for path in ("/lti/launch", "/instructor/login"):
            assert framing_of(tool["client"].get(path)) == ("frame-ancestors 'none'", "DENY"), path


def test_a_launch_from_another_course_of_the_lms_is_refused(
    tool: dict[str, Any], lms: LmsPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    """A site-level tool: one deployment id for every course; course-202 is not this course (contexts)."""
    client, store = tool["client"], tool["store"]
    before = {r["student"] for r in roster.roster(store)}
    with caplog.at_level(logging.WARNING, logger="normgrade.lti"):
        student = launch(client, lms, "other-student")
        teacher = launch(client, lms, "other-prof")
    for answer in (student, teacher):
        assert answer.status_code == 403 and "Launch refused" in answer.text and "--token" not in answer.text
        assert "comes from the LMS course 'Another course' (course-202)" in html.unescape(answer.text)
        assert "set-cookie" not in answer.headers or "normgrade_session" not in answer.headers["set-cookie"]
    assert client.get("/instructor/").status_code == 303  # no dashboard session: off to the login
    assert {r["student"] for r in roster.roster(store)} == before  # nobody of the other course joined
    assert not list(store.db.query("SELECT 1 FROM lti_contexts WHERE context_id = 'course-202'"))
    assert sum("course-202" in r.getMessage() for r in caplog.records) == 2
    assert all("bound to 'course-101'" in r for r in refusals(store)[-2:])
    ours = launch(client, lms, "prof")  # the right course's instructor: the dashboard, with the refusals on it
    assert "url=/instructor/" in ours.text
    page = client.get("/instructor/lti").text
    assert "Another course" in page and "listed in course.toml" in page


def test_the_first_instructor_launch_binds_the_course_and_students_wait_for_it(
    unbound: dict[str, Any], lms: LmsPlatform
) -> None:
    client, store = unbound["client"], unbound["store"]
    early = launch(client, lms, "ada")
    assert early.status_code == 403 and "not bound to an LMS course yet" in early.text
    assert "url=/instructor/" in launch(client, lms, "prof").text  # binds course-101
    assert [(r["context_id"], r["title"], r["bound_by"]) for r in store.db.query("SELECT * FROM lti_bindings")] == [
        ("course-101", "Deep networks 101", "lms-prof")
    ]
    assert landed(client, launch(client, lms, "ada"))[0]  # on their own page, logged in
    for user in ("other-prof", "other-student"):  # the same deployment, another course: refused, binds nothing
        refused = launch(client, lms, user)
        assert refused.status_code == 403 and "bound to 'Deep networks 101' (course-101)" in html.unescape(refused.text)
    assert len(list(store.db.query("SELECT 1 FROM lti_bindings"))) == 1
    page = client.get("/instructor/lti").text
    assert "Deep networks 101" in page and "bound by the first instructor launch" in page


def test_an_administrator_role_alone_is_not_an_instructor(tool: dict[str, Any], lms: LmsPlatform) -> None:
    client = tool["client"]
    lms.users["admin"] = User("lms-admin", "Account Admin", "admin@example.org", [INSTITUTION_ADMIN, LEARNER])
    lms.users["root"] = User("lms-root", "Site Admin", "root@example.org", [SYSTEM_ADMIN, INSTITUTION_ADMIN])
    as_student = launch(client, lms, "admin")  # a Canvas account admin enrolled as a student: a student
    assert "url=/student/" in as_student.text and "url=/instructor/" not in as_student.text
    assert client.get("/instructor/").status_code == 303
    root = launch(client, lms, "root")
    assert root.status_code == 403 and "neither a teacher's nor a student's" in html.unescape(root.text)
    assert "root@example.org" not in {r["student"] for r in roster.roster(tool["store"])}


def test_a_token_for_another_registration_is_refused_on_this_login(tmp_path: Path, lms: LmsPlatform) -> None:
    """Two registrations of the tool in one LMS (same issuer and key): the state remembers the login's."""
    lms.other_clients = ("tool-2",)
    with serve_tool(tmp_path, lms, lms.lti_table(contexts=[lms.context_id])) as tool:
        client = tool["client"]
        params = start_login(client, lms)  # started for registration 1 (normgrade-client-1)
        forged = lms.id_token(lms.claims(lms.users["ada"], params["nonce"], client_id="tool-2"))
        answer = post_launch(client, forged, params["state"])
        text = html.unescape(answer.text)
        assert (
            answer.status_code == 403 and "registration 'tool-2'" in text and "started for 'normgrade-client-1'" in text
        )
        params = start_login(client, lms, client_id="tool-2")  # the same token on its own registration's login
        assert (
            "url=/student/"
            in post_launch(
                client, lms.id_token(lms.claims(lms.users["ada"], params["nonce"], client_id="tool-2")), params["state"]
            ).text
        )


# --- the roster (NRPS) ----------------------------------------------------------------------------------


def test_roster_sync_adds_new_students_marks_dropped_ones_and_deletes_nothing(
    tool: dict[str, Any], lms: LmsPlatform
) -> None:
    store = tool["store"]
    launch(tool["client"], lms, "ada")  # the launch tells the tool where the membership service is
    lms.users["eve"] = User("lms-eve", "Eve", "eve@example.org", [LEARNER])  # three pages of two
    config = lti.platforms_of(tool["config"].course)
    first = lti_services.sync_roster(store, config)
    assert not first.errors, first.errors
    assert sorted(first.new_students or []) == ["eve@example.org", "newton@example.org"]
    assert len(first.tokens or []) == 2 and first.members == 3  # the instructor is not a student
    assert {e.id for e, _ in first.tokens or []} == {"eve@example.org", "newton@example.org"}
    del lms.users["eve"]
    lms.users["new"].status = "Inactive"
    second = lti_services.sync_roster(store, config)
    assert second.new_students == [] and sorted(second.dropped or []) == ["eve@example.org", "newton@example.org"]
    assert lti_services.dropped_students(store) == {"eve@example.org", "newton@example.org"}
    ids = [r["student"] for r in roster.roster(store)]
    assert {"s1", "s2", "eve@example.org", "newton@example.org"} <= set(ids)  # nothing deleted
    page = tool["client"].get("/instructor/lti", headers={"Authorization": f"Bearer {tool['teacher']}"})
    assert page.text.count("<strong>dropped</strong>") == 2
    members = list(store.db.query("SELECT * FROM lti_members ORDER BY sub"))
    mark = lti_services.fingerprint(store)
    third = lti_services.sync_roster(store, config)  # nothing changed in the LMS: nothing changes here
    assert third.summary() == "2 members in 1 course(s): no change" and third.dropped == []
    assert list(store.db.query("SELECT * FROM lti_members ORDER BY sub")) == members
    assert lti_services.fingerprint(store) == mark  # so the score poster does not scan again
    lms.users["new"].status = "Active"
    back = lti_services.sync_roster(store, config)
    assert back.returned == ["newton@example.org"] and back.new_students == [] and back.tokens == []
    assert back.summary() == "2 members in 1 course(s): 0 new student(s), 0 dropped, 1 back"


def test_an_inactive_member_is_neither_added_nor_matched(tool: dict[str, Any], lms: LmsPlatform) -> None:
    store = tool["store"]
    launch(tool["client"], lms, "ada")
    lms.users["gone"] = User("lms-gone", "Gone", "gone@example.org", [LEARNER], status="Inactive")
    lms.users["s1"] = User("lms-s1", "S one", "s1@example.org", [LEARNER], status="Inactive")  # s1's own e-mail
    result = lti_services.sync_roster(store, lti.platforms_of(tool["config"].course))
    assert result.new_students == ["newton@example.org"] and [e.id for e, _ in result.tokens] == ["newton@example.org"]
    assert "gone@example.org" not in {r["student"] for r in roster.roster(store)}
    assert not list(store.db.query("SELECT 1 FROM lti_users WHERE sub IN ('lms-gone', 'lms-s1')"))
    assert not list(store.db.query("SELECT 1 FROM lti_members WHERE sub IN ('lms-gone', 'lms-s1')"))
    again = lti_services.sync_roster(store, lti.platforms_of(tool["config"].course))
    assert again.summary() == "4 members in 1 course(s): no change"


def test_roster_sync_reports_an_lms_that_is_down(tool: dict[str, Any], lms: LmsPlatform) -> None:
    launch(tool["client"], lms, "ada")
    lms.down = True
    result = lti_services.sync_roster(tool["store"], lti.platforms_of(tool["config"].course))
    assert result.errors and "answered 503" in result.errors[0]


def test_the_dashboard_sync_button_needs_the_csrf_field(tool: dict[str, Any], lms: LmsPlatform) -> None:
    client = tool["client"]
    launch(client, lms, "prof")
    refused = client.post("/instructor/lti/sync", data={"csrf": "forged"})
    assert refused.status_code == 403
    assert not list(tool["store"].db.query("SELECT 1 FROM roster WHERE student = 'newton@example.org'"))
    page = client.get("/instructor/lti").text
    csrf = page.split('name="csrf" value="')[1].split('"')[0]
    done = client.post("/instructor/lti/sync", data={"csrf": csrf})
    assert done.status_code == 200 and "Roster sync: 2 members in 1 course(s): 1 new student(s)" in done.text


# --- scores (AGS) ------------------------------------------------------------------------------------------


def override(store: Store, student: str, exercise: str, score: float) -> None:
    with store.transaction() as db:
        db.table("score_overrides").insert(
            {
                "student": student,
                "exercise": exercise,
                "score": score,
                "comment": "test",
                "author": "instructor",
                "created_at": "2026-01-01T00:00:00+00:00",
            }
        )


def run_tasks(queue: Any) -> int:
    """Run every task waiting on the queue, as a worker would; how many ran."""
    ran = 0
    while (task := queue.huey.dequeue()) is not None:
        queue.huey.execute(task)
        ran += 1
    return ran


@pytest.fixture
def poster(tool: dict[str, Any], lms: LmsPlatform) -> Iterator[dict[str, Any]]:
    launch(tool["client"], lms, "ada")  # Ada (s2) is a member of the context with its AGS endpoint
    config = tool["config"]
    thread = lti_services.ScorePoster(config.db_path, config.queue_url, config.course, [], lost_after=60)
    queue = open_queue(config.queue_url)
    connector = lti_services.ServiceConnector(tool["store"])
    clock = [1000.0]

    def tick(advance: float = 1.0) -> None:
        clock[0] += advance
        thread.tick(tool["store"], queue, connector, now=clock[0])

    yield {"tick": tick, "queue": queue, "store": tool["store"], "thread": thread}
    connector.close()


def test_a_score_change_is_posted_to_one_line_item_found_by_resource_id(
    poster: dict[str, Any], lms: LmsPlatform
) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    tick()
    assert lms.scores == [] and run_tasks(queue) == 0  # nothing earned: nothing sent
    override(store, "s2", "activations.ReLU", 7.5)
    tick()
    assert [c["resourceId"] for c in lms.created] == ["exercises:activations"]
    assert run_tasks(queue) == 1
    tick()
    score = lms.latest_score("lms-ada", 1)
    assert score is not None
    assert score["scoreGiven"] == 7.5 and score["scoreMaximum"] == lms.created[0]["scoreMaximum"]
    assert score["activityProgress"] == "Submitted" and score["gradingProgress"] == "FullyGraded"
    assert score["timestamp"].endswith("+00:00")
    assert lti_services.score_counts(store) == {"posted": 1}
    override(store, "s2", "activations.ReLU", 9.0)  # a second change: the same line item
    tick()
    run_tasks(queue)
    tick()
    assert len(lms.line_items) == 1 and score_given(lms, "lms-ada", 1) == 9.0
    poster["thread"].seen = None  # a server restart: scanning again sends nothing new
    with store.transaction() as db:
        db.execute("DELETE FROM lti_line_items")  # and forgetting the line item finds it again by resourceId
    override(store, "s2", "activations.ReLU", 10.0)
    tick()
    run_tasks(queue)
    tick()
    assert len(lms.line_items) == 1 and score_given(lms, "lms-ada", 1) == 10.0
    full = {"sub": "u", "score_given": 20.0, "score_maximum": 20.0, "timestamp": "t"}
    assert lti_services.score_payload(full)["activityProgress"] == "Completed"


def test_no_score_is_lost_while_the_lms_is_down(poster: dict[str, Any], lms: LmsPlatform, tool: dict[str, Any]) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    override(store, "s2", "activations.ReLU", 5.0)
    tick()
    run_tasks(queue)  # the line item exists; now the LMS goes down while the post waits
    override(store, "s2", "normalization.BatchNorm1d", 4.0)
    lms.down = True
    tick()
    run_tasks(queue)  # the worker's POST fails: 503
    tick()
    pending = lti_services.pending_scores(store)
    assert pending and all(p["status"] == "pending" for p in pending)
    assert "503" in pending[0]["error"]
    page = tool["client"].get("/instructor/lti", headers={"Authorization": f"Bearer {tool['teacher']}"})
    assert "Scores waiting for the LMS" in page.text and "answered 503" in page.text
    lms.down = False
    for _ in range(12):  # back-off: 2, 4, ... s of the poster's clock
        tick(advance=60)
        run_tasks(queue)
    tick()
    assert lti_services.pending_scores(store) == []
    received = {(s["lineitem"], s["scoreGiven"]) for s in lms.scores}
    assert {(1, 5.0), (2, 4.0)} <= received


def test_a_task_the_queue_lost_is_sent_again(poster: dict[str, Any], lms: LmsPlatform) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    override(store, "s2", "activations.ReLU", 6.0)
    tick()
    queue.huey.flush()  # the queue restarted empty (a Redis without persistence)
    tick()
    assert lti_services.score_counts(store) == {"queued": 1}  # not yet given up on
    tick(advance=61)  # past lost_after and not in the queue: missing (a worker may be posting it right now)
    assert lti_services.score_counts(store) == {"queued": 1}
    tick(advance=61)  # still missing a lost_after later: lost, back to pending, sent again at the next tick
    tick()
    assert run_tasks(queue) == 1
    tick()
    assert score_given(lms, "lms-ada", 1) == 6.0
    assert lti_services.score_counts(store) == {"posted": 1}


def test_a_task_still_waiting_for_a_worker_is_not_sent_twice(poster: dict[str, Any], lms: LmsPlatform) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    override(store, "s2", "activations.ReLU", 6.0)
    tick()
    tick(advance=600)  # long past lost_after, but the task still waits in the queue (no worker yet)
    tick(advance=600)
    assert lti_services.score_counts(store) == {"queued": 1}
    assert run_tasks(queue) == 1
    tick()
    assert len(lms.scores) == 1 and lti_services.score_counts(store) == {"posted": 1}


def test_a_pending_score_is_superseded_by_a_newer_one(poster: dict[str, Any], lms: LmsPlatform) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    lms.down = True
    override(store, "s2", "activations.ReLU", 3.0)
    tick()
    override(store, "s2", "activations.ReLU", 8.0)
    tick()
    assert lti_services.score_counts(store) == {"pending": 1, "superseded": 1}
    lms.down = False
    tick(advance=60)
    run_tasks(queue)
    tick()
    assert [s["scoreGiven"] for s in lms.scores] == [8.0]


@pytest.mark.slow
@pytest.mark.opencl
def test_a_held_upload_posts_nothing_until_it_is_graded_by_itself_then_posts_once(
    poster: dict[str, Any], tool: dict[str, Any], lms: LmsPlatform
) -> None:
    """Kernel exercises refused (a worker's self-test failed): Ada's kernel upload is held and no column changes;
    once a self-test passes, the server grades it by itself (the task run here, as a worker would) and the
    kernels column is posted once."""
    from datetime import datetime, timezone

    from grader.course.solution import write_solution
    from grader.queue import records
    from grader.queue.collector import Collector
    from grader.queue.selftest import LATEST_KEY, SelfTest
    from server_util import solution_files
    from test_held_jobs import published

    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    config = tool["config"]
    test = SelfTest(queue)
    collector = Collector(config.db_path, config.queue_url, "v", selftest=test)
    collector.tick(store, queue)
    queue.huey.revoke_by_id(test.task)  # (the start-up self-test: this test publishes the verdicts itself)
    queue.huey.put(LATEST_KEY, published({"cpu": True, "opencl": False}))
    folder = write_solution(Path(str(config.db_path)).parent / "solution")
    job_id = int(
        records.create_job(
            store,
            "s2",
            "k",
            solution_files(folder, ["__init__.py", "kernels/activations.cl"]),
            ["kernels.relu_forward"],
            config.course,
            datetime.now(timezone.utc),
        ).job["id"]
    )
    collector.tick(store, queue)
    held = records.job(store, job_id)
    assert held is not None and held["status"] == "held"
    for _ in range(3):
        tick()
        run_tasks(queue)
    assert lms.scores == [] and lti_services.score_counts(store) == {}  # a held upload changes no column
    queue.huey.put(LATEST_KEY, published({"cpu": True, "opencl": True}))
    collector.tick(store, queue)  # graded again, by itself: the task waits for a worker
    assert run_tasks(queue) == 1
    collector.tick(store, queue)
    done = records.job(store, job_id)
    assert done is not None and done["status"] == "done"
    for _ in range(3):
        tick()
        run_tasks(queue)
    assert [c["resourceId"] for c in lms.created] == ["exercises:kernels"]
    assert [(s["userId"], s["scoreGiven"]) for s in lms.scores] == [("lms-ada", 10.0)]  # posted once
    assert lti_services.score_counts(store) == {"posted": 1}


def test_a_4xx_ends_in_a_final_state_shown_on_the_dashboard_and_is_not_retried(
    poster: dict[str, Any], lms: LmsPlatform, tool: dict[str, Any]
) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    lms.score_status = 400
    override(store, "s2", "activations.ReLU", 7.0)
    tick()
    assert run_tasks(queue) == 1
    tick()
    assert lti_services.score_counts(store) == {"refused": 1}
    for _ in range(5):  # long past any back-off: never sent again
        tick(advance=600)
        assert run_tasks(queue) == 0
    assert len(lms.refused) == 1
    teacher = {"Authorization": f"Bearer {tool['teacher']}"}
    page = html.unescape(tool["client"].get("/instructor/lti", headers=teacher).text)
    assert "Scores the LMS refused" in page and "answered 400" in page and "1 refused by the LMS" in page
    lms.score_status = None  # the cause fixed in the LMS: the instructor sends them again
    again = tool["client"].post("/instructor/lti/retry", headers=teacher)
    assert again.status_code == 200 and "1 refused score(s) will be sent again" in again.text
    tick()
    assert run_tasks(queue) == 1
    tick()
    assert lti_services.score_counts(store) == {"posted": 1} and score_given(lms, "lms-ada", 1) == 7.0


@pytest.mark.parametrize("status", [401, 429, 503])
def test_an_answer_that_sending_again_can_cure_is_retried(
    poster: dict[str, Any], lms: LmsPlatform, status: int
) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    lms.score_status = status
    override(store, "s2", "activations.ReLU", 7.0)
    tick()
    run_tasks(queue)
    tick()
    assert lti_services.score_counts(store) == {"pending": 1}
    lms.score_status = None
    tick(advance=60)
    assert run_tasks(queue) == 1
    tick()
    assert lti_services.score_counts(store) == {"posted": 1}


def test_a_newer_score_waits_until_the_older_one_on_its_way_is_taken(poster: dict[str, Any], lms: LmsPlatform) -> None:
    """One score per learner and line item on its way: the LMS receives them in order, never one out of order."""
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    override(store, "s2", "activations.ReLU", 3.0)
    tick()  # on the queue, not yet posted
    override(store, "s2", "activations.ReLU", 8.0)
    tick()
    assert lti_services.score_counts(store) == {"queued": 1, "pending": 1} and queue.pending() == 1
    assert run_tasks(queue) == 1
    tick()  # the older one's result is in: the newer one goes
    assert run_tasks(queue) == 1
    tick()
    assert [s["scoreGiven"] for s in lms.scores] == [3.0, 8.0] and lms.refused == []
    assert lti_services.score_counts(store) == {"posted": 2}


def test_an_older_score_that_fails_while_a_newer_one_waits_is_superseded(
    poster: dict[str, Any], lms: LmsPlatform
) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    override(store, "s2", "activations.ReLU", 3.0)
    tick()
    override(store, "s2", "activations.ReLU", 8.0)
    tick()
    lms.down = True
    assert run_tasks(queue) == 1  # the older post fails
    lms.down = False
    tick()  # superseded, not retried; the newer one goes
    assert run_tasks(queue) == 1
    tick()
    assert [s["scoreGiven"] for s in lms.scores] == [8.0]
    assert lti_services.score_counts(store) == {"superseded": 1, "posted": 1}


def test_line_items_are_found_on_every_page_of_the_container(poster: dict[str, Any], lms: LmsPlatform) -> None:
    """A platform that ignores the resource_id filter and pages its line items (Link: rel="next")."""
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    lms.filter_line_items, lms.page_size = False, 1
    for n, resource in enumerate(["other-tool:1", "quiz:elsewhere", "exercises:activations"], 1):
        lms.line_items.append(
            {
                "id": f"{lms.url}/ags/course-101/lineitems/{n}",
                "resourceId": resource,
                "label": resource,
                "scoreMaximum": 10,
                "context": "course-101",
            }
        )
    override(store, "s2", "activations.ReLU", 6.0)
    tick()
    assert run_tasks(queue) == 1
    tick()
    assert lms.created == [] and score_given(lms, "lms-ada", 3) == 6.0


def test_without_the_lineitem_scope_no_column_is_made_and_no_score_sent(
    poster: dict[str, Any], lms: LmsPlatform, tool: dict[str, Any]
) -> None:
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    lms.ags_scopes = [AGS + "score"]  # the scope list of the launch's AGS claim: no lineitem, no single line item
    launch(tool["client"], lms, "ada")
    override(store, "s2", "activations.ReLU", 6.0)
    tick()
    assert run_tasks(queue) == 0 and lms.created == [] and lms.token_requests == []
    assert lti_services.score_counts(store) == {}
    page = tool["client"].get("/instructor/lti", headers={"Authorization": f"Bearer {tool['teacher']}"}).text
    assert "no score is sent" in page


def test_a_single_lineitem_claim_gets_the_course_total(
    poster: dict[str, Any], lms: LmsPlatform, tool: dict[str, Any]
) -> None:
    """Moodle's "grade sync only": the score scope and one line item; the tool may make no columns."""
    tick, queue, store = poster["tick"], poster["queue"], poster["store"]
    lms.grade_sync_only, lms.ags_scopes = True, [AGS + "score", AGS + "lineitem.readonly"]
    launch(tool["client"], lms, "ada")
    override(store, "s2", "activations.ReLU", 6.0)
    override(store, "s2", "normalization.BatchNorm1d", 4.0)
    tick()
    assert run_tasks(queue) == 1
    tick()
    every = lti_services.columns(store, tool["config"].course, [])
    score = lms.latest_score("lms-ada", 1)
    assert score is not None and score["scoreGiven"] == 10.0
    assert score["scoreMaximum"] == sum(c.maximum for c in every) and len(every) > 1
    assert lms.created == [] and lms.scores == [score]
    assert all(AGS + "lineitem" not in scopes for scopes in lms.tokens.values())  # only the granted scope asked for
    page = tool["client"].get("/instructor/lti", headers={"Authorization": f"Bearer {tool['teacher']}"}).text
    assert "the course total is sent there" in page


# --- grade roster sync ---------------------------------------------------------------------------------------


def test_grade_roster_sync_writes_the_new_tokens(tool: dict[str, Any], lms: LmsPlatform, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from grader.cli import cli

    course = tmp_path / "course.toml"
    course.write_text('name = "LTI course"\n' + lms.course_toml(contexts=[lms.context_id]))
    tokens = tmp_path / "tokens.csv"
    args = ["roster", "sync", "--db", str(tool["db"]), "--course", str(course), "-o", str(tokens)]
    before = CliRunner().invoke(cli, args)
    assert before.exit_code == 2 and "launch the tool once from the LMS course" in before.output
    launch(tool["client"], lms, "prof")
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    assert "2 members in 1 course(s): 1 new student(s), 0 dropped; new tokens written to" in done.output
    assert (tokens.stat().st_mode & 0o777) == 0o600
    rows = tokens.read_text().splitlines()
    assert rows[0] == "id,name,email,token" and rows[1].startswith("newton@example.org,Newton Isaac,")
    token = rows[1].rsplit(",", 1)[1]
    me = tool["client"].get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).json()
    assert me["student"] == "newton@example.org"
    lms.down = True
    failed = CliRunner().invoke(cli, args)
    assert failed.exit_code == 2 and "answered 503" in failed.output


def test_a_graded_upload_is_posted_with_its_late_penalty(tool: dict[str, Any], lms: LmsPlatform) -> None:
    from datetime import datetime, timezone

    from grader.student.course import parse_course
    from grader.student.engine.model import ExerciseResult, GradeReport

    launch(tool["client"], lms, "ada")
    course = parse_course(
        {
            "name": "late",
            "lti": lms.lti_table(contexts=[lms.context_id]),
            "chapter": [{"name": "activations", "due": datetime(2020, 1, 1, tzinfo=timezone.utc), "late_penalty": 0.5}],
        },
        Path("course.toml"),
    )
    config = tool["config"]
    thread = lti_services.ScorePoster(config.db_path, config.queue_url, course, [])
    queue = open_queue(config.queue_url)
    connector = lti_services.ServiceConnector(tool["store"])
    store = tool["store"]
    store.record_report(GradeReport("s2", [ExerciseResult("activations.ReLU", "failed", 8.0, 10.0)]), "test")
    thread.tick(store, queue, connector, now=1.0)
    assert run_tasks(queue) == 1
    thread.tick(store, queue, connector, now=2.0)
    connector.close()
    assert [c["resourceId"] for c in lms.created] == ["exercises:activations"]
    assert score_given(lms, "lms-ada", 1) == 4.0  # 8 points, late: half counts


def test_a_bad_lti_table_stops_the_server_with_one_line(tmp_path: Path) -> None:
    course = DEFAULT_COURSE.__class__(name="bad", lti={"platform": [{"issuer": "x"}]})
    with pytest.raises(lti.LtiConfigError, match="needs client_id"):
        create_app(ServerConfig(tmp_path / "c.db", f"sqlite:///{tmp_path / 'q.db'}", course), run_collector=False)


def test_logins_in_progress_are_capped_by_evicting_the_oldest(
    tool: dict[str, Any], lms: LmsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lti.web, "MAX_STATES", 2)
    first = start_login(tool["client"], lms)["state"]
    second = start_login(tool["client"], lms)["state"]
    third = start_login(tool["client"], lms)["state"]  # room is made by forgetting the oldest login
    states = {r["state"] for r in tool["store"].db.query("SELECT state FROM lti_states")}
    assert states == {second, third} and first not in states


def test_a_login_flood_from_one_address_delays_only_that_address(
    tool: dict[str, Any], lms: LmsPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lti.web, "MAX_STATES", 5)
    tool["app"].state.lti_logins = limits.PerClient(3, 60.0)
    flooder = httpx.Client(base_url=tool["url"], timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    with flooder:
        answers = [login_redirect(flooder, lms).status_code for _ in range(20)]
        assert answers == [302] * 3 + [429] * 17
        refused = login_redirect(flooder, lms)
        assert "logins from" in refused.text and "127.0.0.2" in refused.text
        assert 0 < int(refused.headers["retry-after"]) <= 61
    student, _ = landed(tool["client"], launch(tool["client"], lms, "ada"))  # another address launches at once
    assert student == "s2"


def test_the_login_limit_slides_with_the_clock() -> None:
    now = [0.0]
    logins = limits.PerClient(2, 60.0, max_clients=2, clock=lambda: now[0])
    assert [logins.allow("a") for _ in range(3)] == [True, True, False]
    assert logins.retry_after("a") == 61 and logins.allow("b")
    now[0] = 60.0
    assert logins.allow("a") and logins.retry_after("b") == 0
    assert logins.allow("c") and "b" not in logins._seen  # the least recently seen client is forgotten


def test_a_request_cannot_write_a_line_of_the_log(tool: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    forged = "x\ngrade serve: normgrade.dashboard: score override: ann activations.ReLU -> 100 (ok)"
    with caplog.at_level(logging.INFO):
        answer = tool["client"].get(
            "/lti/login", params={"iss": forged, "login_hint": "h", "target_link_uri": tool["url"] + "/lti/launch"}
        )
    assert 400 <= answer.status_code < 500
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("normgrade")]
    assert any("score override" in line for line in lines)  # the value is logged, quoted on the refusal's line
    assert not any("\n" in line for line in lines)


def test_refusal_rows_are_capped(tool: dict[str, Any], lms: LmsPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lti.web, "MAX_REFUSALS", 3)
    for _ in range(5):
        login_redirect(tool["client"], lms, iss="https://evil.example.org")
    assert len(refusals(tool["store"])) == 3


def test_an_unknown_kid_refetches_the_platform_keys_at_most_once_in_a_while(
    tool: dict[str, Any], lms: LmsPlatform
) -> None:
    client = tool["client"]
    params = start_login(client, lms)
    assert (
        "url=/student/"
        in post_launch(client, lms.id_token(lms.claims(lms.users["ada"], params["nonce"])), params["state"]).text
    )
    fetched: list[int] = []
    original = httpx.AsyncClient.get

    async def counting(self: Any, url: Any, **kwargs: Any) -> Any:
        fetched.append(1)
        return await original(self, url, **kwargs)

    rotated = RSAKey.generate_key(2048, parameters={"kid": "lms-key-2"})  # a kid the cached JWKS lacks
    import unittest.mock

    with unittest.mock.patch.object(httpx.AsyncClient, "get", counting):
        for _ in range(3):
            params = start_login(client, lms)
            answer = post_launch(
                client, lms.id_token(lms.claims(lms.users["ada"], params["nonce"]), rotated), params["state"]
            )
            assert answer.status_code == 403
    assert fetched == []  # the key set was fetched moments ago: forged kids cost the platform nothing
    tool["app"].state.lti_jwks.sets = {
        u: (t - lti.JWKS_REFETCH_S - 1, k) for u, (t, k) in tool["app"].state.lti_jwks.sets.items()
    }
    lms.key = rotated  # the platform really rotated: the next launch fetches the new set and passes
    params = start_login(client, lms)
    with unittest.mock.patch.object(httpx.AsyncClient, "get", counting):
        answer = post_launch(client, lms.id_token(lms.claims(lms.users["ada"], params["nonce"])), params["state"])
    assert answer.status_code == 200 and fetched == [1]


# --- over Redis: a restart while scores wait loses none ---------------------------------------------------


def restart_redis(server: Any) -> None:
    """Kill redis-server and start it again, empty (persistence off), on the same port."""
    import subprocess

    import redis as redis_lib

    server.proc.kill()
    server.proc.wait(timeout=30)
    server.proc = subprocess.Popen(
        [
            "redis-server",
            "--bind",
            HOST,
            "--port",
            str(server.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(server.folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    client = redis_lib.Redis(host=HOST, port=server.port)

    def pong() -> bool:
        try:
            return bool(client.ping())
        except redis_lib.exceptions.ConnectionError:
            return False

    wait_for(pong, 30, "redis-server to answer again")
    client.close()


def test_a_redis_restart_while_scores_wait_loses_none(tool: dict[str, Any], lms: LmsPlatform, tmp_path: Path) -> None:
    from conftest import require_program
    from server_util import Redis

    require_program("redis-server", "redis-server")
    redis_server = Redis(tmp_path).start()
    try:
        launch(tool["client"], lms, "ada")
        launch(tool["client"], lms, "new")
        store, config = tool["store"], tool["config"]
        thread = lti_services.ScorePoster(config.db_path, redis_server.url, config.course, [], lost_after=60)
        queue = open_queue(redis_server.url)
        connector = lti_services.ServiceConnector(store)
        override(store, "s2", "activations.ReLU", 5.0)
        override(store, "newton@example.org", "activations.ReLU", 6.0)
        thread.tick(store, queue, connector, now=1.0)
        assert queue.pending() == 2
        restart_redis(redis_server)  # both posts were waiting in Redis: gone
        assert queue.pending() == 0
        for now in (100.0, 200.0, 201.0):  # missing, then lost and sent again
            thread.tick(store, queue, connector, now=now)
        assert run_tasks(queue) == 2
        thread.tick(store, queue, connector, now=202.0)
        connector.close()
        assert lti_services.score_counts(store) == {"posted": 2}
        assert {(s["userId"], s["scoreGiven"]) for s in lms.scores} == {("lms-ada", 5.0), ("lms-new", 6.0)}
    finally:
        redis_server.stop()


@pytest.mark.parametrize(
    "roles, role",
    [
        ([LEARNER], "learner"),
        (["Learner"], "learner"),
        ([INSTRUCTOR], "instructor"),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"], "instructor"),
        ([INSTRUCTOR, LEARNER], "instructor"),
        ([INSTITUTION_ADMIN, LEARNER], "learner"),  # a Canvas account admin enrolled as a student
        ([INSTITUTION_ADMIN], None),  # Administrator roles alone say nothing about this course
        ([SYSTEM_ADMIN], None),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership#Administrator"], None),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor"], None),  # faculty, not this course's
        (["http://purl.imsglobal.org/vocab/lis/v2/membership#ContentDeveloper"], None),
        ([], None),
    ],
)
def test_the_context_roles_alone_decide_who_opens_the_dashboard(roles: list[str], role: str | None) -> None:
    platform = lti.Platform("p", "https://lms", "c", "https://lms/a", "https://lms/t", "https://lms/j", ("d",))
    launched = lti.Launch(platform, {lti.CLAIM + "roles": roles})
    assert launched.role == role and launched.is_instructor is (role == "instructor")
    assert lti.context_role(roles) == role  # the roster sync reads members' roles the same way


HOSTILE = '<script>alert(1)</script>"><meta http-equiv=refresh content=0;url=//evil>'


def test_markup_sent_to_the_lti_pages_is_shown_escaped(tool: dict[str, Any], lms: LmsPlatform) -> None:
    """An error or an issuer holding markup (a script, a <meta> refresh that sends the browser away) is shown as
    text on the refusal page, never rendered."""
    client = tool["client"]
    answers = [
        client.get("/lti/launch", params={"error": HOSTILE, "error_description": HOSTILE}),
        client.get(
            "/lti/login",
            params={
                "iss": HOSTILE,
                "login_hint": "ada",
                "client_id": lms.client_id,
                "target_link_uri": lms.tool_url + "/lti/launch",
            },
        ),
        login_redirect(client, lms, iss=HOSTILE),
    ]
    for answer in answers:
        assert answer.status_code in (400, 403), answer.text
        assert "<script>" not in answer.text and "<meta http-equiv=refresh" not in answer.text, answer.text
        assert "&lt;script&gt;" in answer.text or "&lt;meta" in answer.text


def test_without_an_lti_section_the_lti_routes_are_not_mounted(tmp_path: Path, lms: LmsPlatform) -> None:
    with serve_tool(tmp_path, lms, {}) as served:
        for path in ("/lti/login", "/lti/launch", "/lti/jwks", "/lti/config"):
            assert served["client"].get(path, params={"error": HOSTILE}).status_code == 404, path


def test_early_lms_passback_holds_an_exam_score_until_its_release(poster: dict[str, Any], lms: LmsPlatform) -> None:
    """Issue 43: the LMS received a held exam chapter's score before ``release_feedback`` (its columns came from
    the instructor's view). Before the release nothing of the chapter is posted; at the release it is."""
    import dataclasses
    from datetime import datetime, timedelta, timezone

    from grader.student.course import Chapter

    tick, queue, store, thread = poster["tick"], poster["queue"], poster["store"], poster["thread"]
    later = datetime.now(timezone.utc) + timedelta(hours=3)
    exam = Chapter("activations", ("activations.ReLU",), release_feedback=later)
    thread.course = dataclasses.replace(thread.course, chapters=(exam,))
    override(store, "s2", "activations.ReLU", 7.5)
    tick()
    run_tasks(queue)
    assert lms.scores == [] and lti_services.pending_scores(store) == []
    released = dataclasses.replace(exam, release_feedback=datetime.now(timezone.utc) - timedelta(minutes=1))
    thread.course = dataclasses.replace(thread.course, chapters=(released,))
    tick()  # nothing new in the database: the release alone sends it
    assert run_tasks(queue) == 1
    tick()
    assert [s["scoreGiven"] for s in lms.scores] == [7.5]
