"""What generic diagnoses cost: ``python bench/diagnosis_time.py [--runs N] [--mutants M]``.

Grades wrong submissions in process (the checks' evaluation, where diagnosis happens; the cases are
run once beforehand and reused) twice in the same run: with round 4's generic diagnoses and without
them (``generic.search.find`` returning None, round 3's rule alone), median of N runs (default 5) each. The
submissions: the mistake audit's buggy students (bench/mistake_class.py, catalogued
mistakes: the generic search runs only where the catalogue names nothing) and M mutants of the
reference drawn at random (bench/mutants.py: mostly mistakes no catalogue lists). A correct submission
fails no check and never reaches diagnosis (bench/grading.py times those). Also timed: the same
mutants graded offline, as the handout does, with only the data families (a case-pack-like Expected
without the reference's code).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(
    0, str(ROOT)
)  # the checkout, for bench.* (never tests/: its reference/ folder would shadow the package)

#: One wrong submission, run once: (exercise, label, the student's case results, the namespace it was loaded into).
Submission = tuple[str, str, dict[str, Any], Any]


@contextmanager
def without_generic() -> Iterator[None]:
    """Round 3's rule alone: no generic diagnosis is ever found."""
    from grader.student.engine.generic import search

    find, name_crashes = search.find, search.name_crashes
    search.find = lambda *args, **kwargs: None
    search.name_crashes = lambda ctx, results: results
    try:
        yield
    finally:
        search.find, search.name_crashes = find, name_crashes


class Offline:
    """What a case pack gives a Context (the reference's and the known mistakes' results), nothing that runs code."""

    live = False

    def __init__(self, live: Any) -> None:
        self._live = live
        self.mistakes = live.mistakes

    @property
    def reference(self) -> Any:
        return self._live.reference

    def variant(self, mistake_id: str, case: Any) -> Any:
        return self._live.variant(mistake_id, case)

    def combination(self, ids: list[str]) -> None:
        return None

    def verdict(self, check: str, mistake_id: str, compute: Any) -> Any:
        return compute()

    def live_check(self, name: str) -> Callable[..., Any]:
        """As a case pack's: data, never code (live_only checks do not run offline)."""
        from grader.student.engine.diagnosis import NeedsReference

        raise NeedsReference(f"check {name!r} needs the reference's code")

    def public_twin(self) -> None:
        """As a case pack's: no twin."""
        return None


def prepared(seed: int, mutants: int, draw: int) -> list[Submission]:
    """(exercise, label, the student's case results) of every submission, run once."""
    from bench import mistake_class as audit
    from bench.in_process import run_cases, variant_ns

    from bench import mutants as mutant_bench

    work: list[Submission] = []
    for student in list(audit.BUGGY) + list(audit.ROUND2) + list(audit.ROUND3):
        topic, name = student.exercise.split(".")
        ns = variant_ns(topic, **{name: audit.student_class(student)})
        work.append((student.exercise, f"audit {student.key}", run_cases(student.exercise, ns, seed), ns))
    chosen = [m for m in mutant_bench.make_mutants() if not m.no_behaviour]
    for mutant in random.Random(draw).sample(chosen, min(mutants, len(chosen))):
        try:
            ns = mutant_bench.load_mutant(mutant)
        except Exception:  # noqa: BLE001 - a mutant that does not import is not a submission
            continue
        for exercise in mutant.exercises:
            work.append((exercise, f"mutant {mutant.key}", run_cases(exercise, ns, seed), ns))
    return work


def evaluate_all(work: list[Submission], seed: int, offline: bool = False) -> float:
    """Seconds to evaluate every submission's checks (diagnosis included)."""
    from bench.in_process import reference_runs

    from grader.course.grading import LiveExpected
    from grader.student.engine.checks import CHECKS
    from grader.student.engine.diagnosis import Expected

    start = time.perf_counter()
    for exercise, _, student, _ in work:
        live = LiveExpected(exercise, reference_runs(exercise, seed))
        expected: Expected = Offline(live) if offline else live
        CHECKS[exercise].evaluate(student, expected, seed)
    return time.perf_counter() - start


