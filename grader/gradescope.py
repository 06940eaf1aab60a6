"""The Gradescope autograder's entry point: ``python -m grader.gradescope [--root /autograder]``.

Run by the bundle's ``run_autograder`` (``grade release``). It lays the upload
out as an exercises folder, grades it with the hidden checks (the student's own
seeds, the live reference: :func:`grader.grading.grade`), scores the quiz
answers file when the upload has one, and writes ``results/results.json``. A
valid results.json exists from the start ("grading did not finish") and every
failure ends in one (score 0 and the reason), never in a traceback alone.

The upload (``ROOT/submission``) is either an ``exercises/`` folder or the
exercise files at its top (``activations.py``..., ``*.cl`` files go to
``kernels/``); files it lacks (``base.py``, ``__init__.py``, untouched topics)
come from the stubs, so they score as not implemented. ``quiz-answers.toml``
(or ``.json``), one table per chapter mapping question ids to answers, is
judged against the locked quizzes, with the values of the handout's
parameterised questions (``release.PRACTICE_STUDENT``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from grader import quiz as quiz_lib
from grader.grading import grade
from grader.student.errors import GraderError
from grader.student.ingest import read_submission
from grader.student.report import (
    format_score,
    gradescope_error,
    gradescope_results,
    write_gradescope_placeholder,
    write_json,
)
from grader.student.sandbox import Limits

ROOT = Path(__file__).resolve().parents[1]
STUBS = ROOT / "exercises"
ANSWER_FILES = ("quiz-answers.toml", "quiz-answers.json")
PRACTICE_STUDENT = "(practice)"  # as grader.release.PRACTICE_STUDENT (not imported: release needs the quiz sources)


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

    The upload is read by :func:`grader.student.ingest.read_submission` (links
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


def quiz_tests(submission: Path) -> list[dict[str, Any]]:
    """One Gradescope test per chapter answered in the upload's answers file (none without one)."""
    files = [submission / name for name in ANSWER_FILES if (submission / name).is_file()]
    if not files:
        return []
    answers = quiz_lib.load_answers(files[0])
    tests = []
    for chapter, table in answers.items():
        if not isinstance(table, dict):
            raise GraderError(f"{files[0].name}: '{chapter}' must be a table of question ids and answers")
        quiz = quiz_lib.resolve_chapter(chapter, quiz_lib.default_quiz_dir())
        result = quiz_lib.grade_answers(quiz, table, files[0].name, student=PRACTICE_STUDENT)
        lines = [f"{q.id}: {'right' if result.verdicts[q.id].correct else 'wrong'}"
                 for q in quiz.questions if q.id in result.verdicts]
        tests.append({
            "name": f"quiz {chapter}",
            "score": round(result.score, 6),
            "max_score": result.max_score,
            "status": "passed" if result.score >= result.max_score else "failed",
            "output": f"{format_score(result.score)}/{format_score(result.max_score)}\n" + "\n".join(lines),
            "visibility": "visible",
        })
    return tests


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
    results = gradescope_results(report)
    extra = quiz_tests(submission)
    results["tests"] += extra
    results["score"] = round(results["score"] + sum(t["score"] for t in extra), 6)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.gradescope", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/autograder"), help="Gradescope's /autograder folder.")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="Grade without the OS sandbox (bubblewrap) where the image cannot run it; noted in the results.")
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
        write_json(gradescope_error(f"the grader failed ({type(exc).__name__}: {exc}); please tell your instructor"),
                   output)
        raise
    write_json(results, output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
