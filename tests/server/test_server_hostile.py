"""Hostile requests against a running ``grade serve``: every malformed request is a 4xx with one line.

One server for the module (``--workers 0``: nothing is graded). The corpus
below is posted to every route of the API index (``GET /api/v1/``) and to the
dashboard's; one keep-alive connection carries them all, and after each bad
request a good one on the same connection must still be answered (a 500
used to reset the connection). Also here: ids bounded, JSON depth bounded
before parsing, unknown students 404, the security headers on every answer,
sessions that end at logout, and the instructor as a separate identity.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grader.server import app as app_lib
from grader.server import web
from grader.server import auth, roster
from grader.student.errors import UsageError
from grader.student.store import Store
from server_util import Server, issue_tokens

STUDENTS = ["ann", "bob"]
BAD_IDS = [
    "99999999999999999999999",
    "9223372036854775808",
    "0",
    "-1",
    "abc",
    "1e5",
    "1.0",
    "%00",
    "..%2F..",
    "x" * 5000,
    "%F0%9F%92%A9",
    "１２",
    "1" + "0" * 400,
    "-9223372036854775809",
    "1%0A",
]
# What every field of every JSON body gets in turn (the issue's 0, -1, 2^63, 10^400 and a string, and the
# other JSON types): a number the server passes to SQLite unchecked is an OverflowError, a 500.
HOSTILE_VALUES: list[Any] = [
    0,
    -1,
    2**63,
    10**400,
    -(2**63) - 1,
    "a string",
    "",
    1.5,
    1e308,
    True,
    None,
    [],
    {},
    [2**63],
    {"x": 2**63},
]
# A valid body of every POST route of the API index (the corpus changes one field at a time).
VALID_BODIES: dict[str, dict[str, Any]] = {
    "/api/v1/submissions": {"files": {"activations.py": "x = 1\n"}, "exercises": ["activations.ReLU"]},
    "/api/v1/quizzes/{chapter}/answers": {"question": "gelu-why", "answer": "a", "shown": False},
    "/api/v1/regrades": {"exercise": "activations.ReLU", "reason": "the check is wrong", "submission": 1},
    "/api/v1/regrades/{id}/answer": {"reply": "looked again", "score": 5},
    "/api/v1/extensions": {
        "student": "ann",
        "chapter": "activations",
        "due": "2026-12-05T00:00",
        "reason": "ill",
        "late_penalty": 0.1,
        "late_until": "2026-12-06T00:00",
    },
    "/api/v1/rescore": {"exercises": ["activations"], "dry_run": True},
    "/api/v1/roster/sync": {},
    "/api/v1/practice/answers": {
        "concept": "init.variance-vs-std",
        "question": "initialisation/xavier-uniform-a",
        "answer": "1",
        "shown": False,
    },
    "/api/v1/practice/schedule": {"reviews": [], "entries": []},
}
PATH_SAMPLES = {"chapter": "activations", "id": "1", "student": "ann"}
BAD_NAMES = ["nobody", "..%2F..%2Fetc", "x" * 5000, "%00", "a%20b", "%F0%9F%92%A9"]
DEEP = b"[" * 100_000 + b"]" * 100_000
BAD_BODIES: list[bytes] = [
    DEEP,
    b'{"files": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b"{" * 30_000,
    b'{"a": ' * 10_000,
    b"1" * 10_000,
    b'{"files": {"activations.py": "x"}, "exercises": [' + b"9" * 6000 + b"]}",
    b"NaN",
    b'{"files": NaN}',
    b'{"x": Infinity}',
    b"\xff\xfe\x00garbage",
    b"",
    b"[]",
    b'"text"',
    b"null",
    b'{"files": []}',
    b'{"files": {"activations.py": 5}}',
    b'{"files": {"../x.py": "a"}}',
    b'{"files": {"activations.py": "x"}, "exercises": "all"}',
    b'{"files": {"activations.py": "x"}, "exercises": [1]}',
    b'{"files": {"activations.py": "x"}, "exercises": [["activations"]]}',
    b'{"files": {"activations.py": "x"}, "exercises": ["no.such"]}',
    b'{"question": {"a": 1}, "answer": [[[]]]}',
    b'{"question": "x", "answer": null, "shown": "yes"}',
    b'{"files": {"' + b"a" * 100_000 + b'.py": "x"}}',
    b'{"\\ud800": "\\udc00"}',
    b'{"files": {"activations.py": "x"}, "exercises": ["' + b"x" * 60_000 + b'"]}',
    b'{"files": {"activations.py": "x"}, "exercises": [' + b'"activations",' * 5000 + b'"linear"]}',
]
BAD_QUERIES = ["wait=nan", "wait=inf", "wait=-inf", "wait=1e999", "wait=abc", "wait=-5", "wait=" + "9" * 5000]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("hostile")
    db = root / "course.db"
    tokens, teacher = issue_tokens(db, STUDENTS)
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0).start()
    try:
        yield {"url": server.url, "tokens": tokens, "teacher": teacher, "db": db, "server": server}
    finally:
        server.stop()


def index(env: dict[str, Any]) -> list[tuple[str, str]]:
    doc = httpx.get(env["url"] + "/api/v1/", timeout=30).json()
    return [(e["method"], e["path"]) for e in doc["endpoints"]]


def fill(path: str, value: str) -> str:
    return re.sub(r"\{[^}]+\}", value, path)


def check_4xx(response: httpx.Response, what: str) -> None:
    assert 400 <= response.status_code < 500, f"{what}: HTTP {response.status_code} {response.text[:300]}"
    if response.headers.get("content-type", "").startswith("application/json"):
        message = response.json()["error"]
        assert isinstance(message, str) and "\n" not in message and len(message) <= app_lib.MAX_MESSAGE, what


def still_answers(client: httpx.Client, token: str) -> None:
    me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200, "the connection or the server did not survive the bad request"


def test_the_api_index_lists_the_routes_the_corpus_covers(env: dict[str, Any]) -> None:
    routes = index(env)
    assert ("GET", "/api/v1/submissions/{id}") in routes and ("POST", "/api/v1/submissions") in routes
    assert len(routes) == len(web.API_TABLE)


@pytest.mark.parametrize("who", ["student", "instructor"])
def test_every_route_answers_a_corpus_of_bad_inputs_with_a_4xx_and_keeps_the_connection(
    env: dict[str, Any], who: str
) -> None:
    token = env["tokens"]["ann"] if who == "student" else env["teacher"]
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=env["url"], timeout=60) as client:
        for method, path in index(env):
            params = re.findall(r"\{([^}]+)\}", path)
            values = BAD_IDS if "id" in params else BAD_NAMES if params else [""]
            for value in values:
                target = fill(path, value)
                if method == "GET":
                    response = client.get(target, headers=headers)
                    if params:
                        check_4xx(response, f"GET {target[:80]}")
                    else:
                        assert response.status_code < 500, f"GET {target}: {response.text[:200]}"
                    for query in BAD_QUERIES if "id" in params else []:
                        check_4xx(client.get(f"{target}?{query}", headers=headers), f"GET {target[:60]}?{query[:30]}")
                else:
                    for body in BAD_BODIES:
                        response = client.post(
                            target, content=body, headers={**headers, "Content-Type": "application/json"}
                        )
                        check_4xx(response, f"POST {target[:60]} {body[:40]!r}")
                still_answers(client, token)


def json_bodies(path: str) -> Iterator[tuple[str, bytes]]:
    """The valid body of ``path``, then that body with each field in turn set to each hostile value, dropped,
    and the hostile values as the whole body."""
    import json

    valid = VALID_BODIES[path]
    yield "valid", json.dumps(valid).encode()
    for field in valid:
        for value in HOSTILE_VALUES:
            yield f"{field}={str(value)[:20]}", json.dumps({**valid, field: value}).encode()
        yield f"no {field}", json.dumps({k: v for k, v in valid.items() if k != field}).encode()
    for value in HOSTILE_VALUES:
        yield f"body {str(value)[:20]}", json.dumps(value).encode()


def test_every_field_of_every_json_body_gets_every_hostile_value_and_no_answer_is_a_500(env: dict[str, Any]) -> None:
    """The issue's corpus for bodies: every field (the integer ones included: a regrade's submission, a score)
    gets 0, -1, 2^63, 10^400, a string and the other JSON types, with a student's and the instructor's token,
    on the route's sample path and on every bad id of its path; each answer is below 500 (a 4xx says one line)."""
    routes = [(m, p) for m, p in index(env) if m == "POST"]
    assert sorted(p for _, p in routes) == sorted(VALID_BODIES), "a new POST route needs its valid body here"
    for who in ("ann", "teacher"):
        token = env["tokens"]["ann"] if who == "ann" else env["teacher"]
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with httpx.Client(base_url=env["url"], timeout=60) as client:
            for _, path in routes:
                params = re.findall(r"\{([^}]+)\}", path)
                target = re.sub(r"\{([^}]+)\}", lambda m: PATH_SAMPLES[m.group(1)], path)
                for what, body in json_bodies(path):
                    answer = client.post(target, content=body, headers=headers)
                    assert answer.status_code < 500, (
                        f"{who} POST {target} {what}: {answer.status_code} {answer.text[:200]}"
                    )
                    if answer.status_code >= 400:
                        check_4xx(answer, f"{who} POST {target} {what}")
                if "id" in params:
                    for bad in BAD_IDS:
                        bad_target = fill(path, bad)
                        answer = client.post(bad_target, content=next(json_bodies(path))[1], headers=headers)
                        check_4xx(answer, f"{who} POST {bad_target[:60]}")
                still_answers(client, token)


