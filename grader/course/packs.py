"""Writing case packs (instructor side): the live expected results at public seeds, saved as data.

``write_packs(folder)`` computes, for every exercise, at its public seed
(``exercise_seed(PUBLIC_STUDENT, id)``, the same for every student): the
cases, the reference's result of each, a second reference run of each, and
every known mistake's variant on each (through :class:`grader.course.grading.LiveExpected`,
the object that serves live grading), and writes them in the format
:mod:`grader.student.engine.pack` reads. It then loads each pack back and grades the
reference's own results against it, so a release whose reference fails its
own public checks (or whose packs do not round-trip) stops with the reason.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from grader.course.grading import PUBLIC_STUDENT, LiveExpected, ReferenceResults, public_seed
from grader.student.engine.checks import CHECKS
from grader.student.engine.checks.context import Context
from grader.student.engine.checks.init import StatCheck, variant_verdict
from grader.student.engine.diagnosis import REFERENCE_AGAIN
from grader.student.errors import GraderError
from grader.student.engine.crash_origin import carried_keys, shapes_document
from grader.student.engine.ops import Case, ScriptResult
from grader.student.engine.trace import read
from grader.student.engine.pack import (
    PACK_FORMAT,
    PackExpected,
    decode_fingerprint,
    encode_fingerprint,
    load_pack,
    pack_path,
)

# The pseudo-student whose per-exercise seeds are the public ones.

# Mistakes so common beside a second one (most CS231n BatchNorms accumulate the biased variance and make one
# more mistake) that a pack also stores each of their combinations with the exercise's other mistakes, so that
# the handout names both offline ("and also"); any other combination is named only live.
PAIRED = ("bn-biased-running-var", "bn-biased-running-var-2d")


class PackError(GraderError):
    """A pack cannot be built, or the reference fails its own public checks (the release stops)."""


class _ArrayStore:
    """Arrays by content: each distinct (dtype, shape, bytes) is stored once as member ``a<n>``."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._by_digest: dict[str, str] = {}

    def put(self, value: np.ndarray) -> str:
        array = np.array(value, order="C")  # not ascontiguousarray: it makes a 0-d array 1-d
        digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode() + array.tobytes()).hexdigest()
        if digest not in self._by_digest:
            name = f"a{len(self.arrays)}"
            self._by_digest[digest] = name
            self.arrays[name] = array
        return self._by_digest[digest]

    def result(self, result: ScriptResult) -> dict[str, Any]:
        return {
            "outputs": {key: self.put(value) for key, value in result.outputs.items()},
            "error": result.error,
            "warnings": list(result.warnings),
        }


def _verdicts(exercise_id: str, seed: int, expected: LiveExpected) -> dict[str, dict[str, Any]]:
    """{statistical check: {mistake id: [ok, fingerprint]}}: every StatCheck of the plan on every variant."""
    definition = CHECKS[exercise_id]
    plan = definition.checked_plan(seed)
    ctx = Context(
        exercise_id=exercise_id, seed=seed, cases={c.name: c for c in plan.cases}, student={}, expected=expected
    )
    table: dict[str, dict[str, Any]] = {}
    for check in plan.checks:
        if not isinstance(check, StatCheck):
            continue
        table[check.name] = {}
        for mistake in expected.mistakes:
            verdict = variant_verdict(ctx, check, mistake)
            encoded = encode_fingerprint(verdict.fingerprint)
            if decode_fingerprint(json.loads(json.dumps(encoded))) != verdict.fingerprint:
                raise PackError(f"{exercise_id} {check.name}: the fingerprint of {mistake.id} does not round-trip")
            table[check.name][mistake.id] = [verdict.ok, encoded]
    return table


def common_pairs(expected: LiveExpected) -> list[str]:
    """The ids of the combinations a pack stores: each PAIRED mistake with every other mistake it composes with."""
    ids = [m.id for m in expected.mistakes]
    pairs = []
    for first in (i for i in ids if i in PAIRED):
        for other in ids:
            if other == first:
                continue
            ordered = sorted([first, other], key=ids.index)
            combined = expected.combination(ordered)
            if combined is not None and combined not in pairs:
                pairs.append(combined)
    return pairs


