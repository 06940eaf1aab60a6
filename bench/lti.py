"""LTI 1.3 on loopback: a launch's round trip, 200 score posts through the queue, a Redis restart mid-posting.

    python bench/lti.py                       # 20 launches, 200 scores, 3 runs of each
    python bench/lti.py --scores 50 --runs 1  # quicker

Everything runs on free 127.0.0.1 ports in a fresh folder: the LMS fixture
of the tests (bench/lms_platform.py: issuer, JWKS, OIDC auth, token, AGS),
the course server (``create_app`` under uvicorn in a thread), redis-server
(persistence off) and ``grade worker --workers 2`` processes.

Rows:

- **launch round trip**: login initiation -> the platform's auth -> the
  id_token POSTed back and validated (JWKS cached after the first) -> the
  signed-in page; against a plain ``GET /api/v1/me`` (one token lookup) on
  the same server as the baseline;
- **N score posts** through the embedded SqliteHuey queue and through Redis:
  N learners, each of whom launched the tool from the LMS course (as in
  tests/server/test_lti.py: the launch keeps the context's AGS claim and makes
  the learner a member; not timed), get overrides changing a counted score at
  once; the server's ScorePoster (a thread of this process, which serves the
  database) makes the outbox rows, the line item and the service token,
  enqueues N ``post_score`` tasks; the workers POST them; the time is until
  every row is ``posted`` (its result collected). Baseline: the same N
  scores POSTed one after the other by one client, no queue;
- **Redis restart**: the Redis run again, but redis-server is killed and
  started empty on the same port once a quarter of the scores arrived;
  "received" counts the distinct learners whose score the LMS holds (N of N:
  none lost), "sent twice" the posts the LMS got more than once (a lost
  result makes the server send again; AGS keeps the latest timestamp).

Each figure is the median over --runs runs (launch: over every launch of every run). A wait that makes
no progress for a minute fails with what the score outbox holds.
"""

from __future__ import annotations

import argparse
import math
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
sys.path.insert(
    0, str(REPO)
)  # the checkout, for bench.* (never tests/: its reference/ folder would shadow the package)

from bench.lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User, form_fields, launch  # noqa: E402
from bench.procs import HOST, Redis, free_port, issue_tokens, start_worker, stop_process, wait_for  # noqa: E402
from grader.server import lti, lti_services  # noqa: E402
from grader.server.app import ServerConfig  # noqa: E402
from grader.server.web import create_app  # noqa: E402
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
                redirect = client.post(
                    "/lti/login",
                    data={
                        "iss": lms.issuer,
                        "login_hint": "ada",
                        "target_link_uri": tool.url + "/lti/launch",
                        "client_id": lms.client_id,
                        "lti_deployment_id": lms.deployment_id,
                    },
                )
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


@dataclass
class Prepared:
    """A course served by the tool (this process claims its database, as ``grade serve`` does), with n learners
    who launched the tool from one LMS course."""

    db: Path
    lms: LmsPlatform
    students: list[str]
    tool: Tool
    config: ServerConfig

    def stop(self) -> None:
        self.tool.stop()  # the lifespan's end gives the database back
        self.lms.stop()


