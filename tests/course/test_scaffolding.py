"""Scaffolding levels (grader/course/scaffold.py): every stub renders at every level, the levels below guided give no
marked answer away, keep the code and the signatures of exercises/, and still state every requirement a check
tests; course.toml's [scaffolding] and a release at --level derive.

Importing, signatures against the reference and ``NotImplementedError`` with the exercise id at every level are
tests/test_layout.py's tests, run on each level's rendering (its ``stubs`` fixture).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from grader.course.packs import public_seed
from grader.course.scaffold import LEVELS, ScaffoldError, blocks, exercises_in, render, render_stub, render_tree
from grader.student.engine.catalogue import EXERCISES
from grader.student.engine.checks import CHECKS
from grader.student.course import CourseError, parse_course
from scaffold_requirements import requirement
from test_layout import KERNELS, kernel_declarations

ROOT = Path(__file__).resolve().parents[2]
EXERCISES_DIR = ROOT / "exercises"
STUBS = sorted(p for p in EXERCISES_DIR.rglob("*") if p.suffix in (".py", ".cl") and "__pycache__" not in p.parts)
STUB_IDS = [p.relative_to(EXERCISES_DIR).as_posix() for p in STUBS]


def normal(text: str) -> str:
    """Lower case, comment stars dropped, whitespace collapsed: how rendered text is compared."""
    text = re.sub(r"^\s*\*(?=\s|$)", " ", text, flags=re.M)
    return " ".join(text.lower().split())


def rendered(relative: str, level: str) -> str:
    return render_stub(relative, (EXERCISES_DIR / relative).read_text(encoding="utf-8"), {}, level)


def without_docstrings(source: str) -> str:
    """The module's AST dump with every docstring removed (what a level may change is docstrings only)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


# --- the renderer ---------------------------------------------------------------------------------------------

EXAMPLE = '''def f(x):
    """Summary.

    [derive]
    Cache x.
    [/derive]
    [guided]
    dx = 2 x
    [/guided]

    Never modify x.
    """
'''


def test_each_level_keeps_its_blocks_and_drops_the_markers() -> None:
    assert render(EXAMPLE, "guided") == EXAMPLE.replace("    [derive]\n", "").replace("    [/derive]\n", "").replace(
        "    [guided]\n", ""
    ).replace("    [/guided]\n", "")
    assert render(EXAMPLE, "derive") == 'def f(x):\n    """Summary.\n\n    Cache x.\n\n    Never modify x.\n    """\n'
    assert render(EXAMPLE, "contract") == 'def f(x):\n    """Summary.\n\n    Never modify x.\n    """\n'


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[guided]\nx\n", "[guided] is never closed"),
        ("[guided]\n[derive]\n[/derive]\n[/guided]\n", "[derive] opens inside [guided]"),
        ("x\n[/derive]\n", "[/derive] closes no open [derive]"),
    ],
)
def test_malformed_markers_are_one_line_errors(text: str, fragment: str) -> None:
    with pytest.raises(ScaffoldError) as excinfo:
        render(text, "derive", "stub.py")
    assert fragment in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_an_unknown_level_is_a_one_line_error() -> None:
    with pytest.raises(ScaffoldError, match="'easy' is not a scaffolding level: use one of contract, derive, guided"):
        render(EXAMPLE, "easy")


# --- every stub at every level ------------------------------------------------------------------------------


@pytest.mark.parametrize("relative", STUB_IDS)
@pytest.mark.parametrize("level", LEVELS)
def test_every_stub_renders_without_markers_and_keeps_its_code(relative: str, level: str) -> None:
    text = rendered(relative, level)
    assert not re.search(r"\[/?(guided|derive)\]", text)
    if relative.endswith(".py"):
        source = (EXERCISES_DIR / relative).read_text(encoding="utf-8")
        assert without_docstrings(text) == without_docstrings(source)  # code and signatures exactly as exercises/
    else:
        code = [line for line in text.splitlines() if "__kernel" in line or "TODO" in line]
        kept = [
            line for line in (EXERCISES_DIR / relative).read_text().splitlines() if "__kernel" in line or "TODO" in line
        ]
        assert code == kept


@pytest.mark.parametrize("filename", sorted(KERNELS))
@pytest.mark.parametrize("level", LEVELS)
def test_rendered_kernel_stubs_declare_the_spec_kernels_with_empty_bodies(filename: str, level: str) -> None:
    text = rendered(f"kernels/{filename}", level)
    assert kernel_declarations(text) == KERNELS[filename]
    bodies = re.findall(r"\)\s*\{(.*?)\n\}", text, flags=re.S)
    assert len(bodies) == len(KERNELS[filename]) and all("TODO: implement" in body for body in bodies)


@pytest.mark.opencl
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_contract_kernel_stubs_build_on_the_opencl_device(filename: str) -> None:
    import pyopencl as cl

    device = next(d for p in cl.get_platforms() for d in p.get_devices())
    program = cl.Program(cl.Context([device]), rendered(f"kernels/{filename}", "contract")).build()
    assert {k.function_name for k in program.all_kernels()} == set(KERNELS[filename])


