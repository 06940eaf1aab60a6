"""The instructor's dashboard over HTTP (no browser): who may see it, the login session, filters and
sorting without JavaScript, overrides with CSRF and a required comment, the gradebook exports.

One ``grade serve`` for the module (``--workers 0``) over a generated class
(bench/sample_class.py); the browser tests (test_dashboard_browser.py)
start their own with :func:`class_server`.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from grader.term import class_report
from grader import quiz as quiz_lib
from grader.server import dashboard, dashboard_html
from grader.term import class_charts
from bench import sample_class
from grader.student.store import Store
from server_util import Server

STUDENTS = 40


@dataclass
class ClassServer:
    """A running server over a generated class."""

    server: Server
    generated: sample_class.Generated
    db: Path
    now: datetime

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def teacher(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.generated.instructor_token}"}

    def student_token(self, k: int = 0) -> str:
        return self.generated.tokens[sorted(self.generated.tokens)[k]]

    def report(self) -> class_report.ClassReport:
        """The class report as the server counts it (same course, same quizzes)."""
        with Store.open(self.db) as store:
            return class_report.build(
                store, quizzes=quiz_lib.load_all(quiz_lib.default_quiz_dir()), course=self.generated.course
            )


def class_server(root: Path, students: int = STUDENTS) -> ClassServer:
    """Generate a class into ``root/course.db`` and start ``grade serve`` over it (stop it with .server.stop())."""
    now = datetime.now(timezone.utc)
    db = root / "course.db"
    with Store.open(db) as store:
        generated = sample_class.generate(store, students, quiz_lib.load_all(quiz_lib.default_quiz_dir()), now)
    course = root / "course.toml"
    course.write_text(sample_class.course_toml(now), encoding="utf-8")
    server = Server(db, f"sqlite:///{root / 'queue.db'}", workers=0, course=course).start()
    return ClassServer(server, generated, db, now)


@pytest.fixture(scope="module")
def cls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClassServer]:
    running = class_server(tmp_path_factory.mktemp("dashboard"))
    try:
        yield running
    finally:
        running.server.stop()


def get(cls: ClassServer, path: str, **kwargs: object) -> httpx.Response:
    return httpx.get(cls.url + path, timeout=60, follow_redirects=False, **kwargs)  # type: ignore[arg-type]


def login(cls: ClassServer) -> httpx.Client:
    """A client holding the instructor's session cookie (logged in through the form)."""
    client = httpx.Client(base_url=cls.url, timeout=60)
    answer = client.post("/instructor/login", data={"token": cls.generated.instructor_token, "next": "/instructor/"})
    assert answer.status_code == 303 and answer.headers["location"] == "/instructor/"
    return client


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page has no CSRF field"
    return found.group(1)


# --- who may see it --------------------------------------------------------------------------

PAGES = [
    "/instructor/",
    "/instructor/?struggling=1",
    "/instructor/students/s0004",
    "/instructor/exercises/activations.ReLU",
    "/instructor/quizzes",
    "/instructor/held",
    "/instructor/export/canvas.csv",
    "/instructor/export/moodle.csv",
    "/instructor/export/class.json",
]


def test_every_dashboard_route_is_listed_here() -> None:
    """PAGES covers every GET route of grader/server/instructor.py (a new page must be added here)."""
    from grader.server import instructor

    for method, path, _, _ in instructor.PAGES:
        if method == "GET":
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^?]+", re.escape(path)) + r"(\?.*)?$"
            assert any(re.match(pattern, p) for p in PAGES), f"{path} is not tested in PAGES"


@pytest.mark.parametrize("path", PAGES)
def test_a_student_token_gets_403_on_every_page(cls: ClassServer, path: str) -> None:
    answer = get(cls, path, headers={"Authorization": f"Bearer {cls.student_token()}"})
    assert answer.status_code == 403
    assert "for the instructor only" in answer.text
    assert "s0004" not in answer.text and "activations.ReLU" not in answer.text  # nothing of the class leaks


