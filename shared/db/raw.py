"""One statement in PostgreSQL's own `$n` parameters, on whichever connection a service holds: asyncpg's
(staging) or a SQLAlchemy AsyncConnection's (review, projection), inside that connection's transaction."""

from __future__ import annotations

from typing import Any

import asyncpg


async def driver_connection(connection: Any) -> asyncpg.Connection:
    if isinstance(connection, asyncpg.Connection) or hasattr(connection, "fetchrow"):
        return connection
    raw = await connection.get_raw_connection()
    return raw.driver_connection


async def fetch(connection: Any, sql: str, *args: Any) -> list[asyncpg.Record]:
    return await (await driver_connection(connection)).fetch(sql, *args)


async def fetchrow(connection: Any, sql: str, *args: Any) -> asyncpg.Record | None:
    return await (await driver_connection(connection)).fetchrow(sql, *args)
