"""Persistence for webhooks: registrations, the events they must receive, deliveries, and attempts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, Text, bindparam, func, insert, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from services.webhooks.domain import Webhook
from shared.db.queries import ids_between
from shared.db.tables import cases, companies
from shared.db.webhook_tables import (
    webhook_attempts,
    webhook_deliveries,
    webhook_events,
    webhook_ingest,
    webhooks,
)


def _seconds(seconds: float) -> Any:
    return func.make_interval(0, 0, 0, 0, 0, 0, float(seconds))


async def now(connection: AsyncConnection) -> datetime:
    return (await connection.execute(select(func.now()))).scalar_one()


async def case_exists(connection: AsyncConnection, case_id: str) -> bool:
    return (await connection.execute(select(cases.c.case_id).where(cases.c.case_id == case_id))).first() is not None


async def company_exists(connection: AsyncConnection, company_id: str) -> bool:
    found = await connection.execute(select(companies.c.company_id).where(companies.c.company_id == company_id))
    return found.first() is not None


async def insert_webhook(connection: AsyncConnection, **values: Any) -> None:
    await connection.execute(insert(webhooks).values(**values))


def _webhook(row: Any) -> Webhook:
    return Webhook(row.webhook_id, row.url, row.case_id, row.company_id, tuple(row.types), row.status,
                   row.start_after_seq)


async def live_webhooks(connection: AsyncConnection) -> list[Webhook]:
    rows = await connection.execute(select(webhooks).where(webhooks.c.status != "deleted"))
    return [_webhook(row) for row in rows]


def _with_counts() -> Any:
    d = webhook_deliveries
    counts = (
        select(
            d.c.webhook_id,
            func.count().filter(d.c.status == "pending").label("pending"),
            func.count().filter(d.c.status == "delivered").label("delivered"),
            func.count().filter(d.c.status == "failed").label("failed"),
            func.max(d.c.delivered_at).label("last_delivered_at"),
        )
        .group_by(d.c.webhook_id)
        .subquery()
    )
    return (
        select(webhooks, func.coalesce(counts.c.pending, 0).label("pending"),
               func.coalesce(counts.c.delivered, 0).label("delivered"),
               func.coalesce(counts.c.failed, 0).label("failed"), counts.c.last_delivered_at)
        .select_from(webhooks.outerjoin(counts, counts.c.webhook_id == webhooks.c.webhook_id))
    )


async def webhook_rows(connection: AsyncConnection) -> Sequence[Row]:
    rows = await connection.execute(
        _with_counts().where(webhooks.c.status != "deleted").order_by(webhooks.c.created_at))
    return rows.all()


async def webhook_ids_between(connection: AsyncConnection, low: str, high: str, limit: int) -> list[str]:
    """The ids from `low` to `high` in order (those a prefix can name), deleted webhooks' too: their logs stay."""
    return await ids_between(connection, webhooks.c.webhook_id, low, high, limit)


async def webhook_row(connection: AsyncConnection, webhook_id: str, *, lock: bool = False) -> Row | None:
    query = _with_counts().where(webhooks.c.webhook_id == webhook_id)
    if lock:
        query = select(webhooks).where(webhooks.c.webhook_id == webhook_id).with_for_update()
    return (await connection.execute(query)).first()


async def set_status(connection: AsyncConnection, webhook_id: str, status: str) -> None:
    values: dict[str, Any] = {"status": status}
    if status == "failing":
        values["failing_since"] = func.now()
    elif status == "active":
        values["failing_since"] = None
    else:
        values["deleted_at"] = func.now()
    await connection.execute(update(webhooks).where(webhooks.c.webhook_id == webhook_id).values(**values))


@dataclass(frozen=True)
class Ingest:
    stream_seq: int  # the last stream sequence recorded
    stream_created: datetime | None  # the creation time of the stream it counts in, None before it was known


async def lock_position(connection: AsyncConnection) -> Ingest:
    """The position recorded, locked: one replica records at a time, in stream order. Registering a webhook
    takes it too, so a registration sees every event recorded before it, and every event recorded after it
    sees the registration (none falls between)."""
    i = webhook_ingest
    row = (await connection.execute(select(i.c.stream_seq, i.c.stream_created).where(i.c.id == 1)
                                    .with_for_update())).one()
    return Ingest(row.stream_seq, _created(row.stream_created))


def _created(stored: str | None) -> datetime | None:
    return datetime.fromisoformat(stored) if stored else None


def _stored(created: datetime | None) -> str | None:
    return created.isoformat() if created is not None else None


async def set_stream(connection: AsyncConnection, created: datetime | None) -> None:
    await connection.execute(update(webhook_ingest).where(webhook_ingest.c.id == 1)
                             .values(stream_created=_stored(created)))


