"""Hidden checks of the OpenCL exercises.

The reference kernels, copied into a temporary student folder, are built and
run on the OpenCL device in this process (``@pytest.mark.opencl``); the known
mistakes are NumPy emulations and need no device.
"""

from __future__ import annotations

import os
import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from checks_util import SEEDS, assert_named, by_name, grade_in_process
from grader.student.engine.catalogue import EXERCISES as EXERCISES_OF_CATALOGUE
from grader.student.engine.checks import CHECKS
from grader.mistakes import CATALOGUE
from grader.student.engine.ops import run_script

os.environ.setdefault("POCL_CACHE_DIR", "/tmp/pocl-cache")

ROOT = Path(__file__).resolve().parents[3]
KERNEL_FILES = ["activations.cl", "dropout.cl", "rmsnorm.cl", "layernorm.cl"]
EXERCISES = [e for e in CHECKS if e.startswith("kernels.")]
MISTAKES = [(m.exercise, m.id) for m in CATALOGUE.values() if m.exercise in EXERCISES]


def student(folder: Path, sources: dict[str, str] | None = None) -> types.SimpleNamespace:
    """A student namespace whose kernels/ holds the reference kernels, with ``sources`` replacing files."""
    kernels = folder / "kernels"
    kernels.mkdir(parents=True, exist_ok=True)
    for name in KERNEL_FILES:
        shutil.copy(ROOT / "reference" / "opencl" / name, kernels / name)
    for name, text in (sources or {}).items():
        (kernels / name).write_text(text)
    return types.SimpleNamespace(__path__=[str(folder)])


def test_every_kernel_exercise_needs_opencl_and_adds_up() -> None:
    assert EXERCISES == [e for e in EXERCISES_OF_CATALOGUE if e.startswith("kernels.")]  # each kernel has checks
    for exercise in EXERCISES:
        assert CHECKS[exercise].needs_opencl
        assert sum(c.points for c in CHECKS[exercise].plan(SEEDS[0]).checks) == 10


@pytest.mark.parametrize("exercise,mistake_id", MISTAKES)
def test_every_mistake_is_named(exercise: str, mistake_id: str) -> None:
    for seed in SEEDS:
        assert_named(exercise, mistake_id, seed)


@pytest.mark.opencl
def test_reference_kernels_full_marks_and_stable(tmp_path: Path) -> None:
    ns = student(tmp_path)
    for seed in SEEDS:
        for exercise in EXERCISES:
            first = grade_in_process(exercise, ns, seed)
            bad = {r.name: r.message for r in first if not r.passed}
            assert not bad, f"{exercise} seed {seed}: {bad}"
            second = grade_in_process(exercise, ns, seed)
            assert [r.to_json() for r in first] == [r.to_json() for r in second]


TANH_GELU = """
__kernel void gelu_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
}
"""

UNGUARDED_RELU = """
__kernel void relu_forward(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    y[i] = fmax(x[i], 0.0f);
}
"""

TAIL_RMSNORM = """
__kernel void rmsnorm_forward(__global const float *x, __global const float *gamma, __global float *y,
                              __global float *rstd, const int D, const float eps, __local float *scratch)
{
    const int row = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    __global const float *xr = x + row * D;
    float s = 0.0f;
    for (int k = 0; k < D / L; k++) { const float v = xr[k * L + lid]; s += v * v; }
    scratch[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = L / 2; off > 0; off /= 2) {
        if (lid < off) scratch[lid] += scratch[lid + off];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = rsqrt(scratch[0] / D + eps);
    for (int i = lid; i < D; i += L) y[row * D + i] = xr[i] * r * gamma[i];
    if (lid == 0) rstd[row] = r;
}
"""


@pytest.mark.opencl
def test_a_wrong_kernel_fails_and_is_named(tmp_path: Path) -> None:
    ns = student(tmp_path, {"activations.cl": TANH_GELU})
    results = by_name(grade_in_process("kernels.gelu_forward", ns))
    assert not results["values"].passed
    assert results["values"].misconception == "kernel-gelu-tanh"
    assert results["index_guard"].passed


@pytest.mark.opencl
def test_skipped_tail_on_the_device_is_named(tmp_path: Path) -> None:
    ns = student(tmp_path, {"rmsnorm.cl": TAIL_RMSNORM})
    results = by_name(grade_in_process("kernels.rmsnorm_forward", ns))
    assert not results["y"].passed and results["y"].misconception == "kernel-rmsnorm-tail-skipped"


@pytest.mark.opencl
def test_missing_index_guard(tmp_path: Path) -> None:
    ns = student(tmp_path, {"activations.cl": UNGUARDED_RELU})
    results = by_name(grade_in_process("kernels.relu_forward", ns))
    assert results["values"].passed
    assert not results["index_guard"].passed and "guard the index" in results["index_guard"].message