def test_a_student_cannot_post_an_override_or_log_in(cls: ClassServer) -> None:
    token = cls.student_token(1)
    answer = httpx.post(
        cls.url + "/instructor/overrides",
        headers={"Authorization": f"Bearer {token}"},
        data={"student": "s0002", "exercise": "linear.Linear", "score": "10", "comment": "me"},
    )
    assert answer.status_code == 403
    answer = httpx.post(cls.url + "/instructor/login", data={"token": token, "next": "/instructor/"})
    assert answer.status_code == 403 and "That is a student&#39;s token" in answer.text
    assert "set-cookie" not in answer.headers
    with Store.open(cls.db) as store:
        assert not [o for o in store.score_overrides() if o["student"] == "s0002"]


@pytest.mark.parametrize("path", PAGES)
def test_without_credentials_pages_redirect_to_the_login_and_exports_say_401(cls: ClassServer, path: str) -> None:
    answer = get(cls, path)
    if "/export/" in path:
        assert answer.status_code == 401 and "Log in at /instructor/login" in answer.text
    else:
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/instructor/login?next=%2Finstructor%2F")


def test_a_wrong_token_or_a_forged_cookie_gets_nothing(cls: ClassServer) -> None:
    assert get(cls, "/instructor/", headers={"Authorization": "Bearer not-a-token"}).status_code == 401
    answer = httpx.post(cls.url + "/instructor/login", data={"token": "not-a-token"})
    assert answer.status_code == 401 and "not valid" in answer.text and "set-cookie" not in answer.headers
    forged = "9999999999." + "0" * 64
    assert get(cls, "/instructor/", cookies={"normgrade_session": forged}).status_code == 303


