"""The webhooks service under fire: SIGKILLed mid-delivery and restarted, or run twice at once.

The service runs as `threadline serve webhooks` processes beside the other services; a receiver started
by the test records every request it gets.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from shared.subjects import BACKEND_SERVICES, Service
from tests.events import wait_until_published
from tests.factories import agent_session, source_item
from tests.processes import ServiceProcesses
from tests.receivers import HOLD, Receiver
from tests.support import Stack, new_deployment, remove_deployment
from tests.webhooks import case_events, register, wait_until_delivered


class WebhookProcesses(ServiceProcesses):
    """`threadline serve webhooks` processes with short leases and retries."""

    def __init__(self, stack: Stack, log_dir: Path, **settings: str) -> None:
        super().__init__("webhooks", {
            **stack.environment(), "THREADLINE_WEBHOOK_ALLOW_PRIVATE": "true",
            "THREADLINE_WEBHOOK_TIMEOUT_SECONDS": "2", "THREADLINE_WEBHOOK_LEASE_SECONDS": "3",
            "THREADLINE_WEBHOOK_RETRY_BASE_SECONDS": "0.2", "THREADLINE_WEBHOOK_RETRY_MAX_DELAY_SECONDS": "1",
            "THREADLINE_WEBHOOK_POLL_INTERVAL": "0.2", **settings}, log_dir)

    async def start_consuming(self) -> subprocess.Popen:
        return await self.started("consumer_started")


@pytest.fixture
async def outside(servers, tmp_path):
    """A deployment whose webhooks service the test runs itself, as processes."""
    settings = await new_deployment(servers)
    others = tuple(s for s in BACKEND_SERVICES if s is not Service.WEBHOOKS)
    stack = await Stack(settings).start(services=others)
    yield stack, tmp_path
    await stack.stop()
    await remove_deployment(servers, settings)


def first_successes(receiver: Receiver) -> list[str]:
    seen: dict[str, None] = {}
    for request in receiver.accepted():
        seen.setdefault(request.event["id"], None)
    return list(seen)


async def test_a_webhooks_service_killed_mid_delivery_loses_no_event_and_keeps_the_order(outside):
    stack, logs = outside
    services = WebhookProcesses(stack, logs)
    try:
        first = await services.start_consuming()
        async with Receiver(script=[HOLD]) as receiver, agent_session(stack) as agent:
            hook = await register(stack, url=receiver.url, caseId=agent.case_id)
            for i in range(3):
                await agent.accepted("stage_sources", sources=[source_item(f"before-{i}")])
            # Held open, mid-delivery. (A bound, not a timing: on a loaded machine the first delivery can take a while.)
            # At least one: on a slow machine the held request may already have timed out and been sent again.
            await receiver.wait_for(lambda requests: len(requests) >= 1, timeout=60)
            services.kill(first)
            receiver.release()
            for i in range(2):  # while no webhooks service runs: the durable consumer keeps these
                await agent.accepted("stage_sources", sources=[source_item(f"during-{i}")])
            await wait_until_published(stack.db)
            await services.start_consuming()
            due = [e for e in await case_events(stack.settings, agent.case_id) if e["type"] != "threadline.case.created"]
            log = await wait_until_delivered(stack, hook["webhookId"], len(due), timeout=90)

        assert first_successes(receiver) == [e["id"] for e in due], "every event, each first arriving in order"
        held = receiver.requests[0].event["id"]
        assert [r.event["id"] for r in receiver.requests].count(held) >= 2, "the interrupted delivery was sent again"
        assert [d["eventId"] for d in log] == [e["id"] for e in due]
        assert all(d["status"] == "delivered" for d in log)
    finally:
        services.stop_all()


@pytest.mark.slow
async def test_two_webhooks_services_share_the_work_without_sending_an_event_twice(outside):
    stack, logs = outside
    services = WebhookProcesses(stack, logs, THREADLINE_WEBHOOK_CONCURRENCY="1")
    try:
        await services.start_consuming()
        await services.start_consuming()
        async with Receiver(delay=0.05) as receiver:
            cases, hooks = [], []
            for _ in range(3):
                async with agent_session(stack) as agent:
                    cases.append(agent.case_id)
                    hooks.append((await register(stack, url=receiver.url, caseId=agent.case_id))["webhookId"])
                    for i in range(3):
                        await agent.accepted("stage_sources", sources=[source_item(f"s-{i}")])
            await wait_until_published(stack.db)
            due = {c: [e["id"] for e in await case_events(stack.settings, c) if e["type"] != "threadline.case.created"]
                   for c in cases}
            for hook, case_id in zip(hooks, cases, strict=True):  # once delivered, nothing is sent again
                await wait_until_delivered(stack, hook, len(due[case_id]), timeout=90)

        sent = Counter(r.event["id"] for r in receiver.requests)
        assert set(sent) == {i for ids in due.values() for i in ids}
        assert max(sent.values()) == 1, "no event was sent twice"
        arrived = [r.event for r in receiver.requests]
        for case_id, ids in due.items():
            assert [e["id"] for e in arrived if e["subject"] == f"case/{case_id}"] == ids
    finally:
        services.stop_all()
