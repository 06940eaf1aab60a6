"""Case packs: an exercise's public checks as data, so that a handout judges without reference code.

A pack is one ``<exercise id>.npz`` file (``np.load(..., allow_pickle=False)``)
written by ``grade release`` (``grader.course.packs``). It holds, for one fixed
public seed: the cases (scripts and input arrays), the reference's result of
every case, a second reference run of every case (outputs that differ between
the two come from an unseeded generator and are never compared), and the
result of every known mistake's variant on every case, with each mistake's
id, sentence and fix. For an exercise judged by statistics alone (dropout,
init: ``ExerciseChecks.pack_outputs`` False) it stores, instead of the large
sampled outputs, each statistical check's verdict (ok, fingerprint) on each
variant, which is all that judging reads of them. Member ``meta`` is the JSON document (UTF-8 bytes as a
uint8 array) that names the arrays; every other member is one array
(``a0``, ``a1``, ...), stored once however many results share it. For an
exercise that runs on the CPU, ``meta`` also carries, per case, the reference's
traced records as names, roles, kinds and shapes (``shapes``: no value, no
line) and the string keys its file names (``keys``): what
:func:`grader.student.engine.crash_origin.locate_crash` needs to locate a
crash in the student's file offline (:meth:`PackSource.locate`).

:class:`PackExpected` serves these results to the same judging code that the
instructor's live runs serve (:class:`grader.student.engine.diagnosis.Expected`);
:class:`PackSource` is the grading pipeline's source for a folder of packs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from grader.student.engine.crash_origin import locate_crash, shapes_records
from grader.student.engine.diagnosis import REFERENCE_AGAIN, KnownMistake, NeedsReference, combined_id, register_known
from grader.student.errors import SetupError
from grader.student.engine.grading import Prepared
from grader.student.engine.ops import Case, ScriptResult
from grader.student.engine.trace import Record, read

PACK_FORMAT = 1
# Where an installed handout keeps its packs (package data of the student package: grader/student/packs).
DEFAULT_PACK_DIR = Path(__file__).resolve().parents[1] / "packs"
# Where the hidden checks run, said in every report graded from packs.
HIDDEN_WHERE = (
    "where the reference is: your course's Gradescope autograder or course server (and the instructor's grade batch)"
)


def pack_path(folder: Path, exercise_id: str) -> Path:
    """The pack file of ``exercise_id`` in ``folder``."""
    return folder / f"{exercise_id}.npz"


@dataclass
class Pack:
    """One exercise's pack, loaded: its public seed, cases, and expected results."""

    exercise_id: str
    seed: int
    cases: list[Case]
    reference: dict[str, ScriptResult]
    again: dict[str, ScriptResult]
    variants: dict[str, dict[str, ScriptResult]]
    verdicts: dict[str, dict[str, tuple[bool, Any]]]
    mistakes: list[KnownMistake]
    shapes: dict[str, list[Record]] = field(default_factory=dict)  # per case: the reference's records, shapes only
    keys: set[str] = field(default_factory=set)  # the string keys the reference's file names


