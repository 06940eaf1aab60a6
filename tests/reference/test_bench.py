"""The kernel benchmark (reference/opencl/bench.py) and `grade bench`: a tiny run, no timing assertions."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli import cli
from reference.opencl import bench, run_exercise_kernel

pytestmark = pytest.mark.opencl


@pytest.fixture(scope="module")
def rows() -> list[bench.Row]:
    return bench.run_bench(sizes=((8, 300),), repeats=1)


def test_every_row_has_positive_times_and_bytes(rows: list[bench.Row]) -> None:
    assert rows
    for r in rows:
        assert r.numpy_s > 0 and r.opencl_s > 0 and r.copy_s > 0, r
        assert 0 < r.bytes_moved <= r.row_pass_bytes, r
        assert r.x_passes >= 1 and r.reductions <= r.x_passes, r


def test_table_names_the_device_and_every_op(rows: list[bench.Row]) -> None:
    table = bench.format_table(rows)
    assert bench.device_description() in table
    expected = {
        "rmsnorm forward",
        "rmsnorm backward",
        "rmsnorm_forward kernel",
        "layernorm forward",
        "layernorm backward",
        "layernorm_forward kernel",
        "layernorm two-pass kernel",
        "batchnorm1d forward",
        "batchnorm1d backward",
        "groupnorm forward",
        "groupnorm backward",
        "relu forward",
        "gelu forward",
    }
    assert {r.op for r in rows} == expected
    for op in expected:
        assert op in table
    assert "row-pass MB" in table and "DRAM MB" in table


def test_rmsnorm_reads_x_fewer_times_than_two_pass_layernorm(rows: list[bench.Row]) -> None:
    by_op = {r.op: r for r in rows}
    rms, two_pass = by_op["rmsnorm_forward kernel"], by_op["layernorm two-pass kernel"]
    assert (rms.reductions, rms.x_passes) == (1, 2)
    assert (two_pass.reductions, two_pass.x_passes) == (2, 3)
    assert rms.row_pass_bytes < two_pass.row_pass_bytes
    assert by_op["rmsnorm forward"].row_pass_bytes < two_pass.row_pass_bytes


def test_two_pass_layernorm_kernel_matches_numpy() -> None:
    """The benchmark's two-reduction layernorm_forward computes LayerNorm (D not a multiple of L, large mean)."""
    rng = np.random.default_rng(3)
    for D in (300, 1001):
        x = (rng.standard_normal((4, D)) * 3 + 10).astype(np.float32)
        gamma, beta = rng.standard_normal(D), rng.standard_normal(D)
        out = run_exercise_kernel(
            bench.layernorm_two_pass_program(),
            "layernorm_forward",
            {"x": x, "gamma": gamma, "beta": beta},
            {"eps": 1e-5},
            L=64,
        )
        x64 = x.astype(np.float64)
        mean, var = x64.mean(axis=1), x64.var(axis=1)
        y = (x64 - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * gamma + beta
        np.testing.assert_allclose(out["mean"], mean, rtol=1e-5)
        np.testing.assert_allclose(out["rstd"], 1 / np.sqrt(var + 1e-5), rtol=1e-4)
        np.testing.assert_allclose(out["y"], y, rtol=1e-4, atol=1e-4)


def test_grade_bench_quick_prints_the_table() -> None:
    result = CliRunner().invoke(cli, ["bench", "--quick", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    assert "Device:" in result.output
    assert "layernorm two-pass kernel" in result.output
    assert "256x1024" in result.output


def test_the_batch_benchmark_class_is_what_it_says(tmp_path) -> None:
    """bench/batch.py's generated class: the stated mix, distinct kernel sources, mistake edits that still apply."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "batch.py"
    spec = importlib.util.spec_from_file_location("bench_batch", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kinds = module.kinds(20)
    assert {k: kinds.count(k) for k in set(kinds)} == {
        "correct": 8,
        "partial": 4,
        "mistaken": 4,
        "crashing": 3,
        "looping": 1,
    }
    assert len(set(module.kinds(5))) >= 4  # a small class is mixed too
    for serial, kind in enumerate(["correct", "mistaken", "mistaken", "partial"]):
        module.write_student(tmp_path / f"s{serial}", f"s{serial}", kind, serial)
    sources = {(tmp_path / f"s{k}" / "exercises" / "kernels" / "rmsnorm.cl").read_text() for k in range(4)}
    assert len(sources) == 4


def test_what_limits_a_small_size_is_said_from_the_measurements() -> None:
    """The size lines follow the measured numbers: launch latency, small transfers, cache, or bandwidth."""

    def row(shape: tuple[int, int], kernel_ms: float, copy_ms: float) -> bench.Row:
        return bench.Row("op", shape, 8_000_000, 1.0, kernel_ms / 1e3, copy_ms / 1e3, 1, 2, 8_000_000)

    large = row((4096, 4096), 10.0, 8.0)  # 1.0 GB/s copy
    cases = {
        "launch latency": (row((1024, 1024), 0.2, 0.1), 0.1e-3),
        "transfers too small": (row((1024, 1024), 30.0, 20.0), 1e-6),
        "fits in cache": (row((1024, 1024), 3.0, 2.0), 1e-6),
        "DRAM bandwidth": (row((1024, 1024), 10.0, 8.0), 1e-6),
        "fixed costs per kernel": (row((1024, 1024), 30.0, 8.0), 1e-6),
    }
    for expected, (small, latency) in cases.items():
        (line,) = bench.size_limits([small, large], latency)
        assert line.startswith("1024x1024:") and expected in line, (expected, line)
    assert bench.size_limits([large], 1e-6) == []


def test_grade_bench_says_what_limits_the_small_size() -> None:
    result = CliRunner().invoke(cli, ["bench", "--quick", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    assert "empty-kernel launch" not in result.output  # --quick has one size: nothing smaller to explain
