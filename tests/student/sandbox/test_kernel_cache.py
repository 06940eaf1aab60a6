"""A student's built kernels are kept between their own `grade submit` runs, and never shared.

PoCL spends ~0.3 s starting its compiler and ~0.1 s per kernel file in every
fresh sandbox; ``Limits.kernel_cache`` keeps its cache in
``<exercises>/../.grade/kernels/<student hash>`` for `grade submit` of one's
own code. Other people's code (Gradescope, `grade batch`, the server) gets a
fresh cache in the sandbox's tmpfs, as before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import require_program
from grader.cli import cli
from grader.course.solution import write_solution
from grader.student.sandbox import bwrap, runner as sandbox
from grader.student.sandbox.runner import KERNEL_CACHE_BYTES, Limits, kernel_cache_folder


def cache_files(project: Path) -> list[Path]:
    return (
        [p for p in (project / ".grade" / "kernels").rglob("*") if p.is_file()] if (project / ".grade").exists() else []
    )


def test_one_folder_per_student_beside_the_progress_database(tmp_path: Path) -> None:
    (tmp_path / "exercises").mkdir()
    amy = kernel_cache_folder(tmp_path / "exercises", "amy")
    bob = kernel_cache_folder(tmp_path / "exercises", "bob")
    assert amy is not None and bob is not None and amy != bob
    assert Path(amy).parent == tmp_path / ".grade" / "kernels" and Path(amy).is_dir()
    assert kernel_cache_folder(tmp_path / "exercises", "amy") == amy  # the same one next time
    assert kernel_cache_folder(tmp_path / "missing", "amy") is None
    assert not (tmp_path / ".grade" / "missing").exists()


def test_a_link_planted_where_the_cache_goes_is_not_used(tmp_path: Path) -> None:
    """A hand-in's folder may carry a .grade/kernels/<hash> link to anywhere: it is never bound or handed over."""
    (tmp_path / "exercises").mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    mode = target.stat().st_mode
    folder = Path(str(kernel_cache_folder(tmp_path / "exercises", "amy")))
    folder.rmdir()
    folder.symlink_to(target)
    assert kernel_cache_folder(tmp_path / "exercises", "amy") is None
    kernels = tmp_path / ".grade" / "kernels"
    for entry in list(kernels.iterdir()):
        entry.unlink()
    kernels.rmdir()
    kernels.symlink_to(target)  # a link higher up
    assert kernel_cache_folder(tmp_path / "exercises", "amy") is None
    assert target.stat().st_mode == mode and target.stat().st_uid == os.geteuid() and list(target.iterdir()) == []


def test_a_cache_grown_past_its_size_is_emptied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "exercises").mkdir()
    folder = Path(str(kernel_cache_folder(tmp_path / "exercises", "amy")))
    (folder / "AB").mkdir()
    (folder / "AB" / "program.bc").write_bytes(b"x" * 2000)
    monkeypatch.setattr(sandbox, "KERNEL_CACHE_BYTES", 4000)
    assert kernel_cache_folder(tmp_path / "exercises", "amy") == str(folder)
    assert (folder / "AB" / "program.bc").exists()
    (folder / "AB" / "other.so").write_bytes(b"x" * 3000)
    assert kernel_cache_folder(tmp_path / "exercises", "amy") == str(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert KERNEL_CACHE_BYTES >= 16 << 20


def test_hand_over_gives_every_entry_to_the_new_uid_without_following_links(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("handing a folder over to another uid needs root (as the grader run as root does)")
    folder = tmp_path / "cache"
    (folder / "AB").mkdir(parents=True)
    (folder / "AB" / "program.bc").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.write_text("not the cache's")
    (folder / "link").symlink_to(outside)
    uid = bwrap.fresh_uid()
    sandbox.hand_over(str(folder), uid)
    assert {p.lstat().st_uid for p in [folder, *folder.rglob("*")]} == {uid}
    assert outside.stat().st_uid == os.geteuid()


def test_only_kernel_workers_get_the_cache_and_only_when_given_one(tmp_path: Path) -> None:
    env = bwrap.environment(bwrap.BUNDLE_MOUNT)
    plain = bwrap.wrap(["python"], tmp_path, 1 << 20, env)
    assert "--bind" not in plain and bwrap.KERNEL_CACHE_MOUNT not in plain
    kept = bwrap.wrap(["python"], tmp_path, 1 << 20, env, kernel_cache=str(tmp_path / "c"))
    at = kept.index("--bind")
    assert kept[at + 1 : at + 3] == [str(tmp_path / "c"), bwrap.KERNEL_CACHE_MOUNT]
    assert Limits().kernel_cache is None  # batch, server, Gradescope: a fresh cache in the sandbox


@pytest.mark.opencl
def test_resubmitting_reuses_the_built_kernels_and_gives_the_same_verdicts(tmp_path: Path) -> None:
    """Run as root, each sandbox has a fresh uid: the second run must still be able to use (and update)
    what the first one's uid wrote (without hand_over every kernel failed to build)."""
    require_program("bwrap", "bubblewrap")
    write_solution(tmp_path / "exercises")
    args = [
        "submit",
        "kernels.relu_forward",
        "kernels.gelu_forward",
        "--path",
        str(tmp_path / "exercises"),
        "--student",
        "amy",
        "--db",
        str(tmp_path / "p.db"),
    ]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    built = cache_files(tmp_path)
    assert any(p.name.endswith(".bc") for p in built), built
    for _ in range(2):
        again = CliRunner().invoke(cli, args)
        assert again.exit_code == 0, again.output
        assert again.output.count("PASSED") == 2


@pytest.mark.opencl
def test_other_peoples_code_never_keeps_a_kernel_cache(tmp_path: Path) -> None:
    write_solution(tmp_path / "class" / "amy" / "exercises")
    batch = CliRunner().invoke(
        cli, ["batch", str(tmp_path / "class"), "kernels.relu_forward", "--db", str(tmp_path / "c.db"), "--no-sandbox"]
    )
    assert batch.exit_code == 0, batch.output
    gradescope = CliRunner().invoke(
        cli,
        [
            "submit",
            "kernels.relu_forward",
            "--path",
            str(tmp_path / "class" / "amy" / "exercises"),
            "--format",
            "gradescope",
            "-o",
            str(tmp_path / "results.json"),
            "--no-sandbox",
        ],
    )
    assert gradescope.exit_code == 0, gradescope.output
    assert not (tmp_path / "class" / "amy" / ".grade" / "kernels").exists()


@pytest.mark.opencl
def test_an_edited_kernel_file_is_built_again_not_served_from_the_kept_cache(tmp_path: Path) -> None:
    """The cache is keyed by the source: a wrong edit fails, and putting the right code back passes again."""
    require_program("bwrap", "bubblewrap")
    write_solution(tmp_path / "exercises")
    kernels = tmp_path / "exercises" / "kernels" / "activations.cl"
    right = kernels.read_text()
    assert "y[i] = fmax(x[i], 0.0f);" in right
    args = [
        "submit",
        "kernels.relu_forward",
        "--path",
        str(tmp_path / "exercises"),
        "--student",
        "amy",
        "--db",
        str(tmp_path / "p.db"),
    ]
    assert CliRunner().invoke(cli, args).exit_code == 0
    kernels.write_text(right.replace("y[i] = fmax(x[i], 0.0f);", "y[i] = fmax(x[i], 0.5f);", 1))
    wrong = CliRunner().invoke(cli, args)
    assert wrong.exit_code == 1 and "PASSED" not in wrong.output, wrong.output
    kernels.write_text(right)
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "PASSED" in again.output, again.output
