"""Does `grade similarity` find planted copies and leave independent work alone?

    python bench/similarity.py              # the table below; --runs N for the timing's median

The class is bench/batch.py's generated class (``write_student``: the mix of
correct, partial, mistaken, crashing and looping hand-ins), stored as course
server uploads (``job_files``). That generator builds every student from the
reference solution, so apart from the edits its students' files are the same
code: on it, every pair of students is (rightly) reported, and it cannot show
that independent work stays below the threshold. So each generated student's
``dropout.py`` is replaced by one of seven independently written solutions of
the stub (bench/similarity_class/dropout_*.py: six written for this bench in
different styles, and the reference's), the way real students fill in the
same stub. Then two copies are planted: student 8 hands in student 2's file
unchanged, student 9 hands in student 4's with every name changed and the
layout reformatted (2-space indents, blank lines, comments and docstrings
removed).

Printed: per threshold, whether both planted pairs are found, the largest
share of any independent pair, and how many independent pairs reach it; then
the dropout pairs ranked; then the time of ``find_pairs`` over all CPU topics
(median of --runs). copydetect hashes with Python's salted hash(), so the
shares move by a few points from one process to the next: each run is a
process with its own PYTHONHASHSEED, and the table is the worst case.
"""

from __future__ import annotations

import argparse
import builtins
import io
import json
import keyword
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tokenize
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the checkout, for bench.batch

from bench.batch import kinds, write_student  # noqa: E402  (bench/batch.py: the generated class)

from grader.term import similarity  # noqa: E402
from grader.queue import records  # noqa: E402
from grader.student.course import DEFAULT_COURSE  # noqa: E402
from grader.student.store import Store  # noqa: E402
from grader.student.client.uploads import collect_files  # noqa: E402

CLASS = Path(__file__).resolve().parent / "similarity_class"
INDEPENDENT = 7
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def independent_dropout(k: int, reference_text: str) -> str:
    """Solution k of the dropout stub: the stub's text with a body of style k (0: the reference's file)."""
    if k == 0:
        return reference_text
    return (CLASS / f"dropout_{k}.py").read_text(encoding="utf-8")


def rename_and_reformat(text: str) -> str:
    """What a student hiding a copy does: every name of their own renamed (variables, parameters, their own
    attributes of self), 2-space indents, comments and docstrings dropped, a blank line after every line.
    Names of the language, of NumPy and of the stub's API (class, methods, self.p, self.rng, self.training)
    stay, or the code would no longer run."""
    keep = (
        set(keyword.kwlist)
        | set(dir(builtins))
        | {
            "np",
            "self",
            "Module",
            "annotations",
            "Dropout",
            "forward",
            "backward",
            "training",
            "rng",
            "p",
            "dtype",
            "size",
            "copy",
        }
    )
    names: dict[str, str] = {}
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    out = []
    previous = tokenize.NEWLINE
    for index, token in enumerate(tokens):
        kind, value = token.type, token.string
        if kind == tokenize.COMMENT:
            continue
        if kind == tokenize.STRING and previous in (tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT):
            value = "None"  # a docstring becomes a no-op expression, dropped below
        before = [t.string for t in tokens[max(0, index - 2) : index]]
        attribute = before[-1:] == ["."] and before[:1] != ["self"]
        imported = any(t.string in ("import", "from") for t in tokens[:index] if t.start[0] == token.start[0])
        if kind == tokenize.NAME and value not in keep and not attribute and not imported and value[:2] != "__":
            value = names.setdefault(value, f"{value[::-1]}_{len(names)}")
        out.append((kind, value))
        if kind not in (tokenize.NL, tokenize.COMMENT):
            previous = kind
    lines = []
    for line in tokenize.untokenize(out).splitlines():
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        if stripped.strip() in ("None", ""):
            continue
        lines.append("  " * depth + re.sub(r"\s+", " ", stripped))
        lines.append("")
    return "\n".join(lines) + "\n"


