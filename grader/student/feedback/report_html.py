"""The report as one self-contained HTML page: the text report's content, and a picture for each failing check.

``format_html(report)`` is what ``grade submit --html FILE`` writes, what
``grade view`` opens and what the notebook shows inline (``fragment=True``:
the body without ``<html>``/``<head>``, its styles scoped to ``.ng-report``).
Known mistakes come first (each with its fix), then every exercise that is
not at full marks with its failing checks: name, points, the message and the
picture (``grader.student.feedback.drawing``); exercises at full marks are listed in
the summary table only. Inline CSS and SVG, no script, no external resource:
the file can be mailed or opened offline.

Imported only where HTML is asked for: ``grade submit``'s text path loads
nothing of it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from grader.student import practice_schedule
from grader.student.coursetext import section_for, section_href
from grader.student.feedback import drawing
from grader.student.engine.model import WHERE_PREFIX, CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report import (
    STATUS_LABELS,
    Cause,
    cause_key,
    check_groups,
    diagnosis_lines,
    exercise_label,
    group_heading,
    group_points,
    once_per_traceback,
    output_excerpt,
    score_text,
    shared_causes,
    total_line,
)
from grader.student.sanitize import clean_text

# status colour -> (text colour, background): the label is always written out, colour only repeats it
# Where the course text's pages are, seen from a report page (.grade/last-report.html beside the handout's text/).
TEXT_HREF = "../text/"
LABEL_COLOURS = {
    "green": ("#0b5d1e", "#e3f4e8"),
    "red": ("#8a1c0c", "#fbe6e2"),
    "yellow": ("#6b5200", "#fdf3d0"),
    "white": ("#333", "#eee"),
}

CSS = (
    """
.ng-report{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;line-height:1.45;color:#1a1a1a;
  max-width:980px;margin:0 auto;padding:0 0.8em;overflow-wrap:break-word}
