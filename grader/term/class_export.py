"""The class report's CSV, JSON and gradebook exports (grader/term/class_report.py): text written from a
:class:`ClassReport` (grader/term/class_model.py)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any


from grader.student.sanitize import csv_cell

from grader.student.course import parse_time
from grader.term import standing
from grader.student.feedback.report import round_score
from grader.term.class_model import ClassReport, StudentRow

# --- CSV and JSON ------------------------------------------------------------------------------


def _number(value: float) -> str:
    """A score for a spreadsheet: at most 4 decimals, no trailing zeros (9.5, 10, 4.3333), rounded as
    every view rounds (``report.round_score``: half up, float noise ignored)."""
    return round_score(value, 4)


def csv_header(report: ClassReport) -> list[str]:
    """student, total, one column per exercise id, one ``quiz:<chapter>`` per quiz chapter."""
    return ["student", "total"] + list(report.exercise_ids) + [f"quiz:{c}" for c, _ in report.chapters]


def _write_csv(rows: list[list[Any]]) -> str:
    """CSV text of ``rows`` with every text cell neutralised (``grader.student.sanitize.csv_cell``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in rows:
        writer.writerow([csv_cell(cell) for cell in row])
    return buffer.getvalue()


def format_csv(report: ClassReport) -> str:
    """One row per student: total, best score per exercise (empty: never graded), quiz chapter complete 1/0.

    Every text cell a spreadsheet would run as a formula (a student id such as
    ``=HYPERLINK(...)``) is neutralised. An instructor's override counts.
    """
    rows: list[list[Any]] = [csv_header(report)]
    for s in report.students:
        row = [s.name, _number(s.total)]
        for ex in report.exercise_ids:
            cell = s.exercises[ex]
            row.append(_number(cell.best_score) if cell.scored else "")
        for chapter, _ in report.chapters:
            row.append("1" if s.quizzes[chapter].complete else "0")
        rows.append(row)
    return _write_csv(rows)


@dataclass
class GradebookColumn:
    """One assignment group of a gradebook export: its title, points possible, and each student's points."""

    title: str
    points_possible: float
    points: dict[str, float]  # student -> points earned


def held_groups(report: ClassReport) -> set[str]:
    """The exercise groups whose scores no gradebook export may carry yet: the exam chapters held at the report's
    time (grader/term/standing.py ``visible_chapters``, the LTI passback's rule), until their release."""
    shown = standing.visible_chapters(report.course, parse_time(report.generated_at))
    return {c.name for c in report.course.chapters} - shown


def gradebook_columns(report: ClassReport, released: bool = False) -> list[GradebookColumn]:
    """One column per assignment group: each exercise group (a course chapter), then each quiz chapter.

    An exercise group's points are the counted scores of its exercises (the
    instructor's override where there is one); a quiz chapter's are the points
    of the questions answered right. ``released``: without the groups held by exam mode (:func:`held_groups`),
    as the CSV exports for the LMS leave them out until the feedback release.
    """
    held = held_groups(report) if released else set()
    columns = [
        GradebookColumn(
            f"Exercises: {g.name}",
            sum(report.exercises[report.exercise_ids.index(e)].max_score for e in g.exercise_ids),
            {s.name: g.score(s) for s in report.students},
        )
        for g in report.groups
        if g.name not in held
    ]
    for quiz in report.quizzes:
        columns.append(
            GradebookColumn(
                f"Quiz: {quiz.title or quiz.chapter}",
                sum(q.points for q in quiz.questions),
                {s.name: s.quiz_points.get(quiz.chapter, 0.0) for s in report.students},
            )
        )
    return columns


def released_percent(report: ClassReport, student: StudentRow) -> float:
    """A student's exercise percent over the groups an export may carry (:func:`held_groups` left out)."""
    held = held_groups(report)
    return student.group_percent([e for g in report.groups if g.name not in held for e in g.exercise_ids])


def _override_notes(report: ClassReport, student: str) -> str:
    """The overrides in force for a student, as one cell: ``exercise = score (comment)``, joined by ``; ``."""
    cells = report.student(student)
    if cells is None:
        return ""
    return "; ".join(
        f"{ex} = {_number(c.override)} ({' '.join(c.override_comment.split())})"
        for ex, c in cells.exercises.items()
        if c.override is not None
    )


def format_canvas(report: ClassReport) -> str:
    """A Canvas gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, one column per
    assignment group, then Final Score (the percent, a read-only column Canvas ignores on import).

    The second row is Canvas's ``Points Possible`` row. The roster id is the
    SIS User ID, which Canvas matches students on; ID (Canvas's own number) is
    left empty. Every text cell is neutralised.
    """
    columns = gradebook_columns(report, released=True)
    rows: list[list[Any]] = [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + [c.title for c in columns] + ["Final Score"]
    ]
    rows.append(["Points Possible", "", "", "", ""] + [_number(c.points_possible) for c in columns] + ["(read only)"])
    for s in report.students:
        rows.append(
            [s.label, "", s.name, s.email, ""]
            + [_number(c.points[s.name]) for c in columns]
            + [f"{released_percent(report, s):.2f}"]
        )
    return _write_csv(rows)


def format_moodle(report: ClassReport) -> str:
    """A Moodle gradebook import ("CSV file" import; map ID number to the user's ID number): ID number,
    Email address, Full name, one column per assignment group, Percent, and Override notes (the instructor's
    overrides with their comments). Every text cell is neutralised.

    A Moodle CSV import has no row for points possible: a column mapped to a new grade item gets Moodle's
    default maximum grade, 100. So each group's column is its **percent** (points earned / points possible x
    100, the header says of how many points, "Exercises: activations (% of 80 points)"), right in such an item
    whatever the group's points; weight the items in Moodle's gradebook setup as the points say.
    """
    columns = gradebook_columns(report, released=True)
    rows: list[list[Any]] = [
        ["ID number", "Email address", "Full name"]
        + [f"{c.title} (% of {_number(c.points_possible)} points)" for c in columns]
        + ["Percent", "Override notes"]
    ]
    for s in report.students:
        rows.append(
            [s.name, s.email, s.label]
            + [
                _number(round(100 * c.points[s.name] / c.points_possible, 2)) if c.points_possible else "0"
                for c in columns
            ]
            + [f"{released_percent(report, s):.2f}", _override_notes(report, s.name)]
        )
    return _write_csv(rows)


def gradebook_warnings(report: ClassReport, course_given: bool) -> list[str]:
    """What a gradebook export of ``report`` cannot know, one line each (``grade report`` prints them): students
    with no e-mail or name (a ``grade batch`` database names students by folder, so the LMS can match only ids
    equal to the folder names), and no course file (no due dates: late work counts in full)."""
    out = []
    unnamed = [s.name for s in report.students if not s.email]
    if unnamed:
        out.append(
            f"{len(unnamed)} of {len(report.students)} students have no name or e-mail here (e.g. "
            f"'{unnamed[0][:40]}'): Canvas matches its SIS User ID column and Moodle its ID number to these "
            "ids (a `grade batch` database names students by folder); pass --roster ROSTER.csv (id,name,email)"
        )
    if not course_given:
        out.append(
            "no --course: no due dates or late penalties apply, so late work counts in full; pass --course "
            "course.toml for the course's rules"
        )
    return out


def format_json(report: ClassReport, indent: int | None = 2) -> str:
    """The whole report as one JSON document (``indent=None``: compact, as the server sends it)."""
    separators = (",", ": ") if indent else (",", ":")
    return json.dumps(report.to_json(), indent=indent, separators=separators, ensure_ascii=False)
