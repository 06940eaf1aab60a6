"""Each wrong choice names the misconception it stands for (``misconception`` in the authors' sources): an
instructor fact, never locked, never shipped; the leak audit refuses a handout that holds one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.course import leaks
from grader.quiz.bank import load_quiz
from grader.quiz.errors import QuizFileError
from grader.quiz.locking import dump_locked, load_source, lock_quiz, misconceptions, unlabelled_wrong_choices

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"

SOURCE = """chapter = "tiny"
title = "Tiny"

[[questions]]
id = "pick"
kind = "single"
checkpoint = true
prompt = "Which?"
choices = [
  {{ id = "a", text = "Right." }},
  {{ id = "b", text = "Wrong.", misconception = "thinks b" }},
  {{ id = "c", text = "Also wrong."{c} }},
]
answer = "a"
explanation = "a."
"""


def _source(tmp_path: Path, c: str = ', misconception = "thinks c"') -> Path:
    (tmp_path / "source").mkdir(exist_ok=True)
    path = tmp_path / "source" / "tiny.toml"
    path.write_text(SOURCE.format(c=c), encoding="utf-8")
    return path


@pytest.mark.parametrize("path", sorted((QUIZ_DIR / "source").glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_wrong_choice_names_its_misconception(path: Path) -> None:
    assert unlabelled_wrong_choices(load_source(path)) == []


def test_a_wrong_choice_without_a_label_is_found(tmp_path: Path) -> None:
    assert unlabelled_wrong_choices(load_source(_source(tmp_path, c=""))) == ["pick/c"]


def test_a_label_on_the_right_answer_is_refused(tmp_path: Path) -> None:
    path = _source(tmp_path)
    path.write_text(
        path.read_text().replace('text = "Right."', 'text = "Right.", misconception = "x"'), encoding="utf-8"
    )
    with pytest.raises(QuizFileError, match="only a wrong choice has a misconception"):
        load_source(path)


def test_labels_are_read_from_the_sources_keyed_as_the_store_records_an_answer(tmp_path: Path) -> None:
    _source(tmp_path)
    assert misconceptions(tmp_path) == {("tiny/pick", "choice:b"): "thinks b", ("tiny/pick", "choice:c"): "thinks c"}
    assert misconceptions(tmp_path / "elsewhere") == {}


def test_the_lock_leaves_the_labels_out_and_a_locked_file_refuses_one(tmp_path: Path) -> None:
    doc = lock_quiz(load_source(_source(tmp_path)))
    assert "misconception" not in dump_locked(doc) and "thinks" not in dump_locked(doc)
    doc["questions"][0]["choices"][1]["misconception"] = "thinks b"
    target = tmp_path / "tiny.json"
    target.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(QuizFileError, match="may have only"):
        load_quiz(target)
    for path in QUIZ_DIR.glob("*.json"):  # what `grade quiz lock` wrote and a handout ships
        assert "misconception" not in path.read_text(encoding="utf-8")


def test_the_leak_audit_fails_on_a_handout_that_ships_a_label(tmp_path: Path) -> None:
    source = load_source(_source(tmp_path))
    handout = tmp_path / "handout"
    (handout / "quizzes").mkdir(parents=True)
    doc = lock_quiz(source)
    (handout / "quizzes" / "tiny.json").write_text(json.dumps(doc), encoding="utf-8")
    assert leaks.misconception_leaks(leaks.handout_texts(handout), [source]) == []
    doc["questions"][0]["choices"][1]["misconception"] = "thinks b"
    (handout / "quizzes" / "tiny.json").write_text(json.dumps(doc), encoding="utf-8")
    found = leaks.misconception_leaks(leaks.handout_texts(handout), [source])
    assert [(f.question, f.answer) for f in found] == [("tiny/pick", "thinks b")]
