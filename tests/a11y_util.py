"""Accessibility checks in the browser: axe-core (from its npm package) run in a Playwright page, and the Tab key.

axe-core is pinned in ``tests/a11y/package.json`` (and its lock file) and
installed by the project's own command, ``make a11y-deps`` (``npm ci --prefix
tests/a11y``), into ``tests/a11y/node_modules`` (ignored by git, never
committed). :func:`axe_source` runs that same command when the folder is
missing, so a plain ``pytest`` works on a machine with npm; without npm the
tests that need axe skip with the reason (under CI=true they fail).

:func:`violations` injects axe into a page and runs the WCAG 2.0, 2.1 and 2.2
rules of levels A and AA (``WCAG_TAGS``); :func:`describe` makes a readable
failure message of what it found (rule, impact, the elements and what to fix). :func:`unreached_by_tab`
presses Tab through a page and names the controls it never reaches (axe cannot tell).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

A11Y_DIR = Path(__file__).resolve().parent / "a11y"
AXE_JS = A11Y_DIR / "node_modules" / "axe-core" / "axe.min.js"
WCAG_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa")
INSTALL = ["npm", "ci", "--prefix", str(A11Y_DIR), "--no-audit", "--no-fund"]  # what `make a11y-deps` runs


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@lru_cache(maxsize=1)
def _install() -> str | None:
    """Install axe-core with npm (``make a11y-deps``) when it is missing; None, or why it could not be."""
    if AXE_JS.exists():
        return None
    if shutil.which("npm") is None:
        return "axe-core is not installed and npm is missing (Debian package npm; then `make a11y-deps`)"
    done = subprocess.run(INSTALL, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not AXE_JS.exists():
        return f"`{' '.join(INSTALL)}` failed: {(done.stderr or done.stdout).strip()[-300:]}"
    return None


def axe_source() -> str:
    """The text of axe.min.js (installed first when missing; skips the test when it cannot be)."""
    problem = _install()
    if problem is not None:
        _missing(problem)
    return AXE_JS.read_text(encoding="utf-8")


RUN_AXE = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, tags: v.tags,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 200), summary: n.failureSummary}))
  }));
}"""


def violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's WCAG 2.2 A/AA violations on the page as it is now (each: id, impact, help, nodes)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())  # an evaluation of the DevTools protocol: the page's CSP does not apply
    return list(page.evaluate(RUN_AXE, list(WCAG_TAGS)))


def describe(found: list[dict[str, Any]], where: str = "") -> str:
    """A failure message: each violated rule with its impact, help and up to 5 of its elements."""
    lines = [f"{len(found)} WCAG A/AA violation(s){' on ' + where if where else ''}:"]
    for v in found:
        lines.append(f"- {v['id']} ({v['impact']}): {v['help']}")
        for node in v["nodes"][:5]:
            lines.append(f"    {node['target']}: {node['html']}")
            lines.append("      " + " ".join(str(node["summary"] or "").split())[:300])
    return "\n".join(lines)


def assert_accessible(page: Any, where: str) -> None:
    """No axe-core violation of WCAG 2.2 A/AA on the page (the message lists them)."""
    found = violations(page)
    assert not found, describe(found, where)


# --- the keyboard ---------------------------------------------------------------------------------------


MARK_CONTROLS = """() => {
  const controls = Array.from(document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea, [tabindex="0"]'))
    .filter(c => !c.disabled && c.checkVisibility());  // not in a closed <details>, a hidden row or column
  controls.forEach((c, i) => { c.dataset.kbd = String(i); });
  // a radio group is one stop of the Tab key (its radios are chosen with the arrows): one key per group
  return controls.map(c => c.type === 'radio' ? 'radio:' + c.form.action + ':' + c.name : String(c.dataset.kbd));
}"""


def focus_ring(page: Any) -> tuple[str, str]:
    return tuple(
        page.evaluate(
            "(() => { const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth]; })()"
        )
    )


def unreached_by_tab(page: Any) -> list[str]:
    """The controls the page shows (a radio group counting once) that pressing Tab from the top never focuses;
    every one it focuses must show a visible focus ring (an outline)."""
    keys = page.evaluate(MARK_CONTROLS)
    page.evaluate("document.activeElement && document.activeElement.blur()")
    reached: set[str] = set()
    for _ in range(len(keys) + 3):
        page.keyboard.press("Tab")
        index = page.evaluate("document.activeElement && document.activeElement.dataset.kbd")
        if index is None:
            continue
        reached.add(keys[int(index)])
        style, width = focus_ring(page)
        assert style != "none" and width != "0px", f"control {keys[int(index)]} has no visible focus"
    return [k for k in dict.fromkeys(keys) if k not in reached]
