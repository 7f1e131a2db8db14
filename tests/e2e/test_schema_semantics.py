"""Calls judged as JSON Schema reads them, through the real MCP client: 2.0 is an integer, a call that sends
no arguments has none, and `arguments: null` is no arguments object."""

from __future__ import annotations

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest

from tests.factories import agent_session, seed, source_item, unframed


async def raw_call(stack, token: str, params: dict) -> dict:
    """One tools/call with `params` exactly as given, through the MCP client's own transport: its session
    leaves out every null (so `arguments: null` cannot be sent through call_tool)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, streamable_http_client(f"{stack.http_url}/mcp", http_client=http) as (read, write):
        await write.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call", params=params)))
        answer = await read.receive()
    assert not isinstance(answer, Exception), answer
    return answer.message.result


async def test_an_integral_number_is_an_integer_and_a_repeat_written_either_way_is_the_same_call(stack):
    async with agent_session(stack) as agent:
        await seed(agent, sources=2)
        revision = await agent.revision()
        assert revision == 1
        pinned = {"expectedCaseId": agent.case_id, "sources": [source_item("written-as-float")]}
        staged = await agent.ok("stage_sources", {**pinned, "expectedRevision": 1.0})
        assert staged["pinnedRevision"] == 1 and type(staged["pinnedRevision"]) is int
        repeat = await agent.ok("stage_sources", {**pinned, "expectedRevision": 1})
        assert repeat["replayed"] is True and repeat["proposalId"] == staged["proposalId"]
        fraction = await agent.refused("stage_sources", {**pinned, "expectedRevision": 1.5})
        assert fraction["field"] == "expectedRevision" and "whole number" in fraction["hint"]
        paged = await agent.ok("get_workspace", {"scope": "unresolved", "cursor": 1.0})
        assert paged["unresolved"]["offset"] == 1


async def test_arguments_null_is_refused_naming_arguments_and_no_arguments_at_all_is_an_empty_object(stack):
    async with agent_session(stack) as agent:
        refused = await raw_call(stack, agent.token, {"name": "get_workspace", "arguments": None})
        assert refused["isError"] is True
        error = refused["structuredContent"]["error"]
        assert error["code"] == "invalid_argument" and error["field"] == "arguments"
        assert "arguments is null" in error["message"] and "({} when the tool needs none)" in error["hint"]
        assert "Field: arguments" in refused["content"][0]["text"]
        served = await raw_call(stack, agent.token, {"name": "get_workspace"})
        assert "isError" not in served or served["isError"] is False
        assert unframed(served["structuredContent"])["caseId"] == agent.case_id


async def test_arguments_sent_as_json_text_or_an_array_are_refused_naming_arguments_with_the_fix(stack):
    async with agent_session(stack) as agent:
        for sent, what in (('{"scope": "claims"}', "a string"), ([{"scope": "claims"}], "an array"), (5, "a number")):
            refused = await raw_call(stack, agent.token, {"name": "get_workspace", "arguments": sent})
            assert refused["isError"] is True, refused
            error = refused["structuredContent"]["error"]
            assert error["code"] == "invalid_argument" and error["field"] == "arguments"
            assert error["message"] == f"arguments: is {what}; a tool's arguments are a JSON object"
            assert "Field: arguments" in refused["content"][0]["text"]
        assert "not the JSON text of one" in error["hint"]
        served = await raw_call(stack, agent.token, {"name": "get_workspace", "arguments": {"scope": "claims"}})
        assert unframed(served["structuredContent"])["scope"] == "claims"
