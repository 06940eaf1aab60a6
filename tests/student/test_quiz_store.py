"""The store's quiz records for item analysis: migration 3 (params, first_try) and record_quiz_answer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import sqlite_utils

from grader.student.store import MIGRATIONS, Store, m3_quiz_items


def test_first_answers_are_marked_and_parameters_kept(tmp_path: Path) -> None:
    with Store.open(tmp_path / "p.db") as store:
        assert store.record_quiz_answer("ada", "activations", "gelu-value", "0.84", False, {"x": 1.0}) is True
        assert store.record_quiz_answer("ada", "activations", "gelu-value", "0.8413", True, {"x": 1.0}) is False
        assert store.record_quiz_answer("bob", "activations", "gelu-value", "-0.11", True, {"x": -1.4}) is True
        assert store.record_quiz_answer("ada", "activations", "gelu-why", "c", True) is True
        rows = store.quiz_attempts()
    assert [(r["student"], r["question"], r["correct"], r["first_try"]) for r in rows] == [
        ("ada", "gelu-value", False, 1),
        ("ada", "gelu-value", True, 0),
        ("bob", "gelu-value", True, 1),
        ("ada", "gelu-why", True, 1),
    ]
    assert json.loads(rows[0]["params"]) == {"x": 1.0} and rows[3]["params"] == ""


def test_migration_3_keeps_older_quiz_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = Store(sqlite_utils.Database(sqlite3.connect(path), execute_plugins=False), path)
    old.migrate(target=MIGRATIONS.index(m3_quiz_items))
    old.db.table("students").insert({"name": "ada", "created_at": "2026-01-01T00:00:00+00:00"})
    old.db.table("quiz_attempts").insert(
        {
            "student": "ada",
            "chapter": "normalization",
            "question": "bn-fold",
            "answer": "d",
            "correct": 1,
            "answered_at": "2026-01-01T00:00:00+00:00",
        }
    )
    assert "first_try" not in old.db["quiz_attempts"].columns_dict
    old.close()
    with Store.open(path) as store:
        assert store.version == len(MIGRATIONS)
        store.record_quiz_answer("ada", "normalization", "bn-fold", "d", True)
        rows = store.quiz_attempts("ada")
    assert [(r["answer"], r["params"], r["first_try"]) for r in rows] == [("d", "", 0), ("d", "", 0)]
