"""Helpers for the course-server tests: the API, submissions, the quizzes' right answers.

The processes (servers, workers and redis-server on free loopback ports) are bench/procs.py's, shared
with the benches and re-exported here by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from bench.procs import (  # noqa: F401 (re-exported for the tests)
    HOST,
    START_TIMEOUT_S,
    Redis,
    Server,
    alive,
    children_of,
    descendants,
    free_port,
    issue_tokens,
    kill_quietly,
    kill_tree,
    start_worker,
    stop_process,
    wait_for,
)

# --- the API ------------------------------------------------------------------------------------


def api(url: str, token: str | None, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One API request with a bearer token."""
    headers = dict(kwargs.pop("headers", {}) or {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.request(method, url + "/api/v1" + path, headers=headers, timeout=30, **kwargs)


def solution_files(folder: Path, names: list[str]) -> dict[str, str]:
    """The named files of a solution folder, for an upload body."""
    return {name: (folder / name).read_text(encoding="utf-8") for name in names}


def wait_graded(url: str, token: str, job_id: int, timeout: float = 120.0) -> dict[str, Any]:
    """Poll a submission until it is done or error; its final document."""

    def finished() -> dict[str, Any] | None:
        doc = api(url, token, "GET", f"/submissions/{job_id}", params={"wait": 5}).json()
        return doc if doc["status"] in ("done", "error") else None

    return wait_for(finished, timeout, f"submission {job_id} to be graded", interval=0.1)


# --- quizzes: the right answers, posed for a student -------------------------------------------

QUIZ_DIR = Path(__file__).resolve().parent.parent / "quizzes"


def quiz_source(chapter: str) -> Any:
    """The author source ``quizzes/source/<chapter>.toml`` (plaintext keys)."""
    from grader import quiz as quiz_lib

    return quiz_lib.load_source(QUIZ_DIR / "source" / f"{chapter}.toml")


def posed_for(chapter: str, question_id: str, student: str) -> Any:
    """The question as the server poses it for ``student`` (the same locked file, the same seed)."""
    from grader import quiz as quiz_lib

    return quiz_lib.pose(quiz_lib.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id), student)


def reference_value(chapter: str, question_id: str, student: str) -> float:
    """A parameterised question's answer for ``student``, computed by the reference."""
    from grader import quiz as quiz_lib

    posed = posed_for(chapter, question_id, student)
    call = quiz_lib.params_lib.parse_reference(posed.question.reference, set(posed.values))
    return quiz_lib.params_lib.reference_answer(call, posed.values)


def right_answer(chapter: str, sq: Any, student: str, typed: bool) -> Any:
    """The source's right answer for ``student``: as typed at the prompt (choice numbers in the
    student's order) or as an answers file holds it (choice ids)."""
    if sq.kind in ("single", "multiple"):
        keys = [sq.answer] if sq.kind == "single" else list(sq.answer)
        if not typed:
            return sq.answer
        order = [c.id for c in posed_for(chapter, sq.id, student).choices]
        return ", ".join(str(order.index(k) + 1) for k in keys)
    if sq.answer_range is not None:
        return repr(reference_value(chapter, sq.id, student))
    if sq.kind == "short":
        return str(sq.answer[0] if isinstance(sq.answer, list) else sq.answer)
    return str(sq.answer)


def with_quiz_chapters(text: str) -> str:
    """A test course's text with, for each shipped quiz chapter none of its chapters holds, a chapter of that quiz
    alone (``exercises = []``, no date): `grade serve` refuses a quiz chapter that no chapter holds (docs/term.md,
    "Chapters and their quizzes"). A course without chapters is left as it is (no dates to match)."""
    import tomllib

    from grader.quiz import chapter_ids
    from grader.student.course import parse_course

    course = parse_course(tomllib.loads(text), Path("course.toml"))
    if not course.chapters:
        return text
    missing = [q for q in chapter_ids(QUIZ_DIR) if course.chapter_of_quiz(q) is None]
    return text + "".join(f'\n[[chapter]]\nname = "{q}"\nexercises = []\nquiz = "{q}"\n' for q in missing)
