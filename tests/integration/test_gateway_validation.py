"""Properties of the gateway's validation: what the schema allows passes; nothing else reaches a service."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, FormatChecker

from services.gateway.auth import Principal
from services.gateway.mcp_server import _call
from shared.errors import InvalidArgument
from shared.messaging import ServiceClient, create_broker
from shared.spec import ArgumentError, all_tools, validate_arguments
from shared.subjects import Subjects
from tests.schema_strategies import paths, valid

TOOLS = {tool.name: tool for tool in all_tools()}
AGENT = Principal(token_id="00000000-0000-4000-8000-000000000000", name="property-agent", role="agent")
WRONG_VALUES = [None, 12345, -1, "", "x" * 5001, [], {}, {"unexpected": True}, 3.5, True, "UPPER CASE"]


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_schema_valid_input_passes_gateway_validation(name):
    tool = TOOLS[name]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(valid(tool.input_schema))
    def check(arguments: dict[str, Any]) -> None:
        assert tool.validator.is_valid(arguments), arguments  # the strategy draws only valid inputs
        validate_arguments(tool, arguments)

    check()


@st.composite
def invalid_call(draw, name: str) -> tuple[dict[str, Any], tuple]:
    """A valid input with one mutation that the schema refuses, and where the mutation was made."""
    tool = TOOLS[name]
    arguments = draw(valid(tool.input_schema))
    mutated = copy.deepcopy(arguments)
    locations = paths(mutated)
    how = draw(st.sampled_from(["extra", "drop", "replace"] if locations else ["extra"]))
    if how == "extra":
        containers = [()] + [p for p in locations if isinstance(_at(mutated, p), dict)]
        where = draw(st.sampled_from(containers))
        key = draw(st.sampled_from(["unexpected", "extraField", "x"]))
        _at(mutated, where)[key] = draw(st.sampled_from(WRONG_VALUES))
        location = (*where, key)
    else:
        location = draw(st.sampled_from(locations))
        parent = _at(mutated, location[:-1])
        if how == "drop":
            del parent[location[-1]]
        else:
            parent[location[-1]] = draw(st.sampled_from(WRONG_VALUES))
    return mutated, location


def _at(value: Any, path: tuple) -> Any:
    for part in path:
        value = value[part]
    return value


@pytest.fixture(scope="module")
async def spy(servers):
    """A real NATS connection: a client for the gateway path, and a recorder of every command sent."""
    prefix = "tprop"
    broker = create_broker(servers.nats_url, name="validation-spy")
    received: list[str] = []

    @broker.subscriber(f"{prefix}.cmd.>")
    async def record(body: dict) -> dict:
        received.append(json.dumps(body))
        return {"result": {}}

    await broker.start()
    yield ServiceClient(broker, Subjects(prefix), 2.0), received
    await broker.stop()


@pytest.mark.parametrize("name", list(TOOLS))
async def test_schema_invalid_input_is_refused_naming_a_field_and_never_sent(spy, name):
    client, received = spy
    tool = TOOLS[name]
    schema_validator = Draft7Validator(tool.input_schema, format_checker=FormatChecker())
    examples = []

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(invalid_call(name))
    def collect(case: tuple[dict[str, Any], tuple]) -> None:
        if not schema_validator.is_valid(case[0]):
            examples.append(case)

    collect()
    assert len(examples) >= 20, "the mutations should mostly produce invalid inputs"
    for arguments, location in examples:
        with pytest.raises(InvalidArgument) as refused:
            await _call(client, AGENT, name, arguments, "corr-property", "00-" + "0" * 32 + "-" + "0" * 16 + "-01")
        field = refused.value.field
        assert field and field != "(arguments)", (arguments, field)
        if "anyOf" not in tool.input_schema:
            assert field.split(".")[0].split("[")[0] == str(location[0]), (arguments, location, field)
        with pytest.raises(ArgumentError):
            validate_arguments(tool, arguments)
    assert received == [], "an invalid call reached a service"
