"""The sandboxed child: ``python -m grader.student.sandbox.worker JOBDIR --status-fd N [--command-fd M] [--opencl]``.

It only computes, inside the OS sandbox of :mod:`grader.student.sandbox.bwrap` (or, where
bubblewrap cannot run, a plain child process). The parent (:mod:`grader.student.sandbox.runner`)
writes ``JOBDIR/manifest.json`` (the student's folder, the limits, and for each
job the exercise id and its cases: JSON scripts whose input arrays are in
``JOBDIR/inputs/<job>.npz``); JOBDIR is read-only in here. The child:

1. sets its own resource limits first (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE,
   RLIMIT_NPROC, RLIMIT_CORE = 0), before NumPy or any student code is loaded;
2. imports NumPy and :mod:`grader.student.engine.ops`, then installs the import guard (a
   ``builtins.__import__`` wrapper and a meta path finder) that refuses
   ``reference``/``grader`` to modules of the student's folder, and an audit
   hook (:class:`FileGuard`, permanent once added) that refuses opening or
   linking the grader's own files and starting other programs: a second wall
   behind the sandbox, which is what really keeps those files out of reach;
3. loads the student's folder as the package ``exercises``
   (:func:`grader.student.engine.loader.load_exercises`, nothing runs yet) and writes ``ready``;
4. for each job it is told to run (``run <index>`` lines on the command fd, or
   every job when there is none; ``run <index> <round>``: a job of a later round of the same submission,
   see :class:`Submission`): writes ``start <index>`` on the status fd,
   bounds what the student prints (stdout and stderr are a pipe the parent
   drains), imports the exercise's topic file, runs every case with
   :func:`grader.student.engine.ops.run_script`, and sends the results back on the status fd
   as one frame: ``done <index> <json bytes> <npz bytes>`` and then the JSON
   document and an uncompressed ``.npz`` (numeric arrays only, no pickle).

``--stack-fd K``: where :mod:`faulthandler` writes every thread's stack on SIGUSR1
(the parent asks where a slow job is) and on SIGXCPU (before the CPU limit
kills it); :mod:`grader.student.sandbox.stacks` reads it in the parent.

``--opencl`` marks a child for kernel exercises (a larger address-space limit;
OpenCL is only touched in such a spawned child, never in a forked one).
The parent reads results with size caps and ``np.load(..., allow_pickle=False)``
and makes every verdict itself.
"""

from __future__ import annotations

import faulthandler
import gc
import io
import json
import math
import os
import resource
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from grader.student.engine.loader import (
    ALLOWED_PACKAGES,
    FORBIDDEN_PACKAGES,
    PACKAGE_NAME,
    TopicNotFound,
    load_exercises,
    load_topic,
)

# --- limits --------------------------------------------------------------------


def _set_limit(which: int, value: int) -> None:
    """Set soft and hard limit ``which`` to ``value`` (never above the current hard limit)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def apply_limits(limits: dict[str, Any], opencl: bool) -> None:
    """Address space, written-file size, processes, no core dumps, and the CPU ceiling of the start-up."""
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_AS, int(limits["opencl_memory_bytes" if opencl else "memory_bytes"]))
    _set_limit(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    _set_limit(resource.RLIMIT_NPROC, int(limits["opencl_processes" if opencl else "processes"]))
    # A write beyond RLIMIT_FSIZE fails with EFBIG instead of killing the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    set_cpu_budget(float(limits["startup_s"]))  # the start-up's; the hard ceiling comes with the jobs


def set_cpu_ceiling(seconds: float) -> None:
    """Hard RLIMIT_CPU: this process may use ``seconds`` more CPU time in all (never raised)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = int(math.ceil(usage.ru_utime + usage.ru_stime + seconds))
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or total < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (total, total))


