"""The course text: Markdown chapters split into addressed sections, each with its checkpoint questions.

This module ships in the handout (``grade read``) and knows no answer: it only reads the chapters.

A chapter is one Markdown file ``text/<chapter>.md``; its name is the quiz chapter it goes with
(``normalization``), and ``kernels`` is a chapter without a quiz. Its structure:

- one ``# Title {#chapter}`` heading, then an introduction;
- sections, each opened by a level-two heading with a stable id, ``## BatchNorm backward
  {#batchnorm-backward}``; a section is addressed ``chapter.id`` (``normalization.batchnorm-backward``) and
  cited in prose, docstrings and reports as ``§normalization.batchnorm-backward``;
- at the end of a section, at most one checkpoint directive on a line of its own, naming the quiz questions
  of the chapter that check that section: ``<!-- checkpoint: bn-dgamma bn-dx-constant -->``;
- claims: ``<!-- claim: ID -->`` right after a piece of maths (``$...$`` or ``$$...$$``) marks it as a
  statement the test suite computes from the reference (tests/course/test_text_claims.py).

HTML comments are the directives' syntax so that a chapter also reads as plain Markdown anywhere (an
editor's preview, GitHub); no other comment is allowed in a chapter.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.student.quiz.concepts import concept_of, section_of_exercise

CHAPTER_HEADING = re.compile(r"# (?P<title>.+?)\s*\{#(?P<id>[a-z0-9-]+)\}\s*")  # (fullmatch: a whole line)
SECTION_HEADING = re.compile(r"## (?P<title>.+?)\s*\{#(?P<id>[a-z0-9-]+)\}\s*")
CHECKPOINT = re.compile(r"<!--\s*checkpoint:(?P<ids>[^>]*?)-->\s*")
CLAIM = re.compile(r"<!--\s*claim:\s*(?P<id>[a-z0-9-]+)\s*-->")
COMMENT = re.compile(r"<!--.*?-->", re.S)
# A citation of a section: §chapter.section (the chapter and section ids are lower case with hyphens).
CITATION = re.compile(r"§(?P<address>[a-z][a-z0-9-]*\.[a-z0-9-]+)")
PLACEHOLDER = "chapter.section"  # how the docs write the form of an address; not a citation
FENCE = re.compile(r"^(```|~~~)")


class TextError(ValueError):
    """A chapter that does not follow the structure above, or an address that names no section (one line)."""


@dataclass(frozen=True)
class Claim:
    """A marked claim: its id and the maths it follows (the LaTeX between the dollars)."""

    id: str
    latex: str


@dataclass
class Section:
    """One section: its chapter, id, title, Markdown body (directives removed), checkpoint question ids, claims."""

    chapter: str
    id: str
    title: str
    body: str
    checkpoint: tuple[str, ...] = ()
    claims: list[Claim] = field(default_factory=list)

    @property
    def address(self) -> str:
        """``chapter.section``, what ``grade read`` takes and ``§`` cites."""
        return f"{self.chapter}.{self.id}"


@dataclass
class Chapter:
    """One chapter file: its name (the file's stem), title, introduction (Markdown) and sections in order."""

    name: str
    title: str
    intro: str
    sections: list[Section]

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.id == section_id), None)


def _claims(markdown: str, where: str) -> list[Claim]:
    """Each claim marker of ``markdown`` with the maths just before it; TextError when no maths precedes one."""
    out = []
    for match in CLAIM.finditer(markdown):
        before = markdown[: match.start()].rstrip()
        maths = re.search(r"\$\$(?P<display>(?:(?!\$\$).)+)\$\$$|(?<!\$)\$(?P<inline>[^$]+)\$$", before, re.S)
        if maths is None:
            raise TextError(f"{where}: the claim '{match['id']}' does not follow a piece of maths ($...$ or $$...$$)")
        out.append(Claim(match["id"], " ".join((maths["display"] or maths["inline"]).split())))
    return out