def prepare(folder: Path, n: int, tag: str, queue_url: str) -> Prepared:
    """A course database with n learners in one LMS context, set up as tests/server/test_lti.py does it.

    Each learner launches the tool from the LMS course (its ``poster`` fixture:
    ``launch(client, lms, "ada")``): the launch keeps the context with its AGS
    claim (the line items URL and the granted scopes, which decide whether a
    context receives scores at all: ``lti_services.ags_mode``) and makes the
    learner a member, matched to the roster by e-mail. The tool's own score
    poster is off (``lti_poster_enabled``); the bench runs one beside it.
    """
    db = folder / f"{tag}.db"
    students = [f"s{i:04d}" for i in range(n)]
    issue_tokens(db, students)
    users = {s: User(f"lms-{s}", s, f"{s}@example.org", [LEARNER]) for s in students}
    users["prof"] = User("lms-prof", "Prof", "prof@example.org", [INSTRUCTOR])
    lms = platform(db, users)
    config = ServerConfig(db, queue_url, course_for(lms))
    try:
        app = create_app(config, run_collector=False)
        app.state.lti_poster_enabled = False
        tool = serve(app)
    except BaseException:
        lms.stop()
        raise
    lms.tool_url = tool.url
    prepared = Prepared(db, lms, students, tool, config)
    try:
        with httpx.Client(base_url=tool.url, timeout=30) as client:
            for s in students:
                page = launch(client, lms, s)
                assert page.status_code == 200 and "url=/student/" in page.text, page.text[:300]
        with Store.open(db) as store:
            contexts = lti_services.contexts(store, lti.platforms_of(config.course))
            members = store.db.execute(
                "SELECT count(*) FROM lti_members WHERE role = 'learner' AND status = 'active'"
            ).fetchone()[0]
        modes = [lti_services.ags_mode(c) for c in contexts]
        assert modes == ["columns"] and members == n, f"after {n} launches: contexts {modes}, {members} learners"
    except BaseException:
        prepared.stop()
        raise
    return prepared


def give_scores(store: Store, students: list[str]) -> None:
    """An override of 7 points on activations.ReLU for each student (one transaction)."""
    with store.transaction() as d:
        for s in students:
            d.table("score_overrides").insert(
                {
                    "student": s,
                    "exercise": "activations.ReLU",
                    "score": 7.0,
                    "comment": "bench",
                    "author": "bench",
                    "created_at": utc_now(),
                }
            )


