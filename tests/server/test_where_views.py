"""A failing check's location (``CheckResult.where``, issue 44) kept in the store and shown by every view: the
text report, the HTML report (the student's page draws it), the API's document and the dashboard's drill-down.
The code line is the student's own, escaped wherever HTML shows it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlite_utils

from grader.queue import records
from grader.server import dashboard
from grader.student.client.wire import report_from_dict, report_to_dict
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report import format_text
from grader.student.feedback.report_html import format_html
from grader.student.store import SCHEMA_VERSION, Store
from grader.term import class_report

BN = "normalization.BatchNorm1d"
CODE = "y = x * (x < 0) & <b>mask</b>"
WHERE = {
    "file": "normalization.py",
    "line": 57,
    "code": CODE,
    "words": "your value here is the first that leaves the reference's computation",
}


def _report(where: dict | None = WHERE) -> GradeReport:
    said = f"Where: normalization.py line 57: `{CODE}` — {WHERE['words']}\n" if where else ""
    failing = CheckResult(
        "forward", False, 0.0, 4.0, said + "y: first significant difference at index (0, 0)", where=where
    )
    return GradeReport(
        "ann", [ExerciseResult(BN, "failed", 6.0, 10.0, [CheckResult("shape", True, 6.0, 6.0), failing])]
    )


def _rebuilt(store: Store) -> GradeReport:
    rows = store.submissions("ann")
    return records.rebuild_report(store, "ann", rows, "")


def test_a_location_is_kept_by_the_store_and_rebuilt(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        store.record_report(_report(), "v")
        rows = store.check_results(store.submissions("ann")[0]["id"])
        assert [r["where"] for r in rows] == [None, {"file": "normalization.py", "line": 57, "code": CODE}]
        check = _rebuilt(store).exercises[0].checks[1]
    assert check.where == {"file": "normalization.py", "line": 57, "code": CODE}
    assert check.to_json()["where"] == {"file": "normalization.py", "line": 57, "code": CODE}


def test_a_check_located_nowhere_keeps_no_location(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        store.record_report(_report(where=None), "v")
        report = _rebuilt(store)
    check = report.exercises[0].checks[1]
    assert check.where is None and "where" not in check.to_json()
    assert 'class="ng-where"' not in format_html(report)


def test_an_older_database_gains_the_location_column_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "course.db"
    old = Store(sqlite_utils.Database(sqlite3.connect(path), execute_plugins=False), path)
    old.migrate(target=SCHEMA_VERSION - 1)
    old.record_report(_report(where=None), "v")
    old.close()
    with Store.open(path) as store:
        assert store.version == SCHEMA_VERSION
        store.record_report(_report(), "v")
        located = [r["where"] for s in store.submissions("ann") for r in store.check_results(s["id"])]
    assert located == [None, None, None, {"file": "normalization.py", "line": 57, "code": CODE}]


def test_the_text_and_html_reports_show_the_line_escaped(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        store.record_report(_report(), "v")
        report = _rebuilt(store)
    text = format_text(report)
    assert "normalization.py line 57" in text and CODE in text
    page = format_html(report)
    escaped = "y = x * (x &lt; 0) &amp; &lt;b&gt;mask&lt;/b&gt;"
    assert (
        f'<p class="ng-where">Where: <code>normalization.py:57</code> <code>{escaped}</code> — your value here' in page
    )
    assert "<b>mask" not in page and page.count("normalization.py:57") == 1
    assert page.count("leaves the reference&#x27;s computation") == 1  # the words once, not again in the message


def test_the_api_document_carries_the_location_to_the_students_page(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        store.record_report(_report(), "v")
        doc = report_to_dict(_rebuilt(store))
    shown = report_from_dict(doc)  # as the student's page and `grade submit` read the API's document
    assert shown.exercises[0].checks[1].where == {"file": "normalization.py", "line": 57, "code": CODE}
    assert "<code>normalization.py:57</code>" in format_html(shown, fragment=True)


def test_the_dashboards_drill_down_shows_the_line(tmp_path: Path) -> None:
    with Store.open(tmp_path / "course.db") as store:
        store.record_report(_report(), "v")
        built = class_report.build(store, [BN], [])
        detail = dashboard.student_detail(store, built, "ann")
    assert detail is not None
    assert f"normalization.py line 57: `{CODE}`" in detail.attempts[0].report_text
