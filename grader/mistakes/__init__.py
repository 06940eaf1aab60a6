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

from grader.kernel_emulation import reference_namespace  # noqa: F401  (registers the reference kernels' emulation for live runs; re-exported)
from grader.student.catalogue import CPU_TOPICS, TOPICS, name_of, topic_of
from grader.student.diagnosis import KnownMistake, diagnose, error_signature, outputs_match, register_known  # noqa: F401



@dataclass
class Mistake(KnownMistake):
    """A known mistake with its wrong namespace (the variant); what a report may say is :class:`KnownMistake`."""

    namespace: Any = None

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
    return Mistake(mistake_id, exercise_id, sentence, fix, namespace=variant(exercise_id, replacement))


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
register_known([m.info() for m in CATALOGUE.values()])  # reports name them (grader.student.report)


def for_exercise(exercise_id: str) -> list[Mistake]:
    """The known mistakes of one exercise, in catalogue order."""
    return [m for m in CATALOGUE.values() if m.exercise == exercise_id]