def restart_redis(redis: Redis) -> None:
    """Kill redis-server and start it again, empty, on the same port."""
    import redis as redis_lib

    assert redis.proc is not None
    redis.proc.kill()
    redis.proc.wait(timeout=30)
    redis.proc = subprocess.Popen(
        [
            "redis-server",
            "--bind",
            HOST,
            "--port",
            str(redis.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(redis.folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
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


STALL_S = 60.0  # a step that makes no progress for this long fails: a broken setup stops within a minute


def wait_steps(count: Any, target: int, what: str, explain: Any, interval: float = 0.05) -> None:
    """Poll ``count()`` until it reaches ``target``; fail when it has not grown for STALL_S seconds, with
    ``explain()`` (what the outbox holds) in the message. Progress, not a fixed timeout: a large --scores
    on a slow machine goes on as long as scores keep arriving."""
    best, since = -1, time.monotonic()
    while True:
        now_count = count()
        if now_count >= target:
            return
        if now_count > best:
            best, since = now_count, time.monotonic()
        elif time.monotonic() - since > STALL_S:
            raise AssertionError(
                f"no progress for {STALL_S:.0f} s waiting for {what} ({now_count} of {target}); {explain()}"
            )
        time.sleep(interval)


def outbox(store: Store) -> str:
    """What the score outbox and the contexts say: for a failure's message."""
    contexts = [f"{c['context_id']}: {lti_services.ags_mode(c)}" for c in lti_services.contexts(store)]
    errors = sorted({r["error"] for r in lti_services.pending_scores(store) if r["error"]})
    return f"outbox {lti_services.score_counts(store) or 'empty'}, contexts {contexts}, errors {errors[:3]}"


def post_scores(folder: Path, n: int, queue_kind: str, restart: bool, tag: str) -> PostResult:
    """n score changes at once through the queue, timed once the workers are up (a warm-up score went first)."""
    redis = Redis(folder).start() if queue_kind == "redis" else None
    queue_url = redis.url if redis else f"sqlite:///{folder / (tag + '-queue.db')}"
    worker = None
    poster = None
    prepared = None
    try:
        prepared = prepare(folder, n + 1, tag, queue_url)
        db, lms, students = prepared.db, prepared.lms, prepared.students
        worker = start_worker(queue_url, 2, folder / f"{tag}-worker.log")
        # the poster fixture's thread, ticking on its own clock: this process serves the database, as the
        # server whose thread it is does
        poster = lti_services.ScorePoster(db, queue_url, prepared.config.course, [], interval=0.05, lost_after=5.0)
        poster.start()
        with Store.open(db) as store:

            def posted() -> int:
                return lti_services.score_counts(store).get("posted", 0)

            def explain() -> str:
                log = (folder / f"{tag}-worker.log").read_text(errors="replace").strip().splitlines()[-3:]
                return f"{outbox(store)}; worker log: {' | '.join(log) or 'empty'}"

            give_scores(store, students[:1])  # the warm-up: the line item, the token, the workers started
            wait_steps(posted, 1, "the warm-up score", explain)
            start = time.perf_counter()
            give_scores(store, students[1:])
            if restart:
                assert redis is not None
                wait_steps(lambda: len(lms.scores), 1 + n // 4, "a quarter of the scores", explain, interval=0.01)
                restart_redis(redis)
            wait_steps(posted, n + 1, f"{n} scores posted", explain)
            seconds = time.perf_counter() - start
    finally:
        if poster is not None:
            poster.stop()
            poster.join(timeout=30)
        if worker is not None:
            stop_process(worker)
        if prepared is not None:
            prepared.stop()
        if redis:
            redis.stop()
    received = {s["userId"] for s in lms.scores if s["scoreGiven"] == 7.0} - {f"lms-{students[0]}"}
    return PostResult(seconds, len(received), len(lms.scores) - 1 - len(received))


def direct_posts(folder: Path, n: int) -> float:
    """The baseline: the same n scores POSTed one after the other by one client (token fetched once)."""
    prepared = prepare(folder, n, "direct", f"sqlite:///{folder / 'direct-queue.db'}")
    students = prepared.students
    try:
        with Store.open(prepared.db) as store:
            connector = lti_services.ServiceConnector(store)
            platform_ = lti.platforms_of(prepared.config.course).platforms[0]
            context = lti_services.contexts(store)[0]
            start = time.perf_counter()
            url = lti_services.ensure_line_item(
                store, connector, platform_, context, "exercises:activations", "Exercises: activations", 80.0
            )
            token = connector.token(platform_, lti_services.token_scopes(context))
            for s in students:
                answer = connector.client.post(
                    lti_services.scores_url(url),
                    json={
                        "userId": f"lms-{s}",
                        "scoreGiven": 7.0,
                        "scoreMaximum": 80.0,
                        "activityProgress": "Submitted",
                        "gradingProgress": "FullyGraded",
                        "timestamp": lti_services.now_iso(),
                    },
                    headers={"Authorization": f"Bearer {token}", "Content-Type": lti_services.SCORE_TYPE},
                )
                assert answer.status_code == 204
            seconds = time.perf_counter() - start
            connector.close()
    finally:
        prepared.stop()
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
                post_scores(folder, args.scores, "redis", True, f"restart{run}")
            )
    print(f"LTI on loopback: {args.launches} launches and {args.scores} score posts, median of {args.runs} run(s)")
    print()
    print("| what | median | p95 | baseline (same run) | ratio |")
    print("|---|---|---|---|---|")
    p95 = sorted(trips)[max(0, math.ceil(0.95 * len(trips)) - 1)]  # nearest rank
    print(
        f"| launch round trip (login -> auth -> launch page) | {1000 * med(trips):.1f} ms | {1000 * p95:.1f} ms "
        f"| GET /api/v1/me {1000 * med(plain):.1f} ms | {med(trips) / med(plain):.1f}x |"
    )
    base = med(direct)
    print()
    print(
        f"| {args.scores} score posts | until all posted | posts/s | received (distinct learners) | "
        f"sent twice | vs direct POSTs ({base:.2f} s) |"
    )
    print("|---|---|---|---|---|---|")
    for label, results in rows.items():
        seconds = med(r.seconds for r in results)
        received = min(r.received for r in results)
        twice = max(r.twice for r in results)
        print(
            f"| through the queue: {label} | {seconds:.2f} s | {args.scores / seconds:.0f} | "
            f"{received}/{args.scores} | {twice} | {seconds / base:.1f}x |"
        )


if __name__ == "__main__":
    main()
