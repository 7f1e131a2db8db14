"""The projection's event consumer: the durable `projection` consumer of the event stream.

It is given only the events the read models need (the consumer's subject filter): `ledger.changed`, and the
proposals staged and decided, for the search index. Explicit acks: an event is acknowledged only after its
effect committed; a failure naks it for redelivery, with a growing delay; a message that is not a usable
event is terminated, not retried. The proposals staged in one fetch are indexed in one transaction, and each
case's other events of the fetch in one of their own (read_models.apply_events), so a busy stream costs a
round of statements per batch and case rather than per event; when that fails, each is tried on its own.
Applying is idempotent (the inbox records each event id, and a view skips revisions it already shows), so a
redelivered or replayed event changes nothing twice. It pulls through shared/durable.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
from prometheus_client import Gauge
from pydantic import ValidationError

from services.projection import read_models
from services.projection.repository import SqlProjectionUnitOfWork
from shared import durable
from shared.events import DATA_SCHEMAS
from shared.logging import bound, get_logger
from shared.observability import batch_span, message_span
from shared.service import Meta, ServiceContext
from shared.streams import PROJECTION_CONSUMER

log = get_logger(__name__)

RETRY_DELAY_SECONDS = 2.0
MAX_RETRY_DELAY_SECONDS = 60.0
LAG_CHECK_SECONDS = 5.0
# Under load, events are applied a batch per transaction: the views and the search index may trail by this much
# more (a read that finds its case's view behind the ledger brings it up to date itself).
BATCH_LINGER_SECONDS = 0.05

PROJECTION_LAG = Gauge("threadline_projection_lag_events",
                       "Events in the stream that the projection's durable consumer has not yet delivered and acked")


async def consume(ctx: ServiceContext) -> None:
    """Background job of the projection service."""
    lag_checked = 0.0

    async def apply(js: Any, messages: list[Any]) -> None:
        await _apply_batch(ctx, messages)
        if messages:
            PROJECTION_LAG.set(messages[-1].metadata.num_pending)

    async def idle(subscription: Any) -> None:
        nonlocal lag_checked
        if asyncio.get_running_loop().time() - lag_checked > LAG_CHECK_SECONDS:
            lag_checked = asyncio.get_running_loop().time()
            await _observe_lag(subscription)

    await durable.pull(ctx, PROJECTION_CONSUMER, apply, idle, linger=BATCH_LINGER_SECONDS)


async def _observe_lag(subscription: Any) -> None:
    """The consumer's backlog as the server counts it (when idle: naks waiting for redelivery count too)."""
    try:
        info = await subscription.consumer_info()
    except (nats.errors.Error, TimeoutError):
        return
    PROJECTION_LAG.set(info.num_pending + info.num_ack_pending)


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
