"""MCP calls as they arrive at /mcp: bounded in size, and judged off the event loop when they hold many values.

A body over MAX_CALL_BYTES is refused by its declared length before it is read, or as soon as the bytes read
pass it (a chunked body). While a body is read, the values it can hold are counted from its punctuation: each
value or key follows a `[`, `{`, `,` or `:`, so their number bounds the values from above whatever the strings
hold. A body that may hold more values than any call needs goes to the judging process (judge.py) before the
MCP transport parses it on the event loop. Refusals here are JSON-RPC errors in the body of an HTTP error,
which an MCP client reports as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from services.gateway.errors import too_large
from services.gateway.judge import INLINE_VALUES, INVALID_REQUEST, PASS, REPLACE, misshapen
from services.gateway.limits import MAX_CALL_BYTES, declared_length
from shared.errors import HTTP_STATUS, ThreadlineError, Unavailable
from shared.logging import get_logger
from shared.problems import Problem

log = get_logger(__name__)

JUDGED_SCOPE_KEY = "threadline.judged"  # the problems the judging process found in a call's arguments
PUNCTUATION = (b"[", b"{", b",", b":")
ARGUMENTS = b'"arguments"'  # a body without it sends no arguments to misshape
WAITING = 8  # large bodies waiting for the judge at most; more are told to retry (a gateway under attack)
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Judge:
    """The gateway's handle on its judging process: started on first use, one body at a time, restarted
    when it dies."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()
        self._waiting = 0

    async def verdict(self, body: bytes) -> dict[str, Any]:
        if self._waiting >= WAITING:
            raise Unavailable(f"the gateway is checking {WAITING} large calls already",
                              hint="retry shortly; smaller calls are answered meanwhile")
        self._waiting += 1
        try:
            async with self._turn:
                for _ in range(2):  # a process that died is replaced once
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError, asyncio.IncompleteReadError):
                        return await self._exchange(body)
                    await self._discard()
        finally:
            self._waiting -= 1
        raise Unavailable("the gateway could not check this call", hint="retry shortly")

    async def _exchange(self, body: bytes) -> dict[str, Any]:
        process = await self._running()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(len(body).to_bytes(4, "big"))
            process.stdin.write(body)
            await process.stdin.drain()
            size = int.from_bytes(await process.stdout.readexactly(4), "big")
            return orjson.loads(await process.stdout.readexactly(size))
        except asyncio.CancelledError:  # the caller left mid-exchange: its verdict would answer the next body
            await asyncio.shield(self._discard())
            raise

    async def _running(self) -> asyncio.subprocess.Process:
        if self._process is None or self._process.returncode is not None:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.gateway.judge", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, limit=1 << 20)
            log.info("judge_started", pid=self._process.pid)
        return self._process

    async def _discard(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()

    async def close(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()  # the process ends at EOF
        try:
            await asyncio.wait_for(process.wait(), timeout=5)
        except TimeoutError:
            process.kill()
            await process.wait()


class Intake:
    def __init__(self, judge: Judge | None = None) -> None:
        self.judge = judge or Judge()

    def refusal_by_length(self, scope: Scope) -> JSONResponse | None:
        """A body declared larger than any call: refused before a byte of it is read."""
        declared = declared_length(scope)
        if declared is None or declared <= MAX_CALL_BYTES:
            return None
        return _too_large(f"the request body is {declared} bytes")

    async def hand_over(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Read the body (bounded), judge it off the loop when it may hold many values, then hand it to `app`."""
        if scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, punctuation = 0, 1
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the caller left: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_CALL_BYTES:
                await _too_large(f"the request body is over {MAX_CALL_BYTES} bytes")(scope, receive, send)
                return
            if punctuation <= INLINE_VALUES:  # past it the body is judged anyway: no need to count further
                punctuation += sum(chunk.count(mark) for mark in PUNCTUATION)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if punctuation > INLINE_VALUES:
            try:
                verdict = await self.judge.verdict(body)
            except ThreadlineError as error:
                await _jsonrpc_error(HTTP_STATUS[error.code], INVALID_REQUEST, _said(error), error=error)(
                    scope, receive, send)
                return
            log.info("mcp_body_judged", outcome=verdict["outcome"], bytes=size)
            if verdict["outcome"] == REPLACE:
                body = verdict["body"].encode()
                scope[JUDGED_SCOPE_KEY] = [Problem(**p) for p in verdict["problems"]]
            elif verdict["outcome"] != PASS:
                await _jsonrpc_error(verdict["status"], verdict["code"], verdict["message"], verdict.get("id"))(
                    scope, receive, send)
                return
        elif ARGUMENTS in body and (replaced := _misshapen(body)) is not None:  # a small body: parsed in microseconds
            body = replaced["body"].encode()
            scope[JUDGED_SCOPE_KEY] = [Problem(**p) for p in replaced["problems"]]
        await app(scope, _replay(body, receive), send)


def _misshapen(body: bytes) -> dict[str, Any] | None:
    """judge.misshapen for a body small enough to parse here; None when it does not parse (the transport says so)."""
    try:
        return misshapen(orjson.loads(body))
    except orjson.JSONDecodeError:
        return None


def judged_problems(request: Any) -> list[Problem] | None:
    """The problems the judging process found in the call's arguments, when it judged them."""
    return request.scope.get(JUDGED_SCOPE_KEY) if request is not None else None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


def _too_large(what: str) -> JSONResponse:
    error = too_large(f"{what}; a call may be at most {MAX_CALL_BYTES} bytes")
    return _jsonrpc_error(413, INVALID_REQUEST, _said(error), error=error)


def _said(error: ThreadlineError) -> str:
    return f"{error.message} (fix: {error.hint})" if error.hint else error.message


def _jsonrpc_error(status: int, code: int, message: str, request_id: Any = None,
                   error: ThreadlineError | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if error is not None:
        body["data"] = error.to_dict()
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": body}, status_code=status)
