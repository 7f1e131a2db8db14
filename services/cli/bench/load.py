"""Concurrent agents on the official MCP client, each calling a tool in a loop for a while: one measured run."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import psutil

from services.cli.bench.calls import mcp_agent, tool_outcome
from services.cli.bench.stats import Run

# (agent index, call index, the agent's get_workspace answer) → the call's arguments
Arguments = Callable[[int, int, dict[str, Any]], dict[str, Any]]

SETTLE_CPU_PERCENT = 25.0
SETTLE_MAX_SECONDS = 15.0
READ_ATTEMPTS = 10


class Load:
    """N agents: each connects, calls get_workspace once, then calls `tool` until the window closes.

    The clock starts when every agent is connected and has read its workspace, so connecting is not
    measured; the window ends when the last call begun inside it returns. `first_reads`: at most this many
    agents read their first workspace at once (agents that start together, as a fleet rolled out in waves
    would); None: all at once.
    """

    def __init__(self, run: Run, url: str, tokens: list[str], seconds: float, tool: str,
                 arguments: Arguments, first_reads: int | None = None) -> None:
        self.run = run
        self.url = url
        self.tokens = tokens
        self.seconds = seconds
        self.tool = tool
        self.arguments = arguments
        self.started_at: float | None = None
        self.go = asyncio.Event()
        self.ready = 0
        self.on_start: Callable[[], Any] | None = None  # called as the clock starts (CPU counters, say)
        self.stop = asyncio.Event()  # set: every agent ends after its call in flight, before the window closes
        self.reading = asyncio.Semaphore(first_reads) if first_reads else contextlib.nullcontext()

    @property
    def elapsed(self) -> float:
        return 0.0 if self.started_at is None else time.perf_counter() - self.started_at

    async def measure(self) -> Run:
        agents = [asyncio.create_task(self._agent(n, token)) for n, token in enumerate(self.tokens)]
        while self.ready < len(self.tokens):
            failed = [task for task in agents if task.done() and task.exception() is not None]
            if failed:
                for task in agents:
                    task.cancel()
                raise failed[0].exception()  # type: ignore[misc]
            await asyncio.sleep(0.02)
        if self.on_start is not None:
            self.on_start()
        cpu_before = time.process_time()
        self.started_at = time.perf_counter()
        self.go.set()
        await asyncio.gather(*agents)
        self.run.seconds = time.perf_counter() - self.started_at
        self.run.client_cpu = (time.process_time() - cpu_before) / self.run.seconds
        return self.run

    async def _agent(self, n: int, token: str) -> None:
        async with mcp_agent(self.url, token) as client:
            async with self.reading:
                for attempt in range(READ_ATTEMPTS):  # a read changes nothing: retried as its `unavailable` hint says
                    workspace, error = tool_outcome(await client.call_tool("get_workspace", {}))
                    if error != "unavailable":
                        break
                    await asyncio.sleep(0.5 * (attempt + 1))
            if error is not None:
                raise RuntimeError(f"get_workspace was refused ({error}): {workspace}")
            self.ready += 1
            await self.go.wait()
            deadline = self.started_at + self.seconds  # type: ignore[operator]
            k = 0
            while time.perf_counter() < deadline and not self.stop.is_set():
                arguments = self.arguments(n, k, workspace or {})
                k += 1
                began = time.perf_counter()
                try:
                    _, error = tool_outcome(await client.call_tool(self.tool, arguments))
                except Exception as failure:  # noqa: BLE001 - a transport failure is a measured error
                    error = f"exception:{type(failure).__name__}"
                self.run.record((time.perf_counter() - began) * 1000, error)


async def settle(at_most: float = SETTLE_MAX_SECONDS) -> float:
    """Wait (up to a bound) until the machine is near idle, so one run's aftermath does not tax the next."""
    began = time.monotonic()
    while time.monotonic() - began < at_most:
        if await asyncio.to_thread(psutil.cpu_percent, 0.5) < SETTLE_CPU_PERCENT:
            break
    return time.monotonic() - began
