"""How well known mistakes are named: ``python bench/audit.py [--seeds N]``.

Runs the mistake audit (``tests/test_mistake_audit.py``: independent student
submissions written from scratch, one, two or three mistakes each, plus
bugs the catalogue does not hold) through the hidden checks, in process, at
N seeds (default 2, the audit's own), and prints per topic, for the buggy
exercise runs:

- caught: the run lost points;
- named right: every true mistake is named on some failing check and nothing else is;
- partly: some true mistakes are named, none wrongly, some not;
- named wrong: a name that is not one of the student's mistakes (misleading);
- unnamed: a catalogued mistake, nothing named;
- honest: a bug the catalogue does not hold, and nothing named (right).

Each row is measured twice in the same run: with this grader's diagnosis
(part by part: combinations of known mistakes) and, as the baseline, with
round 2's rule only (a single mistake whose variant reproduces the student on
every case it affects), which is the same code with ``Context.part_by_part``
answering nothing. The correct alternatives of the audit are graded too:
"false fail" counts the correct ones that lose points.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

COLUMNS = ("runs", "caught", "named right", "partly", "named wrong", "unnamed", "honest")


def true_mistakes(student: Any) -> set[str]:
    """The catalogued mistakes a submission has (empty: a bug the catalogue does not hold)."""
    if hasattr(student, "mistakes"):
        return set(student.mistakes)
    return {student.named, *student.also} if student.named else set()


def judge(student: Any, seed: int) -> tuple[str, str]:
    """(topic, outcome) of one buggy run: one of COLUMNS[2:] (or 'missed' when it kept full marks)."""
    import test_mistake_audit as audit
    from grader.student.checks import CHECKS

    results = audit.grade_student(student, seed)
    topic = student.exercise.split(".")[0]
    if sum(r.score for r in results) >= CHECKS[student.exercise].max_score - 1e-9:
        return topic, "missed"
    failing = [r for r in results if not r.passed]
    names = {r.misconception for r in failing if r.misconception} | {m for r in failing for m in r.also}
    expected = true_mistakes(student)
    if names - expected:
        return topic, "named wrong"
    if not expected:
        return topic, "honest"
    if names == expected:
        return topic, "named right"
    return topic, "partly" if names else "unnamed"


@contextmanager
def round2_rule() -> Iterator[None]:
    """Diagnosis without part-by-part naming (round 2's rule), for the baseline."""
    from grader.student.checks.base import Context

    original = Context.part_by_part
    Context.part_by_part = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        Context.part_by_part = original  # type: ignore[method-assign]


def table(seeds: list[int]) -> dict[str, dict[str, dict[str, int]]]:
    """{rule: {topic: {column: count}}} over every buggy submission and seed, both rules."""
    import test_mistake_audit as audit

    buggy = list(audit.BUGGY) + list(audit.ROUND2) + list(audit.ROUND3)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for rule in ("round 3 (part by part)", "round 2 (baseline)"):
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        with (round2_rule() if rule.startswith("round 2") else _nothing()):
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
    import test_mistake_audit as audit
    from grader.student.checks import CHECKS

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
        lines.append(f"  named right: {named} of {catalogued} caught runs of catalogued mistakes"
                     f" ({100.0 * named / max(1, catalogued):.0f}%), named wrong: {total.get('named wrong', 0)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="seeds per submission (the audit's first N)")
    args = parser.parse_args()
    import checks_util

    seeds = list(checks_util.SEEDS) + [7, 4242, 99, 2**31 - 1]
    seeds = seeds[: max(1, args.seeds)]
    print(format_table(table(seeds)))
    lost, runs = false_fails(seeds)
    print(f"correct alternatives: {lost} false fails in {runs} runs")


if __name__ == "__main__":
    main()
