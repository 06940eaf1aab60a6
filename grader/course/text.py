"""The course text on the instructor's side: the chapters in ``text/`` with the quiz bank, the citations, the pages.

The chapters are parsed by :mod:`grader.student.coursetext` (which ships in the handout for ``grade read``).
This module adds what needs the rest of the repository:

- :func:`structure_problems`: the text and the quiz bank are one structure. Each chapter with a quiz bank
  (``quizzes/source/<chapter>.toml``) places every question of that bank in exactly one section's checkpoint,
  and a checkpoint names only questions of its chapter's bank; a chapter without a bank (``kernels``) has no
  checkpoint, and every bank has its chapter.
- :func:`citations` and :func:`unresolved`: every ``§chapter.section`` that the stubs, the mistakes'
  messages and hints, the student side's messages, ERRATA (``quizzes/errata.md``), the quiz sources and the
  text itself cite, and those that name no section.
- :func:`render_chapter` and :func:`build_pages`: the static HTML pages of the text (one per chapter, a
  table of contents, each section anchored by its id), the maths typeset in the browser by the KaTeX files
  bundled from npm (``text/package.json``; never a CDN): :data:`KATEX_FILES` are copied beside the pages.
"""

from __future__ import annotations

from typing import Any

import html
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from grader.student.coursetext import COMMENT, Chapter, Section, citations as cited, load_chapters

ROOT = Path(__file__).resolve().parents[2]
TEXT_DIR = ROOT / "text"
KATEX_DIR = TEXT_DIR / "node_modules" / "katex" / "dist"
# What the pages need of the KaTeX package: the script, its style sheet and the fonts the style sheet names.
KATEX_FILES = ("katex.min.js", "katex.min.css", "fonts")
ASSETS = "assets"  # the folder beside the pages: KaTeX's files and the text's own script and style


class TextBuildError(RuntimeError):
    """The pages cannot be built (one line: what is missing and what to do)."""


def load(folder: Path = TEXT_DIR) -> dict[str, Chapter]:
    """The chapters of the course text."""
    return load_chapters(folder)


def structure_problems(chapters: Mapping[str, Chapter], banks: Mapping[str, Iterable[str]]) -> list[str]:
    """What breaks "the text and the quiz bank are one structure" (see the module docstring); ``banks``: each
    quiz chapter's question ids, in the bank's order. Empty when the two agree."""
    problems = []
    for name, chapter in chapters.items():
        placed: dict[str, list[str]] = {}
        for section in chapter.sections:
            for qid in section.checkpoint:
                placed.setdefault(qid, []).append(section.address)
        bank = list(banks.get(name, ()))
        if name not in banks:
            problems += [
                f"{where}: checkpoint question '{qid}' but chapter '{name}' has no quiz bank"
                for qid, places in placed.items()
                for where in places
            ]
            continue
        for qid, places in placed.items():
            if qid not in bank:
                problems.append(f"{places[0]}: checkpoint question '{qid}' is not in quizzes/source/{name}.toml")
            elif len(places) > 1:
                problems.append(
                    f"{name}: question '{qid}' is the checkpoint of {len(places)} sections "
                    f"({', '.join(places)}); it checks one"
                )
        problems += [
            f"{name}: question '{qid}' of quizzes/source/{name}.toml is in no section's checkpoint"
            for qid in bank
            if qid not in placed
        ]
    problems += [f"quiz chapter '{name}' has no chapter in text/ ({name}.md)" for name in banks if name not in chapters]
    return problems


def quiz_banks() -> dict[str, list[str]]:
    """Each quiz chapter's question ids, from the authors' sources."""
    from grader import quiz as quiz_lib

    return {
        s.chapter: [q.id for q in s.questions]
        for s in (quiz_lib.load_source(p) for p in sorted((ROOT / "quizzes" / "source").glob("*.toml")))
    }


# --- citations ------------------------------------------------------------------------------------

# The files whose text may cite the course text: what a student reads (stubs, messages, hints, ERRATA, quiz
# explanations), the text itself, and the docs.
CITING = (
    "exercises/**/*.py",
    "exercises/kernels/*.cl",
    "grader/mistakes/*.py",
    "grader/student/**/*.py",
    "grader/quiz/*.py",
    "grader/course/*.py",
    "grader/templates/*.j2",
    "quizzes/errata.md",
    "quizzes/source/*.toml",
    "text/*.md",
    "docs/*.md",
    "README.md",
    "notebooks/*.ipynb",
)


