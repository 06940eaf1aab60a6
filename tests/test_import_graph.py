"""grader's modules import one another in one direction: no circle, and each package only the ones below it.

Every module under ``grader/`` and ``reference/`` is parsed, never imported,
with the walker of ``tests/test_boundary.py`` (module-level imports and those
inside functions alike, relative ones resolved, ``importlib.import_module``
literals, and those under ``if TYPE_CHECKING:``). An import is an edge to the
module it names: ``from P import x`` to ``P.x`` when that is a module, else to
``P``. The packages it passes through are not edges (``import grader.quiz.bank``
runs ``grader/quiz/__init__`` first, which imports ``bank`` again: that is how
packages work, not a circle). Type-only imports are edges too: they never run,
but a reader follows them as any other, so a type two modules share lives
below both.

The layers, bottom up, are the map at the top of docs/design.md:

    grader.student                  ships to students; imports nothing else of grader (tests/test_boundary.py)
    reference                       the reference; imports grader.student only (the OpenCL device choice)
    grader.quiz, grader.mistakes    need the reference: quiz keys and judging, the known mistakes' variants
    grader.course                   needs the reference: live grading, case packs, release, Gradescope
    the server's queue              grader.server.{records,jobs,collector,supervisor,selftest}: uploads, the Huey
                                    queue, recording results; batch and rescore grade through it too
    grader.term                     the instructor's term: batch, class report, extensions, rescore...
    grader.server                   the course server's web side: API, dashboard, pages, LTI
    the command lines               grader/__init__.py, __main__.py, cli.py; grader.term.cli, grader.server.cli

A module may import its own layer and those below it; the few imports up a
layer are named in :data:`UPWARD`, each with its reason. The test fails on
any other one, and on a named one that is gone (so the list stays true).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from test_boundary import _module_name as module_name
from test_boundary import imported_names

ROOT = Path(__file__).resolve().parents[1]

# Bottom up; a module belongs to the layer of the longest name here that contains it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("grader.student",),
    ("reference",),
    ("grader.quiz", "grader.mistakes"),
    ("grader.course",),
    ("grader.queue",),
    ("grader.term",),
    ("grader.server",),
    ("grader", "grader.term.cli", "grader.server.cli"),
)

# (importing module, imported module): the imports that go up a layer, and why each is allowed.
UPWARD: dict[tuple[str, str], str] = {}


def modules_under(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of the named top-level packages under ``root``, by dotted name."""
    return {module_name(p, root): p for top in packages for p in sorted((root / top).rglob("*.py"))}