def encode_fingerprint(value: Any) -> Any:
    """A statistical fingerprint (nested tuples of str, bool, int, float, None) as JSON; tuples tagged."""
    if isinstance(value, tuple):
        return {"tuple": [encode_fingerprint(v) for v in value]}
    if isinstance(value, list):
        return [encode_fingerprint(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"a fingerprint holds a {type(value).__name__}, which a case pack cannot store")


def decode_fingerprint(value: Any) -> Any:
    """The inverse of :func:`encode_fingerprint`."""
    if isinstance(value, dict) and "tuple" in value:
        return tuple(decode_fingerprint(v) for v in value["tuple"])
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    if isinstance(value, list):
        return [decode_fingerprint(v) for v in value]
    return value


def _result(doc: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> ScriptResult:
    """A ScriptResult from its JSON form (output key -> array member name)."""
    return ScriptResult(
        outputs={key: arrays[name] for key, name in doc["outputs"].items()},
        error=doc.get("error"),
        warnings=list(doc.get("warnings", [])),
    )


def load_pack(path: Path) -> Pack:
    """Read one pack file; SetupError with what to do when it is missing or not a pack of this format."""
    if not path.is_file():
        raise SetupError(f"no case pack at '{path}': reinstall the handout (pip install DIR/student)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            members = {name: npz[name] for name in npz.files}
        meta = json.loads(bytes(members.pop("meta")).decode("utf-8"))
    except (OSError, ValueError, KeyError) as exc:
        raise SetupError(f"'{path}' is not a readable case pack ({exc}): reinstall the handout") from exc
    if meta.get("format") != PACK_FORMAT:
        raise SetupError(
            f"'{path}' is a case pack of format {meta.get('format')}, this grader reads"
            f" {PACK_FORMAT}: install the handout's own grader (pip install DIR/student)"
        )
    cases = [Case(c["name"], c["script"], {k: members[v] for k, v in c["arrays"].items()}) for c in meta["cases"]]
    return Pack(
        exercise_id=meta["exercise"],
        seed=int(meta["seed"]),
        cases=cases,
        reference={name: _result(doc, members) for name, doc in meta["reference"].items()},
        again={name: _result(doc, members) for name, doc in meta["again"].items()},
        variants={
            mid: {name: _result(doc, members) for name, doc in by_case.items()}
            for mid, by_case in meta["variants"].items()
        },
        verdicts={
            check: {mid: (bool(pair[0]), decode_fingerprint(pair[1])) for mid, pair in by_mistake.items()}
            for check, by_mistake in meta.get("verdicts", {}).items()
        },
        mistakes=[
            KnownMistake(m["id"], meta["exercise"], m["sentence"], m["fix"], m.get("hint", ""))
            for m in meta["mistakes"]
        ],
        shapes={name: shapes_records(doc) for name, doc in meta.get("shapes", {}).items()},
        keys=set(meta.get("keys", [])),
    )


class PackExpected:
    """The expected results of one exercise read from its pack (an
    :class:`~grader.student.engine.diagnosis.Expected`)."""

    live = False

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self.mistakes: list[KnownMistake] = list(pack.mistakes)

    @property
    def reference(self) -> Mapping[str, ScriptResult]:
        return self.pack.reference

    def variant(self, mistake_id: str, case: Case) -> ScriptResult:
        """The stored result of mistake ``mistake_id`` (or the second reference run) on ``case``."""
        table = self.pack.again if mistake_id == REFERENCE_AGAIN else self.pack.variants.get(mistake_id, {})
        if case.name not in table:
            raise NeedsReference(
                f"the case pack of {self.pack.exercise_id} has no result of {mistake_id!r} on"
                f" case {case.name!r}: rebuild it with grade release"
            )
        return table[case.name]

    def combination(self, ids: list[str]) -> str | None:
        """The combination's id when the pack holds its results (grader.course.packs stores the common pairs)."""
        key = combined_id(ids)
        return key if key in self.pack.variants else None

    def verdict(self, check: str, mistake_id: str, compute: Callable[[], tuple[bool, Any]]) -> tuple[bool, Any]:
        """The stored verdict of statistical check ``check`` on mistake ``mistake_id``'s variant."""
        stored = self.pack.verdicts.get(check, {})
        if mistake_id not in stored:
            raise NeedsReference(
                f"the case pack of {self.pack.exercise_id} has no verdict of check {check!r} on"
                f" {mistake_id!r}: rebuild it with grade release"
            )
        return stored[mistake_id]

    def live_check(self, name: str) -> Callable[..., Any]:
        """Packs hold data, never code: checks that need the reference's code are live_only."""
        raise NeedsReference(
            f"{self.pack.exercise_id}: check {name!r} needs the reference's code (hidden grading only)"
        )

    def public_twin(self) -> None:
        """A pack's cases are the public ones already: no twin."""
        return None


class PackSource:
    """The grading pipeline's source for a folder of case packs: public seeds, expected results from data."""

    live = False
    # A pack holds the reference's shapes, not its values: only a case whose run crashed is traced (:meth:`locate`).
    locates_crashes_only = True

    def __init__(self, folder: Path = DEFAULT_PACK_DIR) -> None:
        self.folder = Path(folder)
        self._packs: dict[str, Pack] = {}

    def pack(self, exercise_id: str) -> Pack:
        """The pack of ``exercise_id`` (loaded once), checked against this grader's check definition."""
        if exercise_id not in self._packs:
            from grader.student.engine.checks import CHECKS

            pack = load_pack(pack_path(self.folder, exercise_id))
            planned = [c.name for c in CHECKS[exercise_id].cases(pack.seed)]
            if pack.exercise_id != exercise_id or [c.name for c in pack.cases] != planned:
                raise SetupError(
                    f"the case pack of {exercise_id} does not match this grader's checks:"
                    " install the grader that came with it (pip install DIR/student)"
                )
            register_known(pack.mistakes)
            self._packs[exercise_id] = pack
        return self._packs[exercise_id]

    def prepare(self, exercise_id: str, student: str) -> Prepared:
        """The pack's public seed and cases (the same for every student) and its expected results."""
        pack = self.pack(exercise_id)
        return Prepared(pack.seed, pack.cases, PackExpected(pack))

    def locate(
        self,
        exercise_id: str,
        case: Case,
        student: ScriptResult,
        student_source: str,
        reference: ScriptResult | None = None,
    ) -> dict[str, Any] | None:
        """Where the student's traced run of ``case`` crashed, located from the pack's shapes of the reference's
        values (:func:`grader.student.engine.crash_origin.locate_crash`); None for a run that did not crash (where
        its values leave the reference's is found only where the reference runs: the course server) or a pack
        without shapes. A fault of the locator (the grader's) leaves the check without a location."""
        import ast

        records = self.pack(exercise_id).shapes.get(case.name)
        if student.error is None or student.error.get("where") == "trace" or records is None:
            return None
        try:
            return locate_crash(
                exercise_id.split(".", 1)[0],
                student,
                read(student),
                records,
                student_source.splitlines(),
                ast.parse(student_source),
                self.pack(exercise_id).keys,
            )
        except Exception:  # noqa: BLE001 - the grader's fault: no location, the verdict stands
            return None

    def notices(self, ids: list[str]) -> list[str]:
        """Which checks ran here (the public ones) and where the others run."""
        from grader.student.engine.checks import CHECKS

        hidden = []
        for exercise_id in ids:
            checks = CHECKS[exercise_id].checked_plan(self.pack(exercise_id).seed).checks
            names = [c.name for c in checks if c.live_only]
            if names:
                hidden.append(f"{exercise_id}: {', '.join(names)}")
        lines = [
            f"Ran the public checks: fixed seeds, expected results from case packs (no reference code here)."
            f" The hidden checks (your own seeds) run {HIDDEN_WHERE}."
        ]
        if hidden:
            lines.append("Checks that need the reference's code, run only there: " + "; ".join(hidden) + ".")
        return lines


__all__ = ["DEFAULT_PACK_DIR", "Pack", "PackExpected", "PackSource", "load_pack", "pack_path"]
