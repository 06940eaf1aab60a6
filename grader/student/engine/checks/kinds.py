"""The check kinds: what one check compares, worth points, passing or failing as a whole.

:class:`Compare` (outputs against the reference), :class:`Consistency` (the student's backward against
central differences of the student's own forward), :class:`Unchanged` (inputs not mutated),
:class:`ShapeDtype`, :class:`Raises` and :class:`Custom` (any function of the
:class:`grader.student.engine.checks.context.Context`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from grader.student.engine.generic.claims import GenericMistake
from grader.student.feedback import figures
from grader.student.engine.compare import compare, same_as, scale_of
from grader.student.engine.model import CheckResult
from grader.student.engine.ops import Case, warnings_in


from grader.student.engine.checks.context import (
    ATOL,
    NUMGRAD_ATOL,
    NUMGRAD_RTOL,
    RTOL,
    UNDIAGNOSED_ERRORS,
    UNKNOWN,
    Context,
    Mistake,
    error_text,
)


def result(
    name: str,
    points: float,
    ok: bool,
    message: str = "",
    mistake: Mistake | None = None,
    figure: dict[str, Any] | None = None,
) -> CheckResult:
    """A CheckResult worth ``points`` when ok, 0 otherwise; a named mistake's explanation comes first.

    ``figure`` (grader.student.feedback.figures) is kept only on a failure.
    """
    if mistake is not None:
        message = mistake.explain() + ("\n" + message if message else "")
    parts = list(getattr(mistake, "parts", []) or ([mistake] if mistake is not None else []))
    return CheckResult(
        name=name,
        passed=ok,
        score=points if ok else 0.0,
        max_score=points,
        message="" if ok else message,
        misconception=None if ok or not parts else parts[0].id,
        figure=None if ok else figure,
        also=[] if ok else [p.id for p in parts[1:]],
    )


# --------------------------------------------------------------------------- checks


@dataclass
class Check:
    """A named check worth ``points``; subclasses implement ``run``.

    ``requires`` names a case that must run without NotImplementedError for the
    check to count: checks of code the stub already provides (constructors)
    earn nothing until the student's own code runs.
    """

    name: str
    points: float
    requires: str | None = None
    # True for a check that runs the reference's code on values read off the student's output (no case pack can
    # hold those): it runs only where the reference is (hidden grading), and a handout's report says so.
    live_only: bool = False
    # True for a check that only supports others (gradient consistency, repeatability, shape and dtype, inputs
    # unchanged): it earns nothing while every other check of the exercise fails (a layer that returns NaN
    # everywhere is consistent with itself, repeatable and of the right shape, and has earned nothing).
    supporting: bool = False

    def run(self, ctx: Context) -> CheckResult:
        raise NotImplementedError

    def grade(self, ctx: Context) -> CheckResult:
        """``run``, unless the required case stopped on NotImplementedError; its picture as the student may see it."""
        if self.requires is not None:
            error = ctx.student_result(self.requires).error
            if error is not None and error.get("type") == "NotImplementedError":
                where = error.get("where") or "your code"
                return result(
                    self.name, self.points, False, f"not graded yet: this check counts once {where} is implemented"
                )
        checked = self.run(ctx)
        case = getattr(self, "case", "")  # a comparison's case (other kinds of check have none)
        if not checked.passed and case:
            checked = dataclasses.replace(checked, case=case)  # where a location is sought
        return for_student(checked, ctx.expected.live)


def for_student(checked: CheckResult, live: bool) -> CheckResult:
    """A check's result with the picture the student may see: graded live (hidden checks), a figure whose expected
    values are the reference's becomes ``figures.hidden_view`` of itself, and the full one goes to
    ``instructor_figure`` (the instructor's dashboard draws it; no student view carries it)."""
    figure = checked.figure
    if not live or figure is None or not figure.get("from_reference"):
        return checked
    return dataclasses.replace(checked, figure=figures.hidden_view(figure), instructor_figure=figure)


def forward_matches(ctx: Context, case: str, forward_key: str, y: np.ndarray) -> bool:
    """The student's forward output ``y`` equals the reference's (rtol, atol scaled by y)."""
    return compare(y, ctx.reference_output(case, forward_key), RTOL, ATOL * scale_of(y)).ok


def gradient_note(ctx: Context, case: str, key: str, num_key: str, forward_key: str) -> str:
    """Tell forward bugs from backward bugs with the student's own central differences.

    - forward right, backward off its own numgrad: "your forward is right but your backward is not";
    - backward matches its own numgrad, forward wrong: "your forward is wrong".
    """
    s = ctx.student_result(case)
    grad, num, y = s.outputs.get(key), s.outputs.get(num_key), s.outputs.get(forward_key)
    if grad is None or num is None or y is None:
        return ""
    forward_ok = forward_matches(ctx, case, forward_key, y)
    consistent = same_as(grad, num, rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL)
    if forward_ok and not consistent:
        return (
            f"Your forward is right but your backward is not: {key} disagrees with central"
            " differences of your own forward."
        )
    if consistent and not forward_ok:
        return (
            "Your backward matches central differences of your own forward but not the reference:"
            " your forward is wrong, fix it first."
        )
    return ""


@dataclass
class Compare(Check):
    """Student outputs ``keys`` of ``case`` equal the reference's within rtol/atol (atol scaled by the data).

    ``numgrad`` maps an analytic gradient key to the student's numgrad key in the
    same case (``{"dx": "num_dx"}``) to add the forward/backward note; where the
    student's forward is wrong, such a gradient that equals central differences of
    that forward passes (:meth:`own_gradient`): one bug costs once.
    """

    case: str = ""
    keys: list[str] = field(default_factory=list)
    what: str = ""
    rtol: float = RTOL
    atol: float = ATOL
    diagnose: bool = True
    numgrad: dict[str, str] = field(default_factory=dict)
    forward_key: str = "y"
    check_dtype: bool = True
    # Fail values that are right when the case warned: True (any warning) or the methods whose warnings count
    # (("forward",): a warning backward raised is not the forward check's fault).
    match_warnings: bool | tuple[str, ...] = False
    # For <name>_<step> keys (figures.step_ratios): the share of the previous value a step keeps (1 - momentum for a
    # running average, 1 for an optimiser's parameters), and the value before step 1 by name when it is no input
    # array of the case (a buffer's initial value).
    carry: float = 0.0
    start: dict[str, float] = field(default_factory=dict)

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        for key in self.keys:
            expected = ctx.reference_output(self.case, key)
            received = s.outputs.get(key)
            if received is None:
                mistake = None
                if self.diagnose and s.error is not None and s.error.get("type") not in UNDIAGNOSED_ERRORS:
                    mistake = ctx.diagnose(self.case, [], match_error=True)
                return result(self.name, self.points, False, f"{self.what}: {error_text(s.error)}", mistake)
            cmp = compare(received, expected, self.rtol, self.atol * scale_of(expected), self.check_dtype)
            if not cmp.ok and self.own_gradient(ctx, key):
                continue  # the forward's bug, charged by the forward checks: this gradient is right for it
            if not cmp.ok:
                mistake = ctx.diagnose(self.case, self.keys, self.rtol, self.atol) if self.diagnose else None
                note = ""
                if key in self.numgrad:
                    note = gradient_note(ctx, self.case, key, self.numgrad[key], self.forward_key)
                message = f"{self.what}: {key}: {cmp.message}"
                if received.shape == expected.shape and not np.any(received) and np.any(expected):
                    message += f" ({key} is all zeros: an array made with np.zeros_like and never filled in?)"
                if note:
                    message = note + "\n" + message
                if (
                    self.diagnose
                    and mistake is None
                    and received.shape == expected.shape
                    and received.dtype == expected.dtype
                ):
                    message += "\n" + UNKNOWN
                return result(self.name, self.points, False, message, mistake, self.figure(ctx, key, mistake))
        warned = warnings_in(s, self.match_warnings)
        if warned:
            mistake = ctx.diagnose(self.case, self.keys, self.rtol, self.atol, match_warnings=self.match_warnings)
            return result(
                self.name,
                self.points,
                False,
                f"{self.what}: your values are right; only the warning costs this check's points (no floating-point"
                f" warning is allowed here): {warned[0]}",
                mistake,
            )
        return result(self.name, self.points, True)

    def figure(self, ctx: Context, key: str, mistake: Mistake | None = None) -> dict[str, Any] | None:
        """The full picture of the failing ``key`` (:meth:`picture`), and beside it, for a known mistake graded live,
        the same check on the public case (:meth:`public_picture`)."""
        s = ctx.student_result(self.case)
        figure = self.picture(s.outputs, lambda k: ctx.reference_output(self.case, k), ctx.cases[self.case], key)
        if figure is not None and figure.get("from_reference"):
            twin = self.public_picture(ctx, key, mistake)
            if twin is not None:
                figure["public"] = twin
        return figure

    def picture(
        self, outputs: dict[str, np.ndarray], expected_of: Callable[[str], np.ndarray], case: Case, key: str
    ) -> dict[str, Any] | None:
        """The figure of ``key`` of ``outputs`` against ``expected_of``: the shapes when they differ, the steps'
        trajectory when the keys are <name>_<step>, else the elements (the dtypes when only those differ)."""
        received, expected = outputs.get(key), expected_of(key)
        if received is None:
            return None
        title = f"{self.what}: {key}"
        if np.shape(received) != np.shape(expected):
            return figures.shapes_figure(np.shape(received), np.shape(expected), title=title, key=key)
        if figures.step_series(self.keys) is not None:
            starts = {
                name: self.start.get(name, case.arrays.get(name)) for name in figures.step_series(self.keys) or {}
            }
            figure = figures.trajectory_figure(
                outputs,
                {k: expected_of(k) for k in self.keys},
                self.keys,
                self.rtol,
                self.atol,
                title=self.what,
                carry=self.carry,
                starts={k: v for k, v in starts.items() if v is not None},
            )
            if figure is not None:
                return figure
        figure = figures.elements_figure(
            received, expected, self.rtol, self.atol * scale_of(expected), title=title, key=key
        )
        if figure is None and self.check_dtype and np.asarray(received).dtype != np.asarray(expected).dtype:
            return figures.shapes_figure(
                np.shape(received),
                np.shape(expected),
                title=title,
                key=key,
                received_dtype=str(np.asarray(received).dtype),
                expected_dtype=str(np.asarray(expected).dtype),
            )
        return figure

    def public_picture(self, ctx: Context, key: str, mistake: Mistake | None) -> dict[str, Any] | None:
        """The same check on the public case with the named mistake's results as the student's, when it fails there too.

        The mistake reproduces the student on the hidden case (that is how it was named), so its results on the
        public inputs are what the student's code gives there: the handout's ``grade submit`` draws this very
        picture from the student's own code. Live grading only; None without a named mistake.
        """
        twin = ctx.public_twin() if mistake is not None else None
        if twin is None or self.case not in twin.cases:
            return None
        parts = list(getattr(mistake, "parts", []) or [mistake])
        if any(isinstance(part, GenericMistake) for part in parts):
            return None  # a generic diagnosis is found from the hidden case's results: it has no code to run
        variant = twin._combined(parts)
        if variant is None:
            return None
        case = twin.cases[self.case]
        outputs = twin.run_mistake(variant, case).outputs
        received, expected = outputs.get(key), twin.reference_output(self.case, key)
        if (
            received is None
            or compare(received, expected, self.rtol, self.atol * scale_of(expected), self.check_dtype).ok
        ):
            return None
        figure = self.picture(outputs, lambda k: twin.reference_output(self.case, k), case, key)
        if figure is None:
            return None
        figure["title"] = f"Public case: {figure['title']}"
        figure["public_case"] = {"mistake": variant.id}
        figure["summary"] = (
            f"The same check on the public case (the inputs and expected values of your handout's"
            f" case pack), as the known mistake {variant.id} computes it: it reproduces your output"
            f" on the hidden case, and `grade submit` in your handout draws this picture from your"
            f" own code. " + figure["summary"]
        )
        return figure

    def own_gradient(self, ctx: Context, key: str) -> bool:
        """Whether gradient ``key`` is right for the student's own forward where that forward is wrong.

        Judged at the student's own state: the forward output of the case differs
        from the reference, and the gradient equals central differences of the
        student's own forward (same shape and dtype as expected). Then the bug is
        the forward's alone and costs points once, in the forward checks.
        """
        if key not in self.numgrad:
            return False
        s = ctx.student_result(self.case)
        grad, num, y = s.outputs.get(key), s.outputs.get(self.numgrad[key]), s.outputs.get(self.forward_key)
        if grad is None or num is None or y is None:
            return False
        expected = ctx.reference_output(self.case, key)
        if grad.shape != expected.shape or (self.check_dtype and grad.dtype != expected.dtype):
            return False
        if y.shape != ctx.reference_output(self.case, self.forward_key).shape or forward_matches(
            ctx, self.case, self.forward_key, y
        ):
            return False
        if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(num))):
            return False  # NaN equals NaN here, but a NaN gradient is right for nothing
        return same_as(grad, num, rtol=NUMGRAD_RTOL, atol=NUMGRAD_ATOL)