.ng-report h1{font-size:1.4em;margin:0.6em 0 0.2em}
.ng-report h2{font-size:1.15em;margin:1.4em 0 0.4em;border-bottom:1px solid #ddd;padding-bottom:0.2em}
.ng-report h3{font-size:1em;margin:1em 0 0.3em}
.ng-report .ng-total{font-weight:600}
.ng-report table{border-collapse:collapse;width:100%;max-width:640px}
.ng-report td,.ng-report th{text-align:left;padding:0.25em 0.6em;border-bottom:1px solid #eee}
.ng-report td.ng-num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ng-report .ng-label{display:inline-block;font-weight:700;font-size:0.85em;padding:0.05em 0.45em;border-radius:3px;
  white-space:nowrap}
.ng-report th{white-space:nowrap}
.ng-report td.ng-held{white-space:normal}
.ng-report td{overflow-wrap:break-word}
.ng-report .ng-cause{border:1px solid #e2c3b5;border-left:4px solid #D55E00;border-radius:6px;padding:0.4em 0.8em;
  margin:0.7em 0}
.ng-report pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:0.5em 0.7em;border-radius:4px;
  font-size:0.88em;margin:0.3em 0}
.ng-report .ng-mistakes{border-left:4px solid #D55E00;background:#fff6f0;padding:0.4em 0.9em;margin:0.8em 0}
.ng-report .ng-mistakes li{margin:0.35em 0}
.ng-report .ng-check{border:1px solid #e2e2e2;border-radius:6px;padding:0.4em 0.8em;margin:0.7em 0}
.ng-report .ng-note{color:#555}
.ng-report .ng-where code{background:#f6f6f6;padding:0.05em 0.3em;border-radius:3px;overflow-wrap:anywhere}
.ng-report a{color:#0b57a4}
"""
    + drawing.CSS
)


def esc(text: Any) -> str:
    return html.escape(clean_text(str(text)), quote=True)


def label_html(label: str, colour: str) -> str:
    fg, bg = LABEL_COLOURS.get(colour, LABEL_COLOURS["white"])
    return f'<span class="ng-label" style="color:{fg};background:{bg}">{esc(label)}</span>'


def name_html(name: str) -> str:
    """An exercise id that a narrow column may break after its dots, and nowhere else ("activations.<wbr>Sigmoid")."""
    return f'<span class="ng-id">{esc(name).replace(".", ".<wbr>")}</span>'


def places_html(cause: Cause) -> str:
    """Where a shared cause shows: its exercises by name, and their checks."""
    names = cause.check_names()
    return ", ".join(name_html(e) for e in cause.exercises) + (
        f", and their checks {esc(', '.join(names))}" if names else ""
    )


def anchor(ex: ExerciseResult, check: CheckResult | None = None) -> str:
    base = "ex-" + "".join(ch if ch.isalnum() else "-" for ch in ex.id)
    if check is None:
        return base
    return base + "-" + "".join(ch if ch.isalnum() else "-" for ch in check.name)


def known_mistakes(report: GradeReport) -> list[tuple[ExerciseResult, CheckResult, list[str]]]:
    """Each named mistake once, with the first check it explains and its lines (sentence, fix)."""
    seen: set[str] = set()
    found = []
    for ex in report.exercises:
        if ex.status == "not_implemented":
            continue
        for check in ex.checks:
            if check.passed or not check.misconception or check.misconception in seen:
                continue
            seen.add(check.misconception)
            said = check.message.splitlines()
            if check.where and said and said[0].startswith(WHERE_PREFIX):
                said = said[1:]  # the location's line (shown with the check) comes before the mistake's sentence
            lines = diagnosis_lines(check) or said[:1]  # the mistake's sentence and fix
            found.append((ex, check, lines))
    return found


class Page:
    """What the whole page shares: the causes several exercises state (one box each, by id) and the output
    excerpts already shown (by the exercise that showed them)."""

    def __init__(self, report: GradeReport, text_href: str = TEXT_HREF) -> None:
        self.text_href = text_href  # where the course text's pages are, from this page
        self.causes: dict[str, Cause] = shared_causes(report)
        self.ids = {key: f"cause-{k + 1}" for k, key in enumerate(self.causes)}
        self.outputs: dict[str, str] = {}

    def pointer(self, message: str) -> str | None:
        """A line pointing at the shared cause ``message`` states, or None when no other exercise states it."""
        key = cause_key(message)
        if key not in self.causes:
            return None
        cause = self.causes[key]
        return (
            f'<p class="ng-note">One cause behind {len(cause.exercises)} exercises: '
            f'<a href="#{self.ids[key]}">{esc(cause.headline)}</a> (said once, above).</p>'
        )


def causes_html(page: Page) -> str:
    """One box per cause that several exercises share, its whole text once."""
    if not page.causes:
        return ""
    boxes = "".join(
        f'<div class="ng-cause" id="{page.ids[key]}"><h3>{len(c.exercises)} exercises: {esc(c.headline)}</h3>'
        f'<p class="ng-note">{places_html(c)}</p><pre>{esc(c.text)}</pre></div>'
        for key, c in page.causes.items()
    )
    return (
        f'<section aria-label="Causes shared by several exercises"><h2>One cause, several exercises</h2>'
        f"{boxes}</section>"
    )


def check_html(ex: ExerciseResult, group: list[CheckResult], seen: set[tuple[str, ...]], page: Page) -> str:
    """A failing check (or several with one message): heading with points, the diagnosis and message as text (or
    a pointer to the shared cause it states), the picture."""
    check = group[0]
    pointer = page.pointer(check.message)
    message = check.message.splitlines()
    if check.where and message and message[0].startswith("Where:"):
        message = message[1:]  # (said by where_html, the location's own line)
    body = diagnosis_lines(check) + ([] if pointer else once_per_traceback(message, seen))
    parts = [
        f'<div class="ng-check" id="{anchor(ex, check)}"><h3>{esc(", ".join(c.name for c in group))} '
        f'<span class="ng-note">({group_points(group)})</span></h3>',
        where_html(check),
    ]
    if body:
        parts.append(f"<pre>{esc(chr(10).join(body))}</pre>")
    if pointer:
        parts.append(pointer)
    if check.figure:
        parts.append(drawing.figure_html(check.figure))
    parts.append("</div>")
    return "".join(parts)


def where_html(check: CheckResult) -> str:
    """The line of the student's own file where a failing check's computation leaves the reference's
    (``check.where``): file:line, the code line, and what was found there; "" when nothing was located."""
    if not check.where:
        return ""
    where = check.where
    first = check.message.splitlines()[0] if check.message else ""
    said = where.get("words") or (first.split(" — ", 1)[1] if first.startswith("Where:") and " — " in first else "")
    words = f" — {esc(said)}" if said else ""  # (a report rebuilt from the store: the words are the message's)
    return (
        f'<p class="ng-where">Where: <code>{esc(where.get("file", ""))}:{esc(where.get("line", ""))}</code> '
        f"<code>{esc(where.get('code', ''))}</code>{words}</p>"
    )


def exercise_html(ex: ExerciseResult, page: Page) -> str:
    label, colour = exercise_label(ex)
    parts = [
        f'<h2 id="{anchor(ex)}">{label_html(label, colour)} {name_html(ex.id)} '
        f'<span class="ng-note">{esc(score_text(ex))}</span></h2>'
    ]
    seen: set[tuple[str, ...]] = set()
    own = cause_key(ex.message) if ex.message.strip() else None
    if ex.message:
        parts.append(
            page.pointer(ex.message)
            or f"<pre>{esc(chr(10).join(once_per_traceback(ex.message.splitlines(), seen)))}</pre>"
        )
    if ex.status != "not_implemented":
        groups = check_groups(ex)
        same = [g for g in groups if own is not None and cause_key(g[0].message) == own and not g[0].figure]
        if same:
            names = [c for g in same for c in g]
            parts.append(f'<p class="ng-note">Checks {esc(group_heading(names))}: the same cause.</p>')
        # checks naming a known mistake first, then the others in the exercise's order
        for group in sorted((g for g in groups if g not in same), key=lambda g: g[0].misconception is None):
            parts.append(check_html(ex, group, seen, page))
    if ex.status in ("failed", "error", "timeout"):
        address = section_for(ex.id, (c.misconception for c in ex.checks if c.misconception))
        if address:
            parts.append(
                f'<p class="ng-note">Read <a href="{esc(section_href(address, page.text_href))}">'
                f"§{esc(address)}</a> in the course text.</p>"
            )
        offer = practice_schedule.report_offer(ex)
        if offer:
            parts.append(
                f'<p class="ng-note">Practice this (not graded, no attempts spent): {esc("; ".join(offer))}.'
                " Run <code>grade practice</code>.</p>"
            )
        excerpt = output_excerpt(ex.output)
        printed = "\n".join(excerpt)
        if excerpt and printed in page.outputs:
            parts.append(
                f'<p class="ng-note">What your code printed: the same as for '
                f"{name_html(page.outputs[printed])} above.</p>"
            )
        elif excerpt:
            page.outputs[printed] = ex.id
            parts.append(f'<p class="ng-note">What your code printed (last lines):</p><pre>{esc(printed)}</pre>')
    return "".join(parts)


def body_html(report: GradeReport, text_href: str = TEXT_HREF, late_shares: Mapping[str, float] | None = None) -> str:
    """The report's content (no <html>): title, total (the text report's :func:`total_line`), known mistakes,
    shared causes, the summary table, each exercise's details (none for an exercise exam mode holds);
    ``text_href``: where the course text's pages are (a failing exercise links to its section)."""
    if not report.exercises:
        return f'<div class="ng-report"><p>No exercises graded for {esc(report.student)}.</p></div>'
    parts = [
        '<div class="ng-report">',
        f"<h1>normgrade report for {esc(report.student)}</h1>",
        f'<p class="ng-total">{esc(total_line(report, late_shares))}</p>',
    ]
    parts.extend(f'<p class="ng-note">Note: {esc(n)}</p>' for n in report.notices)
    mistakes = known_mistakes(report)
    if mistakes:
        items = "".join(
            f'<li><a href="#{anchor(ex, check)}">{name_html(ex.id)}, {esc(check.name)}</a>: {esc(" ".join(lines))}</li>'
            for ex, check, lines in mistakes
        )
        parts.append(
            f'<section class="ng-mistakes" aria-label="Known mistakes"><h2>Known mistakes in your code'
            f"</h2><ul>{items}</ul></section>"
        )
    page = Page(report, text_href)
    parts.append(causes_html(page))
    rows = []
    for ex in report.exercises:
        label, colour = exercise_label(ex)
        name = (
            name_html(ex.id)
            if label == STATUS_LABELS["passed"][0]
            else f'<a href="#{anchor(ex)}">{name_html(ex.id)}</a>'
        )
        held = " ng-held" if ex.feedback_held else ""  # "received, feedback at T" wraps on a phone
        rows.append(
            f'<tr><td>{label_html(label, colour)}</td><td class="ng-name">{name}</td>'
            f'<td class="ng-num{held}">{esc(score_text(ex))}</td></tr>'
        )
    parts.append(
        '<table><thead><tr><th scope="col">Status</th><th scope="col">Exercise</th>'
        f'<th scope="col" class="ng-num">Score</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    todo = [ex for ex in report.exercises if ex.status == "not_implemented"]
    if todo:
        parts.append(f'<p class="ng-note">{len(todo)} exercise(s) still raise NotImplementedError.</p>')
    parts.extend(
        exercise_html(ex, page)
        for ex in report.exercises
        if exercise_label(ex)[0] != STATUS_LABELS["passed"][0] and not ex.feedback_held
    )
    parts.append("</div>")
    return "".join(parts)


def format_html(
    report: GradeReport,
    fragment: bool = False,
    text_href: str = TEXT_HREF,
    late_shares: Mapping[str, float] | None = None,
) -> str:
    """The whole page (``fragment``: a ``<style>`` and the body only, for a notebook cell or another page);
    ``text_href``: where the course text's pages are, seen from this page (a failing exercise links to its
    section); ``late_shares``: the server's late shares, so the total is the text report's."""
    body = body_html(report, text_href, late_shares)
    if fragment:
        return f"<style>{CSS}</style>{body}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>normgrade report for {esc(report.student)}</title><style>{CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )
