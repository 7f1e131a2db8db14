"""Reading the event stream and the outbox in tests."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import StreamInfo
from nats.js.client import JetStreamContext
from nats.js.errors import ServiceUnavailableError
from sqlalchemy import func, select

from shared.db.tables import outbox
from shared.settings import Settings
from tests.support import connect_nats

T = TypeVar("T")


async def through_election(call: Callable[[], Awaitable[T]], within: float = 60.0) -> T:
    """A JetStream API call, waiting out an election: on a cluster that just lost a server the stream (or the
    meta leader) can be without a leader for seconds, and the API then times out or has no responder."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except (NatsTimeout, ServiceUnavailableError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def stream_info(js: JetStreamContext, stream: str, within: float = 60.0) -> StreamInfo:
    return await through_election(lambda: js.stream_info(stream), within)


async def stream_events(settings: Settings) -> list[dict]:
    """Every event in the deployment's stream, in stream order, with its sequence and headers."""
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        total = (await stream_info(js, settings.stream_name)).state.messages
        subscription = await through_election(lambda: js.subscribe(
            f"{settings.nats_prefix}.events.>", ordered_consumer=True, stream=settings.stream_name))
        found = []
        while len(found) < total:
            message = await subscription.next_msg(timeout=10)
            found.append({"seq": message.metadata.sequence.stream, "natsSubject": message.subject,
                          "headers": message.headers, **json.loads(message.data)})
        return found
    finally:
        await connection.close()


async def unpublished(db) -> int:  # noqa: ANN001
    async with db.engine.connect() as connection:
        return (await connection.execute(
            select(func.count()).select_from(outbox).where(outbox.c.published_at.is_(None)))).scalar_one()


async def wait_until_published(db, timeout: float = 60) -> None:  # noqa: ANN001
    deadline = asyncio.get_running_loop().time() + timeout
    while await unpublished(db):
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{await unpublished(db)} events still unpublished")
        await asyncio.sleep(0.1)


async def wait_until_projected(settings: Settings, timeout: float = 60) -> None:
    """Until the projection's durable consumer has acknowledged every event in the stream."""
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                info = await js.consumer_info(settings.stream_name, "projection")
            except NatsTimeout:  # a cluster that lost a server answers once it has elected leaders
                info = None
            if info is not None and info.num_pending == 0 and info.num_ack_pending == 0:
                return
            if asyncio.get_running_loop().time() > deadline:
                behind = f"{info.num_pending} pending, {info.num_ack_pending} unacked" if info else "no answer"
                raise TimeoutError(f"projection behind: {behind}")
            await asyncio.sleep(0.1)
    finally:
        await connection.close()


async def wait_until_redelivered(settings: Settings, timeout: float = 30) -> None:
    """Until the projection's consumer has delivered some event more than once (a failed attempt was retried)."""
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        deadline = asyncio.get_running_loop().time() + timeout
        while (await js.consumer_info(settings.stream_name, "projection")).num_redelivered < 1:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("no event was redelivered to the projection")
            await asyncio.sleep(0.1)
    finally:
        await connection.close()
