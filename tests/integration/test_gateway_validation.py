"""Properties of the gateway's validation: what the schema allows passes; nothing else reaches a service."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest
import regress
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError

from services.gateway.auth import Principal
from services.gateway.discoveries import Discoveries
from services.gateway.mcp_server import _call
from services.gateway.tools import COMMAND_OF_TOOL
from shared.command_contracts import command_requests
from shared.errors import InvalidArgument
from shared.messaging import ServiceClient, create_broker
from shared.nats_auth import GATEWAY
from shared.spec import NUL_HINT, ArgumentError, all_tools, validate_arguments
from shared.subjects import BACKEND_SERVICES, Subjects
from tests.schema_strategies import paths, valid

TOOLS = {tool.name: tool for tool in all_tools()}
AGENT = Principal(token_id="00000000-0000-4000-8000-000000000000", name="property-agent", role="agent")
# Refused calls never reach the discovery lookup, so it needs no database here.
UNUSED_DISCOVERIES = Discoveries(db=None)  # type: ignore[arg-type]
TRACEPARENT = "00-" + "0" * 32 + "-" + "0" * 16 + "-01"
WRONG_VALUES = [
    None, 12345, -1, "", "x" * 5001, "x" * 100_000, [], {}, {"unexpected": True}, 3.5, True, "UPPER CASE",
    "\x00", "text with a NUL \x00 inside",
]
SHORT_MESSAGE = 300
# Examples drawn per tool: `make test` draws a third of what `make test-full` (THREADLINE_FULL=1) does.
FULL = bool(os.environ.get("THREADLINE_FULL"))
VALID_EXAMPLES, INVALID_EXAMPLES = (60, 80) if FULL else (20, 30)


def _ecma_pattern(validator, pattern: str, instance: Any, schema: dict[str, Any]):  # noqa: ANN001, ANN202
    if validator.is_type(instance, "string") and regress.Regex(pattern).find(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# The stock Draft-07 validator, with patterns as JSON Schema has them (ECMA-262), not as Python's `re` reads them:
# `\S` matches U+001F in ECMA-262, which Python counts as whitespace. Independent of the gateway's own validator.
Draft7Ecma = validators.extend(Draft7Validator, {"pattern": _ecma_pattern})


def _request(arguments: dict[str, Any]) -> str:
    """The command the gateway sends for a tool call, as it travels on NATS."""
    return json.dumps({"actor": AGENT.actor().dump(), "args": arguments})


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_schema_valid_input_passes_the_gateway_and_parses_into_the_service_contract(name):
    tool = TOOLS[name]
    contract = command_requests()[COMMAND_OF_TOOL[name]]
    schema_validator = Draft7Ecma(tool.validation_schema, format_checker=FormatChecker())

    @settings(max_examples=VALID_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(valid(tool.validation_schema))
    def check(arguments: dict[str, Any]) -> None:
        assert schema_validator.is_valid(arguments), arguments  # the strategy draws only valid inputs
        validate_arguments(tool, arguments)
        contract.model_validate_json(_request(arguments))  # a schema the contract disagrees with fails here

    check()


@st.composite
def invalid_call(draw, name: str) -> tuple[dict[str, Any], str, tuple, Any]:
    """A valid input with one mutation (how, where, with what) that may make the schema refuse it."""
    tool = TOOLS[name]
    arguments = draw(valid(tool.validation_schema))
    mutated = copy.deepcopy(arguments)
    locations = paths(mutated)
    how = draw(st.sampled_from(["extra", "drop", "replace"] if locations else ["extra"]))
    value = None
    if how == "extra":
        containers = [()] + [p for p in locations if isinstance(_at(mutated, p), dict)]
        where = draw(st.sampled_from(containers))
        key = draw(st.sampled_from(["unexpected", "extraField", "x"]))
        value = _at(mutated, where)[key] = draw(st.sampled_from(WRONG_VALUES))
        location = (*where, key)
    else:
        location = draw(st.sampled_from(locations))
        parent = _at(mutated, location[:-1])
        if how == "drop":
            del parent[location[-1]]
        else:
            value = parent[location[-1]] = draw(st.sampled_from(WRONG_VALUES))
    return mutated, how, location, value


def _at(value: Any, path: tuple) -> Any:
    for part in path:
        value = value[part]
    return value


def _path(parts: tuple) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(inner) for key, inner in value.items())
    return isinstance(value, list) and any(_holds_nul(inner) for inner in value)


def _fields_reported_for(schema: dict[str, Any], how: str, location: tuple, value: Any) -> set[str] | None:
    """The fields the gateway may name for this mutation; None for a prefix match (an object put in place)."""
    if how == "drop" and isinstance(location[-1], int):
        return {_path(location[:-1])}  # the list is now too short
    if how == "drop" and len(location) == 1 and "anyOf" in schema:
        # a field required by one accepted shape only: the gateway may name another shape's field, or the
        # fields each shape requires alone, together ("companyId or ticker")
        required = [name for shape in schema["anyOf"] for name in shape.get("required", [])]
        return {_path(location), *required, " or ".join(dict.fromkeys(required))}
    if how == "replace" and isinstance(value, dict):
        return None
    return {_path(location)}


@pytest.fixture(scope="module")
async def spy(servers):
    """Real NATS connections: the gateway's client, and in each service's place (as that service's NATS user)
    a recorder of every command sent to it."""
    settings = await servers.nats_deployment()
    subjects = Subjects(settings.nats_prefix)
    received: list[str] = []

    async def record(body: dict) -> dict:
        received.append(json.dumps(body))
        return {"result": {}}

    recorders = []
    for service in BACKEND_SERVICES:
        recorder = create_broker(settings, role=service.value, name=f"validation-spy-{service.value}")
        recorder.subscriber(f"{settings.nats_prefix}.cmd.{service.value}.>", queue=subjects.queue(service))(record)
        await recorder.start()
        recorders.append(recorder)
    gateway = create_broker(settings, role=GATEWAY, name="validation-gateway")
    await gateway.connect()
    yield ServiceClient(gateway, subjects, 2.0), received
    for broker in [gateway, *recorders]:
        await broker.stop()


@pytest.mark.parametrize("name", list(TOOLS))
async def test_schema_invalid_input_is_refused_naming_the_field_briefly_and_never_sent(spy, name):
    client, received = spy
    tool = TOOLS[name]
    schema_validator = Draft7Ecma(tool.validation_schema, format_checker=FormatChecker())
    examples = []

    @settings(max_examples=INVALID_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(invalid_call(name))
    def collect(case: tuple[dict[str, Any], str, tuple, Any]) -> None:
        # Refused: whatever the stock Draft-07 validator refuses, and any string holding U+0000.
        if not schema_validator.is_valid(case[0]) or _holds_nul(case[0]):
            examples.append(case)

    collect()
    assert len(examples) >= INVALID_EXAMPLES // 4, "the mutations should mostly produce invalid inputs"
    for arguments, how, location, value in examples:
        with pytest.raises(InvalidArgument) as refused:
            await _call(client, UNUSED_DISCOVERIES, AGENT, name, arguments, "corr-property", TRACEPARENT)
        field = refused.value.field
        expected = _fields_reported_for(tool.input_schema, how, location, value)
        if expected is None:
            assert field == _path(location) or field.startswith(f"{_path(location)}."), (arguments, field)
        else:
            assert field in expected, (arguments, how, location, field)
        assert len(refused.value.message) < SHORT_MESSAGE, refused.value.message[:SHORT_MESSAGE]
        assert refused.value.hint
        with pytest.raises(ArgumentError):
            validate_arguments(tool, arguments)
    assert received == [], "an invalid call reached a service"


def _source(**changes: Any) -> dict[str, Any]:
    source = {
        "id": "source-a", "publisher": "Agency", "title": "A report", "url": "https://agency.example/report",
        "publicationDate": "2024-01-01", "snapshotDate": "2024-02-01", "type": "official",
        "authority": "the publisher of the figures", "evidenceText": "the figure was 4%",
        "provenanceNote": "supplied by the agent; not verified",
    }
    return {**source, **changes}


def _stage(*sources: dict[str, Any]) -> dict[str, Any]:
    return {"expectedCaseId": "case-a", "expectedRevision": 3, "sources": list(sources)}


PRISM_PREVIEW = {
    "mode": "preview", "companyId": "00000000-0000-0000-0000-000000000000",
    "sourceFileId": "00000000-0000-0000-0000-000000000000", "category": "confirmed", "summary": "s",
    "idempotencyKey": "k",
}


@pytest.mark.parametrize(
    ("name", "arguments", "field", "hint"),
    [
        # ECMA-262 patterns: `$` is the very end (no trailing newline), `\d` is 0-9 only
        ("set_focus", {"expectedCaseId": "abc\n", "focus": "all"}, "expectedCaseId", "pattern"),
        ("inspect_sources", {"expectedCaseId": "case-a", "sourceIds": ["source-a", "source-b\n"]},
         "sourceIds[1]", "pattern"),
        ("stage_sources", _stage(_source(publicationDate="living\n")), "sources[0].publicationDate",
         "pattern"),
        ("stage_sources", _stage(_source(snapshotDate="٢٠٢٤-٠١-٠١")), "sources[0].snapshotDate", "pattern"),
        ("stage_sources", _stage(_source(), _source(id="b", publicationDate="٢٠٢٤-٠١-٠١")),
         "sources[1].publicationDate", "pattern"),
        ("get_company_context", {"ticker": "ABC\n"}, "ticker", "pattern"),
        # NUL characters, which PostgreSQL cannot store, in values and in property names
        ("stage_sources", _stage(_source(evidenceText="the figure\x00 was 4%")), "sources[0].evidenceText",
         NUL_HINT),
        ("stage_sources", _stage(_source(**{"note\x00": "x"})), "sources[0].note\\u0000", NUL_HINT),
        ("propose_claim_delta_from_source", {**PRISM_PREVIEW, "confirms": ["ok", "not \x00 ok"]},
         "confirms[1]", NUL_HINT),
        ("propose_claim_delta_from_source", {**PRISM_PREVIEW, "sourceTitle": "\x00"}, "sourceTitle",
         NUL_HINT),
        # values far over their limits: the refusal stays short
        ("inspect_sources", {"expectedCaseId": "case-a", "sourceIds": ["x" * 100_000]}, "sourceIds[0]",
         "1 to 96 characters"),
        ("stage_sources", _stage(_source(evidenceText="Evidence " * 11_112)), "sources[0].evidenceText",
         "1 to 4000 characters"),
        ("set_focus", {"expectedCaseId": "case-a", "focus": "Z" * 100_000}, "focus", "use one of"),
        ("get_workspace", {"cursor": 10**1000}, "cursor", "integer from 1 to 96"),
        ("get_workspace", {"k" * 100_000: 1}, "k" * 60 + "…", "remove the field"),
        ("propose_claim_delta_from_source", {**PRISM_PREVIEW, "summary": "s" * 100_000}, "summary",
         "1 to 5000 characters"),
    ],
)
async def test_ecma_nul_and_oversized_arguments_are_refused_briefly_at_the_gateway(
    spy, name, arguments, field, hint
):
    client, received = spy
    with pytest.raises(InvalidArgument) as refused:
        await _call(client, UNUSED_DISCOVERIES, AGENT, name, arguments, "corr-refused", TRACEPARENT)
    assert refused.value.field == field
    assert hint in refused.value.hint
    assert len(refused.value.message) < SHORT_MESSAGE, refused.value.message[:SHORT_MESSAGE]
    assert len(refused.value.field) < SHORT_MESSAGE
    assert received == [], "a refused call reached a service"
