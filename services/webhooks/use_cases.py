"""The webhooks service's use cases: one function per command, and the steps of its two jobs — record an
event's deliveries, claim the deliveries that may go out, record what an attempt met."""

from __future__ import annotations

import base64
import random
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from services.webhooks import domain
from services.webhooks import repository as repo
from services.webhooks.sender import Attempt, check_registration
from shared import id_prefix, outbox
from shared.errors import InvalidArgument, NotFound
from shared.events import EventType, Origin, WebhookFailing, new_event, webhook
from shared.logging import get_logger
from shared.service import ServiceContext
from shared.webhook_contracts import ListDeliveries, ListWebhooks, Redeliver, RegisterWebhook, WebhookRef

log = get_logger(__name__)

KNOWN_TYPES = {t.value for t in EventType}


# --- commands: each takes its request and the service's context ------------------------------------


async def register(cmd: RegisterWebhook, ctx: ServiceContext) -> dict[str, Any]:
    for i, event_type in enumerate(cmd.types):
        if event_type not in KNOWN_TYPES:
            raise InvalidArgument(f"types[{i}]: there is no event type {event_type!r}", field=f"types[{i}]",
                                  hint=f"use some of: {', '.join(sorted(KNOWN_TYPES))}")
    domain.check_url(cmd.url)
    async with ctx.db.read() as connection:
        if cmd.case_id is not None and not await repo.case_exists(connection, cmd.case_id):
            raise NotFound(f"there is no case {cmd.case_id!r}", field="caseId", hint="create the case first")
        if cmd.company_id is not None and not await repo.company_exists(connection, cmd.company_id):
            raise NotFound(f"there is no company {cmd.company_id!r}", field="companyId",
                           hint="save the company first (POST /api/v1/companies)")
    # Outside any transaction: a slow name server holds up no one else.
    await check_registration(cmd.url, allow_private=bool(ctx.settings.webhook_allow_private),
                             timeout=ctx.settings.webhook_timeout_seconds)
    webhook_id = str(uuid.uuid4())
    secret = domain.SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
    async with ctx.db.transaction() as connection:
        ingest = await repo.lock_position(connection)
        # Read under the lock: every event up to here was published before the webhook existed.
        stream = await stream_now(ctx.client.broker.connection.jetstream(), ctx.settings.stream_name)
        await _follow_stream(connection, ingest, stream)  # a new stream's start_after counts in the new one
        start_after = stream.last_seq
        await repo.insert_webhook(connection, webhook_id=webhook_id, url=cmd.url, case_id=cmd.case_id,
                                  company_id=cmd.company_id, types=list(cmd.types), secret=secret,
                                  start_after_seq=start_after, created_by=cmd.actor.name)
        row = await repo.webhook_row(connection, webhook_id)
    log.info("webhook_registered", webhook_id=webhook_id, host=urlsplit(cmd.url).hostname, by=cmd.actor.name)
    return {**_webhook_view(row), "secret": secret}


async def stream_now(js: Any, stream_name: str) -> domain.Stream:
    info = await js.stream_info(stream_name)
    return domain.Stream(info.created, info.state.last_seq)


async def list_webhooks(cmd: ListWebhooks, ctx: ServiceContext) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        rows = await repo.webhook_rows(connection)
    return {"webhooks": [_webhook_view(row) for row in rows]}


async def get_webhook(cmd: WebhookRef, ctx: ServiceContext) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        return _webhook_view(await _existing(connection, cmd.webhook_id))


async def delete_webhook(cmd: WebhookRef, ctx: ServiceContext) -> dict[str, Any]:
    """Stop delivering to it; its delivery log stays readable."""
    async with ctx.db.transaction() as connection:
        webhook_id = (await _existing(connection, cmd.webhook_id)).webhook_id
        await repo.set_status(connection, webhook_id, "deleted")
        row = await repo.webhook_row(connection, webhook_id)
    log.info("webhook_deleted", webhook_id=webhook_id, by=cmd.actor.name)
    return _webhook_view(row)


async def list_deliveries(cmd: ListDeliveries, ctx: ServiceContext) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        webhook_id = (await _existing(connection, cmd.webhook_id)).webhook_id
        rows = await repo.deliveries(connection, webhook_id, cmd.status, cmd.limit)
        logged = await repo.attempts(connection, webhook_id, [row.event_id for row in rows])
    by_event: dict[str, list[dict[str, Any]]] = {}
    for attempt in logged:
        by_event.setdefault(attempt.event_id, []).append({
            "attempt": attempt.attempt, "at": attempt.at.isoformat(), "responseCode": attempt.response_code,
            "latencyMs": attempt.latency_ms, "error": attempt.error, "responseExcerpt": attempt.response_excerpt,
        })
    return {"webhookId": webhook_id,
            "deliveries": [{**_delivery_view(row), "attemptLog": by_event.get(row.event_id, [])} for row in rows]}


DELIVERIES_HINT = "list its deliveries: GET /api/v1/webhooks/{webhookId}/deliveries"


