"""Mutants of the reference graded as students: ``python bench/mutants.py [--seed S] [--limit N] [--sample 50]``.

A measure nobody tunes to (issue 31): mutmut's mutation operators (``pip install -e '.[bench]'``)
make every mutant of the reference's CPU topic files (``reference/<topic>.py``; ``base.py``, the
provided module contract, and ``reference/opencl/``, which needs a device, are left out), one
operator at one place per mutant: ``+`` for ``-``, ``*`` for ``/``, ``<`` for ``<=``, a number n
for n + 1, an argument removed, ``x = ...`` for ``x = None``, ``True`` for ``False``, and so on.
Each mutant that imports is handed in as a student's file of that topic and graded, in this
process's children (one fork per mutant, 120 s at most), by the hidden checks of the exercises its
mutated function belongs to (a method: its class; a module-level helper: every exercise of the file).

Printed per topic: mutants made, graded (those that import), killed (an exercise lost points), named
(every exercise that lost points names a mistake, catalogued or generic, on a failing check), crashed
(killed with every failing check an exception and no value to name), and which families named them.
``--sample N`` prints N named mutants drawn at random (seeded) with their change and what was said,
for a person to read (``--sample-values N``: among those named by what their values show, not by a
crash's cause): whether each name is true is recorded in docs/measured.md.
``--jsonl FILE`` keeps one line per mutant (its change, the scores and names) for later reading.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import time
import types
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout, for bench.* (never tests/)

# The reference files whose mutants are graded (reference/base.py is the provided module contract).
TOPICS = ("activations", "linear", "normalization", "dropout", "init", "optim", "gradcheck", "blocks", "approximation")
TIMEOUT = 120.0


@dataclass
class Mutant:
    """One mutant: where (topic, line), what changed (before -> after), the exercises it belongs to, its source."""

    key: str
    topic: str
    line: int
    before: str
    after: str
    exercises: list[str]
    source: str = field(repr=False)
    # The rule by which this mutant changes no behaviour the contract defines (NO_BEHAVIOUR), or None.
    no_behaviour: str | None = None


def make_mutants(topics: tuple[str, ...] = TOPICS) -> list[Mutant]:
    """Every mutant mutmut's operators make of ``reference/<topic>.py`` for each topic, in file order."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider
    from mutmut.mutation.file_mutation import create_mutations, deep_replace

    from grader.student.engine.catalogue import TOPIC_EXERCISES

    import os

    os.chdir(ROOT)  # mutmut reads its [tool.mutmut] section from ./pyproject.toml
    mutants: list[Mutant] = []
    for topic in topics:
        path = ROOT / "reference" / f"{topic}.py"
        code = path.read_text()
        module, mutations, _, _ = create_mutations(str(path), code)
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        owners = _owners(module, topic, TOPIC_EXERCISES[topic])
        raises = [(positions[node].start.line, positions[node].end.line) for node in _nodes(module, cst.Raise)]
        for number, mutation in enumerate(mutations):
            mutated = deep_replace(module, mutation.original_node, mutation.mutated_node)
            assert isinstance(mutated, cst.Module)  # (a node replaced inside a module leaves a module)
            position = positions.get(mutation.original_node)
            line = position.start.line if position else 0
            owner = mutation.contained_by_top_level_function or _statement_at(module, positions, line)
            exercises = owners.get(id(owner)) or [f"{topic}.{name}" for name in TOPIC_EXERCISES[topic]]
            before = _short(module.code_for_node(mutation.original_node))
            after = _short(module.code_for_node(mutation.mutated_node))
            mutants.append(
                Mutant(
                    key=f"{topic}:{number}",
                    topic=topic,
                    line=line,
                    before=before,
                    after=after,
                    exercises=exercises,
                    source=mutated.code,
                    no_behaviour=no_behaviour(before, after, any(a <= line <= b for a, b in raises)),
                )
            )
    return mutants


# Mutants that change nothing the exercise contract defines, by a rule decided before any grading (they are
# counted apart, never graded): spec section 1 hands every exercise float64 arrays, so a dtype=np.float64
# conversion dropped changes nothing; an attribute's initial None that forward overwrites before any use; the
# text of an exception's message (the checks judge an exception by its type, as the contract does).
NO_BEHAVIOUR = {
    "dtype": "a dtype=np.float64 conversion of float64 input dropped",
    "initial": 'an attribute\'s initial None replaced by "" (forward sets it before use)',
    "message": "the message of a raised exception",
}


