"""The commands that read: `grade read` (a section of the course text, :func:`read_section`; built for an
:class:`~grader.student.commands.edition.Edition`) and `grade view` (the last report as a web page), and
:func:`text_sections`, where each checkpoint question sits in the text."""

from __future__ import annotations

import json
from pathlib import Path

import click

from grader.student.feedback.kept import kept_late_shares, last_report_path, write_html_report
from grader.student.submit import CommandError, exercises_dir, one_line_errors
from grader.student.commands.edition import Edition, command_help
from grader.student.commands.options import path_option

DEFAULT_TEXT_DIR = Path("text")


def read_command(edition: Edition) -> click.Command:
    """`grade read`: a section of the course text, as text or (``--html``) its page."""

    @click.command(
        "read",
        help=command_help(
            """Read a section of the course text (list the sections without CHAPTER.SECTION).

    Reports, stubs and ERRATA.md cite sections as §chapter.section, e.g.
    `grade read normalization.batchnorm-backward`. Each section ends with its
    checkpoint: the quiz questions that check it (`grade quiz CHAPTER`).""",
            edition,
            "read",
        ),
    )
    @click.argument("address", required=False, metavar="[CHAPTER.SECTION]")
    @click.option("--html", "as_html", is_flag=True, help="Open the section's page in your web browser instead.")
    @click.option("--no-open", is_flag=True, help="With --html: print where the page is; do not start a browser.")
    @click.option(
        "--text-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_TEXT_DIR,
        show_default=True,
        help="The course text's folder (text/).",
    )
    def command(address: str | None, as_html: bool, no_open: bool, text_dir: Path) -> None:
        pages = edition.text_pages(text_dir) if as_html and edition.text_pages is not None else None
        read_section(address, text_dir, as_html, no_open, pages)

    return command


@click.command("view")
@path_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the page [default: .grade/last-report.html beside the exercises folder].",
)
@click.option("--no-open", is_flag=True, help="Write the page and print its path; do not start a browser.")
def view_command(path: Path, output: Path | None, no_open: bool) -> None:
    """Open the last `grade submit` report in your web browser, with a picture of each failing check."""
    from grader.student.client.wire import report_from_dict

    path = exercises_dir(path)
    source = last_report_path(path)
    try:
        kept = json.loads(source.read_text(encoding="utf-8"))
        report, shares = report_from_dict(kept), kept_late_shares(kept)
    except FileNotFoundError:
        raise CommandError(f"no report yet beside '{path}': run `grade submit` first (or pass --path)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"the last report '{source}' cannot be read ({exc}): run `grade submit` again") from None
    page = output or source.with_suffix(".html")
    with one_line_errors():
        write_html_report(report, page, shares, path)  # it says where it wrote the page
    if not no_open:
        import webbrowser

        if not webbrowser.open(page.resolve().as_uri()):
            click.echo("No browser could be started here: open that file in one.", err=True)


def read_section(address: str | None, text_dir: Path, as_html: bool, no_open: bool, pages: Path | None = None) -> None:
    """``grade read``: list the sections (no ``address``), print one as text, or open its page (``as_html``: the
    chapter's page in ``pages``, by default the built pages beside the Markdown in ``text_dir``)."""
    from grader.student import coursetext

    with one_line_errors():
        try:
            chapters = coursetext.load_chapters(text_dir)
        except (OSError, coursetext.TextError) as exc:
            raise CommandError(str(exc)) from None
        if not chapters:
            raise CommandError(
                f"no course text in '{text_dir}': run this from your handout's folder, or pass "
                "--text-dir to its text/ folder"
            )
        if address is None:
            for chapter in chapters.values():
                click.echo(f"{chapter.name}: {chapter.title}")
                for section in chapter.sections:
                    click.echo(f"  {section.address}  {section.title}")
            click.echo("Read one: grade read CHAPTER.SECTION (--html: its page in your browser)")
            return
        try:
            section = coursetext.find_section(chapters, address)
        except coursetext.TextError as exc:
            raise CommandError(str(exc)) from None
        if not as_html:
            click.echo(coursetext.section_text(section, chapters[section.chapter].title), nl=False)
            return
        page = (pages or text_dir) / f"{section.chapter}.html"
        if not page.is_file():
            raise CommandError(
                f"no page {page}: the handout's text/ holds the built pages (`grade release` "
                "builds them); without --html the section prints here"
            )
        url = page.resolve().as_uri() + f"#{section.id}"
        click.echo(f"The section is at {url}")
        if not no_open:
            import webbrowser

            if not webbrowser.open(url):
                click.echo("No browser could be started here: open that address in one.", err=True)


def text_sections(text_dir: Path) -> dict[str, str]:
    """Each checkpoint question's section in the course text beside the quizzes (the handout's ``text/``); {} when
    there is none to read (the practice then says "the chapter")."""
    from grader.student import coursetext

    try:
        return coursetext.checkpoint_sections(coursetext.load_chapters(text_dir))
    except (OSError, coursetext.TextError):
        return {}
