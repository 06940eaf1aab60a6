"""What each known mistake shows a gap in, and the quiz questions that practise it: the one place of that map.

A *concept* (``normalization.batchnorm-backward``) is one idea of the course. It names the quiz questions
that exercise it (``"chapter/question-id"``, the ids of ``quizzes/source/<chapter>.toml``) and, where the
course text has them, the text's sections that explain it (``chapter.section`` of ``text/<chapter>.md``).
Each exercise has its own concept (:data:`EXERCISE_CONCEPTS`, the one table of exercise -> concept): a report
sends the student to read that concept's section (:func:`section_of_exercise`) and a crash in the exercise
leads to its questions.

A mistake's concept is found by :data:`RULES`: the first rule whose pattern matches the start of the
mistake's id (``bn-eval-`` before ``bn-``) wins; the kernels' mistakes share their NumPy twin's concepts.
A generic family (``grader/student/engine/generic/``) that names an idea maps to its concept in
:data:`GENERIC`; a crash family (``generic-none``, ``-call``, ``-key``, ``-validation``) says nothing about
an idea, so it maps to the concept of the exercise it happened in (:data:`EXERCISE_CONCEPTS`).

Nothing here is an answer: ids only, so it ships in the handout (practice offline needs it).
``tests/quiz/test_concepts.py`` fails on a catalogued mistake or family without a concept and on a concept
without a question of the quiz sources.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Concept:
    """One idea of the course: its title, the questions that practise it, the course text's sections that
    explain it (``chapter.section`` addresses, the first the main one; none where the text has none)."""

    id: str
    title: str
    questions: tuple[str, ...]
    sections: tuple[str, ...] = ()


def _c(concept_id: str, title: str, *questions: str, text: tuple[str, ...] = ()) -> Concept:
    """A concept; ``text`` is written with § so that the course text's citation check resolves each section."""
    return Concept(concept_id, title, tuple(questions), tuple(address.lstrip("§") for address in text))


