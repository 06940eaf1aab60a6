"""A GradeReport as a plain dict and back, for the queue and the HTTP API.

``GradeReport.to_json`` is the contract's ``--json`` document; it leaves out
what the human report also shows (an exercise's message, duration and
captured output). A remote ``grade submit`` must print the very report that
local grading prints, so the worker, the server and the client exchange the
full report in this form: strict JSON (str, finite float, bool, None, lists,
dicts), inf and NaN in a figure kept in the marked form of
:mod:`grader.student.jsonsafe` and restored by :func:`report_from_dict`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from grader.student import jsonsafe
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport


def report_to_dict(report: GradeReport, instructor: bool = False) -> dict[str, Any]:
    """Every field of the report (``dataclasses.asdict``) but the checks' ``instructor_figure`` (the hidden checks'
    expected values), which only ``instructor=True`` keeps: the worker's result on its way to the server's store.
    Strict JSON: non-finite floats marked, NumPy values made plain (:func:`grader.student.jsonsafe.plain`)."""
    doc = jsonsafe.plain(asdict(report))
    if not instructor:
        for ex in doc["exercises"]:
            for check in ex["checks"]:
                check.pop("instructor_figure", None)
    return doc


def report_from_dict(doc: dict[str, Any]) -> GradeReport:
    """The inverse of :func:`report_to_dict`; KeyError/TypeError on a malformed document."""
    doc = jsonsafe.restore(doc)
    exercises = []
    for ex in doc["exercises"]:
        checks = [
            CheckResult(
                str(c["name"]),
                bool(c["passed"]),
                float(c["score"]),
                float(c["max_score"]),
                str(c.get("message") or ""),
                c.get("misconception"),
                figure_of(c),
                [str(a) for a in c.get("also") or []],
                figure_of(c, "instructor_figure"),
                where_of(c),
            )
            for c in ex.get("checks", [])
        ]
        exercises.append(
            ExerciseResult(
                str(ex["id"]),
                str(ex["status"]),
                float(ex["score"]),
                float(ex["max_score"]),
                checks,
                str(ex.get("message") or ""),
                float(ex.get("duration") or 0.0),
                str(ex.get("output") or ""),
            )
        )
    return GradeReport(str(doc["student"]), exercises, str(doc.get("files_hash") or ""))


def figure_of(check: dict[str, Any], name: str = "figure") -> dict[str, Any] | None:
    """A check's figure (a dict, or None when absent: documents from before figures have none)."""
    figure = check.get(name)
    return figure if isinstance(figure, dict) else None


def where_of(check: dict[str, Any]) -> dict[str, Any] | None:
    """A check's location (``{"file", "line", "code"}``), or None when absent or malformed."""
    where = check.get("where")
    if not isinstance(where, dict) or not isinstance(where.get("line"), int):
        return None
    return {"file": str(where.get("file") or ""), "line": where["line"], "code": str(where.get("code") or "")}
