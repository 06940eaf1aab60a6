"""The exercise ids, their topics, and name resolution with did-you-mean.

An exercise is named ``<file>.<Name>`` (``normalization.BatchNorm1d``); a topic
is the file part alone (``normalization``). ``resolve`` accepts ids, topics
and case-insensitive bare names (``batchnorm1d``) and returns ids in
catalogue order.
"""

from __future__ import annotations

import difflib

from grader.student.errors import UsageError

TOPIC_EXERCISES: dict[str, list[str]] = {
    "activations": ["Sigmoid", "Tanh", "ReLU", "LeakyReLU", "PReLU", "ELU", "GELU", "SiLU"],
    "linear": ["Linear"],
    "normalization": ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm2d"],
    "dropout": ["Dropout"],
    "init": ["xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal"],
    "optim": ["SGD", "AdamW"],
    "gradcheck": ["numerical_gradient", "rel_error"],
    "blocks": ["MLPBlock", "fold_batchnorm"],
    "approximation": ["fit_function"],
    "kernels": [
        "relu_forward",
        "relu_backward",
        "gelu_forward",
        "gelu_backward",
        "dropout_forward",
        "rmsnorm_forward",
        "layernorm_forward",
    ],
}

TOPICS: list[str] = list(TOPIC_EXERCISES)
CPU_TOPICS: list[str] = [t for t in TOPICS if t != "kernels"]  # the topics that are Python files
EXERCISES: list[str] = [f"{topic}.{name}" for topic, names in TOPIC_EXERCISES.items() for name in names]


def topic_of(exercise_id: str) -> str:
    """The topic (file part) of an exercise id: 'normalization.BatchNorm1d' -> 'normalization'."""
    return exercise_id.split(".", 1)[0]


def name_of(exercise_id: str) -> str:
    """The bare name of an exercise id: 'normalization.BatchNorm1d' -> 'BatchNorm1d'."""
    return exercise_id.split(".", 1)[1]


def _lookup() -> dict[str, list[str]]:
    """Lower-cased id, topic and bare name -> the ids they select."""
    table: dict[str, list[str]] = {}
    for topic in TOPICS:
        table[topic.lower()] = [e for e in EXERCISES if topic_of(e) == topic]
    for exercise in EXERCISES:
        table[exercise.lower()] = [exercise]
        table.setdefault(name_of(exercise).lower(), [exercise])
    return table


def _suggestion(selector: str) -> str | None:
    """The closest id, topic or bare name to a misspelt selector, spelled canonically.

    Similarity is difflib's ratio (at least 0.6); ties go to the earlier exercise.
    """
    candidates: list[tuple[str, str]] = [(t.lower(), t) for t in TOPICS]
    for exercise in EXERCISES:
        candidates.append((exercise.lower(), exercise))
        candidates.append((name_of(exercise).lower(), exercise))
    best: tuple[float, str] | None = None
    for key, canonical in candidates:
        score = difflib.SequenceMatcher(None, selector.lower(), key).ratio()
        if score >= 0.6 and (best is None or score > best[0]):
            best = (score, canonical)
    return None if best is None else best[1]


def resolve(selectors: list[str] | None) -> list[str]:
    """Exercise ids selected by ids, topics or bare names (empty: all), in catalogue order.

    Raises UsageError naming the closest exercise for an unknown selector.
    """
    if not selectors:
        return list(EXERCISES)
    table = _lookup()
    chosen: set[str] = set()
    for selector in selectors:
        ids = table.get(selector.strip().lower())
        if ids is None:
            hint = _suggestion(selector.strip())
            if hint is not None:
                raise UsageError(f"'{selector}' is not an exercise or topic. Did you mean '{hint}'?")
            raise UsageError(
                f"'{selector}' is not an exercise or topic. Topics: {', '.join(TOPICS)};"
                " exercises are named like 'normalization.BatchNorm1d'."
            )
        chosen.update(ids)
    return [e for e in EXERCISES if e in chosen]
