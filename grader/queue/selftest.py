"""The server tests itself: the reference solution graded through the real path, one exercise of each kind.

A **self-test** (:func:`run`) writes the reference solution as a student
folder (grader/course/solution.py ``write_solution``) and grades one NumPy
exercise and one kernel exercise (:data:`PROBES`) with
``grader.course.grading.grade`` in the OS sandbox, exactly as a worker grades
an upload. A kind works when its exercise passes at full marks; otherwise its
``reason`` says why (the exercise's status and message: "no OpenCL device here
can build and run a kernel (...)", "the grader's worker did not start ...").
It runs on a worker:

- ``grade worker`` runs one before it takes jobs (``--no-self-test`` skips it:
  ``grade serve``'s own worker child, whose first task is the server's);
- the Huey task ``selftest`` (grader/queue/jobs.py), which the server sends
  at its start, again when a job came back with exercises not graded, and
  while a kind fails (1 min, doubling up to 10 min).

Every run is published in the queue's key/value store: ``selftest:latest``
(the server adopts each new one, from any worker) and ``selftest:host:<host>``
(the worker's own verdict: its grading processes refuse a failing kind, so
those exercises come back ``not_graded`` and are held).

The server's side is :class:`SelfTest`, ticked by the collector: until the
first verdict it hands out no job; a kind that fails is **refused**: its
exercises are held, never sent to a worker (grader/queue/records.py), one
log line says so, every dashboard page shows a banner, and ``GET
/api/v1/health`` has ``"selftest": {"cpu": {"ok": true, ...}, "opencl":
{"ok": false, "reason": "..."}}``. Once a run says the kind works again, the
held jobs are graded by themselves (grader/queue/collector.py).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from grader.student.engine import catalogue

log = logging.getLogger("normgrade.selftest")

PROBES = {"cpu": "activations.ReLU", "opencl": "kernels.relu_forward"}
"""The exercise each kind is tested with: kind -> exercise id (``cpu``: NumPy, ``opencl``: kernels)."""
LABELS = {"cpu": "NumPy exercises", "opencl": "kernel exercises"}
STUDENT = "(self-test)"  # the seed source of the self-test's cases
LATEST_KEY = "selftest:latest"
RETRY_FIRST_S, RETRY_MAX_S = 60.0, 600.0  # a failing kind is tested again after 1 min, doubling up to 10 min
DOCTOR = "`grade doctor` on the worker shows more"


def sentence(text: str) -> str:
    """``text`` with a capital first letter ("Kernel exercises are ...")."""
    return text[:1].upper() + text[1:]


def kind_of(exercise_id: str) -> str:
    """``opencl`` for a kernel exercise, ``cpu`` for the others."""
    return "opencl" if catalogue.topic_of(exercise_id) == "kernels" else "cpu"


def host_key(host: str | None = None) -> str:
    """The key of a worker machine's own last verdict."""
    return f"selftest:host:{host or socket.gethostname()}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


DOCTOR_NOTE = re.compile(r"\s*\(`grade doctor`[^()]*\)")


def without_doctor(reason: str) -> str:
    """A reason without its "(`grade doctor` ...)" note (a line that names the command itself adds it once)."""
    return DOCTOR_NOTE.sub("", reason).strip()


def banner(test: SelfTest | None, held: list[dict[str, Any]]) -> list[str]:
    """The dashboard's banner, one line each: every refused kind with its reason and held uploads, else how many
    uploads are held (graded again by themselves); [] when all is well."""
    import json

    lines = []
    holding = {
        kind: sum(1 for j in held if any(kind_of(i) == kind for i in json.loads(j["held"] or "[]"))) for kind in PROBES
    }
    refused = test.refused() if test is not None else {}
    for kind, reason in refused.items():
        count = holding[kind]
        lines.append(
            f"{sentence(LABELS[kind])} are not being graded: {without_doctor(reason)}. {count} upload"
            f"{'s' if count != 1 else ''} held. {DOCTOR}"
        )
    if held and not refused:
        lines.append(
            f"{len(held)} upload{'s' if len(held) != 1 else ''} held: graded again by "
            f"{'themselves' if len(held) != 1 else 'itself'} once a self-test passes."
        )
    return lines