def test_every_route_of_the_application_survives_bad_paths_and_bodies(env: dict[str, Any]) -> None:
    """Every route the server has (the API, the dashboard and its term pages, the LTI endpoints, the course
    page), not only the API index: bad path values and bodies (JSON, forms, garbage) with the instructor's
    token; no answer is a 500."""
    from starlette.routing import Route

    bodies = [
        (b"", "application/json"),
        (b'{"submission": 9223372036854775808}', "application/json"),
        (
            b"reply=x&score=1e400&csrf=x&student=ann&chapter=activations&due=2026-12-05&reason=r",
            "application/x-www-form-urlencoded",
        ),
        (b"\xff\xfe" * 50, "application/x-www-form-urlencoded"),
        (b"id_token=x.y.z&state=abc", "application/x-www-form-urlencoded"),
        (DEEP[:2000], "application/json"),
    ]
    routes = [r for r in web.routes() if isinstance(r, Route)]
    assert any("/instructor/term/regrades/" in r.path for r in routes) and any(
        r.path.startswith("/lti/") for r in routes
    )
    headers = {"Authorization": f"Bearer {env['teacher']}"}
    with httpx.Client(base_url=env["url"], timeout=60) as client:
        for route in routes:
            params = re.findall(r"\{([^}:]+)(?::[^}]*)?\}", route.path)
            values = BAD_IDS if "id" in params else BAD_NAMES if params else [""]
            for value in values:
                target = re.sub(r"\{[^}]+\}", value, route.path)
                for method in sorted(route.methods or []):
                    if method == "HEAD":
                        continue
                    for body, kind in bodies if method == "POST" else [(b"", "")]:
                        answer = client.request(
                            method,
                            target,
                            content=body or None,
                            headers={**headers, "Content-Type": kind} if kind else headers,
                        )
                        assert answer.status_code < 500, f"{method} {target[:80]} {body[:30]!r}: {answer.status_code}"
        still_answers(client, env["teacher"])


