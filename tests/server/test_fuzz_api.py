"""The fuzzing tier: schemathesis against the OpenAPI description `grade serve` publishes, never a 500 and no hang.

One ``grade serve`` (no workers: an upload stays queued) with two students and the instructor. Every operation
of ``GET /api/v1/openapi.json`` gets cases generated from its schema, valid ones (positive) and invalid ones
(negative: wrong types, missing fields, out-of-range numbers), each sent with a student's token and with the
instructor's. Bounded and reproducible: MAX_EXAMPLES cases per operation and mode, derandomized (a fixed
seed), no example database. Each answer must come within RESPONSE_BOUND_S (the transport's timeout: a request
that hangs fails the test) and below 500. The long poll's ``wait`` is capped at 1 s here (its full 30 s is
tested by test_server_api.py).
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from server_util import Server, issue_tokens

schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[test]' installs schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "8"))  # per operation and mode: about 300 requests a token
RESPONSE_BOUND_S = 20.0  # well above the slowest honest answer (a quiz answer's judge has 5 s)
LONG_POLL_CAP = 1
# Text schemathesis never generates (its strings are encodable UTF-8), added to every string of a body in some
# cases: a lone surrogate travels escaped in JSON ("\\ud800"), and was a 500 where an error echoed it.
UNSAFE_TEXT = ["", "", "\ud800", "\x00", "\u202e"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("fuzz")
    tokens, teacher = issue_tokens(root / "course.db", ["ann", "bob"])
    server = Server(root / "course.db", f"sqlite:///{root / 'queue.db'}", workers=0).start()
    try:
        yield {"url": server.url, "tokens": {"student": tokens["ann"], "instructor": teacher}}
    finally:
        server.stop()


def with_text(value: Any, text: str) -> Any:
    """``value`` (a JSON body) with ``text`` appended to each string value in it (the keys kept: the fields
    the route reads)."""
    if isinstance(value, str):
        return value + text
    if isinstance(value, dict):
        return {k: with_text(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [with_text(v, text) for v in value]
    return value


def fuzz(
    operation: Any, mode: GenerationMode, url: str, token: str, session: requests.Session, statuses: list[int]
) -> list[str]:
    """Run MAX_EXAMPLES cases of ``operation`` (each answer's status added to ``statuses``); the 5xx answers
    found (one line each)."""
    found: list[str] = []

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode), unsafe=st.sampled_from(UNSAFE_TEXT))
    def run(case: Any, unsafe: str) -> None:
        if isinstance(case.query, dict) and "wait" in case.query:
            case.query["wait"] = LONG_POLL_CAP
        request = case.as_transport_kwargs(base_url=url, headers={"Authorization": f"Bearer {token}"})
        if unsafe and "json" in request:  # sent as JSON text: schemathesis would refuse to carry it
            request["data"] = json.dumps(with_text(request.pop("json"), unsafe)).encode()
            request["headers"] = {**request.get("headers", {}), "Content-Type": "application/json"}
        answer = session.request(**request, timeout=RESPONSE_BOUND_S)
        statuses.append(answer.status_code)
        if answer.status_code >= 500:
            found.append(
                f"{case.method} {case.formatted_path} {mode.value}: {answer.status_code} "
                f"{answer.text[:200]} (body {str(case.body)[:120]!r}{unsafe!r}, query {case.query!r})"
            )

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (no parameters, no body): its positive cases ran
        assert mode is GenerationMode.NEGATIVE, f"no valid case of {operation.label}"
    return found


@pytest.mark.slow
@pytest.mark.parametrize("who", ["student", "instructor"])
def test_no_generated_request_is_answered_with_a_500_or_hangs(served: dict[str, Any], who: str) -> None:
    schema = schemathesis.openapi.from_url(served["url"] + "/api/v1/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, "the description lost routes"
    found: list[str] = []
    statuses: list[int] = []
    with requests.Session() as session:
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                found += fuzz(operation, mode, served["url"], served["tokens"][who], session, statuses)
    assert not found, "\n".join(found)
    print(f"{who}: {len(statuses)} requests, {collections.Counter(statuses)}")
    assert len(statuses) >= len(operations) * MAX_EXAMPLES  # the cases were sent, not filtered away
