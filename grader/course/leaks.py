"""The leak audit: no graded answer printed anywhere a student can read before answering it.

Every text a student can read before answering a graded question is read the way
a student who knows nothing would read it, hunting for answers
(:mod:`grader.quiz.reading`: numbers, arithmetic, formulas in the question's
own names, quoted choices, phrases near the prompt's words), and everything found
is tried with each graded question's own judge (:func:`grader.quiz.judging.judge`,
the question posed as the graders pose it). The texts (:class:`Text`):

- what the release hands out (``handout_texts``, from a ``grade release``
  handout folder): README.md, ERRATA.md, the notebooks, each section of the
  course text (``text/*.md``, its maths as a student reads it), the practice its pages judge
  (``text/*.html``: prompt, explanation, the number taken as right), and each handout quiz
  question's prompt (a parameterised one's practice prompt and its template)
  and choices;
- what the graders show (``quiz_texts``): each explanation, which a student
  sees once its own question is closed while the others are still open, each
  practice explanation (it opens to the practice answer), and each
  parameterised prompt and explanation with the numbers and answer of every
  instance a student can draw (``instances``).

Which text is tried against which question:

- a text that is the same for everyone against every question with one key for
  everyone, formula questions also with the formulas it shows with sizes put in
  (``N(0, 2/256)`` is ``2/n_in``: ``reading.instantiated``);
- a text that is the same for everyone against every parameterised question, with
  the formulas it writes in the question's parameter names (``x·Φ(x)``,
  ``a²·p/(1 - p)``): it cannot know a student's number, but it can state the
  formula, so such a formula is a leak when the judge accepts it for each of
  ``FORMULA_STUDENTS``' draws (a drawn answer must be a number);
- a text with drawn numbers against the fixed numeric questions (its numbers
  and arithmetic: the rest of it is its template, read as a text for everyone).
  It leaks a question when it gives its answer away in more than
  ``COINCIDENCE`` of its instances: a rule "type the number printed there" would
  then beat chance by more than the guessing audit allows. Under that share it
  is a coincidence its student cannot tell from the other numbers (a template
  that prints an answer meets it in every instance). Parameterised questions
  draw their numbers independently (the seed names the question), so one of
  them prints another's answer only by such a coincidence;
- never a question against its own statement or its own explanation.

*Plain* fixed numeric answers, a whole number or one of at most two significant
digits (0, 1, 2, 6, 0.6, 0.25, 1024), are everywhere: a text's every 2 is not a
pointer to a key of 2. They are tried only with the numbers a text writes at the
question's concept (``reading.near_concept``): the numbers and arithmetic of a
sentence that holds two of its *concept words*, the words of its prompt (four
letters or more, not common) that at most three of the bank's prompts hold
(``naive`` and ``multiplied`` for naive-dropout-test-scale, not ``dropout``).
"The naive scale at test time is multiplied by 0.6" is a leak; "p = 0.6" in a
dropout question is not. The audit lists the plain answers.

One kind of answer is not counted as a leak, and the audit lists it:

- formulas the exercise *contract* states: the stubs rendered at the lowest
  scaffolding level, which every release shows, define what a student
  implements (``GELU(x) = x * Phi(x)``). A formula question that asks for such
  a definition is answered by the exercise itself by design, so the texts may
  repeat it. Everything else in the contract is read as a text for everyone
  (a number it prints is a leak like any other). The stubs at a release's own
  level (from ``derive`` on they give derived formulas on purpose) are read
  only with ``stubs=True``.

``python -m grader.course.leaks`` builds a release in a temporary folder and
prints what the audit finds.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.quiz import params as params_lib
from grader.quiz.errors import AnswerFormatError, ReferenceUnavailableError
from grader.quiz.judging import judge, pose
from grader.quiz.locking import misconceptions_of
from grader.quiz.model import Posed, Question, Quiz, SourceQuiz
from grader.quiz.reading import (
    arithmetic,
    choices_quoted,
    concept_words,
    formulas,
    instantiated,
    near_concept,
    numbers,
    phrases,
)
from grader.student.quiz.answers import parse_number
from grader.student.quiz.posing import PRACTICE_STUDENT

STUDENTS = 200  # students read for a parameterised question with more than ENUMERATED instances
ENUMERATED = 1000  # a parameterised question with at most this many instances is read in every instance
COINCIDENCE = 0.05  # a text with drawn numbers leaks a question when it gives it away in more than this share
AUDITOR = "(leak audit)"  # whom fixed-key questions are posed for (only their choice order depends on it)


@dataclass(frozen=True)
class Text:
    """One text a student can read: where it is, what it says, and the question it cannot leak (``own``: its own
    statement, or its explanation, shown once it is closed). A text with drawn numbers names its instance
    (``instance``) and how many instances its source has (``instances``)."""

    source: str
    text: str
    instance: str | None = None
    own: str | None = None
    instances: int = 0


def _key(chapter: str, question: str) -> str:
    return f"{chapter}/{question}"


_FIELD = re.compile(r"\{\{.*?\}\}")


def _blank(template: str) -> str:
    """A template with its drawn fields left out: the part every student reads alike."""
    return _FIELD.sub(" ", template)


def _notebook_text(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    return "\n\n".join(
        "".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source", "")) for c in cells
    )


def handout_texts(student_dir: Path | str, stubs: bool = False) -> list[Text]:
    """What a handout folder gives a student to read: README.md, ERRATA.md, every notebook, every section of the
    course text (``text/``), and each handout quiz
    question's prompt (a parameterised one's practice prompt and its template) and choices; with ``stubs``, the
    exercise stubs as the release rendered them."""
    root = Path(student_dir)
    texts = [Text(p.name, p.read_text(encoding="utf-8")) for p in sorted(root.glob("*.md"))]
    texts += [Text(p.name, _notebook_text(p)) for p in sorted(root.glob("*.ipynb"))]
    for path in sorted((root / "quizzes").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for q in doc["questions"]:
            choices = [v for c in q.get("choices", []) for k, v in c.items() if k != "id" and isinstance(v, str)]
            parts = [q["prompt"], _blank(q.get("template", "")), *choices]  # a choice's every text, label included
            texts.append(
                Text(
                    f"quizzes/{path.name}: {q['id']}",
                    "\n".join(p for p in parts if p),
                    own=_key(doc["chapter"], q["id"]),
                )
            )
    if (root / "text").is_dir():
        texts += course_texts(root / "text")  # the course text the release ships
        texts += page_practice_texts(root / "text")  # and the practice its pages judge
    if stubs:
        texts += [
            Text(p.relative_to(root).as_posix(), p.read_text(encoding="utf-8"))
            for p in sorted((root / "exercises").rglob("*"))
            if p.suffix in (".py", ".cl")
        ]
    return texts


def course_texts(text_dir: Path | str) -> list[Text]:
    """Each section of the course text (``text/*.md``) as a student reads it (its maths transcribed), a text for
    everyone: a graded answer printed anywhere in the text, before its checkpoint or after it, is a leak (a
    student reads every section before answering)."""
    from grader.student.coursetext import load_chapters, markdown_to_text

    return [
        Text(f"text/{chapter.name}.md#{section.id}", f"{section.title}\n{markdown_to_text(section.body)}")
        for chapter in load_chapters(text_dir).values()
        for section in chapter.sections
    ]


_PRACTICE_FORM = re.compile(
    r'<form class="practice" data-question="([^"]+)" data-low="([^"]+)" '
    r'data-high="([^"]+)">(.*?)</form>',
    re.DOTALL,
)


def page_practice_texts(text_dir: Path | str) -> list[Text]:
    """What the text's pages (``text/<chapter>.html``) judge offline, each practice question a text of its own
    question (``own``): its practice prompt, the explanation a right answer shows, and the number the page takes
    as right (the middle of its ``data-low``..``data-high``), read the way the audit reads any text."""
    import html

    texts = []
    for page in sorted(Path(text_dir).glob("*.html")):
        for qid, low, high, body in _PRACTICE_FORM.findall(page.read_text(encoding="utf-8")):
            words = html.unescape(re.sub(r"<[^>]+>", " ", body))
            middle = (float(low) + float(high)) / 2
            texts.append(
                Text(f"text/{page.name}: {qid} (practice)", f"{words}\nRight: {middle:.6g}", own=_key(page.stem, qid))
            )
    return texts


def contract_texts(exercises_dir: Path | str) -> list[Text]:
    """The exercise stubs at the lowest scaffolding level (``contract``), which every release shows."""
    from grader.course.scaffold import render_stub

    root = Path(exercises_dir)
    return [
        Text(
            f"exercises/{p.relative_to(root).as_posix()} (contract)",
            render_stub(p.relative_to(root).as_posix(), p.read_text(encoding="utf-8"), {}, "contract"),
        )
        for p in sorted(root.rglob("*"))
        if p.suffix in (".py", ".cl") and "__pycache__" not in p.parts
    ]


def instances(question: Question, students: Sequence[str]) -> list[dict[str, Any]]:
    """The drawn numbers of ``question`` to read: every instance of its grid when it has at most ``ENUMERATED``
    (each parameter is drawn uniformly, so a share of instances is a share of students), else those of
    ``students``; never the practice instance (everyone's, read as a text for everyone)."""
    specs = params_lib.parse_specs(question.params)
    practice = pose(question, PRACTICE_STUDENT).values
    if math.prod(len(spec.values) for spec in specs.values()) <= ENUMERATED:
        grid = [
            dict(zip(specs, combo, strict=True))
            for combo in itertools.product(*(spec.values for spec in specs.values()))
        ]
    else:
        grid = [pose(question, student).values for student in students]
    return [values for values in grid if values != practice]


def _expected(posed: Posed) -> float:
    """A parameterised question's answer for its numbers, as the judge computes it."""
    return float(judge(posed, "0").expected)  # type: ignore[arg-type]


def quiz_texts(quizzes: Sequence[Quiz], students: Sequence[str], statements: bool = True) -> list[Text]:
    """What the graders show: every explanation (its drawn numbers left out), every practice explanation, and each
    parameterised prompt and explanation in each of its ``instances``; with ``statements``, every prompt (its drawn
    numbers left out) with its choices too (a handout holds those already)."""
    texts: list[Text] = []
    for quiz in quizzes:
        for q in quiz.questions:
            own = _key(quiz.chapter, q.id)
            if statements:
                texts.append(
                    Text(f"prompt: {own}", "\n".join([_blank(q.prompt), *(c.text for c in q.choices)]), own=own)
                )
            texts.append(Text(f"explanation: {own}", _blank(q.explanation), own=own))
            if not q.parameterised:
                continue
            practice = pose(q, PRACTICE_STUDENT)
            texts.append(Text(f"practice explanation: {own}", practice.explanation(_expected(practice)), own=own))
            drawn = instances(q, students)
            for values in drawn:
                posed = Posed(q, values, params_lib.render(q.prompt, values), q.choices)
                label = ", ".join(f"{k} = {v}" for k, v in values.items())
                texts.append(Text(f"prompt: {own}", posed.prompt, label, own, len(drawn)))
                texts.append(Text(f"explanation: {own}", posed.explanation(_expected(posed)), label, own, len(drawn)))
    return texts


@dataclass(frozen=True)
class Leak:
    """A graded answer found in a text: the question, the text, the answer tried; for a text with drawn numbers,
    the share of its instances (of the students) to whom it gives the answer away."""

    question: str
    source: str
    answer: str
    share: float | None = None

    def __str__(self) -> str:
        whose = f" (with the numbers of {self.share:.1%} of the students)" if self.share is not None else ""
        return f"{self.question}: {self.answer!r} in {self.source}{whose}"


def plain(value: float) -> bool:
    """A whole number or one of at most two significant digits: every text holds such numbers."""
    if value == int(value):
        return True
    return len(f"{abs(value):.12e}".split("e")[0].replace(".", "").rstrip("0")) <= 2


@dataclass
class Audit:
    """What the audit found: the leaks; the fixed numeric questions with a plain answer (no number tried); the
    questions the exercise contract answers; the texts read; and the (question, source) pairs of texts with drawn
    numbers that give an answer away in at most ``COINCIDENCE`` of their instances, with that share."""

    leaks: list[Leak] = field(default_factory=list)
    plain: list[str] = field(default_factory=list)
    contract: list[str] = field(default_factory=list)
    texts: int = 0
    coincidences: dict[tuple[str, str], float] = field(default_factory=dict)

    def pairs(self) -> set[tuple[str, str]]:
        """(question, source) of every leak: which text gives which question away."""
        return {(leak.question, leak.source) for leak in self.leaks}


def _accepted(posed: Posed, raw: Any) -> bool:
    try:
        return judge(posed, raw).correct
    except (AnswerFormatError, ReferenceUnavailableError):
        return False


def _found(
    text: Text, question: Question, posed: Posed, key: float | None, concept: set[str] | None = None
) -> list[str]:
    """What ``text`` holds that ``question``'s judge accepts (``key``: a fixed numeric question's answer;
    ``concept``: a plain one's concept words, so that only the numbers written at its concept are tried)."""
    if question.kind == "numeric":
        if key is None:
            return []
        values = near_concept(text.text, concept) if concept is not None else numbers(text.text) | arithmetic(text.text)
        near = [v for v in sorted(values) if abs(v - key) <= 2 * float(question.tolerance or 0)]
        return [f"{v:g}" for v in near if _accepted(posed, v)]
    if question.kind == "single":
        return [c for c in choices_quoted(text.text, question) if _accepted(posed, c)]
    if question.kind == "multiple":
        quoted = ",".join(choices_quoted(text.text, question))
        return [quoted] if quoted and _accepted(posed, quoted) else []
    if question.symbols:
        written = formulas(text.text, question) | instantiated(text.text, question)
        return [f for f in sorted(written) if _accepted(posed, f)]
    return [p for p in sorted(phrases(text.text, question)) if _accepted(posed, p)]


FORMULA_STUDENTS = ("(leak audit) 1", "(leak audit) 2", "(leak audit) 3")  # whose draws a formula is tried on
_OPERATION = re.compile(r"[-+*/^·×⋅√²³()\u2212]")