def test_the_stubs_mark_the_derivations_of_the_issue() -> None:
    """The answers named in the issue are marked [guided]: BatchNorm's dx and running-variance update, RMSNorm's dx,
    an initialiser's constant, a kernel's reduction strategy."""
    marked = {
        rel: " ".join(
            normal("\n".join(lines)) for kind, lines in blocks((EXERCISES_DIR / rel).read_text()) if kind == "guided"
        )
        for rel in STUB_IDS
    }
    assert "m / (m - 1)" in marked["normalization.py"]
    assert "(m * dout - sum(dout) - x_hat * sum(dout * x_hat))" in marked["normalization.py"]
    assert "x_i / (d * rms^3)" in marked["normalization.py"]
    assert "sqrt(6 / (fan_in + fan_out))" in marked["init.py"]
    assert "tree reduction" in marked["kernels/rmsnorm.cl"] and "tree reduction" in marked["kernels/layernorm.cl"]
    every_marked_file = {rel for rel, text in marked.items() if text}
    assert every_marked_file >= {
        "activations.py",
        "linear.py",
        "normalization.py",
        "dropout.py",
        "init.py",
        "optim.py",
        "gradcheck.py",
        "blocks.py",
        "kernels/activations.cl",
    }


@pytest.mark.parametrize("relative", STUB_IDS)
def test_contract_and_derive_contain_none_of_the_marked_formulas(relative: str) -> None:
    source = (EXERCISES_DIR / relative).read_text(encoding="utf-8")
    for kind, lines in blocks(source, relative):
        hidden_at = ["contract", "derive"] if kind == "guided" else ["contract"]
        for level in LEVELS:
            text = normal(rendered(relative, level))
            for line in lines:
                piece = normal(line)
                if len(piece) < 12:  # too short to be a formula of its own ("[guided]" blocks' blank lines)
                    continue
                if level in hidden_at:
                    assert piece not in text, f"{relative} at {level} still says: {line.strip()}"
                else:
                    assert piece in text, f"{relative} at {level} lost: {line.strip()}"


def test_guided_is_the_source_without_its_marker_lines() -> None:
    for relative in STUB_IDS:
        source = (EXERCISES_DIR / relative).read_text(encoding="utf-8")
        bare = "".join(
            line
            for line in source.splitlines(keepends=True)
            if not re.match(r"^\s*(\*\s*)?\[/?(guided|derive)\]\s*$", line)
        )
        assert rendered(relative, "guided") == bare, relative


# --- every level states what the checks test ----------------------------------------------------------------


def stated(level: str) -> dict[str, str]:
    """Per exercise, the normalised text a student reads about it at ``level``: its definition (or its kernel file),
    its file's module docstring and the package's (the module contract)."""
    package = ast.get_docstring(ast.parse(rendered("__init__.py", level))) or ""
    out: dict[str, str] = {}
    for relative in STUB_IDS:
        text = rendered(relative, level)
        module = "" if relative.endswith(".cl") else (ast.get_docstring(ast.parse(text)) or "")
        lines = text.splitlines()
        for exercise, (first, last) in exercises_in(relative, text).items():
            out[exercise] = normal("\n".join(lines[first - 1 : last]) + "\n" + module + "\n" + package)
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_states_every_requirement_a_check_tests(level: str) -> None:
    texts = stated(level)
    assert sorted(texts) == sorted(EXERCISES)
    unstated: list[str] = []
    for exercise, definition in CHECKS.items():
        for check in definition.checked_plan(public_seed(exercise)).checks:
            phrases = requirement(exercise, check.name)
            assert phrases, f"{exercise} check {check.name}: no stated requirement declared in scaffold_requirements.py"
            unstated += [f"{exercise} {check.name}: {p!r}" for p in phrases if normal(p) not in texts[exercise]]
    assert not unstated, "\n".join(unstated)


# --- course.toml and the release ----------------------------------------------------------------------------


def test_course_scaffolding_sets_the_level_with_overrides_by_topic_and_exercise() -> None:
    course = parse_course(
        {
            "scaffolding": {
                "level": "derive",
                "exercises": {"normalization.BatchNorm1d": "contract", "normalization": "guided"},
            }
        },
        Path("course.toml"),
    )
    levels = course.scaffolding_levels()
    assert levels["normalization.BatchNorm1d"] == "contract" and levels["normalization.LayerNorm"] == "guided"
    assert levels["linear.Linear"] == "derive" and set(levels) == set(EXERCISES)
    assert course.scaffolding_levels("contract")["linear.Linear"] == "contract"  # grade release --level
    assert course.scaffolding_levels("contract")["normalization.BatchNorm1d"] == "contract"


