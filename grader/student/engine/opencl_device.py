"""Which OpenCL device grades kernels: the first one that builds and runs a probe kernel.

A listed device can still be useless. PoCL built with an LLVM older than the CPU
names the CPU ``generic`` and then builds nothing ("unknown target CPU 'generic'",
pocl/pocl#1049, #512: the PoCL of ``pocl-binary-distribution`` on a Zen 5); a
driver may start outside the bubblewrap sandbox and not inside it. So a device is
chosen by trying it, in the process that will use it:

``choose() -> Choice``

1. ``PYOPENCL_CTX`` set: the device it names (pyopencl's own rule), and only that one;
2. otherwise the device an earlier run chose on this machine (the cache, below) is
   probed first;
3. then every device of every platform, in platform order, except that a driver built
   with its assertions checked (:func:`is_checking_build`: Debian's PoCL 3.1 says
   "+Asserts") comes after the release builds, and Oclgrind (a simulator: exact, slow)
   after every real device: the first whose probe passes.

Why the checking builds wait: the documented install has two PoCLs (PyPI's, a release
build, and Debian's, the fallback for CPUs newer than PyPI's LLVM), and every student's
kernel worker starts a compiler. One correct student's kernel exercises graded in one
fresh process took a median 2.26 CPU-s with Debian's, 2.01 with PyPI's (`python
bench/devices.py --runs 7`); graded through the sandbox, 3.8 machine CPU-s against 3.15
(docs/measured.md, "Which PoCL compiles").

The **probe** (:func:`probe`) builds :data:`PROBE_SOURCE` (erf, exp, rsqrt, a
``__local`` reduction with barriers: what the exercise and reference kernels use)
and runs it on two rows of five values, comparing with NumPy. Every device that
fails keeps its reason (``Choice.tried``), so that ``grade doctor`` and a
``not_graded`` verdict say why each one was skipped.

**The cache** (``$XDG_CACHE_HOME/normgrade/opencl-device.json``, or the file named
by ``GRADE_OPENCL_CACHE``) maps a key made of every platform's name and version
and its devices' names (and :data:`CHOICE_RULE`) to the position of the device chosen
there: a changed installation, or a changed order, is a new key, and a cached device is
still probed before use (the probe is the compiler's warm-up, which the grading worker
pays anyway). A device that ``PYOPENCL_CTX`` names is never cached. Only a
device that passed is cached. The sandboxed worker cannot write the cache: the
grader passes it in (:func:`cached_entries_variable`) and records the worker's
choice from its results (:func:`remember`).

**The ICD loader's own variable** is honoured as the loader documents it:
``OCL_ICD_VENDORS`` naming a folder with no ``*.icd`` file (or nothing at all)
means no vendor, so no platform is used (:func:`vendors_hidden`), even where
pyopencl's wheel bundles a loader that finds its own PoCL regardless. Naming a
vendor file or library (Intel's ``libintelocl.so``) or a folder that holds
``.icd`` files leaves the listing to the loader.

**Rehearsing a broken machine**: ``GRADE_OPENCL_FAULT=no-device`` hides every
platform; ``GRADE_OPENCL_FAULT=unknown-cpu`` makes every build fail as PoCL's does
on a CPU newer than its LLVM (``unknown-cpu:TEXT``: only on devices whose label
holds TEXT). The grader's own builds (the probe, a student's kernel file, the
reference's kernels) all go through :func:`simulated_build_failure`, so every path
that meets such a machine can be tested on any machine.

Fork warning (as for :mod:`reference.opencl.runtime`): a process that has created an
OpenCL context must not fork children that use OpenCL; ``choose`` creates contexts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAULT_VARIABLE = "GRADE_OPENCL_FAULT"
VENDORS_VARIABLE = "OCL_ICD_VENDORS"  # the ICD loader's: a folder of .icd files, or one vendor's file or library
CACHE_VARIABLE = "GRADE_OPENCL_CACHE"
# The cache's entries, handed to a sandboxed worker (which sees no home folder of the grader's).
ENTRIES_VARIABLE = "GRADE_OPENCL_CHOICES"
DOCTOR_HINT = "`grade doctor` shows more"
# The order devices are tried in (release builds before checking builds since 2): part of the cache's key.
CHOICE_RULE = 2

PROBE_SOURCE = r"""
__kernel void normgrade_probe(__global const float *x, __global float *y, const int n,
                              const float eps, __local float *scratch)
{
    const int lid = get_local_id(0), L = get_local_size(0), row = get_group_id(0);
    float acc = 0.0f;
    for (int i = lid; i < n; i += L) acc += x[row * n + i] * x[row * n + i];
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = rsqrt(scratch[0] / n + eps);
    for (int i = lid; i < n; i += L) {
        const float t = x[row * n + i];
        y[row * n + i] = t * r + 0.5f * (1.0f + erf(t * M_SQRT1_2_F)) + exp(-0.5f * t * t);
    }
}
"""
PROBE_ROWS, PROBE_N, PROBE_LOCAL, PROBE_EPS = 2, 5, 4, 1e-5


@dataclass
class Tried:
    """One device looked at: its label and why it was skipped (None: it passed the probe)."""

    label: str
    reason: str | None


@dataclass
class Choice:
    """The device chosen (None when none works), where it sits, and every device tried."""

    device: Any | None
    label: str = ""
    position: tuple[int, int] | None = None  # (platform index, device index)
    key: str = ""  # the installation's cache key
    tried: list[Tried] = field(default_factory=list)

    @property
    def problem(self) -> str | None:
        """None when a device was chosen; else one line: what is missing, each device's reason, the hint."""
        if self.device is not None:
            return None
        if not self.tried:
            return "no OpenCL device is installed on the grader's machine (`grade doctor` says how to get one)"
        reasons = "; ".join(f"{t.label}: {first_line(t.reason or '')}" for t in self.tried)
        return f"no OpenCL device here can build and run a kernel ({reasons}) ({DOCTOR_HINT})"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``grade doctor --json``, the worker's report to the grader)."""
        return {
            "device": self.label or None,
            "key": self.key,
            "position": list(self.position) if self.position else None,
            "tried": [{"device": t.label, "ok": t.reason is None, "reason": t.reason} for t in self.tried],
        }


