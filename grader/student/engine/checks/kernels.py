"""Hidden checks of the OpenCL exercises (spec section 5): ``kernels.<name>``.

Each case is one ``cl_kernel`` op (format in ``grader.student.engine.ops_opencl``): the spawned
worker builds the student's ``kernels/<file>.cl`` on the available OpenCL
device, fills every output buffer with NaN, launches the kernel once and
returns the buffers. Expected values are the NumPy float64 emulation of the
reference kernel on the same float32 inputs, computed in the grader's own
process (which never creates an OpenCL context).

- Elementwise kernels: n not a multiple of the work-group size L = 64, the
  global size rounded up to a multiple of L, input buffers padded past n with
  ones: the kernel must guard its index, so the output past n stays NaN. Exact
  zeros in x (the derivative conventions at 0), large |x|, and a tiny n < L.
- Row kernels (rmsnorm_forward, layernorm_forward): one work-group of L threads
  per row, D not a multiple of L (L = 64 and L = 128) and D < L, an all-zero row
  (finite output), a row of values ~1e-4 where eps dominates, a row ~1e2, rows
  with a non-zero mean; the output buffers have NaN padding past the last row.
- Tolerances (float32 device arithmetic against float64): elementwise kernels
  rtol 1e-5, atol 1e-6 * max(1, max|expected|); reductions over rows rtol 1e-4,
  atol 1e-5 * max(1, max|expected|). A correct float32 kernel is within ~1e-6
  relative; the tanh GELU is off by up to 5e-4, a skipped tail by percents.
- A file that does not build fails every check with the compiler log in the
  message; a kernel that writes nothing (the stub) raises NotImplementedError
  in the worker, so the exercise is not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.student.engine.checks.context import Context, error_text
from grader.student.engine.checks.kinds import Check, own_figure, result
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.engine.compare import compare, scale_of
from grader.student.engine.diagnosis import KnownMistake as Mistake
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case
from grader.student.feedback import figures

ELEMENTWISE_TOL = (1e-5, 1e-6)
ROW_TOL = (1e-4, 1e-5)
# Large-mean rows: a right float32 kernel is ~3e-5 off there (the mean's own rounding), one that takes the
# variance as E[x^2] - mean^2 in float32 at least 1e-3 (measured over 20 rows of D = 300..500).
LARGE_MEAN = 256.0
LARGE_MEAN_TOL = (1e-4, 1e-4)
ONE_PASS_MISTAKE = "kernel-layernorm-one-pass-var"


def round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def padded(values: np.ndarray, size: int, fill: float = 1.0) -> np.ndarray:
    """float32 ``values`` followed by ``fill`` up to ``size`` elements."""
    out = np.full(size, fill, dtype=np.float32)
    out[: values.size] = values.astype(np.float32).ravel()
    return out


def kernel_op(file: str, kernel: str, args: list[dict[str, Any]], global_size: int, local: int) -> dict[str, Any]:
    return {"op": "cl_kernel", "file": file, "kernel": kernel, "args": args, "global": global_size, "local": local}


@dataclass
class Region:
    """Output ``key`` of ``case``: values [0, valid) are graded, [valid, end) must stay NaN."""

    case: str
    key: str
    valid: int
    what: str = ""


@dataclass
class KernelValues(Check):
    """The graded part of each region equals the emulated reference (float32 tolerance).

    ``mask`` optionally restricts the comparison to some indices of a region (by key).
    A failure names the known mistake whose emulation reproduces the student's values.
    """

    regions: list[Region] = field(default_factory=list)
    tol: tuple[float, float] = ELEMENTWISE_TOL
    masks: dict[str, np.ndarray] = field(default_factory=dict)
    row_shape: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # case -> (rows, D, L) of row kernels

    def run(self, ctx: Context) -> CheckResult:
        for region in self.regions:
            s = ctx.student_result(region.case)
            got = s.outputs.get(region.key)
            if got is None:
                return result(self.name, self.points, False, kernel_error_text(s.error))
            expected = ctx.reference_output(region.case, region.key)
            cmp = self.compare_region(got, expected, region)
            if not cmp.ok:
                mistake = self.match(ctx)
                message = f"{region.what}{region.key}: {cmp.message}"
                if mistake is None and region.key == "y" and region.case in self.row_shape:
                    hint = unstrided_hint(got, *self.row_shape[region.case])
                    message = hint + "\n" + message if hint else message
                return result(self.name, self.points, False, message, mistake, self.figure(got, expected, region))
        return result(self.name, self.points, True)

    def figure(self, got: np.ndarray, expected: np.ndarray, region: Region) -> dict[str, Any] | None:
        """The graded part of the region, yours against the emulated reference (the shapes when they differ)."""
        title = f"{region.what}{region.key}"
        if got.shape != expected.shape:
            return figures.shapes_figure(got.shape, expected.shape, title=title, key=region.key)
        rtol, atol = self.tol
        e = expected[: region.valid]
        return figures.elements_figure(got[: region.valid], e, rtol, atol * scale_of(e), title=title, key=region.key)

    def compare_region(self, got: np.ndarray, expected: np.ndarray, region: Region, masked: bool = True) -> Any:
        """The graded part of ``got`` against ``expected`` (only the region's mask, if any, when ``masked``)."""
        rtol, atol = self.tol
        if got.shape != expected.shape:
            return compare(got, expected)
        g, e = got[: region.valid], expected[: region.valid]
        mask = self.masks.get(f"{region.case}/{region.key}") if masked else None
        if mask is not None:
            g, e = g[mask], e[mask]
        return compare(g, e, rtol, atol * scale_of(e), check_dtype=False)

    def match(self, ctx: Context) -> Mistake | None:
        """The first mistake whose emulation gives the student's values on the whole graded part
        of every region (not only the masked indices: a mistake must explain the entire output)."""
        for mistake in ctx.mistakes:
            if all(self.reproduces(ctx, mistake, region) for region in self.regions):
                return mistake
        return None

    def reproduces(self, ctx: Context, mistake: Mistake, region: Region) -> bool:
        """The mistake's output equals the student's on the whole graded part of ``region``."""
        got = ctx.student_result(region.case).outputs.get(region.key)
        theirs = ctx.run_mistake(mistake, ctx.cases[region.case]).outputs.get(region.key)
        return got is not None and theirs is not None and self.compare_region(got, theirs, region, masked=False).ok


@dataclass
class LargeMeanValues(KernelValues):
    """KernelValues on rows with a large mean, naming float32 cancellation (E[x^2] - mean^2) when it explains them.

    No emulation reproduces a device's float32 rounding exactly, so the one-pass variance is named by what it
    does: every row of the main case is right (the kernel is otherwise correct) and on the large-mean rows the
    variance read off rstd, 1 / rstd^2 - eps, is off the true one by no more than float32 rounding of E[x^2]
    can explain (64 * 2^-24 * mean(x^2)).
    """

    eps: float = 1e-5
    main: list[Region] = field(default_factory=list)

    def match(self, ctx: Context) -> Mistake | None:
        found = super().match(ctx)
        if found is not None or "rstd" not in {r.key for r in self.regions}:
            return found
        one_pass = next((m for m in ctx.mistakes if m.id == ONE_PASS_MISTAKE), None)
        if one_pass is None:
            return None
        for region in self.main:
            got = ctx.student_result(region.case).outputs.get(region.key)
            if (
                got is None
                or not self.compare_region(got, ctx.reference_output(region.case, region.key), region, masked=False).ok
            ):
                return None  # wrong elsewhere too: not (only) cancellation
        case = next(r.case for r in self.regions)
        rstd = ctx.student_result(case).outputs.get("rstd")
        ref_rstd = ctx.reference_output(case, "rstd")
        x = ctx.cases[case].arrays["x"].astype(np.float64)
        rows = next(r.valid for r in self.regions if r.key == "rstd")
        if rstd is None or not np.all(np.isfinite(rstd[:rows])) or np.any(rstd[:rows] <= 0):
            return None
        D = x.size // rows
        mean_square = np.mean(x[: rows * D].reshape(rows, D) ** 2, axis=1)
        var_got = 1.0 / rstd[:rows].astype(np.float64) ** 2 - self.eps
        var_ref = 1.0 / ref_rstd[:rows].astype(np.float64) ** 2 - self.eps
        if np.all(np.abs(var_got - var_ref) <= 64 * 2.0**-24 * mean_square):
            return one_pass
        return None


def unstrided_hint(y: np.ndarray, rows: int, D: int, L: int) -> str:
    """A hint when a row kernel wrote y[row * D + j] for j < L only (D > L): one element per work-item, no loop."""
    if D <= L or y.size < rows * D:
        return ""
    grid = y[: rows * D].reshape(rows, D)
    if np.all(np.isfinite(grid[:, :L])) and np.all(np.isnan(grid[:, L:])):
        return (
            f"Only the first L = {L} values of each row of D = {D} were written: each work-item handles one"
            " element. Loop over the row: for (int j = lid; j < D; j += L) (in the reductions and in the"
            " writes)."
        )
    return ""


ELEMENTWISE_GUARD = (
    "guard the index (if (i >= n) return;) since the global size is rounded up to a multiple of the work-group size"
)
ROW_GUARD = (
    "write only inside your own row: y[row * D + j] for j < D (a strided loop j = lid, lid + L, ... < D;"
    " work-items with lid >= D write nothing) and the statistics at index row; keep every work-item"
    " running to the last barrier (no early return)"
)


# Why a kernel usually crashes the process (a segfault in the OpenCL runtime), said when it does.
_CRASH_COMMON = (
    "an index past the end of a buffer (guard it: the global size is rounded up to a multiple of the work-group size)"
)
_CRASH_ROW = (
    "a return or a branch around barrier(CLK_LOCAL_MEM_FENCE) (every work-item of the group must reach"
    " every barrier: no early return), a local size larger than the __local scratch buffer (index it"
    " with lid < L only), or a row index past the last row"
)
CRASH_CAUSES: dict[str, str] = {
    "kernels.relu_forward": _CRASH_COMMON,
    "kernels.relu_backward": _CRASH_COMMON,
    "kernels.gelu_forward": _CRASH_COMMON,
    "kernels.gelu_backward": _CRASH_COMMON,
    "kernels.dropout_forward": _CRASH_COMMON + ", or reading u past n",
    "kernels.rmsnorm_forward": _CRASH_ROW + ", or " + _CRASH_COMMON,
    "kernels.layernorm_forward": _CRASH_ROW + ", or " + _CRASH_COMMON,
}


def crash_causes(exercise_id: str) -> str:
    """The usual causes of a crashed kernel of ``exercise_id``, one sentence."""
    return "Usual causes: " + CRASH_CAUSES.get(exercise_id, _CRASH_COMMON) + "."


@dataclass
class Guard(Check):
    """Past the graded part every output stays NaN: the kernel guards its index (``hint`` says how, per kernel)."""

    regions: list[Region] = field(default_factory=list)
    hint: str = ELEMENTWISE_GUARD

    def run(self, ctx: Context) -> CheckResult:
        for region in self.regions:
            s = ctx.student_result(region.case)
            got = s.outputs.get(region.key)
            if got is None:
                return result(self.name, self.points, False, kernel_error_text(s.error))
            tail = got[region.valid :]
            written = int(np.sum(~np.isnan(tail)))
            if written:
                return result(
                    self.name,
                    self.points,
                    False,
                    f"{region.what}{region.key}: {written} values past the end (index >= {region.valid})"
                    f" were written: {self.hint}",
                    figure=own_figure(
                        tail,
                        np.full(tail.shape, np.nan),
                        0.0,
                        0.0,
                        f"{region.what}{region.key} past the end (index {region.valid} on)",
                        region.key,
                        "nothing written (NaN)",
                        "what your kernel wrote there",
                    ),
                )
        return result(self.name, self.points, True)


def kernel_error_text(error: dict[str, str] | None) -> str:
    """Why a kernel case produced nothing: the worker's own message for an unwritten stub, else the error (a build
    error with its whole compiler log: every check says it, and the report says it once for all of them)."""
    if error and error.get("type") == "NotImplementedError" and error.get("message"):
        return f"not implemented yet: {error['message']}"
    return error_text(error)


# --------------------------------------------------------------------------- elementwise kernels


class ElementwiseKernelChecks(ExerciseChecks):
    """relu_forward, relu_backward, gelu_forward, gelu_backward: values, zeros, tiny n, index guard."""

    needs_opencl = True
    timeout = 30.0

    def __init__(self, kernel: str, backward: bool) -> None:
        self.kernel = kernel
        self.backward = backward
        self.id = f"kernels.{kernel}"

    def case(self, name: str, x: np.ndarray, dy: np.ndarray, local: int) -> tuple[Case, int]:
        n = x.size
        g = round_up(n, local)
        arrays = {"x": padded(x, g)}
        args: list[dict[str, Any]] = [{"in": "x"}]
        if self.backward:
            arrays["dy"] = padded(dy, g)
            args.append({"in": "dy"})
        out = "dx" if self.backward else "y"
        args += [{"out": out, "size": g}, {"int": n}]
        return Case(name, [kernel_op("activations.cl", self.kernel, args, g, local)], arrays), n

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        n = int(rng.integers(900, 1100))
        if n % 64 == 0:
            n += 7
        x = rng.uniform(-4.0, 4.0, n)
        zeros = rng.choice(n, size=12, replace=False)
        x[zeros] = 0.0
        large = rng.choice(np.setdiff1d(np.arange(n), zeros), size=8, replace=False)
        x[large] = rng.choice([-12.0, -8.0, 8.0, 12.0], size=8)
        dy = rng.standard_normal(n)
        small_n = int(rng.integers(5, 14))
        plan = Plan()
        main, n_main = self.case("main", x, dy, 64)
        small, n_small = self.case("small", rng.uniform(-3, 3, small_n), rng.standard_normal(small_n), 32)
        plan.add_case(main)
        plan.add_case(small)
        out = "dx" if self.backward else "y"
        is_zero = np.zeros(n_main, dtype=bool)
        is_zero[zeros] = True
        what = f"{self.kernel} with n = {n_main}, 64 work-items per group: "
        plan.add(KernelValues("values", 5.0, regions=[Region("main", out, n_main, what)], tol=ELEMENTWISE_TOL))
        plan.add(
            KernelValues(
                "zeros",
                1.5,
                regions=[Region("main", out, n_main, f"{self.kernel} at x = 0: ")],
                tol=ELEMENTWISE_TOL,
                masks={f"main/{out}": is_zero},
            )
        )
        plan.add(
            KernelValues(
                "small_n",
                1.5,
                regions=[Region("small", out, n_small, f"{self.kernel} with n = {n_small} < 32: ")],
                tol=ELEMENTWISE_TOL,
            )
        )
        plan.add(
            Guard(
                "index_guard",
                2.0,
                regions=[
                    Region("main", out, n_main, f"n = {n_main}: "),
                    Region("small", out, n_small, f"n = {n_small}: "),
                ],
            )
        )
        return plan


# --------------------------------------------------------------------------- dropout_forward


class DropoutKernelChecks(ExerciseChecks):
    """dropout_forward: values, u == p kept, p = 1 zeros, p = 0 identity, index guard."""

    id = "kernels.dropout_forward"
    needs_opencl = True
    timeout = 30.0

    @staticmethod
    def case(name: str, x: np.ndarray, u: np.ndarray, p: float, local: int) -> tuple[Case, int]:
        n = x.size
        g = round_up(n, local)
        arrays = {"x": padded(x, g), "u": padded(u, g, fill=0.999)}
        args: list[dict[str, Any]] = [{"in": "x"}, {"in": "u"}, {"out": "y", "size": g}, {"float": p}, {"int": n}]
        return Case(name, [kernel_op("dropout.cl", "dropout_forward", args, g, local)], arrays), n

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        n = int(rng.integers(900, 1100))
        if n % 64 == 0:
            n += 5
        p = float(np.float32(rng.choice([0.2, 0.25, 0.3, 0.35, 0.4])))
        x = rng.uniform(-3.0, 3.0, n)
        x[rng.choice(n, size=10, replace=False)] = 0.0
        u = rng.random(n).astype(np.float32)
        boundary = rng.choice(n, size=16, replace=False)
        u[boundary] = np.float32(p)
        plan = Plan()
        main, n_main = self.case("main", x, u, p, 64)
        m = int(rng.integers(100, 140))
        p1, n1 = self.case("p1", rng.uniform(-3, 3, m), rng.random(m), 1.0, 32)
        p0, n0 = self.case("p0", rng.uniform(-3, 3, m), rng.random(m), 0.0, 32)
        for case in (main, p1, p0):
            plan.add_case(case)
        at_p = np.zeros(n_main, dtype=bool)
        at_p[boundary] = True
        plan.add(KernelValues("values", 5.0, regions=[Region("main", "y", n_main, f"p = {p:.6g}, n = {n_main}: ")]))
        plan.add(
            KernelValues(
                "keep_at_u_equal_p",
                1.0,
                regions=[Region("main", "y", n_main, "where u == p (kept: keep where u >= p): ")],
                masks={"main/y": at_p},
            )
        )
        plan.add(KernelValues("p_one", 1.5, regions=[Region("p1", "y", n1, "p = 1 (all dropped, no NaN): ")]))
        plan.add(KernelValues("p_zero", 0.5, regions=[Region("p0", "y", n0, "p = 0 (identity): ")]))
        plan.add(
            Guard(
                "index_guard", 2.0, regions=[Region("main", "y", n_main), Region("p1", "y", n1), Region("p0", "y", n0)]
            )
        )
        return plan


# --------------------------------------------------------------------------- row kernels


def row_inputs(rng: np.random.Generator, rows: int, D: int) -> np.ndarray:
    """Rows with a non-zero mean; row 1 all zeros, row 2 ~1e-4 (eps dominates), row 3 ~1e2."""
    x = rng.standard_normal((rows, D)) + rng.uniform(0.3, 1.0, (rows, 1))
    if rows >= 4:
        x[1] = 0.0
        x[2] *= 1e-4
        x[3] *= 1e2
    return x


class RowKernelChecks(ExerciseChecks):
    """rmsnorm_forward / layernorm_forward: one work-group per row, D not a multiple of L."""

    needs_opencl = True
    timeout = 30.0

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.id = f"kernels.{kernel}"
        self.layernorm = kernel == "layernorm_forward"
        self.file = "layernorm.cl" if self.layernorm else "rmsnorm.cl"
        self.eps = 1e-5 if self.layernorm else 1e-6
        self.stats = ["mean", "rstd"] if self.layernorm else ["rstd"]

    def case(
        self, name: str, rng: np.random.Generator, rows: int, D: int, local: int, x: np.ndarray | None = None
    ) -> Case:
        values = row_inputs(rng, rows, D) if x is None else x
        arrays = {"x": padded(values, rows * D), "gamma": padded(rng.uniform(0.5, 1.5, D), D)}
        args: list[dict[str, Any]] = [{"in": "x"}, {"in": "gamma"}]
        if self.layernorm:
            arrays["beta"] = padded(rng.standard_normal(D), D)
            args.append({"in": "beta"})
        args.append({"out": "y", "size": rows * D + local})
        args += [{"out": s, "size": rows + 2} for s in self.stats]
        args += [{"int": D}, {"float": self.eps}, {"local": local}]
        return Case(name, [kernel_op(self.file, self.kernel, args, rows * local, local)], arrays)

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        D = int(rng.integers(300, 500))
        if D % 64 == 0:
            D += 3
        D_small = int(rng.integers(20, 50))
        D_big = int(rng.integers(1000, 1100))
        if D_big % 128 == 0:
            D_big += 9
        rows = 6
        plan = Plan()
        plan.add_case(self.case("main", rng, rows, D, 64))
        plan.add_case(self.case("small_D", rng, 3, D_small, 64))
        plan.add_case(self.case("L128", rng, 2, D_big, 128))
        # Rows whose mean is far larger than their spread: E[x^2] - mean^2 in float32 cancels (a one-pass variance
        # is off by ~1e-2 here; a two-pass or shifted one by ~1e-5).
        large_mean = np.array([[LARGE_MEAN], [-0.75 * LARGE_MEAN]]) + rng.standard_normal((2, D))
        plan.add_case(self.case("large_mean", rng, 2, D, 64, x=large_mean))

        def regions(case: str, r: int, d: int, keys: list[str], note: str) -> list[Region]:
            return [Region(case, k, r * d if k == "y" else r, note) for k in keys]

        main_note = f"{rows} rows of D = {D}, L = 64: "
        row1 = np.zeros(rows * D, dtype=bool)
        row1[D : 2 * D] = True
        stat_row1 = np.zeros(rows, dtype=bool)
        stat_row1[1] = True
        zero_masks = {"main/y": row1, **{f"main/{s}": stat_row1 for s in self.stats}}
        shapes = {"main": (rows, D, 64), "small_D": (3, D_small, 64), "L128": (2, D_big, 128)}
        plan.add(
            KernelValues("y", 2.5, regions=regions("main", rows, D, ["y"], main_note), tol=ROW_TOL, row_shape=shapes)
        )
        plan.add(
            KernelValues("row_statistics", 2.0, regions=regions("main", rows, D, self.stats, main_note), tol=ROW_TOL)
        )
        plan.add(
            KernelValues(
                "zero_row",
                1.0,
                regions=regions("main", rows, D, ["y"] + self.stats, "an all-zero row (finite, eps keeps it so): "),
                tol=ROW_TOL,
                masks=zero_masks,
            )
        )
        plan.add(
            KernelValues(
                "D_below_L",
                1.5,
                regions=regions(
                    "small_D", 3, D_small, ["y"] + self.stats, f"D = {D_small} < L = 64 (idle work-items): "
                ),
                tol=ROW_TOL,
            )
        )
        plan.add(
            KernelValues(
                "L128",
                0.5,
                regions=regions("L128", 2, D_big, ["y"] + self.stats, f"D = {D_big}, L = 128: "),
                tol=ROW_TOL,
            )
        )
        plan.add(
            LargeMeanValues(
                "large_mean",
                0.5,
                regions=regions(
                    "large_mean",
                    2,
                    D,
                    ["y"] + self.stats,
                    f"rows of mean {LARGE_MEAN:g} and {-0.75 * LARGE_MEAN:g}, spread 1 (float32 cancellation): ",
                ),
                tol=LARGE_MEAN_TOL,
                eps=self.eps,
                main=regions("main", rows, D, ["y"] + self.stats, ""),
            )
        )
        guard = (
            regions("main", rows, D, ["y"] + self.stats, "")
            + regions("small_D", 3, D_small, ["y"] + self.stats, "")
            + regions("L128", 2, D_big, ["y"] + self.stats, "")
        )
        plan.add(Guard("index_guard", 2.0, regions=guard, hint=ROW_GUARD))
        return plan


CHECKS: list[ExerciseChecks] = [
    ElementwiseKernelChecks("relu_forward", backward=False),
    ElementwiseKernelChecks("relu_backward", backward=True),
    ElementwiseKernelChecks("gelu_forward", backward=False),
    ElementwiseKernelChecks("gelu_backward", backward=True),
    DropoutKernelChecks(),
    RowKernelChecks("rmsnorm_forward"),
    RowKernelChecks("layernorm_forward"),
]
