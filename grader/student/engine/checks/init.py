"""Hidden checks of the four initialisers, and the statistics shared by the random exercises.

An initialiser draws from the student's generator, so its output cannot be
compared elementwise with the reference; it is graded by structure and
statistics instead, with fixed seeds and bounds whose false-failure
probability is below 1e-9 (each computation is stated where it is made):

- shape (fan_out, fan_in) and dtype float64 (fan_in and fan_out differ);
- the generator is used: the same seed gives the same array, another seed another one;
- mean 0, variance inside chi-square bounds of gain^2 * 2 / (fan_in + fan_out)
  (Xavier) or 2 / ((1 + negative_slope^2) * fan) (Kaiming), on n >= 36000 values;
- gain (Xavier), mode and negative_slope (Kaiming) honoured with non-default values;
- Kaiming: ValueError for a mode other than "fan_in" / "fan_out" (the docstring's requirement);
- the distribution's shape: a uniform stays inside [-a, a] and reaches it, a
  normal has excess kurtosis near 0 (a uniform has -1.2).

A failing statistical check names a known mistake when the mistake's variant,
run on the same case, fails the same check with statistics that agree within
the same kind of bounds (``StatCheck``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np

from grader.student.feedback import figures
from grader.student.engine.checks.context import Context, error_text
from grader.student.engine.checks.kinds import Check, Custom, own_figure, result
from grader.student.engine.checks.plans import ExerciseChecks, Plan
from grader.student.engine.diagnosis import KnownMistake as Mistake
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case, ScriptResult

# Two-sided normal quantile for the statistical bounds: P(|Z| > 6.5) = 8.0e-11,
# below 1e-9 with room for the normal approximations used with it.
Z = 6.5
FALSE_FAILURE = 1e-9


# --------------------------------------------------------------------------- statistics


def hoeffding_halfwidth(n: int, prob: float = FALSE_FAILURE) -> float:
    """t with P(|mean of n Bernoulli - its mean| >= t) <= prob, from Hoeffding's bound.

    P(|f - p| >= t) <= 2 exp(-2 n t^2)  =>  t = sqrt(ln(2 / prob) / (2 n)).
    Exact (no approximation); n = 40000 gives t = 0.0164.
    """
    return math.sqrt(math.log(2.0 / prob) / (2.0 * n))


def chi2_ratio_bounds(k: int, z: float = Z) -> tuple[float, float]:
    """Bounds on chi2_k / k holding with probability 1 - P(|Z| > z), by Wilson-Hilferty.

    (chi2_k / k)^(1/3) ~ N(1 - 2/(9k), 2/(9k)), so the bounds are
    (1 - 2/(9k) -+ z sqrt(2/(9k)))^3. For the sample variance s^2 of n normal
    values, (n - 1) s^2 / sigma^2 ~ chi2_{n-1}; for uniform values Var(s^2) is
    smaller (0.8 sigma^4 / n instead of 2 sigma^4 / n), so the bounds are conservative.
    """
    c = 2.0 / (9.0 * k)
    return (1.0 - c - z * math.sqrt(c)) ** 3, (1.0 - c + z * math.sqrt(c)) ** 3


def excess_kurtosis(w: np.ndarray) -> float:
    """m4 / m2^2 - 3 of the sample (0 for a normal, -1.2 for a uniform)."""
    d = np.asarray(w, dtype=np.float64).ravel()
    d = d - d.mean()
    m2 = float(np.mean(d * d))
    if m2 == 0.0:
        return float("nan")
    return float(np.mean(d**4)) / (m2 * m2) - 3.0


# --------------------------------------------------------------------------- statistical checks


@dataclass
class Verdict:
    """A statistical check's outcome on one set of results: ok, message, and what it measured."""

    ok: bool
    message: str = ""
    fingerprint: Any = None
    # Makes the picture of a failure (grader.student.feedback.figures; student data only). A function, called only for
    # the student's own failing verdict: the variants' verdicts (mistake matching) never pay for a histogram.
    figure: Callable[[], dict[str, Any] | None] | None = None


Judge = Callable[[Callable[[str], ScriptResult]], Verdict]