def first_line(text: str, limit: int = 240) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    for line in str(text).splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


# --- what the platforms are ------------------------------------------------------------


def short_version(platform_version: str) -> str:
    """'OpenCL 3.0 PoCL 3.1+debian  Linux, ..., LLVM 15.0.6, ...' -> 'PoCL 3.1+debian, LLVM 15.0.6'."""
    head = re.sub(r"^OpenCL \d+\.\d+\s*", "", platform_version.split("  ")[0]).strip(" ()")
    llvm = re.search(r"LLVM \d+(\.\d+)*", platform_version)
    return head + (f", {llvm.group(0)}" if llvm and llvm.group(0) not in head else "")


def label_of(platform: Any, device: Any) -> str:
    """A device as a person reads it: 'pthread-skylake-avx512-Intel(R) Xeon(R) (PoCL 3.1+debian, LLVM 15.0.6)',
    'Intel(R) Xeon(R) Processor (Intel(R) OpenCL 3.1 LINUX)' where the version names no product."""
    version = short_version(str(platform.version))
    if not re.search(r"[A-Za-z][^ ]* \d", version):
        version = f"{str(platform.name).strip()} {str(platform.version).replace('OpenCL', '').strip()}".strip()
    return f"{str(device.name).strip()} ({version})"


def is_checking_build(platform: Any) -> bool:
    """A driver built with its assertions checked ("+Asserts" or "Debug" in its version): slower to compile."""
    version = str(platform.version)
    return "+Asserts" in version or bool(re.search(r"\bDebug\b", version))


def is_simulator(platform: Any) -> bool:
    """Oclgrind simulates a device: exact and slow, so it is taken only when no real device works."""
    return "oclgrind" in f"{platform.name} {platform.version}".lower()


def icd_files(folder: Path) -> list[Path]:
    """The vendor files an ICD loader reads in ``folder``: its ``*.icd`` files (the sandbox mounts these alone)."""
    return sorted(f for f in folder.glob("*.icd") if f.is_file())


def vendors_hidden() -> str | None:
    """Why ``OCL_ICD_VENDORS`` leaves no vendor (a folder without ``*.icd`` files, or a path that is not
    there), or None when it is unset or names one (a vendor file or library, or a folder of ``.icd`` files)."""
    value = os.environ.get(VENDORS_VARIABLE, "")
    if not value.strip():
        return None
    path = Path(value)
    if path.is_file() or (path.is_dir() and icd_files(path)):
        return None
    what = "a folder with no .icd file" if path.is_dir() else "nothing on this machine"
    return f"{value} names {what}, so no OpenCL vendor is used (unset it, or point it at /etc/OpenCL/vendors)"


def listed_devices(cl: Any) -> list[tuple[int, int, Any, Any]]:
    """(platform index, device index, platform, device) for every device, in platform order."""
    if os.environ.get(FAULT_VARIABLE, "").strip() == "no-device":
        return []
    found = []
    for pi, platform in enumerate(cl.get_platforms()):
        try:
            devices = platform.get_devices()
        except cl.Error:  # a platform with no device raises DEVICE_NOT_FOUND
            continue
        found += [(pi, di, platform, device) for di, device in enumerate(devices)]
    return found