def _formula_answers(text: Text, question: Question, posed: Sequence[Posed]) -> list[str]:
    """The formulas of a text for everyone, written in a parameterised question's parameter names, that its judge
    accepts for each of FORMULA_STUDENTS' draws: the formula of the answer, which a text may state (the course text
    states them all) but the judge must refuse, a drawn answer being a number (``x·Φ(x)`` for gelu-value)."""
    view = dataclasses.replace(question, symbols={name: name for name in question.params or {}}, subject=None)
    spans = [f for f in sorted(formulas(text.text, view)) if _OPERATION.search(f) and "=" not in f]
    return [f for f in spans if all(_accepted(p, f) for p in posed)]


def audit(
    texts: Iterable[Text], quizzes: Sequence[Quiz], keys: Mapping[str, float], contract: Iterable[Text] = ()
) -> Audit:
    """Try everything found in ``texts`` with the judges of ``quizzes``' fixed-key questions (see the module
    docstring). ``keys``: each fixed numeric question's answer (``source_keys``), used only to skip the numbers
    further than twice the tolerance from it, which the judge refuses (each would cost up to two thousand
    digests); every acceptance is the judge's. ``contract``: the exercise contract, read as a text for everyone
    except that a formula it states is a definition the exercise gives by design (``Audit.contract``)."""
    fixed = [
        (_key(quiz.chapter, q.id), q, pose(q, AUDITOR))
        for quiz in quizzes
        for q in quiz.questions
        if not q.parameterised
    ]
    result = Audit(plain=[key for key, q, _ in fixed if q.kind == "numeric" and plain(keys[key])])
    answer = {key: keys.get(key) for key, _, _ in fixed}
    prompts = [q.prompt for quiz in quizzes for q in quiz.questions]
    concepts = {key: concept_words(q.prompt, prompts) for key, q, _ in fixed if key in result.plain}
    contract = list(contract)
    for text in contract:
        result.contract += [
            key
            for key, q, posed in fixed
            if q.kind == "short"
            and q.symbols
            and key not in result.contract
            and any(_accepted(posed, f) for f in formulas(text.text, q))
        ]
    open_ = [(key, q, posed) for key, q, posed in fixed if key not in result.contract]
    numeric = [(key, q, posed) for key, q, posed in open_ if q.kind == "numeric" and answer[key] is not None]
    drawn_questions = [
        (_key(quiz.chapter, q.id), q, [pose(q, s) for s in FORMULA_STUDENTS])
        for quiz in quizzes
        for q in quiz.questions
        if q.parameterised
    ]
    found: dict[tuple[str, str, str], None] = {}
    drawn: dict[tuple[str, str], dict[str, str]] = {}
    sizes: dict[str, int] = {}
    for text in itertools.chain(contract, texts):
        result.texts += 1
        if text.instance is None:
            for key, question, posed_all in drawn_questions:
                if key != text.own:
                    found.update(((key, text.source, hit), None) for hit in _formula_answers(text, question, posed_all))
        for key, question, posed in open_ if text.instance is None else numeric:
            if key == text.own:
                continue
            hits = _found(text, question, posed, answer[key], concepts.get(key))
            if text.instance is None:
                found.update(((key, text.source, hit), None) for hit in hits)
            elif hits:
                drawn.setdefault((key, text.source), {})[text.instance] = hits[0]
                sizes[text.source] = text.instances
    result.leaks = [Leak(*k) for k in found]
    for (key, source), hit_of in drawn.items():
        share = len(hit_of) / sizes[source]
        if share > COINCIDENCE:
            result.leaks.append(Leak(key, source, next(iter(hit_of.values())), share))
        else:
            result.coincidences[(key, source)] = share
    return result


