"""Under `threadline up`, every process answers /healthz, /readyz and /metrics on the port runtime.json names."""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from shared.subjects import BACKEND_SERVICES, Service
from tests.e2e.system import start_system
from tests.factories import source_item

pytestmark = pytest.mark.e2e

# What each process reports beyond FastStream's per-subscriber metrics (threadline_nats_*).
OWN_METRICS = {
    Service.RELAY: {"threadline_relay_leader", "threadline_outbox_pending_events",
                    "threadline_outbox_oldest_pending_seconds"},
    Service.PROJECTION: {"threadline_projection_lag_events", "threadline_projection_leader",
                         "threadline_projection_partitions_led"},
    Service.STAGING: {"threadline_command_seconds"},
    Service.REVIEW: {"threadline_command_seconds"},
    Service.GATEWAY: {"threadline_tool_call_seconds", "threadline_http_requests"},
}


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    running = start_system(tmp_path_factory.mktemp("up-metrics") / "data")
    yield running
    if running.process.poll() is None:
        running.stop()


async def stage_and_accept(system) -> None:  # noqa: ANN001
    credentials = system.credentials
    headers = {"Authorization": f"Bearer {credentials['admin']}"}
    async with httpx2.AsyncClient(base_url=system.http_url, headers=headers, timeout=30) as admin:
        assert (await admin.post("/api/v1/cases", json={"caseId": "metered", "title": "Metered",
                                                        "question": "Is it measured?"})).status_code == 201
        assert (await admin.put("/api/v1/agents/agent/active-case", json={"caseId": "metered"})).status_code == 200
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {credentials['agent']}"}, timeout=30)
        async with http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http)) as mcp:
            revision = (await mcp.call_tool("get_workspace", {})).structured_content["workspaceRevision"]
            staged = await mcp.call_tool("stage_sources", {"expectedCaseId": "metered", "expectedRevision": revision,
                                                           "sources": [source_item("metered-source")]})
        assert not staged.is_error, staged.content
        decided = await admin.post(f"/api/v1/proposals/{staged.structured_content['proposalId']}/decisions",
                                   json={"accept": ["metered-source"], "note": "ok", "expectedRevision": revision})
        assert decided.status_code == 200, decided.text


async def test_every_process_serves_probes_and_prometheus_metrics_on_its_own_port(system):
    await stage_and_accept(system)
    services = system.runtime["services"]
    assert set(services) == {s.value for s in (*BACKEND_SERVICES, Service.GATEWAY)}
    async with httpx2.AsyncClient(timeout=10) as http:
        for name, entry in services.items():
            assert entry["pid"] > 0
            assert (await http.get(entry["healthUrl"])).json() == {"status": "ok"}, name
            ready = await http.get(entry["healthUrl"].replace("/healthz", "/readyz"))
            assert ready.status_code == 200 and ready.json()["checks"] == {"nats": True, "postgres": True}, name
            scraped = await http.get(entry["metricsUrl"])
            assert scraped.headers["content-type"].startswith("text/plain"), name
            families = {f.name for f in text_string_to_metric_families(scraped.text)}
            assert OWN_METRICS.get(Service(name), set()) <= families, (name, sorted(families))
            if name != Service.GATEWAY.value:
                assert "threadline_nats_received_messages" in families, name  # FastStream's middleware


async def test_the_command_histograms_count_what_the_services_handled(system):
    services = system.runtime["services"]
    async with httpx2.AsyncClient(timeout=10) as http:
        review = (await http.get(services["review"]["metricsUrl"])).text
    counts = {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(review)
              if f.name == "threadline_command_seconds" for s in f.samples if s.name.endswith("_count")}
    assert counts.get((("command", "decide"), ("service", "review")), 0) >= 1, counts


# The families only one service keeps: no other process may show them, even at 0.
KEPT_BY = {
    Service.RELAY: ("threadline_relay_", "threadline_outbox_"),
    Service.PROJECTION: ("threadline_projection_",),
    Service.GATEWAY: ("threadline_tool_call", "threadline_http_requests"),
    Service.WEBHOOKS: ("threadline_webhook_",),
}


async def test_each_process_shows_only_its_own_services_gauges_though_up_forks_them_all_from_one_process(system):
    """`up` forks every service from a starter that imported all their code; a staging process that showed
    `threadline_relay_leader 0` and `threadline_outbox_pending_events 0` beside the relay's own gauges read, in a
    dashboard or an alert, as one more relay leading nothing, and the relay showed the projection's likewise."""
    async with httpx2.AsyncClient(timeout=10) as http:
        for name, entry in system.runtime["services"].items():
            families = {f.name for f in text_string_to_metric_families((await http.get(entry["metricsUrl"])).text)}
            for owner, prefixes in KEPT_BY.items():
                if owner.value != name:
                    assert not {f for f in families if f.startswith(prefixes)}, (name, owner.value, sorted(families))
