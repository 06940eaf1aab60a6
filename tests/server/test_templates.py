"""Every template of grader/templates rendered with hostile values, through the environment the server renders it
with: no raw markup reaches the page.

The server has one jinja2 environment (grader.term.class_report.environment: autoescape for every template,
whatever its name); Starlette's ``Jinja2Templates`` of the pages and the LTI routes use it. A value of the
:class:`Hostile` kind stands for every variable: a string of markup that also answers attribute and item access,
iteration (pairs, or the charts' triples), arithmetic and comparison, so each template renders whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import pytest

from grader.server import lti, pages
from grader.term.class_report import environment

TEMPLATES = Path(__file__).resolve().parents[2] / "grader" / "templates"
PAYLOADS = ("<script>alert(1)</script>", '"><meta http-equiv=refresh content=0;url=//evil>')
HOSTILE = "".join(PAYLOADS)
TRIPLES = ("x_ticks", "points")  # the charts' lists of (x, text, anchor) and (x, y, tip); every other loop takes pairs


class Hostile(str):
    """The hostile string, which also acts as any object a template reads (see the module docstring)."""

    depth: int = 0

    def __new__(cls, depth: int = 0) -> "Hostile":
        value = super().__new__(cls, HOSTILE)
        value.depth = depth
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in TRIPLES:
            return Triples([(Hostile(9), Hostile(9), Hostile(9))])
        return Hostile(self.depth + 1)

    def __getitem__(self, key: Any) -> "Hostile":
        return Hostile(self.depth + 1)

    def __iter__(self) -> Any:
        if self.depth < 9:  # two of everything, nine levels down (a loop's items unpack as pairs)
            yield Hostile(self.depth + 1)
            yield Hostile(self.depth + 1)

    def __call__(self, *args: Any, **kwargs: Any) -> "Hostile":
        return Hostile(self.depth + 1)

    def __add__(self, other: Any) -> Any:
        return (
            Hostile(self.depth)
            if isinstance(other, Hostile) or not isinstance(other, str)
            else str.__add__(self, other)
        )

    def __radd__(self, other: Any) -> Any:
        return Hostile(self.depth) if not isinstance(other, str) else other + str(self)

    def __mul__(self, other: Any) -> float:  # type: ignore[override]
        return 0.0

    __rmul__ = __truediv__ = __rtruediv__ = __sub__ = __rsub__ = __mul__  # type: ignore[assignment]

    def __float__(self) -> float:
        return 0.0

    def __int__(self) -> int:
        return 0

    def __round__(self, digits: int = 0) -> int:
        return 0

    def __lt__(self, other: Any) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__


class Triples(list):
    """A chart's list of triples that is also read as a number elsewhere (a quiz question's ``points``)."""

    def __float__(self) -> float:
        return 0.0

    def __int__(self) -> int:
        return 0


def variables(env: jinja2.Environment, name: str) -> set[str]:
    """The names a template reads, with those of the templates it extends, includes or imports."""
    names: set[str] = set()
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        assert env.loader is not None
        tree = env.parse(env.loader.get_source(env, current)[0])
        names |= jinja2.meta.find_undeclared_variables(tree)
        todo += [t for t in jinja2.meta.find_referenced_templates(tree) if t]
    return names - set(env.globals)


def server_environments() -> list[jinja2.Environment]:
    """Every environment the server renders a template with (the pages', the LTI routes', the dashboard's)."""
    return [pages.TEMPLATES.env, lti.TEMPLATES.env, environment()]


def test_the_server_has_one_environment_that_escapes_every_template() -> None:
    envs = server_environments()
    assert all(env is envs[0] for env in envs)
    for path in TEMPLATES.glob("*.j2"):
        autoescape = envs[0].autoescape
        assert autoescape(path.name) if callable(autoescape) else autoescape, path.name


@pytest.mark.parametrize("name", sorted(p.name for p in TEMPLATES.glob("*.j2")))
def test_every_template_renders_hostile_values_as_text(name: str) -> None:
    for env in {id(e): e for e in server_environments()}.values():
        page = env.get_template(name).render(**{v: Hostile() for v in variables(env, name)})
        for payload in PAYLOADS:
            assert payload not in page, f"{name}: {payload} appears unescaped"