def set_cpu_budget(seconds: float) -> None:
    """Let this job use ``seconds`` more CPU time: soft RLIMIT_CPU = used + seconds (SIGXCPU after)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    wanted = int(math.ceil(used + seconds))
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (wanted, hard))


# --- import guard ----------------------------------------------------------------


FORBIDDEN_SUFFIX = "from a submission is not allowed"


def forbidden_message(name: str) -> str:
    """The ImportError message of the runtime guard: "importing 'reference' from a submission is not allowed"
    (for a package beyond numpy and the standard library, with what may be imported)."""
    root = name.split(".")[0]
    if root in FORBIDDEN_PACKAGES:
        return f"importing {root!r} {FORBIDDEN_SUFFIX}"
    return f"importing {root!r} {FORBIDDEN_SUFFIX}: only numpy and the Python standard library may be imported"


def refused(name: str) -> bool:
    """Whether student code may not import ``name``: the grader, the reference, or a package not allowed."""
    root = name.split(".")[0]
    return root in FORBIDDEN_PACKAGES or root not in ALLOWED_PACKAGES


class ImportGuard:
    """Refuses imports of ``reference``/``grader``, and of packages beyond numpy and the standard library
    (:data:`grader.student.engine.loader.ALLOWED_PACKAGES`), made by modules of the student's folder.

    Two hooks: ``builtins.__import__`` (``import x`` statements, even of modules
    already loaded) and a meta path finder (``importlib.import_module`` of
    modules not yet loaded). The importer is found from the importing module's
    globals, or from the nearest stack frame outside the import machinery.
    """

    def __init__(self, folder: Path, package: str) -> None:
        self.folder = str(folder.resolve()) + os.sep
        self.package = package
        self._original_import: Any = None

    def from_student(self, globals_: Any) -> bool:
        """Whether module globals belong to the student's package or folder."""
        if not isinstance(globals_, dict):
            return False
        name = globals_.get("__name__")
        if isinstance(name, str) and (name == self.package or name.startswith(self.package + ".")):
            return True
        file = globals_.get("__file__")
        return isinstance(file, str) and os.path.abspath(file).startswith(self.folder)

    def importer_is_student(self) -> bool:
        """Whether the nearest frame outside importlib and this file is in the student's folder."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if not (
                filename.startswith("<frozen") or filename == __file__ or os.sep + "importlib" + os.sep in filename
            ):
                return os.path.abspath(filename).startswith(self.folder) or self.from_student(frame.f_globals)
            frame = frame.f_back
        return False

    # meta path finder protocol
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        """Meta path finder hook: refuse, or let the next finder decide (None)."""
        if refused(fullname) and self.importer_is_student():
            raise ImportError(forbidden_message(fullname), name=fullname)
        return None

    def guarded_import(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        """``builtins.__import__`` with the guard in front."""
        if level == 0 and isinstance(name, str) and refused(name):
            if self.from_student(globals):
                raise ImportError(forbidden_message(name), name=name)
        return self._original_import(name, globals, locals, fromlist, level)

    def install(self) -> None:
        """Put both hooks in place (before any student module is imported)."""
        import builtins

        self._original_import = builtins.__import__
        builtins.__import__ = self.guarded_import
        sys.meta_path.insert(0, self)


# The events of sys.addaudithook that start another program.
PROGRAM_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty")


def grader_folders() -> tuple[str, ...]:
    """The folders of the ``reference`` and ``grader`` packages (found without importing reference)."""
    import importlib.util

    folders = []
    for name in FORBIDDEN_PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            folders.append(os.path.realpath(location) + os.sep)
    return tuple(folders)


class FileGuard:
    """An audit hook: no opening or linking the grader's own files, no programs, no C libraries.

    The import guard stops ``import reference``; this stops the ways around it
    (loading ``reference/normalization.py`` by path, copying it, ``cat`` in a
    subprocess). An audit hook cannot be removed once added, so student code
    cannot switch it off. Installed after the worker has imported what it needs.
    """

    def __init__(self, folders: tuple[str, ...]) -> None:
        self.folders = folders

    def protected(self, path: Any) -> bool:
        """Whether a path (str, bytes or os.PathLike; not a file descriptor) lies in a grader folder."""
        if isinstance(path, int) or path is None:
            return False
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real.startswith(folder) or real + os.sep == folder for folder in self.folders)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if event in ("open", "os.link", "os.symlink", "shutil.copyfile") and args and self.protected(args[0]):
            raise PermissionError(f"reading the grader's files {FORBIDDEN_SUFFIX}")
        if event.startswith(PROGRAM_EVENTS):
            raise PermissionError(f"starting another program {FORBIDDEN_SUFFIX}")
        if event == "ctypes.dlopen":  # raw C calls would go around this hook
            raise PermissionError(f"loading a C library with ctypes {FORBIDDEN_SUFFIX}")

    def install(self) -> None:
        sys.addaudithook(self)


# --- bounded output capture --------------------------------------------------------


class BoundedWriter(io.TextIOBase):
    """A text stream writing its first ``limit`` bytes to a file descriptor and counting the rest."""

    def __init__(self, fd: int, limit: int) -> None:
        super().__init__()
        self.fd = fd
        self.limit = limit
        self.written = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        """Write what fits under the limit, count the rest; never fails."""
        text = str(text)
        room = max(0, self.limit - self.written)
        if room == 0:  # past the limit: only count (cheaply for ASCII)
            self.dropped += len(text) if text.isascii() else len(text.encode("utf-8", errors="replace"))
            return len(text)
        data = text.encode("utf-8", errors="replace")
        head, tail = data[:room], data[room:]
        if head:
            try:
                os.write(self.fd, head)
            except OSError:
                self.dropped += len(head)
            else:
                self.written += len(head)
        self.dropped += len(tail)
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


def capture_output(limit: int) -> BoundedWriter:
    """Make sys.stdout/sys.stderr a bounded writer on fd 1 (fds 1 and 2 are the parent's output pipe)."""
    writer = BoundedWriter(1, limit)
    sys.stdout = writer
    sys.stderr = writer
    return writer


# --- running jobs ------------------------------------------------------------------


def _error(kind: str, message: str, traceback: str = "", where: str = "") -> dict[str, str]:
    """A case error record shaped like ``grader.student.engine.ops``'s."""
    return {"type": kind, "message": message, "traceback": traceback, "where": where}


def _import_failure(topic: str, exc: BaseException, folder: Path) -> str:
    """'normalization.py failed to import: ...' with the file and line of a syntax error."""
    if isinstance(exc, TopicNotFound):
        return f"{topic}.py is missing from '{folder}'"
    if isinstance(exc, SyntaxError):
        try:
            shown = os.path.relpath(exc.filename or f"{topic}.py", folder)
        except ValueError:
            shown = f"{topic}.py"
        return f"{topic}.py failed to import: {shown} line {exc.lineno}: {exc.msg}"
    return f"{topic}.py failed to import: {type(exc).__name__}: {exc}"


def run_job(pkg: Any, folder: Path, job: dict[str, Any], inputs: Path, run_script: Any) -> dict[str, Any]:
    """Run one exercise's cases.

    Returns ``{"status": "ok" | "error", "message", "cases": [(name, outputs, error, warnings)]}``
    (and, for a kernel job, ``"device"``: the device chosen, which the grader remembers);
    status "error" (no cases) when the topic file does not import. Without a working OpenCL
    device a kernel job's cases still run: an untouched stub raises NotImplementedError
    before anything is built, any other kernel ``OpenCLUnavailable`` (the exercise is not graded).
    """
    import numpy as np

    device = None
    if job["needs_opencl"]:
        from grader.student.engine.ops_opencl import device_choice

        device = device_choice().as_dict()
    else:
        topic = job["topic"]
        try:
            load_topic(pkg, topic)
        except BaseException as exc:  # SyntaxError, ImportError from the guard, SystemExit at import...
            return {"status": "error", "message": _import_failure(topic, exc, folder), "cases": []}
    with np.load(inputs, allow_pickle=False) as npz:
        stored = {key: np.array(npz[key]) for key in npz.files}
    cases = []
    for case in job["cases"]:
        arrays = {name: stored[key] for name, key in case["arrays"].items()}
        try:
            result = run_script(pkg, case["script"], arrays)
            cases.append((case["name"], result.outputs, result.error, list(result.warnings)))
        except BaseException as exc:  # a grader bug (ScriptError) or KeyboardInterrupt from student code
            cases.append((case["name"], {}, _error(type(exc).__name__, str(exc)), []))
    outcome: dict[str, Any] = {"status": "ok", "message": "", "cases": cases}
    if device is not None:
        outcome["device"] = device
    return outcome


def encode_results(outcome: dict[str, Any], dropped: int) -> tuple[bytes, bytes]:
    """(JSON document, uncompressed .npz) of a job's outcome; non-numeric outputs become case errors."""
    import numpy as np

    arrays: dict[str, Any] = {}
    cases_json = []
    for ci, (name, outputs, error, warnings) in enumerate(outcome["cases"]):
        keys: dict[str, str] = {}
        for oi, (out, value) in enumerate(outputs.items()):
            value = np.asarray(value)
            if value.dtype.kind not in "biuf":
                error = error or _error("BadOutputError", f"{out} is an array of {value.dtype}: expected numbers")
                continue
            key = f"c{ci}_o{oi}"
            arrays[key] = value
            keys[str(out)] = key
        cases_json.append({"name": name, "outputs": keys, "error": error, "warnings": warnings})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    document = {
        "status": outcome["status"],
        "message": outcome["message"],
        "cases": cases_json,
        "output_dropped": dropped,
    }
    if "device" in outcome:
        document["device"] = outcome["device"]
    return json.dumps(document, default=str).encode("utf-8", errors="replace"), buffer.getvalue()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def manifest_name(round_: int) -> str:
    """The manifest of a workspace's run number ``round_`` (0: the grading's, 1: the location's traced cases)."""
    return "manifest.json" if round_ == 0 else f"manifest-{round_}.json"


def inputs_folder(round_: int) -> str:
    """The folder, in the job folder, of run ``round_``'s input arrays (one ``.npz`` per job)."""
    return "inputs" if round_ == 0 else f"inputs-{round_}"


class Channel:
    """The status fd (``ready``, ``start i``, ``done i`` frames) and the command fd (``run i [round]`` lines)."""

    def __init__(self, status_fd: int, command_fd: int | None) -> None:
        self.status_fd = status_fd
        self.command = os.fdopen(command_fd, "r") if command_fd is not None else None

    def tell(self, line: str) -> None:
        """Send one status line to the parent."""
        _write_all(self.status_fd, (line + "\n").encode())

    def send_results(self, index: int, document: bytes, arrays: bytes) -> None:
        """The ``done`` frame: a header line with both lengths, then the two payloads."""
        _write_all(self.status_fd, f"done {index} {len(document)} {len(arrays)}\n".encode() + document + arrays)

    def commands(self, n_jobs: Callable[[], int]) -> Iterator[tuple[int, int]]:
        """(job index, round) to run: from the command fd until EOF (``run i``: round 0; ``run i r``), or all
        ``n_jobs()`` jobs of round 0."""
        if self.command is None:
            yield from ((i, 0) for i in range(n_jobs()))
            return
        for line in self.command:
            parts = line.split()
            if 2 <= len(parts) <= 3 and parts[0] == "run" and all(p.isdigit() for p in parts[1:]):
                yield int(parts[1]), int(parts[2]) if len(parts) == 3 else 0


USAGE = "usage: python -m grader.student.sandbox.worker JOBDIR --status-fd N [--command-fd M] [--stack-fd K] [--opencl]"


def _parse_args(argv: list[str]) -> tuple[Path, int, int | None, int | None, bool]:
    """JOBDIR, the status, command and stack fds (command None: run every job), the OpenCL flag."""
    if not argv:
        raise SystemExit(USAGE)
    jobdir = Path(argv[0])
    status_fd = command_fd = stack_fd = None
    opencl = False
    rest = argv[1:]
    while rest:
        flag, rest = rest[0], rest[1:]
        if flag == "--opencl":
            opencl = True
        elif flag in ("--status-fd", "--command-fd", "--stack-fd") and rest:
            value, rest = int(rest[0]), rest[1:]
            if flag == "--status-fd":
                status_fd = value
            elif flag == "--command-fd":
                command_fd = value
            else:
                stack_fd = value
        else:
            raise SystemExit(f"unknown option {flag}; {USAGE}")
    if status_fd is None:
        raise SystemExit(USAGE)
    return jobdir, status_fd, command_fd, stack_fd, opencl


_STACK_FILE: list[Any] = []  # keeps the stack pipe's file object alive for faulthandler


def report_stacks_on_signals(stack_fd: int) -> None:
    """Dump every thread's stack to ``stack_fd`` on SIGUSR1 (the parent asks where a slow job is)
    and on SIGXCPU (the CPU budget ran out; the default action, death, follows)."""
    stack_file = os.fdopen(stack_fd, "w", closefd=False)
    _STACK_FILE.append(stack_file)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True, chain=False)
    faulthandler.register(signal.SIGXCPU, file=stack_file, all_threads=True, chain=True)