def build_pack(exercise_id: str) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, ScriptResult]]:
    """(meta document, arrays, the reference's results) of ``exercise_id``'s pack at its public seed.

    Outputs (reference, second reference run, variants) are stored where the
    exercise's judging reads them (``pack_outputs``); statistical checks'
    verdicts on the variants always.
    """
    definition = CHECKS[exercise_id]
    seed = public_seed(exercise_id)
    cases: list[Case] = definition.cases(seed)
    expected = LiveExpected(exercise_id, ReferenceResults(cases, numgrad=True))
    reference = {c.name: expected.reference[c.name] for c in cases}
    store = _ArrayStore()
    outputs = definition.pack_outputs
    meta: dict[str, Any] = {
        "format": PACK_FORMAT,
        "exercise": exercise_id,
        "seed": seed,
        "cases": [
            {"name": c.name, "script": c.script, "arrays": {k: store.put(np.asarray(v)) for k, v in c.arrays.items()}}
            for c in cases
        ],
        "reference": {name: store.result(r) for name, r in reference.items()} if outputs else {},
        "again": {c.name: store.result(expected.variant(REFERENCE_AGAIN, c)) for c in cases} if outputs else {},
        "variants": {
            mid: {c.name: store.result(expected.variant(mid, c)) for c in cases}
            for mid in [m.id for m in expected.mistakes] + common_pairs(expected)
        }
        if outputs
        else {},
        "verdicts": _verdicts(exercise_id, seed, expected),
        "mistakes": [{"id": m.id, "sentence": m.sentence, "fix": m.fix, "hint": m.hint} for m in expected.mistakes],
        **crash_shapes(exercise_id, cases),
    }
    return meta, store.arrays, reference


def crash_shapes(exercise_id: str, cases: list[Case]) -> dict[str, Any]:
    """What the handout needs to locate a crash offline (grader.student.engine.crash_origin): per public case, the
    reference's traced records as names, roles, kinds and shapes (``shapes``), and the string keys its file names
    (``keys``); never a value. Nothing for an exercise whose code runs on the OpenCL device (never traced)."""
    from grader.course import align

    if CHECKS[exercise_id].needs_opencl:
        return {}
    topic = exercise_id.split(".", 1)[0]
    return {
        "shapes": {c.name: shapes_document(read(align.reference_trace(c, topic))) for c in cases},
        "keys": carried_keys(align.reference_source(topic)),
    }


def write_pack(folder: Path, exercise_id: str) -> tuple[Path, dict[str, ScriptResult]]:
    """Build and write ``exercise_id``'s pack into ``folder``; (its path, the reference's results)."""
    meta, arrays, reference = build_pack(exercise_id)
    try:
        text = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise PackError(f"the cases of {exercise_id} are not plain JSON ({exc}): a grader bug") from exc
    buffer = io.BytesIO()
    np.savez_compressed(buffer, meta=np.frombuffer(text.encode("utf-8"), dtype=np.uint8), allow_pickle=True, **arrays)
    path = pack_path(folder, exercise_id)
    path.write_bytes(buffer.getvalue())
    return path, reference


def check_reference_passes(path: Path, reference: dict[str, ScriptResult]) -> None:
    """Load a written pack and grade the reference's results (``reference``, as a student's) with it.

    PackError naming the first public check the reference fails.
    """
    pack = load_pack(path)
    definition = CHECKS[pack.exercise_id]
    planned = definition.cases(pack.seed)
    if [c.name for c in planned] != [c.name for c in pack.cases]:
        raise PackError(f"the pack of {pack.exercise_id} does not round-trip its cases: a grader bug")
    for check in definition.evaluate(reference, PackExpected(pack), pack.seed):
        if not check.passed:
            first = (check.message.splitlines() or [""])[0]
            raise PackError(
                f"the reference fails its own public check {pack.exercise_id} {check.name}: {first}"
                " (fix reference/ or the check before releasing)"
            )


def write_packs(folder: Path, ids: list[str] | None = None) -> dict[str, int]:
    """Write and verify the packs of ``ids`` (default: every exercise) into ``folder``; {exercise id: bytes}."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, int] = {}
    for exercise_id in ids or list(CHECKS):
        path, reference = write_pack(folder, exercise_id)
        check_reference_passes(path, reference)
        sizes[exercise_id] = path.stat().st_size
    return sizes


__all__ = ["PUBLIC_STUDENT", "PackError", "build_pack", "check_reference_passes", "public_seed", "write_packs"]
