"""The OpenAPI 3.1 description of the server's JSON routes, served at ``GET /api/v1/openapi.json``.

Built from the running application's route table, never kept by hand: every route under ``/api/`` and every
other route whose handler declares itself (grader/server/api_schema.py ``@takes``: the LTI JSON) is an
operation; its parameters come from its path (``{id}``), and its body, query and headers from the handler's
declaration; who may call it from the API table (grader/server/app.py ``API``: "anyone" needs no token, every
other route a bearer token). The fuzzing tier (tests/server/test_fuzz_api.py) runs schemathesis against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from grader.server import api_schema
from grader.server import app as api
from grader.server.api_schema import Schema

OPENAPI_PATH = "/openapi.json"  # under API_PREFIX
PATH_PARAM = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")
ERROR: Schema = {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}


def json_routes(routes: Iterable[BaseRoute], api_prefix: str) -> list[Route]:
    """The routes described: every route under ``api_prefix``, and every other one whose handler declares itself."""
    return [
        r
        for r in routes
        if isinstance(r, Route) and (r.path.startswith(api_prefix) or api_schema.declared(r.endpoint) is not None)
    ]


def operation(route: Route, method: str, who: str) -> dict[str, Any]:
    """One operation: summary (the handler's first docstring line), parameters, body, security, responses."""
    takes = api_schema.declared(route.endpoint) or api_schema.Declared()
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": takes.path.get(name, api_schema.TEXT)}
        for name in PATH_PARAM.findall(route.path)
    ]
    params += [{"name": name, "in": "query", "required": False, "schema": s} for name, s in takes.query.items()]
    params += [{"name": name, "in": "header", "required": False, "schema": s} for name, s in takes.headers.items()]
    doc = (route.endpoint.__doc__ or "").strip()
    op: dict[str, Any] = {
        "operationId": f"{method.lower()} {route.path}",
        "summary": doc.splitlines()[0] if doc else route.path,
        "description": f"Who may call it: {who}.",
        "parameters": params,
        "security": [] if who == "anyone" else [{"bearer": []}],
        "responses": {
            "2XX": {"description": "the answer", "content": {"application/json": {"schema": {"type": "object"}}}},
            "4XX": {
                "description": "refused: one line saying what was wrong and what to do",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            },
        },
    }
    if takes.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": takes.body}}}
    return op


def describe(
    routes: Iterable[BaseRoute], api_prefix: str, who: dict[tuple[str, str], str], title: str, version: str
) -> dict[str, Any]:
    """The OpenAPI document of ``routes``; ``who`` maps (method, path) to who may call it ("anyone": no token)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in json_routes(routes, api_prefix):
        public = (api_schema.declared(route.endpoint) or api_schema.Declared()).public
        path = PATH_PARAM.sub(lambda m: "{" + m.group(1) + "}", route.path)
        for method in sorted((route.methods or set()) - {"HEAD"}):
            caller = "anyone" if public else who.get((method, path), "any token")
            paths.setdefault(path, {})[method.lower()] = operation(route, method, caller)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"{title}: the normgrade course server",
            "version": version,
            "description": 'Every error is {"error": "<one line>"} with a 4xx status (docs/server.md).',
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "a student's or the instructor's token"}
            },
            "schemas": {"Error": ERROR},
        },
    }


@api_schema.takes(public=True)
async def openapi_json(request: Request) -> Response:
    """GET /openapi.json: the OpenAPI 3.1 description of the JSON routes (generated from the route table)."""
    st = api.state(request)
    who = {(m, api.API_PREFIX + p): w for m, p, _, w in api.api_table(request)}
    who[("GET", api.API_PREFIX + "/")] = "anyone"
    return JSONResponse(describe(request.app.routes, api.API_PREFIX, who, st.config.course.name, st.grader_version))