def test_login_sets_an_httponly_strict_session_and_logout_ends_it(cls: ClassServer) -> None:
    answer = httpx.post(
        cls.url + "/instructor/login", data={"token": cls.generated.instructor_token, "next": "/instructor/quizzes"}
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/instructor/quizzes"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/instructor" in cookie
    assert cls.generated.instructor_token not in cookie  # the token never goes in the cookie
    # an open redirect is refused: only dashboard paths follow a login
    evil = httpx.post(
        cls.url + "/instructor/login", data={"token": cls.generated.instructor_token, "next": "https://evil.example/"}
    )
    assert evil.headers["location"] == "/instructor/"
    with contextlib.closing(login(cls)) as client:
        page = client.get("/instructor/")
        assert page.status_code == 200 and "Class overview" in page.text
        assert client.post("/instructor/logout", data={"csrf": "wrong"}).status_code == 403
        out = client.post("/instructor/logout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303
        assert client.get("/instructor/").status_code == 303  # the cookie is gone


# --- the overview without JavaScript -------------------------------------------------------------


def rows_of(page: str) -> list[tuple[str, bool]]:
    """(student id, shown) of each grid row, in page order."""
    return [(m.group(1), "hidden" not in m.group(2)) for m in re.finditer(r'<tr data-id="([^"]+)"([^>]*)>', page)]


def test_overview_sorts_and_filters_on_the_server(cls: ClassServer) -> None:
    report = cls.report()
    page = get(cls, "/instructor/?sort=total&order=desc", headers=cls.teacher).text
    order = [sid for sid, _ in rows_of(page)]
    totals = {s.name: s.percent for s in report.students}
    assert len(order) == STUDENTS and [totals[s] for s in order] == sorted(totals.values(), reverse=True)
    assert 'data-sort="total" aria-sort="descending"' in page
    # struggling: hidden rows are exactly those the rule says are not struggling
    page = get(cls, "/instructor/?struggling=1&threshold=40&days=10", headers=cls.teacher).text
    shown = {sid for sid, visible in rows_of(page) if visible}
    filters = dashboard.Filters(struggling=True, threshold=40, days=10)
    now = datetime.now(timezone.utc)
    expected = {s.name for s in report.students if dashboard.is_struggling(report, s, filters, now)}
    assert shown == expected and 0 < len(shown) < STUDENTS
    assert f"Showing {len(shown)} of {STUDENTS} students." in page
    # a chapter: only its columns are shown (CSS keyed on data-show), its percent decides "struggling"
    page = get(cls, "/instructor/?chapter=linear", headers=cls.teacher).text
    index = [g.name for g in report.groups].index("linear")
    assert f'data-show="{index}"' in page and f'#grid[data-show="{index}"] .g:not(.g{index})' in page
    # nonsense in the query falls back to the defaults
    assert get(cls, "/instructor/?sort=evil&threshold=abc&chapter=nope", headers=cls.teacher).status_code == 200


def test_grid_cells_carry_their_numbers_for_screen_readers_and_hover(cls: ClassServer) -> None:
    page = get(cls, "/instructor/", headers=cls.teacher).text
    # s0001 has an override of activations.GELU to 10 (the generated class), shown and said
    found = re.search(r'<tr data-id="s0001".*?</tr>', page, re.S)
    assert found is not None
    row = found.group(0)
    assert 'title="activations.GELU: 10 / 10, override">10&#9998;<span class="sr-only"> override</span></td>' in row
    assert '<span class="sr-only">not submitted</span>' in page and 'title="activations.ReLU: ' in page
    # the odd names are escaped, in the text and in the attributes
    assert "<b>Zoë</b>" not in page and "&lt;b&gt;Zoë&lt;/b&gt;" in page


# --- the student's and the exercise's pages ---------------------------------------------------------


def test_student_page_shows_history_reports_quiz_answers_and_lateness(cls: ClassServer) -> None:
    report = cls.report()
    late = next(s for s in report.students if s.late_uploads > 0)
    page = get(cls, f"/instructor/students/{late.name}", headers=cls.teacher).text
    text = html.unescape(page)
    assert f'<h1 id="student-title">{late.label}' in text
    assert page.count('<details class="attempt"') >= late.late_uploads
    assert '<span class="badge">late: ' in page and "Uploaded after the due date of:" in text
    assert f"normgrade report for {late.name}" in text  # the report the student saw
    assert '<polyline class="line"' in page  # the total over time
    assert "right at the first try" in text and re.search(r'<span class="(right|wrong)">(right|wrong)</span>', page)
    assert get(cls, "/instructor/students/nobody", headers=cls.teacher).status_code == 404


def test_exercise_page_ranks_named_mistakes_and_unnamed_checks(cls: ClassServer) -> None:
    page = get(cls, "/instructor/exercises/activations.ReLU", headers=cls.teacher).text
    text = html.unescape(page)
    for part in (
        "Pass rate over time",
        "Score distribution",
        "Named mistakes, by students who made them",
        "Checks failing without a named mistake",
    ):
        assert part in text
    counts = [
        int(n) for n in re.findall(r'<code>relu-[^<]+</code></td><td class="num" data-label="Students">(\d+) of', page)
    ]
    assert counts and counts == sorted(counts, reverse=True)
    unnamed = re.findall(
        r'<tr><td data-label="Check">([a-z ]+)</td><td class="num" data-label="Students">(\d+)</td>', page
    )
    assert unnamed and [int(n) for _, n in unnamed] == sorted((int(n) for _, n in unnamed), reverse=True)
    assert get(cls, "/instructor/exercises/nope.Nope", headers=cls.teacher).status_code == 404


def test_quiz_items_show_difficulty_discrimination_and_wrong_answers(cls: ClassServer) -> None:
    page = html.unescape(get(cls, "/instructor/quizzes", headers=cls.teacher).text)
    assert "Quiz item analysis" in page and "Discrimination" in page
    assert re.search(r"[+-]\d\.\d\d", page) and "students)" in page


# --- overrides ---------------------------------------------------------------------------------------


def test_override_needs_csrf_and_a_comment_then_shows_in_the_exports(cls: ClassServer) -> None:
    with contextlib.closing(login(cls)) as client:
        page = client.get("/instructor/students/s0010").text
        form = {
            "student": "s0010",
            "exercise": "linear.Linear",
            "score": "9",
            "comment": "viva: derived it",
            "csrf": "0" * 64,
        }
        assert client.post("/instructor/overrides", data=form).status_code == 403  # a forged form
        form["csrf"] = csrf_of(page)
        refused = client.post("/instructor/overrides", data={**form, "comment": "  "})
        assert refused.status_code == 400 and "needs a comment" in refused.text
        saved = client.post("/instructor/overrides", data=form)
        assert saved.status_code == 303 and saved.headers["location"].startswith("/instructor/students/s0010")
        page = client.get(saved.headers["location"]).text
        assert "Override saved." in page and "viva: derived it" in page
        canvas = client.get("/instructor/export/canvas.csv")
        moodle = client.get("/instructor/export/moodle.csv").text
    assert 'attachment; filename="grades-canvas.csv"' == canvas.headers["content-disposition"]
    row = next(r for r in csv.reader(io.StringIO(moodle)) if r[0] == "s0010")
    assert "linear.Linear = 9 (viva: derived it)" in row[-1]
    with Store.open(cls.db) as store:
        log = [o for o in store.score_overrides("s0010")]
    assert [(o["exercise"], o["score"], o["comment"]) for o in log] == [("linear.Linear", 9.0, "viva: derived it")]


def test_exports_import_shape_and_neutralised_cells(cls: ClassServer) -> None:
    rows = list(csv.reader(io.StringIO(get(cls, "/instructor/export/canvas.csv", headers=cls.teacher).text)))
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[0][-1] == "Final Score" and rows[1][0] == "Points Possible"
    assert all(float(p) > 0 for p in rows[1][5:-1])
    assert len(rows) == 2 + STUDENTS
    names = [r[0] for r in rows[2:]]
    assert '\'=HYPERLINK("http://x.invalid","click")' in names  # neutralised
    assert not any(cell.startswith(("=", "+", "-", "@")) for r in rows for cell in r)
    doc = json.loads(get(cls, "/instructor/export/class.json", headers=cls.teacher).text)
    assert doc["summary"]["students"] == STUDENTS and doc["overrides"]
    assert get(cls, "/instructor/export/other.txt", headers=cls.teacher).status_code == 404


# --- contrast ------------------------------------------------------------------------------------------


def luminance(colour: str) -> float:
    """WCAG relative luminance of #rrggbb."""
    channels = [int(colour[k : k + 2], 16) / 255 for k in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_text_colours_have_sufficient_contrast() -> None:
    """WCAG AA (4.5:1) for every text colour of the stylesheet on the backgrounds it is used on."""
    css = (Path(class_report.__file__).parents[1] / "templates" / "dash_style.css.j2").read_text(encoding="utf-8")
    var = dict(re.findall(r"--([a-z]+): (#[0-9a-f]{6})", css))
    pairs = [("ink", band) for band in ("none", "zero", "low", "part", "full")]  # the grid's numbers
    pairs += [("muted", "none"), ("pass", "full")]
    pairs += [("badge", band) for band in ("zero", "low", "part", "full")]  # a named mistake's diamond
    pairs += [("fail", band) for band in ("zero", "low", "part")]  # a crash's "!"
    colours = {
        **var,
        "white": "#ffffff",
        "header": "#1d2f45",
        "filters": "#f4f6f8",
        "th": "#e7ebef",
        "button": "#24507f",
        "badge-bg": "#f7cdc8",
        "badge": "#5c130e",
        "code-bg": "#f6f8fa",
    }
    pairs += [
        ("ink", "white"),
        ("muted", "white"),
        ("link", "white"),
        ("pass", "white"),
        ("fail", "white"),
        ("white", "header"),
        ("muted", "filters"),
        ("ink", "th"),
        ("link", "th"),
        ("white", "button"),
        ("badge", "badge-bg"),
        ("ink", "code-bg"),
        ("focus", "white"),
    ]
    for text, background in pairs:
        ratio = contrast(colours[text], colours[background])
        assert ratio >= 4.5, f"{text} on {background}: {ratio:.2f}:1"
    assert {"badge-bg", "badge", "header", "button"} <= set(colours)
    for literal in ("#1d2f45", "#24507f", "#f7cdc8", "#5c130e", "#f4f6f8", "#e7ebef", "#f6f8fa"):
        assert literal in css, f"{literal} is no longer in the stylesheet: update this test"


# --- one rule, one rounding, one numbering in every view --------------------------------------------------


def test_class_report_and_dashboard_do_not_import_each_other() -> None:
    import ast

    root = Path(__file__).resolve().parents[2] / "grader"

    def imports(path: Path) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        return found

    assert not any(
        "dashboard" in m or m.startswith("grader.server") for m in imports(root / "term" / "class_report.py")
    )
    assert "grader.term.class_report" in imports(root / "server" / "dashboard.py")  # one direction only


def test_one_rounding_for_the_report_progress_dashboard_and_exports() -> None:
    from grader.student.feedback.report import format_score

    assert format_score(5.75 * 0.7) == format_score(5.75 - 5.75 * 0.3) == "4.03"  # the same 4.025 either way
    assert class_report._number(5.75 * 0.7) == "4.025" and class_report._number(2 / 3) == "0.6667"
    assert format_score(10.0) == "10" and format_score(-0.0) == "0" and format_score(6.5) == "6.5"


@pytest.fixture
def late_class(tmp_path: Path) -> Iterator[tuple[Store, class_report.ClassReport]]:
    """Two students at full marks on ReLU: ann on time, bob a day late (30% penalty: 7 counts)."""
    from datetime import timedelta

    from grader.student.course import parse_course
    from grader.student.engine.model import ExerciseResult, GradeReport

    now = datetime.now(timezone.utc)
    due = now - timedelta(days=2)
    course = parse_course(
        {"chapter": [{"name": "activations", "due": due, "late_penalty": 0.3}]}, tmp_path / "course.toml"
    )
    with Store.open(tmp_path / "course.db") as store:
        for student, when in (("ann", due - timedelta(hours=1)), ("bob", due + timedelta(days=1))):
            report = GradeReport(student, [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)])
            store.record_report(report, "v", started_at=when.isoformat(timespec="seconds"))
        yield store, class_report.build(store, ["activations.ReLU"], [], course=course)


def test_the_pass_rate_chart_ends_where_the_pages_figure_stands(
    late_class: tuple[Store, class_report.ClassReport],
) -> None:
    store, report = late_class
    stats = report.exercises[0]
    assert stats.passed == 1 and stats.students == 2  # bob's late 10 counts 7
    series = dashboard.pass_rate_series(store, report, "activations.ReLU")
    assert series[-1][1] == stats.passed / stats.students and "1 of 2" in series[-1][2]
    detail = dashboard.exercise_detail(store, report, "activations.ReLU")
    assert detail is not None and detail.pass_chart.points


def test_the_dashboards_copy_of_a_late_report_carries_the_late_note_and_the_counted_total(
    late_class: tuple[Store, class_report.ClassReport],
) -> None:
    """The report as the student saw it after a late upload: "(late: counts 70%)" beside the score and the
    counted total, the figure the dashboard counts."""
    store, report = late_class
    bob = dashboard.student_detail(store, report, "bob")
    ann = dashboard.student_detail(store, report, "ann")
    assert bob is not None and ann is not None
    text = bob.attempts[0].report_text
    assert "10/10  (late: counts 70%)" in text
    assert "This upload: 7/10 (70.0%) counted (10/10 as graded, late work penalised)" in text
    assert "late: counts" not in ann.attempts[0].report_text


def test_an_upload_is_named_as_the_student_knows_it(tmp_path: Path) -> None:
    from grader.queue import records
    from grader.student.course import DEFAULT_COURSE
    from grader.student.engine.model import ExerciseResult, GradeReport

    with Store.open(tmp_path / "course.db") as store:
        for _ in range(3):  # earlier jobs take the first numbers: job ids and attempt ids differ
            records.create_job(
                store,
                "eve",
                f"k{_}",
                {"activations.py": "x = 1\n"},
                ["activations.ReLU"],
                DEFAULT_COURSE,
                datetime.now(timezone.utc),
            )
        job = records.create_job(
            store,
            "ann",
            "k",
            {"activations.py": "x = 1\n"},
            ["activations.ReLU"],
            DEFAULT_COURSE,
            datetime.now(timezone.utc),
        ).job
        report = GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)])
        records.record_done(store, job, report, "v")
        store.record_report(GradeReport("ann", [ExerciseResult("activations.ReLU", "failed", 2.0, 10.0)]), "v")
        built = class_report.build(store, ["activations.ReLU"], [])
        detail = dashboard.student_detail(store, built, "ann")
    assert detail is not None
    assert [a.label for a in detail.attempts] == ["Upload 2", f"Submission {job['id']}"]