CONCEPTS: dict[str, Concept] = {
    c.id: c
    for c in [
        _c(
            "activations.sigmoid-tanh",
            "Sigmoid and tanh and their derivatives",
            "activations/sigmoid-derivative",
            "activations/sigmoid-max-derivative",
            "activations/tanh-derivative",
            text=("§activations.sigmoid-tanh",),
        ),
        _c(
            "activations.relu",
            "ReLU: its two branches, its gradient and dead units",
            "activations/dead-relu-cause",
            "activations/dead-relu-remedies",
            text=("§activations.relu", "§kernels.elementwise"),
        ),
        _c(
            "activations.relu-family",
            "Leaky ReLU and PReLU: the negative branch and its gradients",
            "activations/prelu-dalpha",
            "activations/prelu-vs-leaky",
            "activations/negative-outputs",
            text=("§activations.relu-family", "§activations.relu"),
        ),
        _c(
            "activations.elu",
            "ELU: its negative branch and its derivative",
            "activations/elu-value",
            "activations/negative-outputs",
            text=("§activations.relu-family",),
        ),
        _c(
            "activations.gelu",
            "GELU: its definition, its approximations, its derivative",
            "activations/gelu-definition",
            "activations/gelu-value",
            "activations/gelu-why",
            "activations/gelu-min-x",
            "activations/gelu-min-value",
            text=("§activations.gelu", "§kernels.elementwise"),
        ),
        _c(
            "activations.silu",
            "SiLU (Swish): its definition and its derivative",
            "activations/silu-min-value",
            "activations/swish-derivative",
            text=("§activations.silu",),
        ),
        _c(
            "backprop.cached-values",
            "Backward reuses what forward kept: work on copies",
            "activations/sigmoid-derivative",
            "activations/tanh-derivative",
            "dropout-weight-decay/dropout-backward",
        ),
        _c(
            "backprop.chain-rule",
            "The chain rule term by term",
            "normalization/bn-dx-constant",
            "normalization/layernorm-backward",
            "normalization/rmsnorm-backward",
            "activations/swish-derivative",
            text=("§normalization.batchnorm-backward",),
        ),
        _c(
            "linear.affine-layer",
            "The linear layer: shapes, transposes, the bias",
            "universal-approximation/mlp-parameter-count",
            "universal-approximation/linear-collapse",
            "initialisation/linear-variance",
            text=("§universal-approximation.constructive", "§initialisation.variance-propagation"),
        ),
        _c(
            "normalization.batchnorm-forward",
            "BatchNorm's forward: batch statistics, ε, γ and β",
            "normalization/trio-batchnorm",
            "normalization/bn-standardize",
            "normalization/bn-identity",
            "normalization/bn-bias-redundant",
            text=("§normalization.batchnorm-forward",),
        ),
        _c(
            "normalization.batchnorm-running-stats",
            "BatchNorm's running statistics and momentum",
            "normalization/bn-running-var-batches",
            "normalization/bn-running-mean-momentum",
            "normalization/bn-eval-output",
            text=("§normalization.batchnorm-running-stats",),
        ),
        _c(
            "normalization.batchnorm-backward",
            "BatchNorm's backward: the three terms of dx, dγ and dβ",
            "normalization/bn-dgamma",
            "normalization/bn-dx-constant",
            text=("§normalization.batchnorm-backward",),
        ),
        _c(
            "normalization.train-vs-eval",
            "Training mode and eval mode",
            "normalization/bn-eval-output",
            "normalization/bn-eval-forgotten",
            "dropout-weight-decay/dropout-test-time",
            text=("§normalization.batchnorm-train-eval",),
        ),
        _c(
            "normalization.axes",
            "Which axes a normalisation reduces over",
            "normalization/norm-axes-instance",
            "normalization/norm-batch-independent",
            "normalization/groupnorm-extremes",
            "normalization/trio-layernorm",
            text=("§normalization.trio", "§normalization.groupnorm"),
        ),
        _c(
            "normalization.layernorm",
            "LayerNorm: per-token statistics",
            "normalization/trio-layernorm",
            "normalization/layernorm-output",
            "normalization/ln-transformers",
            "normalization/pre-ln-vs-post-ln",
            text=("§normalization.layernorm", "§kernels.one-pass"),
        ),
        _c(
            "normalization.layernorm-backward",
            "LayerNorm's backward",
            "normalization/layernorm-backward",
            text=("§normalization.layernorm",),
        ),
        _c(
            "normalization.rmsnorm",
            "RMSNorm: one statistic, no centring",
            "normalization/trio-rmsnorm",
            "normalization/rmsnorm-output",
            "normalization/rmsnorm-why",
            "normalization/rmsnorm-scale-invariance",
            text=("§normalization.rmsnorm", "§kernels.reductions"),
        ),
        _c(
            "normalization.rmsnorm-backward",
            "RMSNorm's backward",
            "normalization/rmsnorm-backward",
            text=("§normalization.rmsnorm",),
        ),
        _c(
            "normalization.groupnorm",
            "GroupNorm and InstanceNorm: groups of channels",
            "normalization/groupnorm-extremes",
            "normalization/groupnorm-choose-g",
            "normalization/norm-axes-instance",
            text=("§normalization.groupnorm",),
        ),
        _c(
            "normalization.batchnorm-fold",
            "Folding BatchNorm into the layer before it",
            "normalization/bn-fold",
            "normalization/bn-bias-redundant",
            "normalization/bn-weight-scale",
            text=("§normalization.batchnorm-train-eval",),
        ),
        _c(
            "dropout.inverted-scaling",
            "Inverted dropout: keep with 1 - p, scale by 1/(1 - p)",
            "dropout-weight-decay/inverted-dropout-expectation",
            "dropout-weight-decay/dropout-kept-value",
            "dropout-weight-decay/naive-dropout-test-scale",
            "dropout-weight-decay/dropout-variance",
            text=("§dropout-weight-decay.dropout", "§kernels.elementwise"),
        ),
        _c(
            "dropout.mask",
            "Dropout's mask: one fresh Bernoulli draw per element and forward",
            "dropout-weight-decay/dropout-subnetworks",
            "dropout-weight-decay/dropout-co-adaptation",
            "dropout-weight-decay/dropout-kept-value",
            text=("§dropout-weight-decay.dropout", "§dropout-weight-decay.dropout-ensemble"),
        ),
        _c(
            "dropout.backward",
            "Dropout's backward: the same mask, the same scale",
            "dropout-weight-decay/dropout-backward",
            text=("§dropout-weight-decay.dropout",),
        ),
        _c(
            "init.xavier",
            "Xavier (Glorot) initialisation",
            "initialisation/xavier-std",
            "initialisation/xavier-variance",
            "initialisation/xavier-uniform-a",
            "initialisation/xavier-for-which",
            "initialisation/kaiming-vs-xavier",
            text=("§initialisation.xavier",),
        ),
        _c(
            "init.kaiming",
            "Kaiming (He) initialisation: fan mode and the ReLU's gain",
            "initialisation/kaiming-normal-std",
            "initialisation/kaiming-variance",
            "initialisation/kaiming-uniform-b",
            "initialisation/kaiming-fan-out-std",
            "initialisation/relu-second-moment",
            "initialisation/deep-relu-stable",
            text=("§initialisation.kaiming",),
        ),
        _c(
            "init.variance-vs-std",
            "Variance, standard deviation and the uniform bound",
            "initialisation/linear-variance",
            "initialisation/xavier-uniform-a",
            "initialisation/kaiming-uniform-b",
            "initialisation/depth-explosion",
            text=("§initialisation.variance-propagation",),
        ),
        _c(
            "optim.sgd",
            "SGD with momentum and L2",
            "dropout-weight-decay/sgd-step",
            "dropout-weight-decay/sgd-l2-update",
            text=("§dropout-weight-decay.weight-decay",),
        ),
        _c(
            "optim.adamw",
            "AdamW: moments, bias correction, decoupled decay",
            "dropout-weight-decay/adamw-first-step",
            "dropout-weight-decay/adamw-decay-factor",
            "dropout-weight-decay/adamw-vs-l2",
            "dropout-weight-decay/decay-facts",
            text=("§dropout-weight-decay.weight-decay",),
        ),
        _c(
            "gradcheck.numerical-gradient",
            "The central-difference gradient",
            "dropout-weight-decay/gradcheck-central",
            text=("§dropout-weight-decay.gradcheck",),
        ),
        _c(
            "gradcheck.relative-error",
            "The relative error of two gradients",
            "dropout-weight-decay/rel-error-value",
            text=("§dropout-weight-decay.gradcheck",),
        ),
        _c(
            "formulas.constants",
            "The constant factors of a formula",
            "dropout-weight-decay/inverted-dropout-expectation",
            "initialisation/xavier-std",
            "initialisation/kaiming-normal-std",
            "activations/sigmoid-max-derivative",
        ),
        _c(
            "approximation.universal",
            "Universal approximation: fitting a function with one hidden layer",
            "universal-approximation/fit-function-error",
            "universal-approximation/uat-statement",
            "universal-approximation/relu-pieces",
            "universal-approximation/relu-ramp-output",
            "universal-approximation/sigmoid-network-output",
            text=("§universal-approximation.theorem",),
        ),
        _c(
            "formulas.settings",
            "A layer's settings: their defaults and how they are read",
            "normalization/bn-running-mean-momentum",
            "dropout-weight-decay/adamw-decay-factor",
            "activations/elu-value",
            "initialisation/kaiming-fan-out-std",
        ),
    ]
}

