"""The student's own pages (/student/, grader/server/student_pages.py), over HTTP in-process.

Who opens them (a Bearer token, a token login's session, nothing, the instructor); a student reaches only
their own rows, by the API's rule and with the API's answers side by side (every page route is checked, as
tests/server/test_server_api.py checks every endpoint); the upload's page carries the very report of ``grade
submit --html`` and each state while it waits; chapters in the course's order with late notes and the
student's own extension; quizzes judged by the API's own code (attempts, "Not this one.", explanations) with
nothing of a key on the page; the live preview reads without judging; regrades filed and answered; exam mode;
CSRF on every form; the security headers. The seeded course: tests/student_pages_util.py.
"""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from grader import quiz as quiz_lib
from grader.server import student_pages
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.student.client.wire import report_from_dict
from grader.student.course import load_course
from grader.student.feedback.report_html import format_html
from grader.student.store import Store
from server_util import QUIZ_DIR, posed_for, quiz_source, right_answer
from student_pages_util import EXTENDED, EXTENSION_REASON, NOW, Seeded, seed

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


@dataclass
class Env:
    seeded: Seeded
    client: TestClient

    def bearer(self, who: str) -> dict[str, str]:
        token = self.seeded.teacher if who == "teacher" else self.seeded.tokens[who]
        return {"Authorization": f"Bearer {token}"}

    def page(self, who: str, path: str, **kwargs: Any) -> Any:
        """A page with ``who``'s token as a Bearer header (no cookie)."""
        return self.client.get(path, headers=self.bearer(who), follow_redirects=False, **kwargs)

    def api(self, who: str, method: str, path: str, **kwargs: Any) -> Any:
        return self.client.request(method, "/api/v1" + path, headers=self.bearer(who), **kwargs)


