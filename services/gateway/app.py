"""The gateway process: `threadline serve gateway` (HTTP; `--stdio` is services/gateway/stdio.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pydantic
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.staticfiles import StaticFiles
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway import (
    feed,
    history_api,
    history_ui,
    http_api,
    metrics,
    queue_ui,
    record_ui,
    resolutions_api,
    search_api,
    search_ui,
    ui,
    webhooks_ui,
)
from services.gateway.auth import Principal
from services.gateway.errors import http_error, invalid_argument, routing_error
from services.gateway.intake import Intake
from services.gateway.limits import BodyLimit
from services.gateway.mcp_server import (
    AUTH_OUTAGE_SCOPE_KEY,
    CORRELATION_SCOPE_KEY,
    PRINCIPAL_SCOPE_KEY,
    build_server,
    principal_from_http,
)
from services.gateway.stdio import main as stdio_main
from services.gateway.wiring import Gateway
from shared import asyncapi, version
from shared.errors import InternalError, ThreadlineError, Unavailable
from shared.logging import bound, configure_logging, get_logger
from shared.messaging import new_correlation_id, new_traceparent
from shared.observability import (
    configure_tracing,
    current_traceparent,
    instrument_http,
    show,
    shutdown_tracing,
    tracing_enabled,
)
from shared.outage import outage
from shared.service import STOP_DEADLINE_SECONDS, exit_after, freeze_heap, probe_server
from shared.settings import Settings

log = get_logger(__name__)

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
CORRELATION_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
KEEP_ALIVE_SECONDS = 65  # an idle HTTP connection stays open this long (above the clients' 5 s; _serve)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection: loopback names always, plus THREADLINE_ALLOWED_HOSTS (host:port, `*` port)."""
    extra = [h.strip() for h in settings.allowed_hosts.split(",") if h.strip()]
    if "*" in extra:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    loopback = settings.http_host in ("127.0.0.1", "localhost", "::1")
    if not loopback and not extra:
        # Bound to a routable address without an allow-list (a container): every call still needs a token.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = LOOPBACK_HOSTS + extra
    origins = [f"http://{h}" for h in hosts] + [f"https://{h}" for h in extra]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


class CorrelationMiddleware:
    """Gives every HTTP request a correlation id and trace parent, echoed in X-Correlation-Id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        # Callers may bring their own ids; anything malformed is replaced rather than logged as given.
        supplied = headers.get("x-correlation-id", "")
        correlation_id = supplied if CORRELATION_ID.fullmatch(supplied) else new_correlation_id()
        # The request's span when tracing is on (it continues the caller's); else the caller's context as given.
        traceparent = current_traceparent() or headers.get("traceparent", "")
        scope.setdefault("state", {})
        scope["state"]["correlation_id"] = correlation_id
        scope["state"]["traceparent"] = traceparent if TRACEPARENT.fullmatch(traceparent) else new_traceparent()
        scope[CORRELATION_SCOPE_KEY] = correlation_id
        status = {"code": 500}

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                # Once, whoever else set it: an error response may carry it already.
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-correlation-id"]
                message["headers"] = [*kept, (b"x-correlation-id", correlation_id.encode())]
            await send(message)

        with bound(correlation_id=correlation_id):
            await self.app(scope, receive, send_with_id)
        # The route template the request matched (never its raw path), so callers cannot add series.
        route = getattr(scope.get("route"), "path", None)
        metrics.observe_http(scope["method"], route, status["code"])


def _not_stateless(method: str) -> JSONResponse:
    """A GET (an event stream of the server's own) or DELETE (end a session) at /mcp. The gateway is stateless: the
    SDK would hold a GET's stream open, empty, for as long as the caller kept it, a transport and a task each. The
    MCP specification lets a server answer both with 405, which its clients take as "no such stream"."""
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600,
            "message": f"{method} /mcp: this gateway is stateless (no session, no event stream of its own); send each "
                       "JSON-RPC message as a POST"}},
        status_code=405, headers={"Allow": "POST"})


def allowed_methods(app: FastAPI, scope: Scope) -> str:
    """Every method some route takes on the request's path."""
    return ", ".join(sorted(
        method for method in metrics.METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in app.router.routes)
    ))