@dataclass
class StatCheck(Check):
    """A check judged by ``judge`` on a function case -> ScriptResult; mistakes matched by fingerprint.

    When the student fails, each known mistake of the exercise is run on the
    same cases. Candidates are the mistakes whose variant also fails this
    check with a fingerprint ``same`` as the student's, and that reproduce the
    student on every other statistical check of the exercise they fail
    (``peers``, set by ``link_peers``: the student fails it too, the same way);
    among them the one that agrees with the student on the most peers (both
    pass, or both fail the same way) is named, i.e. the one that explains the
    most (ties: catalogue order).
    """

    judge: Judge | None = None
    same: Callable[[Any, Any], bool] | None = None
    peers: list["StatCheck"] = field(default_factory=list, repr=False)

    def run(self, ctx: Context) -> CheckResult:
        """The judge's verdict; a failing one carries the last case the judge read (the one that failed it: where
        a location is sought, as a comparison's case)."""
        assert self.judge is not None
        read: list[str] = []

        def student_result(case: str) -> ScriptResult:
            read.append(case)
            return ctx.student_result(case)

        verdict = self.judge(student_result)
        if verdict.ok:
            return result(self.name, self.points, True)
        mistake = self.match(ctx, verdict) if verdict.fingerprint is not None else None
        figure = verdict.figure() if verdict.figure is not None else None
        failed = result(self.name, self.points, False, verdict.message, mistake, figure)
        return dataclasses.replace(failed, case=read[-1]) if read else failed

    def match(self, ctx: Context, verdict: Verdict) -> Mistake | None:
        """The known mistake that fails this check the way the student does (see the class docstring)."""
        assert self.judge is not None and self.same is not None
        peers = [p for p in (self.peers or [self]) if p.judge is not None and p.same is not None]
        student_verdicts = [p.judge(ctx.student_result) for p in peers if p.judge is not None]  # (all of them)
        best: tuple[int, Mistake] | None = None
        for mistake in ctx.mistakes:
            other = variant_verdict(ctx, self, mistake)
            if other.ok or other.fingerprint is None or not self.same(verdict.fingerprint, other.fingerprint):
                continue
            theirs = [variant_verdict(ctx, peer, mistake) for peer in peers]
            if any(
                not t.ok and not agrees(peer, mine, t)
                for peer, mine, t in zip(peers, student_verdicts, theirs, strict=True)
            ):
                continue  # the variant fails a check that the student passes, or fails it another way
            agreement = sum(
                agrees(peer, mine, t) for peer, mine, t in zip(peers, student_verdicts, theirs, strict=True)
            )
            if best is None or agreement > best[0]:
                best = (agreement, mistake)
        return None if best is None else best[1]


def variant_verdict(ctx: Context, check: StatCheck, mistake: Mistake) -> Verdict:
    """``check``'s verdict (ok and fingerprint) on ``mistake``'s variant results, from ``ctx.expected``.

    Computed from the variant's results where they are live; a case pack stores
    the verdicts themselves (the variants' samples are large, what the check
    measured of them is small).
    """
    assert check.judge is not None
    judge = check.judge

    def compute() -> tuple[bool, Any]:
        verdict = judge(lambda case: ctx.run_mistake(mistake, ctx.cases[case]))
        return verdict.ok, verdict.fingerprint

    ok, fingerprint = ctx.expected.verdict(check.name, mistake.id, compute)
    return Verdict(ok, "", fingerprint)


def agrees(check: StatCheck, mine: Verdict, theirs: Verdict) -> bool:
    """Both pass ``check``, or both fail it with fingerprints that are the same."""
    if mine.ok or theirs.ok:
        return mine.ok == theirs.ok
    if mine.fingerprint is None or theirs.fingerprint is None or check.same is None:
        return False
    return bool(check.same(mine.fingerprint, theirs.fingerprint))


def link_peers(plan: Plan) -> Plan:
    """Give every StatCheck of ``plan`` the list of all of them (for mistake ranking)."""
    stats = [c for c in plan.checks if isinstance(c, StatCheck)]
    for check in stats:
        check.peers = stats
    return plan


def output_or_error(result: ScriptResult, key: str) -> tuple[np.ndarray | None, str]:
    """(output, "") or (None, the reason it is missing)."""
    value = result.outputs.get(key)
    if value is None:
        return None, error_text(result.error)
    return value, ""


# --------------------------------------------------------------------------- initialisers


@dataclass
class InitSpec:
    """What one initialiser case asks for: the arguments and the expected distribution."""

    fan_in: int
    fan_out: int
    std: float  # expected standard deviation
    kind: str  # "uniform" or "normal"
    formula: str  # how std was computed, for messages
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def bound(self) -> float:
        """The uniform bound a = sqrt(3) * std."""
        return math.sqrt(3.0) * self.std

    @property
    def n(self) -> int:
        return self.fan_in * self.fan_out