async def start_new_stream(connection: AsyncConnection, created: datetime | None, *, resume_at: int = 0) -> int:
    """Go on in a stream after its sequence `resume_at`: 0 for a new stream, the last it holds for one rewound (the
    same stream restored from an older backup). Every sequence recorded (events, deliveries, webhooks' starting
    points) moves down to zero or below, order kept, so the stream's events after `resume_at` come after them all
    and a webhook registered before receives every one of them; the position becomes `resume_at`. Returns the
    shift. What was recorded then shows no sequence of the stream, not even an event a rewound one still holds:
    moved only to `resume_at` or below, they would show sequences the stream gives other events."""
    i, e, d, w = webhook_ingest, webhook_events, webhook_deliveries, webhooks
    shift = (await connection.execute(select(func.greatest(
        select(i.c.stream_seq).where(i.c.id == 1).scalar_subquery(),
        select(func.max(e.c.stream_seq)).scalar_subquery(),
        select(func.max(w.c.start_after_seq)).scalar_subquery())))).scalar_one()
    for table, column in ((e, e.c.stream_seq), (d, d.c.stream_seq), (w, w.c.start_after_seq)):
        await connection.execute(update(table).values({column.name: column - shift}))
    await connection.execute(update(i).where(i.c.id == 1).values(stream_seq=resume_at, stream_created=_stored(created)))
    return shift


async def set_position(connection: AsyncConnection, stream_seq: int) -> None:
    await connection.execute(update(webhook_ingest).where(webhook_ingest.c.id == 1).values(stream_seq=stream_seq))


# An event and its deliveries, in one round trip. An event recorded before (republished after a restore, at
# another sequence) inserts nothing, so it gets no deliveries: those were made when it was first recorded, and
# a webhook registered since must not be sent an event from before it existed.
RECORD = text("""
WITH recorded AS (
    INSERT INTO webhook_events (event_id, stream_seq, aggregate, event_type, revision, envelope)
    VALUES (:event_id, :stream_seq, :aggregate, :event_type, :revision, :envelope)
    ON CONFLICT (event_id) DO NOTHING
    RETURNING event_id, stream_seq, aggregate
)
INSERT INTO webhook_deliveries (webhook_id, event_id, stream_seq, aggregate)
SELECT receiver, recorded.event_id, recorded.stream_seq, recorded.aggregate
FROM recorded CROSS JOIN unnest(CAST(:webhook_ids AS uuid[])) AS receiver
ON CONFLICT (webhook_id, event_id) DO NOTHING
""").bindparams(bindparam("envelope", type_=JSONB), bindparam("webhook_ids", type_=ARRAY(Text)))


async def record_event(connection: AsyncConnection, webhook_ids: list[str], *, event_id: str, stream_seq: int,
                       aggregate: str, event_type: str, revision: int | None, envelope: dict[str, Any]) -> int:
    """Record an event for the webhooks that receive it, unless it was recorded before; the deliveries made."""
    result = await connection.execute(RECORD, {
        "event_id": event_id, "stream_seq": stream_seq, "aggregate": aggregate, "event_type": event_type,
        "revision": revision, "envelope": envelope, "webhook_ids": webhook_ids})
    return result.rowcount


# The deliveries that may go out now: due, not leased, of an active webhook, and the first of their chain
# (no earlier event of the same case or company is still undelivered to that webhook). At most
# `per_webhook` are leased per webhook at once across replicas, so one slow receiver cannot take every
# sender; SKIP LOCKED lets replicas claim side by side without ever claiming the same delivery.
CLAIM = text("""
WITH leased AS (
    SELECT webhook_id, count(*) AS n FROM webhook_deliveries
    WHERE status = 'pending' AND lease_until > now() GROUP BY webhook_id
), due AS (
    SELECT d.webhook_id, d.event_id,
           row_number() OVER (PARTITION BY d.webhook_id ORDER BY d.next_attempt_at, d.stream_seq) AS rank
    FROM webhook_deliveries d JOIN webhooks w ON w.webhook_id = d.webhook_id AND w.status = 'active'
    WHERE d.status = 'pending' AND d.next_attempt_at <= now()
      AND (d.lease_until IS NULL OR d.lease_until <= now())
      AND NOT EXISTS (
          SELECT 1 FROM webhook_deliveries e
          WHERE e.webhook_id = d.webhook_id AND e.aggregate = d.aggregate AND e.stream_seq < d.stream_seq
            AND e.status <> 'delivered')
)
SELECT d.webhook_id, d.event_id FROM webhook_deliveries d
JOIN due ON due.webhook_id = d.webhook_id AND due.event_id = d.event_id
LEFT JOIN leased ON leased.webhook_id = d.webhook_id
WHERE due.rank + coalesce(leased.n, 0) <= :per_webhook
  AND d.status = 'pending' AND (d.lease_until IS NULL OR d.lease_until <= now())
ORDER BY d.next_attempt_at, d.stream_seq
LIMIT :limit
FOR UPDATE OF d SKIP LOCKED
""")


