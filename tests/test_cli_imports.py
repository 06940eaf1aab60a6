"""`grade submit` imports what grading needs, not the modules of the other commands (batch, quiz, server, report).

Each command imports its own modules inside its function (grader/cli.py), so a
local `grade submit` of one exercise does not pay for SymPy, Jinja2, httpx,
the batch's process pool or the server. The command runs in a subprocess (a
fresh interpreter) that writes its ``sys.modules`` at exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grader.course.solution import write_solution

REPO = Path(__file__).resolve().parent.parent

# Modules (and their submodules) that only other commands need.
NOT_FOR_A_LOCAL_SUBMIT = (
    "grader.term.batch",
    "grader.quiz",
    "grader.term.progress",
    "grader.server",
    "grader.term.class_report",
    "grader.course.release",
    "grader.course.release_files",
    "grader.course.student_handout",
    "grader.course.gradescope_bundle",
    "sympy",
    "jinja2",
    "httpx",
    "huey",
    "redis",
    "uvicorn",
    "starlette",
    "pyopencl",
    # the pictures' page and the notebook front end: only --html, grade view and %grade draw
    "grader.student.feedback.report_html",
    "grader.student.feedback.drawing",
    "grader.student.feedback.svg",
    "grader.student.feedback.notebook",
    "IPython",
    "ipywidgets",
)

# `python -m grader ARGS...` that writes the sorted names of sys.modules to the file given before ARGS.
WRAPPER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules)) + "\\n"))
runpy.run_module("grader", run_name="__main__", alter_sys=True)
"""


def imported_by(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -m grader ARGS`` from this checkout; its result and the modules it had imported at exit."""
    listing = tmp_path / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(listing), *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    return done, set(listing.read_text().split())


# The command line of `grade serve/worker/roster` (registered by every `grade`) is not the server.
SERVER_COMMAND_LINE = ("grader.server", "grader.server.cli")


def unwanted(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m not in SERVER_COMMAND_LINE and any(m == n or m.startswith(n + ".") for n in NOT_FOR_A_LOCAL_SUBMIT)
    )


def test_local_submit_of_one_exercise_imports_only_what_grading_needs(tmp_path: Path) -> None:
    solution = tmp_path / "solution"
    write_solution(solution)
    done, modules = imported_by(
        tmp_path,
        "submit",
        "activations.ReLU",
        "--path",
        str(solution),
        "--student",
        "x",
        "--db",
        str(tmp_path / "x.db"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED" in done.stdout and "activations.ReLU" in done.stdout and "10/10" in done.stdout
    assert "grader.course.grading" in modules and "numpy" in modules  # it did grade here
    assert unwanted(modules) == []


def test_help_imports_none_of_the_commands_modules(tmp_path: Path) -> None:
    done, modules = imported_by(tmp_path, "--help")
    assert done.returncode == 0 and "submit" in done.stdout and "quiz" in done.stdout
    assert unwanted(modules) == []


def test_quiz_dir_environment_variable_is_the_quiz_librarys() -> None:
    """grader/cli.py names $GRADE_QUIZ_DIR without importing grader.quiz (Jinja2)."""
    import grader.cli
    import grader.quiz

    assert grader.cli.QUIZ_DIR_ENV == grader.quiz.QUIZ_DIR_ENV


def test_the_command_line_loads_without_numpy_so_workers_start_first() -> None:
    """`grade submit` starts its sandboxed workers before the grading pipeline loads NumPy (they load theirs
    meanwhile): the CLI module, the store and the sandbox import without NumPy (sqlite-utils would pull it in)
    and without importlib.metadata (the version is looked up when recorded or asked for)."""
    code = (
        "import sys, grader.cli, grader.student.store, grader.student.sandbox.runner\n"
        "print(sorted(m for m in sys.modules if m == 'numpy'\n"
        "             or m.startswith(('numpy.', 'sqlite_utils', 'importlib.metadata'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


ENV_WRAPPER = """
import atexit, os, runpy, sys
out = sys.argv.pop(1)
names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
atexit.register(lambda: open(out, "w").write(" ".join(os.environ.get(n, "-") for n in names)))
runpy.run_module("grader", run_name="__main__", alter_sys=True)
"""


def test_the_command_pins_the_maths_libraries_to_one_thread_unless_told_otherwise(tmp_path: Path) -> None:
    """OpenBLAS's idle pool threads spun on the core a worker needed and cost ~30 ms at every exit:
    `grade` pins its own process to one BLAS/OpenMP thread, and an explicit count is left alone."""
    out = tmp_path / "threads.txt"
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    done = subprocess.run(
        [sys.executable, "-c", ENV_WRAPPER, str(out), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "1 1 1"
    done = subprocess.run(
        [sys.executable, "-c", ENV_WRAPPER, str(out), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=dict(env, OPENBLAS_NUM_THREADS="4"),
    )
    assert out.read_text() == "4 1 1"


def test_the_command_freezes_the_collector_before_the_interpreter_exits(tmp_path: Path) -> None:
    """The interpreter's last collections over NumPy's and the grader's objects cost 20 ms per `grade submit`:
    the console script freezes them (gc.freeze) once the command is done; atexit handlers still run."""
    out = tmp_path / "frozen.txt"
    wrapper = (
        "import atexit, gc, runpy, sys\nout = sys.argv.pop(1)\n"
        "atexit.register(lambda: open(out, 'w').write(str(gc.get_freeze_count())))\n"
        "runpy.run_module('grader', run_name='__main__', alter_sys=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, str(out), "--help"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert int(out.read_text()) > 10_000
