"""Real HTTP webhook receivers for tests: they record every request and answer as a script says."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from services.cli.embedded import free_port

HOLD = "hold"  # a scripted answer: keep the request open until `release()`


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int | None = None  # what the receiver answered (None: the sender went away first)

    @property
    def event(self) -> dict[str, Any]:
        return json.loads(self.body)


@dataclass
class Receiver:
    """`async with Receiver(script=[500, 500]) as r:` answers 500 twice, then 200 to everything."""

    script: list[int | str] = field(default_factory=list)
    delay: float = 0.0  # seconds before each answer: a slow receiver
    requests: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._script = deque(self.script)
        self._released = asyncio.Event()
        self._arrived = asyncio.Condition()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Receiver:
        config = uvicorn.Config(self._app, host="127.0.0.1", port=self.port, log_config=None, access_log=False,
                                lifespan="off", interface="asgi3", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._task = asyncio.create_task(self._server.serve(), name=f"receiver-{self.port}")
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *_: object) -> None:
        self._released.set()
        assert self._server is not None and self._task is not None
        self._server.should_exit = True
        await asyncio.wait_for(self._task, timeout=10)

    def release(self) -> None:
        self._released.set()

    def recover(self) -> None:
        """From now on answer 200 to everything."""
        self._script.clear()

    async def _app(self, scope: dict, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        received = Received(headers, body)
        answer: int | str = self._script.popleft() if self._script else 200
        async with self._arrived:
            self.requests.append(received)
            self._arrived.notify_all()
        if answer == HOLD:
            await self._released.wait()
            answer = 200
        if self.delay:
            await asyncio.sleep(self.delay)
        async with self._arrived:
            received.status = int(answer)
            self._arrived.notify_all()
        await send({"type": "http.response.start", "status": received.status,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"x" * 5000 if received.status >= 500 else b"ok"})

    async def wait_for(self, predicate: Any, timeout: float = 60.0) -> list[Received]:
        """Until `predicate(requests)` holds; the requests so far."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: predicate(self.requests)), timeout)
        return list(self.requests)

    def accepted(self) -> list[Received]:
        return [r for r in self.requests if r.status is not None and 200 <= r.status < 300]
