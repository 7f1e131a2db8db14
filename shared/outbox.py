"""The transactional outbox: events are written in the same transaction as the change they describe."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.tables import outbox
from shared.events import Event
from shared.messaging import TRACEPARENT


async def append(connection: AsyncConnection, events: Iterable[Event]) -> None:
    rows = [
        {
            "event_id": event.event_id,
            "aggregate": event.aggregate,
            "subject": event.subject,
            "event_type": event.event_type.value,
            "envelope": event.envelope,
            "headers": _headers(event),
        }
        for event in events
    ]
    if rows:
        await connection.execute(insert(outbox), rows)


def _headers(event: Event) -> dict[str, str]:
    headers = {"Nats-Msg-Id": event.event_id, "ce-type": event.event_type.value}
    if event.envelope.get("correlationid"):
        headers["correlation_id"] = event.envelope["correlationid"]
    if event.envelope.get("traceparent"):
        headers[TRACEPARENT] = event.envelope["traceparent"]
    if "revision" in event.envelope:
        headers["ce-revision"] = str(event.envelope["revision"])
    return headers
