"""Exercise ids, topics and name resolution."""

from __future__ import annotations

import pytest

from grader.student.engine import catalogue
from grader.student.errors import UsageError


def test_exercise_list_is_the_spec_list() -> None:
    ex = catalogue.EXERCISES
    assert ex[0] == "activations.Sigmoid" and ex[-1] == "kernels.layernorm_forward"
    assert "approximation.fit_function" in ex and "kernels.relu_forward" in ex
    assert len(ex) == len(set(ex))  # no count kept here: a course adds exercises (docs/authoring.md)
    assert catalogue.TOPICS == [
        "activations",
        "linear",
        "normalization",
        "dropout",
        "init",
        "optim",
        "gradcheck",
        "blocks",
        "approximation",
        "kernels",
    ]
    assert ex.index("approximation.fit_function") + 1 == ex.index("kernels.relu_forward")


def test_topic_of() -> None:
    assert catalogue.topic_of("normalization.BatchNorm1d") == "normalization"
    assert catalogue.name_of("init.kaiming_normal") == "kaiming_normal"


def test_empty_selection_means_all() -> None:
    assert catalogue.resolve([]) == catalogue.EXERCISES
    assert catalogue.resolve(None) == catalogue.EXERCISES


def test_ids_topics_and_bare_names() -> None:
    assert catalogue.resolve(["normalization.BatchNorm1d"]) == ["normalization.BatchNorm1d"]
    assert catalogue.resolve(["batchnorm1d"]) == ["normalization.BatchNorm1d"]
    assert catalogue.resolve(["NORMALIZATION.layernorm"]) == ["normalization.LayerNorm"]
    assert catalogue.resolve(["linear"]) == ["linear.Linear"]
    assert catalogue.resolve(["kernels"]) == [e for e in catalogue.EXERCISES if e.startswith("kernels.")]


def test_result_is_in_catalogue_order_without_duplicates() -> None:
    got = catalogue.resolve(["linear", "activations.ReLU", "relu", "Sigmoid"])
    assert got == ["activations.Sigmoid", "activations.ReLU", "linear.Linear"]


@pytest.mark.parametrize(
    "selector, suggestion",
    [
        ("BatchNorm", "normalization.BatchNorm1d"),
        ("normalisation", "normalization"),
        ("kaiming", "init.kaiming_normal"),
        ("layernorm_fwd", "kernels.layernorm_forward"),
    ],
)
def test_unknown_names_suggest_the_closest(selector: str, suggestion: str) -> None:
    with pytest.raises(UsageError) as info:
        catalogue.resolve([selector])
    assert str(info.value) == f"'{selector}' is not an exercise or topic. Did you mean '{suggestion}'?"


def test_hopeless_name_lists_topics() -> None:
    with pytest.raises(UsageError, match="'zzzz' is not an exercise or topic. Topics: activations, linear"):
        catalogue.resolve(["zzzz"])


# --------------------------------------------------------------------------- the catalogue of known mistakes


def test_mistakes_are_well_formed() -> None:
    from grader.mistakes import CATALOGUE, Mistake, for_exercise

    assert len(CATALOGUE) >= 20
    for mistake_id, mistake in CATALOGUE.items():
        assert isinstance(mistake, Mistake) and mistake.id == mistake_id
        assert mistake.exercise in catalogue.EXERCISES
        assert mistake.sentence and mistake.fix
        if catalogue.topic_of(mistake.exercise) in ("activations", "linear", "normalization"):
            assert mistake.sentence.endswith(".") and mistake.fix.endswith(".")
        assert mistake.explain().startswith(f"Known mistake {mistake_id}: {mistake.sentence} Fix: ")
        assert mistake in for_exercise(mistake.exercise)


def test_own_topics_cover_the_classic_mistakes() -> None:
    from grader.mistakes import CATALOGUE

    for mistake_id in [
        "bn-biased-running-var",
        "bn-momentum-inverted",
        "bn-eps-outside-sqrt",
        "ln-batch-axis",
        "rms-dgamma-axis0",
        "gelu-tanh-approx",
        "bn-dgamma-wrong-axes",
        "sigmoid-overflow",
        "relu-grad-at-zero",
        "linear-dW-transposed",
        "gn-groups-strided",
        "in-over-channels",
    ]:
        assert mistake_id in CATALOGUE
    own = [
        m for m in CATALOGUE.values() if catalogue.topic_of(m.exercise) in ("activations", "linear", "normalization")
    ]
    assert len(own) >= 14


def test_a_variant_namespace_differs_in_one_name_only() -> None:
    from grader.mistakes import CATALOGUE, reference_namespace

    ref = reference_namespace()
    mistake = CATALOGUE["ln-batch-axis"]
    ns = mistake.namespace
    assert ns.normalization.LayerNorm is not ref.normalization.LayerNorm
    assert issubclass(ns.normalization.LayerNorm, ref.normalization.LayerNorm)
    assert ns.normalization.BatchNorm1d is ref.normalization.BatchNorm1d
    assert ns.activations is ref.activations


def test_plans_must_add_up_to_max_score() -> None:
    from grader.student.engine.checks.context import PlanError
    from grader.student.engine.checks.kinds import Compare
    from grader.student.engine.checks.plans import ExerciseChecks, Plan

    class Broken(ExerciseChecks):
        id = "linear.Linear"

        def plan(self, seed: int) -> Plan:
            p = Plan()
            p.add(Compare("only", 9.0, case="c", keys=["y"]))
            return p

    with pytest.raises(PlanError, match="checks add up to 9.0, expected 10.0"):
        Broken().cases(1)
    p = Plan()
    p.add(Compare("a", 1.0))
    with pytest.raises(PlanError, match="duplicate check name"):
        p.add(Compare("a", 1.0))


def test_own_cases_are_json_scripts_with_float64_arrays() -> None:
    import json

    import numpy as np

    from grader.student.engine.checks import CHECKS

    for exercise_id, checks in CHECKS.items():
        if catalogue.topic_of(exercise_id) not in ("activations", "linear", "normalization"):
            continue
        cases = checks.cases(7)
        assert len({c.name for c in cases}) == len(cases)
        for case in cases:
            json.dumps(case.script)
            assert all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in case.arrays.values())
        assert checks.max_score == 10.0 and checks.timeout > 0 and not checks.needs_opencl


def test_every_exercise_has_checks_in_catalogue_order() -> None:
    from grader.student.engine.checks import CHECKS

    assert list(CHECKS) == catalogue.EXERCISES
    assert all(CHECKS[e].id == e for e in CHECKS)