@dataclass
class Consistency(Check):
    """The student's analytic gradients equal central differences of the student's own forward.

    ``pairs`` maps analytic keys to numgrad keys of ``case``: ``{"dx": "num_dx", "dgamma": "num_dgamma"}``.
    """

    case: str = ""
    pairs: dict[str, str] = field(default_factory=dict)
    what: str = ""
    forward_key: str = "y"
    rtol: float = NUMGRAD_RTOL
    atol: float = NUMGRAD_ATOL

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        y = s.outputs.get(self.forward_key)
        forward_ok = y is not None and forward_matches(ctx, self.case, self.forward_key, y)
        for key, num_key in self.pairs.items():
            grad, num = s.outputs.get(key), s.outputs.get(num_key)
            if grad is None or num is None:
                return result(self.name, self.points, False, f"{self.what}: {error_text(s.error)}")
            if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(num))):
                return result(
                    self.name,
                    self.points,
                    False,
                    f"{self.what}: {key} or the central differences of your forward are NaN or inf:"
                    " a gradient can be checked only where forward gives finite values",
                )
            cmp = compare(grad, num, self.rtol, self.atol * scale_of(num), check_dtype=False)
            if not cmp.ok:
                if forward_ok:
                    lead = (
                        f"Your forward is right but your backward is not: {key} disagrees with central"
                        " differences of your own forward"
                    )
                else:
                    lead = (
                        f"Your backward is not the gradient of your own forward: {key} disagrees with its"
                        " central differences"
                    )
                return result(
                    self.name,
                    self.points,
                    False,
                    f"{lead} ({self.what}): {cmp.message}",
                    figure=own_figure(
                        grad,
                        num,
                        self.rtol,
                        self.atol * scale_of(num),
                        f"{self.what}: {key}",
                        key,
                        f"central differences of your forward ({num_key})",
                    ),
                )
        return result(self.name, self.points, True)