def build_class(root: Path) -> tuple[Path, dict[str, str]]:
    """The course database with the generated class's uploads and the planted copies; (db, copy -> original)."""
    db = root / "course.db"
    names = [f"s{k:02d}" for k in range(INDEPENDENT)]
    texts: dict[str, dict[str, str]] = {}
    for serial, (name, kind) in enumerate(zip(names, kinds(INDEPENDENT), strict=True)):
        folder = root / name
        write_student(folder, name, kind, serial)
        files = collect_files(folder / "exercises")
        files["dropout.py"] = independent_dropout(serial, files["dropout.py"])
        texts[name] = files
    planted = {"s08": "s02", "s09": "s04"}
    texts["s08"] = dict(texts["s02"])
    texts["s09"] = {**texts["s04"], "dropout.py": rename_and_reformat(texts["s04"]["dropout.py"])}
    with Store.open(db) as store:
        for name, files in texts.items():
            records.create_job(store, name, f"upload-{name}", files, [], DEFAULT_COURSE, datetime.now(timezone.utc))
    return db, planted


def one_run() -> dict[str, object]:
    """One measurement in this process: every dropout pair's share, and the time of find_pairs on all topics."""
    with tempfile.TemporaryDirectory() as tmp:
        db, planted = build_class(Path(tmp))
        with Store.open(db) as store:
            pairs = similarity.find_pairs(store, ["dropout"], threshold=0.01)
            start = time.perf_counter()
            everything = similarity.find_pairs(store)
            seconds = time.perf_counter() - start
    return {
        "share": {f"{p.a}~{p.b}": p.share for p in pairs},
        "planted": [f"{o}~{c}" for c, o in planted.items()],
        "seconds": seconds,
        "all": len(everything),
        "other": sum(p.topic != "dropout" for p in everything),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run()))
        return 0
    # copydetect hashes k-grams with Python's hash(), salted per process: each run is a process of its own
    runs = []
    for seed in range(args.runs):
        done = subprocess.run(
            [sys.executable, __file__, "--one"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed + 1)},
        )
        runs.append(json.loads(done.stdout))
    copies = runs[0]["planted"]
    students = INDEPENDENT + len(copies)
    print(
        f"dropout.py of {students} students ({INDEPENDENT} independent solutions, 2 planted copies: "
        f"{', '.join(copies)}, the second renamed and reformatted); {students * (students - 1) // 2} pairs; "
        f"{args.runs} runs (hash seeds 1..{args.runs}): worst case over the runs"
    )
    print(
        f"{'threshold':>9}  {'planted found (min)':>19}  {'largest independent':>19}  {'independent above (max)':>23}"
    )
    for threshold in THRESHOLDS:
        found = min(sum(r["share"].get(c, 0.0) >= threshold for c in copies) for r in runs)
        largest = max(max((v for k, v in r["share"].items() if k not in copies), default=0.0) for r in runs)
        above = max(sum(v >= threshold for k, v in r["share"].items() if k not in copies) for r in runs)
        print(f"{threshold:>9.0%}  {found:>17}/2  {largest:>19.0%}  {above:>23}")
    for c in copies:
        values = [r["share"].get(c, 0.0) for r in runs]
        print(f"planted {c}: {min(values):.0%} .. {max(values):.0%}")
    ranked = sorted(
        {k for r in runs for k in r["share"] if k not in copies},
        key=lambda k: -max(r["share"].get(k, 0.0) for r in runs),
    )[:3]
    print(
        "most similar independent pairs: "
        + ", ".join(f"{k} up to {max(r['share'].get(k, 0.0) for r in runs):.0%}" for k in ranked)
    )
    print(
        f"\nall CPU topics at the default threshold {similarity.THRESHOLD:.0%}: {runs[0]['all']} pairs, "
        f"{runs[0]['other']} of them in topics other than dropout (there the generator gives every student the "
        f"reference's code); find_pairs over {students} students and every CPU topic: median "
        f"{statistics.median(r['seconds'] for r in runs):.2f} s of {args.runs} runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