def init_case(name: str, fn: str, spec: InitSpec, seed: int, repeat: bool = False) -> Case:
    """W = fn(fan_in, fan_out, rng(seed), **kwargs); with ``repeat`` also the same seed again and seed + 1."""
    args = [spec.fan_in, spec.fan_out, {"rng": seed}]
    script: list[dict[str, Any]] = [{"op": "func", "fn": fn, "args": args, "kwargs": spec.kwargs, "out": "W"}]
    if repeat:
        script.append({"op": "func", "fn": fn, "args": args, "kwargs": spec.kwargs, "out": "W_again"})
        other = [spec.fan_in, spec.fan_out, {"rng": seed + 1}]
        script.append({"op": "func", "fn": fn, "args": other, "kwargs": spec.kwargs, "out": "W_other"})
    return Case(name, script)


def call_text(fn: str, spec: InitSpec) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in spec.kwargs.items())
    return f"{fn}({spec.fan_in}, {spec.fan_out}, rng{extra})"


def judge_shape(fn: str, items: list[tuple[str, InitSpec]]) -> Judge:
    """W has shape (fan_out, fan_in) and dtype float64 in every case."""

    def judge(res: Callable[[str], ScriptResult]) -> Verdict:
        shapes = []
        for case, spec in items:
            w, why = output_or_error(res(case), "W")
            if w is None:
                return Verdict(False, f"{call_text(fn, spec)}: {why}")
            shapes.append(w.shape)
            picture = partial(
                figures.shapes_figure,
                w.shape,
                (spec.fan_out, spec.fan_in),
                title=call_text(fn, spec),
                key="W",
                received_dtype=str(w.dtype),
                expected_dtype="float64",
            )
            if w.shape != (spec.fan_out, spec.fan_in):
                return Verdict(
                    False,
                    f"{call_text(fn, spec)} returned shape {w.shape}; expected (fan_out, fan_in) ="
                    f" {(spec.fan_out, spec.fan_in)}, the shape of Linear's W",
                    tuple(shapes),
                    picture,
                )
            if w.dtype != np.float64:
                return Verdict(
                    False,
                    f"{call_text(fn, spec)} returned dtype {w.dtype}; expected float64",
                    ("dtype", str(w.dtype)),
                    picture,
                )
        return Verdict(True)

    return judge


def judge_rng(fn: str, case: str, spec: InitSpec) -> Judge:
    """Same seed -> identical arrays; another seed -> a different array."""

    def judge(res: Callable[[str], ScriptResult]) -> Verdict:
        r = res(case)
        values = [v for v in (r.outputs.get(k) for k in ("W", "W_again", "W_other")) if v is not None]
        if len(values) != 3:
            return Verdict(False, f"{call_text(fn, spec)}: {error_text(r.error)}")
        w, again, other = values
        same_seed = w.shape == again.shape and bool(np.array_equal(w, again))
        other_seed = w.shape == other.shape and bool(np.array_equal(w, other))
        if not same_seed:
            return Verdict(
                False,
                "two calls with generators seeded alike returned different arrays: draw every value"
                " from the rng argument (rng.normal / rng.uniform), not from np.random",
                (same_seed, other_seed),
                lambda: own_figure(
                    again,
                    w,
                    0.0,
                    0.0,
                    f"{call_text(fn, spec)} called twice with generators seeded alike",
                    "W",
                    "W of the first call",
                    "W of the second call",
                ),
            )
        if other_seed:
            return Verdict(
                False,
                "generators with different seeds gave the same array: use the rng argument",
                (same_seed, other_seed),
            )
        return Verdict(True)

    return judge


def graded_w(res: Callable[[str], ScriptResult], case: str, fn: str, spec: InitSpec) -> tuple[np.ndarray | None, str]:
    """(W of ``case``, "") when it can be graded statistically, else (None, why not).

    The bounds assume n = fan_in * fan_out finite values.
    """
    w, why = output_or_error(res(case), "W")
    if w is None:
        return None, f"{call_text(fn, spec)}: {why}"
    if w.size != spec.n:
        return None, (
            f"{call_text(fn, spec)} returned {w.size} values (shape {w.shape}); expected fan_out * fan_in = {spec.n}"
        )
    if not np.all(np.isfinite(w)):
        return None, f"{call_text(fn, spec)} returned NaN or inf"
    return w, ""