@dataclass(frozen=True)
class Citation:
    """One ``§chapter.section`` in a file (its path relative to the repository and line)."""

    path: str
    line: int
    address: str


def citations(root: Path = ROOT) -> Iterator[Citation]:
    """Every citation of a section in the files of :data:`CITING`."""
    seen: set[Path] = set()
    for pattern in CITING:
        for path in sorted(root.glob(pattern)):
            if path in seen or "__pycache__" in path.parts:
                continue
            seen.add(path)
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                for address in cited(line):
                    yield Citation(path.relative_to(root).as_posix(), number, address)


def unresolved(chapters: Mapping[str, Chapter], found: Iterable[Citation]) -> list[Citation]:
    """The citations that name no section."""
    known = {s.address for c in chapters.values() for s in c.sections}
    return [c for c in found if c.address not in known]


# What a student reads as teaching (stubs, kernels, the mistakes' messages and hints, the reports, ERRATA, the
# quiz sources, the text): a claim there cites its section, never "the course text says" of a text a student
# cannot open, nor an ERRATA item by its number.
TEACHING = (
    "exercises/**/*.py",
    "exercises/kernels/*.cl",
    "grader/mistakes/*.py",
    "grader/student/feedback/*.py",
    "grader/student/engine/**/*.py",
    "quizzes/errata.md",
    "quizzes/source/*.toml",
    "text/*.md",
    "notebooks/*.ipynb",
)
VAGUE = re.compile(
    r"\b(?:course|source) (?:text|material|chapter|notes?|code)s? (?:says?|writes?|gives?|rounds?|states?|claims?|"
    r"calls?|uses?)\b"
    r"|\bthe chapter (?:says|writes|calls|gives|rounds|states|claims|uses)\b"
    r"|\b(?:given|stated|written|shown) in the (?:course text|course material|source|chapter|notes|lecture)\b"
    r"|\b(?:the|our|this) (?:source|course) (?:material|code)\b"
    r"|\bERRATA(?:\.md)?,? (?:item|entry) \d+",
    re.IGNORECASE,
)


def vague_citations(root: Path = ROOT) -> list[Citation]:
    """Every phrase of :data:`VAGUE` in the files of :data:`TEACHING` (``address``: the phrase): a claim that
    points at "the course text" or an ERRATA number instead of citing its section (``§chapter.section``)."""
    found = []
    for path in sorted({p for pattern in TEACHING for p in root.glob(pattern) if "__pycache__" not in p.parts}):
        text = path.read_text(encoding="utf-8")
        for match in VAGUE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Citation(path.relative_to(root).as_posix(), line, match.group()))
    return found


# --- the pages ------------------------------------------------------------------------------------


def _markdown() -> Any:
    """The Markdown renderer: CommonMark with tables, maths left as TeX for KaTeX (markdown-it-py)."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    def maths(content: str, _options: dict[str, Any]) -> str:
        return html.escape(content.strip())  # inside the plugin's <span class="math inline"> / <div class="math block">

    md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    return md.use(dollarmath_plugin, allow_space=True, allow_digits=False, double_inline=True, renderer=maths)


def render_markdown(markdown: str) -> str:
    """A piece of the text as HTML (directives removed); section citations become links to their pages."""
    body = _markdown().render(COMMENT.sub("", markdown))
    return link_citations(body, "")


def section_href(address: str, prefix: str = "") -> str:
    """Where a section's page and anchor are: ``{prefix}{chapter}.html#{section}``."""
    chapter, _, section = address.partition(".")
    return f"{prefix}{chapter}.html#{section}"


def link_citations(body: str, prefix: str) -> str:
    """``§chapter.section`` in a piece of HTML as a link to the section's page."""
    return re.sub(
        r"§([a-z0-9-]+\.[a-z0-9-]+[a-z0-9])",
        lambda m: f'<a href="{section_href(m.group(1), prefix)}">§{m.group(1)}</a>',
        body,
    )


