"""The OS sandbox of a grading worker: the bubblewrap (``bwrap``) command line that wraps it.

Every worker that runs student code is started as
``bwrap <namespaces> <mounts> <environment> -- [setpriv ...] python -m grader.student.sandbox.worker ...``.
What the worker then sees and may do (see :func:`wrap`):

- **namespaces**: new PID, network (only a loopback with nothing on it), IPC,
  UTS and cgroup namespaces, a new session (no terminal to inject into);
  ``--die-with-parent``: when the worker's bwrap is killed, the PID
  namespace's init dies and the kernel kills everything started inside it
  (daemons in their own session included);
- **a uid that owns nothing**: run as an unprivileged user, bwrap makes a new
  user namespace (``--unshare-user --disable-userns``, uid 65534 inside); run
  as root, bwrap keeps root's mount rights but the worker drops to a fresh
  random uid (``setpriv``) that owns no file and no process on the machine,
  so RLIMIT_NPROC counts this worker's processes alone;
- **files**: a new empty root with, read-only: ``/usr`` (and the ``/lib``,
  ``/bin`` links), a few ``/etc`` files the dynamic linker and OpenCL need
  (the ICD files of ``/etc/OpenCL/vendors``), the CPU topology an OpenCL
  driver reads to start (``/sys/devices/system/cpu``; every folder created
  for a mount is world-traversable, since the worker's uid owns none),
  the Python installation, its standard library and site-packages, and the
  folders of the packages the worker imports (:func:`python_folders`: never an
  arbitrary ``sys.path`` folder such as the grader's script folder or current
  directory), the job folder (manifest, inputs, the ingested copy of the
  submission) at ``/job``, and the few grader modules the worker runs
  (:data:`WORKER_MODULES`) at ``/opt/normgrade/grader``. Where an installed
  ``grader``/``reference`` package or the project's ``quizzes/`` lies inside a
  mounted folder, an empty tmpfs hides it. The only writable place is a
  size-capped tmpfs at ``/tmp`` (the working directory, ``HOME`` and the PoCL
  cache), gone with the job; and, for ``grade submit`` of one's own kernels
  only, that student's kernel cache at ``/cache`` (``Limits.kernel_cache``);
- **environment**: cleared, then :func:`environment` (a short whitelist).

:func:`problem` says once per process whether bwrap works here (and why not).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import secrets
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

from grader.student.engine import opencl_device
from grader.student.sandbox.private_tmp import PrivateFolder

STUDENT_DIR = Path(__file__).resolve().parents[1]  # grader/student
GRADER_DIR = STUDENT_DIR.parent  # grader
PROJECT_ROOT = GRADER_DIR.parent
JOB_MOUNT = "/job"
BUNDLE_MOUNT = "/opt/normgrade"
SCRATCH = "/tmp"
# Where an OpenCL worker finds the student's kernel cache, when it has one (Limits.kernel_cache).
KERNEL_CACHE_MOUNT = "/cache"

# The grader modules the worker imports, and nothing else: no checks, no
# mistake variants, no solution writer, no quiz code (tests/student/sandbox/test_sandbox_os.py
# checks that the worker's imports stay inside this list).
# Paths relative to the ``grader`` package folder.
WORKER_MODULES = (
    "__init__.py",
    "student/__init__.py",
    "student/engine/__init__.py",
    "student/engine/loader.py",
    "student/engine/ops.py",
    "student/engine/opserrors.py",
    "student/engine/ops_opencl.py",
    "student/engine/opencl_device.py",
    "student/engine/trace.py",
    "student/sandbox/__init__.py",
    "student/sandbox/worker.py",
)

# The packages the worker imports besides the standard library (pyopencl and what it imports, and the PoCL
# driver): their sys.path folders are mounted, see package_folders.
WORKER_PACKAGES = (
    "numpy",
    "pyopencl",
    "pytools",
    "platformdirs",
    "typing_extensions",
    "siphash24",
    "pocl_binary_distribution",
)

# Files of /etc that the dynamic linker, OpenCL ICD loaders and compilers read; nothing secret.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "OpenCL", "alternatives", "localtime")

# Variables passed through from the grader's environment (CPU quirks, OpenCL device choice, a rehearsed fault).
PASSED_VARIABLES = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "POCL_DEVICES",
    "OCL_ICD_VENDORS",
    "OCL_ICD_FILENAMES",
    "LD_LIBRARY_PATH",
    "PYOPENCL_CTX",
    opencl_device.FAULT_VARIABLE,
)

# Read-only system folders an OpenCL driver reads to start: PoCL's hwloc reads the CPU topology
# (without it PoCL aborts: "failed to find sysfs cpu topology directory ... Not enough memory").
SYS_FOLDERS = ("/sys/devices/system/cpu", "/sys/devices/system/node")

# Root-run sandboxes get a uid from this range: far above any real account.
SANDBOX_UID_RANGE = (1_500_000_000, 2_000_000_000)
UNPRIVILEGED_UID = 65534

INSTALL_HINT = "apt-get install bubblewrap"


def environment(pythonpath: str, threads: int = 1) -> dict[str, str]:
    """The worker's whole environment: a whitelist, never a copy of the grader's.

    ``pythonpath`` is where the worker finds the grader modules; thread counts
    of the maths libraries are pinned so a worker uses one core.
    """
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": SCRATCH,
        "TMPDIR": SCRATCH,
        "LANG": "C.UTF-8",
        "PYTHONPATH": pythonpath,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "NUMEXPR_NUM_THREADS": str(threads),
        "POCL_MAX_PTHREAD_COUNT": "2",
        # One work-group function per kernel for every local size (the checks launch each
        # kernel at two): half of PoCL's code generation, the same results.
        "POCL_WORK_GROUP_SPECIALIZATION": "0",
    }
    for name in PASSED_VARIABLES:
        if name in os.environ:
            env[name] = os.environ[name]
    # The device this machine's earlier runs chose (the worker cannot read the grader's cache; "{}": none).
    env[opencl_device.ENTRIES_VARIABLE] = opencl_device.cached_entries_variable() or "{}"
    return env


# --- what to mount ---------------------------------------------------------------------


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _exposes_project(folder: str) -> bool:
    """Whether mounting ``folder`` would show this project's checkout (reference/, quizzes/, tests/).

    True for the checkout itself, any folder in it (its tests/, the current
    directory) and any folder around it, except the virtual environment (which
    may sit inside the checkout) and an install where the grader lives inside
    the environment (there :func:`hidden_folders` hides its packages).
    """
    project, venv = str(PROJECT_ROOT), os.path.realpath(sys.prefix)
    if _inside(project, venv):
        return False
    return (_inside(folder, project) and not _inside(folder, venv)) or _inside(project, folder)


def _path_entries() -> set[str]:
    return {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)}


def package_folders() -> list[str]:
    """The ``sys.path`` folders that hold the packages the worker imports (:data:`WORKER_PACKAGES`); a package
    found anywhere else adds nothing."""
    entries = _path_entries()
    found: list[str] = []
    for name in WORKER_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        locations = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
        found += [os.path.realpath(os.path.dirname(location)) for location in locations]
    return sorted({f for f in found if f in entries})


def python_folders() -> list[str]:
    """The folders the worker's Python needs, outermost first: nothing else of the grader's ``sys.path``.

    These are the interpreter's installation (sys.base_prefix, base_exec_prefix,
    prefix, exec_prefix and the real folder of sys.executable), the standard
    library and the environment's site-packages (sysconfig's stdlib, platstdlib,
    purelib and platlib, site.getsitepackages(), the user site only when it is on
    sys.path), and the sys.path folders holding the packages the worker imports
    (:func:`package_folders`).

    Why not every sys.path folder: sys.path[0] is the folder of the grader's
    script, or its current directory under ``python -m``, and PYTHONPATH may
    name anything. Started from a course folder, that would show the class
    database and every classmate's submission to student code; started from
    /tmp, every user's files there, and /tmp mounted read-only over the
    sandbox's scratch tmpfs (no PoCL cache, so no OpenCL device).

    Never mounted: "/", /usr and what is in it (mounted whole, see
    :func:`_mount_args`), the scratch folder itself or a folder around it, and
    folders that would show the project's checkout (:func:`_exposes_project`).
    """
    candidates = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix]
    candidates.append(os.path.dirname(os.path.realpath(sys.executable)))
    paths = sysconfig.get_paths()
    candidates += [paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib") if name in paths]
    candidates += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user_site and os.path.realpath(user_site) in _path_entries():
        candidates.append(user_site)
    candidates += package_folders()
    chosen: list[str] = []
    for path in sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)}, key=len):
        if path == "/" or _inside(path, "/usr") or _inside(SCRATCH, path) or _exposes_project(path):
            continue
        if any(_inside(path, c) for c in chosen):
            continue
        chosen.append(path)
    return chosen


def hidden_folders(mounted: list[str]) -> list[str]:
    """Folders inside the mounts that must look empty: installed grader/reference packages, quiz sources."""
    found = []
    for name in ("grader", "reference"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(os.path.realpath(location))
    found.append(str(PROJECT_ROOT / "quizzes"))
    return sorted({f for f in found if os.path.isdir(f) and any(_inside(f, m) for m in mounted + ["/usr"])})


def _ancestors(path: str) -> list[str]:
    """'/a/b/c' -> ['/a', '/a/b'] (the folders to create, world-traversable, before mounting c)."""
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def vendors_args(env: dict[str, str]) -> list[str]:
    """The ICD loader's ``OCL_ICD_VENDORS`` shown to the worker where the grader sees it, when it lies outside
    what the sandbox mounts anyway: a folder as a folder holding only its ``*.icd`` files (each mounted
    read-only; nothing else of it, whatever folder the variable names), or the one vendor file it names. The
    worker then sees the vendors the grader chose from (``opencl_device.vendors_hidden`` reads the same path
    on both sides)."""
    value = os.path.normpath(env.get(opencl_device.VENDORS_VARIABLE, "") or ".")
    if not os.path.isabs(value) or not os.path.exists(value):
        return []
    mounted = ["/usr", *(f"/etc/{name}" for name in ETC_FILES), *python_folders()]
    if any(value == m or value.startswith(m.rstrip("/") + "/") for m in mounted):
        return []
    folder = os.path.isdir(value)
    files = [str(f) for f in opencl_device.icd_files(Path(value))] if folder else [value]
    made = {p for m in mounted for p in _ancestors(m + "/x")} | {"/", "/etc", SCRATCH}
    args: list[str] = []
    for parent in _ancestors(value + "/x" if folder else value):
        if parent not in made:
            args += ["--perms", "0755", "--dir", parent]
    for file in files:
        args += ["--ro-bind", os.path.realpath(file), file]
    return args


@functools.lru_cache(maxsize=1)
def _mount_args() -> tuple[str, ...]:
    """bwrap arguments for the read-only system part of the sandbox's file system (worked out once per process)."""
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    # /etc made world-traversable first: bwrap creates a missing parent 0700, and the worker's uid
    # (as root: a fresh one) could then read nothing in it (no ICD file: no Debian PoCL inside).
    args += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_FILES:
        host = f"/etc/{name}"
        if os.path.exists(host):
            args += ["--ro-bind", host, host]
    sys_folders = [f for f in SYS_FOLDERS if os.path.isdir(f)]
    for parent in dict.fromkeys(p for f in sys_folders for p in _ancestors(f)):
        args += ["--perms", "0755", "--dir", parent]  # world-traversable, as /etc above
    for folder in sys_folders:
        args += ["--ro-bind", folder, folder]
    made: set[str] = {"/", "/usr", "/etc", SCRATCH}  # the scratch tmpfs is mounted first (see wrap)
    mounted = python_folders()
    for folder in mounted:
        for parent in _ancestors(folder):
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", folder, folder]
    for folder in hidden_folders(mounted):
        args += ["--tmpfs", folder]
    bundle = f"{BUNDLE_MOUNT}/grader"
    args += ["--perms", "0755", "--dir", BUNDLE_MOUNT, "--perms", "0755", "--dir", bundle]
    for folder in sorted({str(Path(m).parent) for m in WORKER_MODULES} - {"."}):  # student, student/engine...
        args += ["--perms", "0755", "--dir", f"{bundle}/{folder}"]
    for module in WORKER_MODULES:
        args += ["--ro-bind", str(GRADER_DIR / module), f"{bundle}/{module}"]
    return tuple(args)


