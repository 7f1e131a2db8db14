"""Bounded work per request at the HTTP edge: request bodies refused past a size, by header and by bytes read."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.errors import http_error, too_large

MAX_BODY_BYTES = 4 * 1024 * 1024
# A call travels to its service as one NATS message (1 MiB unless the server is configured otherwise), so no
# call a service can receive needs more: even written with every non-ASCII character escaped (\uXXXX, at
# most three times its UTF-8 bytes) and framed as JSON-RPC, it fits in 4 MiB. /mcp bounds its bodies itself
# (intake.py), to refuse them as JSON-RPC errors.
MAX_CALL_BYTES = 4 * 1024 * 1024
UNLIMITED_PATHS = ("/mcp",)


class BodyLimit:
    """Refuses a body over `limit` bytes: at once when Content-Length says so, else when the bytes read pass it.

    A body read past the limit raises a 413 HTTPException inside the route (FastAPI passes those on as they
    are), which the app's error map answers in the envelope.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit
        self.refusal = f"the request body is larger than {limit} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.limit:
            await http_error(too_large(self.refusal))(scope, receive, send)
            return
        read = 0

        async def bounded_receive() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.limit:
                    raise HTTPException(413, detail=self.refusal)
            return message

        await self.app(scope, bounded_receive, send)


def declared_length(scope: Scope) -> int | None:
    """The declared length; a malformed one counts as too large (nothing honest sends it)."""
    values: list[Any] = [v for k, v in scope["headers"] if k.lower() == b"content-length"]
    if not values:
        return None
    try:
        return int(values[0])
    except ValueError:
        return 1 << 62
