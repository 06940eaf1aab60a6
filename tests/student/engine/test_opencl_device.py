"""grader.student.engine.opencl_device: a device is chosen by building and running a probe kernel on it.

Fake platforms drive the order, the skipped devices' reasons, the cache and PYOPENCL_CTX on any
machine; the real device (marked opencl) passes the probe, and GRADE_OPENCL_FAULT rehearses a CPU
that PoCL's LLVM does not know ("unknown target CPU 'generic'").
"""

from __future__ import annotations

import hashlib
import json
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grader.student.engine import opencl_device
from grader.student.engine.ops_opencl import kernel_body_is_empty

ROOT = Path(__file__).resolve().parents[3]
GENERIC = "error: unknown target CPU 'generic'"


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Each test has a cache file of its own and no memoised choice."""
    cache = tmp_path / "cache" / "opencl-device.json"
    monkeypatch.setenv(opencl_device.CACHE_VARIABLE, str(cache))
    for name in (opencl_device.ENTRIES_VARIABLE, opencl_device.FAULT_VARIABLE, "PYOPENCL_CTX"):
        monkeypatch.delenv(name, raising=False)
    opencl_device.forget()
    yield cache
    opencl_device.forget()


def platform(name: str, version: str, *devices: str) -> types.SimpleNamespace:
    made = types.SimpleNamespace(name=name, version=version)
    found = [types.SimpleNamespace(name=d, platform=made) for d in devices]
    made.get_devices = lambda: found
    return made


class FakeCL:
    """A pyopencl with the given platforms; ``Error`` for platforms without devices."""

    Error = RuntimeError
    create_some_context: Callable[..., types.SimpleNamespace]  # set by a test of PYOPENCL_CTX (none otherwise)

    def __init__(self, *platforms: types.SimpleNamespace) -> None:
        self.platforms = list(platforms)

    def get_platforms(self) -> list[types.SimpleNamespace]:
        return self.platforms


OCLGRIND = platform("Oclgrind", "OpenCL 1.2 (Oclgrind 21.10)", "Oclgrind Simulator")
OLD_POCL = platform(
    "Portable Computing Language", "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, LLVM 14.0.6", "pthread-AMD EPYC"
)
NEW_POCL = platform("Portable Computing Language", "OpenCL 3.0 PoCL 3.1+debian  Linux, LLVM 15.0.6", "pthread-znver")


def chosen_name(choice: opencl_device.Choice) -> str:
    """The name of the device ``choice`` holds (one must have been chosen)."""
    assert choice.device is not None, choice.problem
    return choice.device.name


def problem_of(choice: opencl_device.Choice) -> str:
    """What ``choice`` says is wrong (no device must have been chosen)."""
    assert choice.problem is not None, choice.label
    return choice.problem


def fake_probes(monkeypatch: pytest.MonkeyPatch, failing: dict[str, str]) -> list[str]:
    """Replace the probe: a device whose name is in ``failing`` fails with that log; returns the probed names."""
    probed: list[str] = []

    def probe(_platform, device, options=()):
        probed.append(device.name)
        return failing.get(device.name)

    monkeypatch.setattr(opencl_device, "probe", probe)
    return probed


def test_a_real_device_that_works_is_chosen_before_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(OCLGRIND, OLD_POCL, NEW_POCL))
    fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    choice = opencl_device.choose()
    assert chosen_name(choice) == "pthread-znver"
    assert choice.label == "pthread-znver (PoCL 3.1+debian, LLVM 15.0.6)"
    assert [(t.label, t.reason) for t in choice.tried] == [
        ("pthread-AMD EPYC (PoCL 3.0-rc2, LLVM 14.0.6)", GENERIC),
        ("pthread-znver (PoCL 3.1+debian, LLVM 15.0.6)", None),
    ]
    assert choice.problem is None


# Both of the documented install, as this machine lists them: Debian's (checked) first, PyPI's (release) second.
DEBIAN_POCL = platform(
    "Portable Computing Language",
    "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, SPIR, LLVM 15.0.6, SLEEF, DISTRO, POCL_DEBUG",
    "pthread-skylake-avx512",
)
PYPI_POCL = platform(
    "Portable Computing Language",
    "OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, RELOC, LLVM 14.0.6, SLEEF, DISTRO, POCL_DEBUG",
    "pthread-Intel(R) Xeon(R) Processor",
)


def test_a_release_build_is_tried_before_a_build_with_assertions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(DEBIAN_POCL, PYPI_POCL, OCLGRIND))
    probed = fake_probes(monkeypatch, {})
    choice = opencl_device.choose()
    assert chosen_name(choice) == "pthread-Intel(R) Xeon(R) Processor"
    assert choice.position == (1, 0)  # where the platform is listed, not where it was tried
    assert probed == ["pthread-Intel(R) Xeon(R) Processor"]


def test_the_build_with_assertions_is_the_fallback_where_the_release_build_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(DEBIAN_POCL, PYPI_POCL, OCLGRIND))
    probed = fake_probes(monkeypatch, {"pthread-Intel(R) Xeon(R) Processor": GENERIC})
    assert chosen_name(opencl_device.choose()) == "pthread-skylake-avx512"
    assert probed == ["pthread-Intel(R) Xeon(R) Processor", "pthread-skylake-avx512"]


def test_a_cache_written_under_the_older_order_is_not_read(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(DEBIAN_POCL, PYPI_POCL))
    found = opencl_device.listed_devices(FakeCL(DEBIAN_POCL, PYPI_POCL))
    described = [[pi, di, str(p.name), str(p.version), str(d.name)] for pi, di, p, d in found]
    old_key = hashlib.sha256(json.dumps(described).encode()).hexdigest()[:24]  # the key before CHOICE_RULE
    own_cache.parent.mkdir(parents=True, exist_ok=True)
    own_cache.write_text(json.dumps({old_key: {"position": [0, 0], "device": "Debian's, chosen first before"}}))
    probed = fake_probes(monkeypatch, {})
    assert chosen_name(opencl_device.choose()) == "pthread-Intel(R) Xeon(R) Processor"
    assert probed == ["pthread-Intel(R) Xeon(R) Processor"]


def test_the_simulator_is_the_last_resort(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(OCLGRIND, OLD_POCL))
    probed = fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    assert chosen_name(opencl_device.choose()) == "Oclgrind Simulator"
    assert probed == ["pthread-AMD EPYC", "Oclgrind Simulator"]


def test_no_working_device_says_each_reason_and_names_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(OLD_POCL))
    fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC + "\nDevice pthread-AMD EPYC failed to build the program"})
    choice = opencl_device.choose()
    assert choice.device is None
    problem = problem_of(choice)
    assert "\n" not in problem
    assert "pthread-AMD EPYC (PoCL 3.0-rc2, LLVM 14.0.6): error: unknown target CPU 'generic'" in problem
    assert "grade doctor" in problem


def test_nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def none():
        raise RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: types.SimpleNamespace(get_platforms=none))
    assert problem_of(opencl_device.choose()).startswith("no OpenCL device is installed")


def test_the_choice_is_cached_and_probed_first_next_time(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(OLD_POCL, OCLGRIND))
    probed = fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    first = opencl_device.choose()
    assert probed == ["pthread-AMD EPYC", "Oclgrind Simulator"]
    stored = json.loads(own_cache.read_text())
    assert stored == {first.key: {"position": [1, 0], "device": first.label}}

    opencl_device.forget()
    probed.clear()
    assert chosen_name(opencl_device.choose()) == "Oclgrind Simulator"
    assert probed == ["Oclgrind Simulator"]  # the failing device costs nothing the second time


def test_a_changed_installation_is_a_new_key(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(OLD_POCL, OCLGRIND))
    fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    old = opencl_device.choose()
    opencl_device.forget()
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(NEW_POCL, OLD_POCL, OCLGRIND))
    probed = fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    new = opencl_device.choose()
    assert new.key != old.key and chosen_name(new) == "pthread-znver"
    assert probed == ["pthread-znver"]
    assert set(json.loads(own_cache.read_text())) == {old.key, new.key}


def test_a_cached_device_that_fails_now_is_skipped(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(NEW_POCL, OCLGRIND))
    fake_probes(monkeypatch, {})
    key = opencl_device.choose().key
    opencl_device.forget()
    own_cache.write_text(json.dumps({key: {"position": [0, 0]}}))
    probed = fake_probes(monkeypatch, {"pthread-znver": "the probe kernel did not run: out of resources"})
    assert chosen_name(opencl_device.choose()) == "Oclgrind Simulator"
    assert probed == ["pthread-znver", "Oclgrind Simulator"]


def test_a_worker_reads_the_entries_it_is_given_and_writes_no_cache(
    monkeypatch: pytest.MonkeyPatch, own_cache: Path
) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: FakeCL(OLD_POCL, OCLGRIND))
    fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    key = opencl_device.installation_key(opencl_device.listed_devices(FakeCL(OLD_POCL, OCLGRIND)))
    monkeypatch.setenv(opencl_device.ENTRIES_VARIABLE, json.dumps({key: [1, 0]}))
    probed = fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    choice = opencl_device.choose()
    assert chosen_name(choice) == "Oclgrind Simulator" and probed == ["Oclgrind Simulator"]
    assert not own_cache.exists()
    opencl_device.remember(choice.as_dict())  # the grader keeps what its worker reports
    assert json.loads(own_cache.read_text())[key]["position"] == [1, 0]


@pytest.mark.parametrize(
    "report",
    [
        None,
        "x",
        {},
        {"key": "../../etc", "position": [0, 0], "device": "d"},
        {"key": "abcdef0123456789", "position": [0, -1], "device": "d"},
        {"key": "abcdef0123456789", "position": [0, 0, 0], "device": "d"},
        {"key": "abcdef0123456789", "position": [0, 0], "device": None},
    ],
)
def test_remember_ignores_what_is_not_a_choice(report: object, own_cache: Path) -> None:
    opencl_device.remember(report)
    assert not own_cache.exists()


def test_pyopencl_ctx_names_the_only_device_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    cl = FakeCL(NEW_POCL, OLD_POCL)
    chosen = OLD_POCL.get_devices()[0]
    cl.create_some_context = lambda interactive=True: types.SimpleNamespace(devices=[chosen])
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: cl)
    monkeypatch.setenv("PYOPENCL_CTX", "1")
    probed = fake_probes(monkeypatch, {"pthread-AMD EPYC": GENERIC})
    choice = opencl_device.choose()
    assert choice.device is None and probed == ["pthread-AMD EPYC"]  # never another device behind the user's back
    assert "PYOPENCL_CTX=1" in problem_of(choice) and "unknown target CPU" in problem_of(choice)


def test_a_device_pyopencl_ctx_names_is_not_cached(monkeypatch: pytest.MonkeyPatch, own_cache: Path) -> None:
    """The variable is this run's choice: a later run without it tries the devices in the usual order."""
    cl = FakeCL(DEBIAN_POCL, PYPI_POCL)
    cl.create_some_context = lambda interactive=True: types.SimpleNamespace(devices=[DEBIAN_POCL.get_devices()[0]])
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: cl)
    monkeypatch.setenv("PYOPENCL_CTX", "0")
    probed = fake_probes(monkeypatch, {})
    forced = opencl_device.choose()
    assert chosen_name(forced) == "pthread-skylake-avx512"
    opencl_device.remember(forced.as_dict())  # as the grader does with a worker's report
    assert not own_cache.exists()

    monkeypatch.delenv("PYOPENCL_CTX")
    opencl_device.forget()
    probed.clear()
    assert chosen_name(opencl_device.choose()) == "pthread-Intel(R) Xeon(R) Processor"
    assert probed == ["pthread-Intel(R) Xeon(R) Processor"]


