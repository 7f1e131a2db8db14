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
from shared.streams import projection_consumer, projection_stream_name
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


async def projection_consumers(js, settings: Settings) -> list:  # noqa: ANN001
    """The consumer info of each of the projection's partitions."""
    return [await js.consumer_info(projection_stream_name(settings), projection_consumer(p))
            for p in range(settings.projection_partitions)]


async def projection_backlog(js, settings: Settings) -> tuple[int, int, int]:  # noqa: ANN001
    """(events the projection's stream has yet to source, events its partitions' consumers have yet to deliver,
    delivered but unacknowledged)."""
    info = await js.stream_info(projection_stream_name(settings))
    unsourced = sum(source.lag or 0 for source in info.sources or [])
    consumers = await projection_consumers(js, settings)
    return unsourced, sum(c.num_pending for c in consumers), sum(c.num_ack_pending for c in consumers)


async def wait_until_projected(settings: Settings, timeout: float = 60) -> None:
    """Until the projection has sourced every event of the stream it applies and acknowledged each."""
    connection = await connect_nats(settings)
    try:
        js = connection.jetstream()
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                backlog = await projection_backlog(js, settings)
            except NatsTimeout:  # a cluster that lost a server answers once it has elected leaders
                backlog = None
            if backlog == (0, 0, 0):
                return
            if asyncio.get_running_loop().time() > deadline:
                behind = ("{} unsourced, {} pending, {} unacked".format(*backlog) if backlog else "no answer")
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
        while sum(c.num_redelivered for c in await projection_consumers(js, settings)) < 1:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("no event was redelivered to the projection")
            await asyncio.sleep(0.1)
    finally:
        await connection.close()