def source_keys(sources: Iterable[SourceQuiz]) -> dict[str, float]:
    """Each fixed numeric question's answer, from the authors' sources (``audit``'s ``keys``)."""
    return {
        _key(s.chapter, q.id): parse_number(q.answer)
        for s in sources
        for q in s.questions
        if q.kind == "numeric" and q.answer_range is None
    }


def students(count: int = STUDENTS) -> list[str]:
    """The students read for a parameterised question with too many instances to read them all."""
    return [f"student{i}@example.org" for i in range(count)]


def run(
    student_dir: Path | str,
    quizzes: Sequence[Quiz],
    sources: Sequence[SourceQuiz],
    exercises_dir: Path | str,
    count: int = STUDENTS,
    stubs: bool = False,
    text_dir: Path | str | None = None,
) -> Audit:
    """The whole audit: a handout folder's texts and the graders', every fixed-key question's judge; with
    ``text_dir``, every section of the course text too (:func:`course_texts`)."""
    texts = handout_texts(student_dir, stubs) + quiz_texts(quizzes, students(count), statements=False)
    if text_dir is not None:
        texts += course_texts(text_dir)
    result = audit(texts, quizzes, source_keys(sources), contract_texts(exercises_dir))
    result.leaks += misconception_leaks(texts, sources)
    return result


