"""What a JSON route takes, declared beside its handler: the pieces of the OpenAPI description (grader/server/openapi.py).

A handler says what it reads with ``@takes(body=..., query=..., path=..., headers=...)`` (JSON Schemas); the
description is built from the application's route table and these declarations, so a route cannot be served
without being described. Path parameters not declared are strings; a route without a declaration takes no
body and no query. A JSON route outside ``/api/`` (the LTI JSON) is described because it declares itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

Schema = dict[str, Any]
H = TypeVar("H", bound=Callable[..., Any])

TEXT: Schema = {"type": "string"}
TEXTS: Schema = {"type": "array", "items": TEXT}
ROW_ID: Schema = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}  # grader.queue.records.row_id's bounds


@dataclass(frozen=True)
class Declared:
    """A route's inputs: its JSON body (None: none), query and header parameters, path parameter schemas."""

    body: Schema | None = None
    query: dict[str, Schema] = field(default_factory=dict)
    path: dict[str, Schema] = field(default_factory=dict)
    headers: dict[str, Schema] = field(default_factory=dict)
    public: bool = False  # answers without a token (outside the API table, which says who may call each route)


def takes(
    body: Schema | None = None,
    query: dict[str, Schema] | None = None,
    path: dict[str, Schema] | None = None,
    headers: dict[str, Schema] | None = None,
    public: bool = False,
) -> Callable[[H], H]:
    """Declare what the decorated handler reads (kept on it as ``handler.takes``)."""

    def mark(handler: H) -> H:
        handler.takes = Declared(body, query or {}, path or {}, headers or {}, public)  # type: ignore[attr-defined]
        return handler

    return mark


def declared(handler: Any) -> Declared | None:
    """The declaration of ``handler`` (None when it has none)."""
    found = getattr(handler, "takes", None)
    return found if isinstance(found, Declared) else None


def body_object(properties: dict[str, Schema], required: tuple[str, ...] = (), closed: bool = False) -> Schema:
    """A JSON object body with these properties (``closed``: no other field)."""
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema
