"""Helpers for webhook and feed tests: register, wait for deliveries, read the SSE feed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.events import stream_events


async def register(stack: Any, status: int = 201, **body: Any) -> dict[str, Any]:
    async with stack.api("admin") as api:
        response = await api.post("/api/v1/webhooks", json=body)
    assert response.status_code == status, response.text
    return response.json()


async def deliveries(stack: Any, webhook_id: str) -> list[dict[str, Any]]:
    async with stack.api("admin") as api:
        response = await api.get(f"/api/v1/webhooks/{webhook_id}/deliveries", params={"limit": 500})
    assert response.status_code == 200, response.text
    return response.json()["deliveries"]


async def wait_until_delivered(stack: Any, webhook_id: str, count: int, timeout: float = 60) -> list[dict]:
    """Until `count` deliveries of the webhook are delivered and none is pending; its log, oldest first."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        log = await deliveries(stack, webhook_id)
        done = [d for d in log if d["status"] == "delivered"]
        if len(done) >= count and all(d["status"] != "pending" for d in log):
            return log[::-1]  # the API lists the newest first (events of a stream before a restore have no sequence)
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{len(done)} of {count} delivered: {[(d['status'], d['lastError']) for d in log]}")
        await asyncio.sleep(0.1)


async def case_events(settings: Any, case_id: str, after: int = 0) -> list[dict[str, Any]]:
    """The case's events in the stream after sequence `after`, in stream order."""
    return [e for e in await stream_events(settings)
            if e["natsSubject"].startswith(f"{settings.nats_prefix}.events.case.{case_id}.") and e["seq"] > after]


async def read_feed(client: Any, params: dict[str, Any], count: int, headers: dict[str, str] | None = None,
                    timeout: float = 30) -> list[dict[str, Any]]:
    """The first `count` Server-Sent Events of GET /api/v1/events: {id, event, data} each."""
    found: list[dict[str, Any]] = []

    async def read() -> None:
        async with client.stream("GET", "/api/v1/events", params=params, headers=headers or {}) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line:
                    name, _, value = line.partition(":")
                    if name:
                        fields[name] = value.removeprefix(" ")
                    continue
                if "data" in fields:
                    found.append({"id": fields["id"], "event": fields["event"], "data": json.loads(fields["data"])})
                    if len(found) == count:
                        return
                fields = {}

    await asyncio.wait_for(read(), timeout)
    return found
