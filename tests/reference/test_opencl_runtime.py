"""reference.opencl.runtime: device discovery, memoised builds, build errors, launch sizes."""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest

from grader.student.engine import opencl_device
from reference.opencl import runtime
from reference.opencl.runtime import (
    KernelBuildError,
    OpenCLUnavailable,
    build_program,
    get_context,
    get_queue,
    load_program,
    opencl_unavailable_reason,
    reduction_local_size,
)

OWN_KERNEL_FILES = ["activations.cl", "dropout.cl", "rmsnorm.cl", "layernorm.cl", "normalization.cl"]


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:
    """No memoised device choice, no cache of the developer's, no context of the process's."""
    monkeypatch.setenv("GRADE_OPENCL_CACHE", str(tmp_path / "device.json"))
    monkeypatch.delenv("GRADE_OPENCL_CHOICES", raising=False)
    monkeypatch.setattr(runtime, "_context", None)
    opencl_device.forget()
    yield
    opencl_device.forget()


def test_unavailable_reason_when_pyopencl_is_missing(monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> None:
    def fail():
        raise ImportError("No module named 'pyopencl'")

    monkeypatch.setattr(opencl_device, "import_pyopencl", fail)
    reason = opencl_unavailable_reason()
    assert reason is not None and "pyopencl cannot be imported" in reason and "grade doctor" in reason
    assert "\n" not in reason


def test_unavailable_reason_when_no_platform(monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> None:
    def no_platform():
        raise RuntimeError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: types.SimpleNamespace(get_platforms=no_platform))
    reason = opencl_unavailable_reason()
    assert reason is not None
    assert "no OpenCL device is installed" in reason and "grade doctor" in reason
    assert "\n" not in reason


def test_get_context_raises_opencl_unavailable(monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> None:
    monkeypatch.setattr(opencl_device, "import_pyopencl", lambda: types.SimpleNamespace(get_platforms=lambda: []))
    with pytest.raises(OpenCLUnavailable, match="grade doctor"):
        get_context()


@pytest.mark.opencl
def test_get_context_refuses_a_device_whose_builds_fail(monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> None:
    monkeypatch.setenv("GRADE_OPENCL_FAULT", "unknown-cpu")
    with pytest.raises(OpenCLUnavailable, match="unknown target CPU 'generic'"):
        get_context()


def test_reduction_local_size_is_a_capped_power_of_two() -> None:
    device = types.SimpleNamespace(max_work_group_size=100)  # not a power of two
    assert reduction_local_size(0, device) == 1
    assert reduction_local_size(1, device) == 1
    assert reduction_local_size(3, device) == 4
    assert reduction_local_size(16, device) == 16
    assert reduction_local_size(17, device) == 32
    assert reduction_local_size(1000, device) == 64  # device limit 100 -> 64
    assert reduction_local_size(1000, device, max_size=32) == 32
    big = types.SimpleNamespace(max_work_group_size=4096)
    assert reduction_local_size(4096, big) == 256  # default max_size


def test_kernel_build_error_shows_file_options_and_log() -> None:
    err = KernelBuildError("rmsnorm.cl", ("-DFOO=1",), "error: use of undeclared identifier 'y'")
    text = str(err)
    assert "rmsnorm.cl" in text and "-DFOO=1" in text and "undeclared identifier" in text
    assert err.filename == "rmsnorm.cl" and err.options == ("-DFOO=1",)


@pytest.mark.opencl
def test_reason_is_none_and_context_queue_are_memoised() -> None:
    import pyopencl as cl

    assert opencl_unavailable_reason() is None
    ctx = get_context()
    assert get_context() is ctx
    queue = get_queue()
    assert get_queue() is queue and get_queue(ctx) is queue
    assert queue.properties & cl.command_queue_properties.PROFILING_ENABLE


@pytest.mark.opencl
def test_pyopencl_ctx_is_honoured(monkeypatch: pytest.MonkeyPatch, fresh_choice: None) -> None:
    import pyopencl as cl

    device = opencl_device.choose().device
    assert device is not None
    real = cl.Context([device])
    opencl_device.forget()
    calls = []

    def create_some_context(interactive: bool = True):
        calls.append(interactive)
        return real

    monkeypatch.setattr(cl, "create_some_context", create_some_context)
    monkeypatch.setenv("PYOPENCL_CTX", "0")
    assert get_context().devices == real.devices
    assert calls == [False]


@pytest.mark.opencl
def test_build_program_is_memoised_per_source_and_options() -> None:
    source = "__kernel void fill(__global float *x) { x[get_global_id(0)] = 2.0f; }"
    first = build_program(source, "fill.cl")
    assert build_program(source, "fill.cl") is first
    assert build_program(source, "fill.cl", ("-DUNUSED=1",)) is not first


@pytest.mark.opencl
def test_build_failure_raises_kernel_build_error_with_the_log() -> None:
    bad = "__kernel void broken(__global float *x) { x[0] = undeclared_name; }"
    with pytest.raises(KernelBuildError) as info:
        build_program(bad, "broken.cl", ("-DANSWER=42",))
    err = info.value
    assert err.filename == "broken.cl"
    assert err.options == ("-DANSWER=42",)
    assert "undeclared_name" in err.log
    assert "broken.cl" in str(err) and "-DANSWER=42" in str(err) and "undeclared_name" in str(err)


@pytest.mark.opencl
@pytest.mark.parametrize("name", OWN_KERNEL_FILES)
def test_reference_kernel_files_build(name: str) -> None:
    program = load_program(name)
    assert load_program(name) is program
    assert program.kernel_names


@pytest.mark.opencl
def test_reduction_local_size_respects_the_device() -> None:
    device = get_context().devices[0]
    for D in (1, 7, 64, 1000, 4096):
        L = reduction_local_size(D)
        assert L & (L - 1) == 0
        assert L <= device.max_work_group_size
        assert L >= min(D, 256) or L == device.max_work_group_size


def test_every_wrapper_is_exported_at_package_level() -> None:
    """reference.opencl.<Name> for every CPU reference class and function that has an OpenCL wrapper."""
    import importlib

    import reference.opencl as gpu

    wrapped = ["activations", "linear", "normalization", "dropout", "init", "optim"]
    for topic in wrapped:
        cpu = importlib.import_module(f"reference.{topic}")
        module = importlib.import_module(f"reference.opencl.{topic}")
        for name in dir(cpu):
            if name.startswith("_") or not hasattr(module, name) or getattr(cpu, name) is getattr(module, name):
                continue
            if getattr(getattr(cpu, name), "__module__", "") != f"reference.{topic}":
                continue  # imported helpers such as Module
            assert getattr(gpu, name, None) is getattr(module, name), f"reference.opencl.{name}"
            assert name in gpu.__all__, name
    for name in ("RMSNorm", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "InstanceNorm2d"):
        assert name in gpu.__all__