def parse_chapter(markdown: str, name: str) -> Chapter:
    """Split a chapter's Markdown into its sections (see the module docstring); TextError on a broken structure."""
    lines = markdown.splitlines()
    if not lines or not CHAPTER_HEADING.fullmatch(lines[0]):
        raise TextError(f"{name}.md: the first line must be the chapter's heading, '# Title {{#{name}}}'")
    head = CHAPTER_HEADING.fullmatch(lines[0])
    assert head is not None
    if head["id"] != name:
        raise TextError(f"{name}.md: the heading's id is '{head['id']}', not the file's name '{name}'")
    parts: list[tuple[re.Match[str] | None, list[str]]] = [(None, [])]
    fenced = False
    for number, line in enumerate(lines[1:], start=2):
        fenced = fenced != bool(FENCE.match(line))
        heading = None if fenced else SECTION_HEADING.fullmatch(line)
        if heading:
            parts.append((heading, []))
        elif not fenced and line.startswith("## "):
            raise TextError(f"{name}.md line {number}: a section heading needs a stable id: '## Title {{#id}}'")
        elif not fenced and line.startswith("# "):
            raise TextError(f"{name}.md line {number}: a chapter has one '# ' heading, its first line")
        else:
            parts[-1][1].append(line)
    sections: list[Section] = []
    for heading, body in parts[1:]:
        assert heading is not None
        where = f"{name}.md, section {heading['id']}"
        if any(s.id == heading["id"] for s in sections):
            raise TextError(f"{where}: two sections have this id")
        checkpoint: tuple[str, ...] = ()
        kept = []
        for line in body:
            directive = CHECKPOINT.fullmatch(line)
            if directive:
                if checkpoint:
                    raise TextError(f"{where}: more than one checkpoint directive")
                checkpoint = tuple(directive["ids"].split())
                continue
            if checkpoint and line.strip():
                raise TextError(f"{where}: the checkpoint directive must end its section")
            kept.append(line)
        text = "\n".join(kept).strip("\n")
        claims = _claims(text, where)
        if "<!--" in CLAIM.sub("", text):
            raise TextError(f"{where}: the only comments a chapter may hold are checkpoint and claim directives")
        sections.append(Section(name, heading["id"], heading["title"], text, checkpoint, claims))
    intro = "\n".join(parts[0][1]).strip("\n")
    if "<!--" in intro:
        raise TextError(f"{name}.md: the introduction may hold no directive (checkpoints end sections)")
    return Chapter(name, head["title"], intro, sections)


def load_chapters(folder: Path | str) -> dict[str, Chapter]:
    """Every ``*.md`` chapter of ``folder`` (a README.md there is not a chapter), by name."""
    chapters = {}
    for path in sorted(Path(folder).glob("*.md")):
        if path.stem.lower() == "readme":
            continue
        chapters[path.stem] = parse_chapter(path.read_text(encoding="utf-8"), path.stem)
    return chapters


def find_section(chapters: dict[str, Chapter], address: str) -> Section:
    """The section at ``chapter.section`` (a leading § allowed); TextError naming the nearest address otherwise."""
    address = address.strip().lstrip("§")
    chapter_name, _, section_id = address.partition(".")
    chapter = chapters.get(chapter_name)
    section = chapter.section(section_id) if chapter else None
    if section is not None:
        return section
    known = [s.address for c in chapters.values() for s in c.sections]
    guess = difflib.get_close_matches(address, known, n=1, cutoff=0.5)
    hint = f"Did you mean '{guess[0]}'?" if guess else f"Chapters: {', '.join(chapters) or 'none found'}."
    raise TextError(f"'{address}' is not a section of the course text. {hint}")


def citations(text: str) -> list[str]:
    """The section addresses ``text`` cites (``§chapter.section``), in order."""
    found = (m["address"].rstrip(".-") for m in CITATION.finditer(text))
    return [address for address in found if address != PLACEHOLDER]


# --- plain text: the terminal's rendering, and what the leak audit reads -----------------------------

