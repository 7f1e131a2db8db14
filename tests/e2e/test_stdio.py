"""The gateway over stdio, for a local agent host: the same tools, the same rules."""

from __future__ import annotations

from mcp import Client, StdioServerParameters

from tests.factories import new_case, source_item, unique
from tests.processes import THREADLINE


async def test_an_agent_host_uses_the_tools_over_stdio(stack):
    case_id = await new_case(stack)
    token = await stack.issue_token("agent", unique("stdio-agent"), case_id=case_id)
    server = StdioServerParameters(
        command=str(THREADLINE),
        args=["serve", "gateway", "--stdio"],
        env={**stack.environment(), "THREADLINE_TOKEN": token, "THREADLINE_LOG_LEVEL": "WARNING"},
    )
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 12 and tools[0].name == "get_workspace"
        workspace = await client.call_tool("get_workspace", {})
        assert workspace.structured_content["caseId"] == case_id
        staged = await client.call_tool("stage_sources", {
            "expectedCaseId": case_id, "expectedRevision": 0, "sources": [source_item("via-stdio")]})
        assert not staged.is_error and staged.structured_content["pinnedRevision"] == 0
        refused = await client.call_tool("stage_sources", {"expectedCaseId": case_id, "expectedRevision": 0,
                                                           "sources": []})
        assert refused.is_error and refused.structured_content["error"]["field"] == "sources"