def no_behaviour(before: str, after: str, in_raise: bool) -> str | None:
    """The NO_BEHAVIOUR rule a mutation (``before`` -> ``after``) falls under, or None."""
    if in_raise:
        return "message"

    def plain(text: str) -> str:
        for part in ("dtype=np.float64", "dtype=None"):
            text = text.replace(part, "")
        return text.replace(" ", "").replace(",)", ")")

    if "dtype=np.float64" in before and plain(before) == plain(after):
        return "dtype"
    if before.endswith("= None") and after.endswith('= ""'):
        return "initial"
    return None


def _nodes(module: Any, kind: type) -> list[Any]:
    """Every node of type ``kind`` in ``module``."""
    import libcst as cst

    found: list[Any] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind):
                found.append(node)
            return True

    module.visit(Collect())
    return found


def _short(text: str, width: int = 100) -> str:
    """One line of code, cut at ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _owners(module: Any, topic: str, names: list[str]) -> dict[int, list[str]]:
    """id(top-level function or method node) -> the exercise ids that run it.

    A method of an exercise class, or an exercise function, is that exercise's; a module-level helper
    belongs to every exercise whose code names it (directly or through other helpers).
    """
    import libcst as cst

    uses: dict[str, set[str]] = {}  # top-level name -> the names its body mentions
    nodes: dict[str, list[Any]] = {}  # top-level name -> its function nodes
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            name = statement.name.value
            uses[name] = {n.value for n in _names(statement)}
            if isinstance(statement, cst.FunctionDef):
                nodes[name] = [statement]
            else:
                nodes[name] = [item for item in statement.body.body if isinstance(item, cst.FunctionDef)]
        elif isinstance(statement, cst.SimpleStatementLine):  # a module-level constant such as _erfc = ...
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            uses[target.target.value] = {n.value for n in _names(small.value)}
                            nodes[target.target.value] = [statement]
    owners: dict[int, list[str]] = {}
    for name, functions in nodes.items():
        users = [f"{topic}.{e}" for e in names if e == name or name in _reach(e, uses)]
        for function in functions:
            owners[id(function)] = users
    return owners


def _statement_at(module: Any, positions: Any, line: int) -> Any:
    """The top-level statement of ``module`` that spans ``line`` (None when none does)."""
    for statement in module.body:
        where = positions.get(statement)
        if where and where.start.line <= line <= where.end.line:
            return statement
    return None


def _names(node: Any) -> list[Any]:
    """Every Name node under ``node``."""
    import libcst as cst

    found: list[Any] = []

    class Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

    node.visit(Collect())
    return found


def _reach(start: str, uses: dict[str, set[str]]) -> set[str]:
    """The top-level names ``start`` mentions, transitively."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for name in uses.get(todo.pop(), set()):
            if name in uses and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def load_mutant(mutant: Mutant) -> Any:
    """The reference namespace with ``mutant.topic`` replaced by the mutated module (relative imports: reference's)."""
    from grader.mistakes import reference_namespace

    import tempfile

    module = types.ModuleType(f"reference._mutant_{mutant.topic}")
    module.__package__ = "reference"
    folder = Path(tempfile.mkdtemp(prefix="mutant-"))  # the mutant's own file: what a trace reads and numbers
    module.__file__ = str(folder / f"{mutant.topic}.py")
    Path(module.__file__).write_text(mutant.source)
    exec(compile(mutant.source, module.__file__, "exec"), module.__dict__)
    ref = reference_namespace()
    from grader.student.engine.catalogue import CPU_TOPICS

    topics = {t: getattr(ref, t) for t in CPU_TOPICS}
    topics[mutant.topic] = module
    return types.SimpleNamespace(**topics)