def test_short_version_reads_the_platforms_seen() -> None:
    assert opencl_device.short_version(OLD_POCL.version) == "PoCL 3.0-rc2, LLVM 14.0.6"
    assert opencl_device.short_version(OCLGRIND.version) == "Oclgrind 21.10"


# --- the real device ------------------------------------------------------------------------


@pytest.mark.opencl
def test_the_real_device_passes_the_probe() -> None:
    choice = opencl_device.choose()
    assert choice.device is not None, choice.problem
    assert choice.tried[-1].reason is None


@pytest.mark.opencl
def test_a_rehearsed_unknown_cpu_fails_every_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(opencl_device.FAULT_VARIABLE, "unknown-cpu")
    choice = opencl_device.choose()
    assert choice.device is None
    assert all(t.reason is not None and t.reason.startswith(GENERIC) for t in choice.tried)
    assert "grade doctor" in problem_of(choice)


@pytest.mark.opencl
def test_a_rehearsed_fault_on_one_device_falls_to_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyopencl as cl

    devices = opencl_device.trial_order(opencl_device.listed_devices(cl))
    if len(devices) < 2:
        pytest.skip("one OpenCL device here: nothing to fall back to")
    first = opencl_device.label_of(devices[0][2], devices[0][3])
    monkeypatch.setenv(opencl_device.FAULT_VARIABLE, f"unknown-cpu:{first}")
    choice = opencl_device.choose(use_cache=False)
    assert choice.device is not None and choice.label != first
    reason = choice.tried[0].reason
    assert choice.tried[0].label == first and reason is not None and reason.startswith(GENERIC)


