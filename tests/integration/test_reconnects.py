"""Connections that died with their server are never used again, and a deliberate close is not an outage."""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal
import subprocess
import time

import asyncpg
import nats
import pytest
from faststream.nats import NatsBroker

from services.cli.embedded import free_port, nats_server_binary
from shared.db.session import Database, asyncpg_dsn
from shared.messaging import stop_broker
from shared.nats_auth import NatsOptions


async def test_pooled_connections_their_server_dropped_are_replaced_before_use(servers):
    url = await servers.create_database()
    name = f"dropped-{secrets.token_hex(3)}"
    db = Database.from_url(url, pool_size=2, application_name=name)
    admin = await asyncpg.connect(asyncpg_dsn(servers.admin_database_url))
    try:
        async with db.read() as first, db.read() as second:  # two connections of the SQLAlchemy pool
            for connection in (first, second):
                await connection.exec_driver_sql("SELECT 1")
        async with db.connection() as plain:  # and one of the plain asyncpg pool
            await plain.fetchval("SELECT 1")
        # What a server restart does to them: every backend gone, each socket closed by the server.
        dropped = await admin.fetchval("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                       "WHERE application_name = $1", name)
        assert dropped == 3
        await asyncio.sleep(0.2)  # the client's event loop reads each socket's end

        for _ in range(3):  # more than the pool holds: none of the dead ones is handed out
            async with db.read() as connection:
                assert (await connection.exec_driver_sql("SELECT 1")).scalar() == 1
            async with db.connection() as plain:
                assert await plain.fetchval("SELECT 1") == 1
    finally:
        await admin.close()
        await db.dispose()
        await servers.drop_database(url)


def nats_events(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    """The `event` of every warning or worse logged for the connection `name` (structlog hands logging its dict)."""
    return [record.msg["event"] for record in caplog.records if record.levelno >= logging.WARNING
            and isinstance(record.msg, dict) and record.msg.get("connection") == name]


async def listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            assert time.monotonic() < deadline, "nats-server did not start"
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


@pytest.fixture
async def bare_nats():
    """A nats-server of this test's own (no users), to kill or freeze; its port."""
    port = free_port()
    server = subprocess.Popen([nats_server_binary(), "-a", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await listening(port)
        yield server, port
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGCONT)
            server.kill()
            server.wait()


async def test_closing_a_nats_connection_is_no_warning_and_losing_one_is(caplog, bare_nats):
    server, port = bare_nats
    options = NatsOptions(url=f"nats://127.0.0.1:{port}", name=f"callbacks-{secrets.token_hex(3)}",
                          inbox_prefix="_INBOX")
    closed = await nats.connect(**options.client())
    await closed.flush()
    await closed.close()
    drained = await nats.connect(**options.client())
    await drained.drain()
    await asyncio.sleep(0.1)
    assert nats_events(caplog, options.name) == [], "a close the process asked for is no warning"

    lost = await nats.connect(**options.client(), max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    server.kill()
    server.wait()
    deadline = time.monotonic() + 5
    while "nats_disconnected" not in nats_events(caplog, options.name):
        assert time.monotonic() < deadline, "losing the server must be a warning"
        await asyncio.sleep(0.05)
    await lost.close()


async def test_a_broker_stops_within_its_bound_when_nats_froze_or_went(caplog, bare_nats):
    """What a service does when the `up` that ran it was killed: NATS goes at the same moment, or stops answering.
    FastStream's own stop raises nats-py's refusal to drain a reconnecting connection (a traceback in the log), or
    waits out its flush time-out (10 s), and in its drain time-out (30 s) too when the server went mid-drain."""
    server, port = bare_nats
    options = NatsOptions(url=f"nats://127.0.0.1:{port}", name=f"stopping-{secrets.token_hex(3)}",
                          inbox_prefix="_INBOX")
    for how in ("froze", "went"):
        broker = NatsBroker(**options.broker(), max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        broker.subscriber(f"stopping.{how}")(lambda body: None)
        await broker.start()
        connection = broker._connection
        if how == "froze":
            server.send_signal(signal.SIGSTOP)  # connected, and never answers the drain's ping
        else:
            server.kill()
            server.wait()
            await asyncio.sleep(0.3)  # the client sees the socket close and starts reconnecting
        started = time.monotonic()
        await stop_broker(broker, seconds=2)
        assert time.monotonic() - started < 5, how
        assert connection.is_closed, how
        server.send_signal(signal.SIGCONT)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], "no traceback, no error"


async def test_disposing_of_a_database_does_not_wait_for_ever_on_a_connection_still_in_use(servers):
    url = await servers.create_database()
    db = Database.from_url(url, pool_size=2, application_name=f"held-{secrets.token_hex(3)}")
    held = asyncio.Event()

    async def never_done() -> None:  # a background job that did not stop when asked
        async with db.connection() as connection:
            await connection.fetchval("SELECT 1")
            held.set()
            await asyncio.Event().wait()

    job = asyncio.create_task(never_done())
    try:
        await held.wait()
        started = time.monotonic()
        await db.dispose(seconds=0.5)
        assert time.monotonic() - started < 3
    finally:
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)
        await servers.drop_database(url)
