"""One child process that runs student code: started in bubblewrap (or as a plain process), fed jobs over a
command pipe, read over its status, output and stack pipes, and killed with everything it started.

:class:`Child` is the parent's handle on one ``python -m grader.student.sandbox.worker``: the command line
and environment it starts with (:mod:`grader.student.sandbox.bwrap`), the status lines and results frames it
sends, the bounded output it prints (:class:`OutputBuffer`), the stack dump that says where it is, and the
strays its student's code left running (found in /proc).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from grader.student.sandbox import bwrap
from grader.student.sandbox.limits import KIB, Limits, human_bytes
from grader.student.sanitize import clean_text

GRADER_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding the grader package


class OutputBuffer:
    """What a child printed during one job: the first ``limit`` bytes, the last :data:`TAIL` bytes,
    and how many were dropped between them (the report shows the tail: where the code stopped)."""

    TAIL = 4 * KIB

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.more = 0

    def add(self, data: bytes) -> None:
        room = max(0, self.limit - len(self.head))
        self.head += data[:room]
        rest = data[room:]
        if rest:
            self.tail += rest
            self.more += len(rest)
            del self.tail[: max(0, len(self.tail) - self.TAIL)]

    def text(self, dropped: int = 0) -> str:
        """The kept output, cleaned: head, '[... N more output cut]' when something was dropped, tail."""
        text = clean_text(bytes(self.head).decode("utf-8", errors="replace"))
        cut = self.more - len(self.tail) + max(0, dropped)
        if cut > 0 or dropped > 0:
            text += f"\n[... {human_bytes(cut)} more output cut]"
        if self.tail:
            text += "\n" + clean_text(bytes(self.tail).decode("utf-8", errors="replace"))
        return text


class Child:
    """A running worker: command pipe to it, status and output pipes from it, in its own sandbox."""

    def __init__(self, jobdir: Path, opencl: bool, serial: int, limits: Limits, sandboxed: bool) -> None:
        status_r, status_w = os.pipe()
        command_r, command_w = os.pipe()
        output_r, output_w = os.pipe()
        stack_r, stack_w = os.pipe()
        worker = ["-m", "grader.student.sandbox.worker"]
        fds = ["--status-fd", str(status_w), "--command-fd", str(command_r), "--stack-fd", str(stack_w)]
        fds += ["--opencl"] if opencl else []
        kernel_cache = limits.kernel_cache if opencl else None
        if sandboxed:
            env = bwrap.environment(bwrap.BUNDLE_MOUNT)
            uid = None
            if kernel_cache is not None:
                env["POCL_CACHE_DIR"] = bwrap.KERNEL_CACHE_MOUNT
                if os.geteuid() == 0:  # this sandbox's fresh uid takes the cache over from the last one's
                    uid = bwrap.fresh_uid()
                    hand_over(kernel_cache, uid)
            argv = bwrap.wrap(
                [sys.executable, *worker, bwrap.JOB_MOUNT, *fds], jobdir, limits.scratch_bytes, env, kernel_cache, uid
            )
            popen_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            cwd = None
        else:  # plain process isolation: same worker and environment, a scratch folder of its own
            cwd = jobdir.parent / f"scratch{serial}"
            cwd.mkdir()
            popen_env = bwrap.environment(GRADER_ROOT)
            popen_env.update(HOME=str(cwd), TMPDIR=str(cwd))
            if kernel_cache is not None:
                popen_env["POCL_CACHE_DIR"] = kernel_cache
            argv = [sys.executable, *worker, str(jobdir), *fds]
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output_w,
                stderr=output_w,
                cwd=cwd,
                env=popen_env,
                pass_fds=(status_w, command_r, stack_w),
                start_new_session=True,
                close_fds=True,
            )
        finally:
            for fd in (status_w, command_r, output_w, stack_w):
                os.close(fd)
        os.set_blocking(output_r, False)
        os.set_blocking(stack_r, False)
        self.stack_fd: int | None = stack_r
        self.stacks = b""  # the end of what the worker's faulthandler wrote (see where())
        self.sandboxed = sandboxed
        self.opencl = opencl
        self.status_fd = status_r
        self.output_fd: int | None = output_r
        self.command_fd: int | None = command_w
        self.buffer = b""
        self.started_jobs = 0
        # The thread that started it: bwrap's ``--die-with-parent`` kills the sandboxed child when that thread
        # ends (a slot's own replacement worker does not outlive the slot; see Workspace.park).
        self.thread = threading.get_ident()
        self.output_limit = limits.output_bytes
        # What the worker printed since it started or since its last job ended: the next job's
        # output (the worker prints nothing between jobs; a job's output all precedes its ``done``).
        self.output = OutputBuffer(limits.output_bytes)

    def send(self, line: str) -> bool:
        """Write a command line; False when the child is gone."""
        if self.command_fd is None:
            return False
        try:
            os.write(self.command_fd, (line + "\n").encode())
            return True
        except OSError:
            return False

    def take_output(self, dropped: int = 0) -> str:
        """The output of the job that just ended (drained first); collecting starts afresh for the next."""
        self.drain_output()
        text = self.output.text(dropped)
        self.output = OutputBuffer(self.output_limit)
        return text

    def drain_output(self) -> None:
        """Read whatever output is waiting, without blocking."""
        if self.output_fd is not None and not _drain(self.output_fd, self.output.add):
            os.close(self.output_fd)
            self.output_fd = None

    def _fill(self, deadline: float) -> str:
        """Read more from the status pipe (draining output meanwhile): 'ok', 'timeout' or 'eof'."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            watched = [self.status_fd] + ([self.output_fd] if self.output_fd is not None else [])
            ready, _, _ = select.select(watched, [], [], remaining)
            if not ready:
                return "timeout"
            if self.output_fd is not None and self.output_fd in ready:
                self.drain_output()
            if self.status_fd in ready:
                chunk = os.read(self.status_fd, 1 << 16)
                if not chunk:
                    self.drain_output()
                    return "eof"
                self.buffer += chunk
                self.drain_output()  # output written before this status belongs to the job it ends
                return "ok"

    def expect(self, wanted: str, deadline: float) -> tuple[str, list[str]]:
        """Wait for the status line whose first two words are ``wanted``.

        Returns ('ok', the line's words), ('timeout', []) or ('eof', []) when the
        child closed its status pipe (it died). Other lines are skipped.
        """
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                words = line.decode(errors="replace").split()
                if " ".join(words[:2]) == wanted:
                    return "ok", words
                if len(self.buffer) > 1 << 20:  # a flood of junk lines
                    return "eof", []
            if len(self.buffer) > 1 << 20:
                return "eof", []
            state = self._fill(deadline)
            if state != "ok":
                return state, []

    def read_exact(self, n: int, deadline: float) -> bytes | None:
        """The next ``n`` bytes of the status pipe (None: the child died or hung first)."""
        while len(self.buffer) < n:
            if self._fill(deadline) != "ok":
                return None
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def kill_strays(self) -> None:
        """Kill whatever the student's code left running after a job (daemons, forks), not the worker.

        In the sandbox the worker's bwrap has one child, the PID namespace's
        init, whose oldest child is the worker; everything else below that init
        (orphans are re-parented to it, whatever their session) is a stray.
        Without the sandbox only the worker's own descendants can be found.
        Passes repeat until one finds nothing alive (a stray may fork between
        a look and its kill; with nothing left alive, nothing can fork, as the
        worker itself waits for its next command). Cheap: a pass over
        /proc/*/stat; a job cannot leave a CPU hog that would slow the next
        exercise or student down.
        """
        if self._nothing_left():
            return
        for _ in range(STRAY_PASSES):
            table = _process_table()
            below = _children(table, self.proc.pid)
            if not below:
                return
            keep: set[int] = set()
            if self.sandboxed:
                worker = self._sandboxed_worker(table)
                keep = set(below) | ({worker} if worker is not None else set())
            strays = [pid for pid in _descendants(table, self.proc.pid) if pid not in keep and table[pid][2] != "Z"]
            if not strays:
                return
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _nothing_left(self) -> bool:
        """The usual case, told from a few /proc files instead of the whole process table: the worker has
        no child, and in the sandbox it is the only child of the PID namespace's init (where orphans go).
        False when anything else is found or cannot be read (kill_strays then looks everywhere)."""
        top = _task_children(self.proc.pid)
        if not self.sandboxed:
            return top == []
        if top is None or len(top) != 1:
            return False
        below_init = _task_children(top[0])
        return below_init is not None and len(below_init) == 1 and _task_children(below_init[0]) == []

    def worker_pid(self) -> int | None:
        """The worker's pid as seen here (None when it is gone)."""
        return self._sandboxed_worker(_process_table()) if self.sandboxed else self.proc.pid

    def _sandboxed_worker(self, table: dict[int, tuple[int, int, str]]) -> int | None:
        """In the sandbox: bwrap's one child is the PID namespace's init, whose oldest child is the worker."""
        inits = _children(table, self.proc.pid)
        workers = _children(table, inits[0]) if inits else []
        return workers[0] if workers else None

    def drain_stacks(self) -> None:
        """Read what the worker's faulthandler wrote, keeping the last :data:`STACK_BYTES`."""

        def keep(chunk: bytes) -> None:
            self.stacks = (self.stacks + chunk)[-STACK_BYTES:]

        if self.stack_fd is not None and not _drain(self.stack_fd, keep):
            os.close(self.stack_fd)
            self.stack_fd = None

    def stack_dump(self, ask: bool) -> str:
        """The worker's latest stack dump; ``ask``: signal it for a fresh one first (None-safe, bounded wait).

        Without ``ask``, whatever it wrote when it died (SIGXCPU). With it, the
        dump must start arriving within :data:`STACK_WAIT_S` and is complete once
        the pipe stays quiet for a moment (faulthandler writes it in one go).
        """
        self.drain_stacks()
        if ask:
            pid = self.worker_pid()
            self.stacks = b""
            try:
                if pid is None:
                    return ""
                os.kill(pid, signal.SIGUSR1)
            except (ProcessLookupError, PermissionError):
                return ""
            deadline = time.monotonic() + STACK_WAIT_S
            while self.stack_fd is not None:
                wait = deadline - time.monotonic() if not self.stacks else STACK_QUIET_S
                if wait <= 0 or not select.select([self.stack_fd], [], [], wait)[0]:
                    break
                self.drain_stacks()
        return self.stacks.decode("utf-8", errors="replace")

    def kill(self) -> None:
        """Kill the child's process group; in the sandbox its PID namespace, and all in it, dies too."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float) -> int:
        """The exit status, killing the child if it has not ended within ``timeout``."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def close(self) -> None:
        """End the child now and leave nothing of it: its results are all read, so it is killed
        rather than left to tear its interpreter (and OpenCL runtime) down while the parent waits."""
        if self.command_fd is not None:
            os.close(self.command_fd)
            self.command_fd = None
        self.kill()
        self.wait(timeout=5.0)
        os.close(self.status_fd)
        for name in ("output_fd", "stack_fd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def log_tail(self) -> str:
        """The end of what the worker printed (why it did not start)."""
        return self.take_output().strip()[-2000:]


def _drain(fd: int, consume: Callable[[bytes], None]) -> bool:
    """Hand each chunk waiting on the non-blocking pipe ``fd`` to ``consume``; False once it is closed."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        consume(chunk)


STRAY_PASSES = 20
STACK_BYTES = 64 * KIB  # of a stack dump kept
STACK_WAIT_S = 1.0  # for a dump to start arriving after SIGUSR1
STACK_QUIET_S = 0.05  # of silence that ends a dump


def _process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time in clock ticks, state letter) for every process this one can see."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0].decode())  # ppid, starttime, state
    return table


def _task_children(pid: int) -> list[int] | None:
    """The children of process ``pid`` from /proc/PID/task/*/children (every thread's), or None when unreadable."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                found += [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return None
    return found


def _children(table: dict[int, tuple[int, int, str]], pid: int) -> list[int]:
    """The children of ``pid``, oldest first."""
    return sorted((p for p, (ppid, _, _) in table.items() if ppid == pid), key=lambda p: table[p][1])


def _descendants(table: dict[int, tuple[int, int, str]], pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in _children(table, todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def exit_status(returncode: int, sandboxed: bool) -> int:
    """A child's exit status as Popen reports it: bwrap turns death by signal N into exit 128 + N."""
    if sandboxed and 128 < returncode < 128 + 65:
        return -(returncode - 128)
    return returncode


def hand_over(folder: str, uid: int) -> None:
    """Make ``uid`` (and its group) the owner of ``folder`` and everything in it, links not followed (as root)."""
    os.lchown(folder, uid, uid)
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                os.lchown(os.path.join(parent, name), uid, uid)
            except OSError:
                pass
