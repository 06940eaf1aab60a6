"""`grade release`: the handout carries no answer, grades on its own, and the Gradescope bundle grades uploads.

One release is built for the module (``build_release``). The leak checks:

- no function or method in the handout whose normalised AST (docstring,
  name and annotations dropped) equals one of ``reference/``, the mistake
  variants (``grader/mistakes/``), the reference kernels' emulation
  (``reference/opencl/emulation.py``) or the solution writer, except those the
  stubs in ``exercises/`` ship by contract (``base.py``, constructors);
- no file whose content equals a file of ``reference/``, ``quizzes/source/``
  or ``grader/mistakes/`` (or the solution writer);
- no quiz answer, digest, salt or explanation: the handout quiz files hold
  none of the source answers' texts, no locked digest or salt, no explanation
  in plain text, and no field named like one;
- the handout's own ``grade``, installed in a fresh virtual environment from
  ``DIR/student`` alone (its dependencies made visible, never this
  repository), grades the stubs (all not implemented), a correct solution
  (every public check passes) and a classic mistake (named).

Then the Gradescope bundle, unzipped into an /autograder-like tree and run,
writes a valid results.json for a correct, a partial and a crashing upload.
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader import quiz as quiz_lib
from grader.cli import cli
from grader.course.packs import PackError
from grader.course.release import build_release
from grader.course.student_handout import PACK_BUDGET
from grader.course.solution import write_solution
from grader.student.engine.catalogue import EXERCISES, topic_of
from grader.student.quiz import posing
from grader.student.quiz.answers import QuizError
from grader.student.quiz.practice import load_practice, open_seal

ROOT = Path(__file__).resolve().parents[2]
KERNEL_IDS = [e for e in EXERCISES if topic_of(e) == "kernels"]  # every count below is the catalogue's
CPU_IDS = [e for e in EXERCISES if e not in KERNEL_IDS]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release")
    build_release(out, force=True)
    return out


# --- layout and manifest ----------------------------------------------------------------------------------


def test_the_release_holds_the_handout_the_bundle_and_a_manifest(release: Path) -> None:
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["version"] == "0.1.0" and len(manifest["reference_sha256"]) == 64
    assert 0 < manifest["packs"]["bytes"] < PACK_BUDGET
    listed = {f["path"] for f in manifest["files"]["student"]}
    on_disk = {p.relative_to(release).as_posix() for p in (release / "student").rglob("*") if p.is_file()}
    assert listed == on_disk
    for name in (
        "README.md",
        "pyproject.toml",
        "exercises/linear.py",
        "exercises/kernels/rmsnorm.cl",
        "grader/__init__.py",
        "grader/student/cli.py",
        "grader/student/packs/linear.Linear.npz",
        "quizzes/activations.json",
        "normalization.ipynb",
        "ERRATA.md",
    ):
        assert (release / "student" / name).is_file(), name
    readme = (release / "student" / "README.md").read_text()
    assert "Quick start" in readme and "grade submit" in readme and "practice" in readme
    assert "`blocks.MLPBlock`: dropout_train, backward_dropout" in readme
    members = zipfile.ZipFile(release / "autograder" / "autograder.zip").namelist()
    assert {"setup.sh", "run_autograder", "source/grader/course/gradescope.py", "source/reference/linear.py"} <= set(
        members
    )
    assert manifest["files"]["autograder"][0]["members"] == members


def test_release_refuses_a_non_empty_folder_without_force(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["release", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: '{tmp_path.resolve()}' is not empty: pass --force to replace its contents, or choose another --out"
    ]
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_release_never_writes_over_the_repository() -> None:
    for out in (ROOT, ROOT.parent, ROOT / "grader", ROOT / "reference" / "opencl"):
        result = CliRunner().invoke(cli, ["release", "--out", str(out), "--force"])
        assert result.exit_code == 2 and "choose a folder outside it" in result.output
    assert (ROOT / "grader" / "course" / "release.py").is_file()


def test_release_stops_with_one_line_when_the_reference_fails_its_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(folder: Path) -> dict[str, int]:
        raise PackError(
            "the reference fails its own public check linear.Linear forward: y differs"
            " (fix reference/ or the check before releasing)"
        )

    monkeypatch.setattr("grader.course.student_handout.write_packs", failing)
    result = CliRunner().invoke(cli, ["release", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: the reference fails its own public check linear.Linear forward: y differs"
        " (fix reference/ or the check before releasing)"
    ]


# --- leaks ----------------------------------------------------------------------------------------------


def normalised_functions(path: Path) -> dict[str, str]:
    """{normalised AST dump: 'file:name'} of every function and method in a Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        node = ast.parse(ast.unparse(node)).body[0]  # a copy
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:] or [ast.Pass()]
        node.body, node.name, node.returns, node.decorator_list = body, "_", None, []
        for arg in ast.walk(node.args):
            if isinstance(arg, ast.arg):
                arg.annotation = None
        found[ast.dump(node, annotate_fields=False)] = f"{path}:{node.lineno}"
    return found


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def secret_sources() -> list[Path]:
    """The instructor-only code that writes answers: the reference, the mistake variants, the reference kernels'
    NumPy emulation, the live-only checks (a dropout with a fixed mask) and the solution writer."""
    return (
        python_files(ROOT / "reference")
        + python_files(ROOT / "grader" / "mistakes")
        + [ROOT / "grader" / "course" / "live_checks.py", ROOT / "grader" / "course" / "solution.py"]
    )  # emulation: reference/


