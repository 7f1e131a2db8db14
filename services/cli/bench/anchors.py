"""The anchor servers `bench stage` measures Threadline against, each in a process of its own.

`echo` is a bare MCP server (the SDK's low-level Server, stateless Streamable HTTP, JSON responses)
that validates `stage_claims` arguments against the spec's schema and answers; `direct` does the same
plus one asyncpg transaction per call, inserting the claims into a scratch table on the system's own
PostgreSQL. Run as `python -m services.cli.bench.anchors echo|direct --port N [--table T]`; the
database URL comes from the settings (THREADLINE_DATABASE_URL), as in every process of the project.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx2
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from services.gateway.errors import tool_error, tool_result
from services.gateway.tools import mcp_tool, served_tools
from shared import event_loop
from shared.db.session import asyncpg_dsn
from shared.errors import InvalidArgument, NotFound, Unavailable
from shared.settings import child_environment, get_settings
from shared.spec import ArgumentError, validate_arguments

ANCHOR_CASE = "bench-anchor"
ANCHOR_REVISION = 1
ANCHOR_TOOLS = ("get_workspace", "stage_claims")
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
TABLE_NAME = re.compile(r"threadline_bench_[a-z0-9_]{1,40}")
POOL_SIZE = 10

INSERT_CLAIMS = """
INSERT INTO {table} (case_id, claim_id, proposal_id, payload)
SELECT $1, claim->>'id', $2, claim FROM jsonb_array_elements($3::jsonb) AS claim
"""


def scratch_table_ddl(table: str) -> str:
    return (f"CREATE TABLE {checked(table)} (case_id text NOT NULL, claim_id text NOT NULL, "
            "proposal_id uuid NOT NULL, payload jsonb NOT NULL, staged_at timestamptz NOT NULL DEFAULT now(), "
            "PRIMARY KEY (case_id, claim_id))")


def checked(table: str) -> str:
    """A scratch table's name, refused unless it is one of the bench's own (it is spliced into SQL)."""
    if not TABLE_NAME.fullmatch(table):
        raise ValueError(f"{table!r} is not a bench scratch table name")
    return table


def staged_answer(args: dict[str, Any], proposal_id: str) -> dict[str, Any]:
    """An answer shaped like Threadline's own stage answer, so both sides serialize alike."""
    return {
        "proposalId": proposal_id,
        "caseId": args["expectedCaseId"],
        "kind": "claims",
        "status": "pending",
        "pinnedRevision": args["expectedRevision"],
        "workspaceRevision": ANCHOR_REVISION,
        "items": [{"itemId": claim["id"], "status": "pending"} for claim in args["claims"]],
        "next": "Nothing canonical changes: this is a benchmark anchor.",
    }


def build_server(pool: asyncpg.Pool | None, table: str | None) -> Server:
    tools = {name: served_tools()[name] for name in ANCHOR_TOOLS}
    insert = INSERT_CLAIMS.format(table=checked(table)) if table else None

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[mcp_tool(spec) for spec in tools.values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = tools.get(params.name)
        if spec is None:
            return tool_error(NotFound(f"there is no tool {params.name!r}", field="name"))
        arguments = params.arguments or {}
        try:
            validate_arguments(spec, arguments)
        except ArgumentError as error:
            return tool_error(InvalidArgument(error.message, field=error.field, hint=error.hint))
        if params.name == "get_workspace":
            return tool_result({"caseId": ANCHOR_CASE, "workspaceRevision": ANCHOR_REVISION})
        proposal_id = str(uuid.uuid4())
        if pool is not None and insert is not None:
            async with pool.acquire() as connection, connection.transaction():
                await connection.execute(insert, arguments["expectedCaseId"], uuid.UUID(proposal_id),
                                         json.dumps(arguments["claims"]))
        return tool_result(staged_answer(arguments, proposal_id))

    def input_schema(name: str) -> dict[str, Any] | None:
        return tools[name].input_schema if name in tools else None

    return Server("threadline-bench-anchor", version="1", on_list_tools=list_tools, on_call_tool=call_tool,
                  get_tool_input_schema=input_schema)


class McpEndpoint:
    """ASGI app at /mcp (a class, so Starlette hands it the raw scope rather than a Request)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.state["manager"].handle_request(scope, receive, send)


def create_app(target: str, table: str | None) -> Starlette:
    state: dict[str, Any] = {}

    async def healthz(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok", "target": target})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pool = None
        if target == "direct":
            dsn = asyncpg_dsn(get_settings().resolved_database_url())
            pool = await asyncpg.create_pool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=LOOPBACK_HOSTS,
                                             allowed_origins=[f"http://{h}" for h in LOOPBACK_HOSTS])
        manager = StreamableHTTPSessionManager(app=build_server(pool, table), stateless=True, json_response=True,
                                               security_settings=security)
        state["manager"] = manager
        try:
            async with manager.run():
                yield
        finally:
            if pool is not None:
                await pool.close()

    return Starlette(routes=[Route("/mcp", McpEndpoint(state)), Route("/healthz", healthz)], lifespan=lifespan)


async def serve(target: str, port: int, table: str | None) -> None:
    config = uvicorn.Config(create_app(target, table), host="127.0.0.1", port=port, log_config=None,
                            access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    await uvicorn.Server(config).serve()


class AnchorProcess:
    """One anchor server in a subprocess: started, waited for, stopped."""

    def __init__(self, target: str, port: int, database_url: str, table: str | None) -> None:
        self.target = target
        self.port = port
        self.database_url = database_url
        self.table = table
        self.process: asyncio.subprocess.Process | None = None
        self.stderr = tempfile.TemporaryFile()

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self, timeout: float = 30.0) -> AnchorProcess:
        command = [sys.executable, "-m", "services.cli.bench.anchors", self.target, "--port", str(self.port)]
        if self.table:
            command += ["--table", self.table]
        self.process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=self.stderr,
            env=child_environment({"THREADLINE_DATABASE_URL": self.database_url, "THREADLINE_LOG_LEVEL": "WARNING"}))
        deadline = time.monotonic() + timeout
        async with httpx2.AsyncClient(timeout=2) as http:
            while time.monotonic() < deadline:
                if self.process.returncode is not None:
                    raise Unavailable(f"the {self.target} anchor exited with {self.process.returncode}: "
                                      f"{self._stderr_tail()}")
                with contextlib.suppress(httpx2.HTTPError):
                    if (await http.get(f"http://127.0.0.1:{self.port}/healthz")).status_code == 200:
                        return self
                await asyncio.sleep(0.1)
        await self.stop()
        raise Unavailable(f"the {self.target} anchor did not answer within {timeout:.0f} s: {self._stderr_tail()}")

    async def stop(self, timeout: float = 15.0) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self.stderr.close()

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-800:]


def main(argv: list[str] | None = None) -> None:
    from shared.logging import configure_logging

    parser = argparse.ArgumentParser(description="A benchmark anchor server (see `threadline bench stage`).")
    parser.add_argument("target", choices=["echo", "direct"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--table", help="direct: the scratch table the bench created")
    args = parser.parse_args(argv)
    if args.target == "direct" and not args.table:
        parser.error("direct needs --table")
    configure_logging(f"bench-{args.target}", get_settings().log_level, "json")
    event_loop.run(serve(args.target, args.port, args.table))


if __name__ == "__main__":
    main()
