"""grader.student.engine.loader: a student folder loaded as the package ``exercises``, and the static import scan."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.student.engine.loader import (
    TopicNotFound,
    load_exercises,
    local_dependencies,
    load_topic,
    package_folder,
    scan_forbidden_imports,
    student_files,
    unload,
)

PACKAGE = "h6_loader_pkg"  # a private name, so the repository's `exercises` is never shadowed


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A tiny student folder: an __init__ that must not run, base.py, two topics importing relatively."""
    root = tmp_path / "student"
    root.mkdir()
    (root / "__init__.py").write_text("raise RuntimeError('__init__ must not be executed')\n")
    (root / "base.py").write_text("class Module:\n    training = True\n")
    (root / "layers.py").write_text(
        textwrap.dedent(
            """
            from .base import Module

            class Double(Module):
                def forward(self, x):
                    return 2 * x
            """
        )
    )
    (root / "blocks.py").write_text(
        textwrap.dedent(
            """
            from .layers import Double

            def quadruple(x):
                return Double().forward(Double().forward(x))
            """
        )
    )
    yield root
    unload(PACKAGE)


def write(folder: Path, name: str, source: str) -> None:
    (folder / name).write_text(textwrap.dedent(source))


def test_package_loads_without_running_init(folder: Path) -> None:
    pkg = load_exercises(folder, name=PACKAGE)
    assert pkg.__name__ == PACKAGE
    assert package_folder(pkg) == folder.resolve()
    assert sys.modules[PACKAGE] is pkg
    assert f"{PACKAGE}.layers" not in sys.modules  # nothing imported yet


def test_topics_import_lazily_with_relative_imports(folder: Path) -> None:
    pkg = load_exercises(folder, name=PACKAGE)
    assert pkg.blocks.quadruple(3) == 12
    assert isinstance(pkg.layers.Double(), pkg.base.Module)
    assert f"{PACKAGE}.layers" in sys.modules


def test_load_topic_explicitly(folder: Path) -> None:
    pkg = load_exercises(folder, name=PACKAGE)
    module = load_topic(pkg, "layers")
    assert module.Double().forward(1.5) == 3.0


def test_missing_topic_is_an_attribute_error(folder: Path) -> None:
    pkg = load_exercises(folder, name=PACKAGE)
    with pytest.raises(TopicNotFound, match="no file normalization.py"):
        load_topic(pkg, "normalization")
    assert not hasattr(pkg, "__wrapped__")


def test_syntax_error_in_one_file_leaves_the_others_loadable(folder: Path) -> None:
    write(folder, "broken.py", "def f(:\n    pass\n")
    pkg = load_exercises(folder, name=PACKAGE)
    with pytest.raises(SyntaxError):
        load_topic(pkg, "broken")
    assert pkg.blocks.quadruple(1) == 4


def test_reloading_another_folder_replaces_the_package(folder: Path, tmp_path: Path) -> None:
    first = load_exercises(folder, name=PACKAGE)
    assert first.layers.Double().forward(1) == 2
    other = tmp_path / "other"
    other.mkdir()
    write(other, "layers.py", "class Double:\n    def forward(self, x):\n        return 'other'\n")
    second = load_exercises(other, name=PACKAGE)
    assert second.layers.Double().forward(1) == "other"


def test_scan_of_a_clean_folder_is_empty(folder: Path) -> None:
    assert scan_forbidden_imports(folder) == {}


@pytest.mark.parametrize(
    "source, package",
    [
        ("import reference\n", "reference"),
        ("import numpy as np, grader.student.engine.compare\n", "grader"),
        ("from reference.normalization import *\n", "reference"),
        ("from grader import ops\n", "grader"),
        ("mod = __import__('reference')\n", "reference"),
        ("import importlib\nm = importlib.import_module('grader.student.engine.compare')\n", "grader"),
        (
            "from importlib import import_module\n\ndef f():\n    return import_module('reference.linear')\n",
            "reference",
        ),
    ],
)
def test_scan_reports_forbidden_imports(folder: Path, source: str, package: str) -> None:
    write(folder, "normalization.py", source)
    problems = scan_forbidden_imports(folder)
    assert list(problems) == ["normalization.py"]
    assert f"imports {package!r}" in problems["normalization.py"]
    assert "scores zero" in problems["normalization.py"]


def test_scan_reports_the_line(folder: Path) -> None:
    write(folder, "linear.py", "import numpy as np\n\n\nfrom reference import linear\n")
    assert "linear.py line 4 imports 'reference'" in scan_forbidden_imports(folder)["linear.py"]


@pytest.mark.parametrize(
    "source",
    [
        "from . import reference_notes\n",  # relative: the student's own file
        "from .grader_utils import helper\n",
        "import numpy.linalg as references\n",  # a name that only starts alike
        "name = 'reference'\n",
    ],
)
def test_scan_accepts_lookalikes(folder: Path, source: str) -> None:
    write(folder, "normalization.py", source)
    assert scan_forbidden_imports(folder) == {}


def test_scan_refuses_packages_beyond_numpy_and_the_standard_library(folder: Path) -> None:
    write(
        folder, "activations.py", "import math\nimport functools\nimport numpy as np\nfrom scipy.special import erf\n"
    )
    write(folder, "linear.py", "import references\n")  # starts like 'reference', is neither it nor allowed
    write(folder, "init.py", "import math, statistics\nfrom collections import abc\n")
    problems = scan_forbidden_imports(folder)
    assert problems["activations.py"] == (
        "activations.py line 4 imports 'scipy': a submission may import only numpy and the Python standard "
        "library (math, functools, ...), so this file scores zero; remove the import"
    )
    assert "imports 'references': a submission may import only numpy" in problems["linear.py"]
    assert "init.py" not in problems


def test_scan_reports_syntax_errors_with_file_and_line(folder: Path) -> None:
    write(folder, "normalization.py", "import numpy as np\n\n\ndef forward(x):\n    return x +\n")
    problems = scan_forbidden_imports(folder)
    assert problems["normalization.py"] == "normalization.py line 5: invalid syntax"


def test_local_dependencies_are_transitive(folder: Path) -> None:
    write(folder, "solo.py", "import numpy as np\nfrom collections import OrderedDict\n")
    write(folder, "pair.py", "from . import blocks, base\n")
    deps = local_dependencies(folder)
    assert deps["blocks.py"] == {"layers.py", "base.py"}
    assert deps["layers.py"] == {"base.py"}
    assert deps["pair.py"] == {"blocks.py", "layers.py", "base.py"}
    assert deps["solo.py"] == set()
    assert deps["base.py"] == set()


def test_student_files_skip_caches_inside_the_folder_only(tmp_path: Path) -> None:
    """A folder kept under a directory named __pycache__ is still scanned; its own caches are not."""
    folder = tmp_path / "__pycache__" / "exercises"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "linear.py").write_text("import reference\n")
    (folder / "__pycache__" / "stale.py").write_text("x = 1\n")
    assert [p.name for p in student_files(folder)] == ["linear.py"]
    assert "linear.py" in scan_forbidden_imports(folder)