def test_no_function_of_the_reference_the_variants_or_the_solution_writer_ships(release: Path) -> None:
    secret: dict[str, str] = {}
    for path in secret_sources():
        secret.update(normalised_functions(path))
    shipped_by_contract: set[str] = set()  # the stubs: base.Module and the constructors, identical by the spec
    for path in python_files(ROOT / "exercises"):
        shipped_by_contract |= set(normalised_functions(path))
    assert len(secret) > 300  # the walk saw the reference and the variants
    leaks = []
    for path in python_files(release / "student"):
        for dump, where in normalised_functions(path).items():
            if dump in secret and dump not in shipped_by_contract:
                leaks.append(f"{where} is {secret[dump]}")
    assert not leaks, leaks


def test_no_file_of_the_reference_the_quiz_sources_or_the_variants_ships(release: Path) -> None:
    secret_files = (
        secret_sources()
        + sorted((ROOT / "quizzes" / "source").iterdir())
        + sorted((ROOT / "reference" / "opencl").glob("*.cl"))
    )
    secret = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in secret_files if p.is_file()}
    stubs = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (ROOT / "exercises").rglob("*") if p.is_file()}
    shipped = [p for p in (release / "student").rglob("*") if p.is_file()]
    same = [
        f"{p} = {secret[h]}"
        for p in shipped
        if (h := hashlib.sha256(p.read_bytes()).hexdigest()) in secret and h not in stubs
    ]
    assert not same, same
    names = {part for p in shipped for part in p.relative_to(release / "student").parts}
    assert not names & {"reference", "mistakes", "solution.py", "source", "checks.py"}


def _texts(value: Any) -> list[str]:
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [str(value)]


