"""LTI 1.3 on loopback: a launch's round trip, 200 score posts through the queue, a Redis restart mid-posting.

    python bench/lti.py                       # 20 launches, 200 scores, 3 runs of each
    python bench/lti.py --scores 50 --runs 1  # quicker

Everything runs on free 127.0.0.1 ports in a fresh folder: the LMS fixture
of the tests (tests/lms_platform.py: issuer, JWKS, OIDC auth, token, AGS),
the course server (``create_app`` under uvicorn in a thread), redis-server
(persistence off) and ``grade worker --workers 2`` processes.

Rows:

- **launch round trip**: login initiation -> the platform's auth -> the
  id_token POSTed back and validated (JWKS cached after the first) -> the
  signed-in page; against a plain ``GET /api/v1/me`` (one token lookup) on
  the same server as the baseline;
- **N score posts** through the embedded SqliteHuey queue and through Redis:
  N learners' overrides change a counted score at once; the server's
  ScorePoster makes the outbox rows, the line item and the service token,
  enqueues N ``post_score`` tasks; the workers POST them; the time is until
  every row is ``posted`` (its result collected). Baseline: the same N
  scores POSTed one after the other by one client, no queue;
- **Redis restart**: the Redis run again, but redis-server is killed and
  started empty on the same port once a quarter of the scores arrived;
  "received" counts the distinct learners whose score the LMS holds (N of N:
  none lost), "sent twice" the posts the LMS got more than once (a lost
  result makes the server send again; AGS keeps the latest timestamp).

Each figure is the median over --runs runs (launch: over every launch of every run).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User, form_fields  # noqa: E402
from server_util import HOST, Redis, free_port, issue_tokens, start_worker, stop_process, wait_for  # noqa: E402

from grader.server import lti, lti_services  # noqa: E402
from grader.server.app import ServerConfig, create_app  # noqa: E402
from grader.student.course import DEFAULT_COURSE  # noqa: E402
from grader.student.store import Store, utc_now  # noqa: E402


@dataclass
class Tool:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve(app: Any) -> Tool:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the tool to listen")
    return Tool(f"http://{HOST}:{port}", server, thread)


def platform(db: Path, users: dict[str, User]) -> LmsPlatform:
    lms = LmsPlatform()
    lms.users = users

    def tool_jwks() -> dict[str, Any]:
        with Store.open(db) as own:
            return lti.public_jwks(own)

    lms.tool_jwks = tool_jwks
    return lms.start()


def course_for(lms: LmsPlatform) -> Any:
    return DEFAULT_COURSE.__class__(name="bench", lti=lms.lti_table(contexts=[lms.context_id]))


# --- the launch ---------------------------------------------------------------------------------------


def launch_times(folder: Path, launches: int) -> tuple[list[float], list[float]]:
    """(launch round trips, GET /me round trips) in seconds."""
    db = folder / "launch.db"
    tokens, _ = issue_tokens(db, ["s1"])
    lms = platform(db, {"ada": User("lms-ada", "Ada", "ada@example.org", [LEARNER])})
    app = create_app(ServerConfig(db, f"sqlite:///{folder / 'launch-queue.db'}", course_for(lms)), run_collector=False)
    app.state.lti_poster_enabled = False
    tool = serve(app)
    lms.tool_url = tool.url
    trips, plain = [], []
    try:
        with httpx.Client(base_url=tool.url, timeout=30) as client, httpx.Client(timeout=30) as browser_lms:
            for i in range(launches + 1):
                start = time.perf_counter()
                redirect = client.post("/lti/login", data={
                    "iss": lms.issuer, "login_hint": "ada", "target_link_uri": tool.url + "/lti/launch",
                    "client_id": lms.client_id, "lti_deployment_id": lms.deployment_id})
                form = form_fields(browser_lms.get(redirect.headers["location"]).text)
                page = client.post("/lti/launch", data=form)
                elapsed = time.perf_counter() - start
                assert page.status_code == 200 and "url=/student/" in page.text, page.text[:300]
                begin = time.perf_counter()
                me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {tokens['s1']}"})
                plain_elapsed = time.perf_counter() - begin
                assert me.status_code == 200
                if i:  # the first launch also fetches the platform's JWKS: left out, like a warm server
                    trips.append(elapsed)
                    plain.append(plain_elapsed)
    finally:
        tool.stop()
        lms.stop()
    return trips, plain


# --- score posting ------------------------------------------------------------------------------------


def prepare(folder: Path, n: int, tag: str, with_scores: bool = True) -> tuple[Path, LmsPlatform, list[str]]:
    """A course database with n learners in one LMS context, each with a counted score to send."""
    db = folder / f"{tag}.db"
    students = [f"s{i:04d}" for i in range(n)]
    issue_tokens(db, students)
    users = {s: User(f"lms-{s}", s, f"{s}@example.org", [LEARNER]) for s in students}
    users["prof"] = User("lms-prof", "Prof", "prof@example.org", [INSTRUCTOR])
    lms = platform(db, users)
    with Store.open(db) as store:
        lti.ensure_tables(store)
        lti.signing_key(store)
        key = lti.context_key(lms.issuer, lms.deployment_id, lms.context_id)
        with store.transaction() as d:
            d["lti_contexts"].insert({
                "key": key, "issuer": lms.issuer, "client_id": lms.client_id, "deployment_id": lms.deployment_id,
                "context_id": lms.context_id, "title": "bench", "memberships_url": "",
                "lineitems_url": f"{lms.url}/ags/{lms.context_id}/lineitems", "scopes": "[]",
                "updated_at": utc_now()})
            for s in students:
                d["lti_users"].insert({"issuer": lms.issuer, "sub": f"lms-{s}", "student": s})
                d["lti_members"].insert({"context_key": key, "sub": f"lms-{s}", "student": s, "role": "learner",
                                         "status": "active", "updated_at": utc_now()})
        if with_scores:
            give_scores(store, students)
    return db, lms, students


def give_scores(store: Store, students: list[str]) -> None:
    """An override of 7 points on activations.ReLU for each student (one transaction)."""
    with store.transaction() as d:
        for s in students:
            d["score_overrides"].insert({"student": s, "exercise": "activations.ReLU", "score": 7.0,
                                         "comment": "bench", "author": "bench", "created_at": utc_now()})


def restart_redis(redis: Redis) -> None:
    """Kill redis-server and start it again, empty, on the same port."""
    import redis as redis_lib

    assert redis.proc is not None
    redis.proc.kill()
    redis.proc.wait(timeout=30)
    redis.proc = subprocess.Popen(
        ["redis-server", "--bind", HOST, "--port", str(redis.port), "--save", "", "--appendonly", "no",
         "--dir", str(redis.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    client = redis_lib.Redis(host=HOST, port=redis.port)

    def pong() -> bool:
        try:
            return bool(client.ping())
        except redis_lib.exceptions.ConnectionError:
            return False

    wait_for(pong, 30, "redis-server to answer again")
    client.close()


@dataclass
class PostResult:
    seconds: float
    received: int
    twice: int


def post_scores(folder: Path, n: int, queue_kind: str, restart: bool, tag: str) -> PostResult:
    """n score changes at once through the queue, timed once the workers are up (a warm-up score went first)."""
    db, lms, students = prepare(folder, n + 1, tag, with_scores=False)
    redis = Redis(folder).start() if queue_kind == "redis" else None
    queue_url = redis.url if redis else f"sqlite:///{folder / (tag + '-queue.db')}"
    worker = start_worker(queue_url, 2, folder / f"{tag}-worker.log")
    poster = lti_services.ScorePoster(db, queue_url, course_for(lms), [], interval=0.05, lost_after=5.0)

    def posted() -> int:
        with Store.open(db) as store:
            return lti_services.score_counts(store).get("posted", 0)

    try:
        poster.start()
        with Store.open(db) as store:
            give_scores(store, students[:1])  # the warm-up: the line item, the token, the workers started
        wait_for(lambda: posted() == 1, 300, "the warm-up score", interval=0.05)
        start = time.perf_counter()
        with Store.open(db) as store:
            give_scores(store, students[1:])
        if restart:
            assert redis is not None
            wait_for(lambda: len(lms.scores) >= 1 + n // 4, 300, "a quarter of the scores", interval=0.01)
            restart_redis(redis)
        wait_for(lambda: posted() == n + 1, 600, f"{n} scores posted", interval=0.05)
        seconds = time.perf_counter() - start
    finally:
        poster.stop()
        poster.join(timeout=30)
        stop_process(worker)
        if redis:
            redis.stop()
        lms.stop()
    received = {s["userId"] for s in lms.scores if s["scoreGiven"] == 7.0} - {f"lms-{students[0]}"}
    return PostResult(seconds, len(received), len(lms.scores) - 1 - len(received))


def direct_posts(folder: Path, n: int) -> float:
    """The baseline: the same n scores POSTed one after the other by one client (token fetched once)."""
    db, lms, students = prepare(folder, n, "direct")
    try:
        with Store.open(db) as store:
            connector = lti_services.ServiceConnector(store)
            platform_ = lti.parse_lti(lms.lti_table()).platforms[0]
            context = lti_services.contexts(store)[0]
            start = time.perf_counter()
            url = lti_services.ensure_line_item(store, connector, platform_, context, "exercises:activations",
                                                "Exercises: activations", 80.0)
            token = connector.token(platform_, [lti_services.SCOPE_LINEITEM, lti_services.SCOPE_SCORE])
            for s in students:
                answer = connector.client.post(lti_services.scores_url(url), json={
                    "userId": f"lms-{s}", "scoreGiven": 7.0, "scoreMaximum": 80.0, "activityProgress": "Submitted",
                    "gradingProgress": "FullyGraded", "timestamp": lti_services.now_iso()},
                    headers={"Authorization": f"Bearer {token}", "Content-Type": lti_services.SCORE_TYPE})
                assert answer.status_code == 204
            seconds = time.perf_counter() - start
            connector.close()
    finally:
        lms.stop()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--scores", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    med = statistics.median
    trips: list[float] = []
    plain: list[float] = []
    rows: dict[str, list[PostResult]] = {"sqlite": [], "redis": [], "redis, restarted mid-posting": []}
    direct: list[float] = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="normgrade-bench-lti-") as tmp:
            folder = Path(tmp)
            t, p = launch_times(folder, args.launches)
            trips += t
            plain += p
            direct.append(direct_posts(folder, args.scores))
            rows["sqlite"].append(post_scores(folder, args.scores, "sqlite", False, f"sqlite{run}"))
            rows["redis"].append(post_scores(folder, args.scores, "redis", False, f"redis{run}"))
            rows["redis, restarted mid-posting"].append(
                post_scores(folder, args.scores, "redis", True, f"restart{run}"))
    print(f"LTI on loopback: {args.launches} launches and {args.scores} score posts, median of {args.runs} run(s)")
    print()
    print("| what | median | p95 | baseline (same run) | ratio |")
    print("|---|---|---|---|---|")
    p95 = sorted(trips)[max(0, int(0.95 * len(trips)) - 1)]
    print(f"| launch round trip (login -> auth -> launch page) | {1000 * med(trips):.1f} ms | {1000 * p95:.1f} ms "
          f"| GET /api/v1/me {1000 * med(plain):.1f} ms | {med(trips) / med(plain):.1f}x |")
    base = med(direct)
    print()
    print(f"| {args.scores} score posts | until all posted | posts/s | received (distinct learners) | "
          f"sent twice | vs direct POSTs ({base:.2f} s) |")
    print("|---|---|---|---|---|---|")
    for label, results in rows.items():
        seconds = med(r.seconds for r in results)
        received = min(r.received for r in results)
        twice = max(r.twice for r in results)
        print(f"| through the queue: {label} | {seconds:.2f} s | {args.scores / seconds:.0f} | "
              f"{received}/{args.scores} | {twice} | {seconds / base:.1f}x |")


if __name__ == "__main__":
    main()
