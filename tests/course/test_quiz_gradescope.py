"""Quizzes on Gradescope: judged for the submitter (their numbers, their choice order), attempts
counted across submissions and never reset, explanations only when spent or past the due date."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from grader.course import gradescope
from grader.student.errors import GraderError
from server_util import posed_for, quiz_source, right_answer

FUTURE = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat()
PAST = (datetime.now(timezone.utc) - timedelta(days=30)).isoformat()


def upload(
    tmp_path: Path, email: str, answers: str | None, previous: list[dict[str, Any]] | None = None, due: str = FUTURE
) -> Path:
    root = tmp_path / f"root{len(list(tmp_path.iterdir()))}"
    (root / "submission").mkdir(parents=True)
    if answers is not None:
        (root / "submission" / "quiz-answers.toml").write_text(answers, encoding="utf-8")
    meta = {
        "created_at": datetime.now(timezone.utc).isoformat(),
        "users": [{"email": email, "name": "S"}],
        "assignment": {"due_date": due},
        "previous_submissions": previous or [],
    }
    (root / "submission_metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def grade(root: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    tests, records = gradescope.quiz_tests(root / "submission", root)
    return {t["name"]: t for t in tests}, records


def previous(records: dict[str, Any], when: int) -> dict[str, Any]:
    return {
        "submission_time": f"2026-11-0{when}T10:00:00Z",
        "score": 0,
        "results": {"extra_data": {gradescope.QUIZ_RECORDS: records}},
    }


def shown(question_id: str, student: str) -> str:
    sq = next(q for q in quiz_source("activations").questions if q.id == question_id)
    return right_answer("activations", sq, student, typed=True)


def test_an_answers_file_is_judged_for_its_submitter_only(tmp_path: Path) -> None:
    ann = "ann@example.org"
    lines = [f'student = "{ann}"', "[activations]"]
    for qid in ("gelu-why", "dead-relu-remedies", "gelu-value", "swish-derivative"):
        lines.append(f'{qid} = "{shown(qid, ann)}"')
    text = "\n".join(lines) + "\n"
    tests, records = grade(upload(tmp_path, ann, text))
    assert tests["quiz activations"]["score"] == 4, tests["quiz activations"]["output"]
    assert all(
        records[f"activations/{q}"] == {"used": 1, "correct": True, "answer": records[f"activations/{q}"]["answer"]}
        for q in ("gelu-why", "gelu-value")
    )
    with pytest.raises(GraderError, match="was written for 'ann@example.org', not for you"):
        grade(upload(tmp_path, "bob@example.org", text))
    copied = text.replace(f'student = "{ann}"\n', "")
    scores = [grade(upload(tmp_path, f"s{i}@example.org", copied))[0]["quiz activations"]["score"] for i in range(8)]
    assert sum(scores) / len(scores) < 2.5, "Ann's file is not right for other students (their order, their numbers)"
    assert (
        posed_for("activations", "gelu-value", ann).values
        != posed_for("activations", "gelu-value", "s0@example.org").values
    )


def test_attempts_are_counted_across_submissions_and_never_reset(tmp_path: Path) -> None:
    me = "att@example.org"
    posed = posed_for("activations", "gelu-why", me)
    sq = next(q for q in quiz_source("activations").questions if q.id == "gelu-why")
    wrong = [str(i) for i, c in enumerate(posed.choices, 1) if c.id != sq.answer]
    right = shown("gelu-why", me)
    tests, first = grade(upload(tmp_path, me, f"[activations]\ngelu-why = {wrong[0]}\n"))
    out = tests["quiz activations"]["output"]
    assert "gelu-why: Not this one. (1 attempt(s) left)" in out and "Explanation" not in out
    tests, same = grade(upload(tmp_path, me, f"[activations]\ngelu-why = {wrong[0]}\n", [previous(first, 1)]))
    assert "unchanged since your last submission" in tests["quiz activations"]["output"] and same == first
    tests, second = grade(upload(tmp_path, me, f"[activations]\ngelu-why = {wrong[1]}\n", [previous(first, 1)]))
    assert "Not this one. No attempts left." in tests["quiz activations"]["output"]
    assert "Explanation: " in tests["quiz activations"]["output"], "attempts spent: explained"
    history = [previous(first, 1), previous(second, 2)]
    tests, third = grade(upload(tmp_path, me, f"[activations]\ngelu-why = {right}\n", history))
    assert (
        tests["quiz activations"]["score"] == 0
        and "no attempts left (attempts never reset)" in tests["quiz activations"]["output"]
    )
    assert third["activations/gelu-why"]["used"] == 2 and not third["activations/gelu-why"]["correct"]


def test_a_right_answer_keeps_counting_in_later_submissions(tmp_path: Path) -> None:
    me = "keep@example.org"
    tests, records = grade(upload(tmp_path, me, f"[activations]\ngelu-why = {shown('gelu-why', me)}\n"))
    assert (
        tests["quiz activations"]["score"] == 1 and "Correct.\n  Explanation: " in tests["quiz activations"]["output"]
    )
    tests, _ = grade(upload(tmp_path, me, None, [previous(records, 1)]))
    assert tests["quiz activations"]["score"] == 1, "an upload without answers keeps the earlier right ones"


def test_after_the_due_date_a_wrong_answer_is_explained(tmp_path: Path) -> None:
    me = "late@example.org"
    posed = posed_for("activations", "gelu-why", me)
    sq = next(q for q in quiz_source("activations").questions if q.id == "gelu-why")
    wrong = next(str(i) for i, c in enumerate(posed.choices, 1) if c.id != sq.answer)
    tests, _ = grade(upload(tmp_path, me, f"[activations]\ngelu-why = {wrong}\n", due=PAST))
    assert "Not this one. (1 attempt(s) left)\n  Explanation: " in tests["quiz activations"]["output"]


def test_choice_ids_and_unreadable_answers_cost_no_attempt(tmp_path: Path) -> None:
    tests, records = grade(upload(tmp_path, "x@example.org", '[activations]\ngelu-why = "c"\n'))
    assert "unreadable" in tests["quiz activations"]["output"] and "activations/gelu-why" not in records