def test_the_handout_quizzes_hold_no_answer_digest_or_explanation(release: Path) -> None:
    quiz_dir = release / "student" / "quizzes"
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(quiz_dir.glob("*.json")))
    for locked in quiz_lib.load_all(ROOT / "quizzes"):
        for q in locked.questions:
            assert not q.salt or q.salt not in text  # parameterised questions have no salt
            assert not any(d in text for d in q.digests)
    # Beyond the public question text (prompt, choices) and the ciphertexts, a question holds only its id, kind,
    # points, tolerance, symbol names and subject: no short answer may appear in those.
    rest = {}
    for path in sorted(quiz_dir.glob("*.json")):
        for q in json.loads(path.read_text())["questions"]:
            assert set(q) <= {
                "id",
                "kind",
                "prompt",
                "choices",
                "points",
                "tolerance",
                "symbols",
                "subject",
                "salt",
                "sealed",
                "template",
                "params",
                "practice",
            }, q["id"]
            assert "sealed" not in q or "params" in q, f"{q['id']}: a question with one key for all carries no seal"
            rest[q["id"]] = json.dumps([q.get("symbols"), q.get("subject")])  # the only free text besides the prompt
    checked = 0
    for path in sorted((ROOT / "quizzes" / "source").glob("*.toml")):
        source = quiz_lib.load_source(path)
        for sq in source.questions:
            explanation = str(sq.data.get("explanation", ""))
            for sentence in (s.strip() for s in explanation.split(". ") if len(s.strip()) > 25):
                assert sentence not in text, f"{sq.id}: explanation in plain text"
            if sq.kind == "short":
                for answer in _texts(sq.answer):
                    assert len(answer) < 3 or json.dumps(answer)[1:-1] not in rest[sq.id], f"{sq.id}: {answer!r}"
                    checked += 1
    assert checked > 10
    for path in sorted(quiz_dir.glob("*.json")):
        doc = json.loads(path.read_text())
        for q in doc["questions"]:
            assert not {"answer", "digests", "explanation", "wrong", "reference", "answer_range"} & set(q)


def test_a_practice_seal_opens_for_the_right_answer_only(release: Path) -> None:
    quiz = load_practice(release / "student" / "quizzes" / "activations.json")
    graded = next(q for q in quiz.questions if q.id == "gelu-why")
    assert not graded.sealed
    with pytest.raises(QuizError, match="is graded, not practised"):
        open_seal(graded, "c")
    numeric = next(q for q in quiz.questions if q.id == "gelu-value")
    x = posing.draw_values(numeric.params, posing.PRACTICE_STUDENT, "activations", "gelu-value", numeric.practice)["x"]
    assert f"x = {x}," in numeric.prompt, "the practice prompt shows the practice numbers"
    value = 0.5 * x * (1 + math.erf(x / math.sqrt(2)))
    explanation = open_seal(numeric, repr(value))
    assert explanation is not None and "GELU(" in explanation
    assert open_seal(numeric, repr(value + 0.1)) is None


def test_the_text_pages_judge_each_practice_question_and_no_graded_one(release: Path) -> None:
    """Each question with practice numbers is answered in its section's page (the interval of right answers
    holds the practice answer, which opens its seal, and nothing past it does); a question with one key for
    everyone has no form, and no explanation of one is in the pages."""
    import re as re_

    pages = {p.stem: p.read_text(encoding="utf-8") for p in (release / "student" / "text").glob("*.html")}
    assert (release / "student" / "text" / "assets" / "practice.js").is_file()
    forms = {
        qid: (page, float(low), float(high))
        for page, text in pages.items()
        for qid, low, high in re_.findall(
            r'<form class="practice" data-question="([^"]+)" data-low="([^"]+)" data-high="([^"]+)"', text
        )
    }
    for path in sorted((release / "student" / "quizzes").glob("*.json")):
        quiz = load_practice(path)
        for q in quiz.questions:
            assert (q.id in forms) == bool(q.sealed), q.id
            if q.sealed and q.id in ("gelu-value", "bn-running-var-batches"):
                page, low, high = forms[q.id]
                assert page == quiz.chapter
                assert open_seal(q, repr((low + high) / 2)) is not None
                assert open_seal(q, repr(high + (high - low) / 100)) is None
    assert "grade quiz normalization" in pages["normalization"], "the pointer to `grade quiz` stays"
    everything = "\n".join(pages.values())
    for path in sorted((ROOT / "quizzes" / "source").glob("*.toml")):
        for sq in quiz_lib.load_source(path).questions:
            if "params" not in sq.data:
                for sentence in (s.strip() for s in str(sq.data["explanation"]).split(". ") if len(s.strip()) > 25):
                    assert html.escape(sentence) not in everything, f"{sq.id}: a graded explanation in a page"


