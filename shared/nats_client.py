"""How a process holds its NATS connection: one that reconnects for as long as the process runs, and one let go of
on the way out within a bound, whatever the server does. (Who may connect as what: shared/nats_auth.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import nats
from nats.aio.client import Client

from shared.logging import get_logger

log = get_logger(__name__)

RECONNECT_WAIT_SECONDS = 1
# How long a connection on its way out may drain (nats-py's default is 30 s, and its final flush adds 10).
DRAIN_SECONDS = 5


async def lasting(client_options: dict[str, Any]) -> Client:
    """A connection (`client_options`: NatsOptions.client()) that keeps reconnecting, once a second, however long
    the server is away: a leader's or a consumer's work resumes when it is back rather than the process ending."""
    return await nats.connect(**client_options, max_reconnect_attempts=-1, reconnect_time_wait=RECONNECT_WAIT_SECONDS)


async def let_go(connection: Any, seconds: float = DRAIN_SECONDS + 1) -> None:
    """Close a nats-py connection on a process's way out, within `seconds` whatever the server does.

    Drained when the server is there (what was published reaches it); closed at once when it is not. A server
    that is gone, as when the `up` that ran it was killed, has nothing to drain into: nats-py refuses to drain a
    reconnecting connection, and a drain begun as the server went waits out its flush besides its drain timeout."""
    if connection.is_closed:
        return
    if connection.is_connected and not connection.is_draining:  # one that is draining already stalled: closed
        if await finished_within(connection.drain(), seconds):
            return
        log.info("nats_closed_undrained", connection=connection.options.get("name"))
    await connection.close()


async def finished_within(work: Awaitable[Any], seconds: float) -> bool:
    """Whether `work` ended within `seconds` without raising; cancelled when it did not end (what it raised is
    not raised again: the caller falls back to the quicker way)."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if task in done:
        return not task.cancelled() and task.exception() is None
    task.cancel()
    return False
