"""Running a Markdown page's shell blocks as a reader would, with Sybil (tests/docs/test_docs_run.py).

Sybil parses a page into regions: every fenced block (``FenceParser``) and the ``<!-- skip: next "reason" -->``
comments (Sybil's own ``SkipParser``). A ```` ```sh ```` block is run line by line by :class:`Page`, in the
page's scratch course; a fence without a language fails (each block says what it is: ``sh`` runs, ``text``,
``toml``, ``python``, ``ipython``, ``json`` are read); the others are left to the tests of what they hold.

How a line runs (:meth:`Page.run_line`), as typed into a terminal:

- every block starts in the page's folder (the course, or the handout); comments and blank lines are
  skipped; ``cd DIR`` (alone, or before ``&&``) moves the working folder for the rest of the block;
- the placeholders the text shows are filled (``EXERCISE``, ``CHAPTER``, ``ID``, ``[EXERCISE|TOPIC ...]``,
  ``HOST:6379``, and the port 8000 of the example course), nothing else is changed;
- what a command asks for on its standard input is typed (the token for ``grade login``, answers for
  ``grade quiz``);
- a command that serves until stopped (``grade serve``, ``grade worker``, ``jupyter notebook``) is started in
  the background, as in a second terminal, waited for until it answers, and stopped at the end of the page
  (or when the next one of its kind starts);
- every other command must end with the status the docs give it (0; 1 too for ``grade submit``,
  ``grade quiz`` and ``grade result``, "short of full marks"), and print no traceback.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import SkipTest

import httpx
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

RUN_TIMEOUT_S = 900  # one command (an install of the notebook extra is the longest)
READY_TIMEOUT_S = 180  # a server to answer
SHORT_OF_FULL_MARKS = re.compile(r"\bgrade (submit|quiz|result)\b")  # exit 1: "not full marks yet"
LANGUAGES_READ = ("text", "toml", "python", "ipython", "json")  # blocks that are read, not run (tests/docs checks toml)


# --- Sybil: the page's regions ----------------------------------------------------------------------------


class FenceParser:
    """Every fenced block: ``sh`` runs (:func:`run_shell_block`), a bare fence fails, the rest is read."""

    def __init__(self) -> None:
        self.lexer = FencedCodeBlockLexer(language=r"[\w-]*", mapping={"language": "language", "source": "source"})

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            language = region.lexemes["language"]
            if language == "sh":
                region.parsed = region.lexemes["source"]
                region.evaluator = run_shell_block
                yield region
            elif language not in LANGUAGES_READ:
                region.parsed = language
                region.evaluator = unknown_block
                yield region


def run_shell_block(example: Example) -> None:
    page: Page = example.namespace["page"]
    page.run_block(str(example.parsed), f"{Path(example.path).name}:{example.line}")


def unknown_block(example: Example) -> None:
    raise AssertionError(
        f"{example.path}:{example.line}: a fenced block marked {example.parsed!r}: mark it ```sh "
        f"(a shell block: it runs) or one of {', '.join(LANGUAGES_READ)} (read only)"
    )


SYBIL = Sybil(parsers=[SkipParser(), FenceParser()])
SKIP_WITHOUT_REASON = re.compile(r"<!--+\s*skip:?\s*next\s*-+->")


def run_page(path: Path, page: "Page") -> list[str]:
    """Run every example of the page at ``path`` in order in ``page``; the skipped blocks, with their reasons."""
    text = path.read_text(encoding="utf-8")
    assert not SKIP_WITHOUT_REASON.search(text), f"{path}: a skip without a written reason"
    document = SYBIL.parse(path)
    document.namespace["page"] = page
    skipped = []
    for example in document.examples():
        try:
            example.evaluate()
        except SkipTest as reason:
            skipped.append(f"{path.name}:{example.line}: {reason}")
    return skipped


# --- the reader's terminal --------------------------------------------------------------------------------


@dataclass
class Daemon:
    """A command that serves until stopped: how to know it, and when it is ready (its log so far -> bool)."""

    pattern: re.Pattern[str]
    kind: str
    ready: Callable[[str], bool]


def _answers(url_pattern: str, path: str = "") -> Callable[[str], bool]:
    """Ready once the log names a URL matching ``url_pattern`` that answers 200 (with ``path`` appended)."""

    def ready(log: str) -> bool:
        found = re.findall(url_pattern, log)
        if not found:
            return False
        try:
            return httpx.get(found[-1] + path, timeout=5, follow_redirects=True).status_code == 200
        except httpx.TransportError:
            return False

    return ready


DAEMONS = [
    Daemon(re.compile(r"\bgrade serve\b"), "serve", _answers(r"Serving .*? at (http://[\d.]+:\d+)", "/api/v1/")),
    Daemon(re.compile(r"\bgrade worker\b"), "worker", lambda log: True),
    Daemon(
        re.compile(r"\bjupyter notebook\b"),
        "notebook",
        _answers(r"(http://(?:127\.0\.0\.1|localhost):\d+/tree\?token=\w+)"),
    ),
]


@dataclass
class Page:
    """A reader's terminal in a scratch course: the folder every block starts in (a ``cd`` holds to the end of
    its block), the environment, what runs in the background."""

    base: Path
    env: dict[str, str]
    placeholders: list[tuple[str, Callable[[], str]]] = field(default_factory=list)
    stdin: list[tuple[re.Pattern[str], Callable[[], str]]] = field(default_factory=list)
    logs: Path | None = None
    ran: list[str] = field(default_factory=list)  # "file:line: command -> status"
    outputs: list[str] = field(default_factory=list)
    running: dict[str, tuple[subprocess.Popen[bytes], Path]] = field(default_factory=dict)
    cwd: Path = Path()

    # -- placeholders and input ------------------------------------------------------------------------

    def fill(self, line: str) -> str:
        for pattern, value in self.placeholders:
            if re.search(pattern, line):

                def replace(_: re.Match[str], value: Callable[[], str] = value) -> str:
                    return value()  # once per match, as a placeholder's value may differ each time

                line = re.sub(pattern, replace, line)
        return line

    def input_for(self, line: str) -> str:
        command = " ".join(shlex.split(line, comments=True))
        return next((value() for pattern, value in self.stdin if pattern.search(command)), "")

    def last_submission(self) -> str:
        found = re.findall(r"Submission (\d+) received by", "\n".join(self.outputs))
        assert found, "the page asks for a submission ID before any `grade submit` handed one in"
        return found[-1]

    # -- running -----------------------------------------------------------------------------------------

    def run_block(self, source: str, where: str) -> None:
        self.cwd = self.base
        for number, raw in enumerate(source.splitlines()):
            line = raw.strip()
            if line and not line.startswith("#"):
                self.run_line(line, f"{where}+{number + 1}")

    def run_line(self, line: str, where: str) -> None:
        line = self.fill(line)
        cd = re.match(r"cd\s+(\S+)\s*(?:&&\s*(.*))?$", line)
        if cd:
            self.cwd = (self.cwd / cd.group(1)).resolve()
            assert self.cwd.is_dir(), f"{where}: `cd {cd.group(1)}`: no such folder {self.cwd}"
            if not cd.group(2):
                return
            line = cd.group(2)
        command = " ".join(shlex.split(line, comments=True))  # what runs, without its comment
        daemon = next((d for d in DAEMONS if d.pattern.search(command)), None)
        if daemon is not None:
            self.start(daemon, line, where)
            return
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=self.cwd,
            env=self.env,
            input=self.input_for(line),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        output = done.stdout + done.stderr
        self.outputs.append(output)
        self.ran.append(f"{where}: {line} -> {done.returncode}")
        allowed = {0, 1} if SHORT_OF_FULL_MARKS.search(command) else {0}
        assert done.returncode in allowed, (
            f"{where}: `{line}` exited {done.returncode} in {self.cwd}:\n{output[-3000:]}"
        )
        assert "Traceback (most recent call last)" not in output, (
            f"{where}: `{line}` printed a traceback:\n{output[-3000:]}"
        )

    def start(self, daemon: Daemon, line: str, where: str) -> None:
        """Start a command that serves until stopped, as in another terminal; wait until it answers."""
        self.stop(daemon.kind)  # the reader stops the one before (Ctrl-C) before starting another
        assert self.logs is not None
        log = self.logs / f"{daemon.kind}-{len(self.ran)}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                ["bash", "-c", f"exec {line}"],
                cwd=self.cwd,
                env=self.env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.running[daemon.kind] = (proc, log)
        self.ran.append(f"{where}: {line} -> started")
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not daemon.ready(log.read_text(errors="replace")):
            assert proc.poll() is None, f"{where}: `{line}` exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"{where}: `{line}` did not answer in {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.2)
        time.sleep(1.0)  # still there a moment later (a worker that cannot reach its queue exits at once)
        assert proc.poll() is None, f"{where}: `{line}` exited {proc.returncode}:\n{log.read_text()[-3000:]}"

    def url_of(self, kind: str) -> str:
        """The URL a running daemon of ``kind`` printed (the course server's)."""
        proc, log = self.running[kind]
        found = re.findall(r"Serving .*? at (http://[\d.]+:\d+)", log.read_text(errors="replace"))
        assert found, f"no URL in the log of {kind}"
        return found[-1]

    def stop(self, kind: str | None = None) -> None:
        """Stop the daemons of ``kind`` (all: None) and everything they started (their process group)."""
        for name in [k for k in self.running if kind is None or k == kind]:
            proc, _ = self.running.pop(name)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
