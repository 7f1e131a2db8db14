"""The webhooks service's event consumer: the durable `webhooks` consumer of the event stream.

Each event becomes deliveries for the webhooks it is for, in one transaction, and is acknowledged only
after that committed; recording is idempotent (a delivery's key is its webhook and event), so a
redelivered event changes nothing. The consumer lets one event be outstanding at a time
(`max_ack_pending=1`, provisioned by `migrate`): events are recorded in stream order whichever replica
takes them and however often one crashes mid-event, and the senders' per-case order rests on that.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import NotFoundError

from services.webhooks import use_cases
from shared.logging import bound, get_logger
from shared.service import ServiceContext
from shared.streams import WEBHOOKS_CONSUMER

log = get_logger(__name__)

RETRY_DELAY_SECONDS = 1.0
MAX_RETRY_DELAY_SECONDS = 30.0


async def consume(ctx: ServiceContext, wake: asyncio.Event) -> None:
    """Record events as deliveries until cancelled; `wake` tells this replica's senders there is work."""
    connection = await nats.connect(ctx.settings.resolved_nats_url(), name="threadline-webhooks-consumer",
                                    max_reconnect_attempts=-1)
    try:
        js = connection.jetstream()
        while True:
            try:
                subscription = await js.pull_subscribe_bind(WEBHOOKS_CONSUMER, stream=ctx.settings.stream_name)
                break
            except NotFoundError:
                log.error("webhooks_consumer_missing", stream=ctx.settings.stream_name,
                          hint="run `threadline migrate` to provision the stream and its consumers")
                await asyncio.sleep(5)
        log.info("webhooks_consumer_started", stream=ctx.settings.stream_name)
        while True:
            try:
                messages = await subscription.fetch(1, timeout=1.0)
            except (TimeoutError, NatsTimeout):
                continue
            except nats.errors.ConnectionClosedError:
                return
            except nats.errors.Error as error:
                log.warning("webhooks_fetch_failed", error=repr(error))
                await asyncio.sleep(RETRY_DELAY_SECONDS)
                continue
            for message in messages:
                await _handle(ctx, message, wake)
    finally:
        await connection.close()


async def _handle(ctx: ServiceContext, message: Any, wake: asyncio.Event) -> None:
    headers = message.headers or {}
    with bound(correlation_id=headers.get("correlation_id"), event_id=headers.get("Nats-Msg-Id")):
        envelope = _usable(message.data)
        if envelope is None:
            log.error("event_unusable", subject=message.subject, stream_seq=message.metadata.sequence.stream)
            await message.term()
            return
        try:
            made = await use_cases.record_event(ctx, envelope, message.metadata.sequence.stream)
        except Exception as error:  # noqa: BLE001 - the stream keeps the event; it comes back
            attempt = message.metadata.num_delivered or 1
            delay = min(MAX_RETRY_DELAY_SECONDS, RETRY_DELAY_SECONDS * 2 ** min(attempt - 1, 5))
            log.warning("event_record_failed", error=repr(error), subject=message.subject, attempt=attempt,
                        retry_in=delay)
            await message.nak(delay=delay)
            return
        await message.ack()
        if made:
            log.debug("event_recorded", type=envelope["type"], deliveries=made)
            wake.set()


def _usable(data: bytes) -> dict[str, Any] | None:
    try:
        envelope = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("id"), str):
        return None
    if not isinstance(envelope.get("type"), str) or not isinstance(envelope.get("subject"), str):
        return None
    return envelope
