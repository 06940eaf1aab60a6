"""The report kept after ``grade submit`` and its web page: what ``grade view`` opens.

Local and remote ``grade submit`` (:mod:`grader.student.cli`,
:mod:`grader.student.client.remote`), ``grade view`` and the notebook's
``%grade`` keep the last report the same way: its wire form (figures
included, :mod:`grader.student.client.wire`) in ``.grade/last-report.json``
beside the exercises folder, and the page (``--html FILE``, ``grade view``)
drawn by :mod:`grader.student.feedback.report_html`, which only this module's
:func:`write_html_report` loads (the text path draws nothing).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from grader.student.engine.model import GradeReport
from grader.student.errors import UsageError
from grader.student.feedback.report import write_json, write_text

LAST_REPORT = "last-report.json"


def last_report_path(exercises_dir: Path) -> Path:
    """Where ``grade submit`` keeps its last report for ``grade view``: ``.grade/last-report.json`` beside
    exercises/."""
    return Path(exercises_dir).resolve().parent / ".grade" / LAST_REPORT


def save_last_report(report: GradeReport, exercises_dir: Path, late_shares: Mapping[str, float] | None = None) -> None:
    """Keep the report (wire form, figures included) for ``grade view``, with the late shares the course server
    said (``late_shares``: so the page counts the total as the terminal did); a write problem is a warning line."""
    from grader.student.client.wire import report_to_dict

    try:
        write_json({**report_to_dict(report), "late_shares": dict(late_shares or {})}, last_report_path(exercises_dir))
    except OSError as exc:
        click.echo(f"Warning: the report was not kept for `grade view`: {exc}", err=True)


def kept_late_shares(document: Mapping[str, Any]) -> dict[str, float]:
    """The late shares kept beside a report by :func:`save_last_report` ({} where none were)."""
    shares = document.get("late_shares")
    return {str(k): float(v) for k, v in shares.items()} if isinstance(shares, dict) else {}


def text_href(page: Path, exercises_dir: Path | None) -> str:
    """Where the course text's pages are, seen from a report page written to ``page``: the ``text/`` folder beside
    the exercises folder (the handout's), as a relative link; without ``exercises_dir``, ``../text/`` (the page in
    ``.grade/``)."""
    from grader.student.feedback.report_html import TEXT_HREF

    if exercises_dir is None:
        return TEXT_HREF
    text = Path(exercises_dir).resolve().parent / "text"
    return Path(os.path.relpath(text, Path(page).resolve().parent)).as_posix() + "/"


def write_html_report(
    report: GradeReport, path: Path, late_shares: Mapping[str, float] | None = None, exercises_dir: Path | None = None
) -> None:
    """Write the report's web page to ``path`` (its total counted with ``late_shares``, as the text report), its
    links to the course text's sections relative to ``path`` (:func:`text_href`); UsageError (one line, exit 2)
    when it cannot be written."""
    from grader.student.feedback.report_html import format_html

    try:
        write_text(format_html(report, late_shares=late_shares, text_href=text_href(path, exercises_dir)), path)
    except OSError as exc:
        raise UsageError(
            f"cannot write the web page to '{path}': {exc.strerror or exc}: choose another --html FILE"
        ) from None
    click.echo(f"Report page written to {path.resolve()} (open it in a browser).", err=True)
