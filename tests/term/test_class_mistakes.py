"""The class's most frequent mistakes come out as planted (tests/classgen.py), with who fixed them and when."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

from classgen import simulated_upload_class
from grader.term.class_mistakes import Upload, frequent_mistakes, to_csv_rows

MONDAY = datetime(2026, 3, 2, tzinfo=timezone.utc)
WEEK = (MONDAY, MONDAY + timedelta(days=7))


def test_the_most_frequent_mistake_is_the_one_planted_most() -> None:
    planted = {
        ("normalization.BatchNorm1d", "bn-biased-running-var"): 14,
        ("optim.AdamW", "adamw-no-sqrt"): 6,
        ("normalization.BatchNorm1d", "bn-eps-missing"): 9,
    }
    found = frequent_mistakes(simulated_upload_class(planted, 30, MONDAY, seed=4), *WEEK)
    assert [(m.exercise, m.mistake, m.students) for m in found] == [
        ("normalization.BatchNorm1d", "bn-biased-running-var", 14),
        ("normalization.BatchNorm1d", "bn-eps-missing", 9),
        ("optim.AdamW", "adamw-no-sqrt", 6),
    ]
    assert [m.fixed for m in found] == [7, 4, 3]  # round(0.5 * count)
    assert found[0].concept == "normalization.batchnorm-running-stats"
    assert found[0].median_hours is not None and 2 <= found[0].median_hours <= 4
    assert sum(len(ids) for ids in found[0].uploads.values()) == 14 + 7  # the unfixed ones named it twice


def test_only_the_window_counts_and_a_fix_is_the_next_upload() -> None:
    at = MONDAY + timedelta(days=1)
    uploads = [
        Upload("ada", "optim.SGD", at, frozenset({"sgd-nesterov"}), 1),
        Upload("ada", "optim.SGD", at + timedelta(hours=1), frozenset({"sgd-nesterov"}), 2),
        Upload("ada", "optim.SGD", at + timedelta(hours=5), frozenset(), 3),
        Upload("ben", "optim.SGD", MONDAY - timedelta(days=1), frozenset({"sgd-wd-ignored"}), 4),
    ]
    (found,) = frequent_mistakes(uploads, *WEEK)
    assert (found.mistake, found.students, found.fixed, found.median_hours) == ("sgd-nesterov", 1, 1, 4.0)
    assert found.uploads == {"ada": [1, 2]}


def test_the_csv_export() -> None:
    uploads = [Upload("ada", "optim.SGD", MONDAY + timedelta(hours=1), frozenset({"sgd-nesterov"}), 1)]
    text = io.StringIO()
    csv.writer(text).writerows(to_csv_rows(frequent_mistakes(uploads, *WEEK)))
    assert text.getvalue().splitlines() == [
        "exercise,mistake,concept,students,fixed_next_upload,median_hours_to_fix",
        "optim.SGD,sgd-nesterov,optim.sgd,1,0,",
    ]
