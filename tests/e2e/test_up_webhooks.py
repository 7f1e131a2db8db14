"""A webhook registered under `threadline up` as a user starts it: the webhooks service's own NATS user reads
the stream's last sequence, and a receiver on this machine gets a signed delivery."""

from __future__ import annotations

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks import Webhook

from tests.e2e.system import start_system
from tests.factories import source_item
from tests.receivers import Receiver

pytestmark = pytest.mark.e2e
LEDGER_CHANGED = "threadline.ledger.changed"


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    running = start_system(tmp_path_factory.mktemp("up-webhooks") / "data")
    yield running
    if running.process.poll() is None:
        running.stop()


async def test_a_webhook_to_a_local_receiver_is_registered_and_gets_a_signed_delivery(system):
    admin = httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                               headers={"Authorization": f"Bearer {system.credentials['admin']}"})
    async with admin, Receiver() as receiver:
        assert (await admin.post("/api/v1/cases", json={"caseId": "hooked", "title": "Hooked",
                                                        "question": "Is it delivered?"})).status_code == 201
        registered = await admin.post("/api/v1/webhooks", json={"url": receiver.url, "caseId": "hooked",
                                                                "types": [LEDGER_CHANGED]})
        assert registered.status_code == 201, registered.text  # was 503 after 5 s: no STREAM.INFO permission
        hook = registered.json()
        recorded = await admin.post("/api/v1/cases/hooked/sources", json={"sources": [source_item("s1")]})
        assert recorded.status_code in (200, 201), recorded.text
        await receiver.wait_for(lambda requests: any(r.status == 200 for r in requests), timeout=60)
        listed = (await admin.get("/api/v1/webhooks")).json()["webhooks"]
    event = Webhook(hook["secret"]).verify(receiver.accepted()[0].body, receiver.accepted()[0].headers)
    assert event["type"] == LEDGER_CHANGED and event["data"]["caseId"] == "hooked" and event["revision"] == 1
    assert [w["webhookId"] for w in listed] == [hook["webhookId"]]
    log = (system.data_dir / "logs" / "webhooks.log")
    assert "permissions violation" not in (log.read_text() if log.exists() else "")


async def test_the_webhooks_process_counts_its_attempts_by_result_for_prometheus(system):
    """After the delivery above. Deliveries failing for hours showed only in the delivery log: nothing to alert on,
    or to graph."""
    async with httpx2.AsyncClient(timeout=10) as http:
        scraped = (await http.get(system.runtime["services"]["webhooks"]["metricsUrl"])).text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(scraped) for s in f.samples}
    assert samples.get(("threadline_webhook_attempts_total", (("result", "delivered"),)), 0) >= 1, sorted(samples)
    assert samples.get(("threadline_webhook_attempt_seconds_count", ()), 0) >= 1, sorted(samples)
