"""The OpenAPI description (grader/server/openapi.py) covers every JSON route, and describes nothing else."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from starlette.routing import Route

from grader.server import app as api
from grader.server import openapi, web
from grader.server.app import ServerConfig
from grader.server.web import create_app

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def routes_of(table: list[Any]) -> set[tuple[str, str]]:
    return {
        (m.lower(), openapi.PATH_PARAM.sub(lambda g: "{" + g.group(1) + "}", r.path))
        for r in table
        if isinstance(r, Route)
        for m in (r.methods or set()) - {"HEAD"}
    }


@pytest.fixture
def doc(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The description as the server publishes it (GET /api/v1/openapi.json)."""
    (tmp_path / "quizzes").mkdir()
    app = create_app(
        ServerConfig(tmp_path / "course.db", f"sqlite:///{tmp_path / 'queue.db'}", quiz_dir=tmp_path / "quizzes"),
        run_collector=False,
    )
    with TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.get("/api/v1/openapi.json")
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        yield answer.json()


def described(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method, path) for path, ops in doc["paths"].items() for method in ops}


def test_every_api_route_is_described_and_every_described_route_exists(doc: dict[str, Any]) -> None:
    served = routes_of(web.routes(with_lti=False))
    api_routes = {(m, p) for m, p in served if p.startswith(api.API_PREFIX)}
    assert api_routes <= described(doc), f"not described: {sorted(api_routes - described(doc))}"
    assert described(doc) <= served, f"described but not served: {sorted(described(doc) - served)}"
    assert ("get", "/api/v1/openapi.json") in described(doc) and len(api_routes) == len(web.API_TABLE) + 2


def test_the_lti_json_routes_are_described_when_mounted() -> None:
    table = web.routes(with_lti=True)
    doc = openapi.describe(table, api.API_PREFIX, {}, "c", "v")
    assert {("get", "/lti/jwks"), ("get", "/lti/config")} <= described(doc) <= routes_of(table)
    assert not any(
        p.startswith("/lti/")
        for _, p in described(openapi.describe(web.routes(with_lti=False), api.API_PREFIX, {}, "c", "v"))
    )


def test_bodies_parameters_and_security_come_from_the_handlers(doc: dict[str, Any]) -> None:
    paths = doc["paths"]
    for path, ops in paths.items():
        for method, op in ops.items():
            if method == "post" and path.startswith(api.API_PREFIX):
                assert "requestBody" in op, f"POST {path} declares no body (grader/server/api_schema.py @takes)"
    assert paths["/api/v1/health"]["get"]["security"] == [] and paths["/api/v1/me"]["get"]["security"] == [
        {"bearer": []}
    ]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    wait = [p for p in paths["/api/v1/submissions/{id}"]["get"]["parameters"] if p["name"] == "wait"]
    assert wait and wait[0]["schema"]["maximum"] == api.MAX_WAIT_S
    upload = paths["/api/v1/submissions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert upload["required"] == ["files"]


def test_the_description_is_read_by_an_openapi_tool(doc: dict[str, Any]) -> None:
    """schemathesis reads every operation of it (each parameter, body and security scheme) without an error."""
    schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[test]' installs schemathesis")
    operations = [result.ok() for result in schemathesis.openapi.from_dict(doc).get_all_operations()]
    assert len(operations) == len(described(doc))
