"""Operators' view of the edge: liveness, readiness that tells which server is missing, hashed tokens."""

from __future__ import annotations

import asyncio
import hashlib

import httpx2
import uvicorn
from sqlalchemy import select

from services.cli.embedded import free_port
from services.gateway.app import create_app
from shared.db.tables import api_tokens


async def test_health_and_readiness_of_a_healthy_gateway(stack):
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=10) as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "checks": {"nats": True, "postgres": True}}


async def test_an_idle_connection_outlives_the_clients_keep_alive(stack):
    # With the server's keep-alive no longer than the client's (5 s each by default), an agent's next call after
    # a 5 s pause could go out on a connection the gateway was closing: a read error. The gateway keeps it longer.
    limits = httpx2.Limits(keepalive_expiry=30)
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=10, limits=limits) as http:
        first = await http.get("/healthz")
        port = first.extensions["network_stream"].get_extra_info("client_addr")[1]
        await asyncio.sleep(6)
        second = await http.get("/healthz")
        ports = [port, second.extensions["network_stream"].get_extra_info("client_addr")[1]]
    assert second.status_code == 200
    assert ports[0] == ports[1], "the second call went out on the same, still open connection"


async def test_readiness_names_the_server_it_cannot_reach(stack):
    port = free_port()
    settings = stack.settings.model_copy(update={
        "http_port": port, "database_url": "postgresql://postgres@127.0.0.1:1/unreachable"})
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_config=None,
                                           access_log=False, lifespan="on", timeout_graceful_shutdown=5))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
            assert (await http.get("/healthz")).status_code == 200  # the process is up
            ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"ready": False, "checks": {"nats": True, "postgres": False}}
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)


async def test_tokens_are_stored_only_as_digests(stack):
    token = await stack.issue_token("reviewer", "digest-check")
    async with stack.db.engine.connect() as connection:
        rows = (await connection.execute(select(api_tokens).where(api_tokens.c.name == "digest-check"))).all()
    assert len(rows) == 1
    stored = rows[0]._mapping
    assert stored["token_hash"] == hashlib.sha256(token.encode()).digest()
    assert token not in repr(dict(stored))


async def test_each_role_has_its_own_token_prefix(stack):
    for role in ("agent", "reviewer", "admin"):
        assert (await stack.issue_token(role, f"prefix-{role}")).startswith(f"tl_{role}_")
