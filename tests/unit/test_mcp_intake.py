"""The MCP intake's judgement of a body, and the sizes it rests on: no valid call holds as many values as a
body must to be judged, a call a service can receive fits the body limit, and the punctuation count bounds
the values of any JSON from above."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from services.gateway.intake import PUNCTUATION
from services.gateway.judge import (
    ENVELOPE_VALUES,
    INLINE_VALUES,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    PASS,
    REFUSE,
    REPLACE,
    judge,
    values,
)
from services.gateway.limits import MAX_CALL_BYTES
from shared.spec import all_tools, validate_arguments

UUID = "6f1c2a4e-5b3d-4c2e-9f1a-2b3c4d5e6f70"
NATS_MAX_PAYLOAD = 1024 * 1024  # the NATS server's default, and deploy/k8s's


def _largest(schema: Any) -> Any:
    """A call of the schema's shape with every property present and every list at its longest."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "object" or "properties" in schema:
        return {key: _largest(value) for key, value in schema.get("properties", {}).items()}
    if schema.get("type") == "array":
        return [_largest(schema.get("items", {}))] * schema["maxItems"]
    return "x" if schema.get("type") == "string" else 1


def _punctuation(body: bytes) -> int:
    return 1 + sum(body.count(mark) for mark in PUNCTUATION)


def _call(name: str, arguments: Any, **params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments, **params}})


def _preview(**changes: Any) -> dict[str, Any]:
    return {"mode": "preview", "companyId": UUID, "sourceFileId": UUID, "category": "confirmed",
            "summary": "a summary", "idempotencyKey": "key-1", **changes}


def test_no_valid_call_of_any_tool_holds_as_many_values_as_a_judged_body():
    for tool in all_tools():
        schema = tool.validation_schema
        for shape in (schema, *(b for b in schema.get("anyOf", []) if isinstance(b, dict))):
            body = _call(tool.name, _largest(shape))
            assert _punctuation(body) < INLINE_VALUES / 2, tool.name


def test_a_call_as_large_as_one_nats_message_fits_the_body_limit_even_with_every_non_ascii_character_escaped():
    claims = [{"text": "é" * 5000, "label": "INFERRED", "section": "Growth", "action": "add"}] * 100
    arguments = _preview(proposedClaims=claims)
    validate_arguments(next(t for t in all_tools() if t.name == "propose_claim_delta_from_source"), arguments)
    assert len(orjson.dumps({"actor": {}, "args": arguments})) < NATS_MAX_PAYLOAD
    escaped = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "propose_claim_delta_from_source", "arguments": arguments}}, indent=2)
    assert 2 * NATS_MAX_PAYLOAD < len(escaped) < MAX_CALL_BYTES


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=40,
)


@given(json_values)
def test_punctuation_bounds_the_values_of_any_json_from_above(value):
    assert _punctuation(json.dumps(value).encode()) >= values(value, 10**9)


def test_a_body_that_holds_few_values_after_all_is_passed_on_as_it_came():
    commas = _call("propose_claim_delta_from_source", _preview(summary="," * 5000, confirms=["[:{" * 1000] * 2))
    assert _punctuation(commas) > INLINE_VALUES
    assert judge(commas) == {"outcome": PASS}


def test_1_900_000_ids_are_judged_to_a_call_without_its_arguments_and_the_problem_found_in_them():
    body = _call("propose_claim_delta_from_source", _preview(affectedClaimIds=[0] * 1_900_000),
                 _meta={"progressToken": 3})
    verdict = judge(body)
    assert verdict["outcome"] == REPLACE
    assert orjson.loads(verdict["body"]) == {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "propose_claim_delta_from_source", "arguments": {}, "_meta": {"progressToken": 3}}}
    assert verdict["problems"] == [{
        "field": "affectedClaimIds",
        "message": "has 1900000 items; at most 200 allowed (Threadline's bound: the published schema sets none)",
        "hint": "send at most 200 items (0 to 200 items)"}]


def test_a_large_call_to_no_such_tool_is_passed_on_without_its_arguments_and_without_problems():
    verdict = judge(_call("no_such_tool", {"ids": [0] * 10_000}))
    assert verdict["outcome"] == REPLACE and verdict["problems"] == []
    assert orjson.loads(verdict["body"])["params"] == {"name": "no_such_tool", "arguments": {}}


def test_what_is_no_call_is_refused_with_the_json_rpc_error_the_transport_would_give():
    unreadable = judge(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [' + b"0," * 10_000)
    assert (unreadable["outcome"], unreadable["status"], unreadable["code"]) == (REFUSE, 400, PARSE_ERROR)
    listing = judge(orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"x": [0] * 10_000}}))
    assert (listing["outcome"], listing["code"], listing["id"]) == (REFUSE, INVALID_REQUEST, 2)
    meta = judge(_call("inspect_sources", {}, _meta={"x": [0] * 10_000}))
    assert meta["code"] == INVALID_REQUEST and f"more than {ENVELOPE_VALUES} values outside" in meta["message"]
    listed = judge(_call("inspect_sources", [0] * 10_000))
    assert listed["code"] == INVALID_PARAMS and "arguments must be a JSON object" in listed["message"]