def module_of(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module an imported name lies in (its longest dotted prefix that is a module), None outside."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def import_edges(modules: Mapping[str, Path], root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {module it imports: first line}, among ``modules`` (files under ``root``).

    ``from P import x`` gives the walker both ``P`` and ``P.x``: the bare ``P`` is the package passed
    through, not an edge, when another name of that line lies inside it.
    """
    edges: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        by_line: dict[int, list[str]] = {}
        for line, imported in imported_names(path, root):
            by_line.setdefault(line, []).append(imported)
        mine = edges.setdefault(name, {})
        for line, names in sorted(by_line.items()):
            for imported in names:
                target = module_of(imported, modules)
                passed_through = any(
                    other.startswith(imported + ".") and module_of(other, modules) != target for other in names
                )
                if target is not None and target != name and not passed_through:
                    mine.setdefault(target, line)
    return edges


def circles(edges: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                members.append(top)
                if top == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(edges):  # (the recursion is as deep as the longest chain of imports: a few dozen)
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of a module's package (the longest package name that contains it)."""
    best, best_len = -1, -1
    for level, packages in enumerate(LAYERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and len(package) > best_len:
                best, best_len = level, len(package)
    assert best >= 0, f"{module} is in no layer"
    return best


def upward_edges(edges: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, str], int]:
    """(importer, imported) -> line, for every import of a higher layer."""
    return {
        (src, dst): line
        for src, targets in edges.items()
        for dst, line in targets.items()
        if layer_of(dst) > layer_of(src)
    }


@pytest.fixture(scope="module")
def edges() -> dict[str, dict[str, int]]:
    return import_edges(modules_under(ROOT, ("grader", "reference")))


def test_no_module_of_grader_or_reference_is_in_an_import_circle(edges: dict[str, dict[str, int]]) -> None:
    found = circles(edges)
    assert not found, "import circles (each module reaches the others): " + "; ".join(" <-> ".join(c) for c in found)


def test_imports_go_down_the_layers_except_the_named_ones(edges: dict[str, dict[str, int]]) -> None:
    upward = upward_edges(edges)
    unnamed = [
        f"{src} (line {line}) imports {dst}" for (src, dst), line in sorted(upward.items()) if (src, dst) not in UPWARD
    ]
    assert not unnamed, "imports up the layers of docs/design.md's map: " + "; ".join(unnamed)
    gone = sorted(set(UPWARD) - set(upward))
    assert not gone, f"named in UPWARD but no longer imported (remove them): {gone}"


def test_the_walk_sees_function_level_imports_and_every_layer(edges: dict[str, dict[str, int]]) -> None:
    assert "grader.student.feedback.report_html" in edges["grader.student.feedback.kept"]  # inside a function
    assert "grader.student.feedback.notebook" in edges["grader"]  # the notebook hook, inside a function
    assert {layer_of(m) for m in edges} == set(range(len(LAYERS)))
    assert "grader.quiz.params" in edges["grader.quiz.bank"] and "grader.quiz" not in edges["grader.quiz.bank"]


# --- the checks themselves, on a made-up package ----------------------------------------------------------------


def edges_of_package(root: Path, files: dict[str, str]) -> dict[str, dict[str, int]]:
    """The import edges of a made-up ``grader`` package written under ``root`` (file name -> text)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_edges(modules_under(root, ("grader",)), root)


def test_a_circle_through_a_function_level_import_is_found_and_moving_the_shared_piece_down_ends_it(
    tmp_path: Path,
) -> None:
    files = {
        "grader/__init__.py": "",
        "grader/student/__init__.py": "",
        "grader/student/cli.py": "from grader.student.client import remote\n",
        "grader/student/client/__init__.py": "",
        "grader/student/client/remote.py": "def f():\n    from ..cli import save\n",
    }
    edges = edges_of_package(tmp_path / "before", files)
    assert circles(edges) == [["grader.student.cli", "grader.student.client.remote"]]
    files["grader/student/kept.py"] = "import json\n"
    files["grader/student/cli.py"] += "from grader.student import kept\n"
    files["grader/student/client/remote.py"] = "def f():\n    from ..kept import save\n"
    assert circles(edges_of_package(tmp_path / "after", files)) == []


def test_a_type_only_import_is_an_edge_so_a_type_shared_both_ways_is_a_circle(tmp_path: Path) -> None:
    files = {
        "grader/__init__.py": "",
        "grader/checks.py": "from grader import generic\n\n\nclass Context:\n    pass\n",
        "grader/generic.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from grader.checks import Context\n",
    }
    assert circles(edges_of_package(tmp_path / "a", files)) == [["grader.checks", "grader.generic"]]
    files["grader/generic.py"] = "from typing import Protocol\n\n\nclass Context(Protocol):\n    pass\n"
    assert circles(edges_of_package(tmp_path / "b", files)) == []


def test_a_package_reexporting_its_modules_is_no_circle_unless_one_reads_the_package(tmp_path: Path) -> None:
    files = {
        "grader/__init__.py": "",
        "grader/quiz/__init__.py": "from grader.quiz.bank import load\nFORMAT = 1\n",
        "grader/quiz/params.py": "",
        "grader/quiz/bank.py": "from grader.quiz import params\n",
    }
    assert circles(edges_of_package(tmp_path / "a", files)) == []
    files["grader/quiz/bank.py"] = "from grader.quiz import params, FORMAT\n"  # FORMAT: grader/quiz/__init__ itself
    assert circles(edges_of_package(tmp_path / "b", files)) == [["grader.quiz", "grader.quiz.bank"]]


def test_an_import_up_the_layers_is_found_with_its_line(tmp_path: Path) -> None:
    edges = edges_of_package(
        tmp_path,
        {
            "grader/__init__.py": "",
            "grader/course/__init__.py": "",
            "grader/course/packs.py": "import json\n\n\ndef f():\n    import importlib\n    importlib.import_module('grader.server.app')\n",
            "grader/server/__init__.py": "",
            "grader/server/app.py": "from grader.course import packs\n",
        },
    )
    assert upward_edges(edges) == {("grader.course.packs", "grader.server.app"): 6}


def test_the_map_at_the_top_of_design_md_draws_every_layer() -> None:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert text.index("## The package map") < text.index("## One submission, followed through the layers")
    drawn = text.split("## The package map", 1)[1].split("```")[1]  # the map's picture
    for packages in LAYERS:
        for package in packages:
            if package != "grader":
                assert package.replace(".", "/").split("/")[-1] in drawn, f"the map does not draw {package}"
    rows = [
        drawn.index(f"\n {folder}")
        for folder in (
            "grader/student/",
            "reference/",
            "grader/course/",
            "grader/term/",
            "grader/server/",
            "command lines",
        )
    ]
    assert rows == sorted(rows, reverse=True)  # drawn bottom up
    assert len(drawn.strip().splitlines()) <= 40  # one screen


def test_design_md_is_one_page_that_links_the_rest_beside_what_it_describes() -> None:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 100
    rest = sorted(p.name for p in (ROOT / "docs" / "design").glob("*.md"))
    assert rest and all(f"](design/{name})" in text for name in rest), rest


def test_grader_holds_entry_points_and_packages_and_the_student_side_a_short_top() -> None:
    """The map stays readable: grader/ itself holds only its entry points, grader/student/ a dozen modules at most."""
    assert sorted(p.name for p in (ROOT / "grader").glob("*.py")) == ["__init__.py", "__main__.py", "cli.py"]
    assert len(list((ROOT / "grader" / "student").glob("*.py"))) <= 12