def grade_mutant(mutant: Mutant, seed: int) -> dict[str, Any]:
    """{exercise: {score, max, failing: [(check, misconception, also, first line)]}}, or {"import_error": ...}."""
    import warnings

    from bench.in_process import grade_in_process

    from grader.student.engine.checks import CHECKS

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns = load_mutant(mutant)
    except Exception as exc:  # a mutant that does not import is not graded
        return {"import_error": f"{type(exc).__name__}: {exc}"}
    graded: dict[str, Any] = {}
    for exercise in mutant.exercises:
        results = grade_in_process(exercise, ns, seed)
        graded[exercise] = {
            "score": sum(r.score for r in results),
            "max": CHECKS[exercise].max_score,
            "failing": [
                [r.name, r.misconception, list(r.also), r.message.splitlines()[0] if r.message else "", r.message]
                for r in results
                if not r.passed
            ],
            "where": locate_mutant(mutant, ns, exercise, seed, [r.case for r in results if not r.passed and r.case]),
        }
    return graded


def locate_mutant(mutant: Mutant, ns: Any, exercise: str, seed: int, cases: list[str]) -> dict[str, Any] | None:
    """Where live grading locates the mutant on the first failing case that locates (as ``grade submit`` does:
    the case traced, aligned with the reference's by grader.course.align), or None."""
    from grader.course import align
    from grader.student.engine import trace
    from grader.student.engine.checks import CHECKS
    from grader.student.engine.ops import run_script

    by_name = {case.name: case for case in CHECKS[exercise].checked_plan(seed).cases}
    for name in list(dict.fromkeys(cases))[:2]:  # as grading.LOCATE_CASES
        run = trace.traced(by_name[name], mutant.topic)
        student = run_script(ns, run.script, run.arrays)
        where = align.locate(
            exercise,
            mutant.topic,
            student,
            align.reference_trace(by_name[name], mutant.topic),
            mutant.source,
            align.reference_source(mutant.topic),
        )
        if where is not None:
            return where
    return None


def _child(mutant: Mutant, seed: int, conn: Any) -> None:
    try:
        conn.send(grade_mutant(mutant, seed))
    except BaseException as exc:  # noqa: BLE001 - a grader failure is reported, not hidden
        conn.send({"grader_error": f"{type(exc).__name__}: {exc}"})
    conn.close()