def test_file_name_and_id_rules_are_matched_whole() -> None:
    """A rule written ^...$ and used with match() lets a final newline through ("kernels/evil.cl\\n" was stored
    under that name): no pattern in grader/ is anchored ^...$ (a rule is matched whole with fullmatch, or ends
    in \\Z); the names are refused."""
    import ast

    from grader.student.client import uploads

    assert uploads.allowed_name("kernels/evil.cl") and not uploads.allowed_name("kernels/evil.cl\n")
    assert not uploads.allowed_name("activations.py\n")
    with pytest.raises(Exception, match="not an exercise file|is not"):
        uploads.check_files({"kernels/evil.cl\n": "__kernel void f() {}"})
    assert roster.ID_RE.fullmatch("ann") and not roster.ID_RE.fullmatch("ann\n")
    repo = Path(app_lib.__file__).resolve().parents[2]
    loose = []
    for path in sorted((repo / "grader").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "compile"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value.startswith("^")
                and node.args[0].value.endswith("$")
                and not node.args[0].value.endswith("\\$")
            ):
                loose.append(f"{path.relative_to(repo)}:{node.lineno}")
    assert not loose, f"patterns anchored ^...$ (a final newline passes): use fullmatch without anchors: {loose}"


def test_the_upload_refuses_a_kernel_name_with_a_trailing_newline(env: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {env['tokens']['bob']}"}
    answer = httpx.post(
        env["url"] + "/api/v1/submissions",
        headers=headers,
        timeout=60,
        json={
            "files": {"kernels/evil.cl\n": "__kernel void f() {}", "activations.py": "x = 1\n"},
            "exercises": ["activations.ReLU"],
        },
    )
    assert answer.status_code == 400 and "evil.cl" in answer.json()["error"], answer.text


def test_a_huge_submission_id_is_400_and_the_next_request_on_the_connection_works(env: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {env['tokens']['ann']}"}
    with httpx.Client(base_url=env["url"], timeout=60) as client:
        huge = client.get("/api/v1/submissions/99999999999999999999999", headers=headers)
        assert huge.status_code == 400 and "is not a submission id" in huge.json()["error"]
        assert client.get("/api/v1/submissions/123456", headers=headers).status_code == 404
        still_answers(client, env["tokens"]["ann"])


def test_a_body_nested_100000_deep_is_refused_before_parsing(env: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {env['tokens']['bob']}", "Content-Type": "application/json"}
    answer = httpx.post(env["url"] + "/api/v1/submissions", content=DEEP, headers=headers, timeout=60)
    assert answer.status_code == 400 and "nested more than" in answer.json()["error"]
    assert not app_lib.too_deep(b'{"a": [1, {"b": "[[[[[[[[{{{{"}]}', 3)  # brackets in strings do not count
    assert app_lib.too_deep(b'{"a": [1, {"b": [1]}]}', 3)
    assert not app_lib.too_deep(b'{"a": "\\"[[[[", "b": [[]]}', 3)
    assert app_lib.too_deep(b"[" * 33 + b"]" * 33, 32) and not app_lib.too_deep(b"[" * 32 + b"]" * 32, 32)
    assert app_lib.too_deep(b'{"a": [}', 32)  # brackets that do not match


def test_an_unknown_student_is_404_for_the_instructor(env: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {env['teacher']}"}
    for suffix in ("progress", "submissions", "quizzes"):
        answer = httpx.get(f"{env['url']}/api/v1/students/nobody/{suffix}", headers=headers, timeout=30)
        assert answer.status_code == 404 and "there is no student 'nobody'" in answer.json()["error"]
        known = httpx.get(f"{env['url']}/api/v1/students/ann/{suffix}", headers=headers, timeout=30)
        assert known.status_code == 200


# --- headers and sessions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/", "/api/v1/", "/api/v1/me", "/api/v1/submissions/abc", "/instructor/login", "/instructor/", "/no/such/page"],
)
def test_every_answer_carries_the_security_headers(env: dict[str, Any], path: str) -> None:
    answer = httpx.get(env["url"] + path, timeout=30, follow_redirects=False)
    csp = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"


def test_a_copied_session_cookie_dies_at_logout(env: dict[str, Any]) -> None:
    login = httpx.post(
        env["url"] + "/instructor/login", data={"token": env["teacher"], "next": "/instructor/"}, timeout=30
    )
    assert login.status_code == 303
    cookie = login.cookies["normgrade_session"]
    assert env["teacher"] not in cookie
    copied = {"normgrade_session": cookie}
    with contextlib.closing(httpx.Client(base_url=env["url"], timeout=60, cookies=copied)) as client:
        page = client.get("/instructor/")
        assert page.status_code == 200
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        assert client.post("/instructor/logout", data={"csrf": csrf.group(1)}).status_code == 303
    # the copy someone kept still has the cookie value: the server has forgotten the session
    after = httpx.get(env["url"] + "/instructor/", cookies=copied, timeout=30, follow_redirects=False)
    assert after.status_code == 303 and after.headers["location"].startswith("/instructor/login")


def test_dashboard_forms_with_bad_fields_are_4xx(env: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {env['teacher']}"}
    with httpx.Client(base_url=env["url"], timeout=60, headers=headers) as client:
        for score in ("nan", "inf", "-1", "1e309", "x" * 1000, ""):
            for student in ("ann", "nobody", "../x", ""):
                answer = client.post(
                    "/instructor/overrides",
                    data={"student": student, "exercise": "activations.ReLU", "score": score, "comment": "c"},
                )
                assert answer.status_code in (303, 400, 404), (score, student, answer.status_code)
        assert (
            client.post(
                "/instructor/overrides",
                content=b"\xff" * 100,
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            ).status_code
            < 500
        )
        assert client.post("/instructor/overrides", content=b"a=" + b"b" * 20_000).status_code == 413
        for path in (
            "/instructor/students/" + "x" * 5000,
            "/instructor/exercises/%00",
            "/instructor/export/%2e%2e%2fx",
            "/instructor/students/%F0%9F%92%A9",
        ):
            assert 400 <= client.get(path).status_code < 500, path


UNENCODABLE = ["\ud800", "a\udc00b", "nul\x00", "\u202egnp.exe", "bell\x07", "\u2066x"]


@pytest.mark.parametrize("bad", UNENCODABLE)
def test_text_that_cannot_be_encoded_is_a_400_in_every_field_of_every_json_body(env: dict[str, Any], bad: str) -> None:
    """A lone surrogate, NUL or a bidirectional control in any field (or a field's name) of any POST body, with
    either token: a 400 naming the code point, never a 500, never the text echoed raw."""
    import json

    refused: set[str] = set()
    for token in (env["tokens"]["ann"], env["teacher"]):
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with httpx.Client(base_url=env["url"], timeout=60, headers=headers) as client:
            for path, valid in VALID_BODIES.items():
                target = re.sub(r"\{([^}]+)\}", lambda m: PATH_SAMPLES[m.group(1)], path)
                bodies = [{**valid, field: bad} for field in valid] + [{**valid, field: [bad]} for field in valid]
                for body in bodies + [{bad: 1}]:
                    answer = client.post(target, content=json.dumps(body).encode(), headers=headers)
                    what = f"POST {target} {ascii(body)[:80]}"
                    if answer.status_code == 403:  # the other role's route: refused before its body is read
                        continue
                    assert answer.status_code == 400, f"{what}: {answer.status_code} {answer.text[:200]}"
                    message = answer.json()["error"]
                    assert f"U+{ord(bad_char(bad)):04X}" in message and bad not in message, what
                    refused.add(path)
    assert refused == set(VALID_BODIES)


def bad_char(text: str) -> str:
    return next(c for c in text if not c.isalnum() and c != ".")


def test_a_form_with_text_that_cannot_be_encoded_is_a_400(env: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {env['teacher']}"}
    with httpx.Client(base_url=env["url"], timeout=60, headers=headers) as client:
        for field in ("student", "comment"):
            form = {"student": "ann", "exercise": "activations.ReLU", "score": "1", "comment": "c", field: "x\x00y"}
            answer = client.post("/instructor/overrides", data=form)
            assert answer.status_code == 400 and "U+0000" in answer.text, answer.text[:200]


# --- the instructor is another kind of identity ----------------------------------------------------------


def test_a_roster_id_instructor_is_refused_in_one_line_and_locks_nobody_out(tmp_path: Path) -> None:
    csv = tmp_path / "roster.csv"
    csv.write_text("id,name,email\nann,Ann,a@x\nInstructor,Eve,e@x\n", encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        roster.read_roster(csv)
    message = str(refused.value)
    assert "line 3" in message and "reserved for the instructor" in message and "\n" not in message
    db = tmp_path / "course.db"
    _, teacher = issue_tokens(db, ["ann"])
    with Store.open(db) as store:
        with pytest.raises(UsageError):
            roster.import_roster(store, [roster.RosterEntry("instructor", "Eve", "e@x")])
        # a student token that happens to carry the instructor's name (an old database) is revoked alone
        with store.transaction() as db_:
            auth.issue(db_, auth.INSTRUCTOR, "student")
            auth.revoke_all(db_, auth.INSTRUCTOR)
        principal = auth.lookup(store.db, teacher)
        assert principal is not None and principal.is_instructor


def test_the_command_line_refuses_the_reserved_id(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from grader.cli import cli

    csv = tmp_path / "roster.csv"
    csv.write_text("id,name,email\ninstructor,Eve,e@x\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["roster", "import", str(csv), "--db", str(tmp_path / "c.db"), "-o", str(tmp_path / "tokens.csv")]
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "reserved for the instructor" in lines[0]


def test_an_upload_names_a_bounded_list_of_exercises(env: dict[str, Any]) -> None:
    """A 60,000-character exercise name used to cost seconds of did-you-mean on the server's event loop."""
    headers = {"Authorization": f"Bearer {env['tokens']['bob']}"}
    for selectors in (["x" * 60_000], ["activations"] * 5000):
        answer = httpx.post(
            env["url"] + "/api/v1/submissions",
            headers=headers,
            timeout=60,
            json={"files": {"activations.py": "x = 1\n"}, "exercises": selectors},
        )
        assert answer.status_code == 400 and "at most 200 exercise ids or topics" in answer.json()["error"]


def test_the_dashboards_script_is_allowed_by_its_hash_alone(env: dict[str, Any]) -> None:
    import base64
    import hashlib

    page = httpx.get(env["url"] + "/instructor/", headers={"Authorization": f"Bearer {env['teacher']}"}, timeout=60)
    csp = page.headers["content-security-policy"]
    script = re.search(r"<script>(.*?)</script>", page.text, re.DOTALL)
    assert script is not None and "frame-ancestors 'none'" in csp
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "'unsafe-inline'" not in csp.split("script-src")[1]
    api_csp = httpx.get(env["url"] + "/api/v1/", timeout=30).headers["content-security-policy"]
    assert "script-src" not in api_csp and "default-src 'none'" in api_csp  # no script anywhere else