def judge_mean(fn: str, case: str, spec: InitSpec) -> Judge:
    """|mean(W)| <= Z * s / sqrt(n): CLT, P(|Z| > 6.5) = 8e-11."""

    def judge(res: Callable[[str], ScriptResult]) -> Verdict:
        w, why = graded_w(res, case, fn, spec)
        if w is None:
            return Verdict(False, why)
        mean, sd = float(w.mean()), float(w.std())
        limit = Z * sd / math.sqrt(w.size)
        if abs(mean) <= limit:
            return Verdict(True)
        return Verdict(
            False,
            f"{call_text(fn, spec)}: the mean of W is {mean:.4g}, but a zero-mean distribution gives"
            f" |mean| <= {limit:.2g} over {w.size} values: centre the distribution on 0",
            (mean, sd, w.size),
            lambda: init_figure(
                fn, spec, w, {"name": "mean of W", "value": mean, "expected": 0.0, "low": -limit, "high": limit}
            ),
        )

    return judge


def same_mean(a: Any, b: Any) -> bool:
    (ma, sa, na), (mb, sb, nb) = a, b
    return abs(ma - mb) <= Z * math.sqrt(sa * sa / na + sb * sb / nb)


def judge_variance(fn: str, case: str, spec: InitSpec, what: str) -> Judge:
    """The sample variance s^2 lies in sigma^2 * chi2_{n-1}/(n-1) bounds (Wilson-Hilferty, z = 6.5)."""

    def judge(res: Callable[[str], ScriptResult]) -> Verdict:
        w, why = graded_w(res, case, fn, spec)
        if w is None:
            return Verdict(False, why)
        var = float(np.var(w, ddof=1))
        lo, hi = chi2_ratio_bounds(w.size - 1)
        expected = spec.std**2
        if lo <= var / expected <= hi:
            return Verdict(True)
        return Verdict(
            False,
            f"{call_text(fn, spec)}{what}: the variance of W is {var:.5g} (std {math.sqrt(var):.4g}),"
            f" expected {expected:.5g} (std {spec.std:.4g} = {spec.formula}); {var / expected:.3g} times"
            f" too {'large' if var > expected else 'small'} (allowed ratio [{lo:.3f}, {hi:.3f}])",
            (var, w.size),
            lambda: init_figure(
                fn,
                spec,
                w,
                {
                    "name": "variance of W",
                    "value": var,
                    "expected": expected,
                    "low": lo * expected,
                    "high": hi * expected,
                },
            ),
        )

    return judge


def same_variance(a: Any, b: Any) -> bool:
    """Two sample variances agree: |log(s_a^2 / s_b^2)| within the sum of both chi-square half-widths."""
    (va, na), (vb, nb) = a, b
    if va <= 0 or vb <= 0:
        return va == vb
    lo_a, hi_a = chi2_ratio_bounds(na - 1)
    lo_b, hi_b = chi2_ratio_bounds(nb - 1)
    return abs(math.log(va / vb)) <= math.log(hi_a / lo_a) / 2 + math.log(hi_b / lo_b) / 2


def judge_distribution(fn: str, case: str, spec: InitSpec) -> Judge:
    """Uniform: inside [-a, a] and max|W| >= a (1 - 25/n); normal: excess kurtosis in [-0.6, 0.6].

    Uniform: P(max|W| < a (1 - t)) = (1 - t)^n <= e^(-n t) = e^-25 = 1.4e-11 for t = 25/n.
    Normal: the sample excess kurtosis has standard error sqrt(24 / n) <= 0.026 for
    n >= 36000, so 0.6 is more than 23 standard errors (a uniform gives -1.2).
    """

    def judge(res: Callable[[str], ScriptResult]) -> Verdict:
        w, why = graded_w(res, case, fn, spec)
        if w is None:
            return Verdict(False, why)
        kurt = excess_kurtosis(w)
        shape = "uniform" if kurt < -0.6 else "normal"
        biggest = float(np.max(np.abs(w)))
        fingerprint = (shape, biggest, float(np.var(w, ddof=1)), w.size)

        def picture() -> dict[str, Any]:
            return init_figure(fn, spec, w, None)

        if spec.kind == "uniform":
            a = spec.bound
            outside = int(np.sum(np.abs(w) > a * (1.0 + 1e-9)))
            if outside:
                looks = (
                    " (its excess kurtosis is {:.2f}: that is a normal distribution, not a uniform)".format(kurt)
                    if shape == "normal"
                    else ""
                )
                return Verdict(
                    False,
                    f"{call_text(fn, spec)}: {outside} of {w.size} values lie outside [-a, a], a = {a:.5g}"
                    f" = sqrt(3) * std{looks}; U(-a, a) never leaves its bound",
                    fingerprint,
                    picture,
                )
            if biggest == 0.0:
                return Verdict(False, f"{call_text(fn, spec)}: every value is 0", fingerprint, picture)
            if biggest < a * (1.0 - 25.0 / w.size):
                return Verdict(
                    False,
                    f"{call_text(fn, spec)}: the largest |W| is {biggest:.5g}, but {w.size} draws from"
                    f" U(-a, a) with a = {a:.5g} come within {25.0 / w.size:.1e} * a of the bound:"
                    f" your bound is {a / biggest:.3g} times too small",
                    fingerprint,
                    picture,
                )
            return Verdict(True)
        if shape == "uniform" or not -0.6 <= kurt <= 0.6:
            return Verdict(
                False,
                f"{call_text(fn, spec)}: the excess kurtosis of W is {kurt:.2f}; a normal distribution"
                " has 0 (a uniform has -1.2): draw with rng.normal",
                fingerprint,
                picture,
            )
        return Verdict(True)

    return judge


