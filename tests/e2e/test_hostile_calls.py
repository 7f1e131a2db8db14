"""Hostile calls: a huge call (MCP or API) is refused quickly and never stalls the gateway for anyone else."""

from __future__ import annotations

import asyncio
import time

import httpx2
import orjson

from tests.factories import agent_session

# Bounds, not timings: before validation stopped holding the event loop, one such call stalled /readyz for
# 7.7 s; a probe on a machine whose both cores are busy can take a tenth of a second without any stall.
READY_WITHIN = 0.5
REFUSED_WITHIN = 1.0


async def beside_readyz(stack, send) -> tuple[httpx2.Response, float, list[float]]:
    """`send(client)` one request while /readyz is polled: its answer, its time, and every probe's time."""
    probes: list[float] = []
    done = asyncio.Event()
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as caller, \
            httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as prober:
        await prober.get("/readyz")  # a warm connection: the probe times the gateway, not a TCP handshake

        async def probe() -> None:
            while not done.is_set():
                started = time.perf_counter()
                assert (await prober.get("/readyz")).status_code == 200
                probes.append(time.perf_counter() - started)
                await asyncio.sleep(0.01)

        poller = asyncio.create_task(probe())
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        answer = await send(caller)
        took = time.perf_counter() - started
        await asyncio.sleep(0.05)
        done.set()
        await poller
    return answer, took, probes


async def refused_beside_readyz(stack, agent_token: str, arguments: dict) -> tuple[dict, float, list[float]]:
    """One inspect_sources call as raw JSON-RPC beside /readyz: the tool result, its time and the probes'."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "inspect_sources", "arguments": arguments}})
    headers = {"Authorization": f"Bearer {agent_token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    answer, took, probes = await beside_readyz(stack, lambda http: http.post("/mcp", content=body, headers=headers))
    assert answer.status_code == 200, answer.text
    return answer.json()["result"], took, probes


async def test_inspect_sources_with_800000_ids_is_refused_within_a_second_and_readyz_stays_fast(stack):
    async with agent_session(stack) as agent:
        result, took, probes = await refused_beside_readyz(
            stack, agent.token, {"expectedCaseId": agent.case_id, "sourceIds": [0] * 800_000})
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "invalid_argument" and error["field"] == "sourceIds" and "800000 items" in error["message"]
    assert took < REFUSED_WITHIN, took
    assert probes and max(probes) < READY_WITHIN, max(probes)


async def test_a_call_with_100000_unknown_fields_is_refused_by_their_count(stack):
    async with agent_session(stack) as agent:
        arguments = {"expectedCaseId": agent.case_id, "sourceIds": ["a"],
                     **{f"extra{i}": i for i in range(100_000)}}
        result, took, _ = await refused_beside_readyz(stack, agent.token, arguments)
    error = result["structuredContent"]["error"]
    assert error["code"] == "invalid_argument" and error["field"] == "(arguments)"
    assert "100000 properties" in error["message"] and "expectedCaseId, sourceIds" in error["hint"]
    assert took < REFUSED_WITHIN, took


async def test_a_decision_naming_700000_items_is_refused_by_its_length_and_readyz_stays_fast(stack):
    body = orjson.dumps({"accept": ["a"] * 700_000, "expectedRevision": 0})
    headers = {"Authorization": f"Bearer {stack.tokens['reviewer']}", "Content-Type": "application/json"}
    answer, took, probes = await beside_readyz(stack, lambda http: http.post(
        "/api/v1/proposals/00000000-0000-4000-8000-000000000000/decisions", content=body, headers=headers))
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["field"] == "accept" and "700000" in error["message"]
    assert took < REFUSED_WITHIN, took
    assert probes and max(probes) < READY_WITHIN, max(probes)
