"""The webhooks service's senders: claim the deliveries that may go out, send each, record the attempt.

A replica sends at most THREADLINE_WEBHOOK_CONCURRENCY deliveries at once, each bounded by
THREADLINE_WEBHOOK_TIMEOUT_SECONDS, and at most THREADLINE_WEBHOOK_IN_FLIGHT_PER_WEBHOOK to one webhook
across replicas, so a slow or dead receiver only ever slows itself. A delivery is leased while it is
sent; a replica that dies mid-request leaves the lease to lapse and another sends it again (at least
once). A replica that stops in good order hands back the leases of what it had not finished.
"""

from __future__ import annotations

import asyncio
import random

from prometheus_client import Counter, Histogram

from services.webhooks import repository, use_cases
from services.webhooks.sender import Sender
from shared.logging import bound, get_logger
from shared.observability import LATENCY_BUCKETS
from shared.service import ServiceContext

log = get_logger(__name__)

CLAIM_RETRY_SECONDS = 2.0
STOP_SECONDS = 2.0

# Shown by a webhooks process only (shared.observability.show, in app.main).
ATTEMPTS = Counter("threadline_webhook_attempts", "Webhook delivery attempts recorded by this replica, by result: "
                   "delivered, retrying (a retry is due), failed (retried for THREADLINE_WEBHOOK_RETRY_FOR_SECONDS: "
                   "given up, the webhook marked failing)", ["result"], registry=None)
ATTEMPT_SECONDS = Histogram("threadline_webhook_attempt_seconds", "How long a receiver took to answer an attempt "
                            "(or to fail it)", buckets=(*LATENCY_BUCKETS, 30), registry=None)
METRICS = (ATTEMPTS, ATTEMPT_SECONDS)
RESULTS = {"delivered": "delivered", "pending": "retrying", "failed": "failed"}


async def deliver(ctx: ServiceContext, wake: asyncio.Event) -> None:
    """Send due deliveries until cancelled; `wake` says there may be new work before the next poll."""
    sender = Sender(ctx.settings)
    rng = random.Random()
    running: dict[asyncio.Task, use_cases.Claimed] = {}
    capacity = ctx.settings.webhook_concurrency

    def done(task: asyncio.Task) -> None:
        running.pop(task, None)
        wake.set()  # a slot is free, and the next event of that chain may now go

    log.info("webhook_senders_started", concurrency=capacity)
    try:
        while True:
            wake.clear()
            free = capacity - len(running)
            claimed: list[use_cases.Claimed] = []
            if free > 0:
                try:
                    claimed = await use_cases.claim(ctx, free)
                except Exception as error:  # noqa: BLE001 - PostgreSQL away: try again shortly
                    log.warning("webhook_claim_failed", error=repr(error))
                    await asyncio.sleep(CLAIM_RETRY_SECONDS)
                    continue
            for item in claimed:
                task = asyncio.create_task(_send_one(ctx, sender, item, rng), name=f"webhook-{item.event_id}")
                running[task] = item
                task.add_done_callback(done)
            if claimed and len(claimed) == free:
                continue  # there may be more due; claim again as soon as a slot is free
            try:
                await asyncio.wait_for(wake.wait(), timeout=ctx.settings.webhook_poll_interval)
            except TimeoutError:
                pass
    finally:
        # Bounded, like every stop: what is not recorded by then is sent again (at least once).
        unfinished = list(running.values())
        for task in list(running):
            task.cancel()
        if running:
            await asyncio.wait(list(running), timeout=STOP_SECONDS)
        await _hand_back(ctx, unfinished)
        await sender.close()


async def _send_one(ctx: ServiceContext, sender: Sender, item: use_cases.Claimed, rng: random.Random) -> None:
    with bound(webhook_id=item.webhook_id, event_id=item.event_id):
        attempt = await sender.send(item.url, item.secret, item.envelope)
        try:
            result = await use_cases.finish(ctx, item, attempt, rng)
        except Exception as error:  # noqa: BLE001 - unrecorded: the lease lapses and it is sent again
            log.warning("webhook_attempt_unrecorded", error=repr(error))
            return
        if result is None:
            return
        ATTEMPTS.labels(result=RESULTS.get(result.status, result.status)).inc()
        ATTEMPT_SECONDS.observe(attempt.latency_ms / 1000)
        if result.status == "delivered":
            log.info("webhook_delivered", status_code=attempt.response_code, ms=attempt.latency_ms)
        else:
            log.info("webhook_attempt_failed", error=attempt.error, ms=attempt.latency_ms, next=result.status,
                     retry_in=round(result.retry_in_seconds or 0, 1))


async def _hand_back(ctx: ServiceContext, unfinished: list[use_cases.Claimed]) -> None:
    """Release what this replica was still sending, so another sends it now rather than after the lease."""
    if not unfinished:
        return
    try:
        async with asyncio.timeout(STOP_SECONDS):
            async with ctx.db.transaction() as connection:
                for item in unfinished:
                    await repository.release(connection, item.webhook_id, item.event_id, item.lease_token)
    except Exception as error:  # noqa: BLE001 - the leases lapse by themselves
        log.warning("webhook_leases_not_handed_back", count=len(unfinished), error=repr(error))