def grade_forked(mutant: Mutant, seed: int) -> dict[str, Any]:
    """:func:`grade_mutant` in a forked child (a mutant may loop or exhaust memory), TIMEOUT seconds at most."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(mutant, seed, child))
    process.start()
    child.close()
    if parent.poll(TIMEOUT):
        try:
            outcome = parent.recv()
        except EOFError:
            outcome = {"grader_error": "the child died"}
    else:
        outcome = {"timeout": TIMEOUT}
    process.kill()
    process.join()
    return outcome


CRASH_FAMILIES = {"generic-none", "generic-call", "generic-shape", "generic-key", "generic-validation"}


def verdict(outcome: dict[str, Any]) -> str:
    """One of: 'not graded' (did not import), 'survived' (full marks), 'named' (every exercise that lost points
    names a mistake on a failing check), 'unnamed crash' (killed by an exception nothing names) or 'unnamed'."""
    if "import_error" in outcome or "grader_error" in outcome:
        return "not graded"
    if "timeout" in outcome:
        return "unnamed crash"
    lost = [r for r in outcome.values() if r["score"] < r["max"] - 1e-9]
    if not lost:
        return "survived"
    if all(any(f[1] for f in r["failing"]) for r in lost):
        return "named"
    if all(all(_is_crash(f[3]) for f in r["failing"]) for r in lost):
        return "unnamed crash"
    return "unnamed"


def _is_crash(first_line: str) -> bool:
    return " raised " in first_line or "returned None" in first_line or "timed out" in first_line


def families(outcome: dict[str, Any]) -> set[str]:
    """The families named: 'catalogue' for a catalogued id, else the generic family id."""
    names = set()
    for r in outcome.values():
        if not isinstance(r, dict) or "failing" not in r:
            continue
        for f in r["failing"]:
            for name in [f[1], *f[2]]:
                if name:
                    names.add(name if name.startswith("generic-") else "catalogue")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="the exercise seed (default: the audit's first)")
    parser.add_argument("--limit", type=int, default=0, help="grade a random N of the mutants (0: all)")
    parser.add_argument("--topics", nargs="*", default=list(TOPICS))
    parser.add_argument("--sample", type=int, default=0, help="print N named mutants drawn at random")
    parser.add_argument(
        "--sample-values",
        type=int,
        default=0,
        help="print N mutants named by what their values show (not by a crash's cause), drawn at random",
    )
    parser.add_argument(
        "--sample-located",
        type=int,
        default=0,
        help="print N named and located mutants drawn at random: the name, the line located and the"
        " mutated line, each with its code, for a person to read",
    )
    parser.add_argument(
        "--misses",
        action="store_true",
        help="print each killed mutant whose mutated line is not the line located (and what was)",
    )
    parser.add_argument("--jsonl", type=Path, default=None, help="write one JSON line per mutant")
    parser.add_argument("--keys", nargs="*", default=None, help="grade only these mutants (topic:number)")
    parser.add_argument("--draw", type=int, default=31, help="the random draws' seed")
    args = parser.parse_args()
    from bench import in_process as checks_util

    seed = checks_util.SEEDS[0] if args.seed is None else args.seed
    mutants = make_mutants(tuple(args.topics))
    made = Counter(m.topic for m in mutants)
    chosen = mutants
    if args.keys:
        chosen = [m for m in mutants if m.key in set(args.keys)]
    elif args.limit:
        chosen = random.Random(args.draw).sample(mutants, min(args.limit, len(mutants)))
    # the reference's results, computed once here and inherited by every forked child
    for exercise in sorted({e for m in chosen for e in m.exercises}):
        checks_util.reference_runs(exercise, seed)
    counts: dict[str, Counter] = defaultdict(Counter)
    by_family: Counter = Counter()
    rows = []
    start = time.time()
    out = args.jsonl.open("w") if args.jsonl else None
    for i, mutant in enumerate(chosen):
        outcome = grade_forked(mutant, seed)
        v = verdict(outcome)
        if mutant.no_behaviour:
            v = "no behaviour, killed" if v not in ("survived", "not graded") else "no behaviour"
        elif v == "named" and families(outcome) <= CRASH_FAMILIES:
            v = "named (crash)"
        for key in (mutant.topic, "all"):
            counts[key][v] += 1
        if v.startswith("named"):
            for family in families(outcome):
                by_family[family] += 1
        rows.append((mutant, outcome, v))
        if out:
            out.write(
                json.dumps(
                    {
                        "key": mutant.key,
                        "line": mutant.line,
                        "before": mutant.before,
                        "after": mutant.after,
                        "no_behaviour": mutant.no_behaviour,
                        "verdict": v,
                        "outcome": outcome,
                    }
                )
                + "\n"
            )
            out.flush()
        print(f"\r{i + 1}/{len(chosen)} graded, {time.time() - start:.0f} s", end="", file=sys.stderr)
    print(file=sys.stderr)
    print(
        f"mutants of reference/ (mutmut {_version()}'s operators), seed {seed}, graded in {time.time() - start:.0f} s"
    )
    columns = ("made", "no behav.", "graded", "killed", "named", "of them crash", "unnamed", "crash", "survived")
    print(f"  {'topic':<14}" + "".join(f"{c:>14}" for c in columns))
    for topic in [*args.topics, "all"]:
        c = counts[topic]
        row = _row(c)
        print(f"  {topic:<14}" + "".join(f"{n:>14}" for n in [made[topic] if topic != "all" else len(mutants), *row]))
    no_behaviour, graded, killed, named, crash_named, unnamed, crashed, survived = _row(counts["all"])
    print(
        f"  killed {killed} of {graded} graded ({100.0 * killed / max(1, graded):.1f}%); named {named} of {killed}"
        f" killed ({100.0 * named / max(1, killed):.1f}%), {named - crash_named} of them by what the values show"
        f" ({100.0 * (named - crash_named) / max(1, killed):.1f}% of killed), {crash_named} by the crash's cause alone"
    )
    print(
        f"  no behaviour by rule (NO_BEHAVIOUR, not counted as graded): {no_behaviour}, of which killed:"
        f" {counts['all']['no behaviour, killed']}; not importable: {counts['all']['not graded']}"
    )
    located = [row for row in rows if row[2].startswith("named") or row[2].startswith("unnamed")]
    at_line = [row for row in located if mutated_line_located(row[0], row[1])]
    anywhere = [row for row in located if any(r.get("where") for r in row[1].values() if isinstance(r, dict))]
    specific = [row for row in located if row[2] == "named" or row in at_line]
    print(
        f"  location (round 5): the mutated line located in {len(at_line)} of {len(located)} killed"
        f" ({100.0 * len(at_line) / max(1, len(located)):.1f}%), a line located in {len(anywhere)}"
        f" ({100.0 * len(anywhere) / max(1, len(located)):.1f}%); specific (named by the values, or the mutated"
        f" line located) {len(specific)} ({100.0 * len(specific) / max(1, len(located)):.1f}%)"
    )
    if args.sample_located:
        print_located_sample(rows, args.sample_located, args.draw)
    if args.misses:
        print("\n=== killed mutants not located at the mutated line")
        for mutant, outcome, v in located:
            if (mutant, outcome, v) in at_line:
                continue
            print(f"--- {mutant.key} (line {mutant.line}, {v}): {mutant.before}  ->  {mutant.after}")
            for exercise, r in outcome.items():
                where = r.get("where") if isinstance(r, dict) else None
                first = next((f[3] for f in r.get("failing", [])), "") if isinstance(r, dict) else ""
                print(
                    f"  {exercise}: "
                    + (f"line {where['line']}: {where['words'][:160]}" if where else f"nothing located ({first[:120]})")
                )
    print("  named by (mutants whose names include each): " + ", ".join(f"{k} {n}" for k, n in by_family.most_common()))
    for count, verdicts in ((args.sample, ("named", "named (crash)")), (args.sample_values, ("named",))):
        if not count:
            continue
        drawn = [row for row in rows if row[2] in verdicts]
        print(f"\n=== {min(count, len(drawn))} of the {len(drawn)} mutants {' or '.join(verdicts)}, drawn at random")
        for mutant, outcome, _ in random.Random(args.draw).sample(drawn, min(count, len(drawn))):
            print(f"\n--- {mutant.key} (line {mutant.line}): {mutant.before}  ->  {mutant.after}")
            for exercise, r in outcome.items():
                if r.get("where"):
                    print(f"  {exercise} located: line {r['where']['line']}: {r['where']['words'][:200]}")
                for f in r["failing"]:
                    if f[1]:
                        print(f"  {exercise} {f[0]}: {f[1]} {f[2] or ''}\n    " + f[4].splitlines()[0][:300])
                        break


def print_located_sample(rows: list[tuple[Mutant, dict[str, Any], str]], count: int, draw: int) -> None:
    """``count`` named mutants with a location, drawn at random (seeded): per mutant its change and mutated line,
    and per exercise that lost points the names said and the line located, each line with its code."""
    located = [
        row
        for row in rows
        if row[2].startswith("named") and any(isinstance(r, dict) and r.get("where") for r in row[1].values())
    ]
    print(f"\n=== {min(count, len(located))} of the {len(located)} named and located mutants, drawn at random")
    for mutant, outcome, _ in random.Random(draw).sample(located, min(count, len(located))):
        lines = mutant.source.splitlines()
        mutated = lines[mutant.line - 1].strip() if 0 < mutant.line <= len(lines) else ""
        at = "AT the mutated line" if mutated_line_located(mutant, outcome) else "elsewhere"
        print(f"\n--- {mutant.key}: {mutant.before}  ->  {mutant.after} ({at})")
        print(f"  mutated line {mutant.line}: {mutated[:160]}")
        for exercise, r in outcome.items():
            if not isinstance(r, dict) or r["score"] >= r["max"] - 1e-9:
                continue
            names = sorted({name for f in r["failing"] for name in [f[1], *f[2]] if name})
            where = r.get("where")
            print(f"  {exercise}: named {', '.join(names) or '(nothing)'}")
            if where:
                print(f"    located line {where['line']}: {where['code'][:140]}\n      {where['words'][:240]}")


def mutated_line_located(mutant: Mutant, outcome: dict[str, Any]) -> bool:
    """Whether some exercise the mutant lost points on is located at the mutated line."""
    return any(isinstance(r, dict) and (r.get("where") or {}).get("line") == mutant.line for r in outcome.values())


def _row(c: Counter) -> list[int]:
    """no behaviour, graded, killed, named, named by crash families only, unnamed, unnamed crash, survived."""
    named = c["named"] + c["named (crash)"]
    killed = named + c["unnamed"] + c["unnamed crash"]
    graded = killed + c["survived"]
    return [
        c["no behaviour"] + c["no behaviour, killed"],
        graded,
        killed,
        named,
        c["named (crash)"],
        c["unnamed"],
        c["unnamed crash"],
        c["survived"],
    ]


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


if __name__ == "__main__":
    main()