class McpEndpoint:
    """ASGI app at /mcp: authenticates the bearer token, then hands over to the MCP transport (through the
    intake, which bounds the body and judges a large one off the event loop)."""

    def __init__(self, tokens_of: Any, manager_of: Any, intake: Intake | None = None) -> None:
        self.tokens_of = tokens_of
        self.manager_of = manager_of
        self.intake = intake or Intake()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await _not_stateless(scope["method"])(scope, receive, send)
            return
        if (refused := self.intake.refusal_by_length(scope)) is not None:
            await refused(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            principal: Principal = await self.tokens_of(scope).authenticate(headers.get("authorization"))
        except Exception as error:  # noqa: BLE001 - every failure is an HTTP answer, never a dropped connection
            refusal = error if isinstance(error, ThreadlineError) else outage(error)
            if refusal is None:
                log.error("authentication_failed", exc_info=error)
                refusal = InternalError("the gateway failed to check the token; it has been logged")
            if refusal.code != Unavailable.code:
                await http_error(refusal, scope.get(CORRELATION_SCOPE_KEY))(scope, receive, send)
                return
            # The token could not be checked (an outage): a tool call then gets a tool error with the retry
            # hint, which an agent reads, instead of a bare HTTP 503 its MCP client reports as "an error".
            scope[AUTH_OUTAGE_SCOPE_KEY] = refusal
            await self.intake.hand_over(scope, receive, send, self.manager_of(scope).handle_request)
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        await self.intake.hand_over(scope, receive, send, self.manager_of(scope).handle_request)


def create_app(settings: Settings, gateway: Gateway | None = None) -> FastAPI:
    gateway = gateway or Gateway.connect(settings)
    show(*metrics.METRICS)

    async def resolve(ctx: Any) -> Principal:
        return principal_from_http(ctx)

    mcp_server = build_server(gateway.client, gateway.discoveries, resolve, version())
    intake = Intake()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            app=mcp_server, stateless=True, json_response=True, security_settings=transport_security(settings)
        )
        app.state.mcp_manager = manager
        await gateway.start()
        health = probe_server(settings, gateway.broker, gateway.db)
        if health is not None:
            await health.start()
        async with manager.run():
            log.info("gateway_started", host=settings.http_host, port=settings.http_port)
            yield
        if health is not None:
            await health.stop()
        await intake.judge.close()
        await gateway.stop()

    app = FastAPI(
        title="Threadline API",
        version=version(),
        description="Reviewers' and operators' API of Threadline: cases, proposals, decisions, theses.",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry asks the global providers on every request; traces, when on, come from
        # the instrumentation below, metrics from Prometheus.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.gateway = gateway
    app.include_router(http_api.router)
    app.include_router(history_api.router)
    app.include_router(search_api.router)
    app.include_router(resolutions_api.router)
    app.include_router(feed.router)
    app.include_router(ui.router)
    app.include_router(history_ui.router)
    app.include_router(queue_ui.router)
    app.include_router(search_ui.router)
    app.include_router(record_ui.router)
    app.include_router(webhooks_ui.router)
    app.mount("/ui/static", StaticFiles(directory=Path(ui.__file__).parent / "static"), name="ui-static")

    @app.exception_handler(ThreadlineError)
    async def on_error(request: Request, error: ThreadlineError) -> Response:
        if request.url.path.startswith("/ui"):
            return ui.failure(request, error)
        return http_error(error, request.state.correlation_id)

    @app.exception_handler(ui.SignInRequired)
    async def on_signed_out(request: Request, _: ui.SignInRequired) -> Response:
        return ui.to_signin(request)

    # Bad input is the caller's to fix: the request as FastAPI parsed it, or a contract the gateway built from it.
    @app.exception_handler(RequestValidationError)
    @app.exception_handler(pydantic.ValidationError)
    async def on_invalid(request: Request, error: RequestValidationError | pydantic.ValidationError) -> Response:
        return await on_error(request, invalid_argument(error.errors()))

    # What Starlette or FastAPI refuses before a handler runs (no such path, a method the path does not take,
    # a body that does not parse) answers in the same envelope; a 405 keeps its Allow header.
    @app.exception_handler(StarletteHTTPException)
    async def on_refused_route(request: Request, error: StarletteHTTPException) -> Response:
        headers = dict(error.headers or {})
        if error.status_code == 405:  # Starlette names the methods of the first route on the path only
            headers["Allow"] = allowed_methods(app, request.scope)
        refusal = routing_error(error.status_code, request.method, request.url.path, headers.get("Allow"),
                                str(error.detail))
        response = await on_error(request, refusal)
        response.status_code = error.status_code
        response.headers.update(headers)
        return response

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> Response:
        if (unavailable := outage(error, "gateway")) is not None:
            log.warning("request_unavailable", reason=unavailable.message, error=repr(error))
            return await on_error(request, unavailable)
        log.error("request_failed", exc_info=error)
        failed = InternalError("the gateway failed to handle the request; it has been logged")
        if request.url.path.startswith("/ui"):
            return ui.failure(request, failed)
        return JSONResponse({"error": failed.to_dict()}, status_code=500)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        # Both asked at once: a probe waits for the slower of the two answers, not for one after the other.
        nats, postgres = await asyncio.gather(_answers(gateway.broker.ping(timeout=2.0)), _answers(gateway.db.ping()))
        checks = {"nats": nats, "postgres": postgres}
        ready = all(checks.values())
        return JSONResponse({"ready": ready, "checks": checks}, status_code=200 if ready else 503)

    @app.get("/docs/asyncapi.json", include_in_schema=False)
    async def asyncapi_json() -> Response:
        return JSONResponse(asyncapi.document(settings))

    @app.get("/docs/asyncapi", include_in_schema=False)
    async def asyncapi_page(request: Request) -> Response:
        doc = asyncapi.document(settings)
        channels = doc["channels"]
        html = ui.templates.get_template("asyncapi.html").render(
            doc=doc,
            events=[(n, c) for n, c in channels.items() if n.startswith("events.")],
            commands=[(n, c) for n, c in channels.items() if n.startswith("cmd.") and not n.endswith(".reply")],
            schema=lambda name: json.dumps(doc["components"]["messages"][name]["payload"], indent=2),
            pretty=lambda body: json.dumps(body, indent=2),
        )
        return HTMLResponse(html, headers={"Content-Security-Policy": "default-src 'self'; script-src 'none'"})

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    # A route, not a mount: a mount would redirect /mcp to /mcp/.
    # First among the routes: every agent call is matched against it before anything else.
    app.router.routes.insert(
        0, Route("/mcp", McpEndpoint(lambda scope: gateway.tokens, lambda scope: app.state.mcp_manager, intake))
    )
    app.add_middleware(BodyLimit)
    app.add_middleware(CorrelationMiddleware)
    if tracing_enabled():  # its request attributes cost every call a share even when nothing records spans
        instrument_http(app)
    return app


async def _answers(check: Awaitable[bool]) -> bool:
    try:
        return bool(await check)
    except Exception:  # noqa: BLE001 - any failure means not ready
        return False


async def main(settings: Settings, *, stdio: bool = False, token: str | None = None) -> None:
    if stdio:  # `serve gateway --stdio` imports services.gateway.stdio alone; this is for callers of this module
        await stdio_main(settings, token)
        return
    configure_logging("gateway", settings.log_level, settings.log_format)
    configure_tracing("gateway", settings)
    freeze_heap()  # what it imported, before it serves: shared/service.py says why
    try:
        await _serve(settings)
    finally:
        shutdown_tracing()


def server_config(app: Any, settings: Settings, *, port: int | None = None) -> uvicorn.Config:
    """How the gateway serves HTTP (`threadline gateway`, and the tests' stacks)."""
    return uvicorn.Config(
        app,
        host=settings.http_host,
        port=settings.http_port if port is None else port,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # Longer than a client keeps an idle connection (httpx: 5 s, uvicorn's default too): with equal timeouts
        # a client may send its next call on a connection the gateway is closing, and read an error.
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )


async def _serve(settings: Settings) -> None:
    config = server_config(create_app(settings), settings)
    if not settings.http_reuse_port:
        await DeadlineServer(config).serve()
        return
    # Several gateway processes on one port (`up --replicas gateway=2`): the kernel spreads connections.
    listener = socket.socket(socket.AF_INET6 if ":" in settings.http_host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind((settings.http_host, settings.http_port))
    await DeadlineServer(config).serve(sockets=[listener])


class DeadlineServer(uvicorn.Server):
    """uvicorn's server in the gateway's own process: gone within the services' stop deadline of the first signal,
    whatever its connections and its NATS and PostgreSQL do (when `up` was killed, nobody else is there to kill it)."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.should_exit:
            exit_after(STOP_DEADLINE_SECONDS)
        super().handle_exit(sig, frame)