# (prefix of a mistake id, concept): the first that matches wins, so the longer prefixes come first.
RULES: tuple[tuple[str, str], ...] = (
    ("sigmoid-", "activations.sigmoid-tanh"),
    ("tanh-", "activations.sigmoid-tanh"),
    ("relu-", "activations.relu"),
    ("leaky-", "activations.relu-family"),
    ("prelu-", "activations.relu-family"),
    ("elu-", "activations.elu"),
    ("gelu-", "activations.gelu"),
    ("silu-", "activations.silu"),
    ("linear-", "linear.affine-layer"),
    ("bn-eval-backward", "normalization.batchnorm-backward"),
    ("bn-eval-", "normalization.train-vs-eval"),
    ("bn-train-uses", "normalization.train-vs-eval"),
    ("bn-running-", "normalization.batchnorm-running-stats"),
    ("bn-biased-running", "normalization.batchnorm-running-stats"),
    ("bn-momentum-", "normalization.batchnorm-running-stats"),
    ("bn-3d-running", "normalization.batchnorm-running-stats"),
    ("bn-backward-", "normalization.batchnorm-backward"),
    ("bn-dx-", "normalization.batchnorm-backward"),
    ("bn-dgamma", "normalization.batchnorm-backward"),
    ("bn-3d-dgamma", "normalization.batchnorm-backward"),
    ("bn-stats-", "normalization.axes"),
    ("bn-3d-", "normalization.axes"),
    ("bn2d-", "normalization.axes"),
    ("bn-affine-last-axis", "normalization.axes"),
    ("bn-", "normalization.batchnorm-forward"),
    ("ln-batch-axis", "normalization.axes"),
    ("ln-last-axis", "normalization.axes"),
    ("ln-no-keepdims", "normalization.axes"),
    ("ln-backward", "normalization.layernorm-backward"),
    ("ln-dx-", "normalization.layernorm-backward"),
    ("ln-dgamma", "normalization.layernorm-backward"),
    ("ln-", "normalization.layernorm"),
    ("rms-grad", "normalization.rmsnorm-backward"),
    ("rms-dx-", "normalization.rmsnorm-backward"),
    ("rms-dgamma", "normalization.rmsnorm-backward"),
    ("rms-", "normalization.rmsnorm"),
    ("gn-", "normalization.groupnorm"),
    ("in-", "normalization.groupnorm"),
    ("dropout-backward", "dropout.backward"),
    ("dropout-mask", "dropout.mask"),
    ("dropout-eval", "normalization.train-vs-eval"),
    ("dropout-gaussian", "dropout.mask"),
    ("dropout-ignores-rng", "dropout.mask"),
    ("dropout-in-place", "backprop.cached-values"),
    ("dropout-", "dropout.inverted-scaling"),
    ("init-kaiming-uniform-bound", "init.variance-vs-std"),
    ("init-uniform-bound", "init.variance-vs-std"),
    ("init-variance-as-std", "init.variance-vs-std"),
    ("init-kaiming-variance-as-std", "init.variance-vs-std"),
    ("init-kaiming", "init.kaiming"),
    ("init-leaky", "init.kaiming"),
    ("init-xavier-for-kaiming", "init.kaiming"),
    ("init-", "init.xavier"),
    ("sgd-", "optim.sgd"),
    ("adamw-", "optim.adamw"),
    ("numgrad-", "gradcheck.numerical-gradient"),
    ("rel-error-", "gradcheck.relative-error"),
    ("mlp-backward", "backprop.chain-rule"),
    ("mlp-eval", "normalization.train-vs-eval"),
    ("mlp-train", "normalization.train-vs-eval"),
    ("mlp-", "normalization.batchnorm-forward"),
    ("fold-bn-", "normalization.batchnorm-fold"),
    ("kernel-relu", "activations.relu"),
    ("kernel-gelu", "activations.gelu"),
    ("kernel-dropout", "dropout.inverted-scaling"),
    ("kernel-rmsnorm", "normalization.rmsnorm"),
    ("kernel-layernorm", "normalization.layernorm"),
)