async def claim(connection: AsyncConnection, *, limit: int, per_webhook: int, lease_seconds: float,
                token: str) -> list[Row]:
    """Lease up to `limit` deliveries that may go out now; return what sending each needs."""
    picked = (await connection.execute(CLAIM, {"limit": limit, "per_webhook": per_webhook})).all()
    if not picked:
        return []
    d, w, e = webhook_deliveries, webhooks, webhook_events
    keys = [(row.webhook_id, row.event_id) for row in picked]
    await connection.execute(
        update(d)
        .where(tuple_(d.c.webhook_id, d.c.event_id).in_(keys))
        .values(lease_token=token, lease_until=func.now() + _seconds(lease_seconds))
    )
    rows = await connection.execute(
        select(d.c.webhook_id, d.c.event_id, d.c.attempts, w.c.url, w.c.secret, e.c.envelope, e.c.event_type)
        .select_from(d.join(w, w.c.webhook_id == d.c.webhook_id).join(e, e.c.event_id == d.c.event_id))
        .where(tuple_(d.c.webhook_id, d.c.event_id).in_(keys))
        .order_by(d.c.stream_seq)
    )
    return rows.all()


async def leased_delivery(connection: AsyncConnection, webhook_id: str, event_id: str, token: str) -> Row | None:
    """The delivery, locked, if this sender still holds its lease."""
    d = webhook_deliveries
    rows = await connection.execute(
        select(d, webhook_events.c.event_type)
        .join(webhook_events, webhook_events.c.event_id == d.c.event_id)
        .where(d.c.webhook_id == webhook_id, d.c.event_id == event_id, d.c.lease_token == token)
        .with_for_update(of=d)
    )
    return rows.first()


async def finish_attempt(connection: AsyncConnection, webhook_id: str, event_id: str, *, attempt: int,
                         first_attempt_at: datetime, status: str, retry_in: float | None,
                         response_code: int | None, latency_ms: int, error: str | None,
                         excerpt: str | None) -> None:
    d = webhook_deliveries
    now_ = func.now()
    await connection.execute(
        update(d).where(d.c.webhook_id == webhook_id, d.c.event_id == event_id).values(
            status=status, attempts=attempt, first_attempt_at=first_attempt_at, last_attempt_at=now_,
            delivered_at=now_ if status == "delivered" else None,
            next_attempt_at=now_ + _seconds(retry_in or 0),
            lease_token=None, lease_until=None, response_code=response_code, latency_ms=latency_ms,
            last_error=error,
        )
    )
    await connection.execute(insert(webhook_attempts).values(
        webhook_id=webhook_id, event_id=event_id, attempt=attempt, response_code=response_code,
        latency_ms=latency_ms, error=error, response_excerpt=excerpt))


async def deliveries(connection: AsyncConnection, webhook_id: str, status: str, limit: int) -> Sequence[Row]:
    d, e = webhook_deliveries, webhook_events
    query = (
        select(d, e.c.event_type, e.c.revision)
        .join(e, e.c.event_id == d.c.event_id)
        .where(d.c.webhook_id == webhook_id)
        .order_by(d.c.stream_seq.desc())
        .limit(limit)
    )
    if status != "all":
        query = query.where(d.c.status == status)
    return (await connection.execute(query)).all()


async def attempts(connection: AsyncConnection, webhook_id: str, event_ids: list[str]) -> Sequence[Row]:
    if not event_ids:
        return []
    a = webhook_attempts
    rows = await connection.execute(
        select(a).where(a.c.webhook_id == webhook_id, a.c.event_id.in_(event_ids)).order_by(a.c.event_id, a.c.attempt))
    return rows.all()


async def event_ids_between(connection: AsyncConnection, webhook_id: str, low: str, high: str,
                            limit: int) -> list[str]:
    """The ids of the events delivered (or due) to the webhook from `low` to `high` in order (those a prefix can
    name)."""
    d = webhook_deliveries
    return await ids_between(connection, d.c.event_id, low, high, limit, d.c.webhook_id == webhook_id)


async def delivery(connection: AsyncConnection, webhook_id: str, event_id: str) -> Row | None:
    d, e = webhook_deliveries, webhook_events
    rows = await connection.execute(
        select(d, e.c.event_type, e.c.revision).join(e, e.c.event_id == d.c.event_id)
        .where(d.c.webhook_id == webhook_id, d.c.event_id == event_id))
    return rows.first()


async def reset_delivery(connection: AsyncConnection, webhook_id: str, event_id: str) -> None:
    """Send it again now, with a fresh retry period (earlier attempts stay in the log)."""
    d = webhook_deliveries
    await connection.execute(
        update(d).where(d.c.webhook_id == webhook_id, d.c.event_id == event_id).values(
            status="pending", next_attempt_at=func.now(), first_attempt_at=None, lease_token=None,
            lease_until=None, delivered_at=None))


async def release(connection: AsyncConnection, webhook_id: str, event_id: str, token: str) -> None:
    d = webhook_deliveries
    await connection.execute(
        update(d).where(d.c.webhook_id == webhook_id, d.c.event_id == event_id, d.c.lease_token == token)
        .values(lease_token=None, lease_until=None))
