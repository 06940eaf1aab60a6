"""The Gradescope autograder's entry point: ``python -m grader.course.gradescope [--root /autograder]``.

Run by the bundle's ``run_autograder`` (``grade release``). It lays the upload
out as an exercises folder, grades it with the hidden checks (the student's own
seeds, the live reference: :func:`grader.course.grading.grade`), scores the quiz
answers file when the upload has one, and writes ``results/results.json``. A
valid results.json exists from the start ("grading did not finish") and every
failure ends in one (score 0 and the reason), never in a traceback alone.

The upload (``ROOT/submission``) is either an ``exercises/`` folder or the
exercise files at its top (``activations.py``..., ``*.cl`` files go to
``kernels/``); files it lacks (``base.py``, ``__init__.py``, untouched topics)
come from the stubs, so they score as not implemented. ``quiz-answers.toml``
(or ``.json``, written by the handout's ``grade quiz --student ID --save-answers``),
one table per chapter mapping question ids to answers, is judged against the
locked quizzes as posed for the submitter, with attempts counted across
submissions (:func:`quiz_tests`).

**Not graded.** An exercise the autograder's machine could not grade
(``not_graded``: no OpenCL device that builds a kernel in the image, a sandbox
that cannot start) is a test without a score, tagged ``not_graded``, whose
output says the instructor's rerun grades it; the top-level output begins with
one line saying so, ``extra_data.normgrade_not_graded`` lists the exercises,
and the run exits 2, as `grade submit` does. Gradescope judges a run by its
results.json alone ("failed to execute correctly" only when that file is
missing or malformed), so the exit status shows only in the instructor's log:
the flag a course staff member sees and filters on is in results.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader import quiz as quiz_lib
from grader.quiz import graded, judging
from grader.student import standing
from grader.student.engine import scaffolding
from grader.student.course import DEFAULT_COURSE, Course, load_course
from grader.course.grading import grade
from grader.student.errors import GraderError
from grader.student.sandbox.ingest import read_submission
from grader.student.engine.model import GradeReport, at_full_marks
from grader.student.feedback.report import (
    first_reason,
    format_score,
    gradescope_error,
    gradescope_results,
    write_gradescope_placeholder,
    write_json,
)
from grader.student.sandbox.runner import Limits

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "exercises"
ANSWER_FILES = ("quiz-answers.toml", "quiz-answers.json")
QUIZ_RECORDS = "normgrade_quiz_attempts"  # the key of the attempt records in results.json's extra_data
NOT_GRADED = "normgrade_not_graded"  # extra_data: the exercises the autograder's machine could not grade


def student_name(root: Path) -> str:
    """The submitter's email or name from Gradescope's submission_metadata.json, else 'student'."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
        user = meta["users"][0]
        return str(user.get("email") or user.get("name") or "student")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return "student"


