"""The `grade` command line: thin click commands over the grader library.

Each command parses its options, calls one library function and turns the
library's named exceptions into one-line errors (exit 2 for usage/setup
errors, as the exercise contract says).
"""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="normgrade")
def cli() -> None:
    """Grade your implementations of deep-network building blocks and track your progress."""


# --- submit / progress (store+report helper) ---------------------------------


# --- quiz (quiz helper) ------------------------------------------------------


# --- batch / report (class helper) -------------------------------------------


# --- bench (lead) -------------------------------------------------------------


def main() -> None:
    """Console-script entry point."""
    cli()
