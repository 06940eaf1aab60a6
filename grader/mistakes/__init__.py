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
import types
from dataclasses import dataclass
from typing import Any

from reference.opencl.emulation import reference_namespace  # noqa: F401  (registers the reference kernels' emulation for live runs; re-exported)
from grader.student.engine.catalogue import CPU_TOPICS, TOPICS, name_of, topic_of
from grader.student.engine.diagnosis import KnownMistake, diagnose, error_signature, outputs_match, register_known  # noqa: F401


@dataclass
class Mistake(KnownMistake):
    """A known mistake with its wrong namespace (the variant); what a report may say is :class:`KnownMistake`."""

    namespace: Any = None
    # The wrong class or function the namespace holds (what :func:`compose` combines); None when unknown.
    replacement: Any = None

    def info(self) -> KnownMistake:
        """The mistake without its variant: what a case pack carries."""
        return KnownMistake(self.id, self.exercise, self.sentence, self.fix, self.hint)


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
    return Mistake(
        mistake_id, exercise_id, sentence, fix, namespace=variant(exercise_id, replacement), replacement=replacement
    )


def flagged(base: type, impl: dict[str, Any], flags: dict[str, set[str]], name: str | None = None) -> type:
    """A subclass of ``base`` whose method ``m`` is ``impl[m](self, *args, **{flag: True for flag in flags[m]})``.

    Mistakes written as flags of one parameterised method (BatchNorm's forward and backward,
    LayerNorm's and RMSNorm's backward) combine by switching several flags on (:func:`compose`).
    """
    attrs: dict[str, Any] = {}
    for method, fn in impl.items():
        on = {flag: True for flag in sorted(flags.get(method, set()))}

        def call(self: Any, *args: Any, _fn: Any = fn, _on: dict[str, bool] = on) -> Any:
            return _fn(self, *args, **_on)

        attrs[method] = call
    attrs["mistake_flags"] = {method: set(names) for method, names in flags.items() if names}
    attrs["flag_impl"] = impl
    label = name or "+".join(sorted(f for names in flags.values() for f in names))
    return type(label, (base,), attrs)


def compose_replacement(mistakes: list[Mistake]) -> Any:
    """One wrong class with every mistake of ``mistakes`` at once, or None when they cannot be combined.

    Two ways, both exact (the combination is what a student with both mistakes writes):

    - variants built with :func:`flagged` on the same methods combine their flags (never the same flag twice);
    - variant classes of the same reference class that override disjoint methods combine by inheritance
      (``class AB(A, B)``: A's forward, B's backward); a flagged class counts as overriding its methods.
    """
    if len(mistakes) < 2 or len({m.exercise for m in mistakes}) != 1:
        return None
    classes = [m.replacement for m in mistakes]
    if any(not isinstance(c, type) or len(c.__bases__) != 1 for c in classes):
        return None
    if len({c.__bases__ for c in classes}) != 1:
        return None
    base = classes[0].__bases__[0]
    with_flags = [c for c in classes if "mistake_flags" in vars(c)]
    parts = [c for c in classes if "mistake_flags" not in vars(c)]
    if with_flags:
        if len({id(c.flag_impl) for c in with_flags}) != 1:
            return None
        merged: dict[str, set[str]] = {}
        for cls in with_flags:
            for method, names in cls.mistake_flags.items():
                if names & merged.get(method, set()):
                    return None  # the same flag twice
                merged.setdefault(method, set()).update(names)
        parts.append(flagged(base, with_flags[0].flag_impl, merged))
    if len(parts) == 1:
        return parts[0]
    seen: set[str] = set()
    for cls in parts:
        own = {
            name
            for name, value in vars(cls).items()
            if callable(value) and not name.startswith("__") or name == "__init__"
        }
        if own & seen:
            return None
        seen |= own
    return type("+".join(c.__name__ for c in parts), tuple(parts), {})


def compose(mistakes: list[Mistake]) -> Mistake | None:
    """A Mistake with every mistake of ``mistakes`` at once (id ``a+b``), or None when they do not combine."""
    replacement = compose_replacement(mistakes)
    if replacement is None:
        return None
    first = mistakes[0]
    return Mistake(
        "+".join(m.id for m in mistakes),
        first.exercise,
        "",
        "",
        namespace=variant(first.exercise, replacement),
        replacement=replacement,
    )


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
    from grader.mistakes.hints import HINTS

    for mistake_id, hint in HINTS.items():
        if mistake_id not in catalogue:
            raise ValueError(f"grader/mistakes/hints.py: no mistake {mistake_id!r} in the catalogue")
        catalogue[mistake_id].hint = hint
    return catalogue


CATALOGUE: dict[str, Mistake] = _load_catalogue()
register_known([m.info() for m in CATALOGUE.values()])  # reports name them (grader.student.feedback.report)


def for_exercise(exercise_id: str) -> list[Mistake]:
    """The known mistakes of one exercise, in catalogue order."""
    return [m for m in CATALOGUE.values() if m.exercise == exercise_id]
