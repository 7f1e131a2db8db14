"""The relay sends each case's chain as one atomic batch; a chain JetStream partly has (a relay died between its ack
and marking the rows), or a stream that takes no batches, gets its events one at a time, and the stream stays exact."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import nats
from nats.js.api import StreamInfo

from services.relay.batches import BATCH_ID
from services.relay.relay import OutboxRelay
from shared.db.session import asyncpg_dsn
from shared.nats_auth import OPERATOR, nats_options
from shared.streams import stream_config
from shared.subjects import Service
from tests.events import stream_events, wait_until_published
from tests.integration.test_relay_chaos import assert_exact_stream, make_decisions
from tests.integration.test_relay_chaos import relay_stack as relay_stack  # noqa: F401 - the fixture
from tests.support import Stack

CASES, DECISIONS = 3, 4
PUBLISHED_BEFORE = 2  # events of chaos-0 a relay had sent before it died, their rows not yet marked


async def relayed(stack: Stack) -> list[dict]:
    """Run a relay of this process until the outbox is published; every event of the stream."""
    stop = asyncio.Event()
    # One pass takes the whole outbox, so each case's events are one chain.
    relay = asyncio.create_task(OutboxRelay(stack.settings.model_copy(update={"relay_batch_size": 5000})).run(stop))
    try:
        await wait_until_published(stack.db)
    finally:
        stop.set()
        await relay
    return await stream_events(stack.settings)


async def as_relay(stack: Stack) -> nats.NATS:
    return await nats.connect(**nats_options(stack.settings, Service.RELAY.value, name="test-relay").client())


async def marked(stack: Stack) -> dict[str, int]:
    """Each published event's id → the stream sequence the relay recorded for it."""
    connection = await asyncpg.connect(asyncpg_dsn(stack.settings.resolved_database_url()))
    try:
        rows = await connection.fetch("SELECT event_id::text AS id, stream_seq FROM outbox")
    finally:
        await connection.close()
    return {row["id"]: row["stream_seq"] for row in rows}


async def test_each_case_goes_out_as_one_batch_and_a_chain_the_stream_partly_has_one_at_a_time(relay_stack):  # noqa: F811
    await make_decisions(relay_stack, CASES, DECISIONS)
    # A relay published chaos-0's first events and died before marking them.
    connection = await asyncpg.connect(asyncpg_dsn(relay_stack.settings.resolved_database_url()))
    try:
        rows = await connection.fetch(
            "SELECT subject, envelope, headers FROM outbox WHERE aggregate = 'case:chaos-0' AND published_at IS NULL "
            "ORDER BY id LIMIT $1", PUBLISHED_BEFORE)
    finally:
        await connection.close()
    relay = await as_relay(relay_stack)
    try:
        for row in rows:
            await relay.jetstream().publish(row["subject"], row["envelope"].encode(), headers=json.loads(row["headers"]))
    finally:
        await relay.close()

    events = await relayed(relay_stack)

    assert_exact_stream(events, CASES, DECISIONS)
    by_case: dict[str, list[dict]] = {}
    for event in events:
        by_case.setdefault(event["natsSubject"].split(".")[3], []).append(event)
    # The cases the stream had nothing of went out as one batch each ...
    for case_id in ("chaos-1", "chaos-2"):
        assert len({e["headers"].get(BATCH_ID) for e in by_case[case_id]}) == 1
        assert BATCH_ID in by_case[case_id][0]["headers"]
    # ... chaos-0's batch was refused whole for the events the stream had, and its events went one at a time.
    assert all(BATCH_ID not in e["headers"] for e in by_case["chaos-0"])
    assert len(by_case["chaos-0"]) > PUBLISHED_BEFORE
    # The rows record where each event is in the stream.
    assert marked_match(events, await marked(relay_stack))


def marked_match(events: list[dict], sequences: dict[str, int]) -> bool:
    return {e["id"]: e["seq"] for e in events} == sequences


async def test_a_stream_that_takes_no_batches_gets_each_event_on_its_own(relay_stack):  # noqa: F811
    operator = await nats.connect(**nats_options(relay_stack.settings, OPERATOR, name="test-operator").client())
    try:
        js = operator.jetstream()
        config = stream_config(relay_stack.settings)
        config.allow_atomic = None  # as on a server before 2.12, which neither knows nor echoes the setting
        info: StreamInfo = await js.update_stream(config)
        assert not info.config.allow_atomic
    finally:
        await operator.close()
    await make_decisions(relay_stack, CASES, DECISIONS)

    events = await relayed(relay_stack)

    assert_exact_stream(events, CASES, DECISIONS)
    assert all(BATCH_ID not in (e["headers"] or {}) for e in events)
    assert marked_match(events, await marked(relay_stack))