def test_a_rehearsed_missing_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(opencl_device.FAULT_VARIABLE, "no-device")
    assert problem_of(opencl_device.choose()).startswith("no OpenCL device is installed")


# --- untouched stubs are read, not built ---------------------------------------------------------


@pytest.mark.parametrize(
    "file, kernels",
    [
        ("activations.cl", ["relu_forward", "relu_backward", "gelu_forward", "gelu_backward"]),
        ("dropout.cl", ["dropout_forward"]),
        ("rmsnorm.cl", ["rmsnorm_forward"]),
        ("layernorm.cl", ["layernorm_forward"]),
    ],
)
def test_the_released_stubs_have_empty_bodies(file: str, kernels: list[str]) -> None:
    stub = (ROOT / "exercises" / "kernels" / file).read_text()
    solution = (ROOT / "reference" / "opencl" / file).read_text()
    for kernel in kernels:
        assert kernel_body_is_empty(stub, kernel)
        assert not kernel_body_is_empty(solution, kernel)


def test_an_empty_body_is_found_by_its_own_kernel() -> None:
    source = (
        "// a helper\nfloat twice(float v) { return 2.0f * v; }\n"
        "__kernel void a(__global float *x) { /* TODO */ }\n"
        "__kernel void b(__global float *x) {\n  // still to do\n}\n"
        "__kernel void c(__global float *x) { if (1) { x[0] = 1.0f; } }\n"
        "__kernel void d(__global float *x) { ; }\n"
    )
    assert kernel_body_is_empty(source, "a") and kernel_body_is_empty(source, "b")
    assert not kernel_body_is_empty(source, "c") and not kernel_body_is_empty(source, "d")
    assert not kernel_body_is_empty(source, "missing")
    assert not kernel_body_is_empty("__kernel void a(__global float *x) {", "a")  # unbalanced: the build says why