class Submission:
    """The jobs, the student's folder and package: read on the first command, not at start.

    A worker may be started before its jobs are written (the parent prepares the
    cases meanwhile): JOBDIR then holds only ``limits.json``. On the first
    command this reads ``manifest.json``, sets the CPU ceiling of all the jobs,
    installs the import guard and the file guard, and loads the student's
    folder as the package ``exercises`` (nothing runs yet).

    A later round of the same submission (``run i r``: the location's traced cases, sent to a worker the
    grading kept) reads ``manifest-<r>.json`` (the ceiling may only go down) and loads the package afresh:
    every module of the student's folder is imported anew by the round's jobs, so they see none of the state
    the earlier round's run left in them (module globals, class attributes). The guards stay; the folder
    must be the one they guard.
    """

    def __init__(self, jobdir: Path) -> None:
        self.jobdir = jobdir
        self._round = -1
        self._guarded: Path | None = None
        self._loaded: tuple[list[dict[str, Any]], Path, Any] | None = None

    def load(self, round_: int = 0) -> tuple[list[dict[str, Any]], Path, Any]:
        """(jobs, the student's folder, the loaded package) of run ``round_``."""
        if self._loaded is None or self._round != round_:
            manifest = json.loads((self.jobdir / manifest_name(round_)).read_text())
            set_cpu_ceiling(float(manifest["cpu_total_s"]))
            folder = Path(manifest["path"])
            if self._guarded is None:
                ImportGuard(folder, PACKAGE_NAME).install()
                FileGuard(grader_folders()).install()
                self._guarded = folder
            elif folder != self._guarded:
                raise SystemExit(f"round {round_} names another folder than the one guarded")
            if self._loaded is not None:  # the earlier round's package goes (load_exercises unloads its
                self._loaded = None  # modules), and what they held with it, before this round's memory counts
                gc.collect()
            self._loaded = (manifest["jobs"], folder, load_exercises(folder))
            self._round = round_
        return self._loaded