def verdict(kinds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A self-test document: its serial, where and when it ran, and each kind's ``ok``, ``reason``, ``exercise``."""
    return {"serial": uuid.uuid4().hex, "host": socket.gethostname(), "pid": os.getpid(), "at": _now(), "kinds": kinds}


def failed_everywhere(reason: str) -> dict[str, Any]:
    """A self-test whose every kind failed for one reason (the sandbox cannot start, a worker error)."""
    return verdict({kind: {"ok": False, "reason": _one_line(reason), "exercise": ex} for kind, ex in PROBES.items()})


def run(sandbox: bool = True) -> dict[str, Any]:
    """Grade the reference solution's probe exercises through the real path; the self-test document. Never raises."""
    from grader.course import grading
    from grader.course.solution import write_solution
    from grader.student.errors import GraderError
    from grader.student.sandbox.private_tmp import PrivateFolder
    from grader.student.sandbox.runner import Limits

    try:
        with PrivateFolder("normgrade-selftest-") as tmp:
            folder = write_solution(tmp / "exercises")
            report = grading.grade(folder, list(PROBES.values()), STUDENT, Limits(sandbox=sandbox))
    except GraderError as exc:  # the sandbox cannot start here (or the solution cannot be written)
        return failed_everywhere(str(exc))
    except Exception as exc:  # a grader bug: no kind can be trusted
        return failed_everywhere(f"the self-test failed ({type(exc).__name__}: {exc})")
    results = {e.id: e for e in report.exercises}
    kinds = {}
    for kind, exercise_id in PROBES.items():
        ex = results[exercise_id]
        if ex.status == "passed":
            kinds[kind] = {"ok": True, "reason": None, "exercise": exercise_id}
            continue
        failing = next((c.message for c in ex.checks if not c.passed and c.message), "")
        why = ex.message or failing or f"{ex.score:g} of {ex.max_score:g} points"
        if ex.status != "not_graded":
            why = f"the reference solution's {exercise_id} is {ex.status}: {why}"
        kinds[kind] = {"ok": False, "reason": _one_line(why), "exercise": exercise_id}
    return verdict(kinds)


def publish(huey: Any, doc: dict[str, Any]) -> None:
    """Put a self-test where the server (``selftest:latest``) and this machine's workers (its host key) read it."""
    try:
        huey.put(LATEST_KEY, doc)
        huey.put(host_key(str(doc.get("host") or "")), doc)
    except Exception as exc:  # the queue away: the server's next self-test asks again
        log.warning("could not publish the self-test (%s)", exc)


def refused_here(huey: Any) -> dict[str, str]:
    """The kinds this machine's last self-test failed: kind -> reason (a worker grades none of them)."""
    try:
        doc = huey.get(host_key(), peek=True)
    except Exception:
        return {}
    return refused_kinds(doc) if isinstance(doc, dict) else {}


def refused_kinds(doc: dict[str, Any] | None) -> dict[str, str]:
    """kind -> reason for every kind a self-test document says fails."""
    kinds = (doc or {}).get("kinds")
    if not isinstance(kinds, dict):
        return {}
    return {
        kind: str(v.get("reason") or "the self-test failed")
        for kind, v in kinds.items()
        if kind in PROBES and isinstance(v, dict) and v.get("ok") is False
    }


def log_verdict(doc: dict[str, Any], where: str) -> None:
    """One line per kind: what passes, what fails and why (what is refused)."""
    refused = refused_kinds(doc)
    passing = [LABELS[k] for k in PROBES if k not in refused]
    if passing:
        log.warning("self-test %s: %s pass", where, " and ".join(passing).replace(" exercises and ", " and "))
    for kind, reason in refused.items():
        log.warning(
            "self-test %s: %s FAIL and are refused (held until a self-test passes): %s", where, LABELS[kind], reason
        )


class SelfTest:
    """The server's view of what its workers can grade: the latest self-test, and when to ask for the next.

    The collector calls :meth:`tick` on each pass (its thread alone); the
    request handlers read :meth:`as_json` and :meth:`refused` (a lock keeps
    the two views whole). A run published before this server started is not
    trusted: the first verdict is the answer to the task sent at start, or a
    worker's start-up run published since.
    """

    def __init__(
        self,
        queue: Any,
        retry_first_s: float = RETRY_FIRST_S,
        retry_max_s: float = RETRY_MAX_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.retry_first_s, self.retry_max_s = retry_first_s, retry_max_s
        self.delay = retry_first_s
        self.lock = threading.Lock()
        self.latest: dict[str, Any] | None = None
        self.generation = 0  # verdicts adopted: held work waits for one newer than its hold
        self.task: str | None = None
        self.sent = 0
        self.due: float | None = clock()  # the first run: at once
        self.instance = uuid.uuid4().hex[:8]
        self.seen = self._published(queue).get("serial")  # (an earlier server's news is not adopted)

    @staticmethod
    def _published(queue: Any) -> dict[str, Any]:
        value = queue.huey.get(LATEST_KEY, peek=True)
        return value if isinstance(value, dict) else {}

    # -- what the server reads ---------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether a verdict exists (until then no job is handed out)."""
        with self.lock:
            return self.latest is not None

    def refused(self) -> dict[str, str]:
        """kind -> reason for every kind the latest self-test failed."""
        with self.lock:
            return refused_kinds(self.latest)

    def works(self, kind: str) -> bool:
        """Whether the latest self-test passed ``kind``."""
        with self.lock:
            kinds = (self.latest or {}).get("kinds") or {}
            return bool((kinds.get(kind) or {}).get("ok"))

    def as_json(self) -> dict[str, Any]:
        """``/api/v1/health``'s ``selftest``: per kind ``ok`` (null before the first run), ``reason``, ``exercise``
        and ``checked_at`` (no host name: the health answers anyone)."""
        with self.lock:
            latest = self.latest or {}
            kinds = latest.get("kinds") or {}
            return {
                kind: {
                    "ok": (kinds.get(kind) or {}).get("ok"),
                    "reason": (kinds.get(kind) or {}).get("reason"),
                    "exercise": exercise,
                    "checked_at": latest.get("at"),
                }
                for kind, exercise in PROBES.items()
            }

    # -- the collector's side --------------------------------------------------------------------

    def want(self) -> None:
        """A job came back with exercises not graded: test again now (unless a run is on its way)."""
        with self.lock:
            if self.task is None:
                self.due = self.clock()

    def tick(self, queue: Any, failed: Callable[[str], str | None]) -> bool:
        """Adopt a new verdict, watch the run in flight (``failed(tid)``: the collector's lease rule), send the next
        when due; True when the verdict changed."""
        changed = False
        news = self._published(queue)
        if news.get("serial") and news.get("serial") != self.seen:
            changed = self._adopt(news)
        if self.task is not None:
            result = queue.result(self.task)
            if result is not None:
                doc = result.get("selftest") if result.get("ok") else None
                changed = (
                    self._adopt(
                        doc
                        if isinstance(doc, dict)
                        else failed_everywhere(str(result.get("error") or "the self-test task failed"))
                    )
                    or changed
                )
                self._done(queue)
            elif not queue.waiting(self.task) and queue.lease(self.task) is None:
                log.warning("the self-test %s was lost from the queue; sent again", self.task)
                self._done(queue, again=True)
            else:
                reason = failed(self.task)
                if reason is not None:
                    log.warning("the self-test %s failed (%s); sent again", self.task, reason)
                    self._done(queue, again=True)
        with self.lock:
            send = self.task is None and self.due is not None and self.clock() >= self.due
            if send:
                self.sent += 1
                self.task, self.due = f"selftest-{self.instance}-{self.sent}", None
        if send:
            assert self.task is not None
            queue.enqueue_selftest(self.task)
        return changed

    def _done(self, queue: Any, again: bool = False) -> None:
        assert self.task is not None
        queue.forget(self.task)
        with self.lock:
            self.task = None
            if again:
                self.due = self.clock()

    def _adopt(self, doc: dict[str, Any]) -> bool:
        """Take ``doc`` as the verdict; a failing kind schedules the next run (back-off). True when a kind changed."""
        with self.lock:
            if self.latest is not None and doc.get("serial") == self.latest.get("serial"):
                return False  # (published and returned: one run)
            before = refused_kinds(self.latest) if self.latest is not None else None
            self.latest, self.seen = doc, doc.get("serial")
            self.generation += 1
            refused = refused_kinds(doc)
            if refused:
                self.due = self.clock() + self.delay
                self.delay = min(self.delay * 2, self.retry_max_s)
            else:  # (a fresh verdict answers a pending want() too)
                self.delay, self.due = self.retry_first_s, None
        if before is None or set(before) != set(refused):
            log_verdict(doc, f"on {doc.get('host') or '?'}")
            return True
        return False
