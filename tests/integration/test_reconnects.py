"""Connections that died with their server are never used again."""

from __future__ import annotations

import asyncio
import secrets

import asyncpg

from shared.db.session import Database, asyncpg_dsn


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