def test_a_quiz_never_started_is_the_dash_alone(cls: ClassServer) -> None:
    report = cls.report()
    quiz_group = {c: -1 for c, _ in report.chapters}
    for student in report.students:
        for chapter, _ in report.chapters:
            if not student.quizzes[chapter].attempts:
                cells = str(dashboard_html.grid_cells(report, student, quiz_group))
                cell = re.search(
                    rf'<td class="c b-none[^"]*" title="Quiz {re.escape(chapter)}: not started[^"]*">(.*?)</td>', cells
                )
                assert cell is not None and cell.group(1) == '<span class="sr-only">not started</span>'  # no "-0/16"
                return
    pytest.skip("every generated student started every quiz")


def test_an_override_counts_in_the_students_progress_as_on_the_dashboard(cls: ClassServer) -> None:
    """One counted score: the server's /progress (what `grade progress` prints) applies the overrides."""
    report = cls.report()
    with_override = [(s, ex) for s in report.students for ex, c in s.exercises.items() if c.override is not None]
    assert with_override, "the generated class has overrides"
    student, exercise = with_override[0]
    answer = httpx.get(f"{cls.url}/api/v1/students/{student.name}/progress", headers=cls.teacher, timeout=60)
    doc = answer.json()
    scores = {e["id"]: e["best_score"] for c in doc["chapters"] for e in c["exercises"]}
    assert scores[exercise] == student.exercises[exercise].best_score
    assert doc["overrides"][exercise]["score"] == student.exercises[exercise].override
    exercises_total = sum(c.best_score for c in student.exercises.values())
    assert abs(doc["score"] - exercises_total) < 1e-6