_SYMBOLS = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "varepsilon": "ε",
    "eta": "η",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "rho": "ρ",
    "sigma": "σ",
    "tau": "τ",
    "phi": "ϕ",
    "varphi": "φ",
    "psi": "ψ",
    "omega": "ω",
    "Phi": "Φ",
    "Sigma": "Σ",
    "Delta": "Δ",
    "Gamma": "Γ",
    "Omega": "Ω",
    "cdot": "·",
    "times": "×",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "approx": "≈",
    "in": "∈",
    "to": "→",
    "mapsto": "↦",
    "leftarrow": "←",
    "rightarrow": "→",
    "infty": "∞",
    "sum": "Σ",
    "prod": "Π",
    "partial": "∂",
    "nabla": "∇",
    "odot": "⊙",
    "pm": "±",
    "dots": "…",
    "ldots": "…",
    "cdots": "⋯",
    "top": "ᵀ",
    "lVert": "‖",
    "rVert": "‖",
    "mid": "|",
    "forall": "∀",
    "exists": "∃",
    "log": "log",
    "exp": "exp",
    "max": "max",
    "min": "min",
    "tanh": "tanh",
    "sqrt": "√",
    "quad": "  ",
    "qquad": "    ",
    "blacksquare": "∎",
    "implies": "⟹",
    "lvert": "|",
    "rvert": "|",
}
_BLACKBOARD = {"R": "ℝ", "N": "ℕ", "Z": "ℤ", "E": "𝔼"}
_ACCENTS = {"hat": "\u0302", "tilde": "\u0303", "bar": "\u0304"}
_SPACING = re.compile(r"\\[,;:! ]|\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![A-Za-z])")


def _group(text: str, start: int) -> tuple[str, int]:
    """The argument at ``start``: a {braced group} (its inside) or one character; and the index after it."""
    while start < len(text) and text[start] == " ":
        start += 1
    if start >= len(text):
        return "", start
    if text[start] != "{":
        if text[start] == "\\":
            name = re.match(r"\\[A-Za-z]+", text[start:])
            if name:
                return name.group(0), start + len(name.group(0))
        return text[start], start + 1
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1 : i], i + 1
    return text[start + 1 :], len(text)


def _wrap(piece: str) -> str:
    """``piece`` in brackets unless it is one number or one name."""
    return piece if re.fullmatch(r"\d+(?:\.\d+)?|[^\W\d_]|[A-Za-z]+|√\([^()]*\)", piece) else f"({piece})"


def latex_to_text(latex: str) -> str:
    """A reading of a piece of LaTeX in plain Unicode: what a student sees of a formula (\\frac{a}{b} ->
    (a)/(b), \\sqrt{x} -> √(x), Greek letters, x^{2} -> x^(2)). Not a typesetter: a faithful transcription."""
    latex = re.sub(r"(?<=[\w}])\\operatorname", r" \\operatorname", latex)  # n_\text{in}\operatorname{Var}: two words
    latex = re.sub(r"\\(?:text|mathrm|operatorname|mathit)\{([^{}]*)\}", r"\1", latex)  # n_\text{in} -> n_in
    text = re.sub(
        r"\\begin\{[bp]?matrix\}(.*?)\\end\{[bp]?matrix\}",
        lambda m: "[" + "; ".join(r.replace("&", ",") for r in m.group(1).split("\\\\")) + "]",
        latex,
        flags=re.S,
    )
    text = re.sub(
        r"\\begin\{cases\}(.*?)\\end\{cases\}",
        lambda m: "(" + "; ".join(r.replace("&", " if ").strip() for r in m.group(1).split("\\\\")) + ")",
        text,
        flags=re.S,
    )
    text = _SPACING.sub(lambda m: " " if m.group(0) in ("\\,", "\\;", "\\:", "\\ ") else "", text)
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            match = re.match(r"\\([A-Za-z]+)", text[i:])
            if not match:
                out.append(text[i + 1 : i + 2])
                i += 2
                continue
            name = match.group(1)
            i += len(match.group(0))
            if name in ("frac", "tfrac", "dfrac"):
                top, i = _group(text, i)
                bottom, i = _group(text, i)
                out.append(f"{_wrap(latex_to_text(top))}/{_wrap(latex_to_text(bottom))}")
                if text[i : i + 1].isalpha() or text[i : i + 1] == "\\":
                    out.append(" ")
            elif name == "sqrt":
                inside, i = _group(text, i)
                out.append(f"√({latex_to_text(inside)})")
            elif name in ("operatorname", "mathrm", "text", "mathit", "textbf", "mathbf", "boldsymbol"):
                inside, i = _group(text, i)
                out.append(latex_to_text(inside) if name != "text" else inside)
            elif name == "mathbb":
                inside, i = _group(text, i)
                out.append(_BLACKBOARD.get(inside, inside))
            elif name == "mathcal":
                inside, i = _group(text, i)
                out.append(inside)
            elif name in _ACCENTS:
                inside, i = _group(text, i)
                inside = latex_to_text(inside)
                out.append(inside + _ACCENTS[name] if len(inside) == 1 else f"{inside}{_ACCENTS[name]}")
            else:
                out.append(_SYMBOLS.get(name, name))
        elif char in "^_":
            inside, i = _group(text, i + 1)
            inside = latex_to_text(inside)
            out.append(char + (inside if len(inside) == 1 else f"({inside})"))
        elif char in "{}":
            i += 1
        elif char == "&":
            out.append(" ")
            i += 1
        else:
            out.append(char)
            i += 1
    return re.sub(r"[ \t]+", " ", "".join(out)).replace("∂ ", "∂").strip()


