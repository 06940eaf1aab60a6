"""Server-side render time of the student's own pages (/student/), against the API calls they are built on.

    python bench/student_pages.py                 # 60 uploads of every exercise, median of 7 runs per page
    python bench/student_pages.py --uploads 150 --runs 5

It writes one student with ``--uploads`` graded server uploads (each grading every exercise of the
catalogue, with the checks of a generated class: bench/sample_class.py) and a graded quiz chapter
into a fresh database, builds the course server's application (no collector, no worker) and requests each
page in-process through Starlette's TestClient with the student's Bearer token: the time is the server's
whole work for a request (authentication, the queries, the documents the API gives, the template), without
the network. The baseline, in the same run: ``GET /api/v1/submissions`` (the API's documents of the same
uploads, which the pages build on) and ``GET /api/v1/progress``. One row per request: the median and the
slowest wall time in milliseconds, the median CPU time, the response size, and the ratio of the median to
the API's list of submissions.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from starlette.testclient import TestClient

from grader import quiz as quiz_lib
from grader.server import roster
from grader.queue import records
from grader.server.app import ServerConfig
from grader.server.web import create_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for bench.sample_class
from bench.sample_class import _exercise_result  # noqa: E402
from grader.student.course import DEFAULT_COURSE  # noqa: E402
from grader.student.engine import catalogue  # noqa: E402
from grader.student.engine.model import GradeReport  # noqa: E402
from grader.student.store import Store  # noqa: E402


def write_student(db: Path, uploads: int) -> tuple[str, int]:
    """One student (ada) with ``uploads`` graded uploads an hour apart; (her token, the latest upload's id)."""
    rng = random.Random(35)
    start = datetime.now(timezone.utc) - timedelta(hours=uploads + 1)
    with Store.open(db) as store:
        token = roster.import_roster(store, [roster.RosterEntry("ada", "Ada", "ada@example.org")])[0][1]
        latest = 0
        for k in range(uploads):
            when = start + timedelta(hours=k)
            ids = list(catalogue.EXERCISES)
            job = records.create_job(
                store, "ada", f"upload-{k}", {"activations.py": "# code\n"}, ids, DEFAULT_COURSE, when
            ).job
            exercises = [_exercise_result(rng, e, min(0.95, 0.3 + 0.01 * k)) for e in ids]
            records.record_done(store, job, GradeReport("ada", exercises, f"h{k}"), "bench")
            latest = int(job["id"])
    return token, latest


def timed(client: TestClient, path: str, headers: dict[str, str], runs: int) -> tuple[list[float], list[float], int]:
    walls, cpus, size = [], [], 0
    for _ in range(runs):
        cpu, wall = time.process_time(), time.perf_counter()
        answer = client.get(path, headers=headers)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert answer.status_code == 200, f"{path}: {answer.status_code} {answer.text[:200]}"
        size = len(answer.content)
    return walls, cpus, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=60)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="student-pages-bench-"))
    db = folder / "course.db"
    started = time.perf_counter()
    token, latest = write_student(db, args.uploads)
    print(
        f"wrote {args.uploads} uploads of {len(catalogue.EXERCISES)} exercises in "
        f"{time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f}"
    )
    config = ServerConfig(db, f"sqlite:///{folder / 'queue.db'}", quiz_dir=quiz_lib.default_quiz_dir())
    headers = {"Authorization": f"Bearer {token}"}
    requests = [
        ("API: GET /api/v1/submissions (baseline)", "/api/v1/submissions"),
        ("API: GET /api/v1/progress", "/api/v1/progress"),
        ("page: /student/", "/student/"),
        ("page: a chapter (activations)", "/student/chapters/activations"),
        ("page: the latest upload", f"/student/submissions/{latest}"),
        ("page: a quiz (normalization)", "/student/quizzes/normalization"),
    ]
    rows = []
    with TestClient(create_app(config, run_collector=False), base_url="http://127.0.0.1") as client:
        for what, path in requests:
            client.get(path, headers=headers)  # warm: templates compiled, caches filled
            walls, cpus, size = timed(client, path, headers, args.runs)
            rows.append((what, statistics.median(walls), max(walls), statistics.median(cpus), size))
    baseline = rows[0][1]
    print(f"{'request':42} {'median ms':>10} {'slowest':>8} {'CPU ms':>7} {'size KB':>8} {'x API':>6}")
    for what, median, slowest, cpu, size in rows:
        print(
            f"{what:42} {1000 * median:10.1f} {1000 * slowest:8.1f} {1000 * cpu:7.1f} {size / 1024:8.1f} "
            f"{median / baseline:6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