# The generic families that name an idea (the crash families map to their exercise's concept).
GENERIC: dict[str, str] = {
    "generic-inplace": "backprop.cached-values",
    "generic-param": "formulas.settings",
    "generic-mode": "normalization.train-vs-eval",
    "generic-function": "backprop.chain-rule",
    "generic-axes": "normalization.axes",
    "generic-terms": "backprop.chain-rule",
    "generic-transpose": "linear.affine-layer",
    "generic-scale": "formulas.constants",
    "generic-offset": "normalization.batchnorm-forward",
    "generic-region": "activations.relu-family",
    "generic-shape": "normalization.axes",
}
CRASH_FAMILIES: tuple[str, ...] = ("generic-none", "generic-call", "generic-key", "generic-validation")

# Each exercise's own concept: what a crash family in it (or an unknown mistake of it) leads to, and where its
# report sends the student to read (:func:`section_of_exercise`). The one table of exercise -> concept.
EXERCISE_CONCEPTS: dict[str, str] = {
    "activations.Sigmoid": "activations.sigmoid-tanh",
    "activations.Tanh": "activations.sigmoid-tanh",
    "activations.ReLU": "activations.relu",
    "activations.LeakyReLU": "activations.relu-family",
    "activations.PReLU": "activations.relu-family",
    "activations.ELU": "activations.elu",
    "activations.GELU": "activations.gelu",
    "activations.SiLU": "activations.silu",
    "linear.Linear": "linear.affine-layer",
    "normalization.BatchNorm1d": "normalization.batchnorm-forward",
    "normalization.BatchNorm2d": "normalization.batchnorm-forward",
    "normalization.LayerNorm": "normalization.layernorm",
    "normalization.RMSNorm": "normalization.rmsnorm",
    "normalization.GroupNorm": "normalization.groupnorm",
    "normalization.InstanceNorm2d": "normalization.groupnorm",
    "dropout.Dropout": "dropout.inverted-scaling",
    "init.xavier_uniform": "init.xavier",
    "init.xavier_normal": "init.xavier",
    "init.kaiming_uniform": "init.kaiming",
    "init.kaiming_normal": "init.kaiming",
    "optim.SGD": "optim.sgd",
    "optim.AdamW": "optim.adamw",
    "gradcheck.numerical_gradient": "gradcheck.numerical-gradient",
    "gradcheck.rel_error": "gradcheck.relative-error",
    "blocks.MLPBlock": "normalization.train-vs-eval",
    "blocks.fold_batchnorm": "normalization.batchnorm-fold",
    "approximation.fit_function": "approximation.universal",
    "kernels.relu_forward": "activations.relu",
    "kernels.relu_backward": "activations.relu",
    "kernels.gelu_forward": "activations.gelu",
    "kernels.gelu_backward": "activations.gelu",
    "kernels.dropout_forward": "dropout.inverted-scaling",
    "kernels.rmsnorm_forward": "normalization.rmsnorm",
    "kernels.layernorm_forward": "normalization.layernorm",
}