async def redeliver(cmd: Redeliver, ctx: ServiceContext) -> dict[str, Any]:
    """Send an event again now (a failed one, or one delivered before), named whole or by a unique prefix of its
    id among the webhook's deliveries; a failing webhook resumes."""
    async with ctx.db.transaction() as connection:
        webhook = await _existing(connection, cmd.webhook_id)
        webhook_id = webhook.webhook_id
        if webhook.status == "deleted":
            raise InvalidArgument("the webhook was deleted", field="webhookId", hint="register the receiver again")
        event_id = await id_prefix.resolve(cmd.event_id, partial(repo.event_ids_between, connection, webhook_id),
                                           what="event", field="eventId", hint=DELIVERIES_HINT)
        if await repo.delivery(connection, webhook_id, event_id) is None:
            raise NotFound(f"webhook {webhook_id} has no delivery of event {cmd.event_id}", field="eventId",
                           hint=DELIVERIES_HINT)
        await repo.reset_delivery(connection, webhook_id, event_id)
        if webhook.status == "failing":
            await repo.set_status(connection, webhook_id, "active")
        row = await repo.delivery(connection, webhook_id, event_id)
    log.info("webhook_redelivery_requested", webhook_id=webhook_id, event_id=event_id, by=cmd.actor.name)
    return _delivery_view(row)


WEBHOOKS_HINT = "list webhooks first (GET /api/v1/webhooks)"


async def _existing(connection: Any, raw: str) -> Any:
    """The webhook `raw` names: its whole id, or a unique start of it as the pages show it."""
    row = await repo.webhook_row(connection, await _webhook_id(connection, raw))
    if row is None:
        raise NotFound(f"there is no webhook {raw!r}", field="webhookId", hint=WEBHOOKS_HINT)
    return row


async def _webhook_id(connection: Any, raw: str) -> str:
    return await id_prefix.resolve(raw, partial(repo.webhook_ids_between, connection), what="webhook",
                                   field="webhookId", hint=WEBHOOKS_HINT)


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _webhook_view(row: Any) -> dict[str, Any]:
    return {
        "webhookId": row.webhook_id, "url": row.url, "caseId": row.case_id, "companyId": row.company_id,
        "types": list(row.types), "status": row.status, "createdBy": row.created_by,
        "createdAt": _when(row.created_at), "failingSince": _when(row.failing_since),
        "deliveries": {"pending": row.pending, "delivered": row.delivered, "failed": row.failed},
        "lastDeliveredAt": _when(row.last_delivered_at),
    }


def _delivery_view(row: Any) -> dict[str, Any]:
    return {
        "eventId": row.event_id, "eventType": row.event_type, "revision": row.revision,
        # An event of the stream before a restore (counted at 0 or below since): no sequence of the stream now.
        "streamSequence": row.stream_seq if row.stream_seq > 0 else None, "status": row.status, "attempts": row.attempts,
        "responseCode": row.response_code, "latencyMs": row.latency_ms, "lastError": row.last_error,
        "firstAttemptAt": _when(row.first_attempt_at), "lastAttemptAt": _when(row.last_attempt_at),
        "nextAttemptAt": _when(row.next_attempt_at) if row.status == "pending" else None,
        "deliveredAt": _when(row.delivered_at),
    }


# --- the jobs' steps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    position: int  # every event up to this stream sequence is recorded (or was not one: see `unusable`)
    deliveries: int
    stream_created: datetime | None  # the stream the position counts in, as checked against the stream


async def record_events(ctx: ServiceContext, batch: list[tuple[int, dict[str, Any] | None]],
                        first_after: Callable[[int], Awaitable[int | None]],
                        stream: Callable[[], Awaitable[domain.Stream]], checked: datetime | None) -> Recorded:
    """Turn a batch of events (stream sequence, envelope or None when it is no usable event) into
    deliveries for the webhooks each is for, in stream order, in one transaction; idempotent. Stops
    before an event whose predecessor has not been recorded yet (`first_after` asks the stream).

    An event recorded before, come back at another sequence (republished after a restore), gets no new
    deliveries: its deliveries were made when it was first recorded, so a webhook registered since is not sent
    it. Only events some webhook receives are recorded, though: one no webhook wanted when first published,
    republished after a restore, can still reach a webhook registered after it.

    `stream` is asked whether the position counts in it (or it is a new stream) before this process records
    its first batch — a restore always means a new process —, whenever the stream recorded is not the one
    this process checked (`checked`, the `stream_created` the last call returned; None before the first),
    and when a batch does not go on from the position (a redelivery, a gap)."""
    made = 0
    async with ctx.db.transaction() as connection:
        ingest = await repo.lock_position(connection)
        position, created = ingest.stream_seq, ingest.stream_created
        if checked is None or created != checked or min(seq for seq, _ in batch) != position + 1:
            now = await stream()
            position, created = await _follow_stream(connection, ingest, now), now.created or created
        live = await repo.live_webhooks(connection)
        for stream_seq, envelope in sorted(batch, key=lambda item: item[0]):
            if stream_seq <= position:
                continue  # recorded before: a redelivery
            gap = stream_seq != position + 1
            if not domain.comes_next(position, stream_seq, await first_after(position) if gap else None):
                break
            position = stream_seq
            aggregate = domain.aggregate_of(envelope) if envelope is not None else None
            if aggregate is None:
                continue
            receivers = [w.webhook_id for w in live if w.receives(aggregate, envelope["type"], stream_seq)]
            if receivers:
                made += await repo.record_event(connection, receivers, event_id=envelope["id"],
                                                stream_seq=stream_seq, aggregate=aggregate,
                                                event_type=envelope["type"], revision=envelope.get("revision"),
                                                envelope=envelope)
        await repo.set_position(connection, position)
    return Recorded(position, made, created)