def init_figure(fn: str, spec: InitSpec, w: np.ndarray, statistic: dict[str, Any] | None) -> dict[str, Any]:
    """The student's W as a histogram over the expected density (std as the message states), with the uniform's
    bound."""
    bounds = [-spec.bound, spec.bound] if spec.kind == "uniform" else None
    return figures.histogram_figure(
        w,
        title=call_text(fn, spec),
        value_label="value of W",
        density={"kind": spec.kind, "mean": 0.0, "std": spec.std},
        bounds=bounds,
        statistic=statistic,
    )


def same_distribution(a: Any, b: Any) -> bool:
    """Same shape class, same variance, and for a uniform the same bound (within 1%)."""
    shape_a, max_a, var_a, n_a = a
    shape_b, max_b, var_b, n_b = b
    if shape_a != shape_b or not same_variance((var_a, n_a), (var_b, n_b)):
        return False
    if shape_a == "uniform":
        return abs(max_a - max_b) <= 0.01 * max(max_a, max_b)
    return True


def same_value(a: Any, b: Any) -> bool:
    return a == b


# --------------------------------------------------------------------------- the four exercises


def xavier_std(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    """gain * sqrt(2 / (fan_in + fan_out))."""
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def kaiming_std(fan_in: int, fan_out: int, mode: str = "fan_in", negative_slope: float = 0.0) -> float:
    """sqrt(2 / ((1 + negative_slope^2) * fan)), fan = fan_in or fan_out by mode."""
    fan = fan_in if mode == "fan_in" else fan_out
    return math.sqrt(2.0 / ((1.0 + negative_slope**2) * fan))


BAD_MODE = "fan_avg"  # not a Kaiming mode (it is Xavier's average of the two fans)


def judge_bad_mode(fn: str) -> Judge:
    """``fn(..., mode="fan_avg")`` raises ValueError, as the docstring requires (counted once fn runs at all)."""

    def judge(res: Callable[[str], ScriptResult]) -> Verdict:
        stub = res("default").error
        if stub and stub.get("type") == "NotImplementedError":
            return Verdict(False, f"implement {fn} first: {error_text(stub)}")
        error = res("bad_mode").error
        got = error["type"] if error else None
        if got == "ValueError":
            return Verdict(True)
        said = "nothing was raised" if got is None else f"got {error_text(error)}"
        return Verdict(
            False, f"{fn}(..., mode={BAD_MODE!r}) must raise ValueError (mode is 'fan_in' or 'fan_out'): {said}", got
        )

    return judge


def unnamed(judge: Judge) -> Callable[[Context], tuple[bool, str, Mistake | None]]:
    """A Custom check's function from a judge: its verdict, never a named mistake."""

    def run(ctx: Context) -> tuple[bool, str, Mistake | None]:
        verdict = judge(ctx.student_result)
        return verdict.ok, verdict.message, None

    return run


class InitChecks(ExerciseChecks):
    # Every check is a StatCheck (or names no mistake): a case pack stores verdicts, not the variants' samples.
    pack_outputs = False
    """One initialiser: ``family`` is "xavier" or "kaiming", ``kind`` "uniform" or "normal"."""

    def __init__(self, family: str, kind: str) -> None:
        self.family = family
        self.kind = kind
        self.fn = f"init.{family}_{kind}"
        self.id = self.fn

    def specs(self, rng: np.random.Generator) -> dict[str, InitSpec]:
        """The default case and the hyper-parameter cases, fans drawn from the seed.

        fan_in in [300, 400), fan_out in [120, 180): n >= 36000 values and
        fan_in / fan_out >= 1.67, so a mode mix-up moves the variance far outside the bounds.
        """
        fan_in = int(rng.integers(300, 400))
        fan_out = int(rng.integers(120, 180))
        specs: dict[str, InitSpec] = {}
        if self.family == "xavier":
            specs["default"] = InitSpec(
                fan_in, fan_out, xavier_std(fan_in, fan_out), self.kind, "sqrt(2 / (fan_in + fan_out))"
            )
            gain = round(float(rng.uniform(1.4, 2.0)), 3)
            specs["gain"] = InitSpec(
                fan_in,
                fan_out,
                xavier_std(fan_in, fan_out, gain),
                self.kind,
                f"gain * sqrt(2 / (fan_in + fan_out)), gain = {gain}",
                {"gain": gain},
            )
        else:
            specs["default"] = InitSpec(fan_in, fan_out, kaiming_std(fan_in, fan_out), self.kind, "sqrt(2 / fan_in)")
            specs["fan_out"] = InitSpec(
                fan_in,
                fan_out,
                kaiming_std(fan_in, fan_out, "fan_out"),
                self.kind,
                "sqrt(2 / fan_out) with mode='fan_out'",
                {"mode": "fan_out"},
            )
            slope = round(float(rng.uniform(0.4, 0.6)), 3)
            specs["slope"] = InitSpec(
                fan_in,
                fan_out,
                kaiming_std(fan_in, fan_out, "fan_in", slope),
                self.kind,
                f"sqrt(2 / ((1 + a^2) * fan_in)), a = negative_slope = {slope}",
                {"mode": "fan_in", "negative_slope": slope},
            )
        return specs

    def plan(self, seed: int) -> Plan:
        rng = np.random.default_rng(seed)
        specs = self.specs(rng)
        plan = Plan()
        base_seed = int(rng.integers(0, 2**31))
        for i, (name, spec) in enumerate(specs.items()):
            plan.add_case(init_case(name, self.fn, spec, base_seed + 10 * i, repeat=name == "default"))
        fn, d = self.fn, specs["default"]
        shape_points = 1.0 if self.family == "xavier" else 0.5
        plan.add(StatCheck("shape_dtype", shape_points, judge=judge_shape(fn, list(specs.items())), same=same_value))
        plan.add(StatCheck("uses_rng", 1.0, judge=judge_rng(fn, "default", d), same=same_value))
        plan.add(StatCheck("mean", 1.0, judge=judge_mean(fn, "default", d), same=same_mean))
        plan.add(StatCheck("variance", 3.0, judge=judge_variance(fn, "default", d, ""), same=same_variance))
        if self.family == "xavier":
            plan.add(
                StatCheck(
                    "gain",
                    2.0,
                    judge=judge_variance(fn, "gain", specs["gain"], " (gain honoured?)"),
                    same=same_variance,
                )
            )
        else:
            plan.add(
                StatCheck(
                    "mode",
                    1.0,
                    judge=judge_variance(fn, "fan_out", specs["fan_out"], " (mode honoured?)"),
                    same=same_variance,
                )
            )
            plan.add(
                StatCheck(
                    "negative_slope",
                    1.0,
                    judge=judge_variance(fn, "slope", specs["slope"], " (negative_slope honoured?)"),
                    same=same_variance,
                )
            )
            plan.add_case(
                Case(
                    "bad_mode",
                    [
                        {
                            "op": "func",
                            "fn": fn,
                            "args": [d.fan_in, d.fan_out, {"rng": base_seed}],
                            "kwargs": {"mode": BAD_MODE},
                            "out": "W",
                        }
                    ],
                )
            )
            # Not a StatCheck peer: whether a variant raises here says nothing about its statistics.
            plan.add(Custom("mode_value_error", 0.5, fn=unnamed(judge_bad_mode(fn))))
        plan.add(StatCheck("distribution", 2.0, judge=judge_distribution(fn, "default", d), same=same_distribution))
        return link_peers(plan)


CHECKS: list[ExerciseChecks] = [
    InitChecks("xavier", "uniform"),
    InitChecks("xavier", "normal"),
    InitChecks("kaiming", "uniform"),
    InitChecks("kaiming", "normal"),
]