def locate_all(work: list[Submission], seed: int) -> float:
    """Seconds to evaluate every submission and then locate its failing cases (round 5: each failing case, at
    most grading.LOCATE_CASES, traced and aligned with the reference's), the trace run in this process."""
    from bench.in_process import reference_runs

    from grader.course import align
    from grader.course.grading import LiveExpected
    from grader.student.engine import trace
    from grader.student.engine.checks import CHECKS
    from grader.student.engine.grading import LOCATE_CASES
    from grader.student.engine.ops import run_script

    start = time.perf_counter()
    for exercise, _, student, ns in work:
        definition = CHECKS[exercise]
        results = definition.evaluate(student, LiveExpected(exercise, reference_runs(exercise, seed)), seed)
        topic = exercise.split(".", 1)[0]
        by_name = {case.name: case for case in definition.checked_plan(seed).cases}
        failing = list(dict.fromkeys(r.case for r in results if not r.passed and r.case))[:LOCATE_CASES]
        source = Path(getattr(ns, topic).__file__).read_text() if failing else ""
        for name in failing:
            run = trace.traced(by_name[name], topic)
            traced = run_script(ns, run.script, run.arrays)
            align.locate(
                exercise,
                topic,
                traced,
                align.reference_trace(by_name[name], topic),
                source,
                align.reference_source(topic),
            )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mutants", type=int, default=60)
    parser.add_argument("--draw", type=int, default=7)
    args = parser.parse_args()
    import warnings

    from bench import in_process as checks_util

    warnings.simplefilter("ignore")
    seed = checks_util.SEEDS[0]
    work = prepared(seed, args.mutants, args.draw)
    audit_work = [w for w in work if w[1].startswith("audit")]
    mutant_work = [w for w in work if w[1].startswith("mutant")]
    evaluate_all(work, seed)  # warm: the reference's results, the catalogue's variants imported
    rows = []
    for label, subset, offline in (
        ("audit's buggy students (catalogued)", audit_work, False),
        ("mutants of the reference (live)", mutant_work, False),
        ("mutants of the reference (offline, data families)", mutant_work, True),
    ):
        with_times, without_times = [], []
        for _ in range(args.runs):
            with_times.append(evaluate_all(subset, seed, offline))
            with without_generic():
                without_times.append(evaluate_all(subset, seed, offline))
        a, b = statistics.median(with_times), statistics.median(without_times)
        rows.append((label, len(subset), a, b, a / b if b else float("nan")))
    print(f"evaluation of wrong submissions (the checks and their diagnosis), median of {args.runs} runs, seed {seed}")
    print(f"{'submissions':<52}{'runs':>6}{'with (s)':>11}{'round 3 (s)':>13}{'ratio':>8}{'ms/run':>9}")
    for label, n, a, b, ratio in rows:
        print(f"{label:<52}{n:>6}{a:>11.3f}{b:>13.3f}{ratio:>8.2f}{1000 * (a - b) / max(1, n):>9.1f}")
    print("(ms/run: the generic search's extra cost per exercise run)")
    located = [w for w in mutant_work if hasattr(w[3], "__dict__")]
    times, base = [], []
    for _ in range(args.runs):
        base.append(evaluate_all(located, seed))
        times.append(locate_all(located, seed))
    a, b = statistics.median(times), statistics.median(base)
    print(
        f"\nround 5: the same mutants evaluated and then located (traced in process; live grading runs the trace in"
        f" the sandbox, one more start of a worker), median of {args.runs} runs"
    )
    print(
        f"{'mutants of the reference (live)':<52}{len(located):>6}{a:>11.3f}{b:>13.3f}{a / b if b else 0:>8.2f}"
        f"{1000 * (a - b) / max(1, len(located)):>9.1f}   (with location, round 4, ratio, ms/run)"
    )


if __name__ == "__main__":
    main()