# What each recorded copy of a handed-over array says when it changed (Unchanged's messages).
HANDED = {
    "x_after": "forward modified the x it was given",
    "x_after_backward": "the x given to forward was modified later, by backward (an alias such as"
    " mask = self.x; mask[...] = ... writes into the caller's array)",
    "dout_after": "backward modified the dout it was given",
}


@dataclass
class Unchanged(Check):
    """Inputs come back unmodified: output ``out_key`` of each case equals its input array ``array_key``.

    Items are (case, out_key, array_key) or (case, out_key, array_key, optional): an
    optional item whose output is missing because the case stopped earlier (a crash,
    charged by the checks of that call) is skipped.
    """

    items: list[tuple[Any, ...]] = field(default_factory=list)

    def run(self, ctx: Context) -> CheckResult:
        for item in self.items:
            case, out_key, array_key = item[:3]
            optional = len(item) > 3 and bool(item[3])
            s = ctx.student_result(case)
            after = s.outputs.get(out_key)
            if after is None:
                if optional and s.error is not None:
                    continue
                return result(self.name, self.points, False, f"case {case}: {error_text(s.error)}")
            before = ctx.cases[case].arrays[array_key]
            if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
                cmp = compare(after, before, 0.0, 0.0)
                what = HANDED.get(out_key)
                if what is None and out_key.endswith("_after"):
                    what = f"the parameter array {out_key[: -len('_after')]} handed to the layer was modified in place"
                name = array_key.removeprefix("param_")
                return result(
                    self.name,
                    self.points,
                    False,
                    f"your code modified its input array (case {case}): {what or out_key}: {cmp.message}."
                    " Work on a copy (x = x.copy() or x = x - mu, never x -= mu; mask = x > 0, never mask = x).",
                    ctx.diagnose(case, [out_key], rtol=0.0, atol=0.0),
                    own_figure(
                        after,
                        before,
                        0.0,
                        0.0,
                        f"case {case}: {name} after your code ran",
                        name,
                        f"{name} as it was handed to your code",
                        f"{name} after your code ran",
                    ),
                )
        return result(self.name, self.points, True)


