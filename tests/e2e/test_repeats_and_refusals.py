"""Retries are harmless and refusals say everything: repeated calls and decisions, crashes between commit
and reply, complete refusals, and an unknown tool as a JSON-RPC error."""

from __future__ import annotations

import asyncio
import subprocess
from contextlib import asynccontextmanager

import pytest
from mcp.shared.exceptions import MCPError

from shared.subjects import BACKEND_SERVICES, Service
from tests.e2e.system import THREADLINE
from tests.factories import agent_session, claim_item, decide, seed, source_item
from tests.support import Stack, new_deployment, remove_deployment


async def test_an_identical_stage_call_sent_twice_stores_one_proposal(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        call = {"expectedCaseId": agent.case_id, "expectedRevision": await agent.revision(),
                "claims": [claim_item("once", [source])]}
        first, second = await agent.ok("stage_claims", call), await agent.ok("stage_claims", call)
        assert second["proposalId"] == first["proposalId"] and second["replayed"] is True
        assert "replayed" not in first
        assert [p["proposalId"] for p in await agent.proposals()].count(first["proposalId"]) == 1
        different = await agent.ok("stage_claims", {**call, "claims": [claim_item("twice", [source])]})
        assert different["proposalId"] != first["proposalId"]


async def test_an_identical_decision_sent_twice_answers_with_the_same_decision_even_after_the_ledger_moved(stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("kept"), source_item("other")])
        body = {"accept": ["kept"], "note": "primary record", "expectedRevision": 0}
        first = await decide(stack, staged["proposalId"], accept=["kept"], note="primary record", expected_revision=0)
        await agent.accepted("stage_sources", sources=[source_item("moves-on")])  # revision 2
        async with stack.api() as api:
            again = (await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions", json=body)).json()
        assert again["decisionId"] == first["decisionId"] and again["replayed"] is True
        assert again["revision"] == first["revision"] == 1 and again["accepted"] == ["kept"]
        async with stack.api() as api:
            decisions = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()["decisions"]
        assert len(decisions) == 1


async def test_a_source_missing_three_fields_is_refused_once_naming_all_three(stack):
    async with agent_session(stack) as agent:
        source = source_item("incomplete")
        for field in ("authority", "evidenceText", "provenanceNote"):
            del source[field]
        error = await agent.refused("stage_sources", {"expectedCaseId": agent.case_id, "expectedRevision": 0,
                                                      "sources": [source]})
        fields = [p["field"] for p in error["problems"]]
        assert sorted(fields) == ["sources[0].authority", "sources[0].evidenceText", "sources[0].provenanceNote"]
        text = (await agent.call("stage_sources", {"expectedCaseId": agent.case_id, "expectedRevision": 0,
                                                   "sources": [source]})).content[0].text
        assert all(f in text for f in fields)


async def test_calling_a_tool_that_does_not_exist_is_a_json_rpc_error(stack):
    async with stack.agent() as mcp:
        with pytest.raises(MCPError) as refused:
            await mcp.call_tool("stage_everything", {})
    assert refused.value.error.code == -32602 and "stage_everything" in refused.value.error.message


# --- a crash between the commit and the reply -------------------------------------------------------


@asynccontextmanager
async def service_process(stack: Stack, service: Service, failpoints: str = ""):
    """One backend service as its own process (the rest of the stack runs in this one)."""
    environment = {**stack.environment(), "THREADLINE_FAILPOINTS": failpoints}
    process = subprocess.Popen([str(THREADLINE), "serve", service.value], env=environment,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                await stack.client.ping(service, timeout=0.2)
                break
            except Exception:  # noqa: BLE001 - not up yet
                await asyncio.sleep(0.05)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        await asyncio.to_thread(process.wait)


@pytest.fixture
async def crashing(servers):
    settings = await new_deployment(servers, request_timeout=3.0)
    in_process = tuple(s for s in BACKEND_SERVICES if s not in (Service.STAGING, Service.REVIEW))
    running = await Stack(settings).start(services=in_process)
    yield running
    await running.stop()
    await remove_deployment(servers, settings)


async def test_a_retry_after_a_crash_between_commit_and_reply_returns_the_first_result(crashing):
    async with service_process(crashing, Service.REVIEW):
        async with agent_session(crashing) as agent:
            source = (await seed_over_processes(crashing, agent))
            call = {"expectedCaseId": agent.case_id, "expectedRevision": 1, "claims": [claim_item("kept", [source])]}
            async with service_process(crashing, Service.STAGING, "exit_after_commit:stage_claims") as dying:
                lost = await agent.call("stage_claims", call)
                assert lost.is_error and lost.structured_content["error"]["code"] == "unavailable"
                assert await asyncio.to_thread(dying.wait) == 137
            async with service_process(crashing, Service.STAGING):
                retried = await agent.ok("stage_claims", call)
            assert retried["replayed"] is True
            assert [p["proposalId"] for p in await agent.proposals()].count(retried["proposalId"]) == 1

    body = {"accept": ["kept"], "expectedRevision": 1}
    async with service_process(crashing, Service.REVIEW, "exit_after_commit:decide") as dying:
        async with crashing.api() as api:
            lost = await api.post(f"/api/v1/proposals/{retried['proposalId']}/decisions", json=body)
        assert lost.status_code == 503
        assert await asyncio.to_thread(dying.wait) == 137
    async with service_process(crashing, Service.REVIEW), crashing.api() as api:
        again = (await api.post(f"/api/v1/proposals/{retried['proposalId']}/decisions", json=body)).json()
        decisions = (await api.get(f"/api/v1/proposals/{retried['proposalId']}")).json()["decisions"]
    assert again["replayed"] is True and again["revision"] == 2 and again["accepted"] == ["kept"]
    assert [d["decisionId"] for d in decisions] == [again["decisionId"]]


async def seed_over_processes(stack: Stack, agent) -> str:  # noqa: ANN001
    async with service_process(stack, Service.STAGING):
        return (await seed(agent, sources=1))["sources"][0]