def fresh_uid() -> int:
    """A uid for one root-run sandbox, drawn from :data:`SANDBOX_UID_RANGE`: it owns no file and no process."""
    return secrets.randbelow(SANDBOX_UID_RANGE[1] - SANDBOX_UID_RANGE[0]) + SANDBOX_UID_RANGE[0]


def wrap(
    command: list[str],
    jobdir: Path,
    scratch_bytes: int,
    env: dict[str, str],
    kernel_cache: str | None = None,
    uid: int | None = None,
) -> list[str]:
    """``command`` (a worker's argv) wrapped in bubblewrap; ``jobdir`` appears read-only at /job.

    The command's paths must be the sandbox's (``/job``, ``/opt/normgrade``).
    ``kernel_cache``: a folder bound writable at :data:`KERNEL_CACHE_MOUNT`
    (the one student's own kernel cache, see ``Limits.kernel_cache``).
    ``uid``: as root, the uid the worker drops to (default: :func:`fresh_uid`).
    """
    args = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    root = os.geteuid() == 0
    if not root:
        args += ["--unshare-user", "--disable-userns", "--uid", str(UNPRIVILEGED_UID), "--gid", str(UNPRIVILEGED_UID)]
    # The scratch tmpfs first: a checkout or virtual environment that lives below /tmp is
    # then mounted on top of it (read-only), instead of being hidden by it.
    args += ["--size", str(scratch_bytes), "--perms", "1777", "--tmpfs", SCRATCH]
    args += list(_mount_args())
    args += vendors_args(env)
    args += ["--ro-bind", str(jobdir), JOB_MOUNT]
    if kernel_cache is not None:
        args += ["--bind", kernel_cache, KERNEL_CACHE_MOUNT]
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += ["--clearenv"]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    args += ["--chdir", SCRATCH]
    if root:
        uid = fresh_uid() if uid is None else uid
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--"]
        args += [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        args += ["--inh-caps=-all", "--no-new-privs"]
    else:
        args += ["--"]
    return args + command


def _missing() -> str | None:
    """What rules the sandbox out without starting one (the platform, a missing program), or None."""
    if sys.platform != "linux":
        return f"the OS sandbox needs Linux (bubblewrap); this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return f"bubblewrap is not installed ({INSTALL_HINT})"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv is not installed (apt-get install util-linux)"
    return None


class _Probe:
    """This Python started in a real sandbox, checking that it can read NumPy and the worker.

    It runs in the background from :func:`start_probe`; :meth:`verdict` waits for it
    (at exit at the latest, which removes its folder).
    """

    def __init__(self) -> None:
        self._verdict: tuple[str | None] | None = None
        self.folder = PrivateFolder("normgrade-probe-")  # (a killed grader's is removed by the next one)
        job = self.folder.path / "job"
        job.mkdir(mode=0o755)
        env = environment(BUNDLE_MOUNT)
        # Python starts (without site: a fraction of the time) and can read NumPy and the worker.
        numpy = importlib.util.find_spec("numpy")
        files = [f"{BUNDLE_MOUNT}/grader/student/sandbox/worker.py"] + (
            [numpy.origin] if numpy and numpy.origin else []
        )
        code = f"try:\n    [open(f, 'rb').close() for f in {files!r}]\n    print('readable')\nexcept OSError:\n    pass"
        argv = wrap([sys.executable, "-S", "-c", code], job, 1 << 20, env)
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            self.failed: str | None = None
        except OSError as exc:
            self.proc, self.failed = None, f"bubblewrap could not start a sandbox ({exc})"
        atexit.register(self.verdict)

    def verdict(self) -> str | None:
        """None when the sandbox worked; otherwise one line saying why not and what to do."""
        if self._verdict is None:
            self._verdict = (self._wait(),)
        return self._verdict[0]

    def _wait(self) -> str | None:
        try:
            if self.proc is None:
                return self.failed
            try:
                out, err = self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired as exc:
                self.proc.kill()
                self.proc.communicate()
                return f"bubblewrap could not start a sandbox ({exc})"
            if self.proc.returncode != 0:
                lines = err.decode(errors="replace").strip().splitlines() or [f"exit status {self.proc.returncode}"]
                return f"bubblewrap cannot create a sandbox here: {lines[-1][:200]}"
            if out.decode(errors="replace").strip() != "readable":
                # The sandbox's user (as root: a uid that owns nothing) cannot read the environment.
                return (
                    f"the sandbox cannot read the Python environment {sys.prefix} (a folder only its owner "
                    "may read?): make it readable to others (chmod -R o+rX) or run the grader as its owner"
                )
            return None
        finally:
            self.folder.remove()


@functools.lru_cache(maxsize=1)
def _probe() -> _Probe | str:
    """The one probe of this process, started; or what rules the sandbox out without one."""
    return _missing() or _Probe()


def start_probe() -> bool:
    """Start checking whether the sandbox works, in the background; False when it surely cannot.

    ``grade submit`` calls this first and starts its workers in the sandbox on
    a True, while the probe runs on another core; :func:`problem` has the answer.
    """
    return not isinstance(_probe(), str)


@functools.lru_cache(maxsize=1)
def problem() -> str | None:
    """None when the sandbox works here; otherwise one line saying why not and what to do.

    Checked once per process by starting this Python in a real sandbox
    (started by :func:`start_probe`, or now).
    """
    probe = _probe()
    return probe if isinstance(probe, str) else probe.verdict()