@dataclass(frozen=True)
class PagePractice:
    """A checkpoint question's practice instance as a handout page judges it offline: the practice prompt (numbers
    no graded student is drawn), the interval of right answers (``grader.student.quiz.answers.numeric_window``
    of the practice answer, a practice answer and never a graded one) and the explanation a right answer opens."""

    prompt: str
    low: float
    high: float
    explanation: str


def practice_form(qid: str, practice: PagePractice) -> str:
    """The in-page practice of one question: its practice prompt, an answer field and a Check button, judged by
    ``assets/practice.js`` against ``data-low``/``data-high``; the explanation is shown once the answer is right."""
    esc = html.escape
    return (
        f'<form class="practice" data-question="{esc(qid)}" data-low="{practice.low!r}" '
        f'data-high="{practice.high!r}"><p class="practice-prompt">Practice: {esc(practice.prompt)}</p>'
        f'<label for="pa-{esc(qid)}">Your answer (a number)</label> '
        f'<input id="pa-{esc(qid)}" name="answer" type="text" inputmode="decimal" autocomplete="off" '
        f'spellcheck="false"> <button type="submit">Check</button>'
        f'<p class="feedback" role="status" aria-live="polite"></p>'
        f'<div class="explanation" hidden>{link_citations(esc(practice.explanation), "")}</div></form>'
    )


def checkpoint_html(
    section: Section,
    questions: Mapping[str, str],
    quiz_href: str | None,
    practice: Mapping[str, PagePractice] | None = None,
) -> str:
    """The checkpoint box of a section: its questions (id and prompt) and where to answer them: with ``quiz_href``
    (the student's quiz page on the server) each question links to its form there, ``?section=<id>`` bringing the
    student back to this section; without, ``grade quiz`` (the handout), and each question of ``practice`` (one
    with practice numbers) is answered in the page too (:func:`practice_form`)."""
    if not section.checkpoint:
        return ""
    practice = practice or {}

    def item(qid: str) -> str:
        prompt = html.escape(questions.get(qid, ""))
        if quiz_href:  # the quiz page, at this question, with a way back to this section
            prompt = (
                f'<a href="{html.escape(quiz_href)}?section={section.id}#q-{html.escape(qid)}">{prompt or "answer"}</a>'
            )
        if qid in practice and not quiz_href:  # its practice prompt stands for the prompt with numbers left out
            return f"<li><code>{html.escape(qid)}</code>{practice_form(qid, practice[qid])}</li>"
        return f"<li><code>{html.escape(qid)}</code> {prompt}</li>"

    items = "".join(item(qid) for qid in section.checkpoint)
    where = (
        f'<a href="{html.escape(quiz_href)}?section={section.id}">Answer them on your quiz page</a>'
        if quiz_href
        else f"Answer them with <code>grade quiz {html.escape(section.chapter)}</code> (offline: practice)"
    )
    if not quiz_href and any(qid in practice for qid in section.checkpoint):
        where += (
            "; a question with practice numbers is checked here too (nothing is recorded), the others only "
            "where your course grades quizzes"
        )
    return (
        f'<aside class="checkpoint" aria-labelledby="cp-{section.id}"><h3 id="cp-{section.id}">Checkpoint</h3>'
        f"<ol>{items}</ol><p>{where}.</p></aside>"
    )


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{assets}/katex.min.css">
<link rel="stylesheet" href="{assets}/text.css">
<script defer src="{assets}/katex.min.js"></script>
<script defer src="{assets}/render.js"></script>
<script defer src="{assets}/practice.js"></script>
</head>
<body>
<header><nav aria-label="Chapters"><ul>{chapters}</ul></nav></header>
<main>
<h1 id="top">{title}</h1>
<nav aria-label="Sections of this chapter" class="toc"><h2>Sections</h2><ol>{toc}</ol></nav>
{intro}
{sections}
</main>
</body>
</html>
"""

RENDER_JS = """// Typesets every .math element of the page with KaTeX (bundled beside the pages; nothing is fetched
// from elsewhere). The output is HTML for the eye and MathML for screen readers (htmlAndMathml).
// A display formula wider than the page scrolls in its own box; such a box takes the keyboard focus, so that
// it can be scrolled without a mouse (WCAG 2.1.1).
document.querySelectorAll("span.math.inline, div.math.block").forEach(function (el) {
  katex.render(el.textContent, el, {displayMode: el.classList.contains("block"), output: "htmlAndMathml",
                                    throwOnError: false});
  if (el.classList.contains("block") && el.scrollWidth > el.clientWidth) {
    el.tabIndex = 0;
    el.setAttribute("role", "group");
    el.setAttribute("aria-label", "formula, scrolls sideways");
  }
});
"""

PRACTICE_JS = r"""// Judges the handout's practice questions in the page, offline: each <form class="practice"> holds the interval
// of right answers to its practice numbers (data-low, data-high: the rule of `grade quiz`, computed by the
// release); numbers no graded student is drawn, so nothing here is a graded answer. Nothing is recorded or sent.
function readNumber(text) {
  var s = text.trim().replace(/[\u2212\u2013\u2014]/g, "-").replace(/\s+/g, "");
  var plain = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
  var parts = s.split("/");
  if (parts.length === 2 && plain.test(parts[0]) && plain.test(parts[1]) && Number(parts[1]) !== 0) {
    return Number(parts[0]) / Number(parts[1]);
  }
  return plain.test(s) ? Number(s) : null;
}
document.querySelectorAll("form.practice").forEach(function (form) {
  var input = form.querySelector("input"), feedback = form.querySelector(".feedback");
  var explanation = form.querySelector(".explanation");
  var low = Number(form.dataset.low), high = Number(form.dataset.high);
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var value = readNumber(input.value);
    form.classList.remove("right", "wrong");
    if (value === null) {
      feedback.textContent = "Write a number, such as 0.4629, -1.5e-3 or 5/3 (grade quiz also reads sqrt(2/256)).";
      input.setAttribute("aria-invalid", "true");
      return;
    }
    input.removeAttribute("aria-invalid");
    if (value >= low && value <= high) {
      form.classList.add("right");
      feedback.textContent = "Right (practice numbers; nothing is recorded).";
      explanation.hidden = false;
    } else {
      form.classList.add("wrong");
      feedback.textContent = "Not this one: re-read the section and try again.";
      explanation.hidden = true;
    }
  });
});
"""

TEXT_CSS = """body { font-family: system-ui, sans-serif; line-height: 1.55; color: #1a1a1a; background: #fff;
  margin: 0; }
