"""The transactional outbox: events are written in the same transaction as the change they describe."""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.tables import outbox
from shared.errors import InvalidArgument
from shared.events import Event
from shared.messaging import TRACEPARENT

# NATS refuses a message above the server's max_payload (1 MiB unless configured otherwise). An event
# the relay could never publish would hold back every later event of its case or company, so a change
# whose event is too large is refused here, in its own transaction, before anything is written.
MAX_EVENT_BYTES = 512 * 1024


def check_size(event: Event) -> None:
    size = len(json.dumps(event.envelope, separators=(",", ":")).encode())
    if size > MAX_EVENT_BYTES:
        raise InvalidArgument(
            f"this change would publish a {event.event_type.value} event of {size} bytes; "
            f"the limit is {MAX_EVENT_BYTES}",
            hint="make the change in smaller steps (fewer items per decision or per call)",
        )


async def append(connection: AsyncConnection, events: Iterable[Event]) -> None:
    events = list(events)
    for event in events:
        check_size(event)
    rows = [
        {
            "event_id": event.event_id,
            "aggregate": event.aggregate,
            "subject": event.subject,
            "event_type": event.event_type.value,
            "envelope": event.envelope,
            "headers": headers(event),
        }
        for event in events
    ]
    if rows:
        await connection.execute(insert(outbox), rows)


def headers(event: Event) -> dict[str, str]:
    headers = {"Nats-Msg-Id": event.event_id, "ce-type": event.event_type.value}
    if event.envelope.get("correlationid"):
        headers["correlation_id"] = event.envelope["correlationid"]
    if event.envelope.get("traceparent"):
        headers[TRACEPARENT] = event.envelope["traceparent"]
    if "revision" in event.envelope:
        headers["ce-revision"] = str(event.envelope["revision"])
    return headers
