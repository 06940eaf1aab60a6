"""The catalogue of known mistakes: each one a wrong variant of the reference.

A :class:`Mistake` has an id (``bn-biased-running-var``), the exercise it
belongs to, one sentence saying what is wrong, one saying how to fix it, and a
``namespace``: an object shaped like the ``reference`` package in which the one
exercise is replaced by the wrong variant (a subclass of the reference class
overriding one method, or a wrong function). The checks run the same case
scripts on these namespaces, in the parent, and name the mistake whose output
reproduces a student's failing output (:func:`diagnose`).

Topic modules (``grader/mistakes/<topic>.py``) each define ``MISTAKES:
list[Mistake]``, usually built with :func:`variant` and :func:`make`.
This package runs in the parent only (it imports ``reference``).
"""

from __future__ import annotations

import importlib
import re
import types
from dataclasses import dataclass
from typing import Any, Callable

from grader.student.catalogue import CPU_TOPICS, TOPICS, name_of, topic_of
from grader.student.compare import DEFAULT_ATOL, DEFAULT_RTOL, same_as
from grader.student.ops import Case, ScriptResult, run_script



@dataclass
class Mistake:
    """A known mistake: id, exercise id, what is wrong (one sentence), the fix, and its wrong namespace."""

    id: str
    exercise: str
    sentence: str
    fix: str
    namespace: Any

    def explain(self) -> str:
        """'Known mistake <id>: <sentence> Fix: <fix>' (printed before any numbers)."""
        return f"Known mistake {self.id}: {self.sentence} Fix: {self.fix}"


def reference_namespace() -> Any:
    """The ``reference`` package with every CPU topic module imported as an attribute."""
    package = importlib.import_module("reference")
    for topic in CPU_TOPICS:
        importlib.import_module(f"reference.{topic}")
    return package


def patched_namespace(topic: str, overrides: dict[str, Any]) -> Any:
    """A namespace like the reference package where the names ``overrides`` of ``topic`` are rebound.

    Only those attributes differ: the topic becomes a copy of the reference
    topic module's attributes with the names rebound.
    """
    ref = reference_namespace()
    topics = {t: getattr(ref, t) for t in CPU_TOPICS}
    patched = types.SimpleNamespace(**vars(topics[topic]))
    for name, value in overrides.items():
        setattr(patched, name, value)
    topics[topic] = patched
    return types.SimpleNamespace(**topics)


def variant(exercise_id: str, replacement: Any) -> Any:
    """A namespace like the reference package where ``exercise_id`` is ``replacement`` (nothing else differs)."""
    return patched_namespace(topic_of(exercise_id), {name_of(exercise_id): replacement})


def make(mistake_id: str, exercise_id: str, sentence: str, fix: str, replacement: Any) -> Mistake:
    """A Mistake whose namespace is ``variant(exercise_id, replacement)``."""
    return Mistake(mistake_id, exercise_id, sentence, fix, variant(exercise_id, replacement))


def _load_catalogue() -> dict[str, Mistake]:
    """Every topic module's MISTAKES, keyed by id (ids are unique)."""
    catalogue: dict[str, Mistake] = {}
    for topic in TOPICS:
        try:
            module = importlib.import_module(f"grader.mistakes.{topic}")
        except ModuleNotFoundError as exc:
            if exc.name != f"grader.mistakes.{topic}":
                raise
            continue  # a topic without known mistakes (yet)
        for mistake in module.MISTAKES:
            if mistake.id in catalogue:
                raise ValueError(f"duplicate mistake id {mistake.id!r}")
            catalogue[mistake.id] = mistake
    return catalogue


CATALOGUE: dict[str, Mistake] = _load_catalogue()


def for_exercise(exercise_id: str) -> list[Mistake]:
    """The known mistakes of one exercise, in catalogue order."""
    return [m for m in CATALOGUE.values() if m.exercise == exercise_id]


def outputs_match(
    student: ScriptResult,
    candidate: ScriptResult,
    keys: list[str],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    match_error: bool = False,
    match_warnings: bool = False,
) -> bool:
    """True when ``candidate`` reproduces ``student`` on every key (and the error / warnings if asked).

    With ``match_error`` both must have stopped the same way: no error, or the
    same exception type, raised at the same op, with the same message. A key
    missing from both then counts as reproduced.
    """
    if match_error and error_signature(student) != error_signature(candidate):
        return False
    if match_warnings and bool(student.warnings) != bool(candidate.warnings):
        return False
    for key in keys:
        a = student.outputs.get(key)
        b = candidate.outputs.get(key)
        if a is None and b is None and match_error:
            continue
        if not same_as(a, b, rtol=rtol, atol=atol):
            return False
    return True


_BROADCAST = re.compile(r"^operands could not be broadcast together with shapes (.*?)\s*$")


def error_signature(result: ScriptResult) -> tuple[str, str, str] | None:
    """(type, op, message) of a result's error, or None.

    The op is the last part of ``where`` ("forward" of "Linear.forward"): a
    variant's class name differs from the student's. NumPy's broadcast error
    lists the operands' shapes in the order the code wrote them (a + b or
    b + a), so its shapes are sorted: the same structural mistake reads alike.
    """
    if result.error is None:
        return None
    where = result.error.get("where", "").rsplit(".", 1)[-1]
    message = result.error.get("message", "")
    broadcast = _BROADCAST.match(message)
    if broadcast:
        shapes = sorted(re.findall(r"\([^)]*\)", broadcast.group(1)))
        message = "operands could not be broadcast together with shapes " + " ".join(shapes)
    return (result.error.get("type", ""), where, message)


def diagnose(
    mistakes: list[Mistake],
    case: Case,
    student: ScriptResult,
    keys: list[str],
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    match_error: bool = False,
    match_warnings: bool = False,
    run: Callable[[Mistake, Case], ScriptResult] | None = None,
    reference: ScriptResult | None = None,
) -> Mistake | None:
    """The first mistake whose variant, run on ``case``, reproduces the student's outputs ``keys``.

    With ``reference`` given, a mistake whose variant agrees with the reference on
    every key (and in error type and warnings) is skipped: it is not wrong on this
    case, so it cannot explain a failure there. ``run`` (default:
    ``run_script(mistake.namespace, ...)``) lets callers cache runs.
    """
    if not keys and not match_error and not match_warnings:
        return None
    for mistake in mistakes:
        result = run(mistake, case) if run else run_script(mistake.namespace, case.script, case.arrays)
        if reference is not None and outputs_match(reference, result, keys, rtol, atol, match_error, match_warnings):
            continue
        if outputs_match(student, result, keys, rtol, atol, match_error, match_warnings):
            return mistake
    return None