async def _follow_stream(connection: Any, ingest: repo.Ingest, stream: domain.Stream) -> int:
    """The position to go on from in `stream`, under the position lock: 0 when it is a new stream, its last
    sequence when it is the recorded stream rewound (restored from an older backup)."""
    new = domain.is_new_stream(ingest.stream_seq, ingest.stream_created, stream)
    if new or domain.is_rewound(ingest.stream_seq, ingest.stream_created, stream):
        resume_at = 0 if new else stream.last_seq
        shift = await repo.start_new_stream(connection, stream.created, resume_at=resume_at)
        log.warning("event_stream_new" if new else "event_stream_rewound", recorded_position=ingest.stream_seq,
                    recorded_stream=_when(ingest.stream_created), stream_created=_when(stream.created),
                    stream_last_seq=stream.last_seq, earlier_sequences_less=shift)
        return resume_at
    if stream.created is not None and ingest.stream_created != stream.created:
        if ingest.stream_created is not None:
            # The stream holds the position under another identity: see domain.is_new_stream.
            log.error("event_stream_identity_stale", recorded_position=ingest.stream_seq,
                      recorded_stream=_when(ingest.stream_created), stream_created=_when(stream.created),
                      stream_last_seq=stream.last_seq)
        await repo.set_stream(connection, stream.created)
    return ingest.stream_seq


@dataclass(frozen=True)
class Claimed:
    webhook_id: str
    event_id: str
    event_type: str
    url: str
    secret: str
    envelope: dict[str, Any]
    lease_token: str


async def claim(ctx: ServiceContext, limit: int) -> list[Claimed]:
    token = str(uuid.uuid4())
    async with ctx.db.transaction() as connection:
        rows = await repo.claim(connection, limit=limit, per_webhook=ctx.settings.webhook_in_flight_per_webhook,
                                lease_seconds=ctx.settings.webhook_lease, token=token)
    return [Claimed(r.webhook_id, r.event_id, r.event_type, r.url, r.secret, r.envelope, token) for r in rows]


def retry_policy(ctx: ServiceContext) -> domain.RetryPolicy:
    s = ctx.settings
    return domain.RetryPolicy(s.webhook_retry_base_seconds, s.webhook_retry_max_delay_seconds,
                              s.webhook_retry_for_seconds)


async def finish(ctx: ServiceContext, claimed: Claimed, attempt: Attempt, rng: random.Random) -> domain.Outcome | None:
    """Record an attempt and what follows from it; None when this sender's lease had lapsed meanwhile."""
    async with ctx.db.transaction() as connection:
        row = await repo.leased_delivery(connection, claimed.webhook_id, claimed.event_id, claimed.lease_token)
        if row is None:
            log.warning("webhook_lease_lapsed", webhook_id=claimed.webhook_id, event_id=claimed.event_id)
            return None
        now = await repo.now(connection)
        first = row.first_attempt_at or now
        number = row.attempts + 1
        result = domain.outcome(attempt.succeeded, number, first, now, retry_policy(ctx), rng)
        await repo.finish_attempt(
            connection, claimed.webhook_id, claimed.event_id, attempt=number, first_attempt_at=first,
            status=result.status, retry_in=result.retry_in_seconds, response_code=attempt.response_code,
            latency_ms=attempt.latency_ms, error=attempt.error, excerpt=attempt.excerpt)
        if result.gave_up:
            await _mark_failing(ctx, connection, claimed, number, first, attempt.error)
    return result


async def _mark_failing(ctx: ServiceContext, connection: Any, claimed: Claimed, attempts: int, first: Any,
                        error: str | None) -> None:
    row = await repo.webhook_row(connection, claimed.webhook_id, lock=True)
    if row.status != "active":
        return
    await repo.set_status(connection, claimed.webhook_id, "failing")
    data = WebhookFailing(webhook_id=claimed.webhook_id, host=urlsplit(claimed.url).hostname or "",
                          event_id=claimed.event_id, event_type=claimed.event_type, attempts=attempts,
                          first_attempt_at=first.isoformat(), last_error=error)
    await outbox.append(connection, [new_event(Origin(ctx.subjects, ctx.service.value), webhook(claimed.webhook_id),
                                               data)])
    log.warning("webhook_failing", webhook_id=claimed.webhook_id, event_id=claimed.event_id, attempts=attempts,
                error=error)