# --- the handout on its own -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def handout_grade(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``grade`` of a fresh virtual environment that installed DIR/student alone.

    Its third-party dependencies (NumPy, click, ...) come from this test's
    environment through a .pth line: a folder named in a .pth file is put on
    sys.path, but the .pth files inside it (this repository's editable
    install) are not run, so ``grader`` can only come from the handout.
    """
    venv = tmp_path_factory.mktemp("handout-venv")
    venv.chmod(0o755)  # as any virtual environment: readable by the sandbox's user (mktemp makes it private)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps"]
    # Offline first (the build backend from this environment: needs a setuptools that builds wheels), else
    # pip's isolated build, which fetches setuptools from the package index or pip's cache.
    install = subprocess.run(
        pip + ["--no-index", "--no-build-isolation", str(release / "student")], capture_output=True, text=True, cwd=venv
    )
    if install.returncode != 0:
        install = subprocess.run(pip + [str(release / "student")], capture_output=True, text=True, cwd=venv)
    assert install.returncode == 0, install.stderr[-2000:]
    left = [p.name for p in (release / "student").iterdir() if p.name == "build" or p.name.endswith(".egg-info")]
    assert not left, f"`pip install .` left {left} in the handout"
    probe = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.util as u, grader; print(grader.__file__);"
            " print(u.find_spec('reference'), u.find_spec('grader.mistakes'), u.find_spec('grader.checks'))",
        ],
        capture_output=True,
        text=True,
        cwd=venv,
        check=True,
    )
    where, missing = probe.stdout.splitlines()
    assert where.startswith(str(venv)) and missing == "None None None"
    return venv / "bin" / "grade"


def run_handout(grade: Path, folder: Path, tmp_path: Path, *selectors: str) -> tuple[int, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_DB", "PYTHONPATH")}
    done = subprocess.run(
        [str(grade), "submit", *selectors, "--path", str(folder), "--json", "--db", str(tmp_path / "progress.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_handout_grades_the_stubs_as_not_implemented(handout_grade: Path, release: Path, tmp_path: Path) -> None:
    code, report = run_handout(handout_grade, release / "student" / "exercises", tmp_path)
    assert code == 1 and report["score"] == 0
    assert {e["status"] for e in report["exercises"]} == {"not_implemented"} and len(report["exercises"]) == len(
        EXERCISES
    ), [(e["id"], e["status"], e["checks"][:1]) for e in report["exercises"] if e["status"] != "not_implemented"]


def test_the_handout_passes_a_correct_solution_on_every_public_check(handout_grade: Path, tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "solution")
    code, report = run_handout(handout_grade, folder, tmp_path)
    failing = [(e["id"], c["name"]) for e in report["exercises"] for c in e["checks"] if not c["passed"]]
    assert code == 0 and not failing and report["score"] == report["max_score"]
    mlp = next(e for e in report["exercises"] if e["id"] == "blocks.MLPBlock")
    assert mlp["max_score"] == 7.5  # dropout_train and backward_dropout need the reference: hidden grading only


def test_the_handout_names_a_classic_mistake(handout_grade: Path, tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "solution")
    source = (folder / "normalization.py").read_text()
    assert "bn.momentum * var * m / (m - 1)" in source
    (folder / "normalization.py").write_text(source.replace("bn.momentum * var * m / (m - 1)", "bn.momentum * var"))
    code, report = run_handout(handout_grade, folder, tmp_path, "normalization.BatchNorm1d")
    named = {c["misconception"] for e in report["exercises"] for c in e["checks"]}
    assert code == 1 and "bn-biased-running-var" in named


def test_the_handout_locates_a_shape_crash_offline(handout_grade: Path, tmp_path: Path) -> None:
    """The released case packs carry the reference's shapes (never its values): the installed handout, which has
    no reference, points at the line where the student's shape left the reference's."""
    folder = write_solution(tmp_path / "solution")
    source = (folder / "normalization.py").read_text()
    right, wrong = "var = x.var(axis=axes, keepdims=True)", "var = np.var(x, axis=axes)"
    assert right in source
    text = source.replace(right, wrong, 1)
    (folder / "normalization.py").write_text(text)
    code, report = run_handout(handout_grade, folder, tmp_path, "normalization.LayerNorm")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if wrong in t)
    located = [c["where"] for e in report["exercises"] for c in e["checks"] if "where" in c]
    assert code == 1 and located
    assert all(w == {"file": "normalization.py", "line": line, "code": wrong} for w in located)


def test_the_handout_report_says_which_checks_ran_and_where_the_hidden_ones_run(
    handout_grade: Path, release: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            str(handout_grade),
            "submit",
            "linear",
            "--path",
            str(release / "student" / "exercises"),
            "--db",
            str(tmp_path / "p.db"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1
    assert (
        "Ran the public checks" in done.stdout
        and "hidden checks (your own seeds) run where the reference is" in done.stdout
    )


# --- the Gradescope bundle ------------------------------------------------------------------------------


def autograde(
    release: Path, tmp_path: Path, files: dict[str, str], env_extra: dict[str, str] | None = None
) -> dict[str, Any]:
    """Unzip the bundle into an /autograder-like tree, upload ``files``, run run_autograder, read results.json.

    A test tagged ``not_graded`` (the autograder's machine could not grade it) has no score."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(release / "autograder" / "autograder.zip") as zf:
        zf.extractall(root)
    for name, text in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        "AUTOGRADER_ROOT": str(root),
        "PYTHON": sys.executable,
        **(env_extra or {}),
    }
    done = subprocess.run(["bash", str(root / "run_autograder")], capture_output=True, text=True, env=env, timeout=300)
    results = json.loads((root / "results" / "results.json").read_text())
    assert isinstance(results["score"], (int, float)) and isinstance(results["tests"], list)
    for test in results["tests"]:
        if "not_graded" in test.get("tags", []):
            assert "score" not in test and {"name", "max_score", "output"} <= set(test)
            continue
        assert {"name", "score", "max_score", "output"} <= set(test) and 0 <= test["score"] <= test["max_score"]
    assert results["score"] == pytest.approx(sum(t.get("score", 0.0) for t in results["tests"]))
    results["returncode"] = done.returncode
    results["stderr"] = done.stderr
    return results


