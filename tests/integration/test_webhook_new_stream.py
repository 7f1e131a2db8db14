"""The webhooks service after a restore into a new data dir: the database remembers a position in the old
event stream, and the stream is a new one that starts again at sequence 1.

As the README's restore does it, the stream is deleted and provisioned again while the webhooks service is
stopped; the database keeps its position (beyond every sequence of the new stream) and its webhooks.
"""

from __future__ import annotations

from collections import Counter

import pytest

from shared.streams import projection_stream_name, provision
from shared.subjects import BACKEND_SERVICES, Service
from tests.events import wait_until_published
from tests.factories import agent_session, source_item
from tests.integration.test_webhook_chaos import WebhookProcesses
from tests.receivers import Receiver
from tests.support import Stack, connect_nats, new_deployment, remove_deployment
from tests.webhooks import case_events, register, wait_until_delivered


@pytest.fixture
async def outside(servers, tmp_path):
    """A deployment whose webhooks service the test runs itself, as processes."""
    settings = await new_deployment(servers)
    others = tuple(s for s in BACKEND_SERVICES if s is not Service.WEBHOOKS)
    stack = await Stack(settings).start(services=others)
    yield stack, tmp_path
    await stack.stop()
    await remove_deployment(servers, settings)


async def new_event_stream(settings) -> None:  # noqa: ANN001
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        for stream in (projection_stream_name(settings), settings.stream_name):
            await js.delete_stream(stream)
        await provision(js, settings)
    finally:
        await connection.close()


async def test_events_of_a_new_stream_are_delivered_once_though_the_position_recorded_lies_beyond_them(outside):
    stack, logs = outside
    services = WebhookProcesses(stack, logs)
    try:
        first = await services.start_consuming()
        async with Receiver() as receiver, agent_session(stack) as agent:
            hook = await register(stack, url=receiver.url, caseId=agent.case_id)
            for i in range(4):
                await agent.accepted("stage_sources", sources=[source_item(f"old-stream-{i}")])
            await wait_until_published(stack.db)
            old = [e for e in await case_events(stack.settings, agent.case_id) if e["type"] != "threadline.case.created"]
            await wait_until_delivered(stack, hook["webhookId"], len(old))
            services.stop_all()
            assert first.returncode is not None

            await new_event_stream(stack.settings)
            second = await services.start_consuming()
            await agent.accepted("stage_sources", sources=[source_item("new-stream")])
            await wait_until_published(stack.db)
            new = await case_events(stack.settings, agent.case_id)
            assert new and max(e["seq"] for e in new) < max(e["seq"] for e in old), "the new stream counts again"
            log = await wait_until_delivered(stack, hook["webhookId"], len(old) + len(new), timeout=90)

        sent = Counter(r.event["id"] for r in receiver.requests)
        assert set(sent) == {e["id"] for e in old + new}
        assert max(sent.values()) == 1, "no event was sent twice"
        assert [d["eventId"] for d in log] == [e["id"] for e in old + new], "the new stream's events come after"
        assert [d["streamSequence"] for d in log] == [None] * len(old) + [e["seq"] for e in new]
        assert "event_stream_new" in services.log_of(second)
    finally:
        services.stop_all()