_MATHS = re.compile(r"\$\$(?P<display>.+?)\$\$|(?<![\\$])\$(?P<inline>[^$\n]+?)\$", re.S)


def markdown_to_text(markdown: str) -> str:
    """A section's Markdown as plain text for the terminal (and the leak audit): directives removed, maths
    transcribed (:func:`latex_to_text`), emphasis and code marks dropped, tables and lists kept as lines."""
    text = COMMENT.sub("", markdown)
    text = _MATHS.sub(
        lambda m: (
            ("\n    " + latex_to_text(m["display"]) + "\n") if m["display"] is not None else latex_to_text(m["inline"])
        ),
        text,
    )
    text = re.sub(r"\*\*(.+?)\*\*|\*(.+?)\*", lambda m: m.group(1) or m.group(2), text, flags=re.S)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    text = re.sub(r"^\|?[-| :]+\|?$\n", "", text, flags=re.M)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def section_text(section: Section, title: str = "") -> str:
    """What ``grade read`` prints: the section's heading, its text, and how to answer its checkpoint."""
    lines = [f"{section.title}  (§{section.address}{', ' + title if title else ''})", ""]
    lines.append(markdown_to_text(section.body))
    if section.checkpoint:
        lines.append(
            f"Checkpoint: {', '.join(section.checkpoint)}. Answer them with `grade quiz {section.chapter}`"
            " (each question shows its id)."
        )
    return "\n".join(lines).rstrip() + "\n"


def checkpoint_sections(chapters: Mapping[str, Chapter]) -> dict[str, str]:
    """Each checkpoint question's id -> the address of the section whose checkpoint holds it."""
    return {
        qid: section.address
        for chapter in chapters.values()
        for section in chapter.sections
        for qid in section.checkpoint
    }


# --- where each exercise is explained: the reports' links back to the text ----------------------------


def mistake_section(mistake_id: str) -> str | None:
    """The address of the section a known mistake sends a student to: its concept's main section (one table,
    :func:`grader.student.quiz.concepts.concept_of`: the mistake id's prefix -> its concept -> the concept's
    sections), or None (a generic family or an unknown id: the exercise's own section stands)."""
    if mistake_id.startswith("generic-"):
        return None
    concept = concept_of(mistake_id)
    return concept.sections[0] if concept is not None and concept.sections else None


def section_for(exercise_id: str, mistakes: Iterable[str] = ()) -> str | None:
    """The section a failing exercise sends a student to: that of the first named known mistake (``mistakes``,
    in the report's order) that has one, else the exercise's own (its concept's:
    :func:`grader.student.quiz.concepts.section_of_exercise`); or None."""
    for mistake_id in mistakes:
        address = mistake_section(mistake_id)
        if address:
            return address
    return section_of_exercise(exercise_id)


def read_line(exercise_id: str, mistakes: Iterable[str] = ()) -> str | None:
    """The report's line sending a student to the section of a failing exercise (:func:`section_for`), or None."""
    address = section_for(exercise_id, mistakes)
    return f"Read §{address} (grade read {address})." if address else None


def section_href(address: str, prefix: str = "../text/") -> str:
    """The link to a section's page: ``{prefix}{chapter}.html#{section}`` (a report page sits in ``.grade/``
    beside the handout's ``text/``)."""
    chapter, _, section = address.partition(".")
    return f"{prefix}{chapter}.html#{section}"