def main(argv: list[str] | None = None) -> int:
    """Run the jobs of JOBDIR as told; returns the exit status (0)."""
    jobdir, status_fd, command_fd, stack_fd, opencl = _parse_args(sys.argv[1:] if argv is None else argv)
    limits = json.loads((jobdir / "limits.json").read_text())
    apply_limits(limits, opencl)
    if stack_fd is not None:
        report_stacks_on_signals(stack_fd)

    import numpy  # noqa: F401  (loaded before the student's code, under the limits)

    from grader.student.engine.ops import run_script
    import grader.student.engine.trace  # noqa: F401  (imported lazily by the trace op; needed before the guards)

    if opencl:
        import grader.student.engine.ops_opencl  # noqa: F401  (imported lazily by ops; needed before the file guard)

        kept = os.environ.get("POCL_CACHE_DIR")  # the student's kept kernel cache (Limits.kernel_cache)
        if kept and not os.access(kept, os.W_OK | os.X_OK):  # PoCL would fail every build: a fresh cache instead
            del os.environ["POCL_CACHE_DIR"]

        try:  # the device is chosen now (the driver and the compiler start) while the parent prepares the cases
            grader.student.engine.ops_opencl.warm_up()
        except Exception:  # a broken device is reported by the first kernel job
            pass
    submission = Submission(jobdir)
    channel = Channel(status_fd, command_fd)
    channel.tell("ready")
    for index, round_ in channel.commands(lambda: len(submission.load()[0])):
        jobs, folder, pkg = submission.load(round_)
        job = jobs[index]
        channel.tell(f"start {index}")
        set_cpu_budget(float(job["cpu_s"]))
        writer = capture_output(int(limits["output_bytes"]))
        outcome = run_job(pkg, folder, job, jobdir / job["inputs"], run_script)
        try:
            document, arrays = encode_results(outcome, writer.dropped)
        except Exception as exc:  # e.g. out of memory while saving: report it instead of dying
            failed = {"status": "error", "message": f"the results could not be saved: {exc}", "cases": []}
            document, arrays = encode_results(failed, writer.dropped)
        channel.send_results(index, document, arrays)
        del pkg, outcome  # (nothing of this job is held while a later round loads the package afresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