def trial_order(found: list[tuple[int, int, Any, Any]]) -> list[tuple[int, int, Any, Any]]:
    """``found`` in the order devices are tried: release builds, then checking builds, then simulators; within
    each, platform order."""
    return sorted(found, key=lambda entry: (is_simulator(entry[2]), is_checking_build(entry[2])))


def installation_key(found: list[tuple[int, int, Any, Any]]) -> str:
    """A digest of every platform's name and version and its devices' names (the cache's key)."""
    described: list[Any] = [[pi, di, str(p.name), str(p.version), str(d.name)] for pi, di, p, d in found]
    described.append(CHOICE_RULE)  # a cache written under an older order is not read
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:24]


# --- rehearsing a broken machine ---------------------------------------------------------


def simulated_build_failure(label: str) -> str | None:
    """The compiler log of a build that ``GRADE_OPENCL_FAULT=unknown-cpu[:TEXT]`` makes fail on ``label``, or None."""
    fault = os.environ.get(FAULT_VARIABLE, "").strip()
    if not fault.startswith("unknown-cpu"):
        return None
    _, _, text = fault.partition(":")
    if text and text not in label:
        return None
    return f"error: unknown target CPU 'generic'\nDevice {label} failed to build the program"


# --- the probe ---------------------------------------------------------------------------


def probe_expected(x: Any) -> Any:
    """What the probe kernel computes, in float64 (x: rows x n)."""
    import numpy as np

    r = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + PROBE_EPS)
    erf = np.vectorize(math.erf)
    return x * r + 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + np.exp(-0.5 * x * x)


def probe(platform: Any, device: Any, options: tuple[str, ...] = ()) -> str | None:
    """Build and run the probe kernel on ``device``: None when it works, else why not (one line or a log)."""
    import numpy as np
    import pyopencl as cl

    simulated = simulated_build_failure(label_of(platform, device))
    if simulated:
        return simulated
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx)
        program = cl.Program(ctx, PROBE_SOURCE)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                program.build(options=list(options))
        except cl.Error as exc:
            logs = []
            try:
                logs.append(str(program.get_build_info(device, cl.program_build_info.LOG)).strip())
            except cl.Error:
                pass
            return "\n".join(log for log in logs if log) or f"the probe kernel does not build: {exc}"
        x = np.linspace(-2.0, 2.0, PROBE_ROWS * PROBE_N).reshape(PROBE_ROWS, PROBE_N).astype(np.float32)
        y = np.full_like(x, np.nan)
        mf = cl.mem_flags
        x_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
        y_buf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=y)
        program.normgrade_probe(
            queue,
            (PROBE_ROWS * PROBE_LOCAL,),
            (PROBE_LOCAL,),
            x_buf,
            y_buf,
            np.int32(PROBE_N),
            np.float32(PROBE_EPS),
            cl.LocalMemory(4 * PROBE_LOCAL),  # type: ignore[arg-type]  # (pyopencl's stubs omit LocalMemory)
        )
        cl.enqueue_copy(queue, y, y_buf)
        queue.finish()
    except Exception as exc:  # cl.Error, RuntimeError from a driver, MemoryError...
        return f"the probe kernel did not run: {type(exc).__name__}: {first_line(str(exc))}"
    expected = probe_expected(x.astype(np.float64))
    if not np.allclose(y, expected, rtol=1e-4, atol=1e-4):
        return "the probe kernel ran but computed wrong values (a broken driver?)"
    return None


# --- the cache ---------------------------------------------------------------------------


def cache_path() -> Path:
    """Where this machine's choices are kept."""
    named = os.environ.get(CACHE_VARIABLE)
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "normgrade" / "opencl-device.json"


def _valid_entries(data: Any) -> dict[str, list[int]]:
    """The well-formed entries of a cache document: key -> [platform index, device index]."""
    if not isinstance(data, dict):
        return {}
    entries = {}
    for key, value in list(data.items())[:16]:
        position = value.get("position") if isinstance(value, dict) else None
        if (
            isinstance(key, str)
            and re.fullmatch(r"[0-9a-f]{8,64}", key)
            and isinstance(position, list)
            and len(position) == 2
            and all(isinstance(v, int) and 0 <= v < 1000 for v in position)
        ):
            entries[key] = position
    return entries


def cached_entries() -> dict[str, list[int]]:
    """The cached choices: from the grader's variable (inside a sandbox), else from the cache file."""
    passed = os.environ.get(ENTRIES_VARIABLE)
    try:
        if passed:
            return _valid_entries({k: {"position": v} for k, v in json.loads(passed).items()})
        return _valid_entries(json.loads(cache_path().read_text(encoding="utf-8")))
    except (OSError, ValueError, AttributeError):
        return {}


