"""The webhooks service after a restore into a new data dir: the database remembers a position in the old
event stream, and the stream is a new one that starts again at sequence 1.

As the README's restore does it, the stream is deleted and provisioned again while the webhooks service is
stopped; the database keeps its position (beyond every sequence of the new stream) and its webhooks.
"""

from __future__ import annotations

from collections import Counter
from contextlib import asynccontextmanager

from sqlalchemy import text

from shared.streams import WEBHOOKS_CONSUMER, projection_stream_name, provision
from shared.subjects import Service
from tests.events import stream_events, wait_until_published
from tests.factories import agent_session, source_item
from tests.integration.test_webhook_chaos import WebhookProcesses, outside  # noqa: F401 - the fixture
from tests.receivers import Receiver
from tests.support import connect_nats
from tests.webhooks import case_events, register, wait_until_delivered


async def new_event_stream(settings) -> None:  # noqa: ANN001
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        for stream in (projection_stream_name(settings), settings.stream_name):
            await js.delete_stream(stream)
        await provision(js, settings)
    finally:
        await connection.close()


async def test_events_of_a_new_stream_are_delivered_once_though_the_position_recorded_lies_beyond_them(outside):  # noqa: F811
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


async def ingest_row(stack):  # noqa: ANN001, ANN201
    async with stack.db.read() as connection:
        return (await connection.execute(text("SELECT stream_seq, stream_created FROM webhook_ingest"))).one()


async def deliverable(settings) -> list[dict]:  # noqa: ANN001
    """The stream's events a webhook without a scope receives, in stream order."""
    return [e for e in await stream_events(settings) if e["subject"].split("/")[0] in ("case", "company")]


@asynccontextmanager
async def one_held_back(stack, agent, services, name: str):  # noqa: ANN001, ANN201
    """Stage a source while no webhooks service runs, and hold its first event as a replica that took it would,
    giving it back on leaving: the service's next batch does not go on from the position recorded."""
    services.stop_all()
    await agent.accepted("stage_sources", sources=[source_item(name)])
    await wait_until_published(stack.db)
    connection = await connect_nats(stack.settings, Service.WEBHOOKS.value)
    try:
        held = (await (await connection.jetstream().pull_subscribe_bind(
            WEBHOOKS_CONSUMER, stream=stack.settings.stream_name)).fetch(1, timeout=10))[0]
        yield
        await held.nak()
    finally:
        await connection.close()


async def test_a_new_stream_going_on_from_position_0_keeps_its_deliveries_flowing_after_a_redelivery(outside):  # noqa: F811
    """A webhook registered while the stream was empty (position 0), then a restore into a new data dir: the new
    stream's first batch goes on from the position, and its identity is recorded then, not after a later gap."""
    stack, logs = outside
    services = WebhookProcesses(stack, logs)
    try:
        await services.start_consuming()
        async with Receiver() as receiver:
            hook = await register(stack, url=receiver.url)
            position, old_stream = await ingest_row(stack)
            assert position == 0 and old_stream, "registered while the stream held no event"
            services.stop_all()
            await new_event_stream(stack.settings)

            second = await services.start_consuming()
            async with agent_session(stack) as agent:
                await agent.accepted("stage_sources", sources=[source_item("first")])
                await wait_until_published(stack.db)
                await wait_until_delivered(stack, hook["webhookId"], len(await deliverable(stack.settings)))
                assert (await ingest_row(stack)).stream_created != old_stream, "the new stream's identity"
                assert "event_stream_new" in services.log_of(second)

                async with one_held_back(stack, agent, services, "held-back"):
                    await services.start_consuming()
                await agent.accepted("stage_sources", sources=[source_item("later")])
                await wait_until_published(stack.db)
                due = await deliverable(stack.settings)
                log = await wait_until_delivered(stack, hook["webhookId"], len(due), timeout=90)

        assert [d["eventId"] for d in log] == [e["id"] for e in due], "every event the stream holds, in order"
        assert max(Counter(r.event["id"] for r in receiver.requests).values()) == 1
    finally:
        services.stop_all()


async def test_an_identity_recorded_stale_is_replaced_without_counting_again_where_the_stream_holds_the_position(
        outside):  # noqa: F811
    """A position recorded in this stream under another stream's identity (as a version that checked the stream
    only on a gap or redelivery left it): the identity is replaced, and nothing recorded is counted again."""
    stack, logs = outside
    services = WebhookProcesses(stack, logs)
    try:
        await services.start_consuming()
        async with Receiver() as receiver, agent_session(stack) as agent:
            hook = await register(stack, url=receiver.url, caseId=agent.case_id)
            await agent.accepted("stage_sources", sources=[source_item("first")])
            await wait_until_published(stack.db)
            first = [e for e in await case_events(stack.settings, agent.case_id) if e["type"] != "threadline.case.created"]
            await wait_until_delivered(stack, hook["webhookId"], len(first))
            async with one_held_back(stack, agent, services, "held-back"):
                async with stack.db.transaction() as connection:
                    await connection.execute(
                        text("UPDATE webhook_ingest SET stream_created = '2020-01-01T00:00:00+00:00'"))
                third = await services.start_consuming()
            await agent.accepted("stage_sources", sources=[source_item("later")])
            await wait_until_published(stack.db)
            due = [e for e in await case_events(stack.settings, agent.case_id) if e["type"] != "threadline.case.created"]
            log = await wait_until_delivered(stack, hook["webhookId"], len(due), timeout=90)

        assert [d["eventId"] for d in log] == [e["id"] for e in due]
        assert all(d["streamSequence"] == e["seq"] for d, e in zip(log, due, strict=True)), "nothing counted again"
        assert "event_stream_identity_stale" in services.log_of(third)
        assert "event_stream_new" not in services.log_of(third)
    finally:
        services.stop_all()
