"""The outbox relay: publishes committed events to JetStream, in order per case and company.

The outbox is split into partitions by aggregate (services/relay/partitions.py): each partition has one leader at
a time (a PostgreSQL advisory lock per partition), any number of relay processes share the partitions, and a
standby takes a dead leader's partitions within a second. The leader is woken by the signal a service sends on NATS after
committing events (`<prefix>.outbox.committed`) and also polls. (Not by LISTEN/NOTIFY: PostgreSQL
serialises every committing transaction that sent a NOTIFY on one global lock, WAL flush included, which
capped the agents' stage calls at a fraction of what the database could take.) Each
event is published with its id as `Nats-Msg-Id` and marked sent only after JetStream acknowledged
it: a crash between the two re-publishes it, and JetStream's duplicate window drops the copy.
Events of one aggregate (a case or a company) reach the stream in outbox order: a pass sends each aggregate's
unsent events as one JetStream atomic batch, stored all or nothing with one ack (services/relay/batches.py), or,
where the stream does not take batches or refused one, one after another, each waiting for its ack. Different
aggregates go out concurrently, and a pass runs in two lanes (each case in one), so that one lane's waits on the
database and on acks overlap the other's publishing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import asyncpg
import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from services.relay.batches import (
    BatchRefused,
    Message,
    in_flight_per_relay,
    publish_batch,
    stream_takes_batches,
)
from services.relay.partitions import RELAY, Partitions
from shared import nats_client
from shared.logging import get_logger
from shared.nats_auth import nats_options
from shared.observability import message_span, service_gauge
from shared.partition_leases import SESSION_LOST, session
from shared.settings import Settings
from shared.subjects import Service, Subjects

log = get_logger(__name__)

MAX_PARALLEL_AGGREGATES = 64
LANES = 2  # passes a relay runs at once over its partitions' aggregates (publish_pass)
PUBLISH_TIMEOUT_SECONDS = 5.0
OBSERVE_EVERY_SECONDS = 1.0
WOKEN, STOPPED = "relay-woken", "relay-stopped"  # the waits between passes (named: a task dump shows them)

OUTBOX_PENDING = service_gauge("threadline_outbox_pending_events",
                               "Events committed to the outbox and not yet acknowledged by JetStream")
OUTBOX_OLDEST_PENDING = service_gauge("threadline_outbox_oldest_pending_seconds",
                                      "Age of the oldest event not yet acknowledged by JetStream (0 when none)")
METRICS = (*RELAY.metrics(), OUTBOX_PENDING, OUTBOX_OLDEST_PENDING)  # what a relay process shows


@dataclass(frozen=True)
class Lanes:
    """What the lanes of one pass share: the session (one statement at a time), aggregates and batches in flight."""

    session: asyncio.Lock
    aggregates: asyncio.Semaphore
    batches: asyncio.Semaphore | None


class OutboxRelay:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.published = 0
        self.observed_at = 0.0
        self.batches = False  # whether the stream takes a case's chain as one atomic batch (services/relay/batches.py)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Lead when possible, publish until stopped; survive database and NATS outages."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                await self._lead(stop)
            except (*SESSION_LOST, nats.errors.Error) as exc:
                log.warning("relay_connection_lost", error=str(exc) or repr(exc))
            if not stop.is_set():
                await _sleep_unless(stop, self.settings.relay_poll_interval)

    async def _lead(self, stop: asyncio.Event) -> None:
        db = await _connect(self.settings)
        nc = None
        partitions = Partitions(self.settings.relay_partitions)
        try:
            while not await partitions.join(db):
                await self.observe_outbox(db)  # a standby reports the backlog too: most telling when no one leads
                if await _sleep_unless(stop, self.settings.relay_poll_interval):
                    return
            nc = await nats_client.lasting(nats_options(self.settings, Service.RELAY.value, name="threadline-relay")
                                           .client())
            js = nc.jetstream(timeout=PUBLISH_TIMEOUT_SECONDS)
            self.batches = await stream_takes_batches(js, self.settings.stream_name)
            log.info("relay_publishing", atomic_batches=self.batches)
            wake = asyncio.Event()

            async def woken(_: Any) -> None:
                wake.set()

            await nc.subscribe(Subjects(self.settings.nats_prefix).outbox_committed, cb=woken)
            while not stop.is_set():
                wake.clear()
                await partitions.rebalance(db)  # between passes only: a partition is handed back with no publish open
                sent = (await self.publish_pass(db, js, sorted(partitions.led), nc=nc, relays=partitions.members)
                        if partitions.led else 0)
                await self.observe_outbox(db)
                if sent >= self.settings.relay_batch_size:
                    continue
                waiter = asyncio.create_task(wake.wait(), name=WOKEN)
                stopper = asyncio.create_task(stop.wait(), name=STOPPED)
                try:
                    await asyncio.wait({waiter, stopper}, timeout=self.settings.relay_poll_interval,
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:  # a relay cancelled while it waits leaves no task waiting on for ever
                    waiter.cancel()
                    stopper.cancel()
        finally:
            partitions.forget()
            try:
                if nc is not None:
                    await nats_client.let_go(nc)
            finally:
                await db.close()

    async def publish_pass(self, db: asyncpg.Connection, js: JetStreamContext, partitions: list[int], *,
                           nc: Client | None = None, relays: int = 1) -> int:
        """One pass over the partitions this relay leads, in LANES lanes at once; return how many events were acked.

        A lane publishes the events of the aggregates whose slot falls in it (so each case stays in one lane, in
        order) and waits on the database and on JetStream's acks in turn; while one lane waits, another uses the
        CPU. The lanes share the relay's one session (one statement at a time) and its batches in flight, and the
        pass ends when every lane has, so a partition is still handed back with no publish open."""
        shared = Lanes(asyncio.Lock(), asyncio.Semaphore(MAX_PARALLEL_AGGREGATES),
                       asyncio.Semaphore(in_flight_per_relay(relays)) if nc is not None and self.batches else None)
        sent = await asyncio.gather(*(self.publish_pending(db, js, partitions, nc=nc, lane=lane, shared=shared)
                                      for lane in range(LANES)), return_exceptions=True)
        for lane in sent:  # every lane has ended (none left using the session) before a failure is raised
            if isinstance(lane, BaseException):
                raise lane
        return sum(sent)  # type: ignore[arg-type]

    async def publish_pending(self, db: asyncpg.Connection, js: JetStreamContext, partitions: list[int], *,
                              nc: Client | None = None, lane: int = 0, shared: Lanes) -> int:
        """Publish one batch of one lane's unsent events of the partitions this relay leads; return how many were
        acked. Each case's chain goes out as one atomic batch where the stream takes them (and `nc` is given),
        else one event at a time, each waiting for its ack."""
        async with shared.session:
            rows = await db.fetch(
                "SELECT id, aggregate, subject, envelope, headers FROM outbox "
                "WHERE published_at IS NULL AND slot % $2 = ANY($3::int[]) AND (slot / $2) % $4 = $5 "
                "ORDER BY id LIMIT $1",
                self.settings.relay_batch_size, self.settings.relay_partitions, partitions, LANES, lane,
            )
        if not rows:
            return 0
        chains: OrderedDict[str, list[Any]] = OrderedDict()
        for row in rows:
            chains.setdefault(row["aggregate"], []).append(row)
        acked: list[tuple[int, int]] = []
        limit, batches = shared.aggregates, shared.batches

        async def publish_chain(chain: list[Any]) -> None:
            async with limit:
                if batches is not None and nc is not None and len(chain) > 1:
                    async with batches:
                        if await self._publish_as_batch(nc, chain, acked):
                            return
                for row in chain:
                    headers = _decoded(row["headers"])
                    try:
                        with message_span(row["subject"], "publish", headers,
                                          **{"messaging.message.id": headers.get("Nats-Msg-Id", "")}):
                            ack = await js.publish(row["subject"], _body(row["envelope"]), headers=headers)
                    except Exception as exc:  # noqa: BLE001 - the rest of this chain waits for the next pass
                        log.warning("relay_publish_failed", aggregate=row["aggregate"], outbox_id=row["id"],
                                    error=repr(exc))
                        return
                    if ack.duplicate:
                        # Published before but not marked (a relay died in between): JetStream kept one.
                        log.info("relay_duplicate_suppressed", outbox_id=row["id"], stream_seq=ack.seq)
                    acked.append((row["id"], ack.seq))

        await asyncio.gather(*(publish_chain(chain) for chain in chains.values()))
        if acked:
            async with shared.session:
                await db.execute(
                    "UPDATE outbox AS o SET published_at = now(), stream_seq = a.seq "
                    "FROM unnest($1::bigint[], $2::bigint[]) AS a(id, seq) WHERE o.id = a.id",
                    [i for i, _ in acked],
                    [s for _, s in acked],
                )
            self.published += len(acked)
            log.debug("relay_published", count=len(acked))
        return len(acked)

    async def _publish_as_batch(self, nc: Client, chain: list[Any], acked: list[tuple[int, int]]) -> bool:
        """Publish a case's chain as one atomic batch; False when JetStream refused it (nothing stored: publish it
        one event at a time), True otherwise (acked, or no answer: the chain waits for the next pass)."""
        with ExitStack() as spans:
            messages = []
            for row in chain:
                headers = _decoded(row["headers"])
                spans.enter_context(message_span(row["subject"], "publish", headers, **{
                    "messaging.message.id": headers.get("Nats-Msg-Id", ""), "messaging.batch.message_count": len(chain)}))
                messages.append(Message(row["subject"], _body(row["envelope"]), headers))
            try:
                sequences = await publish_batch(nc, messages, PUBLISH_TIMEOUT_SECONDS)
            except BatchRefused as refused:
                if refused.unsupported:
                    self.batches = False
                    log.warning("relay_atomic_batches_unsupported", error=str(refused))
                else:  # e.g. an event JetStream already has (a relay died before marking it), or too many batches
                    log.info("relay_batch_refused", aggregate=chain[0]["aggregate"], events=len(chain),
                             error=str(refused))
                return False
            except Exception as exc:  # noqa: BLE001 - stored or not, unknown: the chain waits for the next pass
                log.warning("relay_publish_failed", aggregate=chain[0]["aggregate"], outbox_id=chain[0]["id"],
                            events=len(chain), error=repr(exc))
                return True
        acked.extend(zip((row["id"] for row in chain), sequences, strict=True))
        return True

    async def observe_outbox(self, db: asyncpg.Connection) -> None:
        """The outbox backlog for /metrics, at most once a second (the pending rows are indexed)."""
        if time.monotonic() - self.observed_at < OBSERVE_EVERY_SECONDS:
            return
        self.observed_at = time.monotonic()
        row = await db.fetchrow(
            "SELECT count(*) AS pending, coalesce(extract(epoch FROM now() - min(created_at)), 0) AS oldest "
            "FROM outbox WHERE published_at IS NULL"
        )
        OUTBOX_PENDING.set(row["pending"])
        OUTBOX_OLDEST_PENDING.set(float(row["oldest"]))


async def _connect(settings: Settings) -> asyncpg.Connection:
    """The relay's session (a leader queries at least every poll interval)."""
    return await session(settings, "threadline-relay", idle_seconds=max(30.0, 10 * settings.relay_poll_interval))


def _decoded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _body(envelope: Any) -> bytes:
    if isinstance(envelope, str):
        return envelope.encode()
    return json.dumps(envelope, separators=(",", ":")).encode()


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep; return True early when `stop` is set."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
        return True
    except TimeoutError:
        return False


async def run_relay(ctx: Any) -> None:
    """Background job of the relay process."""
    await OutboxRelay(ctx.settings).run()
