"""Reports of one graded submission: the human text, the ``--json`` document, Gradescope's results.json.

The human report puts the hint first (otter buried it under tracebacks):
one line per exercise, then for each failing check the diagnosis (the known
mistake the output matches and its fix), then where the first significant
difference is, received and expected. Class reports built from the store
live in ``grader/term/class_report.py`` and reuse :func:`format_score` and
:data:`STATUS_LABELS`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import IO, Any

import click

from grader.student import jsonsafe
from grader.student import standing
from grader.student.sanitize import clean_text
from grader.student import practice_schedule
from grader.student.coursetext import read_line
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport

# status -> (label, colour): the label is the status word of the JSON and the README, in capitals,
# one word per status; it is never "PASSED" unless the marks are full
STATUS_LABELS: dict[str, tuple[str, str]] = {
    "passed": ("PASSED", "green"),
    "failed": ("FAILED", "red"),
    "not_implemented": ("NOT_IMPLEMENTED", "yellow"),
    "error": ("ERROR", "red"),
    "timeout": ("TIMEOUT", "red"),
    # the grader's machine failed (no OpenCL device, no sandbox): no verdict, no score
    "not_graded": ("NOT_GRADED", "magenta"),
    # exam mode only (grader/term/standing.py): the course hides feedback until its release time
    "graded": ("GRADED", "cyan"),
    "received": ("RECEIVED", "cyan"),
}
OUTPUT_EXCERPT_LINES = 8
OUTPUT_EXCERPT_CHARS = 600
LABEL_WIDTH = max(len(label) for label, _ in STATUS_LABELS.values()) + 2


def use_color(stream: IO[str] | None = None) -> bool:
    """Colour only when ``stream`` (default stdout) is a terminal and NO_COLOR is unset."""
    if "NO_COLOR" in os.environ:
        return False
    stream = stream if stream is not None else sys.stdout
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def round_score(value: float, places: int = 2) -> str:
    """THE rounding of a score for display: half up on its decimal value, float noise ignored.

    ``5.75 * 0.7`` is 4.0249999999999995 and ``5.75 - 5.75 * 0.3`` is
    4.025000000000000355: both are 4.025, shown 4.03, in every view (the
    student's report and progress, the dashboard, the exports). Trailing
    zeros are dropped: 6.0 -> '6', 6.50 -> '6.5'.
    """
    exact = Decimal(repr(round(float(value), 9)))
    text = f"{exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text


def format_score(value: float) -> str:
    """6.0 -> '6', 6.5 -> '6.5', 6.25 -> '6.25', 4.025 -> '4.03' (at most two decimals, :func:`round_score`)."""
    return round_score(value, 2)


def status_style(status: str | None) -> tuple[str, str]:
    """(label, colour) of a status; an unknown one in capitals and red, ('-', 'white') when never graded."""
    if status is None:
        return "-", "white"
    return STATUS_LABELS.get(status, (status.upper(), "red"))


def exercise_label(ex: ExerciseResult) -> tuple[str, str]:
    """(label, colour) for an exercise; 'passed' with missing marks shows as FAIL."""
    status = ex.status
    if status == "passed" and ex.score < ex.max_score:
        status = "failed"
    return status_style(status)


DIAGNOSIS_PREFIXES = ("Known mistake ", "Likely mistake", "Fix: ")


def diagnosis_lines(check: CheckResult) -> list[str]:
    """The known mistake behind a failing check, in words: '<sentence> (id)' and 'Fix: ...'.

    Below the ``guided`` scaffolding level the exercise's stub was released at,
    the mistake's hint (else its sentence) and no fix (:meth:`KnownMistake.said`).

    Looked up in ``grader.mistakes.CATALOGUE`` when it exists; nothing is
    added when the check's own message already carries the sentence.
    """
    if not check.misconception:
        return []
    entry = mistake_entry(check.misconception)
    if entry is None:
        if check.misconception in check.message:
            return []
        return [f"Likely mistake: {check.misconception}."]
    sentence, fix = (part.strip() for part in entry.said())  # below guided: the hint, no fix
    if sentence and sentence in check.message:
        return []
    lines = [
        f"Likely mistake ({check.misconception}): {sentence}" if sentence else f"Likely mistake: {check.misconception}."
    ]
    if fix and fix not in check.message:
        lines.append(f"Fix: {fix}")
    return lines


def mistake_entry(misconception: str) -> Any:
    """The known mistake with this id (registered by the mistake catalogue or a case pack), or None."""
    from grader.student.engine.diagnosis import known_mistake  # (NumPy): only when a mistake is shown

    return known_mistake(misconception)


def output_excerpt(output: str) -> list[str]:
    """The last OUTPUT_EXCERPT_LINES lines (at most OUTPUT_EXCERPT_CHARS characters) of captured output."""
    text = output.rstrip()
    if not text:
        return []
    lines = text.splitlines()
    tail = lines[-OUTPUT_EXCERPT_LINES:]
    excerpt = "\n".join(tail)
    if len(excerpt) > OUTPUT_EXCERPT_CHARS:
        excerpt = "..." + excerpt[-OUTPUT_EXCERPT_CHARS:]
    elif len(tail) < len(lines):
        excerpt = "...\n" + excerpt
    return excerpt.splitlines()


TRACEBACK_FRAME = '  File "'
SAME_TRACEBACK = "(the same traceback as above)"


def once_per_traceback(lines: list[str], seen: set[tuple[str, ...]]) -> list[str]:
    """``lines`` with each traceback (a run of '  File "..."' frames and their code lines) kept the first
    time it appears in ``seen`` and replaced by one short line after that."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith(TRACEBACK_FRAME):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and (lines[j].startswith(TRACEBACK_FRAME) or lines[j].startswith("    ")):
            j += 1
        block = tuple(lines[i:j])
        if block in seen:
            out.append(SAME_TRACEBACK)
        else:
            seen.add(block)
            out.extend(block)
        i = j
    return out


# The case a message was seen in, as the grader writes it before an exercise-level reason ("case 'main': ...").
CASE_PREFIX = re.compile(r"^case '[^'\n]*': ")
HEADLINE_CHARS = 120


def cause_key(message: str) -> str:
    """What a message says, without the case it was seen in: two messages with the same key state one cause
    (a kernel file that does not build, as an exercise's reason and as each of its checks' message)."""
    return CASE_PREFIX.sub("", message.strip(), count=1)


def headline(message: str) -> str:
    """The first line of a message's cause, cut to HEADLINE_CHARS: how a cause is named where it is not repeated."""
    first = next((line.strip() for line in cause_key(message).splitlines() if line.strip()), "")
    for tail in ("; the compiler says:", ":"):
        if first.endswith(tail):
            first = first[: -len(tail)]
    return first if len(first) <= HEADLINE_CHARS else first[: HEADLINE_CHARS - 3] + "..."


@dataclass
class Cause:
    """One message that several exercises share (their own reason or a failing check's): shown once."""

    key: str
    text: str
    exercises: list[str] = field(default_factory=list)
    checks: dict[str, list[str]] = field(default_factory=dict)  # exercise id -> the checks that say it

    @property
    def headline(self) -> str:
        return headline(self.text)

    def check_names(self) -> list[str]:
        """The names of the checks that say it, each once, in the order they appear."""
        return list(dict.fromkeys(n for ex in self.exercises for n in self.checks.get(ex, [])))

    def places(self) -> str:
        """'kernels.relu_forward, kernels.relu_backward, and their checks values, zeros': where the cause shows."""
        names = self.check_names()
        return ", ".join(self.exercises) + (f", and their checks {', '.join(names)}" if names else "")


def messages_of(ex: ExerciseResult) -> list[tuple[str | None, str]]:
    """(check name or None for the exercise's own reason, message) of what a report says about ``ex``."""
    found: list[tuple[str | None, str]] = [(None, ex.message)] if ex.message.strip() else []
    if ex.status != "not_implemented":
        found += [(c.name, c.message) for c in ex.checks if not c.passed and c.message.strip()]
    return found


def shared_causes(report: GradeReport) -> dict[str, Cause]:
    """The messages (by :func:`cause_key`) that two or more of the report's exercises short of full marks share,
    in report order: each is said in full once, and pointed at from the others."""
    causes: dict[str, Cause] = {}
    for ex in report.exercises:
        if exercise_label(ex)[0] == STATUS_LABELS["passed"][0] or ex.feedback_held:
            continue
        for name, message in messages_of(ex):
            cause = causes.setdefault(cause_key(message), Cause(cause_key(message), cause_key(message)))
            if ex.id not in cause.exercises:
                cause.exercises.append(ex.id)
            if name is not None:
                cause.checks.setdefault(ex.id, []).append(name)
    return {key: cause for key, cause in causes.items() if len(cause.exercises) >= 2}


def check_groups(ex: ExerciseResult) -> list[list[CheckResult]]:
    """The failing checks of ``ex``, those with the same message (and mistake) and no picture as one group, in
    the exercise's order: several checks failing for one reason are one entry."""
    groups: list[list[CheckResult]] = []
    by_key: dict[tuple[str, str | None], list[CheckResult]] = {}
    for check in ex.checks:
        if check.passed:
            continue
        if check.figure is not None:
            groups.append([check])
            continue
        key = (cause_key(check.message), check.misconception)
        if key in by_key:
            by_key[key].append(check)
        else:
            by_key[key] = [check]
            groups.append(by_key[key])
    return groups


def group_points(group: list[CheckResult]) -> str:
    """'0/8': the points of a group of checks together."""
    return f"{format_score(sum(c.score for c in group))}/{format_score(sum(c.max_score for c in group))}"


def group_heading(group: list[CheckResult]) -> str:
    """'values, zeros, small_n (0/8)': the checks of a group and their points together."""
    return f"{', '.join(c.name for c in group)} ({group_points(group)})"


def exercise_details(
    ex: ExerciseResult, causes: Mapping[str, Cause] | None = None, said: dict[str, str] | None = None
) -> list[str]:
    """What is wrong with one exercise, unindented: its message, failing checks, the student's output.

    A traceback shared by several checks (one crash seen by many) is printed
    once; checks failing with the same message are one entry. Given the
    report's shared ``causes`` and ``said`` (cause key -> the exercise that said
    it in full), a cause another exercise already said is one line pointing
    there, and the first to say it names every exercise it is behind. The tail
    of what the student's code printed closes every exercise that did not pass.
    """
    lines: list[str] = []
    seen: set[tuple[str, ...]] = set()
    own = cause_key(ex.message) if ex.message.strip() else None

    def text_of(message: str) -> list[str]:
        key = cause_key(message)
        where = (said or {}).get(key)
        if where is not None and where != ex.id:
            return [f"(the same cause as {where} above: {headline(message)})"]
        cause = (causes or {}).get(key)
        if cause is not None and said is not None and key not in said:
            said[key] = ex.id
            intro = f"One cause behind {len(cause.exercises)} exercises ({cause.places()}):"
            return [intro] + once_per_traceback(key.splitlines(), seen)
        return once_per_traceback(message.splitlines(), seen)

    if ex.message:
        lines.extend(text_of(ex.message))
    if ex.status != "not_implemented":
        diagnoses: list[str] = []  # each known mistake once, before any numbers
        details: list[str] = []
        for group in check_groups(ex):
            check = group[0]
            if own is not None and cause_key(check.message) == own:
                details.append(f"- {group_heading(group)}: the same cause as above")
                continue
            details.append(f"- {group_heading(group)}")
            body = diagnosis_lines(check) + (text_of(check.message) if check.message.strip() else [])
            for line in body:
                if line.startswith(DIAGNOSIS_PREFIXES):
                    if line not in diagnoses:
                        diagnoses.append(line)
                else:
                    details.append("    " + line)
        lines.extend(diagnoses)
        lines.extend(details)
    if ex.status in ("failed", "error", "timeout"):
        reading = read_line(ex.id, (c.misconception for c in ex.checks if c.misconception))
        if reading:
            lines.append(reading)
        practice = practice_schedule.report_line(ex)
        if practice:
            lines.append(practice)
        excerpt = output_excerpt(ex.output)
        printed = "output\0" + "\n".join(excerpt)
        if excerpt and said is not None and printed in said:
            lines.append(f"What your code printed: the same as for {said[printed]} above.")
        elif excerpt:
            if said is not None:
                said[printed] = ex.id
            lines.append("What your code printed (last lines):")
            lines.extend("    " + line for line in excerpt)
    return lines


def late_note(share: float) -> str:
    """The note beside a late score: what the course counts of it ("late: counts 70%")."""
    return f"late: counts {100.0 * share:g}%"


def counted_total(report: GradeReport, late_shares: Mapping[str, float]) -> float:
    """The report's total as the course counts it: each late exercise's score times its share."""
    return standing.totals(report, late_shares).counted


def total_line(report: GradeReport, late_shares: Mapping[str, float] | None = None) -> str:
    """THE total line of every report (text, HTML, notebook): the counted total of :func:`standing.totals`.

    A report covers one upload, so its line says so: "This upload: 74/90 (82.2%) counted (90/90 as graded, late
    work penalised), 8 of 9 exercises at full marks" (its maximum: the exercises it graded); `grade progress`
    totals the course ("Course: ..." over every exercise, grader/student/feedback/progress.py). Held exercises
    (exam mode) are in neither number and are said once: "; 2 exercises received and graded: ... held".
    """
    t = standing.totals(report, late_shares)
    if t.held and not t.shown:
        return (
            f"This upload: none shown yet; {t.held} exercise{'s' if t.held != 1 else ''} received and graded: "
            "score and feedback held until the feedback release (exam mode)"
        )
    line = f"This upload: {format_score(t.counted)}/{format_score(t.maximum)} ({t.percent:.1f}%)"
    if abs(t.counted - t.graded) > 1e-9:
        line += f" counted ({format_score(t.graded)}/{format_score(t.maximum)} as graded, late work penalised)"
    line += f", {t.full} of {t.shown} exercises at full marks"
    if t.held:
        line += (
            f"; {t.held} exercise{'s' if t.held != 1 else ''} received and graded: score and feedback held "
            "until the feedback release (exam mode)"
        )
    return line


def score_text(ex: ExerciseResult) -> str:
    """An exercise's score as every report shows it: "7.5/10", "-/10" when not graded, "received, feedback at T"
    when exam mode holds it (its message says so: grader/term/standing.py), never "0/0"."""
    if ex.score_hidden:
        return ex.message or "received"
    if ex.feedback_held and ex.message:
        return f"{format_score(ex.score)}/{format_score(ex.max_score)} ({ex.message})"
    return f"{format_score(ex.score) if ex.graded else '-'}/{format_score(ex.max_score)}"


def format_text(report: GradeReport, color: bool = False, late_shares: Mapping[str, float] | None = None) -> str:
    """The human report: a line per exercise, details of what fails below it, a total line.

    ``late_shares``: exercise id -> the share of its score the course counts, for the exercises uploaded late
    (the course server's ``late`` list): "late: counts 70%" beside the score, and the total as counted
    ("This upload: 74/90 (82.2%) counted (90/90 as graded, late work penalised)"). Exercises whose score exam mode
    hides (``received``) are never "at full marks"; the total line says they wait for the feedback release.

    A message several exercises share (a kernel file that does not build, a
    grader's machine that cannot run them) is said in full once, where it first
    appears, and pointed at from the others.
    """
    notes = {ex_id: late_note(share) for ex_id, share in (late_shares or {}).items()}

    def style(text: str, **kwargs: Any) -> str:
        return click.style(text, **kwargs) if color else text

    if not report.exercises:
        return f"No exercises graded for {report.student}."
    width = max(len(ex.id) for ex in report.exercises)
    lines = [f"normgrade report for {clean_text(report.student)}"]
    lines.extend(f"  Note: {notice}" for notice in report.notices)
    causes = shared_causes(report)
    said: dict[str, str] = {}
    for ex in report.exercises:
        label, colour = exercise_label(ex)
        score = score_text(ex)
        note = f"  ({notes[ex.id]})" if ex.id in notes else ""
        lines.append(f"  {style(label.ljust(LABEL_WIDTH), fg=colour, bold=True)}{ex.id.ljust(width)}  {score:>7}{note}")
        if label != STATUS_LABELS["passed"][0] and not ex.feedback_held:
            lines.extend("        " + line if line else "" for line in exercise_details(ex, causes, said))
    total = total_line(report, late_shares)
    todo = sorted({ex.id.split(".")[0] for ex in report.exercises if ex.status == "not_implemented"})
    if todo:
        lines.append(
            f"NOT_IMPLEMENTED: {sum(ex.status == 'not_implemented' for ex in report.exercises)} exercise(s) still"
            " raise NotImplementedError: implement them in"
            f" {', '.join(t + ('/*.cl' if t == 'kernels' else '.py') for t in todo)}."
        )
    if report.not_graded:
        lines.append(not_graded_line(report))
    lines.append(style(total, bold=True))
    return "\n".join(lines)


def not_graded_line(report: GradeReport) -> str:
    """One line for the exercises the grader's machine could not grade (they count in no total)."""
    skipped = report.not_graded
    points = format_score(sum(ex.max_score for ex in skipped))
    return (
        f"NOT_GRADED: {len(skipped)} exercise(s) ({points} points) were not graded: the grader's machine is at"
        f" fault, not your work; they count in no total. {first_reason(skipped)}"
    )


def first_reason(exercises: list[ExerciseResult]) -> str:
    """The first line of the first exercise's message (what the grader lacks, naming `grade doctor`)."""
    for ex in exercises:
        for line in ex.message.splitlines():
            if line.strip():
                return line.strip()
    return "`grade doctor` shows what is missing."


def format_json(report: GradeReport, arrays: bool = False) -> str:
    """The ``--json`` document of the exercise contract (section 6); ``arrays`` adds each check's ``figure``."""
    return jsonsafe.dumps(report.to_json(arrays), indent=2)


def gradescope_results(report: GradeReport) -> dict[str, Any]:
    """Gradescope's autograder results.json: one test per exercise, visible to the student.

    Format: https://gradescope-autograders.readthedocs.io/en/latest/specs/
    (top-level score, output, visibility, stdout_visibility, execution_time;
    tests with name, score, max_score, status "passed"/"failed", output).
    A ``not_graded`` exercise (the autograder's machine failed) is a test with no score,
    so it is never a zero, tagged ``not_graded``: the output says that the instructor's rerun grades it.
    ``report`` is the one a student may see (:func:`grader.student.standing.as_seen`): a held exercise (exam mode)
    is a test with no score, tagged ``held``, saying "received, feedback at T"; the score is the standing's total.
    """
    tests = []
    for ex in report.exercises:
        label, _ = exercise_label(ex)
        if ex.score_hidden:  # exam mode (grader/student/standing.py): no score until the feedback release
            tests.append(
                {
                    "name": ex.id,
                    "max_score": ex.max_score,
                    "status": "failed",
                    "visibility": "visible",
                    "tags": ["held"],
                    "output": f"{label}: {ex.message}",
                }
            )
            continue
        if not ex.graded:
            tests.append(
                {
                    "name": ex.id,
                    "max_score": ex.max_score,
                    "status": "failed",
                    "visibility": "visible",
                    "tags": ["not_graded"],
                    "output": f"{label}: not graded ({ex.message}). Not your fault: it is graded when the"
                    " instructor reruns the autograder; you need not submit again.",
                }
            )
            continue
        head = f"{label}: {format_score(ex.score)}/{format_score(ex.max_score)}"
        output = "\n".join([head] + (exercise_details(ex) if label != STATUS_LABELS["passed"][0] else []))
        tests.append(
            {
                "name": ex.id,
                "score": round(ex.score, 6),
                "max_score": ex.max_score,
                "status": "passed" if ex.full_marks else "failed",
                "output": output,
                "visibility": "visible",
            }
        )
    return {
        "score": round(standing.totals(report).counted, 6),
        "execution_time": round(sum(ex.duration for ex in report.exercises)),
        "output": format_text(report, color=False),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def gradescope_error(reason: str) -> dict[str, Any]:
    """results.json for a submission that could not be graded at all: score 0 and the reason."""
    return {
        "score": 0.0,
        "output": f"Your submission could not be graded: {reason}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def write_gradescope_placeholder(path: Path) -> None:
    """A valid results.json saying grading did not finish, written before grading starts.

    Whatever happens to the grading (a kill, a crash), Gradescope then finds a
    results file; the real one replaces it at the end.
    """
    write_json(gradescope_error("grading did not finish (the autograder was stopped or crashed)"), path)


def write_text(text: str, path: Path) -> None:
    """Write UTF-8 text (parent folders created), atomically via a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_json(document: dict[str, Any], path: Path) -> None:
    """Write a document as strict JSON (parent folders created; inf and NaN marked, :mod:`grader.student.jsonsafe`),
    atomically via a temporary file."""
    write_text(jsonsafe.dumps(document, indent=2) + "\n", path)
