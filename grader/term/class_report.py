"""Class reports for the instructor, built from the progress database only.

``build(store, exercise_ids, quizzes)`` reads every student's best scores,
quiz answers and diagnosed mistakes into a :class:`ClassReport`, which is then
written as

- HTML: not here. ``grader.server.class_html.format_html`` renders the dashboard's
  views (grader/server/dashboard.py, which reads this module's data) into one
  self-contained file; this module imports neither;
- CSV (:func:`format_csv`): one row per student: student, total, one column per
  exercise (best score, empty when never graded) and one per quiz chapter
  (``quiz:<chapter>``: 1 when complete, else 0), ready for a gradebook;
- JSON (:func:`format_json`): the same data, structured.

Definitions. A student's total is the sum over the course's exercises of the
best score recorded (0 when never graded); percent = 100 * total / the sum of
max scores. An exercise is *passed* by a student whose best score reaches its
max score; its pass rate is passed students / all students. A mistake's count
is the number of students with at least one graded check diagnosed as it.
An item's difficulty is the fraction of students whose *first* answer to it
was correct (lower is harder).

The report is three modules by concern, all re-exported here: class_model.py (the dataclasses, :func:`build`,
the quiz items' statistics), class_export.py (CSV, JSON and the gradebooks) and class_charts.py (the HTML
charts, the template filters and the one jinja2 environment).
"""

from __future__ import annotations

from grader import quiz as quiz_lib  # (re-exported: the tests build quizzes as class_report.quiz_lib)
from grader.student.course import Course  # (re-exported: the tests annotate with class_report.Course)
from grader.term.class_model import (
    HISTOGRAM_BINS,
    TEMPLATE,
    ExerciseCell,
    StudentRow,
    MistakeCount,
    ExerciseStats,
    ItemStats,
    Bin,
    Group,
    ClassReport,
    _mistake_texts,
    exercise_groups,
    overrides_in_force,
    _late_flags,
    build,
    quiz_standings,
    DISCRIMINATION_GROUP,
    DISCRIMINATION_MIN,
    _answer_text,
    discrimination,
    item_stats,
)
from grader.term.class_export import (
    _number,
    csv_header,
    _write_csv,
    format_csv,
    GradebookColumn,
    held_groups,
    gradebook_columns,
    released_percent,
    _override_notes,
    format_canvas,
    format_moodle,
    gradebook_warnings,
    format_json,
)
from grader.term.class_charts import (
    Bar,
    Chart,
    histogram_chart,
    pass_rate_chart,
    band,
    _when,
    _day,
    environment,
    status_label,
)

__all__ = [
    "quiz_lib",
    "Course",
    "HISTOGRAM_BINS",
    "TEMPLATE",
    "ExerciseCell",
    "StudentRow",
    "MistakeCount",
    "ExerciseStats",
    "ItemStats",
    "Bin",
    "Group",
    "ClassReport",
    "_mistake_texts",
    "exercise_groups",
    "overrides_in_force",
    "_late_flags",
    "build",
    "quiz_standings",
    "DISCRIMINATION_GROUP",
    "DISCRIMINATION_MIN",
    "_answer_text",
    "discrimination",
    "item_stats",
    "_number",
    "csv_header",
    "_write_csv",
    "format_csv",
    "GradebookColumn",
    "held_groups",
    "gradebook_columns",
    "released_percent",
    "_override_notes",
    "format_canvas",
    "format_moodle",
    "gradebook_warnings",
    "format_json",
    "Bar",
    "Chart",
    "histogram_chart",
    "pass_rate_chart",
    "band",
    "_when",
    "_day",
    "environment",
    "status_label",
]
