"""``grade similarity``: which students' latest uploads share unusually much code, topic by topic.

What a match means, and what it does not. The detector (copydetect: winnowed
fingerprints of the token stream, names and layout normalised away, so
renaming variables or reformatting does not hide shared code) measures how
much of each file is also in the other. The released stubs are boilerplate:
their fingerprints (the stub of each topic at every scaffolding level) are
removed first, so the starter code everyone was given counts for nothing. A
pair above the threshold is a reason for a person to *look* at the two files
side by side, never a finding: small exercises have few ways to be written,
students may work together where the course allows it, and code from the
course text is shared by everyone. Nothing here is shown to students or
changes a score.

For each CPU topic (``<topic>.py``), the latest upload of every student that
holds that file (the course server's ``job_files``) is compared with every
other student's; a pair is listed when either file's share of matched tokens
reaches ``threshold`` (default THRESHOLD, measured by bench/similarity.py on
the generated class with planted copies).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.course.scaffold import render
from grader.student.engine import catalogue
from grader.student.errors import GraderError
from grader.student.engine.scaffolding import LEVELS
from grader.student.store import Store, jobs

NOISE_TOKENS = 25  # copydetect's noise threshold k: shorter matches are never counted
GUARANTEE_TOKENS = 30  # matches this long are always found (the winnowing window is the difference + 1)
THRESHOLD = 0.6  # share of a file's tokens matched in the other (see bench/similarity.py)
STUBS = Path(__file__).resolve().parents[2] / "exercises"

MEANING = (
    "A match means that the two files share long runs of the same code after names, comments and layout "
    "are normalised and the released stubs are removed. It is a reason to read the two files side by side, "
    "not a finding of misconduct: short exercises have few ways to be written, collaboration may be "
    "allowed, and the course text gives formulas everyone uses. Nothing here changes a score or is "
    "shown to students."
)


class SimilarityError(GraderError):
    """Similarity cannot be computed (one line: what was wrong, what to do)."""


@dataclass
class Pair:
    """Two students' files of one topic and how much of each is matched in the other."""

    topic: str
    a: str
    b: str
    share_a: float  # matched tokens / tokens of a's file (0..1)
    share_b: float
    job_a: int
    job_b: int
    slices_a: list[tuple[int, int]] = field(default_factory=list)  # matched character ranges of a's text
    slices_b: list[tuple[int, int]] = field(default_factory=list)

    @property
    def share(self) -> float:
        return max(self.share_a, self.share_b)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "a": self.a,
            "b": self.b,
            "share_a": round(self.share_a, 4),
            "share_b": round(self.share_b, 4),
            "job_a": self.job_a,
            "job_b": self.job_b,
        }


def _detector() -> Any:
    """The copydetect module (SimilarityError, one line, when the extra is not installed)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # copydetect's optional imports may warn
            import copydetect
    except ImportError as exc:
        raise SimilarityError("similarity needs copydetect: pip install 'normgrade[similarity]'") from exc
    return copydetect


def fingerprint(text: str, boilerplate: Any = None, name: str = "code.py") -> Any:
    """copydetect's fingerprint of Python source (tokens normalised, stub fingerprints removed)."""
    copydetect = _detector()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return copydetect.CodeFingerprint(
            name, NOISE_TOKENS, GUARANTEE_TOKENS - NOISE_TOKENS + 1, boilerplate=boilerplate, fp=io.StringIO(text)
        )


def stub_boilerplate(topic: str, stubs: Path = STUBS) -> Any:
    """The fingerprints of a topic's released stub at every scaffolding level (empty when there is no stub)."""
    import numpy as np

    path = stubs / f"{topic}.py"
    if not path.is_file():
        return np.array([], dtype=np.int64)
    text = path.read_text(encoding="utf-8")
    hashes = [fingerprint(render(text, level, str(path))).hashes for level in LEVELS]
    hashes.append(fingerprint(text).hashes)
    return np.unique(np.concatenate([np.array(sorted(h), dtype=np.int64) for h in hashes]))


def compare(topic: str, files: dict[str, tuple[int, str]], boilerplate: Any, threshold: float) -> list[Pair]:
    """Every pair of ``files`` (student -> (job id, text)) whose larger share reaches ``threshold``."""
    copydetect = _detector()
    prints = {}
    for student, (_, text) in files.items():
        try:
            prints[student] = fingerprint(text, boilerplate)
        except Exception:  # noqa: BLE001 (text the lexer cannot read: nothing to compare, not a match)
            continue
    names = sorted(prints)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            _, (share_a, share_b), (slices_a, slices_b) = copydetect.compare_files(prints[a], prints[b])
            if max(share_a, share_b) >= threshold:
                pairs.append(
                    Pair(
                        topic,
                        a,
                        b,
                        float(share_a),
                        float(share_b),
                        files[a][0],
                        files[b][0],
                        _ranges(slices_a),
                        _ranges(slices_b),
                    )
                )
    return sorted(pairs, key=lambda p: -p.share)


def _ranges(slices: Any) -> list[tuple[int, int]]:
    if len(slices) == 0 or len(slices[0]) == 0:
        return []
    return [(int(s), int(e)) for s, e in zip(slices[0], slices[1], strict=True)]


def latest_files(store: Store, topic: str) -> dict[str, tuple[int, str]]:
    """student -> (job id, text of ``<topic>.py``) of each student's latest upload holding that file."""
    rows = jobs.uploads_of_file(store.db, f"{topic}.py")
    return {r["student"]: (int(r["id"]), bytes(r["content"]).decode("utf-8", "replace")) for r in rows}


def find_pairs(
    store: Store, topics: list[str] | None = None, threshold: float = THRESHOLD, stubs: Path = STUBS
) -> list[Pair]:
    """The pairs above ``threshold`` over the CPU topics (or those named), most similar first."""
    if not 0 < threshold <= 1:
        raise SimilarityError(f"the threshold must be a share from 0 to 1 (got {threshold:g})")
    chosen = topics or catalogue.CPU_TOPICS
    unknown = [t for t in chosen if t not in catalogue.CPU_TOPICS]
    if unknown:
        raise SimilarityError(f"'{unknown[0]}' is not a Python topic: use {', '.join(catalogue.CPU_TOPICS)}")
    pairs: list[Pair] = []
    for topic in chosen:
        files = latest_files(store, topic)
        if len(files) > 1:
            pairs += compare(topic, files, stub_boilerplate(topic, stubs), threshold)
    return sorted(pairs, key=lambda p: (-p.share, p.topic, p.a, p.b))


def segments(text: str, ranges: list[tuple[int, int]]) -> Iterator[tuple[str, bool]]:
    """The text cut into (piece, matched) for a side-by-side view (the template escapes each piece)."""
    at = 0
    for start, end in sorted(ranges):
        start, end = max(start, at), min(end, len(text))
        if start >= end:
            continue
        if start > at:
            yield text[at:start], False
        yield text[start:end], True
        at = end
    if at < len(text):
        yield text[at:], False


def format_text(pairs: list[Pair], threshold: float) -> str:
    """The pairs as lines, with what a match means."""
    lines = [
        f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''} at or above {threshold:.0%} similar "
        "(latest upload per student and topic; released stubs removed)."
    ]
    for p in pairs:
        lines.append(
            f"  {p.topic:<14} {p.a} ({p.share_a:.0%} of submission {p.job_a})  ~  "
            f"{p.b} ({p.share_b:.0%} of submission {p.job_b})"
        )
    lines.append(MEANING)
    return "\n".join(lines)
