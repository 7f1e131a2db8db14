"""The projection's event consumer: the partitions of the projection's stream that this replica leads.

It is given only the events the read models need (shared/streams.py: the projection's stream sources them from the
event stream): `ledger.changed`, and the proposals staged and decided, for the search index — each case's in one of
THREADLINE_PROJECTION_PARTITIONS partitions, each partition's through a durable consumer of its own. The replicas
share the partitions, one leader each (services/projection/partitions.py), so one replica applies all of a case's
events. The partitions a replica leads are pulled side by side and what they fetched is applied together, a batch at
a time: the proposals staged in a batch are indexed in one transaction, and each case's other events of the batch
in one of their own (read_models.apply_events), so a busy stream costs a round of statements per batch and case
rather than per event; when that fails, each is tried on its own. Explicit acks: an event is acknowledged only after
its effect committed; a failure naks it for redelivery, with a growing delay; a message that is not a usable event
is terminated, not retried. Applying is idempotent (the inbox records each event id, and a view skips revisions it
already shows), so a redelivered or replayed event changes nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import nats
from pydantic import ValidationError

from services.projection import read_models
from services.projection.partitions import PROJECTION
from services.projection.repository import SqlProjectionUnitOfWork
from shared import durable, nats_client
from shared.events import DATA_SCHEMAS
from shared.logging import bound, get_logger
from shared.nats_auth import nats_options
from shared.observability import batch_span, message_span, service_gauge
from shared.partition_leases import REBALANCE_EVERY_SECONDS, SESSION_LOST, PartitionLeases, session
from shared.service import Meta, ServiceContext
from shared.streams import projection_consumer, projection_stream_name
from shared.subjects import Service

log = get_logger(__name__)

RETRY_DELAY_SECONDS = 2.0
MAX_RETRY_DELAY_SECONDS = 60.0
LAG_CHECK_SECONDS = 5.0
# Under load, events are applied a batch per transaction: the views and the search index may trail by this much
# more (a read that finds its case's view behind the ledger brings it up to date itself).
BATCH_LINGER_SECONDS = 0.05
BUSY_SECONDS = 1.0  # a batch ended this recently: the next waits up to the linger to fill
SESSION_RETRY_SECONDS = 1.0
PULL_RETRY_SECONDS = 1.0  # a partition's puller failed: it starts again after this, doubled while it keeps failing,
PULL_RETRY_MAX_SECONDS = 30.0  # up to this
STOP_WAIT_SECONDS = 3 * durable.FETCH_WAIT_SECONDS  # a partition handed back: its fetch and batch finish first

PROJECTION_LAG = service_gauge("threadline_projection_lag_events",
                               "Events of the partitions this projection replica leads that it has not yet applied and acked")
METRICS = (*PROJECTION.metrics(), PROJECTION_LAG)  # what a projection process shows


async def consume(ctx: ServiceContext) -> None:
    """Background job of the projection service: lead a fair share of the partitions and apply their events."""
    service = Service.PROJECTION.value
    options = nats_options(ctx.settings, service, name=f"threadline-{service}-consumer")
    connection = await nats_client.lasting(options.client())
    applier = Applier(ctx)
    try:
        async with asyncio.TaskGroup() as tasks:  # the applier failing (say, acks on a lost connection) ends it all
            tasks.create_task(applier.run())
            while True:  # until the service stops (cancels this job)
                try:
                    await _lead(ctx, connection.jetstream(), applier)
                except SESSION_LOST as error:
                    # The session (and with it every partition) is gone: another replica takes them; join again.
                    log.warning("projection_partitions_lost", error=str(error) or repr(error))
                await asyncio.sleep(SESSION_RETRY_SECONDS)
    finally:
        await connection.close()


class Applier:
    """What the pullers of one replica's partitions fetched, applied together: one task takes what they have queued
    as one batch (while busy, waiting up to the linger for a full one), so leading many partitions costs no more
    transactions than leading one. Each puller waits until its messages are applied before it fetches again (a
    partition's events stay in order, and none waits out its ack deadline in the queue)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.queue: asyncio.Queue[tuple[list[Any], asyncio.Future[None]]] = asyncio.Queue()
        self.busy: set[int] = set()  # the partitions whose last fetch found events

    def share(self, partition: int) -> int:
        """How many events a partition's next fetch asks for: its share of a batch among the busy partitions, so
        that they have about one batch out at a time together, as one consumer had (a replica that fetched a full
        batch for each of many partitions would hold events in its queue past their ack deadline under a backlog,
        and have them delivered again), and one busy partition alone still fetches a full batch."""
        return max(1, durable.BATCH // (len(self.busy - {partition}) + 1))

    async def submit(self, messages: list[Any]) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self.queue.put((messages, done))
        await done

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        last = -BUSY_SECONDS
        while True:
            entries = [await self.queue.get()]
            count = len(entries[0][0])
            # Busy (a batch ended moments ago): wait up to the linger for a full batch — the pullers whose messages
            # were just applied are fetching again. After a quiet spell, the first event is applied at once.
            deadline = loop.time() + (BATCH_LINGER_SECONDS if loop.time() - last < BUSY_SECONDS else 0.0)
            while count < durable.BATCH:
                try:
                    entry = self.queue.get_nowait()
                except asyncio.QueueEmpty:
                    if (wait := deadline - loop.time()) <= 0:
                        break
                    try:
                        entry = await asyncio.wait_for(self.queue.get(), wait)
                    except TimeoutError:
                        break
                entries.append(entry)
                count += len(entry[0])
            try:
                await _apply_batch(self.ctx, [message for messages, _ in entries for message in messages])
            finally:
                for _, done in entries:
                    if not done.done():
                        done.set_result(None)
                last = loop.time()


async def _lead(ctx: ServiceContext, js: Any, applier: Applier) -> None:
    """Join the replicas sharing the partitions, and once a second take or hand back partitions: a partition taken
    gets a puller, one handed back has its puller stopped (after its fetch and batch) before its lock goes."""
    pullers: dict[int, tuple[asyncio.Task[None], asyncio.Event]] = {}
    lag: dict[int, int] = {}
    partitions = PartitionLeases(PROJECTION, ctx.settings.projection_partitions)
    db = await session(ctx.settings, "threadline-projection", idle_seconds=30.0)

    async def stop(handed_back: set[int]) -> None:
        for partition in handed_back:
            pullers[partition][1].set()
        tasks = [pullers[p][0] for p in handed_back]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=STOP_WAIT_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for partition in handed_back:
            del pullers[partition]
            lag.pop(partition, None)
        PROJECTION_LAG.set(sum(lag.values()))

    try:
        await partitions.join(db)
        while True:
            for partition in await partitions.rebalance(db, before_release=stop):
                ended = asyncio.Event()
                task = asyncio.create_task(_keep_pulling(ctx, js, partition, applier, ended, lag),
                                           name=f"projection-partition-{partition}")
                pullers[partition] = (task, ended)
            await asyncio.sleep(REBALANCE_EVERY_SECONDS)
    finally:
        for task, _ in pullers.values():
            task.cancel()
        await asyncio.gather(*(task for task, _ in pullers.values()), return_exceptions=True)
        partitions.forget()
        PROJECTION_LAG.set(0)
        await db.close()


async def _keep_pulling(ctx: ServiceContext, js: Any, partition: int, applier: Applier, stop: asyncio.Event,
                        lag: dict[int, int]) -> None:
    """Pull one partition (_pull) until `stop`. A puller that fails starts again after a delay that doubles while it
    keeps failing (a consumer that cannot be bound warns at most every PULL_RETRY_MAX_SECONDS, not every second),
    back to the first once its consumer is bound again."""
    delay = PULL_RETRY_SECONDS

    def bound() -> None:
        nonlocal delay
        delay = PULL_RETRY_SECONDS

    while not stop.is_set():
        try:
            return await _pull(ctx, js, partition, applier, stop, lag, bound)
        except Exception as error:  # noqa: BLE001 - the partition stays this replica's: pull it again
            log.warning("projection_partition_pull_failed", partition=partition, error=repr(error), retry_in=delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)  # a partition handed back meanwhile is not pulled again
        delay = min(PULL_RETRY_MAX_SECONDS, 2 * delay)


async def _pull(ctx: ServiceContext, js: Any, partition: int, applier: Applier, stop: asyncio.Event,
                lag: dict[int, int], bound: Callable[[], None]) -> None:
    """Fetch one partition's events (its share of a batch: Applier.share) and have them applied, until `stop`;
    `bound` is called once its consumer is."""
    subscription = await durable.bind(js, projection_stream_name(ctx.settings), projection_consumer(partition),
                                      Service.PROJECTION.value)
    bound()
    checked = 0.0
    try:
        while not stop.is_set():
            messages = await durable.fetch(subscription, applier.share(partition), "projection_fetch_failed",
                                           partition=partition)
            if messages is None:
                return  # closed by shutdown: nothing more will arrive
            if not messages:
                applier.busy.discard(partition)
                if asyncio.get_running_loop().time() - checked > LAG_CHECK_SECONDS:
                    checked = asyncio.get_running_loop().time()
                    lag[partition] = await _observe_lag(subscription, lag.get(partition, 0))
                    PROJECTION_LAG.set(sum(lag.values()))
                continue
            applier.busy.add(partition)
            await applier.submit(messages)
            lag[partition] = messages[-1].metadata.num_pending
            PROJECTION_LAG.set(sum(lag.values()))
    finally:
        applier.busy.discard(partition)
        with contextlib.suppress(nats.errors.Error):  # a closed or draining connection: it goes with it
            await subscription.unsubscribe()


async def _observe_lag(subscription: Any, known: int) -> int:  # noqa: ANN401 - nats-py's subscription
    """A partition's backlog as the server counts it (when idle: naks waiting for redelivery count too)."""
    try:
        info = await subscription.consumer_info()
    except (nats.errors.Error, TimeoutError):
        return known
    return info.num_pending + info.num_ack_pending


async def _apply_batch(ctx: ServiceContext, messages: list[Any]) -> None:
    """A fetch's events (read_models.apply_events); when that fails, each again on its own (those applied already
    are acknowledged), so that only the one that cannot apply waits for redelivery."""
    usable: list[tuple[Any, dict[str, Any]]] = []
    for message in messages:
        envelope = _usable(message.data)
        if envelope is None:
            await _let_go(message)
        else:
            usable.append((message, envelope))
    if len(usable) < 2:
        for message, envelope in usable:
            await _handle(ctx, message, envelope)
        return
    try:
        uow = SqlProjectionUnitOfWork.of(ctx, Meta())
        with batch_span("projection apply", [dict(m.headers or {}) for m, _ in usable]):
            await read_models.apply_events([(e, m.metadata.sequence.stream) for m, e in usable], uow)
    except Exception as error:  # noqa: BLE001 - find the event that fails: each on its own
        log.warning("event_batch_apply_failed", error=repr(error), events=len(usable))
        for message, envelope in usable:
            await _handle(ctx, message, envelope)
        return
    for message, _ in usable:
        await message.ack()


async def _let_go(message: Any) -> None:
    headers = message.headers or {}
    with bound(correlation_id=headers.get("correlation_id"), event_id=headers.get("Nats-Msg-Id")):
        # Not a Threadline event: redelivering it would never help, and a view that misses a revision
        # is rebuilt from the ledger, so nothing is lost by letting it go.
        log.error("event_unusable", subject=message.subject, stream_seq=message.metadata.sequence.stream)
        await message.term()


async def _handle(ctx: ServiceContext, message: Any, envelope: dict[str, Any]) -> None:
    headers = message.headers or {}
    with bound(correlation_id=headers.get("correlation_id"), event_id=headers.get("Nats-Msg-Id")):
        try:
            uow = SqlProjectionUnitOfWork.of(ctx, Meta(correlation_id=headers.get("correlation_id")))
            with message_span(message.subject, "process", dict(headers), **{"messaging.message.id": envelope["id"]}):
                applied = await read_models.apply_event(envelope, message.metadata.sequence.stream, uow)
            await message.ack()
            log.debug("event_applied" if applied else "event_already_applied", type=envelope.get("type"))
        except Exception as error:  # noqa: BLE001 - redeliver later; the stream keeps the event
            attempt = message.metadata.num_delivered or 1
            delay = min(MAX_RETRY_DELAY_SECONDS, RETRY_DELAY_SECONDS * 2 ** min(attempt - 1, 5))
            log.warning("event_apply_failed", error=repr(error), subject=message.subject, attempt=attempt,
                        retry_in=delay)
            await message.nak(delay=delay)


def _usable(data: bytes) -> dict[str, Any] | None:
    """The event's envelope when it has what applying needs (an id, a type, and data its schema accepts)."""
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("id"), str) or not envelope.get("type"):
        return None
    schema = DATA_SCHEMAS.get(envelope["type"]) if envelope["type"] in read_models.APPLIED else None
    if schema is not None:
        try:
            schema.model_validate(envelope.get("data"))
        except ValidationError:
            return None
    return envelope
