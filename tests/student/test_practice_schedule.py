"""Spaced retrieval: a mistake leads to practice, back on schedule, mastered after two clean retrievals."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.student import practice_schedule as ps
from grader.student.store import Store

MONDAY = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)


def test_a_mistake_offers_its_concepts_questions_once() -> None:
    offer = ps.practice_offer(
        [
            ("bn-biased-running-var", "normalization.BatchNorm1d"),
            ("bn-momentum-inverted", "normalization.BatchNorm1d"),
            ("generic-none", "optim.AdamW"),
        ]
    )
    assert [c for c, _ in offer] == ["normalization.batchnorm-running-stats", "optim.adamw"]
    assert "normalization/bn-running-var-batches" in offer[0][1]


def test_a_missed_concept_comes_back_a_day_later_then_at_growing_intervals_and_is_mastered() -> None:
    (entry,) = ps.record_mistakes([], [("bn-biased-running-var", "normalization.BatchNorm1d")], MONDAY)
    assert entry.due == MONDAY + timedelta(days=1) and entry.streak == 0 and not entry.mastered
    assert ps.due_today([entry], MONDAY) == []
    assert ps.due_today([entry], MONDAY + timedelta(days=1)) == [entry]

    first = ps.retrieved(entry, True, entry.due)
    gap1 = first.due - entry.due
    assert first.streak == 1 and not first.mastered and gap1 > timedelta(days=1)
    second = ps.retrieved(first, True, first.due)
    gap2 = second.due - first.due
    assert second.streak == 2 and second.mastered and gap2 > gap1
    assert ps.due_today([second], second.due + timedelta(days=30)) == []  # mastered: never due


def test_a_miss_breaks_the_streak() -> None:
    entry = ps.missed(None, "optim.adamw", MONDAY)
    clean = ps.retrieved(entry, True, entry.due)
    wrong = ps.retrieved(clean, False, clean.due)
    assert wrong.streak == 0 and not wrong.mastered and wrong.due - clean.due <= timedelta(days=1)
    again = ps.retrieved(ps.retrieved(wrong, True, wrong.due), True, MONDAY + timedelta(days=40))
    assert again.mastered


def test_a_new_mistake_of_a_mastered_concept_takes_mastery_away() -> None:
    entry = ps.missed(None, "optim.adamw", MONDAY)
    mastered = ps.retrieved(ps.retrieved(entry, True, entry.due), True, MONDAY + timedelta(days=5))
    (back,) = ps.record_mistakes([mastered], [("adamw-no-sqrt", "optim.AdamW")], MONDAY + timedelta(days=9))
    assert not back.mastered and back.due == MONDAY + timedelta(days=10)


def test_times_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ps.missed(None, "optim.adamw", datetime(2026, 3, 2))


def test_the_schedule_is_kept_in_the_store_and_merged_on_login(tmp_path: Path) -> None:
    local = ps.record_mistakes([], [("adamw-no-sqrt", "optim.AdamW"), ("sgd-nesterov", "optim.SGD")], MONDAY)
    with Store.open(tmp_path / "progress.db") as store:
        store.save_practice_entries("ada", [ps.to_row(e) for e in local])
        kept = [ps.from_row(r) for r in store.practice_entries("ada")]
        assert kept == local and store.practice_entries("ben") == []
    later = ps.retrieved(local[0], True, local[0].due)  # answered on the server the next day
    merged = ps.merge(local, [later])
    assert merged == [later, local[1]]
    assert ps.merge([later], local) == [later, local[1]]  # the later review wins from either side


def test_progress_offers_the_practice_of_current_mistakes_and_what_is_due(tmp_path: Path) -> None:
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport

    wrong = CheckResult("running_var_ema", False, 0.0, 2.0, "differs", "bn-biased-running-var")
    report = GradeReport(
        "ada",
        [
            ExerciseResult(
                "normalization.BatchNorm1d", "failed", 8.0, 10.0, [CheckResult("forward", True, 8.0, 8.0), wrong]
            )
        ],
    )
    with Store.open(tmp_path / "progress.db") as store:
        assert ps.progress_lines(store, "ada", MONDAY) == []
        store.record_report(report, "0.1.0")
        store.save_practice_entries("ada", [ps.to_row(ps.missed(None, "optim.adamw", MONDAY - timedelta(days=1)))])
        lines = ps.progress_lines(store, "ada", MONDAY)
    assert lines[0].startswith("Practice this (not graded, no attempts spent)")
    assert "BatchNorm's running statistics" in lines[1] and "normalization/bn-running-var-batches" in lines[1]
    assert lines[2] == "Due today (1): AdamW: moments, bias correction, decoupled decay"


def test_a_recorded_report_schedules_its_mistakes_concepts(tmp_path: Path) -> None:
    from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport

    wrong = CheckResult("running_var_ema", False, 0.0, 2.0, "differs", "bn-biased-running-var")
    report = GradeReport(
        "ada",
        [
            ExerciseResult(
                "normalization.BatchNorm1d", "failed", 8.0, 10.0, [CheckResult("forward", True, 8.0, 8.0), wrong]
            )
        ],
    )
    with Store.open(tmp_path / "progress.db") as store:
        ps.record_report(store, report, MONDAY)
        (entry,) = [ps.from_row(r) for r in store.practice_entries("ada")]
    assert entry.concept == "normalization.batchnorm-running-stats" and entry.due == MONDAY + timedelta(days=1)


def test_a_concepts_entry_is_the_replay_of_its_reviews_in_time_order() -> None:
    miss = ps.new_review("optim.adamw", None, False, MONDAY, "server")
    right = ps.new_review(
        "optim.adamw", "dropout-weight-decay/adamw-first-step", True, MONDAY + timedelta(days=1), "local"
    )
    other = ps.new_review("optim.sgd", None, False, MONDAY, "local")
    step_by_step = ps.retrieved(ps.missed(None, "optim.adamw", MONDAY), True, MONDAY + timedelta(days=1))
    assert ps.replay("optim.adamw", [right, other, miss]) == step_by_step  # order given does not matter
    assert ps.schedule_of([right, other, miss]) == [step_by_step, ps.missed(None, "optim.sgd", MONDAY)]
    assert ps.review_from_row(ps.review_row(right)) == right


def test_merging_two_logs_keeps_every_review_once_and_refuses_an_altered_one() -> None:
    local = [ps.new_review("optim.adamw", None, False, MONDAY, "local")]
    server = [ps.new_review("optim.adamw", None, True, MONDAY + timedelta(hours=1), "server")]
    union = ps.merge_logs(local, server)
    assert union == [local[0], server[0]]
    assert ps.merge_logs(union, server) == union and ps.merge_logs(local, union) == union  # twice: nothing new
    altered = dataclasses.replace(local[0], right=True)
    with pytest.raises(ValueError, match="differs"):
        ps.merge_logs([altered], union)


@pytest.mark.parametrize(
    "row",
    [
        {"id": "x" * 32},
        "not a row",
        {"extra": 1},
        {"id": "ABC"},
        {"id": "g" * 32},
        {"rating": "easy"},
        {"origin": "elsewhere"},
        {"concept": 3},
        {"question": ["a"]},
        {"reviewed_at": "2026-03-02T10:00:00"},
        {"reviewed_at": "monday"},
        {"reviewed_at": 5},
    ],
)
def test_a_malformed_review_row_is_refused(row: object) -> None:
    good = ps.review_row(ps.new_review("optim.adamw", None, False, MONDAY, "local"))
    with pytest.raises(ValueError):
        ps.review_from_row({**good, **row} if isinstance(row, dict) else row)


def test_every_review_is_logged_and_the_entry_replayed_even_out_of_order(tmp_path: Path) -> None:
    with Store.open(tmp_path / "progress.db") as store:
        answered = ps.record_practice(
            store,
            "ada",
            "optim.adamw",
            True,
            MONDAY + timedelta(days=2),
            question="dropout-weight-decay/adamw-first-step",
            origin="local",
        )
        assert answered.streak == 1
        upload = ps.new_review("optim.adamw", None, False, MONDAY, "server")  # an upload graded late, made earlier
        (entry,) = ps.record_reviews(store, "ada", [upload])
        log = [ps.review_from_row(r) for r in store.practice_reviews("ada")]
        assert [r.at for r in log] == [MONDAY, MONDAY + timedelta(days=2)]
        assert entry == ps.replay("optim.adamw", log) and entry.streak == 1 and entry.reviewed == log[-1].at
        assert [ps.from_row(r) for r in store.practice_entries("ada")] == [entry]
        ps.record_reviews(store, "ada", [upload])  # the same review again: logged once
        assert len(store.practice_reviews("ada")) == 2 and store.practice_reviews("ben") == []
