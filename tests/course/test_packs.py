"""Case packs: the public checks as data (grader/course/packs.py writes them, grader/student/engine/pack.py reads them).

- every exercise's pack is written, loads back, and the reference passes its own public checks with it;
- the packs are small (under 5 MB in all);
- judging from a pack gives exactly what judging live gives, at the public seed, for the reference and for
  every known mistake's variant handed in as a student's results (one code path, two sources);
- a missing or stale pack is a one-line SetupError.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grader.course.grading import LiveExpected, ReferenceResults
from grader.mistakes import CATALOGUE, reference_namespace
from grader.course.packs import PUBLIC_STUDENT, PackError, check_reference_passes, public_seed, write_pack, write_packs
from grader.student.engine.checks import CHECKS
from grader.student.errors import SetupError
from grader.student.engine.model import exercise_seed
from grader.student.engine.ops import run_script
from grader.student.engine.pack import PackExpected, PackSource, load_pack, pack_path

PACK_BUDGET = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    folder = tmp_path_factory.mktemp("packs")
    return folder, write_packs(folder)


def test_every_exercise_has_a_small_pack(packs: tuple[Path, dict[str, int]]) -> None:
    folder, sizes = packs
    assert set(sizes) == set(CHECKS)
    assert sum(sizes.values()) < PACK_BUDGET, f"packs take {sum(sizes.values())} bytes"
    assert all(pack_path(folder, i).is_file() for i in CHECKS)


def test_the_public_seed_is_fixed_and_not_a_students() -> None:
    assert public_seed("linear.Linear") == exercise_seed(PUBLIC_STUDENT, "linear.Linear")
    assert public_seed("linear.Linear") != exercise_seed("alice", "linear.Linear")


def _as_student(exercise_id: str, ns: object, seed: int) -> dict:
    return {c.name: run_script(ns, c.script, c.arrays) for c in CHECKS[exercise_id].cases(seed)}


def _verdict(result: Any) -> dict[str, Any]:
    """A CheckResult without its figures (live: the student's hidden view and the instructor's full one)."""
    return {k: v for k, v in dataclasses.asdict(result).items() if k not in ("figure", "instructor_figure")}


def _mistake_ids() -> list[str]:
    return [m.id for m in CATALOGUE.values()]


@pytest.mark.parametrize("mistake_id", _mistake_ids())
def test_a_pack_judges_a_variant_exactly_as_live_runs_do(packs: tuple[Path, dict[str, int]], mistake_id: str) -> None:
    folder, _ = packs
    mistake = CATALOGUE[mistake_id]
    exercise_id = mistake.exercise
    pack = load_pack(pack_path(folder, exercise_id))
    definition = CHECKS[exercise_id]
    student = _as_student(exercise_id, mistake.namespace, pack.seed)
    live = definition.evaluate(student, LiveExpected(exercise_id, ReferenceResults(pack.cases)), pack.seed)
    from_pack = definition.evaluate(student, PackExpected(pack), pack.seed)
    live_here = [r for r in live if r.name in {c.name for c in from_pack}]
    # the same verdicts; the figures differ only where live means hidden (no expected values: test_figures.py)
    assert [_verdict(r) for r in from_pack] == [_verdict(r) for r in live_here]
    assert [r.figure is None for r in from_pack] == [r.figure is None for r in live_here]
    if mistake_id in ("bn-biased-running-var", "linear-dW-transposed", "dropout-no-rescale"):
        assert mistake_id in {r.misconception for r in from_pack}  # classic mistakes are named offline


def test_only_live_only_checks_are_left_out_of_a_pack(packs: tuple[Path, dict[str, int]]) -> None:
    folder, _ = packs
    source = PackSource(folder)
    for exercise_id, definition in CHECKS.items():
        seed = source.pack(exercise_id).seed
        left_out = [c.name for c in definition.checked_plan(seed).checks if c.live_only]
        assert definition.points_here(seed, live=False) == pytest.approx(
            definition.max_score - sum(c.points for c in definition.checked_plan(seed).checks if c.live_only)
        )
        if exercise_id == "blocks.MLPBlock":
            assert left_out == ["dropout_train", "backward_dropout"]
        else:
            assert left_out == []
    notices = source.notices(list(CHECKS))
    assert "public checks" in notices[0] and "Gradescope" in notices[0]
    assert "blocks.MLPBlock: dropout_train, backward_dropout" in notices[1]


def test_a_reference_that_fails_its_public_checks_stops_the_pack(tmp_path: Path) -> None:
    path, reference = write_pack(tmp_path, "linear.Linear")
    broken = dict(reference)
    result = broken["mat"]
    broken["mat"] = dataclasses.replace(result, outputs={**result.outputs, "y": result.outputs["y"] + 1.0})
    with pytest.raises(PackError, match=r"^the reference fails its own public check linear.Linear forward: "):
        check_reference_passes(path, broken)
    check_reference_passes(path, reference)  # the real reference passes


def test_a_missing_or_foreign_pack_is_a_setup_error(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="no case pack at .*reinstall the handout"):
        PackSource(tmp_path).prepare("linear.Linear", "bob")
    np.savez(pack_path(tmp_path, "linear.Linear"), meta=np.frombuffer(b'{"format": 99}', dtype=np.uint8))
    with pytest.raises(SetupError, match="format 99"):
        PackSource(tmp_path).prepare("linear.Linear", "bob")


def test_reference_namespace_is_what_live_packs_run() -> None:
    """The live expected results a pack is made of are the reference package's own."""
    cases = CHECKS["activations.ReLU"].cases(public_seed("activations.ReLU"))
    live = LiveExpected("activations.ReLU", ReferenceResults(cases))
    direct = run_script(reference_namespace(), cases[0].script, cases[0].arrays)
    assert set(live.reference[cases[0].name].outputs) == set(direct.outputs)


def test_a_pack_names_the_common_pair_offline_as_live_runs_do(packs: tuple[Path, dict[str, int]]) -> None:
    """Round 3: the biased running variance beside eps outside the root is named on its checks, 'and also'
    where both explain one, the same from the pack as live."""
    from grader.mistakes import compose

    folder, _ = packs
    exercise_id = "normalization.BatchNorm1d"
    pack = load_pack(pack_path(folder, exercise_id))
    assert "bn-biased-running-var+bn-momentum-inverted" in pack.variants
    for pair in (["bn-biased-running-var", "bn-eps-outside-sqrt"], ["bn-biased-running-var", "bn-momentum-inverted"]):
        both = compose([CATALOGUE[i] for i in pair])
        assert both is not None
        student = _as_student(exercise_id, both.namespace, pack.seed)
        definition = CHECKS[exercise_id]
        live = definition.evaluate(student, LiveExpected(exercise_id, ReferenceResults(pack.cases)), pack.seed)
        from_pack = definition.evaluate(student, PackExpected(pack), pack.seed)
        # the same verdicts; figures differ only where live means hidden (no expected values: test_figures.py)
        assert [_verdict(r) for r in from_pack] == [_verdict(r) for r in live]
        named = {r.misconception for r in from_pack if r.misconception} | {m for r in from_pack for m in r.also}
        assert named == set(pair)
