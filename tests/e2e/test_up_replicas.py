"""`threadline up --replicas`: several processes of a service on one machine, the gateways on one port."""

from __future__ import annotations

import asyncio
import signal

import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.cli.supervision import ReplicasError, parse_replicas
from shared.subjects import Service
from tests.e2e.system import start_system
from tests.factories import source_item

pytestmark = pytest.mark.e2e


def test_a_replica_setting_names_services_and_counts():
    assert parse_replicas("staging=2, gateway=3") == {Service.STAGING: 2, Service.GATEWAY: 3}
    assert parse_replicas("") == {}
    for wrong in ("staging", "stage=2", "staging=0", "staging=two"):
        with pytest.raises(ReplicasError):
            parse_replicas(wrong)


async def partitions_led(services: dict, service: str) -> dict[str, set[int]]:
    """Each relay (or projection) process → the partitions its /metrics says it leads."""
    led: dict[str, set[int]] = {}
    async with httpx2.AsyncClient(timeout=10) as http:
        for name in (service, f"{service}-2"):
            text = (await http.get(services[name]["metricsUrl"])).text
            led[name] = {int(line.split('partition="')[1].split('"')[0]) for line in text.splitlines()
                         if line.startswith(f"threadline_{service}_partition_leader{{") and line.endswith(" 1.0")}
    return led


async def shared_evenly(services: dict, service: str, each: int) -> None:
    for _ in range(100):
        led = await partitions_led(services, service)
        if sorted(len(p) for p in led.values()) == [each, each]:
            break
        await asyncio.sleep(0.2)
    assert sorted(len(p) for p in led.values()) == [each, each], led
    assert led[service].isdisjoint(led[f"{service}-2"]), led


async def test_up_runs_replicas_that_all_serve_and_share_the_gateway_port(tmp_path):
    system = start_system(tmp_path / "data", args=("--replicas", "staging=2,gateway=2,relay=2,projection=2"))
    try:
        services = system.runtime["services"]
        assert {"staging", "staging-2", "gateway", "gateway-2"} <= set(services)
        gateways = [psutil.Process(services[name]["pid"]) for name in ("gateway", "gateway-2")]
        port = int(system.http_url.rsplit(":", 1)[1])
        for process in gateways:  # both listen on the one HTTP port
            assert any(c.laddr.port == port for c in process.net_connections(kind="tcp") if c.status == "LISTEN")
        credentials = system.credentials
        async with httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                                      headers={"Authorization": f"Bearer {credentials['admin']}"}) as admin:
            assert (await admin.post("/api/v1/cases", json={"caseId": "twice", "title": "T",
                                                            "question": "Q?"})).status_code == 201
            assert (await admin.put("/api/v1/agents/agent/active-case", json={"caseId": "twice"})).status_code == 200

        async def agent(n: int) -> list[str]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {credentials['agent']}"}, timeout=30)
            async with http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http)) as mcp:
                revision = (await mcp.call_tool("get_workspace", {})).structured_content["workspaceRevision"]
                staged = []
                for k in range(5):
                    result = await mcp.call_tool("stage_sources", {
                        "expectedCaseId": "twice", "expectedRevision": revision,
                        "sources": [source_item(f"s-{n}-{k}")]})
                    assert not result.is_error, result.content[0].text
                    staged.append(result.structured_content["proposalId"])
                return staged

        proposals = [p for batch in await asyncio.gather(*(agent(n) for n in range(4))) for p in batch]
        assert len(set(proposals)) == 20
        # Two relays share the outbox's sixteen partitions, eight each, and say so on /metrics; two projection
        # replicas the projection's eight, four each.
        await shared_evenly(services, "relay", 8)
        await shared_evenly(services, "projection", 4)
        # A killed replica is restarted under its own name; the service answers meanwhile through the other.
        psutil.Process(services["staging-2"]["pid"]).send_signal(signal.SIGKILL)
        assert len(await agent(9)) == 5
    finally:
        system.stop()