def solution_files(tmp_path: Path, prefix: str) -> dict[str, str]:
    folder = write_solution(tmp_path / "sol")
    return {
        f"{prefix}{p.relative_to(folder).as_posix()}": p.read_text()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_gradescope_grades_a_correct_upload_and_its_quiz_answers(release: Path, tmp_path: Path) -> None:
    files = solution_files(tmp_path, "exercises/")
    shown = [
        c.id
        for c in quiz_lib.pose(
            quiz_lib.load_quiz(ROOT / "quizzes" / "activations.json").question("gelu-why"), "student"
        ).choices
    ]  # no metadata: "student"
    files["quiz-answers.toml"] = (
        f'[activations]\ngelu-why = "{shown.index("c") + 1}"\ngelu-min-x = "-0.75"\nsigmoid-max-derivative = "0.3"\n'
    )
    results = autograde(release, tmp_path, files)
    exercises = [t for t in results["tests"] if not t["name"].startswith("quiz ")]
    assert results["returncode"] == 0 and len(exercises) == len(EXERCISES)
    assert all(t["score"] == t["max_score"] == 10 for t in exercises)
    quiz = next(t for t in results["tests"] if t["name"] == "quiz activations")
    assert quiz["score"] == 2 and "sigmoid-max-derivative: Not this one." in quiz["output"]


def test_gradescope_grades_a_partial_upload_of_top_level_files(release: Path, tmp_path: Path) -> None:
    files = {
        name: text for name, text in solution_files(tmp_path, "").items() if name in ("linear.py", "activations.py")
    }
    results = autograde(release, tmp_path, files)
    by_name = {t["name"]: t for t in results["tests"]}
    assert by_name["linear.Linear"]["score"] == 10 and by_name["activations.GELU"]["score"] == 10
    assert by_name["normalization.BatchNorm1d"]["score"] == 0 and results["score"] == 90


@pytest.mark.opencl
def test_gradescope_on_an_image_whose_compiler_does_not_know_the_cpu_leaves_kernels_scoreless(
    release: Path, tmp_path: Path
) -> None:
    """Every kernel build fails as PoCL's does on a CPU its LLVM does not know: the kernel exercises
    are scoreless tests tagged not_graded (never a zero), the rest are graded, the top-level output starts
    with the line that flags the run, extra_data lists them, and run_autograder exits 2."""
    results = autograde(
        release, tmp_path, solution_files(tmp_path, "exercises/"), {"GRADE_OPENCL_FAULT": "unknown-cpu"}
    )
    skipped = [t for t in results["tests"] if "not_graded" in t.get("tags", [])]
    assert [t["name"] for t in skipped] == KERNEL_IDS
    assert all(
        "unknown target CPU 'generic'" in t["output"] and "reruns the autograder" in t["output"] for t in skipped
    )
    graded = [t for t in results["tests"] if "score" in t]
    assert len(graded) == len(CPU_IDS) and all(t["score"] == t["max_score"] == 10 for t in graded)
    assert results["score"] == 10 * len(CPU_IDS)
    assert results["output"].startswith(
        f"NOT GRADED YET: {len(KERNEL_IDS)} exercise(s) ({10 * len(KERNEL_IDS)} points)"
    )
    assert results["extra_data"]["normgrade_not_graded"] == [t["name"] for t in skipped]
    assert results["returncode"] == 2 and "Error: NOT GRADED YET" in results["stderr"]


def test_gradescope_survives_a_crashing_upload(release: Path, tmp_path: Path) -> None:
    files = solution_files(tmp_path, "")
    files["normalization.py"] = "import os\nos._exit(3)\n"
    files["linear.py"] = "def broken(:\n"
    results = autograde(release, tmp_path, files)
    by_name = {t["name"]: t for t in results["tests"]}
    assert by_name["normalization.LayerNorm"]["score"] == 0 and by_name["linear.Linear"]["score"] == 0
    assert by_name["activations.ReLU"]["score"] == 10
    empty = autograde(release, tmp_path / "empty", {"notes.txt": "nothing here"})
    assert empty["score"] == 0 and empty["tests"] == [] and "no exercise files" in empty["output"]
    shutil.rmtree(tmp_path / "empty")


def test_the_handout_quiz_practice_session(release: Path) -> None:
    from grader.student.cli import cli as student_cli

    quiz_dir = release / "student" / "quizzes"
    listing = CliRunner().invoke(student_cli, ["quiz", "--quiz-dir", str(quiz_dir)])
    assert listing.exit_code == 0 and "activations: " in listing.output
    quiz = load_practice(quiz_dir / "activations.json")
    first = quiz.questions[0]
    assert first.id == "gelu-why"
    answers = ["2", "zzz", ""] + [""] * (len(quiz.questions) - 1)  # kept; unreadable then skipped; skips
    session = CliRunner().invoke(
        student_cli, ["quiz", "activations", "--quiz-dir", str(quiz_dir)], input="\n".join(answers) + "\n"
    )
    assert session.exit_code == 0, session.output
    assert (
        "nothing is recorded" in session.output and "Question 1/" in session.output and " gelu-why [" in session.output
    )
    assert "not checked here" in session.output and "Kept." in session.output and "Skipped." in session.output
    assert " gelu-why [single] (§activations.gelu): " in session.output, "the section beside the quizzes (text/)"
    unknown = CliRunner().invoke(student_cli, ["quiz", "nope", "--quiz-dir", str(quiz_dir)])
    assert unknown.exit_code == 2 and "is not a quiz chapter" in unknown.output


# --- a release at --level derive -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def derive_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release-derive")
    result = CliRunner().invoke(cli, ["release", "--out", str(out), "--level", "derive"])
    assert result.exit_code == 0, result.output
    assert f"{len(EXERCISES)} at derive" in result.output
    return out


def run_handout_in_place(student: Path, folder: Path, tmp_path: Path, *selectors: str) -> dict[str, Any]:
    """The handout's own grader (its ``grader/`` first on the path, not this repository's) grading ``folder``."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_DB", "PYTHONPATH")}
    env["PYTHONPATH"] = str(student)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.student.cli",
            "submit",
            *selectors,
            "--path",
            str(folder),
            "--json",
            "--db",
            str(tmp_path / "p.db"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_a_derive_release_records_its_levels_and_ships_derive_stubs(derive_release: Path) -> None:
    manifest = json.loads((derive_release / "manifest.json").read_text())
    assert manifest["scaffolding"]["level"] == "derive"
    assert set(manifest["scaffolding"]["by_exercise"].values()) == {"derive"}
    levels = json.loads((derive_release / "student" / "grader" / "student" / "engine" / "scaffolding.json").read_text())
    assert levels["exercises"] == manifest["scaffolding"]["by_exercise"]
    stub = (derive_release / "student" / "exercises" / "normalization.py").read_text()
    assert "m / (m - 1)" not in stub and "[guided]" not in stub and "UNBIASED" in stub
    with zipfile.ZipFile(derive_release / "autograder" / "autograder.zip") as zf:
        assert json.loads(zf.read("source/grader/student/engine/scaffolding.json")) == levels
        assert zf.read("source/exercises/normalization.py").decode() == stub


def test_a_derive_handout_grades_its_stubs_as_not_implemented(derive_release: Path, tmp_path: Path) -> None:
    report = run_handout_in_place(derive_release / "student", derive_release / "student" / "exercises", tmp_path)
    assert report["score"] == 0 and len(report["exercises"]) == len(EXERCISES)
    assert {e["status"] for e in report["exercises"]} == {"not_implemented"}


def test_a_derive_handout_names_a_mistake_by_its_hint_not_its_formula(derive_release: Path, tmp_path: Path) -> None:
    folder = write_solution(tmp_path / "solution")
    source = (folder / "normalization.py").read_text()
    (folder / "normalization.py").write_text(source.replace("bn.momentum * var * m / (m - 1)", "bn.momentum * var"))
    report = run_handout_in_place(derive_release / "student", folder, tmp_path, "normalization.BatchNorm1d")
    checks = [c for e in report["exercises"] for c in e["checks"] if c["misconception"] == "bn-biased-running-var"]
    assert checks, report
    for check in checks:
        assert "the contract asks for the unbiased one" in check["message"]
        assert "m / (m - 1)" not in check["message"] and "Fix:" not in check["message"]


# --- the handout's README: how to start, where to hand in, what counts -----------------------------------


def test_the_handout_readme_runs_as_written_and_states_the_course(release: Path) -> None:
    readme = (release / "student" / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0].strip().splitlines()
    assert quick == ["python3 -m venv .venv && .venv/bin/pip install '.[opencl]'", ".venv/bin/grade submit"]
    commands = [
        line.split("#")[0].strip()
        for line in readme.splitlines()
        if "grade " in line and line.lstrip().startswith((".venv/bin/grade", "grade "))
    ]
    assert commands and all(c.startswith(".venv/bin/grade ") for c in commands), commands  # never a bare `grade`
    from grader.student.cli import cli as student_cli

    named = {c.split()[1] for c in commands}
    assert named - {"--help"} <= set(student_cli.commands), named  # each is a command of the handout's grade
    assert "## Handing in: Gradescope" in readme and "quiz-answers.toml" in readme  # no course: Gradescope
    assert "## Allowed imports" in readme and "not SciPy" in readme
    assert "| activations | 16 |" in readme  # the quiz chapters with their questions and attempts
    for phrase in (
        "--html report.html",
        "grade view",
        "## Notebooks",
        "normalization.ipynb",
        "jupyter notebook",
        ".venv/bin/pip install '.[notebook]'",
    ):
        assert phrase in readme, phrase
    declared = tomllib.loads((release / "student" / "pyproject.toml").read_text())
    assert any(d.startswith("notebook>=") for d in declared["project"]["optional-dependencies"]["notebook"])
    settings = json.loads((release / "student" / "grader" / "student" / "course.json").read_text())
    assert settings["hand_in"] == "gradescope" and settings["server"] is None


def test_the_handout_readme_s_reading_commands_run_as_written(handout_grade: Path, release: Path) -> None:
    """The README's `grade read` lines, run by the handout's own grade from the handout's folder: the section
    prints with its checkpoint, and --html names the page, which holds the section's practice questions."""
    readme = (release / "student" / "README.md").read_text()
    reads = [line.split("#")[0].strip() for line in readme.splitlines() if line.startswith(".venv/bin/grade read")]
    assert len(reads) == 3, reads
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_DB", "PYTHONPATH")}
    out = {}
    for line in reads:
        done = subprocess.run(
            [str(handout_grade), *line.split()[1:]],
            capture_output=True,
            text=True,
            cwd=release / "student",
            env=env,
            timeout=120,
        )
        assert done.returncode == 0 and not done.stderr, (line, done.stderr)
        out[line] = done.stdout
    listing, section, page = out.values()
    assert "normalization.batchnorm-forward  BatchNorm forward" in listing
    assert section.startswith("BatchNorm forward  (§normalization.batchnorm-forward") and "Checkpoint:" in section
    url = page.strip().rsplit(" ", 1)[-1]
    assert url.startswith("file://") and url.endswith("/text/normalization.html#batchnorm-forward")


def test_the_hand_in_section_follows_the_course(tmp_path: Path) -> None:
    from grader.course.student_handout import deadlines_text, hand_in_text
    from grader.student.course import Course, load_course

    path = tmp_path / "course.toml"
    path.write_text(
        'hand_in = "both"\n[server]\nurl = "https://grader.example.org"\n[[chapter]]\nname = "init"\n'
        "due = 2026-12-01T23:59:00Z\nlate_penalty = 0.25\nlate_until = 2026-12-08T23:59:00Z\n"
    )
    course = load_course(path)
    title, text, where, _ = hand_in_text(course)
    assert title == "the course server and Gradescope" and "https://grader.example.org" in text
    assert ".venv/bin/grade login" in text and "quiz-answers.toml" in text and "Gradescope" in where
    assert '.venv/bin/grade regrade EXERCISE "why"' in text  # docs/term.md's regrades, from the handout
    assert "**Your page in the browser**: https://grader.example.org/student/." in text  # where the page is
    assert "the same report and pictures as `grade submit --html`" in " ".join(text.split())  # what it shows
    assert "/student/" not in hand_in_text(Course(hand_in="gradescope"))[1]  # no course server, no page there
    assert "| init | init | - | 2026-12-01 23:59 UTC | counts 75% | 2026-12-08 23:59 UTC | at once |" in deadlines_text(
        course
    )


def test_the_readme_says_exams_quiz_chapters_totals_and_rescoring_as_they_work() -> None:
    """Issue 43: the handout README's deadlines say an exam chapter's feedback time (and that Gradescope's results
    hold it too), which chapter holds a quiz of another name, which total is an upload's and which the course's,
    and that a rescoring needs no downtime."""
    from grader.course.student_handout import deadlines_text
    from grader.student.course import load_course

    text = " ".join(deadlines_text(load_course(ROOT / "docs" / "course.example.toml")).split())
    assert "| initialisation | init | 2026-12-10 09:00 UTC |" in text and "exam: 2026-12-10 14:00 UTC |" in text
    assert "Exam chapters (initialisation)" in text and "Gradescope" not in text  # hand_in = "server"
    assert "dropout-weight-decay (chapter dropout), universal-approximation (chapter approximation)" in text
    assert '("This upload: ...")' in text and '("Course: ...", every exercise' in text
    assert "while the server goes on taking uploads" in text


def test_the_course_file_goes_into_the_gradescope_bundle(tmp_path: Path) -> None:
    """The bundle's graded quizzes read the course's [quiz] attempts and due dates from source/course.toml
    (grader/course/gradescope.py): `grade release --course` puts the file there; without one, none is there."""
    import zipfile

    from grader.course.gradescope_bundle import write_autograder

    path = tmp_path / "course.toml"
    path.write_text('[quiz]\nattempts = 3\n[[chapter]]\nname = "init"\ndue = 2026-12-01T23:59:00Z\n')
    members = write_autograder(tmp_path / "with", course_file=path)
    assert "source/course.toml" in members
    with zipfile.ZipFile(tmp_path / "with" / "autograder" / "autograder.zip") as zf:
        assert zf.read("source/course.toml").decode() == path.read_text()
    assert "source/course.toml" not in write_autograder(tmp_path / "without")
