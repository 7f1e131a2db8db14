"""The projection's partitions: nats-server files each case's events under the partition the projection computes;
replicas share the partitions evenly, hand one back only after its work stopped, and take a dead replica's; `migrate`
makes the projection's stream again when the count changes and drops the consumer from before partitions."""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig

from services.projection.partitions import PARTITION_LOCK, PROJECTION, partition_of
from shared.db.session import asyncpg_dsn
from shared.partition_leases import LOCK_SPAN, PartitionLeases
from shared.streams import LEGACY_PROJECTION_CONSUMER, projection_consumer, projection_stream_name, provision
from tests.support import connect_nats, new_deployment, remove_deployment

CASES = 48


async def test_each_cases_events_reach_the_partition_the_projection_computes(servers):
    settings = await new_deployment(servers, projection_partitions=5)
    relay, projection = await connect_nats(settings, "relay"), await connect_nats(settings, "projection")
    try:
        cases = [f"case-{n}-{settings.nats_prefix}" for n in range(CASES)]
        for case_id in cases:
            for event in ("threadline.ledger.changed", "threadline.proposal.staged", "threadline.focus.changed"):
                await relay.jetstream().publish(settings.nats_prefix + ".events.case." + case_id + "."
                                                + event.removeprefix("threadline."), b"{}")
        js, stream = projection.jetstream(), projection_stream_name(settings)
        seen: Counter[int] = Counter()
        for partition in range(5):  # each partition's consumer, as the projection pulls it
            subscription = await js.pull_subscribe_bind(projection_consumer(partition), stream=stream)
            deadline = asyncio.get_running_loop().time() + 10
            while asyncio.get_running_loop().time() < deadline:
                try:
                    messages = await subscription.fetch(2 * CASES, timeout=0.5)
                except (TimeoutError, NatsTimeout):  # nats-py raises either when a fetch finds nothing
                    if sum(seen.values()) == 2 * CASES or seen[partition]:
                        break
                    continue
                for message in messages:
                    prefix, kind, number, scope, case_id, *event = message.subject.split(".")
                    assert (prefix, kind, number, scope) == (settings.nats_prefix, "projection", str(partition), "case")
                    assert ".".join(event) in ("ledger.changed", "proposal.staged"), "not the focus changes"
                    assert partition_of(case_id, 5) == partition, case_id
                    await message.ack()
                    seen[partition] += 1
        assert sum(seen.values()) == 2 * CASES, "every ledger change and staged proposal, once"
        assert set(seen) == set(range(5)), "48 cases land on every one of 5 partitions"
    finally:
        await relay.close()
        await projection.close()
        await remove_deployment(servers, settings)


async def test_migrate_makes_the_stream_again_for_another_count_and_drops_the_consumer_from_before(servers):
    settings = await new_deployment(servers)
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        await js.add_consumer(settings.stream_name, ConsumerConfig(durable_name=LEGACY_PROJECTION_CONSUMER))
        more = settings.model_copy(update={"projection_partitions": settings.projection_partitions + 2})
        await provision(js, more)
        consumers = {c.name for c in await js.consumers_info(projection_stream_name(settings))}
        assert consumers == {projection_consumer(p) for p in range(more.projection_partitions)}
        assert LEGACY_PROJECTION_CONSUMER not in {c.name for c in await js.consumers_info(settings.stream_name)}
        await provision(js, settings)  # back: again, with fewer consumers
        consumers = {c.name for c in await js.consumers_info(projection_stream_name(settings))}
        assert consumers == {projection_consumer(p) for p in range(settings.projection_partitions)}
    finally:
        await connection.close()
        await remove_deployment(servers, settings)


@pytest.fixture
async def database(servers):
    settings = await new_deployment(servers)
    try:
        yield asyncpg_dsn(settings.resolved_database_url())
    finally:
        await remove_deployment(servers, settings)


async def led_in_database(dsn: str) -> dict[int, set[int]]:
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT pid, objid::bigint % $2 AS partition FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 2 AND classid = $1::bigint::oid "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())", PARTITION_LOCK,
            LOCK_SPAN)
    finally:
        await connection.close()
    led: dict[int, set[int]] = {}
    for row in rows:
        led.setdefault(row["pid"], set()).add(row["partition"])
    return led


async def test_replicas_share_the_partitions_hand_back_after_their_work_and_take_a_dead_ones(database):
    first, second = await asyncpg.connect(database), await asyncpg.connect(database)
    one, two = PartitionLeases(PROJECTION, 8), PartitionLeases(PROJECTION, 8)
    stopped: list[set[int]] = []

    async def stop_work(partitions: set[int]) -> None:
        held = await led_in_database(database)
        assert partitions <= held[first.get_server_pid()], "a partition's work stops before its lock goes"
        stopped.append(set(partitions))

    try:
        await one.join(first)
        assert await one.rebalance(first) == set(range(8)) and one.led == set(range(8)), "alone: all of them"
        await two.join(second)
        assert await two.rebalance(second) == set(), "none free yet"
        assert await one.rebalance(first, force=True, before_release=stop_work) == set()
        assert len(one.led) == 4 and stopped == [set(range(8)) - one.led]
        assert await two.rebalance(second, force=True) == stopped[0] and two.led == stopped[0]
        held = await led_in_database(database)
        assert held == {first.get_server_pid(): one.led, second.get_server_pid(): two.led}
        await first.close()  # a replica gone: its session, and with it its locks
        one.forget()
        await asyncio.sleep(0.1)
        assert await two.rebalance(second, force=True) == set(range(8)) - stopped[0] and two.led == set(range(8))
    finally:
        for connection in (first, second):
            if not connection.is_closed():
                await connection.close()


async def test_replicas_with_another_count_never_lead_beside_each_other(database):
    first, second = await asyncpg.connect(database), await asyncpg.connect(database)
    try:
        eight, four = PartitionLeases(PROJECTION, 8), PartitionLeases(PROJECTION, 4)
        await eight.join(first)
        await eight.rebalance(first)
        await four.join(second)
        assert await four.rebalance(second, force=True) == set() and four.led == set()
        assert four.mismatch == [8]
    finally:
        await first.close()
        await second.close()