@dataclass
class ShapeDtype(Check):
    """Outputs have the reference's shape and dtype: items are (case, key)."""

    items: list[tuple[str, str]] = field(default_factory=list)

    def run(self, ctx: Context) -> CheckResult:
        values = [ctx.student_output(case, key) for case, key in self.items]
        if values and all(v is not None and v.dtype.kind == "f" and not np.any(np.isfinite(v)) for v in values):
            return result(
                self.name,
                self.points,
                False,
                "every output is NaN or inf: shape and dtype count only for finite values",
            )
        for case, key in self.items:
            s = ctx.student_result(case)
            got = s.outputs.get(key)
            if got is None:
                return result(self.name, self.points, False, f"{key} (case {case}): {error_text(s.error)}")
            expected = ctx.reference_output(case, key)
            if got.shape != expected.shape or got.dtype != expected.dtype:
                what = "shape" if got.shape != expected.shape else "dtype"
                mine, theirs = (got.shape, expected.shape) if what == "shape" else (got.dtype, expected.dtype)
                return result(
                    self.name,
                    self.points,
                    False,
                    f"{key} (case {case}) has {what} {mine}, expected {theirs}",
                    figure=figures.shapes_figure(
                        got.shape,
                        expected.shape,
                        title=f"{key} (case {case})",
                        key=key,
                        received_dtype=str(got.dtype),
                        expected_dtype=str(expected.dtype),
                    ),
                )
        return result(self.name, self.points, True)


