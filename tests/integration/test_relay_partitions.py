"""Relay partitions: relays share the outbox's partitions, leaders are killed under load and the stream stays exact;
relays that disagree on the count, or a relay from before partitions, never lead beside them; rows written before
the upgrade have their partition."""

from __future__ import annotations

import asyncio
import os
import subprocess

import asyncpg
import psutil
import pytest
from sqlalchemy import text

from services.relay.partitions import LEGACY_LEADER_LOCK, PARTITION_LOCK, partition_of, slot_of
from shared.db.migrate import upgrade
from shared.db.session import asyncpg_dsn, create_engine
from shared.partition_leases import LOCK_SPAN
from tests.events import stream_events, wait_until_published
from tests.integration.test_relay_chaos import (
    Relays,
    assert_exact_stream,
    assert_outbox_published_once,
    make_decisions,
)
from tests.integration.test_relay_chaos import relay_stack as relay_stack  # noqa: F401 - the fixture
from tests.support import connect_nats

FULL = bool(os.environ.get("THREADLINE_FULL"))
PARTITIONS = 4
# Enough decisions for several kills of each relay; test_relay_chaos.py runs the 500 against one relay.
CASES, DECISIONS_PER_CASE = (40, 50) if FULL else (12, 20)
KILLS = 6 if FULL else 2  # at least: the load goes on until partition leaders have been killed this many times

_LEADERS = ("SELECT l.pid, l.objid::bigint / $2 AS partitions, l.objid::bigint % $2 AS partition FROM pg_locks l "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = $1::bigint::oid "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")


async def leaders(connection: asyncpg.Connection) -> dict[int, set[int]]:
    """Each relay session (by backend pid) → the partitions it leads."""
    led: dict[int, set[int]] = {}
    for row in await connection.fetch(_LEADERS, PARTITION_LOCK, LOCK_SPAN):
        led.setdefault(row["pid"], set()).add(row["partition"])
    return led


async def until(check, timeout: float = 20.0):  # noqa: ANN001, ANN201
    for _ in range(int(timeout / 0.1)):
        if result := await check():
            return result
        await asyncio.sleep(0.1)
    raise AssertionError("never happened")


