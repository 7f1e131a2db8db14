"""How a long-running process holds its NATS connection: one that reconnects for as long as the process runs."""

from __future__ import annotations

from typing import Any

import nats
from nats.aio.client import Client

RECONNECT_WAIT_SECONDS = 1


async def lasting(client_options: dict[str, Any]) -> Client:
    """A connection (`client_options`: NatsOptions.client()) that keeps reconnecting, once a second, however long
    the server is away: a leader's or a consumer's work resumes when it is back rather than the process ending."""
    return await nats.connect(**client_options, max_reconnect_attempts=-1, reconnect_time_wait=RECONNECT_WAIT_SECONDS)
