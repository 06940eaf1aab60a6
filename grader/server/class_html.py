"""``grade report --format html``: the dashboard's pages in one self-contained file.

The class report's data and exports (grader/term/class_report.py) and the
dashboard's views (grader/server/dashboard.py, drawn by dashboard_html.py) share one direction of import:
the views read the report's data; the report never imports the views. This
module, above both, puts them together for the offline file, so neither needs
the other (no cycle).
"""

from __future__ import annotations

from grader.term.class_report import ClassReport
from grader.server.dashboard_html import offline_html
from grader.student.store import Store


def format_html(report: ClassReport, store: Store | None = None, title: str = "normgrade class report") -> str:
    """The self-contained HTML report: the dashboard's pages in one file (inline CSS, SVG and a little
    script for sorting and filtering; no external resource), shown one page at a time through its own
    anchors. With ``store``, each exercise's and each student's page is included (the students' with the
    report of their latest upload)."""
    return offline_html(report, store, title)
