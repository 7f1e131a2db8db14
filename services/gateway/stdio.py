"""The gateway over stdin/stdout (`threadline serve gateway --stdio`): MCP only, so it imports no HTTP stack
(FastAPI, uvicorn, the API and the UI), which an agent host would otherwise wait for at every start."""

from __future__ import annotations

import sys
from typing import Any

from services.gateway.auth import Principal
from services.gateway.mcp_server import build_server
from services.gateway.wiring import Gateway
from shared import version
from shared.errors import Unauthenticated
from shared.logging import configure_logging
from shared.observability import configure_tracing, shutdown_tracing
from shared.service import freeze_heap
from shared.settings import Settings


async def main(settings: Settings, token: str | None) -> None:
    configure_logging("gateway", settings.log_level, settings.log_format)
    configure_tracing("gateway", settings)
    freeze_heap()  # what it imported, before it serves: shared/service.py says why
    try:
        await serve_stdio(settings, token)
    finally:
        shutdown_tracing()


async def serve_stdio(settings: Settings, token: str | None) -> None:
    """MCP over stdin/stdout for a local agent host; the agent token comes from THREADLINE_TOKEN."""
    from mcp.server.stdio import stdio_server

    if not token:
        raise Unauthenticated("stdio needs an agent token", hint="set THREADLINE_TOKEN or pass --token")
    gateway = Gateway.connect(settings)
    principal = await gateway.tokens.authenticate(f"Bearer {token}")

    async def resolve(ctx: Any) -> Principal:
        return principal

    server = build_server(gateway.client, gateway.discoveries, resolve, version())
    await gateway.start()
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await gateway.stop()
    print("threadline gateway (stdio) stopped", file=sys.stderr)
