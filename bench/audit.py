"""How well known mistakes are named: ``python bench/audit.py [--seeds N]``.

Runs the mistake audit (its class in ``bench/mistake_class.py``: independent student
submissions written from scratch, one, two or three mistakes each, plus
bugs the catalogue does not hold) through the hidden checks, in process, at
N seeds (default 2, the audit's own), and prints per topic, for the buggy
exercise runs:

- caught: the run lost points;
- named right: every true mistake is named on some failing check and nothing else is;
- partly: some true mistakes are named, none wrongly, some not;
- named wrong: a name that is not one of the student's mistakes (misleading);
- unnamed: a catalogued mistake, nothing named;
- honest: a bug the catalogue does not hold, and no catalogued name (right); a generic diagnosis
  (round 4, ``generic-*``) may name what kind of wrong it is: those are listed with ``--generic`` for a
  person to read, and never count as named right or wrong.

Each row is measured twice in the same run: with this grader's diagnosis
(part by part: combinations of known mistakes) and, as the baseline, with
round 2's rule only (a single mistake whose variant reproduces the student on
every case it changes), put in place of ``Context.part_by_part`` for that run
(:func:`round2_diagnosis`). The correct alternatives of the audit are graded too:
"false fail" counts the correct ones that lose points. With ``--pairs N``,
up to N composable pairs of catalogued mistakes per exercise (their variants
composed: not independent code) are handed in too: "one named" is mostly a
mistake the other masks (backward ignoring the statistics hides a missing
mean term), "named wrong" would be a misleading name.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(
    0, str(ROOT)
)  # the checkout, for bench.* (never tests/: its reference/ folder would shadow the package)

COLUMNS = ("runs", "caught", "named right", "partly", "named wrong", "unnamed", "honest")


def true_mistakes(student: Any) -> set[str]:
    """The catalogued mistakes a submission has (empty: a bug the catalogue does not hold)."""
    if hasattr(student, "mistakes"):
        return set(student.mistakes)
    return {student.named, *student.also} if student.named else set()


GENERIC_SEEN: list[tuple[str, str, str]] = []  # (submission, check, the generic diagnosis's words), to be read


def judge(student: Any, seed: int) -> tuple[str, str]:
    """(topic, outcome) of one buggy run: one of COLUMNS[2:] (or 'missed' when it kept full marks).

    Judged by the catalogued names (ids outside the generic families): a generic diagnosis
    (``generic-*``, round 4) never makes a run "named right" or "named wrong"; each one given is kept in
    GENERIC_SEEN for a person to read (``--generic``).
    """
    from bench import mistake_class as audit
    from grader.student.engine.checks import CHECKS

    results = audit.grade_student(student, seed)
    topic = student.exercise.split(".")[0]
    if sum(r.score for r in results) >= CHECKS[student.exercise].max_score - 1e-9:
        return topic, "missed"
    failing = [r for r in results if not r.passed]
    given = {r.misconception for r in failing if r.misconception} | {m for r in failing for m in r.also}
    for r in failing:
        if r.misconception and r.misconception.startswith("generic-") or any(m.startswith("generic-") for m in r.also):
            GENERIC_SEEN.append((f"{student.key} (seed {seed})", r.name, r.message.splitlines()[0]))
    names = {n for n in given if not n.startswith("generic-")}
    expected = true_mistakes(student)
    if names - expected:
        return topic, "named wrong"
    if not expected:
        return topic, "honest"
    if names == expected:
        return topic, "named right"
    return topic, "partly" if names else "unnamed"


def round2_diagnosis(
    self: Any,
    case: str,
    keys: list[str],
    passes: list[list[str]],
    rtol: float,
    atol: float,
    match_error: bool = False,
    match_warnings: Any = False,
) -> Any:
    """Round 2's rule: the single mistake that reproduces the case and the student on every case it changes
    (of several, the one reproducing the most of the student's differences); no combinations."""
    for pass_keys in passes:
        if not pass_keys and not match_error and not match_warnings:
            continue
        found = [
            m
            for m in self.mistakes
            if self.reproduces(m, case, pass_keys, rtol, atol, match_error, match_warnings)
            and all(self.explains_case(m, name) for name in self.cases)
        ]
        if found:
            best = max(self.explained(m) for m in found)
            return next(m for m in found if self.explained(m) == best)
    return None


@contextmanager
def round2_rule() -> Iterator[None]:
    """Diagnosis by round 2's rule (:func:`round2_diagnosis` in place of part by part), for the baseline."""
    from grader.student.engine.checks.context import Context

    with patch.object(Context, "part_by_part", round2_diagnosis):
        yield


def table(seeds: list[int]) -> dict[str, dict[str, dict[str, int]]]:
    """{rule: {topic: {column: count}}} over every buggy submission and seed, both rules."""
    from bench import mistake_class as audit

    buggy = list(audit.BUGGY) + list(audit.ROUND2) + list(audit.ROUND3)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for rule in ("round 3 (part by part)", "round 2 (baseline)"):
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        with round2_rule() if rule.startswith("round 2") else _nothing():
            for student in buggy:
                for seed in seeds:
                    topic, outcome = judge(student, seed)
                    for key in (topic, "all"):
                        counts[key]["runs"] += 1
                        if outcome != "missed":
                            counts[key]["caught"] += 1
                            counts[key][outcome] += 1
        out[rule] = counts
    return out


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def false_fails(seeds: list[int]) -> tuple[int, int]:
    """(correct alternatives that lost points, runs)."""
    from bench import mistake_class as audit
    from grader.student.engine.checks import CHECKS

    correct = list(audit.CORRECT) + list(audit.ROUND2_CORRECT)
    lost = 0
    for student in correct:
        for seed in seeds:
            results = audit.grade_student(student, seed)
            lost += sum(r.score for r in results) < CHECKS[student.exercise].max_score - 1e-9
    return lost, len(correct) * len(seeds)


def format_table(counts: dict[str, dict[str, dict[str, int]]]) -> str:
    lines = []
    for rule, by_topic in counts.items():
        lines.append(f"{rule}")
        lines.append(f"  {'topic':<15}" + "".join(f"{c:>13}" for c in COLUMNS))
        for topic in sorted(by_topic, key=lambda t: (t == "all", t)):
            row = by_topic[topic]
            lines.append(f"  {topic:<15}" + "".join(f"{row.get(c, 0):>13}" for c in COLUMNS))
        total = by_topic["all"]
        named = total.get("named right", 0)
        catalogued = total.get("caught", 0) - total.get("honest", 0)
        lines.append(
            f"  named right: {named} of {catalogued} caught runs of catalogued mistakes"
            f" ({100.0 * named / max(1, catalogued):.0f}%), named wrong: {total.get('named wrong', 0)}"
        )
    return "\n".join(lines)


def pairs_table(per_exercise: int, seed: int) -> str:
    """Every exercise's composable pairs of known mistakes (up to ``per_exercise``, a fixed sample) handed in as
    students: how often both are named, one (the other masked or equivalent), a wrong one, none (judged by the
    catalogued names; generic diagnoses given beside them are kept in GENERIC_SEEN for reading)."""
    import itertools
    import random

    from bench.in_process import grade_in_process

    from grader.mistakes import compose, for_exercise
    from grader.student.engine.checks import CHECKS

    chooser = random.Random(1)
    lines = [
        f"  {'exercise':<32}"
        + "".join(f"{c:>13}" for c in ("pairs", "both named", "one named", "named wrong", "unnamed", "missed"))
    ]
    totals = [0] * 6
    for exercise in CHECKS:
        mistakes = for_exercise(exercise)
        pairs = [p for p in itertools.combinations(mistakes, 2) if compose(list(p)) is not None]
        chooser.shuffle(pairs)
        row = [0] * 6
        for a, b in pairs[:per_exercise]:
            both = compose([a, b])
            if both is None:  # (the pairs are those that compose)
                continue
            results = grade_in_process(exercise, both.namespace, seed)
            row[0] += 1
            if sum(r.score for r in results) >= CHECKS[exercise].max_score - 1e-9:
                row[5] += 1
                continue
            given = {r.misconception for r in results if r.misconception} | {m for r in results for m in r.also}
            for r in results:
                if (
                    not r.passed
                    and (r.misconception or "").startswith("generic-")
                    or any(m.startswith("generic-") for m in r.also)
                ):
                    GENERIC_SEEN.append((f"pair {a.id} + {b.id}", r.name, r.message.splitlines()[0]))
            names = {n for n in given if not n.startswith("generic-")}  # judged by the catalogued names
            if names - {a.id, b.id}:
                row[3] += 1
            elif names == {a.id, b.id}:
                row[1] += 1
            elif names:
                row[2] += 1
            else:
                row[4] += 1
        if row[0]:
            lines.append(f"  {exercise:<32}" + "".join(f"{n:>13}" for n in row))
            totals = [t + n for t, n in zip(totals, row, strict=True)]
    lines.append(f"  {'all':<32}" + "".join(f"{n:>13}" for n in totals))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds per submission (the audit's first N)")
    parser.add_argument(
        "--pairs", type=int, default=0, help="also hand in up to N composable pairs of catalogued mistakes per exercise"
    )
    parser.add_argument(
        "--generic",
        action="store_true",
        help="list every generic diagnosis given (round 4), with its words, for reading",
    )
    args = parser.parse_args()
    from bench import in_process as checks_util

    seeds = list(checks_util.SEEDS) + [7, 4242, 99, 2**31 - 1]
    seeds = seeds[: max(1, args.seeds)]
    print(format_table(table(seeds)))
    lost, runs = false_fails(seeds)
    print(f"correct alternatives: {lost} false fails in {runs} runs")
    if args.pairs:
        print(f"pairs of catalogued mistakes composed (variants, not independent code), seed {seeds[0]}:")
        print(pairs_table(args.pairs, seeds[0]))
    seen = {(who, words) for who, _, words in GENERIC_SEEN}
    print(
        f"generic diagnoses given beside the catalogue's names (both rules' runs and the pairs): {len(GENERIC_SEEN)}"
        f" checks, {len(seen)} distinct (submission, words)"
    )
    if args.generic:
        for who, words in sorted(seen):
            print(f"  {who}: {words[:240]}")


if __name__ == "__main__":
    main()
