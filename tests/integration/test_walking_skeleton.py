"""One real path through every service: discover, stage, accept, publish, preview."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from tests.factories import new_case, source_item
from tests.support import connect_nats


async def next_events(settings, subject_filter: str, count: int, timeout: float = 10.0) -> list[dict]:
    """Read `count` events from the start of the stream that match the filter."""
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        subscription = await js.subscribe(subject_filter, ordered_consumer=True)
        found = []
        deadline = asyncio.get_running_loop().time() + timeout
        while len(found) < count:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            try:
                message = await subscription.next_msg(timeout=remaining)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            found.append({"subject": message.subject, "headers": message.headers, **json.loads(message.data)})
        return found
    finally:
        await connection.close()


async def test_staged_sources_accepted_by_a_reviewer_reach_the_stream(stack):
    case_id = await new_case(stack)
    agent = await stack.issue_token("agent", f"agent-{case_id}", case_id=case_id)
    async with stack.agent(agent) as mcp:
        workspace = (await mcp.call_tool("get_workspace", {})).structured_content
        assert workspace["caseId"] == case_id and workspace["workspaceRevision"] == 0
        staged = await mcp.call_tool(
            "stage_sources",
            {"expectedCaseId": case_id, "expectedRevision": 0, "sources": [source_item("src-one")]},
        )
        assert not staged.is_error, staged.content[0].text
        proposal_id = staged.structured_content["proposalId"]

    async with stack.api("reviewer") as api:
        decided = await api.post(f"/api/v1/proposals/{proposal_id}/decisions",
                                 json={"accept": ["src-one"], "expectedRevision": 0},
                                 headers={"X-Correlation-Id": "decision-corr-1",
                                          "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["revision"] == 1

    events = await next_events(stack.settings, f"{stack.settings.nats_prefix}.events.case.{case_id}.ledger.changed", 1)
    assert len(events) == 1
    event = events[0]
    assert event["type"] == "threadline.ledger.changed" and event["revision"] == 1
    assert event["data"]["changes"]["sourcesAdded"][0]["id"] == "src-one"
    assert event["headers"]["Nats-Msg-Id"] == event["id"]
    # The decision's correlation id and trace context travel with the event it caused.
    assert event["correlationid"] == event["headers"]["correlation_id"] == "decision-corr-1"
    assert event["traceparent"] == event["headers"]["traceparent"] == (
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")


async def test_a_handler_failure_answers_with_an_error_not_a_timeout(stack):
    from shared.errors import InvalidArgument
    from shared.subjects import Command

    with pytest.raises(InvalidArgument) as refused:
        await stack.client.call(Command.GET_CASE, {"actor": {"name": "x", "role": "admin"}, "caseId": "NOT A SLUG"},
                                timeout=2)
    assert refused.value.field == "caseId"
