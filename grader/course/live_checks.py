"""Checks that run the reference's code on values read off the student's output: instructor side only.

No case pack can hold their expected values (they depend on what the student
returned), and their code states answers, so they live here and the check
definitions (``grader/student/engine/checks/``) name them: ``live_check("blocks.masked",
...)`` with ``live_only=True``. :class:`grader.course.grading.LiveExpected` looks them up
in :data:`LIVE_CHECKS`; a case pack cannot, and a handout's report lists them
with the hidden checks.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, cast

import numpy as np

from grader.student.engine.checks.context import ATOL, RTOL, Context, error_text
from grader.student.engine.checks.kinds import Outcome
from grader.student.engine.compare import compare, scale_of
from grader.student.feedback import figures


class FixedMask:
    """A stand-in for the block's Dropout that applies a given 0/1 mask: y = x * mask / (1 - p)."""

    def __init__(self, keep: np.ndarray, p: float) -> None:
        self.scale = keep / (1.0 - p)
        self.training = True

    def train(self) -> "FixedMask":
        self.training = True
        return self

    def eval(self) -> "FixedMask":
        self.training = False
        return self

    def forward(self, x: np.ndarray) -> np.ndarray:
        return x * self.scale if self.training else np.array(x, dtype=np.float64)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * self.scale if self.training else np.array(dout, dtype=np.float64)

    __call__ = forward


class LiveNamespaces(Protocol):
    """What the live source's Expected (grader.course.grading.LiveExpected) has beyond Expected: the code."""

    def namespace(self, mistake_id: str | None) -> Any: ...


def namespace(ctx: Context, mistake_id: str | None) -> Any:
    """The reference package (None) or mistake ``mistake_id``'s namespace: live checks run on the live source only."""
    return cast(LiveNamespaces, ctx.expected).namespace(mistake_id)


def with_mask(
    ns: Any, ctx: Context, shape: tuple[int, int], p: float, keep: np.ndarray
) -> dict[str, np.ndarray] | None:
    """y, dx, dW of ``ns.blocks.MLPBlock`` on the train_dropout case with its Dropout's mask fixed to ``keep``.

    None when the namespace's block cannot be run that way (no ``drop`` attribute, an exception).
    """
    arrays = ctx.cases["train_dropout"].arrays
    try:
        block = ns.blocks.MLPBlock(shape[0], shape[1], p=p, rng=np.random.default_rng(0))
        block.linear.W = np.array(arrays["W"])
        block.drop = FixedMask(keep, p)
        y = np.asarray(block.forward(np.array(arrays["x1"])), dtype=np.float64)
        dx = np.asarray(block.backward(np.array(arrays["dout"])), dtype=np.float64)
        return {"y": y, "dx": dx, "dW": np.asarray(block.linear.dW, dtype=np.float64)}
    except Exception:  # a wrong variant that cannot take the fixed mask: not a candidate
        return None


def masked_check(ctx: Context, shape: tuple[int, int], p: float, keys: list[str], what: str) -> Outcome:
    """Outputs ``keys`` of train_dropout equal the reference block run with the student's own mask.

    The mask is read off the student's output (y != 0), so any way of drawing it is accepted;
    a known mistake is named when its block, run with that same mask, gives the student's outputs.
    """
    s = ctx.student_result("train_dropout")
    wanted = ["y"] + keys
    got = {k: v for k in wanted if (v := s.outputs.get(k)) is not None}
    if len(got) != len(set(wanted)):
        return False, f"p={p} in training: {error_text(s.error)}", None
    y = got["y"]
    if y.shape != ctx.cases["train_dropout"].arrays["dout"].shape:
        return False, f"p={p} in training: forward returned shape {y.shape}", None
    keep = (y != 0).astype(np.float64)
    if keep.all() or not keep.any():
        return False, f"p={p} in training: {'no' if keep.all() else 'every'} output was dropped", None
    expected = with_mask(namespace(ctx, None), ctx, shape, p, keep)
    assert expected is not None
    for key in keys:
        cmp = compare(got[key], expected[key], RTOL, ATOL * scale_of(expected[key]))
        if cmp.ok:
            continue
        mistake = None
        for candidate in ctx.mistakes:
            theirs = with_mask(namespace(ctx, candidate.id), ctx, shape, p, keep)
            if theirs is not None and all(
                compare(got[k], theirs[k], RTOL, ATOL * scale_of(theirs[k])).ok for k in keys
            ):
                mistake = candidate
                break
        figure = (
            figures.elements_figure(
                got[key],
                expected[key],
                RTOL,
                ATOL * scale_of(expected[key]),
                title=f"p={p} in training: {key}",
                key=key,
            )
            if np.shape(got[key]) == np.shape(expected[key])
            else figures.shapes_figure(
                np.shape(got[key]), np.shape(expected[key]), title=f"p={p} in training: {key}", key=key
            )
        )
        return False, f"p={p} in training: {what}: {key}: {cmp.message}", mistake, figure
    return True, "", None


LIVE_CHECKS: dict[str, Callable[..., Outcome]] = {
    "blocks.masked": masked_check,
}