@pytest.mark.slow
async def test_killing_partition_leaders_under_load_loses_and_duplicates_nothing(relay_stack, tmp_path):  # noqa: F811
    relays = Relays(relay_stack, tmp_path)
    env = {"THREADLINE_RELAY_PARTITIONS": str(PARTITIONS)}
    running = [relays.start(**env), relays.start(**env)]
    dsn = asyncpg_dsn(relay_stack.settings.resolved_database_url())
    watcher, holder = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    stream = await connect_nats(relay_stack.settings)
    work = asyncio.create_task(make_decisions(relay_stack, CASES, DECISIONS_PER_CASE,
                                              load_until=lambda: relays.kills >= KILLS))
    republished: list[tuple[list[str], int]] = []
    try:
        while relays.kills < KILLS:  # the load goes on until then
            # Both relays lead (two partitions each) before one of them dies.
            split = await until(lambda: _split(watcher), timeout=30)
            assert sorted(len(p) for p in split.values()) == [PARTITIONS // 2, PARTITIONS // 2]
            backend = sorted(split)[relays.kills % 2]
            victim, unmarked = await _kill_between_ack_and_mark(relays, running, watcher, holder, backend,
                                                                split[backend])
            last_seq = (await stream.jetstream().stream_info(relay_stack.settings.stream_name)).state.last_seq
            await holder.execute("ROLLBACK")
            republished.append((unmarked, last_seq))
            running.remove(victim)
            # The survivor takes the dead leader's partitions: every partition led, by one relay.
            await until(lambda: _all_led_by_one(watcher), timeout=15)
            running.insert(0, relays.start(**env))
        decisions = await work
        await wait_until_published(relay_stack.db)
    finally:
        relays.stop_all()
        await watcher.close()
        await holder.close()
        await stream.close()
    events = await stream_events(relay_stack.settings)
    # Each kill left events JetStream had stored but the outbox had not marked, which a relay then published again:
    # the stream holds them once, at the sequence from before the kill.
    seq_of = {e["id"]: e["seq"] for e in events}
    for unmarked, last_seq in republished:
        assert any(seq_of[event_id] <= last_seq for event_id in unmarked), "no kill fell between ack and mark"
    suppressed = sum(log.read_text().count("relay_duplicate_suppressed") for log in tmp_path.glob("relay-*.log"))
    print(f"\n{relays.kills} partition leaders killed; JetStream dropped {suppressed} re-published duplicate(s)")
    assert suppressed >= 1, "the relays never published an event JetStream already had"
    assert decisions > 0
    assert_exact_stream(events, CASES, DECISIONS_PER_CASE)
    await assert_outbox_published_once(relay_stack.db, events)


_WAITING_TO_MARK = ("SELECT client_port FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock' "
                    "AND query LIKE 'UPDATE outbox%'")


async def _kill_between_ack_and_mark(relays: Relays, running: list[subprocess.Popen], watcher: asyncpg.Connection,
                                     holder: asyncpg.Connection, backend: int,
                                     partitions: set[int]) -> tuple[subprocess.Popen, list[str]]:
    """SIGKILL the relay whose session is `backend` after JetStream acknowledged events of its partitions and
    before it marked them published; return it and the events it had left unmarked.

    `holder` locks the pending rows of those partitions (FOR SHARE: the relay still reads and publishes them, but
    its UPDATE marking them waits), and keeps them locked, in an open transaction, for the caller to roll back.
    Once the relay waits to mark, it is killed and its session ended (PostgreSQL would otherwise run the UPDATE
    when the lock went, not noticing the client had gone until it answered): what a crash between the two does."""
    while True:
        await holder.execute("BEGIN")
        unmarked = [str(row["event_id"]) for row in await holder.fetch(
            "SELECT event_id FROM outbox WHERE published_at IS NULL AND slot % $1 = ANY($2::int[]) FOR SHARE",
            PARTITIONS, sorted(partitions))]
        if unmarked:
            break
        await holder.execute("ROLLBACK")
        await asyncio.sleep(0.1)
    port = await until(lambda: watcher.fetchval(_WAITING_TO_MARK, backend))
    victim = next(p for p in running if any(c.laddr.port == port for c in psutil.Process(p.pid).net_connections()))
    relays.kill(victim)
    assert await watcher.fetchval("SELECT pg_terminate_backend($1, 10000)", backend)
    return victim, unmarked


async def _split(connection: asyncpg.Connection) -> dict[int, set[int]] | None:
    led = await leaders(connection)
    every = [p for partitions in led.values() for p in partitions]
    return led if len(led) == 2 and sorted(every) == list(range(PARTITIONS)) else None


async def _all_led_by_one(connection: asyncpg.Connection) -> bool:
    led = await leaders(connection)
    return len(led) == 1 and sorted(next(iter(led.values()))) == list(range(PARTITIONS))


async def test_relays_with_another_count_or_from_before_partitions_never_lead_beside_them(relay_stack, tmp_path):  # noqa: F811
    relays = Relays(relay_stack, tmp_path)
    watcher = await asyncpg.connect(asyncpg_dsn(relay_stack.settings.resolved_database_url()))
    old_leader = await asyncpg.connect(asyncpg_dsn(relay_stack.settings.resolved_database_url()))
    try:
        # A relay from before partitions holds the single leader lock: a partitioned relay waits.
        assert await old_leader.fetchval("SELECT pg_try_advisory_lock($1::bigint)", LEGACY_LEADER_LOCK)
        four = relays.start(THREADLINE_RELAY_PARTITIONS="4")
        await asyncio.sleep(3)
        assert four.poll() is None and await leaders(watcher) == {}
        await old_leader.close()  # the old relay is gone
        await until(lambda: _all_led_by_one(watcher))
        # A relay configured with eight partitions leads nothing while the four-partition relay leads ...
        eight = relays.start(THREADLINE_RELAY_PARTITIONS="8")
        await relays.logs(eight, "partition_count_mismatch")
        led = await leaders(watcher)
        assert len(led) == 1 and await _all_led_by_one(watcher)
        # ... and takes all eight once it is gone (a rolling restart to a new count).
        relays.kill(four)

        async def eight_led() -> bool:
            rows = await watcher.fetch(_LEADERS, PARTITION_LOCK, LOCK_SPAN)
            return sorted((r["partitions"], r["partition"]) for r in rows) == [(8, p) for p in range(8)]

        await until(eight_led)
    finally:
        relays.stop_all()
        await watcher.close()
        if not old_leader.is_closed():
            await old_leader.close()


async def test_rows_written_before_the_upgrade_get_their_partition(servers):
    url = await servers.create_database()
    engine = create_engine(url, pool_size=1)
    aggregates = [f"case-{n}" for n in range(40)] + ["company-acme"]
    try:
        await upgrade(engine, "0013")
        async with engine.begin() as connection:
            for n, aggregate in enumerate(aggregates):
                await connection.execute(text(
                    "INSERT INTO outbox (event_id, aggregate, subject, event_type, envelope) "
                    "VALUES (gen_random_uuid(), :aggregate, 's', 't', '{}')"), {"aggregate": aggregate})
                if n % 2:
                    await connection.execute(text("UPDATE outbox SET published_at = now() WHERE aggregate = :a"),
                                             {"a": aggregate})
        await upgrade(engine)
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT aggregate, slot FROM outbox ORDER BY id"))).all()
            pending = {p: (await connection.execute(text(
                "SELECT aggregate FROM outbox WHERE published_at IS NULL AND slot % 4 = ANY(:p) ORDER BY id"),
                {"p": [p]})).scalars().all() for p in range(4)}
    finally:
        await engine.dispose()
        await servers.drop_database(url)
    assert [(r.aggregate, r.slot) for r in rows] == [(a, slot_of(a)) for a in aggregates]
    assert len({slot_of(a) % 4 for a in aggregates}) == 4, "forty aggregates spread over every partition"
    # Each unpublished row is in exactly the partition the relay computes, so some relay publishes it.
    assert sorted(a for p in pending.values() for a in p) == sorted(aggregates[0::2])
    assert all(partition_of(a, 4) == p for p, found in pending.items() for a in found)
