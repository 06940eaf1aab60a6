"""Reading a sandboxed child's results: checked before they are decoded, never trusted.

Size caps on the frame (:data:`MAX_DOCUMENT_BYTES`, ``Limits.results_bytes``), an ``.npz`` whose members are
stored (not compressed) and named as the worker names them, numeric arrays of bounded rank (:data:`MAX_NDIM`),
outputs the case's script declares, JSON parsed with its depth and size bounded. Every string from the child
is cleaned (:func:`grader.student.sanitize.clean_text`). Anything malformed is :class:`MalformedResults`,
which the runner (:mod:`grader.student.sandbox.runner`) turns into an ``error`` for that exercise.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import TYPE_CHECKING, Any

from grader.student.sanitize import clean_record, clean_text

if TYPE_CHECKING:
    from grader.student.engine.ops import Case, ScriptResult


class MalformedResults(Exception):
    """A child's result files are missing or not what the worker writes."""


MAX_DOCUMENT_BYTES = 4 << 20  # the results JSON of one exercise
MAX_NDIM = 8


def _check_error(error: Any) -> dict[str, str] | None:
    """A case error record from the results JSON, checked and cleaned; MalformedResults otherwise."""
    if error is None:
        return None
    if not isinstance(error, dict) or not all(isinstance(error.get(k, ""), str) for k in ("type", "message")):
        raise MalformedResults(f"bad error record {clean_text(repr(error), 200)}")
    return {clean_text(k, 100): clean_text(v, 20_000) for k, v in error.items() if isinstance(v, str)}


def declared_outputs(case: Case) -> set[str]:
    """The output names a case's script can record: every ``out`` field in its ops (kernel arguments too)."""
    names: set[str] = set()
    todo: list[Any] = list(case.script)
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            if "out" in item:
                names.add(str(item["out"]))
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return names


def _open_arrays(data: bytes, limit: int) -> zipfile.ZipFile:
    """The results .npz as a zip whose every member is stored (no decompression), within ``limit``."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise MalformedResults(f"unreadable arrays ({exc})") from None
    if len(members) > 100_000:
        raise MalformedResults("too many arrays")
    for member in members:
        if member.compress_type != zipfile.ZIP_STORED or member.file_size > limit:
            raise MalformedResults("the arrays are compressed or larger than the results limit")
    return archive


def decode_results(
    document_bytes: bytes, array_bytes: bytes, cases: list[Case], results_bytes: int
) -> tuple[dict[str, Any], dict[str, ScriptResult]]:
    """The worker's JSON document and one ScriptResult per case of ``cases``, validated; MalformedResults otherwise.

    ``results_bytes`` bounds each array member (``Limits.results_bytes``).
    """
    try:
        document = json.loads(document_bytes.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError, MemoryError) as exc:
        raise MalformedResults(f"no readable status ({type(exc).__name__})") from None
    if not isinstance(document, dict) or document.get("status") not in ("ok", "error"):
        raise MalformedResults("the status document is not the worker's")
    if document["status"] == "error":
        return clean_record(document), {}
    records = document.get("cases")
    expected = [case.name for case in cases]
    if not isinstance(records, list) or [c.get("name") if isinstance(c, dict) else None for c in records] != expected:
        raise MalformedResults("the cases in the results are not the ones sent")
    archive = _open_arrays(array_bytes, results_bytes)
    import numpy as np  # here, not at import: the CLI starts workers before it loads NumPy

    from grader.student.engine.ops import ScriptResult
    from grader.student.engine.trace import PREFIX as TRACE_PREFIX, is_traced

    out: dict[str, ScriptResult] = {}
    try:
        with np.load(io.BytesIO(array_bytes), allow_pickle=False) as npz:
            for case, record in zip(cases, records, strict=True):
                keys = record.get("outputs")
                if not isinstance(keys, dict):
                    raise MalformedResults("bad outputs record")
                allowed = declared_outputs(case)
                traced = is_traced(case)  # (a trace op records its values under keys of its own)
                outputs: dict[str, np.ndarray] = {}
                for name, key in keys.items():
                    recordable = name in allowed or (traced and name.startswith(TRACE_PREFIX))
                    if not recordable or not isinstance(key, str) or f"{key}.npy" not in archive.namelist():
                        raise MalformedResults(f"output {clean_text(name, 100)!r} is not one the case records")
                    array = np.array(npz[key])
                    if array.dtype.kind not in "biuf" or array.ndim > MAX_NDIM:
                        raise MalformedResults(f"output {name!r} is an array of {array.dtype} with {array.ndim} axes")
                    outputs[name] = array
                warnings = record.get("warnings") or []
                out[case.name] = ScriptResult(
                    outputs=outputs,
                    error=_check_error(record.get("error")),
                    warnings=[clean_text(w, 2000) for w in warnings[:100]] if isinstance(warnings, list) else [],
                )
    except MalformedResults:
        raise
    except Exception as exc:  # zip errors, missing keys, pickled arrays refused by allow_pickle=False
        raise MalformedResults(f"unreadable arrays ({type(exc).__name__}: {clean_text(exc, 200)})") from None
    return document, out