def misconception_leaks(texts: Iterable[Text], sources: Iterable[SourceQuiz]) -> list[Leak]:
    """Each wrong choice's misconception label (``misconception`` in the authors' sources) found in a text a
    student reads: the label is the instructor's, and it names its choice wrong, so it gives the answer away."""
    labels = [
        (_key(s.chapter, q.id), label) for s in sources for q in s.questions for label in misconceptions_of(q).values()
    ]
    return [Leak(key, text.source, label) for text in texts for key, label in labels if label in text.text]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m grader.course.leaks``: build a release in a temporary folder, audit it, print what it found."""
    import argparse
    import tempfile

    from grader import quiz as quiz_lib
    from grader.course.release import ROOT, build_release

    parser = argparse.ArgumentParser(prog="python -m grader.course.leaks", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--students", type=int, default=STUDENTS, help=f"students read for a question with over {ENUMERATED} instances"
    )
    parser.add_argument("--stubs", action="store_true", help="read the stubs at the release's level too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        build_release(Path(tmp) / "release")
        quizzes = quiz_lib.load_all(ROOT / "quizzes")
        sources = [quiz_lib.load_source(p) for p in sorted((ROOT / "quizzes" / "source").glob("*.toml"))]
        result = run(Path(tmp) / "release" / "student", quizzes, sources, ROOT / "exercises", args.students, args.stubs)
    for leak in result.leaks:
        print(leak)
    print(f"{len(result.leaks)} leak(s) in {result.texts} texts")
    print(f"plain answers (tried only at their concept): {', '.join(result.plain) or 'none'}")
    print(f"answered by the exercise contract: {', '.join(result.contract) or 'none'}")
    for (question, source), share in sorted(result.coincidences.items()):
        print(f"coincidence under the {COINCIDENCE:.0%} bar: {question} in {source}, {share:.1%} of the students")
    return 1 if result.leaks else 0


if __name__ == "__main__":
    raise SystemExit(main())
