"""A service's pull loop on its own durable consumer of the event stream.

The consumer is provisioned by `migrate` (shared/streams.py); a service only binds to it, waiting — and
saying what to run — while it does not exist yet. Each process connects as its service's NATS role on a
connection of its own, fetches batches, and hands each batch to the service; what to acknowledge, hand
back or terminate is the service's to decide. A closed connection (shutdown) ends the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.errors import TimeoutError as NatsTimeout
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from shared import nats_client
from shared.logging import get_logger
from shared.nats_auth import nats_options
from shared.service import ServiceContext

log = get_logger(__name__)

BATCH = 64
FETCH_WAIT_SECONDS = 1.0
MISSING_RETRY_SECONDS = 5.0
FETCH_RETRY_SECONDS = 1.0

Batch = Callable[[JetStreamContext, list[Any]], Awaitable[None]]


async def bind(js: JetStreamContext, stream: str, consumer: str, service: str) -> Any:  # noqa: ANN401 - nats-py's
    """A pull subscription bound to the durable `consumer` of `stream`, waiting (and saying to run `migrate`) while
    it does not exist."""
    while True:
        try:
            subscription = await js.pull_subscribe_bind(consumer, stream=stream)
        except NotFoundError:
            log.error("consumer_missing", service=service, stream=stream, consumer=consumer,
                      hint="run `threadline migrate` to provision the streams and their consumers")
            await asyncio.sleep(MISSING_RETRY_SECONDS)
        else:
            log.info("consumer_started", service=service, stream=stream, consumer=consumer)
            return subscription


async def pull(ctx: ServiceContext, consumer: str, on_batch: Batch, *, linger: float = 0.0) -> None:
    """Fetch from `consumer` until the connection closes.

    `linger`: after a batch that was not full, wait this long before the next fetch, so that events arriving
    one by one under load are handled a batch at a time (one transaction, one pull request) — for consumers
    whose work may lag the stream by that much."""
    service = ctx.service.value
    options = nats_options(ctx.settings, service, name=f"threadline-{service}-consumer")
    connection = await nats_client.lasting(options.client())
    try:
        js = connection.jetstream()
        subscription = await bind(js, ctx.settings.stream_name, consumer, service)
        while (messages := await fetch(subscription, BATCH, "consumer_fetch_failed", service=service)) is not None:
            if not messages:
                continue
            await on_batch(js, messages)
            if linger and len(messages) < BATCH:
                await asyncio.sleep(linger)
    finally:
        await connection.close()


async def fetch(subscription: Any, count: int, failed: str, **context: Any) -> list[Any] | None:  # noqa: ANN401
    """One pull of up to `count` messages: none when none came within FETCH_WAIT_SECONDS, or when the pull failed
    (logged as `failed`, after which it pauses); None once the connection is closed (the process is stopping)."""
    try:
        return await subscription.fetch(count, timeout=FETCH_WAIT_SECONDS)
    except (TimeoutError, NatsTimeout):
        return []
    except nats.errors.ConnectionClosedError:
        return None
    except nats.errors.Error as error:
        log.warning(failed, error=repr(error), **context)
        await asyncio.sleep(FETCH_RETRY_SECONDS)
        return []