def cached_entries_variable() -> str | None:
    """The cache's entries as the value of :data:`ENTRIES_VARIABLE` for a sandboxed worker (None: nothing cached)."""
    entries = cached_entries()
    return json.dumps(entries, separators=(",", ":")) if entries else None


def remember(report: Any) -> None:
    """Keep a chosen device's position under its key (``report``: :meth:`Choice.as_dict`); never raises."""
    try:
        key, position = report.get("key"), report.get("position")
        if not _valid_entries({key: {"position": position}}) or report.get("device") is None:
            return
        path = cache_path()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        if isinstance(data.get(key), dict) and data[key].get("position") == position:
            return
        data[key] = {"position": position, "device": str(report.get("device"))[:200]}
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
            json.dump(dict(list(data.items())[-16:]), handle)
        os.replace(handle.name, path)
    except Exception:  # a read-only home, a full disk: the next run probes again
        return


# --- choosing ----------------------------------------------------------------------------

_lock = threading.Lock()
_chosen: dict[tuple[str, ...], Choice] = {}


def choose(options: tuple[str, ...] = (), use_cache: bool = True) -> Choice:
    """The device this process grades kernels on (memoised per ``options``, the probe's build options).

    ``use_cache=False`` probes every device (``grade doctor``); a rehearsed fault never reads or writes the cache.
    """
    use_cache = use_cache and not os.environ.get(FAULT_VARIABLE)
    with _lock:
        if options not in _chosen:
            _chosen[options] = _choose(options, use_cache)
        return _chosen[options]


def survey(options: tuple[str, ...] = ()) -> Choice:
    """Every device probed (``grade doctor``: each one's verdict), none skipped after the first that passes,
    which is the one chosen, as :func:`choose` would (the cache is neither read nor written; not memoised)."""
    return _choose(options, use_cache=False, every=True)


def forget() -> None:
    """Drop the memoised choice (the next :func:`choose` probes again: after a failure, in tests)."""
    with _lock:
        _chosen.clear()


def import_pyopencl() -> Any:
    """pyopencl (a function of its own, so that tests can give a fake one)."""
    import pyopencl

    return pyopencl


def _choose(options: tuple[str, ...], use_cache: bool, every: bool = False) -> Choice:
    try:
        cl = import_pyopencl()
    except Exception as exc:  # ImportError or a broken ICD loader
        return Choice(None, tried=[Tried("pyopencl", f"pyopencl cannot be imported ({first_line(str(exc))})")])
    hidden = vendors_hidden()
    if hidden is not None:
        return Choice(None, tried=[Tried(VENDORS_VARIABLE, hidden)])
    try:
        found = listed_devices(cl)
    except Exception as exc:  # get_platforms raises PLATFORM_NOT_FOUND_KHR when there is no ICD at all
        return Choice(None, tried=[] if "PLATFORM_NOT_FOUND" in str(exc) else [Tried("OpenCL", first_line(str(exc)))])
    if os.environ.get("PYOPENCL_CTX"):
        return _chosen_by_variable(cl, found, options)
    key = installation_key(found)
    order = trial_order(found)
    cached = cached_entries().get(key) if use_cache else None
    if cached:
        order = [e for e in order if [e[0], e[1]] == cached] + [e for e in order if [e[0], e[1]] != cached]
    tried: list[Tried] = []
    chosen: Choice | None = None
    for pi, di, platform, device in order:
        label = label_of(platform, device)
        reason = probe(platform, device, options)
        tried.append(Tried(label, reason))
        if reason is None and chosen is None:
            chosen = Choice(device, label, (pi, di), key, tried)
            if use_cache and not os.environ.get(ENTRIES_VARIABLE):
                remember(chosen.as_dict())
            if not every:
                return chosen
    return chosen if chosen is not None else Choice(None, key=key, tried=tried)


def _chosen_by_variable(cl: Any, found: list[tuple[int, int, Any, Any]], options: tuple[str, ...]) -> Choice:
    """``PYOPENCL_CTX`` names the device: that one, probed, or none (never another behind the user's back).
    No cache key: what the variable names is the user's choice for this run, not the order's, so it is never
    cached (a later run without the variable would otherwise take it first)."""
    try:
        ctx = cl.create_some_context(interactive=False)
        device = ctx.devices[0]
    except Exception as exc:
        return Choice(None, tried=[Tried(f"PYOPENCL_CTX={os.environ['PYOPENCL_CTX']}", first_line(str(exc)))])
    platform = device.platform
    position = next(((pi, di) for pi, di, _p, d in found if d == device), None)
    label = label_of(platform, device)
    reason = probe(platform, device, options)
    tried = [Tried(f"{label} (PYOPENCL_CTX={os.environ['PYOPENCL_CTX']})", reason)]
    return Choice(device if reason is None else None, label, position, tried=tried)