def lay_out(submission: Path, folder: Path) -> None:
    """The upload as a complete exercises folder in ``folder``: the stubs, overwritten by the uploaded files.

    The upload is read by :func:`grader.student.sandbox.ingest.read_submission` (links
    refused, file count and sizes capped before reading; ``.cl`` files at its
    top taken as ``kernels/``).
    """
    shutil.copytree(STUBS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    uploaded = submission / "exercises" if (submission / "exercises").is_dir() else submission
    ingested = read_submission(uploaded, kernels_at_top=True)
    found = 0
    for name, data in ingested.files.items():
        if "/" in name and not name.startswith("kernels/"):
            continue  # helper packages below the top are not part of the exercises
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        found += 1
    if not found:
        raise GraderError("the upload holds no exercise files: upload your exercises/ folder or its .py and .cl files")


def quiz_tests(submission: Path, root: Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The quiz tests of this submission and the attempt records to keep (results.json ``extra_data``).

    Graded as on the course server (:mod:`grader.quiz.graded`): every question is
    posed for the submitter (their numbers, their choice order, so choice answers
    are the numbers ``grade quiz --student`` showed them), and has a fixed number
    of judged attempts counted across the student's submissions (the records
    earlier results kept, read from submission_metadata.json); an answer left
    unchanged since the last submission is not judged again. Before the
    assignment's due date a wrong answer says "Not this one."; explanations come
    with a right answer, the last attempt, or after the due date. Chapters
    answered before stay in the score even when this upload has no answers file.
    """
    root = root if root is not None else submission.parent
    meta = metadata(root)
    student = student_name(root)
    prior = prior_records(meta)
    files = [submission / name for name in ANSWER_FILES if (submission / name).is_file()]
    doc = quiz_lib.load_answers(files[0]) if files else {}
    named = doc.pop("student", None)
    if named is not None and str(named).strip().casefold() != student.casefold():
        raise GraderError(
            f"{files[0].name} was written for '{named}', not for you ({student}): run "
            f"`grade quiz CHAPTER --student {student} --save-answers {files[0].name}` and upload it again"
        )
    for chapter, table in doc.items():
        if not isinstance(table, dict):
            raise GraderError(
                f"{files[0].name}: '{chapter}' must be a table of question ids and answers "
                f"([{chapter}] then one line per question)"
            )
    chapters = list(doc) + sorted({key.split("/")[0] for key in prior} - set(doc))
    if doc:
        judging.warm_up()  # each answer is judged in a forked, time-bounded process: fork it ready
    due_passed = graded.past_due(
        _time(meta.get("assignment", {}).get("due_date")), _time(meta.get("created_at")) or datetime.now(timezone.utc)
    )
    attempts = course_attempts()
    tests, records = [], dict(prior)
    for chapter in chapters:
        quiz = quiz_lib.resolve_chapter(chapter, quiz_lib.default_quiz_dir())
        table = doc.get(chapter, {})
        unknown = [k for k in table if k not in {q.id for q in quiz.questions}]
        if unknown:
            raise GraderError(f"{files[0].name}: '{unknown[0]}' is not a question of chapter '{quiz.chapter}'")
        score, lines = 0.0, []
        for q in quiz.questions:
            key = f"{quiz.chapter}/{q.id}"
            record = prior.get(key)
            line, record = judge_file_answer(q, table.get(q.id), student, record, attempts, due_passed)
            if record is not None:
                records[key] = record
                score += q.points if record["correct"] else 0.0
            if line:
                lines.append(line)
        max_score = sum(q.points for q in quiz.questions)
        tests.append(
            {
                "name": f"quiz {quiz.chapter}",
                "score": round(score, 6),
                "max_score": max_score,
                "status": "passed" if at_full_marks(score, max_score) else "failed",
                "output": f"{format_score(score)}/{format_score(max_score)}\n" + "\n".join(lines),
                "visibility": "visible",
            }
        )
    return tests, records


def judge_file_answer(
    question: quiz_lib.Question,
    raw: Any,
    student: str,
    record: dict[str, Any] | None,
    course_attempts: int | None,
    due_passed: bool,
) -> tuple[str, dict[str, Any] | None]:
    """One question of an answers file: (the line the student reads, the attempt record to keep)."""
    used = int(record["used"]) if record else 0
    before = graded.GradedStanding(
        used, bool(record and record["correct"]), graded.allowed_attempts(question, course_attempts)
    )
    posed = quiz_lib.pose(question, student)
    if raw is None:
        return (
            f"{question.id}: {'right (earlier submission)' if before.correct else 'not answered'}" if record else ""
        ), record
    if before.closed:
        state = "right (earlier submission)" if before.correct else "no attempts left (attempts never reset)"
        return f"{question.id}: {state}: not judged again", record
    try:
        verdict = judging.judge_bounded(posed, raw, shown=True)
    except quiz_lib.AnswerFormatError as exc:
        return f"{question.id}: unreadable ({exc}); no attempt used", record
    if record and record.get("answer") == verdict.answer:
        return f"{question.id}: unchanged since your last submission: not judged again", record
    after = before.after(verdict.correct)
    line = f"{question.id}: {graded.feedback(after)}"
    if graded.reveals_explanation(after, due_passed):
        line += f"\n  Explanation: {posed.explanation(verdict.expected)}"
    return line, {"used": after.used, "correct": after.correct, "answer": verdict.answer}


def metadata(root: Path) -> dict[str, Any]:
    """Gradescope's submission_metadata.json ({} when absent or unreadable)."""
    try:
        doc = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def prior_records(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The quiz attempt records of the student's earlier submissions, merged (attempts used: the
    most any kept; right when any was; the answer of the latest)."""
    merged: dict[str, dict[str, Any]] = {}
    previous = meta.get("previous_submissions") or []
    for sub in sorted((p for p in previous if isinstance(p, dict)), key=lambda p: str(p.get("submission_time", ""))):
        given = sub.get("results")
        results = given if isinstance(given, dict) else {}
        kept = (
            (results.get("extra_data") or {}).get(QUIZ_RECORDS) if isinstance(results.get("extra_data"), dict) else None
        )
        for key, rec in (kept or {}).items():
            if not isinstance(rec, dict) or not isinstance(rec.get("used"), int):
                continue
            old = merged.get(key, {"used": 0, "correct": False})
            merged[key] = {
                "used": max(old["used"], rec["used"]),
                "correct": bool(old["correct"] or rec.get("correct")),
                "answer": str(rec.get("answer", "")),
            }
    return merged


def bundle_course() -> Course:
    """The bundle's course.toml (``grade release --course`` puts it there), else the default course."""
    path = ROOT / "course.toml"
    return load_course(path) if path.is_file() else DEFAULT_COURSE


def course_attempts() -> int | None:
    """``[quiz] attempts`` of the bundle's course.toml (None: each question's own)."""
    return bundle_course().quiz_attempts


def student_results(report: GradeReport, course: Course, now: datetime) -> dict[str, Any]:
    """The results.json of ``report`` as its student may see it at ``now``: the course's standing
    (grader/student/standing.py ``as_seen``: exam chapters held until their ``release_feedback``, so rerun the
    autograder after it to show them; every message said at its exercise's scaffolding level, no fix below
    ``guided``), rendered with those levels in force, as the course server renders its reports."""
    import grader.mistakes  # noqa: F401  (registers the known mistakes' level-neutral hints)

    levels = course.scaffolding_levels()
    with scaffolding.levels_in_force(levels):
        return gradescope_results(standing.as_seen(report, course, now, levels))


def _time(text: Any) -> datetime | None:
    try:
        value = datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None
    return value if value is None or value.tzinfo else value.replace(tzinfo=timezone.utc)


def run(root: Path, sandbox: bool = True) -> dict[str, Any]:
    """Grade ``root/submission``; the results.json document.

    Someone else's code: the OS sandbox is required (SetupError, a results.json
    with the reason, where bubblewrap cannot run) unless ``sandbox`` is False,
    which the report then notes.
    """
    submission = root / "submission"
    student = student_name(root)
    with tempfile.TemporaryDirectory(prefix="normgrade-gs-") as tmp:
        folder = Path(tmp) / "exercises"
        lay_out(submission, folder)
        report = grade(folder, None, student, Limits(sandbox=sandbox))
    results = student_results(report, bundle_course(), datetime.now(timezone.utc))
    try:
        extra, records = quiz_tests(submission, root)
    except GraderError as exc:  # the exercises still count; the quiz part says what to fix
        extra, records = (
            [
                {
                    "name": "quiz answers",
                    "score": 0.0,
                    "max_score": 0.0,
                    "status": "failed",
                    "output": str(exc),
                    "visibility": "visible",
                }
            ],
            prior_records(metadata(root)),
        )
    results["tests"] += extra
    results["score"] = round(results["score"] + sum(t["score"] for t in extra), 6)
    results["extra_data"] = {QUIZ_RECORDS: records}
    if report.not_graded:
        results["extra_data"][NOT_GRADED] = [e.id for e in report.not_graded]
        results["output"] = f"{rerun_line(report)}\n\n{results['output']}"
    return results


def rerun_line(report: GradeReport) -> str:
    """The one line that flags a run with exercises the autograder's machine could not grade."""
    skipped = report.not_graded
    points = format_score(sum(e.max_score for e in skipped))
    return (
        f"NOT GRADED YET: {len(skipped)} exercise(s) ({points} points) could not be graded on the autograder's"
        f" machine, not your fault: they count when your instructor reruns the autograder (no need to submit"
        f" again). {first_reason(skipped)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.course.gradescope", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/autograder"), help="Gradescope's /autograder folder.")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="Grade without the OS sandbox (bubblewrap) where the image cannot run it; noted in the results.",
    )
    args = parser.parse_args(argv)
    output = args.root / "results" / "results.json"
    write_gradescope_placeholder(output)
    try:
        results = run(args.root, sandbox=not args.no_sandbox)
    except GraderError as exc:
        write_json(gradescope_error(str(exc)), output)
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # an autograder must always leave a results.json
        write_json(
            gradescope_error(f"the grader failed ({type(exc).__name__}: {exc}); please tell your instructor"), output
        )
        raise
    write_json(results, output)
    skipped = results.get("extra_data", {}).get(NOT_GRADED)
    if skipped:  # the instructor's log: rerun once the image can grade them (`grade doctor` in it shows why)
        print(f"Error: {results['output'].splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