def concept_of(mistake_id: str, exercise: str | None = None) -> Concept | None:
    """The concept a mistake shows a gap in: GENERIC, then the first matching RULES prefix, else the exercise's.

    A combined diagnosis (``a+b``) is its first part's; None when nothing matches (the test keeps that from
    happening to a catalogued mistake).
    """
    first = mistake_id.split("+")[0]
    concept_id = GENERIC.get(first)
    if concept_id is None and not first.startswith("generic-"):
        concept_id = next((concept for prefix, concept in RULES if first.startswith(prefix)), None)
    if concept_id is None and exercise is not None:
        found = concept_of_exercise(exercise)
        concept_id = found.id if found else None
    return CONCEPTS.get(concept_id) if concept_id else None


def concept_of_exercise(exercise: str) -> Concept | None:
    """An exercise's own concept (:data:`EXERCISE_CONCEPTS`); an exercise a course added that the table does not
    name takes the concept of the first named exercise of its topic (``linear.Linear2`` that of ``linear.Linear``)."""
    concept_id = EXERCISE_CONCEPTS.get(exercise)
    if concept_id is None:
        topic = exercise.partition(".")[0] + "."
        concept_id = next((c for name, c in EXERCISE_CONCEPTS.items() if name.startswith(topic)), None)
    return CONCEPTS.get(concept_id) if concept_id else None


def section_of_exercise(exercise: str) -> str | None:
    """The course text's section an exercise's report sends the student to: of its concept's sections, the first
    in the exercise's own chapter (a kernel's in ``kernels``), else the first; None when its concept has none."""
    concept = concept_of_exercise(exercise)
    if concept is None or not concept.sections:
        return None
    chapter = exercise.partition(".")[0] + "."
    return next((s for s in concept.sections if s.startswith(chapter)), concept.sections[0])


def questions_of(mistake_id: str, exercise: str | None = None) -> tuple[str, ...]:
    """The ``chapter/question-id``\\ s that practise a mistake's concept (none when it has no concept)."""
    concept = concept_of(mistake_id, exercise)
    return concept.questions if concept else ()


def sections_of(concept_id: str) -> tuple[str, ...]:
    """The course text's sections that explain a concept (``chapter.section``; none for an unknown concept)."""
    concept = CONCEPTS.get(concept_id)
    return concept.sections if concept else ()