header nav ul { display: flex; flex-wrap: wrap; gap: 0.25rem 1rem; list-style: none; margin: 0; padding: 0.75rem 1rem;
  background: #f0f2f5; }
header a[aria-current] { font-weight: bold; }
main { max-width: 46rem; margin: 0 auto; padding: 1rem; }
a { color: #0645ad; }
.toc ol { padding-left: 1.5rem; }
section { margin-top: 2rem; }
div.math.block { overflow-x: auto; overflow-y: hidden; margin: 1rem 0; }\ndiv.math.block:focus { outline: 2px solid #0645ad; }
table { border-collapse: collapse; margin: 1rem 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #999; padding: 0.3rem 0.6rem; text-align: left; }
code { background: #f3f3f3; padding: 0 0.2rem; border-radius: 3px; }
.checkpoint { border: 2px solid #2a6a2a; border-radius: 6px; padding: 0.5rem 1rem; margin: 1.5rem 0;
  background: #f4faf4; }
.checkpoint h3 { margin: 0.25rem 0; }
.address { font-size: 0.85rem; color: #444; font-weight: normal; }
.checkpoint li { margin: 0.5rem 0; }
form.practice { margin: 0.4rem 0 0.6rem; padding: 0.5rem 0.75rem; border-left: 4px solid #767676; background: #fff; }
form.practice.right { border-left-color: #2a6a2a; }
form.practice.wrong { border-left-color: #a4262c; }
form.practice p { margin: 0.25rem 0; }
form.practice input { font: inherit; width: 10rem; max-width: 100%; padding: 0.2rem 0.4rem; border: 1px solid #555; }
form.practice button { font: inherit; padding: 0.2rem 0.8rem; min-height: 24px; }
.feedback:empty { display: none; }
.explanation { margin-top: 0.4rem; }
"""


def render_chapter(
    chapter: Chapter,
    chapters: Iterable[str],
    questions: Mapping[str, str] | None = None,
    quiz_href: str | None = None,
    assets: str = ASSETS,
    practice: Mapping[str, PagePractice] | None = None,
) -> str:
    """One chapter's page: the chapters' menu, a table of contents, the introduction, and each section under
    an ``<section id=...>`` with its checkpoint box (``questions``: id -> prompt; ``practice``: the questions
    answered in the page)."""
    esc = html.escape
    toc = "".join(f'<li><a href="#{s.id}">{esc(s.title)}</a></li>' for s in chapter.sections)
    return PAGE.format(
        title=esc(chapter.title),
        assets=assets,
        chapters=chapter_menu(chapter.name, chapters),
        toc=toc,
        intro=render_markdown(chapter.intro),
        sections=sections_html(chapter, questions or {}, quiz_href, practice),
    )


def chapter_menu(current: str, chapters: Iterable[str]) -> str:
    """The chapters' menu (``<li>`` items, ``<chapter>.html`` each), the ``current`` one marked."""
    mark = ' aria-current="page"'
    return "".join(
        f'<li><a href="{html.escape(name)}.html"{mark if name == current else ""}>{html.escape(name)}</a></li>'
        for name in chapters
    )


def sections_html(
    chapter: Chapter,
    questions: Mapping[str, str],
    quiz_href: str | None,
    practice: Mapping[str, PagePractice] | None = None,
) -> str:
    """Each section of a chapter under an ``<section id=...>``, its address shown, its checkpoint box last."""
    return "".join(
        f'<section id="{s.id}" aria-labelledby="h-{s.id}"><h2 id="h-{s.id}">{html.escape(s.title)} '
        f'<span class="address">§{html.escape(s.address)}</span></h2>\n{render_markdown(s.body)}'
        f"{checkpoint_html(s, questions, quiz_href, practice)}</section>\n"
        for s in chapter.sections
    )


def copy_assets(target: Path, katex_dir: Path = KATEX_DIR) -> None:
    """KaTeX's files (from the npm package) and the text's script and style into ``target``; TextBuildError
    when the package is not installed."""
    if not (katex_dir / "katex.min.js").is_file():
        raise TextBuildError(f"KaTeX is not installed in {katex_dir.parent}: run `make text-deps` (npm ci in text/)")
    target.mkdir(parents=True, exist_ok=True)
    for name in KATEX_FILES:
        source = katex_dir / name
        if source.is_dir():
            shutil.copytree(source, target / name, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target / name)
    (target / "render.js").write_text(RENDER_JS, encoding="utf-8")
    (target / "practice.js").write_text(PRACTICE_JS, encoding="utf-8")
    (target / "text.css").write_text(TEXT_CSS, encoding="utf-8")


def build_pages(
    out: Path,
    chapters: Mapping[str, Chapter] | None = None,
    questions: Mapping[str, str] | None = None,
    katex_dir: Path = KATEX_DIR,
    practice: Mapping[str, PagePractice] | None = None,
) -> list[Path]:
    """Write the text's pages into ``out`` (``<chapter>.html`` each, ``index.html``, and ``assets/``); the pages.
    ``practice``: the checkpoint questions answered in the page (question id -> its practice instance)."""
    chapters = dict(chapters if chapters is not None else load())
    copy_assets(out / ASSETS, katex_dir)
    order = ordered(chapters)
    pages = []
    for name in order:
        page = out / f"{name}.html"
        page.write_text(render_chapter(chapters[name], order, questions, practice=practice), encoding="utf-8")
        pages.append(page)
    items = "".join(f'<li><a href="{n}.html">{html.escape(chapters[n].title)}</a></li>' for n in order)
    index = PAGE.format(title="The course text", assets=ASSETS, chapters="", toc=items, intro="", sections="")
    (out / "index.html").write_text(index.replace("<h2>Sections</h2>", "<h2>Chapters</h2>"), encoding="utf-8")
    return pages


# The course's order of the chapters (the rest after them, by name).
ORDER = ("universal-approximation", "activations", "normalization", "initialisation", "dropout-weight-decay", "kernels")


def ordered(chapters: Iterable[str]) -> list[str]:
    names = list(chapters)
    return [n for n in ORDER if n in names] + sorted(n for n in names if n not in ORDER)
