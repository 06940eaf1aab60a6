"""Server-side render time of the instructor's dashboard for a generated class.

Target (issue 12): a class of 500 students renders in under 1 s server-side.

    python bench/dashboard.py                  # 500 students, median of 7 runs per page
    python bench/dashboard.py --students 200 --runs 5 --db /tmp/class.db

It writes a generated class (bench/sample_class.py: roster, uploads
over 30 days with named and unnamed failing checks, quiz answers, an
override) into a fresh database, builds the course server's application
(``grader.server.web.create_app``, no collector, no worker) and requests each
dashboard page and export in-process through Starlette's TestClient with the
instructor's Bearer token: the time is the server's whole work for a request
(authentication, the queries, the class report, the template), without the
network. It prints one row per page: the median and the slowest of the runs
in milliseconds, the median CPU time of the process for the request (what
the request costs when the machine is shared: wall time grows with the load
average, printed above the table), the response size, and whether the
median is under 1 s (the target of the pages; the downloads are timed too).
Exit status 1 when a page misses the target. Below the table: the CPU time of the
overview's class report with each cell's named mistake (issue 37) against
without (the overview before it), medians in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from starlette.testclient import TestClient

from grader import quiz as quiz_lib
from grader.student.course import Course, load_course

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for bench.sample_class
from bench import sample_class  # noqa: E402
from grader.server.app import ServerConfig  # noqa: E402
from grader.server.web import create_app  # noqa: E402
from grader.student.store import Store  # noqa: E402

TARGET_S = 1.0


def pages(student: str) -> list[tuple[str, str, bool]]:
    """(what, path, whether the 1 s target applies: pages yes, downloads no) of everything timed."""
    return [
        ("overview", "/instructor/", True),
        ("overview, struggling, by total", "/instructor/?struggling=1&sort=total&order=asc", True),
        ("student", f"/instructor/students/{student}", True),
        ("exercise", "/instructor/exercises/activations.ReLU", True),
        ("quiz items", "/instructor/quizzes", True),
        ("export: Canvas CSV", "/instructor/export/canvas.csv", False),
        ("export: Moodle CSV", "/instructor/export/moodle.csv", False),
        ("export: JSON", "/instructor/export/class.json", False),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--db", type=Path, default=None, help="where to write the class [a temporary file]")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    db = args.db or folder / "course.db"
    db.unlink(missing_ok=True)
    now = datetime.now(timezone.utc)
    quizzes = quiz_lib.load_all(quiz_lib.default_quiz_dir())
    started = time.perf_counter()
    with Store.open(db) as store:
        generated = sample_class.generate(store, args.students, quizzes, now)
        counts = {
            t: store.db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("attempts", "submissions", "check_results", "quiz_attempts")
        }
    course_file = folder / "course.toml"
    course_file.write_text(sample_class.course_toml(now), encoding="utf-8")
    print(
        f"generated {args.students} students in {time.perf_counter() - started:.1f} s: "
        + ", ".join(f"{n} {t}" for t, n in counts.items())
    )
    config = ServerConfig(db, f"sqlite://{folder / 'queue.db'}", course=load_course(course_file))
    headers = {"Authorization": f"Bearer {generated.instructor_token}"}
    student = sorted(generated.tokens)[3]
    failed = False
    with TestClient(create_app(config, run_collector=False)) as client:
        load = os.getloadavg()[0]
        print(f"\nload average {load:.1f} on {os.cpu_count()} cores; median of {args.runs} runs")
        print(f"{'page':<32} {'median ms':>10} {'max ms':>8} {'cpu ms':>8} {'bytes':>10}  < {TARGET_S:g} s")
        for what, path, target in pages(student):
            times, cpu, size = [], [], 0
            for _ in range(args.runs):
                t0, c0 = time.perf_counter(), time.process_time()
                response = client.get(path, headers=headers)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                if response.status_code != 200:
                    print(f"{what}: HTTP {response.status_code}: {response.text[:200]}", file=sys.stderr)
                    return 2
                size = len(response.content)
            median = statistics.median(times)
            failed = failed or (target and median >= TARGET_S)
            verdict = ("yes" if median < TARGET_S else "NO") if target else "(download)"
            print(
                f"{what:<32} {1000 * median:>10.0f} {1000 * max(times):>8.0f} "
                f"{1000 * statistics.median(cpu):>8.0f} {size:>10}  "
                f"{verdict}"
            )
    print_mistakes_cost(db, load_course(course_file), args.runs)
    return 1 if failed else 0


def print_mistakes_cost(db: Path, course: Course | None, runs: int) -> None:
    """What naming each cell's mistake costs the overview (issue 37): the class report built with the diagnosed
    mistakes against without them (the overview before), CPU time, medians of ``runs`` in the same run."""
    from grader.term import class_report

    def cpu(with_mistakes: bool) -> float:
        times = []
        with Store.open(db) as store:
            for _ in range(runs):
                c0 = time.process_time()
                class_report.build(store, course=course, with_items=False, with_mistakes=with_mistakes)
                times.append(time.process_time() - c0)
        return statistics.median(times)

    without, with_named = cpu(False), cpu(True)
    print(
        f"\noverview's class report, CPU ms: without named mistakes {1000 * without:.0f},"
        f" with (each cell names its mistake) {1000 * with_named:.0f}, ratio {with_named / without:.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