def test_ocl_icd_vendors_hides_every_platform_only_when_it_names_no_vendor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the ICD loader reads it: a folder without .icd files or a missing path is no vendor (nothing is used,
    the reason names the variable); a folder of .icd files, or one vendor's library, leaves the listing as it is."""
    monkeypatch.delenv(opencl_device.VENDORS_VARIABLE, raising=False)
    assert opencl_device.vendors_hidden() is None
    empty = tmp_path / "empty"
    empty.mkdir()
    for hidden in (empty, tmp_path / "missing"):
        monkeypatch.setenv(opencl_device.VENDORS_VARIABLE, str(hidden))
        reason = opencl_device.vendors_hidden()
        assert reason is not None and str(hidden) in reason
        choice = opencl_device.choose(use_cache=False)
        assert (
            choice.device is None and "OCL_ICD_VENDORS" in problem_of(choice) and "grade doctor" in problem_of(choice)
        )
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "some.icd").write_text("libsome.so\n")
    library = tmp_path / "libintelocl.so"
    library.write_bytes(b"")
    for named in (listed, library):
        monkeypatch.setenv(opencl_device.VENDORS_VARIABLE, str(named))
        assert opencl_device.vendors_hidden() is None


@pytest.mark.opencl
def test_the_survey_gives_every_device_its_verdict_and_chooses_as_choose_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """`grade doctor` shows each device's verdict: the survey probes every one, also after one passed, and
    chooses the first that passes, as grading does."""
    import pyopencl as cl

    devices = opencl_device.listed_devices(cl)
    survey = opencl_device.survey()
    assert [t.label for t in survey.tried] == [
        opencl_device.label_of(p, d) for _, _, p, d in opencl_device.trial_order(devices)
    ]
    assert survey.label == opencl_device.choose(use_cache=False).label
    assert survey.label == next(t.label for t in survey.tried if t.reason is None)
    if len(devices) >= 2:  # the first one broken: it is still listed, with its reason, and the next is chosen
        first = survey.tried[0].label
        monkeypatch.setenv(opencl_device.FAULT_VARIABLE, f"unknown-cpu:{first}")
        broken = opencl_device.survey()
        assert [t.label for t in broken.tried] == [t.label for t in survey.tried]
        reason = broken.tried[0].reason
        assert reason is not None and reason.startswith(GENERIC) and broken.label != first
