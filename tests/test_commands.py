"""Both `grade` programs: every command is defined once (the instructor's reuses the handout's definitions),
and each program's `grade --help` lists the commands docs/design.md names for it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
from click.testing import CliRunner

from grader.cli import cli as instructor_cli
from grader.student.cli import cli as handout_cli

ROOT = Path(__file__).resolve().parents[1]


def defined_commands(root: Path) -> dict[str, list[str]]:
    """Command name -> where it is defined under ``root``: each ``click.command("name")`` or
    ``click.group("name")`` call, and each ``@GROUP.command("name")`` / ``@GROUP.group("name")`` decorator."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        decorators = {
            id(d)
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for d in f.decorator_list
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("command", "group")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            on_click = isinstance(node.func.value, ast.Name) and node.func.value.id == "click"
            if on_click or id(node) in decorators:
                found.setdefault(node.args[0].value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_command_is_defined_twice() -> None:
    twice = {name: places for name, places in defined_commands(ROOT / "grader").items() if len(places) > 1}
    assert not twice, f"commands defined in more than one place: {twice}"


def test_every_command_of_both_programs_is_found_by_the_walk() -> None:
    """The walk above sees every command the programs register (none is made some other way)."""
    defined = defined_commands(ROOT / "grader")
    for group in (handout_cli, instructor_cli):
        assert set(group.commands) <= set(defined)


def test_the_instructor_reuses_every_command_of_the_handout() -> None:
    """Each command the handout ships is the handout's definition in the instructor's program too."""
    assert set(handout_cli.commands) <= set(instructor_cli.commands)
    for name, command in handout_cli.commands.items():
        theirs = instructor_cli.commands[name]
        assert command.callback is not None and theirs.callback is not None
        assert (theirs.callback.__module__, theirs.callback.__qualname__) == (
            command.callback.__module__,
            command.callback.__qualname__,
        ), name


def listed(help_text: str) -> set[str]:
    """The command names of a click group's --help (its Commands: section)."""
    section = help_text.split("Commands:", 1)[1]
    return {line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()}


def documented(program: str) -> set[str]:
    """The commands docs/design.md lists for "The handout's" or "The instructor's" `grade` (one bullet each)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    bullet = re.search(rf"^- {program} `grade`:(.*?)(?=^- |^$)", text, re.S | re.M)
    assert bullet is not None, f"docs/design.md lists no commands for {program} `grade`"
    return set(re.findall(r"`([a-z]+)`", bullet.group(1)))


def test_each_program_help_lists_what_the_docs_say() -> None:
    for program, group in (("The handout's", handout_cli), ("The instructor's", instructor_cli)):
        shown = CliRunner().invoke(group, ["--help"])
        assert shown.exit_code == 0, shown.output
        names = listed(shown.output)
        assert names == set(group.commands)
        if program == "The handout's":
            assert names == documented(program)
        else:  # "those" (the handout's), then the instructor's own
            assert names == documented(program) | documented("The handout's")


def test_a_command_of_one_program_only_keeps_its_options_out_of_the_other() -> None:
    """The edition's own options: --format on the instructor's submit, --save-answers on the handout's quiz."""

    def options(group: click.Group, name: str) -> set[str]:
        return {o for p in group.commands[name].params for o in p.opts}

    assert "--format" in options(instructor_cli, "submit") and "--format" not in options(handout_cli, "submit")
    assert "--save-answers" in options(handout_cli, "quiz") and "--save-answers" not in options(instructor_cli, "quiz")
    assert "--queue" in options(instructor_cli, "doctor") and "--queue" not in options(handout_cli, "doctor")