# --- the grid says what each student is stuck on (issue 37) -------------------------------------------


def cells_by_exercise(cells: str) -> dict[str, str]:
    """The grid cells of one student by the exercise their hover names."""
    found = re.findall(r'(<td class="[^"]*" title="([a-zA-Z_.]+):[^"]*">.*?</td>)', cells)
    return {exercise: cell for cell, exercise in found}


def test_a_cell_says_the_named_mistake_and_looks_different_for_a_stub_a_crash_and_a_wrong_answer(
    tmp_path: Path,
) -> None:
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport

    wrong = CheckResult("backward", False, 0.0, 4.0, "dx differs", "tanh-grad-not-squared")
    report = GradeReport(
        "ann",
        [
            ExerciseResult("activations.ReLU", "not_implemented", 0.0, 10.0, [], "NotImplementedError: forward"),
            ExerciseResult("activations.GELU", "error", 0.0, 10.0, [], "activations.py line 3: SyntaxError"),
            ExerciseResult("activations.Sigmoid", "timeout", 0.0, 10.0, [], "timed out after 10 s"),
            ExerciseResult("activations.Tanh", "failed", 6.0, 10.0, [CheckResult("forward", True, 6.0, 6.0), wrong]),
            ExerciseResult("activations.ELU", "failed", 0.0, 10.0, [CheckResult("forward", False, 0.0, 10.0, "y")]),
            ExerciseResult("linear.Linear", "passed", 10.0, 10.0, [CheckResult("forward", True, 10.0, 10.0)]),
        ],
    )
    with Store.open(tmp_path / "c.db") as store:
        store.record_report(report, "v")
        built = class_report.build(store)
    row = built.student("ann")
    assert row is not None
    cells = cells_by_exercise(str(dashboard_html.grid_cells(built, row, {})))
    stub, crash, slow, named, plain, right = (
        cells[e]
        for e in (
            "activations.ReLU",
            "activations.GELU",
            "activations.Sigmoid",
            "activations.Tanh",
            "activations.ELU",
            "linear.Linear",
        )
    )
    assert "s-todo" in stub and "not implemented yet" in stub and "s-crash" not in stub
    assert "s-crash" in crash and '<span aria-hidden="true">!</span>0' in crash and "crashed" in crash
    assert "s-crash" in slow and "ran out of time" in slow
    # the hover and the cell name the mistake: its id and sentence in the title, a diamond and its id in the text
    sentence = dashboard_html.mistake_sentence("tanh-grad-not-squared")
    assert sentence and f"named mistake tanh-grad-not-squared: {html.escape(sentence)}" in named
    assert "&#9670;" in named and '<span class="sr-only"> named mistake: tanh-grad-not-squared</span>' in named
    assert "s-todo" not in named and "s-crash" not in named and "latest upload" not in named
    # a wrong answer without a named mistake: the plain score, no mark; the two zeros do not look alike
    assert "&#9670;" not in plain and "s-" not in plain.split("title")[0] and ">0</td>" in plain
    assert stub.split('"')[1] != plain.split('"')[1] != crash.split('"')[1]
    assert "latest upload" not in right and "b-full" in right