@dataclass
class Raises(Check):
    """The case must stop with exception ``exc_type`` (e.g. ValueError for a bad constructor argument)."""

    case: str = ""
    exc_type: str = "ValueError"
    what: str = ""
    diagnose: bool = False  # name a mistake whose variant fails to raise in the same way (opt-in)

    def run(self, ctx: Context) -> CheckResult:
        s = ctx.student_result(self.case)
        got = s.error["type"] if s.error else None
        if got == self.exc_type:
            return result(self.name, self.points, True)
        mistake = ctx.diagnose(self.case, [], match_error=True) if self.diagnose else None
        if got is None:
            message = f"{self.what}: expected {self.exc_type}, but nothing was raised"
        else:
            message = f"{self.what}: expected {self.exc_type}, got {error_text(s.error)}"
        return result(self.name, self.points, False, message, mistake)


# What a Custom check's function returns: (ok, message, mistake_or_None), or with the figure fourth.
Outcome = tuple[bool, str, Mistake | None] | tuple[bool, str, Mistake | None, dict[str, Any] | None]


@dataclass
class Custom(Check):
    """Any check: ``fn(ctx) -> (ok, message, mistake_or_None)`` or ``(ok, message, mistake_or_None, figure)``."""

    fn: Callable[[Context], Outcome] | None = None

    def run(self, ctx: Context) -> CheckResult:
        assert self.fn is not None
        ok, message, mistake, *figure = self.fn(ctx)
        return result(self.name, self.points, ok, message, mistake, figure[0] if figure else None)


def own_figure(
    received: Any,
    expected: Any,
    rtol: float,
    atol: float,
    title: str,
    key: str,
    expected_label: str,
    received_label: str = "yours",
) -> dict[str, Any] | None:
    """The picture of a check that compares the student with their own data (a gradient with central differences
    of their forward, an input after the call with itself before): elements, or the shapes when they differ."""
    if np.shape(received) != np.shape(expected):
        return figures.shapes_figure(np.shape(received), np.shape(expected), title=title, key=key)
    return figures.elements_figure(
        received,
        expected,
        rtol,
        atol,
        title=title,
        key=key,
        from_reference=False,
        labels={"received": received_label, "expected": expected_label},
    )


def live_check(name: str, *args: Any) -> Callable[[Context], Outcome]:
    """A Custom check function implemented where the reference is (``grader.course.live_checks``), named here.

    Give its check ``live_only=True``: only a live ``Expected`` can provide it.
    """

    def run(ctx: Context) -> Outcome:
        return ctx.expected.live_check(name)(ctx, *args)

    return run