@pytest.mark.parametrize(
    "scaffolding, fragment",
    [
        ({"level": "easy"}, "scaffolding.level = 'easy' is not a level: use contract, derive, guided"),
        ({"exercises": {"linear.Linear": "full"}}, "scaffolding.exercises.\"linear.Linear\" = 'full' is not a level"),
        ({"exercises": {"batchnorm": "derive"}}, "scaffolding.exercises: 'batchnorm' is not an exercise or topic"),
        ({"levels": "derive"}, "[scaffolding] takes level"),
    ],
)
def test_bad_scaffolding_tables_are_one_line_errors(scaffolding: dict, fragment: str) -> None:
    with pytest.raises(CourseError) as excinfo:
        parse_course({"scaffolding": scaffolding}, Path("course.toml"))
    assert fragment in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_a_per_exercise_level_renders_only_that_exercise_lower() -> None:
    text = render_stub(
        "normalization.py",
        (EXERCISES_DIR / "normalization.py").read_text(),
        {"normalization.BatchNorm1d": "contract"},
        "guided",
    )
    spans = exercises_in("normalization.py", text)
    lines = text.splitlines()
    bn1d = normal("\n".join(lines[spans["normalization.BatchNorm1d"][0] - 1 : spans["normalization.BatchNorm1d"][1]]))
    bn2d = normal("\n".join(lines[spans["normalization.BatchNorm2d"][0] - 1 : spans["normalization.BatchNorm2d"][1]]))
    assert "m / (m - 1)" not in bn1d and "cache x_hat" not in bn1d
    assert "(m * dout - sum(dout) - x_hat * sum(dout * x_hat))" in bn2d


def test_render_tree_writes_every_file(tmp_path: Path) -> None:
    render_tree(EXERCISES_DIR, tmp_path / "exercises", {}, "contract")
    written = sorted(
        p.relative_to(tmp_path / "exercises").as_posix() for p in (tmp_path / "exercises").rglob("*") if p.is_file()
    )
    assert written == sorted(
        p.relative_to(EXERCISES_DIR).as_posix()
        for p in EXERCISES_DIR.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert (tmp_path / "exercises" / "normalization.py").read_text() == rendered("normalization.py", "contract")


def test_levels_json_is_not_in_the_instructor_repository() -> None:
    assert not (ROOT / "grader" / "student" / "engine" / "scaffolding.json").exists()
    assert json.loads('{"exercises": {}}') == {"exercises": {}}


# --- the report's hint respects the level -------------------------------------------------------------------


def test_below_guided_a_named_mistake_gets_its_hint_and_no_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.mistakes  # noqa: F401  (registers the catalogue with its hints)
    from grader.student.engine import diagnosis
    from grader.student.engine.model import CheckResult
    from grader.student.feedback.report import diagnosis_lines

    mistake = diagnosis.known_mistake("bn-biased-running-var")
    assert mistake is not None and mistake.hint
    check = CheckResult(
        name="running_var",
        passed=False,
        score=0.0,
        max_score=2.0,
        message="running_var differs",
        misconception="bn-biased-running-var",
    )
    levels = {"normalization.BatchNorm1d": "guided"}
    monkeypatch.setattr(diagnosis, "level_of", lambda exercise: levels.get(exercise, "guided"))
    guided = diagnosis_lines(check)
    assert any("m / (m - 1)" in line for line in guided) and guided[-1].startswith("Fix: ")
    for level in ("derive", "contract"):
        levels["normalization.BatchNorm1d"] = level
        lines = diagnosis_lines(check)
        assert lines == [f"Likely mistake (bn-biased-running-var): {mistake.hint}"]
        assert mistake.explain() == f"Known mistake bn-biased-running-var: {mistake.hint}"
    no_hint = diagnosis.KnownMistake("x-mistake", "normalization.BatchNorm1d", "What is wrong.", "Paste y = 2x.")
    assert no_hint.said("derive") == ("What is wrong.", "") and no_hint.said("guided") == (
        "What is wrong.",
        "Paste y = 2x.",
    )


def test_no_hint_repeats_a_formula_the_stubs_mark_guided() -> None:
    from grader.mistakes import CATALOGUE
    from grader.mistakes.hints import HINTS

    assert set(HINTS) <= set(CATALOGUE)
    for mistake_id, hint in HINTS.items():
        exercise = CATALOGUE[mistake_id].exercise
        relative = exercise.split(".")[0] + ".py" if not exercise.startswith("kernels.") else None
        files = [relative] if relative else [r for r in STUB_IDS if r.startswith("kernels/")]
        for rel in files:
            for kind, lines in blocks((EXERCISES_DIR / rel).read_text(), rel):
                for line in lines:
                    piece = normal(line)
                    assert kind != "guided" or len(piece) < 12 or piece not in normal(hint), (mistake_id, line)
        assert "fix:" not in hint.lower() and not re.search(r"\b(dx|std|b|a) = ", hint), mistake_id


def test_the_pack_carries_each_mistakes_hint(tmp_path: Path) -> None:
    from grader.course.packs import write_pack
    from grader.student.engine.pack import load_pack

    path, _ = write_pack(tmp_path, "normalization.BatchNorm1d")
    pack = load_pack(path)
    hints = {m.id: m.hint for m in pack.mistakes}
    assert hints["bn-biased-running-var"].startswith("running_var follows the biased batch variance")