def make_env(tmp_path: Path, **seeding: Any) -> Iterator[Env]:
    seeded = seed(tmp_path, **seeding)
    config = ServerConfig(seeded.db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(seeded.course))
    app = create_app(config, run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield Env(seeded, client)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(tmp_path)


def csrf_of(text: str) -> str:
    found = re.findall(r'name="csrf" value="([^"]*)"', text)
    assert found, "the page has no form with a CSRF field"
    return found[0]


def log_in(client: TestClient, token: str) -> Any:
    """The login form as a browser fills it (its CSRF field, the login cookie); the answer to the POST."""
    client.cookies.clear()
    form = client.get("/student/login")
    return client.post(
        "/student/login", data={"token": token, "csrf": csrf_of(form.text), "next": "/student/"}, follow_redirects=False
    )


def text_of(page: str) -> str:
    """The page's words, tags dropped (for reading sentences that cross elements)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


# --- who may open the pages ------------------------------------------------------------------------------


def test_a_bearer_token_a_login_or_nothing(env: Env) -> None:
    client = env.client
    anonymous = client.get("/student/chapters/activations", follow_redirects=False)
    assert anonymous.status_code == 303
    assert anonymous.headers["location"] == "/student/login?next=%2Fstudent%2Fchapters%2Factivations"
    assert env.page("ada", "/student/").status_code == 200
    teacher = env.page("teacher", "/student/")
    assert teacher.status_code == 403 and "the instructor's token opens the dashboard" in text_of(teacher.text)
    assert env.client.get("/student/", headers={"Authorization": "Bearer nope"}).status_code == 401
    # the login: the form's CSRF field, a session cookie kept to /student (HttpOnly, SameSite=Strict over http)
    answer = log_in(client, env.seeded.tokens["ada"])
    assert answer.status_code == 303 and answer.headers["location"] == "/student/"
    cookie = next(
        v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith("normgrade_student=")
    )
    assert (
        "HttpOnly" in cookie and "Path=/student" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    )
    home = client.get("/student/")
    assert home.status_code == 200 and "Signed in as <strong>ada</strong>" in home.text
    # logging out needs the form's CSRF field; then every copy of the cookie is dead
    value = client.cookies.get("normgrade_student")
    assert client.post("/student/logout", data={"csrf": "forged"}).status_code == 403
    assert client.get("/student/").status_code == 200
    assert client.post("/student/logout", data={"csrf": csrf_of(home.text)}, follow_redirects=False).status_code == 303
    client.cookies.set("normgrade_student", value, path="/student")
    assert client.get("/student/", follow_redirects=False).status_code == 303


def test_a_login_is_refused_in_one_line_and_sets_no_session(env: Env) -> None:
    client = env.client
    for token, status, words in (
        (env.seeded.teacher, 403, "That is the instructor's token"),
        ("mistyped", 401, "That token is not valid"),
    ):
        answer = log_in(client, token)
        assert answer.status_code == status and words in text_of(answer.text)
        assert "normgrade_student" not in client.cookies
    client.cookies.clear()  # no login cookie: the form's CSRF field cannot be checked
    forged = client.post(
        "/student/login",
        data={"token": env.seeded.tokens["ada"], "csrf": "x", "next": "/student/"},
        follow_redirects=False,
    )
    assert forged.status_code == 403 and "normgrade_student" not in client.cookies
    outside = client.get("/student/login?next=https://evil.example.org/")
    assert 'name="next" value="/student/"' in outside.text  # no open redirect


def test_a_revoked_token_ends_its_sessions(env: Env) -> None:
    assert log_in(env.client, env.seeded.tokens["ada"]).status_code == 303
    assert env.client.get("/student/").status_code == 200
    with Store.open(env.seeded.db) as store:
        with store.transaction() as db:
            db.execute("UPDATE tokens SET revoked = 1 WHERE student = 'ada'")
    assert env.client.get("/student/", follow_redirects=False).status_code == 303


# --- only one's own rows, as the API ----------------------------------------------------------------------


def test_a_student_reaches_only_their_own_rows_on_every_page(env: Env) -> None:
    jobs = env.seeded.jobs
    checked: set[tuple[str, str]] = set()
    # an upload: one's own is shown; someone else's and none at all are "not found" (as the API says)
    for job, status in ((jobs["pictures"], 200), (jobs["bob"], 404), (999999, 404)):
        assert env.page("ada", f"/student/submissions/{job}").status_code == status
        assert env.api("ada", "GET", f"/submissions/{job}").status_code == status
    for bad in ("abc", "0", "99999999999999999999"):
        assert env.page("ada", f"/student/submissions/{bad}").status_code == 400
        assert env.api("ada", "GET", f"/submissions/{bad}").status_code == 400
    assert env.page("bob", f"/student/submissions/{jobs['bob']}").status_code == 200
    checked.add(("GET", "/student/submissions/{id}"))
    # a regrade about someone else's upload: 404, nothing filed
    filed = env.client.post(
        f"/student/submissions/{jobs['bob']}/regrades",
        headers=env.bearer("ada"),
        data={"exercise": "activations.ReLU", "reason": "mine?"},
    )
    assert filed.status_code == 404 and env.api("bob", "GET", "/regrades").json()["requests"] == []
    checked.add(("POST", "/student/submissions/{id}/regrades"))
    # the lists: one's own uploads only, never a "student" taken from the request
    home = env.page("ada", "/student/", params={"student": "bob"})
    assert f"Submission {jobs['bob']}<" not in home.text and f"Submission {jobs['pictures']}<" in home.text
    listed = {s["id"] for s in env.api("ada", "GET", "/submissions").json()["submissions"]}
    assert set(map(int, re.findall(r"Submission (\d+)</a>", home.text))) == listed
    checked.add(("GET", "/student/"))
    chapter = env.page("ada", "/student/chapters/activations", params={"student": "bob"})
    assert f"Submission {jobs['late']}<" in chapter.text and f"Submission {jobs['bob']}<" not in chapter.text
    checked.add(("GET", "/student/chapters/{chapter:path}"))
    # quizzes: answered and read for the token's student only
    bob_right = right_answer("activations", quiz_source("activations").questions[0], "bob", typed=True)
    env.client.post(
        "/student/quizzes/activations",
        headers=env.bearer("bob"),
        data={"question": "gelu-why", "answer": bob_right, "student": "ada"},
    )
    assert [r["student"] for r in answers_of(env, "gelu-why")] == ["bob"]
    checked.add(("POST", "/student/quizzes/{chapter}"))
    quiz = env.page("ada", "/student/quizzes/activations", params={"student": "bob"})
    assert "Answered correctly" not in quiz.text
    checked.add(("GET", "/student/quizzes/{chapter}"))
    preview = env.client.post(
        "/student/quizzes/activations/preview",
        headers=env.bearer("ada"),
        data={"question": "gelu-value", "answer": "2*x", "student": "bob"},
    ).json()
    assert preview["error"].startswith("write the number itself, not the formula: 'x' is one of your values")
    checked.add(("POST", "/student/quizzes/{chapter}/preview"))
    text = html.unescape(env.page("ada", "/student/text/activations.html", params={"student": "bob"}).text)
    assert posed_for("activations", "gelu-value", "ada").prompt in text
    assert posed_for("activations", "gelu-value", "bob").prompt not in text, "the checkpoints are posed for ada"
    checked |= {
        ("GET", "/student/text/"),
        ("GET", "/student/text/{chapter}.html"),  # the same text for everyone
        ("GET", "/student/text/{chapter}/{section}"),
    }
    checked.add(("POST", "/student/logout"))  # a session of one's own (test_a_bearer_token_a_login_or_nothing)
    assert checked == {(m, p) for m, p, _ in student_pages.PAGES}, "a new page needs its ownership check here"


def answers_of(env: Env, question: str) -> list[dict[str, Any]]:
    with Store.open(env.seeded.db) as store:
        return list(store.db.query("SELECT * FROM quiz_attempts WHERE question = ? ORDER BY id", [question]))


# --- an upload's page ---------------------------------------------------------------------------------------


def test_an_upload_shows_the_report_and_pictures_of_grade_submit_html(env: Env) -> None:
    job = env.seeded.jobs["pictures"]
    doc = env.api("ada", "GET", f"/submissions/{job}").json()
    report = report_from_dict(doc["report"])  # what `grade submit --html` writes its page from
    written = format_html(report, text_href=student_pages.TEXT_URL)  # its "Read §..." links to the served text
    body = written[written.index("<body>") + len("<body>") : written.index("</body>")]
    page = env.page("ada", f"/student/submissions/{job}").text
    assert body in page, "the very report of grade submit --html, pictures included"
    pictures = sum(1 for e in report.exercises for c in e.checks if c.figure and not c.passed)
    assert pictures >= 5 and page.count('<figure class="ng-figure"') == pictures
    assert page.count("<title id=") >= pictures  # every picture keeps its text alternative
    assert "ln-batch-axis" in page and "init-kaiming-variance-as-std" in page
    other = env.page("ada", f"/student/submissions/{env.seeded.jobs['late']}").text
    assert body not in other  # the report of that upload, not of another


@pytest.mark.parametrize(
    "state, words",
    [
        ("queued", "Queued : 1 upload(s) ahead of it in the queue"),
        ("running", "Running : being graded now (worker grader-1:4242)"),
        ("retried", "Retried : try 2 of 2, after the worker's lease expired; next in the queue"),
        ("error", "Not graded : the worker stopped twice while grading (out of memory); no attempt was recorded"),
        ("pictures", "Graded 10.25 / 20."),
    ],
)
def test_an_upload_says_where_it_is_while_it_waits(env: Env, state: str, words: str) -> None:
    job = env.seeded.jobs[state]
    doc = env.api("ada", "GET", f"/submissions/{job}").json()
    page = env.page("ada", f"/student/submissions/{job}").text
    assert words in text_of(page)
    assert ("Check again" in page) == (doc["status"] not in ("done", "error"))
    if state == "queued":
        assert doc["queue_position"] == 1  # the number the page states is the API's
    assert ("Ask for a regrade" in page) == (state == "pictures"), "a regrade is asked about a graded upload"


def test_a_not_graded_exercise_and_a_phase_without_words_of_its_own_are_said_as_the_api_says_them() -> None:
    """Graded but for an exercise the grader's machine could not grade: said, never a zero; a phase the page has
    no words for (another state of the queue) shows the API's own line rather than a wrong one."""
    from grader.student.client.wire import report_to_dict
    from grader.student.engine.model import ExerciseResult, GradeReport
    from grader.server.student_view import submission_view

    report = GradeReport(
        "ada",
        [
            ExerciseResult("activations.ReLU", "passed", 10.0, 10.0),
            ExerciseResult(
                "kernels.relu_forward",
                "not_graded",
                0.0,
                10.0,
                [],
                "no OpenCL device builds a kernel here: see `grade doctor`",
            ),
        ],
        "h",
    )
    doc = {
        "id": 3,
        "received_at": NOW.isoformat(),
        "phase": "done",
        "status": "done",
        "where": "graded",
        "exercises": ["activations.ReLU", "kernels.relu_forward"],
        "report": report_to_dict(report),
    }
    done = submission_view(doc)
    assert done.score_text == "10 / 10" and not done.waiting
    assert done.state.startswith("except 1 exercise(s) the grader's machine could not grade (not_graded")
    held = submission_view(
        {
            **doc,
            "phase": "held",
            "status": "held",
            "report": None,
            "where": "held: the grader's machine has no OpenCL device; graded by itself once it has",
        }
    )
    assert (
        held.waiting and held.state == "held: the grader's machine has no OpenCL device; graded by itself once it has"
    )
    assert held.phase_label == "Held"


def test_chapters_come_in_the_courses_order_with_late_notes_and_own_dates(env: Env) -> None:
    home = env.page("ada", "/student/").text
    names = re.findall(r'<a href="/student/chapters/([^"]+)">', home)
    assert names[:5] == ["activations", "normalization", "init", "dropout-weight-decay", "universal-approximation"], (
        "the course file's chapters first, in its order (the last two: chapters of a quiz alone)"
    )
    assert names[5:] == ["linear", "dropout", "optim", "gradcheck", "blocks", "approximation", "kernels"]  # issue 43:
    # the quiz initialisation is init's (quiz = "initialisation"), never a chapter of its own beside it
    words = text_of(home)
    assert f"your extension : {EXTENSION_REASON}" in words and EXTENDED.strftime("%Y-%m-%d %H:%M") in words
    assert EXTENSION_REASON not in text_of(env.page("bob", "/student/").text), "an extension is its student's"
    activations = text_of(env.page("ada", "/student/chapters/activations").text)
    assert (
        "activations.ReLU 7 / 10 1 PASSED late the upload that counts came after the due date "
        "(late work counts 70%)" in activations
    )
    late = text_of(env.page("ada", f"/student/submissions/{env.seeded.jobs['late']}").text)
    assert "activations.ReLU : uploaded after the due date" in late and "counts 70%, 7 of 10" in late
    progress = env.api("ada", "GET", "/progress").json()
    relu = next(e for c in progress["chapters"] for e in c["exercises"] if e["id"] == "activations.ReLU")
    assert relu["best_score"] == 7.0 and relu["late"] is True  # the page's number is the API's
    assert env.page("ada", "/student/chapters/nothing").status_code == 404


# --- quizzes -----------------------------------------------------------------------------------------------


def quiz_form(env: Env, who: str, chapter: str, question: str, answer: str, **extra: str) -> Any:
    return env.client.post(
        f"/student/quizzes/{chapter}", headers=env.bearer(who), data={"question": question, "answer": answer, **extra}
    )


def test_the_quiz_page_poses_each_question_for_its_student_without_keys(env: Env) -> None:
    for chapter in quiz_lib.CHAPTER_ORDER:
        page = env.page("ada", f"/student/quizzes/{chapter}")
        assert page.status_code == 200
        api = env.api("ada", "GET", f"/quizzes/{chapter}").json()
        shown = html.unescape(page.text)
        locked = quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json")
        for q, doc in zip(locked.questions, api["questions"], strict=True):
            assert doc["prompt"] in shown, "the prompt posed for ada (her numbers)"
            order = [shown.index(c["text"], shown.index(doc["prompt"])) for c in doc["choices"]]
            assert order == sorted(order), "her choice order"
            assert all(secret not in page.text for secret in (q.salt, *q.digests) if secret)
            assert q.reference is None or q.reference not in shown
            explanation = posed_for(chapter, q.id, "ada").explanation(0.0)[:60]
            assert explanation and explanation not in shown, "no explanation of an open question"
    gelu = posed_for("activations", "gelu-value", "bob").prompt
    assert gelu not in html.unescape(env.page("ada", "/student/quizzes/activations").text), "not bob's numbers"


def verdict_of(page: str, question_id: str) -> str:
    """The verdict a quiz page shows under question ``question_id`` (it must show one)."""
    found = re.search(rf'id="v-{question_id}">([^<]*)<', page)
    assert found is not None, f"no verdict for {question_id}"
    return found.group(1)


def test_answers_in_the_browser_follow_the_graded_rules(env: Env) -> None:
    """normalization is due later: a wrong answer says "Not this one." and no more until the last attempt."""
    question = next(q for q in quiz_source("normalization").questions if q.kind == "single")
    order = [c.id for c in posed_for("normalization", question.id, "ada").choices]
    wrong = str(next(i for i, c in enumerate(order, 1) if c != question.answer))
    explanation = posed_for("normalization", question.id, "ada").explanation()
    first = quiz_form(env, "ada", "normalization", question.id, wrong)
    assert first.status_code == 200
    told = verdict_of(first.text, question.id)
    assert told == "Not this one. (1 attempt(s) left)" and explanation[:60] not in text_of(first.text)
    assert "Attempt 2 of 2" in first.text
    unreadable = quiz_form(env, "ada", "normalization", question.id, "seven")
    assert (
        unreadable.status_code == 422
        and "Not judged (no attempt used): &#39;seven&#39; is not a choice" in unreadable.text
    )
    second = quiz_form(env, "ada", "normalization", question.id, wrong)
    assert verdict_of(second.text, question.id) == "Not this one. No attempts left."
    assert explanation[:60] in text_of(second.text), "the last attempt explains"
    closed = quiz_form(env, "ada", "normalization", question.id, right_answer("normalization", question, "ada", True))
    assert closed.status_code == 409 and "has no attempts left (2 of 2 used)" in html.unescape(closed.text)
    assert [r["correct"] for r in answers_of(env, question.id)] == [0, 0], "neither the unreadable nor the closed one"
    # the same answers through the API give the same verdicts (one judge): bob answers there
    api = [
        env.api(
            "bob",
            "POST",
            "/quizzes/normalization/answers",
            json={"question": question.id, "answer": wrong_for, "shown": True},
        )
        .json()
        .get("feedback")
        for wrong_for in [
            str(
                next(
                    i
                    for i, c in enumerate([c.id for c in posed_for("normalization", question.id, "bob").choices], 1)
                    if c != question.answer
                )
            )
        ]
        * 2
    ]
    assert api == ["Not this one. (1 attempt(s) left)", "Not this one. No attempts left."]
    # right at once: "Correct." and the explanation; the page then shows it closed and explained
    other = next(q for q in quiz_source("normalization").questions if q.kind == "numeric" and q.answer_range is None)
    right = quiz_form(env, "ada", "normalization", other.id, right_answer("normalization", other, "ada", True))
    assert verdict_of(right.text, other.id) == "Correct."
    again = env.page("ada", "/student/quizzes/normalization").text
    section = again[again.index(f'id="q-{other.id}"') :]
    section = section[: section.index("</section>")]
    assert "Answered correctly (1 of" in section and 'name="answer"' not in section and 'class="explanation"' in section


def test_a_parameterised_question_takes_the_students_own_numbers(env: Env) -> None:
    from server_util import reference_value

    mine = reference_value("activations", "gelu-value", "ada")
    theirs = reference_value("activations", "gelu-value", "bob")
    assert "Not this one" in quiz_form(env, "ada", "activations", "gelu-value", repr(theirs)).text
    right = quiz_form(env, "ada", "activations", "gelu-value", repr(mine))
    assert verdict_of(right.text, "gelu-value") == "Correct."
    assert [(r["correct"], r["first_try"]) for r in answers_of(env, "gelu-value")] == [(0, 1), (1, 0)]


def test_the_preview_reads_an_answer_without_judging_it(env: Env) -> None:
    def preview(question: str, answer: str, chapter: str = "activations") -> dict[str, Any]:
        found = env.client.post(
            f"/student/quizzes/{chapter}/preview",
            headers=env.bearer("ada"),
            data={"question": question, "answer": answer},
        )
        assert found.status_code == 200 and found.headers["cache-control"] == "no-store"
        return found.json()

    assert preview("gelu-definition", "GELU(x) = x Phi(x)") == {"read": "x·Φ(x)"}
    assert preview("xavier-variance", "2/(n_in + n_out)", "initialisation")["read"].startswith("2/(")
    assert preview("gelu-value", "3/2") == {"read": "3/2 = 1.5"}
    assert "'x' is one of your values" in preview("gelu-value", "x/2")["error"], "a drawn answer is a number"
    assert preview("gelu-min-x", "1/2n") == {"error": preview("gelu-min-x", "1/2n")["error"]}
    assert "unknown name 'n'" in preview("gelu-min-x", "1/2n")["error"]
    assert preview("gelu-min-x", "9^9^9")["error"].startswith("'9^9^9' is not a number (an exponent larger")
    assert "no formula to preview" in preview("gelu-why", "1")["error"]
    assert answers_of(env, "gelu-definition") == [] and answers_of(env, "gelu-value") == [], "nothing judged"
    # without the script: the form's "Show how it is read" button, the page again, nothing recorded
    shown = quiz_form(env, "ada", "activations", "gelu-definition", "x*normcdf(x)", preview="1")
    assert shown.status_code == 200 and "Read as: x·Φ(x)" in html.unescape(shown.text)
    assert 'value="x*normcdf(x)"' in shown.text and answers_of(env, "gelu-definition") == []


def test_every_form_carries_its_csrf_field_and_a_forged_one_changes_nothing(env: Env) -> None:
    client = env.client
    assert log_in(client, env.seeded.tokens["ada"]).status_code == 303
    job = env.seeded.jobs["pictures"]
    for path in (
        "/student/",
        "/student/chapters/normalization",
        "/student/quizzes/activations",
        f"/student/submissions/{job}",
    ):
        page = client.get(path).text
        forms = re.findall(r"<form\b.*?</form>", page, re.DOTALL)
        assert forms and all('method="post"' in f for f in forms)
        fields = [re.findall(r'name="csrf" value="([0-9a-f]{64})"', f) for f in forms]
        assert all(len(f) == 1 for f in fields) and len({f[0] for f in fields}) == 1, path  # the session's one
    for path, data in (
        (f"/student/submissions/{job}/regrades", {"exercise": "init.kaiming_normal", "reason": "why"}),
        ("/student/quizzes/activations", {"question": "gelu-why", "answer": "1"}),
        ("/student/quizzes/activations/preview", {"question": "gelu-value", "answer": "1"}),
    ):
        for forged in ({}, {"csrf": "0" * 64}):
            answer = client.post(path, data={**data, **forged})
            assert answer.status_code == 403 and "Form expired" in answer.text, path
    assert answers_of(env, "gelu-why") == [] and env.api("ada", "GET", "/regrades").json()["requests"] == []


# --- regrades ---------------------------------------------------------------------------------------------


def test_a_regrade_is_filed_from_the_upload_and_its_answer_shown_there(env: Env) -> None:
    client, job = env.client, env.seeded.jobs["pictures"]
    assert log_in(client, env.seeded.tokens["ada"]).status_code == 303
    page = client.get(f"/student/submissions/{job}").text
    empty = client.post(
        f"/student/submissions/{job}/regrades",
        data={"csrf": csrf_of(page), "exercise": "init.kaiming_normal", "reason": "  "},
    )
    assert empty.status_code == 400 and "Not sent: say why you ask for a regrade" in empty.text
    filed = client.post(
        f"/student/submissions/{job}/regrades",
        follow_redirects=False,
        data={"csrf": csrf_of(page), "exercise": "init.kaiming_normal", "reason": "my std is sqrt(2/fan), see line 12"},
    )
    assert filed.status_code == 303 and filed.headers["location"] == f"/student/submissions/{job}?filed=1#regrades"
    shown = text_of(client.get(filed.headers["location"]).text)
    assert "Your regrade request was sent to the instructor." in shown and "Open : waiting for the instructor" in shown
    again = client.post(
        f"/student/submissions/{job}/regrades",
        data={"csrf": csrf_of(page), "exercise": "init.kaiming_normal", "reason": "again"},
    )
    assert again.status_code == 409 and "already have an open regrade request" in again.text
    request = env.api("ada", "GET", "/regrades").json()["requests"][0]
    assert request["job_id"] == job and request["exercise"] == "init.kaiming_normal"
    answered = env.api(
        "teacher",
        "POST",
        f"/regrades/{request['id']}/answer",
        json={"reply": "Right: the check read the variance.", "score": 9},
    )
    assert answered.status_code == 200
    shown = text_of(client.get(f"/student/submissions/{job}").text)
    assert "Answered" in shown and "Right: the check read the variance. Score set to 9." in shown
    assert "Right: the check read the variance." in text_of(client.get("/student/").text)


# --- exam mode, headers ----------------------------------------------------------------------------------


def test_exam_mode_holds_the_feedback_on_the_page_as_in_the_api(tmp_path: Path) -> None:
    for env in make_env(tmp_path, exam_release=NOW + timedelta(days=2)):
        job = env.seeded.jobs["pictures"]
        doc = env.api("ada", "GET", f"/submissions/{job}").json()
        page = env.page("ada", f"/student/submissions/{job}").text
        # the exam chapter's exercise: held, one row "received, feedback at T" and no details (issue 43)
        assert "RECEIVED" in page and "received, feedback at " in page and 'id="ex-normalization-LayerNorm"' not in page
        assert "ln-batch-axis" not in page and "forward_2d" not in page
        assert "init-kaiming-variance-as-std" in page and '<figure class="ng-figure"' in page  # init: no exam
        assert "held until their release" in text_of(page)
        assert "ln-batch-axis" not in str(doc["report"]) and "forward_2d" not in str(doc["report"])  # as the API
        chapter = text_of(env.page("ada", "/student/chapters/normalization").text)
        assert "normalization.LayerNorm received, feedback at " in chapter and "LayerNorm 0 / 10" not in chapter


def test_the_pages_carry_the_dashboards_security_headers(env: Env) -> None:
    job = env.seeded.jobs["pictures"]
    for path in (
        "/student/",
        "/student/chapters/activations",
        f"/student/submissions/{job}",
        "/student/quizzes/activations",
        "/student/login",
        "/student/submissions/999",
    ):
        answer = env.page("ada", path)
        csp = answer.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "form-action 'self'" in csp
        assert answer.headers["x-frame-options"] == "DENY" and answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer" and answer.headers["cache-control"] == "no-store"
        has_script = "<script>" in answer.text
        assert has_script == (path == "/student/quizzes/activations"), path  # the preview's, nowhere else
        assert ("script-src 'sha256-" in csp and "connect-src 'self'" in csp) == has_script


# --- hostile requests -------------------------------------------------------------------------------------

HOSTILE_FORMS: list[bytes] = [
    b"",
    b"x" * (student_pages.MAX_FORM_BYTES + 10),
    b"\xff\xfe\x00garbage",
    b"%00=%00&%ff=%fe",
    b"question=gelu-why&answer=" + b"1" * 5000,
    b"question=" + b"q" * 3000 + b"&answer=1",
    b"question=gelu-definition&answer=" + b"(" * 300 + b"x" + b")" * 300,
    b"question=gelu-value&answer=9%5E9%5E9%5E9",
    b"question=gelu-value&answer=" + b"1e999999",
    b"question=negative-outputs&answer=1&answer=2&answer=99&answer=-1",
    b"question=gelu-why&answer=1&answer=2",
    b"exercise=no.such&reason=x",
    b"exercise=init.kaiming_normal&reason=" + b"r" * 1500,
    b"exercise=" + b"e" * 5000 + b"&reason=why",
    b"csrf=" + b"c" * 5000,
    b"preview=1&question=gelu-why&answer=1",
]
HOSTILE_IDS = ["99999999999999999999999", "0", "-1", "abc", "1e5", "%00", "..%2F..", "x" * 5000, "%F0%9F%92%A9"]
HOSTILE_NAMES = ["nobody", "..%2F..%2Fetc", "x" * 5000, "%00", "a%20b", "%F0%9F%92%A9", "activations%2F..%2F.."]


def test_every_page_answers_hostile_input_with_a_short_page_never_a_500(env: Env) -> None:
    """Each route of the student's pages, every bad path value and every bad form: a 2xx or 4xx with one
    line (the test client raises any server error), and nothing is recorded by any of them."""
    for method, path, _ in student_pages.PAGES:
        params = re.findall(r"\{([^}:]+)", path)
        values = HOSTILE_IDS if "id" in params else HOSTILE_NAMES if params else [""]
        values = values + ([str(env.seeded.jobs["pictures"])] if "id" in params else ["activations"] if params else [])
        for value in values:
            target = re.sub(r"\{[^}]+\}", value, path)
            if method == "GET":
                answers = [env.client.get(target, headers=env.bearer("ada"), follow_redirects=False)]
            else:
                answers = [
                    env.client.post(
                        target,
                        content=body,
                        headers={**env.bearer("ada"), "Content-Type": "application/x-www-form-urlencoded"},
                    )
                    for body in HOSTILE_FORMS
                ]
            for answer in answers:
                assert answer.status_code < 500, f"{method} {target[:60]}: {answer.status_code}"
                if answer.status_code >= 400 and answer.headers["content-type"].startswith("text/html"):
                    shown = re.search(r'<p class="notice error" role="alert"[^>]*>([^<]*)</p>', answer.text)
                    line = html.unescape(shown.group(1)) if shown else ""
                    assert line and "\n" not in line and len(line) <= 400, target[:60]
    assert answers_of(env, "gelu-value") == [] and answers_of(env, "gelu-definition") == []
    assert env.api("ada", "GET", "/regrades").json()["requests"] == []


def test_over_https_the_session_cookie_can_reach_the_page_inside_the_lms_frame(tmp_path: Path) -> None:
    """A cross-site frame (the LMS showing the page) gets only SameSite=None cookies; Secure is then required and
    Partitioned keeps the cookie to that LMS's site (CHIPS) where third-party cookies are blocked."""
    seeded = seed(tmp_path)
    app = create_app(
        ServerConfig(seeded.db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(seeded.course)), run_collector=False
    )
    with TestClient(app, base_url="https://127.0.0.1") as client:
        answer = log_in(client, seeded.tokens["ada"])
        assert answer.status_code == 303
        cookie = next(
            v for k, v in answer.headers.multi_items() if k == "set-cookie" and v.startswith("normgrade_student=")
        )
        attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
        assert {"secure", "httponly", "partitioned"} <= attributes and "samesite=none" in cookie.lower()
        home = client.get("/student/")
        assert home.status_code == 200
        out = client.post("/student/logout", data={"csrf": csrf_of(home.text)}, follow_redirects=False)
        gone = next(v for k, v in out.headers.multi_items() if k == "set-cookie" and v.startswith("normgrade_student="))
        assert "Max-Age=0" in gone and "Partitioned" in gone  # deleted as it was set, or the browser keeps it


# --- the course text (issue 46) ---------------------------------------------------------------------------


def test_the_course_text_is_for_a_logged_in_student_and_an_unknown_section_is_a_404(env: Env) -> None:
    for path in (
        "/student/text/",
        "/student/text/normalization.html",
        "/student/text/normalization/batchnorm-backward",
    ):
        anonymous = env.client.get(path, follow_redirects=False)
        assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/student/login?next="), path
        assert env.page("teacher", path).status_code == 403, path
    assert env.page("ada", "/student/text/").status_code == 200
    section = env.page("ada", "/student/text/normalization/batchnorm-backward")
    assert section.status_code == 303
    assert section.headers["location"] == "/student/text/normalization.html#batchnorm-backward"
    missing = env.page("ada", "/student/text/normalization/no-such-section")
    assert missing.status_code == 404
    assert "The course text has no section 'normalization.no-such-section'" in text_of(missing.text)
    assert env.page("ada", "/student/text/nochapter.html").status_code == 404
    assert env.page("ada", "/student/text/nochapter/x").status_code == 404


def test_a_chapter_of_the_text_links_its_checkpoints_to_the_quiz_page_and_back(env: Env) -> None:
    page = env.page("ada", "/student/text/activations.html")
    assert page.status_code == 200
    assert '<section id="gelu" ' in page.text or 'id="gelu"' in page.text
    # KaTeX from this server only: the policy names 'self' for scripts, styles and fonts, and no other origin
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "font-src 'self'" in policy and "style-src 'self'" in policy
    assert "http" not in policy and '<script defer src="/student/text/assets/katex.min.js">' in page.text
    # each checkpoint question, posed for ada, links to its form on the quiz page with the way back
    prompt = posed_for("activations", "gelu-value", "ada").prompt
    link = re.search(
        r'<a href="(/student/quizzes/activations\?section=([a-z0-9-]+)#q-gelu-value)">([^<]*)</a>', page.text
    )
    assert link is not None and html.unescape(link.group(3)) == prompt
    quiz = env.page("ada", link.group(1).split("#")[0])
    back = f'href="/student/text/activations.html#{link.group(2)}"'
    assert (
        back in quiz.text and f'action="/student/quizzes/activations?section={link.group(2)}#q-gelu-value"' in quiz.text
    )
    # answering there (the one judge) keeps the way back beside the verdict
    question = next(q for q in quiz_source("activations").questions if q.id == "gelu-value")
    answered = env.client.post(
        link.group(1).split("#")[0],
        headers=env.bearer("ada"),
        data={"question": "gelu-value", "answer": right_answer("activations", question, "ada", True)},
    )
    assert verdict_of(answered.text, "gelu-value") == "Correct."
    after = answered.text[answered.text.index('id="q-gelu-value"') :]
    assert back in after[: after.index("</section>")]
    # an unknown section id on the quiz page is ignored, not an error
    assert env.page("ada", "/student/quizzes/activations?section=nope").status_code == 200


def test_the_text_assets_are_served_from_the_server_and_nothing_else_is(env: Env) -> None:
    from grader.course import text as course_text

    assert env.client.get("/student/text/assets/render.js").headers["content-type"].startswith("text/javascript")
    for name in (
        "../../../pyproject.toml",
        "..%2F..%2Fpackage.json",
        "katex.mjs",
        "fonts/../../../README.md",
        "%00",
        "fonts/%00",
    ):
        assert env.client.get(f"/student/text/assets/{name}").status_code == 404, name
    if (course_text.KATEX_DIR / "katex.min.js").is_file():
        assert env.client.get("/student/text/assets/katex.min.js").status_code == 200
        font = next((course_text.KATEX_DIR / "fonts").glob("*.woff2")).name
        assert env.client.get(f"/student/text/assets/fonts/{font}").headers["content-type"] == "font/woff2"


def test_the_pages_link_to_the_text(env: Env) -> None:
    assert 'href="/student/text/"' in env.page("ada", "/student/").text
    assert 'href="/student/text/normalization.html"' in env.page("ada", "/student/chapters/normalization").text


def test_a_reports_read_line_links_to_the_served_section(env: Env) -> None:
    links = [
        link
        for job in env.seeded.jobs.values()
        for link in re.findall(r'Read <a href="([^"]*)"', env.page("ada", f"/student/submissions/{job}").text)
    ]
    assert links, "a seeded report sends the student to a section"
    for link in links:
        assert link.startswith("/student/text/"), link
        page, _, anchor = link.partition("#")
        assert f'id="{anchor}"' in env.page("ada", page).text, link
