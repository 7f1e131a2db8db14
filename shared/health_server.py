"""Each process's own probe and scrape port (THREADLINE_METRICS_PORT): /healthz, /readyz, /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.logging import get_logger
from shared.observability import exposition

log = get_logger(__name__)

Check = Callable[[], Awaitable[bool]]
CHECK_TIMEOUT_SECONDS = 2.0
STOP_SECONDS = 5.0


def health_app(checks: dict[str, Check]) -> Starlette:
    """/healthz: the process answers; /readyz: every check passes (NATS and PostgreSQL reachable)."""

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        results = {name: await _passes(check) for name, check in checks.items()}
        ready = all(results.values())
        return JSONResponse({"ready": ready, "checks": results}, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        body, content_type = exposition()
        return Response(body, media_type=content_type)

    return Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)])


async def _passes(check: Check) -> bool:
    try:
        return bool(await asyncio.wait_for(check(), timeout=CHECK_TIMEOUT_SECONDS))
    except Exception:  # noqa: BLE001 - a failing or hanging dependency is simply "not ready"
        return False


class _Server(uvicorn.Server):
    """uvicorn inside a process that handles its own signals: it must not take SIGTERM for itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HealthServer:
    """The probe port, served in the background of the process's event loop until `stop()`."""

    def __init__(self, host: str, port: int, checks: dict[str, Check]) -> None:
        self.host, self.port = host, port
        config = uvicorn.Config(health_app(checks), log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=2)
        self.server = _Server(config)
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        # Bound here, not by uvicorn: a port already taken is an OSError naming it, not uvicorn's sys.exit.
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as error:
            sock.close()
            raise OSError(f"the health and metrics port {self.host}:{self.port} is not free "
                          "(THREADLINE_METRICS_PORT)") from error
        self.port = sock.getsockname()[1]
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]), name="health-server")
        while not self.server.started and not self.task.done():
            await asyncio.sleep(0.02)
        log.info("health_server_started", port=self.port)

    async def stop(self) -> None:
        if self.task is None:
            return
        self.server.should_exit = True
        try:
            await asyncio.wait_for(self.task, timeout=STOP_SECONDS)
        except (TimeoutError, SystemExit):
            self.task.cancel()