@pytest.mark.opencl
def test_build_error_reports_the_compiler_log(tmp_path: Path) -> None:
    broken = "__kernel void relu_forward(__global const float *x, __global float *y, const int n)\n{ y[0] = ; }\n"
    ns = student(tmp_path, {"activations.cl": broken})
    case = CHECKS["kernels.relu_forward"].cases(SEEDS[0])[0]
    result = run_script(ns, case.script, case.arrays)
    assert result.error is not None and result.error["type"] == "KernelBuildError"
    assert "kernels/activations.cl does not build" in result.error["message"]
    assert "error" in result.error["message"].lower() and "y[0] = ;" in result.error["message"]
    checks = grade_in_process("kernels.relu_forward", ns)
    assert all(not r.passed for r in checks)
    assert "does not build" in by_name(checks)["values"].message


@pytest.mark.opencl
def test_missing_kernel_is_reported(tmp_path: Path) -> None:
    ns = student(tmp_path, {"activations.cl": TANH_GELU})
    results = by_name(grade_in_process("kernels.relu_forward", ns))
    assert "has no kernel named relu_forward" in results["values"].message


def test_empty_stub_is_not_implemented_without_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The released stubs are read, not built: not implemented even where no device builds anything."""
    monkeypatch.setenv("GRADE_OPENCL_FAULT", "unknown-cpu")
    stubs = ROOT / "exercises" / "kernels"
    sources = {name: (stubs / name).read_text() for name in KERNEL_FILES}
    ns = student(tmp_path, sources)
    for exercise in EXERCISES:
        case = CHECKS[exercise].cases(SEEDS[0])[0]
        result = run_script(ns, case.script, case.arrays)
        assert result.error is not None and result.error["type"] == "NotImplementedError", exercise
        assert "is still the stub (its body is empty)" in result.error["message"]


@pytest.mark.opencl
def test_a_kernel_that_writes_nothing_is_not_implemented(tmp_path: Path) -> None:
    silent = "__kernel void relu_forward(__global const float *x, __global float *y, const int n) { int i = 0; }\n"
    ns = student(tmp_path, {"activations.cl": silent})
    case = CHECKS["kernels.relu_forward"].cases(SEEDS[0])[0]
    result = run_script(ns, case.script, case.arrays)
    assert result.error is not None and result.error["type"] == "NotImplementedError"
    assert "wrote nothing" in result.error["message"]


def test_parent_never_needs_a_device() -> None:
    """The reference side of a kernel case is the NumPy emulation (no OpenCL context in the parent)."""
    from grader.mistakes import reference_namespace

    case = CHECKS["kernels.rmsnorm_forward"].cases(SEEDS[0])[0]
    result = run_script(reference_namespace(), case.script, case.arrays)
    assert result.error is None
    assert np.isnan(result.outputs["y"][-1]) and np.isfinite(result.outputs["rstd"][:6]).all()


def test_a_submission_calling_itself_reference_is_not_emulated(tmp_path: Path) -> None:
    from grader.student.engine.ops_opencl import REFERENCE_KERNELS, emulation_table
    from grader.mistakes import reference_namespace

    fake = types.ModuleType("reference")
    fake.__path__ = [str(tmp_path)]
    fake.__file__ = str(tmp_path / "__init__.py")
    assert emulation_table(fake) is None
    assert emulation_table(reference_namespace()) is REFERENCE_KERNELS


@pytest.mark.opencl
def test_build_log_is_shown_once(tmp_path: Path) -> None:
    """Every check carries the whole compiler log (its message is complete in --json); the report says it once."""
    from grader.student.engine.model import ExerciseResult, GradeReport
    from grader.student.feedback.report import format_text

    ns = student(tmp_path, {"dropout.cl": "__kernel void dropout_forward(__global const float *x) { x[0] = 1; }\n"})
    results = grade_in_process("kernels.dropout_forward", ns)
    assert all("read-only" in r.message and "line 1:" in r.message for r in results)
    assert len({r.message for r in results}) == 1
    text = format_text(GradeReport("s", [ExerciseResult("kernels.dropout_forward", "error", 0.0, 10.0, results)]))
    assert text.count("line 1:") == 1
    assert f"- {', '.join(r.name for r in results)} (0/10)" in text


SUBPROCESS_GRADE = """
import sys, types
sys.path.insert(0, {tests!r})
from checks_util import grade_in_process
results = grade_in_process("kernels.layernorm_forward", types.SimpleNamespace(__path__=[{folder!r}]), {seed})
bad = [(r.name, r.message) for r in results if not r.passed]
print(bad)
sys.exit(1 if bad else 0)
"""


@pytest.mark.opencl
def test_vector_rows_shorter_than_the_work_group(tmp_path: Path) -> None:
    """Seed 4 draws D = 48 < L = 64 with D % 4 == 0 (the float4 path with idle work-items).

    Run in a fresh process: a kernel that corrupts memory there must fail this test, not crash pytest.
    """
    import subprocess
    import sys

    case = CHECKS["kernels.layernorm_forward"].plan(4).cases[1]
    assert case.name == "small_D" and case.script[0]["args"][-3]["int"] % 4 == 0
    student(tmp_path)
    code = SUBPROCESS_GRADE.format(tests=str(ROOT / "tests"), folder=str(tmp_path), seed=4)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr


UNSTRIDED_RMSNORM = """
__kernel void rmsnorm_forward(__global const float *x, __global const float *gamma, __global float *y,
                              __global float *rstd, const int D, const float eps, __local float *scratch)
{
    const int row = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    const int i = row * D + lid;               /* one element per work-item: no loop over the row */
    const float v = lid < D ? x[i] : 0.0f;
    scratch[lid] = v * v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int off = L / 2; off > 0; off /= 2) {
        if (lid < off) scratch[lid] += scratch[lid + off];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = rsqrt(scratch[0] / D + eps);
    if (lid < D) y[i] = v * r * gamma[lid];
    if (lid == 0) rstd[row] = r;
}
"""


def test_row_kernel_hints_fit_the_kernel() -> None:
    """Row kernels get a row-kernel hint (no 'if (i >= n) return;': there is no n, and no early return before a
    barrier); a kernel that writes one element per work-item is told to loop over the row."""
    from grader.student.engine.checks.kernels import ROW_GUARD, Guard, unstrided_hint

    guards = [c for c in CHECKS["kernels.rmsnorm_forward"].plan(SEEDS[0]).checks if isinstance(c, Guard)]
    assert [g.hint for g in guards] == [ROW_GUARD] and "i >= n" not in ROW_GUARD and "return" in ROW_GUARD
    rows, D, L = 3, 150, 64
    y = np.full(rows * D + L, np.nan, dtype=np.float32)
    grid = y[: rows * D].reshape(rows, D)
    grid[:, :L] = 1.0
    assert "for (int j = lid; j < D; j += L)" in unstrided_hint(y, rows, D, L)
    grid[:, L:] = 2.0
    assert unstrided_hint(y, rows, D, L) == ""  # written everywhere: the values say the rest
    assert unstrided_hint(y, rows, 40, L) == ""  # D < L: one element per work-item is enough


@pytest.mark.opencl
def test_unstrided_row_kernel_gets_the_loop_hint_on_the_device(tmp_path: Path) -> None:
    ns = student(tmp_path, {"rmsnorm.cl": UNSTRIDED_RMSNORM})
    results = by_name(grade_in_process("kernels.rmsnorm_forward", ns))
    assert not results["y"].passed
    assert "Loop over the row: for (int j = lid; j < D; j += L)" in results["y"].message
    assert results["D_below_L"].passed and results["index_guard"].passed


ONE_PASS_LAYERNORM = """
__kernel void layernorm_forward(__global const float *x, __global const float *gamma, __global const float *beta,
                                __global float *y, __global float *mean, __global float *rstd,
                                const int D, const float eps, __local float *scratch)
{
    const int row = get_group_id(0), lid = get_local_id(0), L = get_local_size(0);
    __global const float *xr = x + row * D;
    float s1 = 0.0f, s2 = 0.0f;
    for (int i = lid; i < D; i += L) { s1 += xr[i]; s2 += xr[i] * xr[i]; }
    scratch[lid] = s1;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) { if (lid < s) scratch[lid] += scratch[lid + s]; barrier(CLK_LOCAL_MEM_FENCE); }
    const float mu = scratch[0] / D;
    barrier(CLK_LOCAL_MEM_FENCE);
    scratch[lid] = s2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) { if (lid < s) scratch[lid] += scratch[lid + s]; barrier(CLK_LOCAL_MEM_FENCE); }
    const float var = scratch[0] / D - mu * mu;          /* one pass: E[x^2] - mean^2 */
    const float r = 1.0f / sqrt(fmax(var, 0.0f) + eps);
    for (int i = lid; i < D; i += L) y[row * D + i] = (xr[i] - mu) * r * gamma[i] + beta[i];
    if (lid == 0) { mean[row] = mu; rstd[row] = r; }
}
"""


@pytest.mark.opencl
def test_one_pass_variance_on_the_device_fails_large_mean_rows_and_is_named(tmp_path: Path) -> None:
    """Round 3: E[x^2] - mean^2 in float32 used to get full marks (no row had a large mean)."""
    ns = student(tmp_path, {"layernorm.cl": ONE_PASS_LAYERNORM})
    for seed in SEEDS:
        results = by_name(grade_in_process("kernels.layernorm_forward", ns, seed))
        assert {n for n, r in results.items() if not r.passed} == {"large_mean"}
        assert results["large_mean"].misconception == "kernel-layernorm-one-pass-var"


def test_a_crashed_kernel_lists_the_usual_causes() -> None:
    from grader.student.sandbox.runner import death_message

    status, message = death_message(-11, "kernels.layernorm_forward", 2 << 30, 10)
    assert status == "crashed" and message.startswith("killed by signal 11 (segfault) during kernels.layernorm_forward")
    assert "barrier" in message and "scratch" in message and "past the end" in message
    assert "barrier" not in death_message(-11, "kernels.relu_forward", 2 << 30, 10)[1]
    assert (
        death_message(-11, "activations.ReLU", 2 << 30, 10)[1]
        == "killed by signal 11 (segfault) during activations.ReLU"
    )