def test_time_axes_show_the_time_of_day_within_a_day() -> None:
    start = datetime(2025, 12, 2, 9, 5, tzinfo=timezone.utc)
    within = class_charts.time_ticks(start, start.replace(hour=17, minute=40))
    labels = [text for _, text in within]
    assert labels[0] == "Dec 02 10:00" and all(re.fullmatch(r"\d\d:\d\d", t) for t in labels[1:])
    assert len(set(labels)) == len(labels) >= 3  # never "Dec 02 / Dec 02 / Dec 02"
    crossing = [text for _, text in class_charts.time_ticks(start, start.replace(day=3, hour=14))]
    assert any(t.startswith("Dec 03") for t in crossing) and any(t.startswith("Dec 02") for t in crossing)
    weeks = [text for _, text in class_charts.time_ticks(start, start.replace(day=30))]
    assert all(re.fullmatch(r"Dec \d\d", t) for t in weeks) and len(weeks) >= 3
    minutes = [text for _, text in class_charts.time_ticks(start, start.replace(minute=7))]
    assert len(set(minutes)) == len(minutes) >= 2
    # the chart: every label inside the picture, in order
    series = [(start, 2.0, "a"), (start.replace(hour=12), 5.0, "b"), (start.replace(hour=15), 9.0, "c")]
    chart = class_charts.line_chart(series, 10.0, "{:.0f}", "total", start.replace(hour=17))
    xs = [x for x, _, _ in chart.x_ticks]
    assert xs == sorted(xs) and chart.x_ticks[0][2] in ("start", "middle") and "UTC" in chart.label


def test_a_cell_of_an_exercise_the_graders_machine_could_not_grade_says_so(tmp_path: Path) -> None:
    """Nothing is recorded for not_graded (the store's rule); should a row say it (data recorded elsewhere), its
    cell says the grader's machine failed, not the student's code."""
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport

    with Store.open(tmp_path / "c.db") as store:
        store.record_report(
            GradeReport(
                "ann",
                [
                    ExerciseResult(
                        "kernels.relu_forward", "failed", 5.0, 10.0, [CheckResult("values", False, 0.0, 5.0, "y")]
                    )
                ],
            ),
            "v",
        )
        store.db.execute("UPDATE submissions SET status = 'not_graded'")
        store.db.conn.commit()
        built = class_report.build(store)
    row = built.student("ann")
    assert row is not None
    cell = cells_by_exercise(str(dashboard_html.grid_cells(built, row, {})))["kernels.relu_forward"]
    assert "s-ng" in cell and '<span aria-hidden="true">?</span>' in cell
    assert (
        "the grader&#39;s machine failed, not the student&#39;s code" in cell
        or "the grader's machine failed, not the student's code" in cell
    )
