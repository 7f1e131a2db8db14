"""The webhooks service's event consumer: the durable `webhooks` consumer of the event stream.

Each batch of events becomes deliveries for the webhooks they are for, in one transaction, and is
acknowledged only after that committed. Events are recorded strictly in stream order — the senders'
per-case order rests on it — whichever replica takes them and however often one dies holding some:
the transaction locks the position (the last sequence recorded), skips what lies at or below it
(redeliveries change nothing), and stops at an event whose predecessor is still out, which is handed
back to come again after it. The position belongs to one stream: a process's first batch, and any batch
that does not go on from it, first asks whether the stream is a new one (a restore into a new data dir, which
always means a new process), counted then from its start. The consumer is provisioned by `migrate`; this code
only binds to it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nats.js.errors import NotFoundError

from services.webhooks import domain, use_cases
from shared import durable
from shared.logging import get_logger
from shared.service import ServiceContext
from shared.streams import WEBHOOKS_CONSUMER

log = get_logger(__name__)

RETRY_DELAY_SECONDS = 1.0
MAX_RETRY_DELAY_SECONDS = 30.0
WAIT_FOR_PREDECESSOR_TRIES = 5
# Under load, events are recorded a batch per transaction: a delivery may start this much later.
BATCH_LINGER_SECONDS = 0.1
PREDECESSOR_WAIT_SECONDS = 0.05


async def consume(ctx: ServiceContext, wake: asyncio.Event) -> None:
    """Record events as deliveries until cancelled; `wake` tells this replica's senders there is work."""
    failures = 0
    checked = Checked()

    async def record(js: Any, messages: list[Any]) -> None:
        nonlocal failures
        failures = 0 if await _handle(ctx, js, messages, wake, failures, checked) else failures + 1

    await durable.pull(ctx, WEBHOOKS_CONSUMER, record, linger=BATCH_LINGER_SECONDS)


@dataclass
class Checked:
    """The stream this process has checked its recorded position counts in (None before its first batch)."""

    created: datetime | None = None


async def _handle(ctx: ServiceContext, js: Any, messages: list[Any], wake: asyncio.Event, failures: int,
                  checked: Checked) -> bool:
    """Record one batch; acknowledge what was recorded, hand back the rest. False when recording failed."""
    if not messages:
        return True
    batch = [(m.metadata.sequence.stream, _usable(m.data)) for m in messages]
    for message, (stream_seq, envelope) in zip(messages, batch, strict=True):
        if envelope is None:
            log.error("event_unusable", subject=message.subject, stream_seq=stream_seq)

    async def first_after(position: int) -> int | None:
        try:
            return (await js.get_msg(ctx.settings.stream_name, seq=position + 1,
                                     subject=ctx.subjects.events_wildcard, next=True)).seq
        except NotFoundError:
            return None

    async def stream() -> domain.Stream:
        return await use_cases.stream_now(js, ctx.settings.stream_name)

    recorded = None
    for attempt in range(WAIT_FOR_PREDECESSOR_TRIES):
        try:
            recorded = await use_cases.record_events(ctx, batch, first_after, stream, checked.created)
        except Exception as error:  # noqa: BLE001 - the stream keeps the events; they come back
            delay = min(MAX_RETRY_DELAY_SECONDS, RETRY_DELAY_SECONDS * 2 ** min(failures, 5))
            log.warning("events_record_failed", error=repr(error), count=len(messages), retry_in=delay)
            for message in messages:
                await message.nak(delay=delay)
            return False
        checked.created = recorded.stream_created
        if recorded.position >= min(seq for seq, _ in batch) or attempt == WAIT_FOR_PREDECESSOR_TRIES - 1:
            break
        # Another replica is most likely recording the events before these right now.
        await asyncio.sleep(PREDECESSOR_WAIT_SECONDS)
    for message, (stream_seq, envelope) in zip(messages, batch, strict=True):
        if stream_seq > recorded.position:
            await message.nak(delay=RETRY_DELAY_SECONDS)  # its predecessor is still out: after it
        elif envelope is None:
            await message.term()  # never a usable event: redelivering it would not help
        else:
            await message.ack()
    if recorded.deliveries:
        log.debug("events_recorded", count=len(messages), deliveries=recorded.deliveries)
        wake.set()
    return True


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
