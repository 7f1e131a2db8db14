"""Engines and transactions: one unit of work per message, committed explicitly or rolled back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import orjson
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine


def sqlalchemy_url(url: str) -> str:
    """Accept the usual `postgresql://…` form and select the asyncpg driver."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


def asyncpg_dsn(url: str) -> str:
    """The same URL as a plain libpq DSN, for raw asyncpg connections (LISTEN/NOTIFY)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def create_engine(url: str, *, pool_size: int = 10, application_name: str = "threadline") -> AsyncEngine:
    engine = create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=1800,
        # Every timestamp is read and written in UTC, whatever the server's default.
        connect_args={"server_settings": {"application_name": application_name, "timezone": "UTC"}},
    )
    return engine


class Database:
    """The service's handle on PostgreSQL: a SQLAlchemy engine, and for hot paths a plain asyncpg pool."""

    def __init__(self, engine: AsyncEngine, *, url: str | None = None, pool_size: int = 10,
                 application_name: str = "threadline") -> None:
        self.engine = engine
        self.url = url
        self.pool_size = pool_size
        self.application_name = application_name
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, *, pool_size: int = 10, application_name: str = "threadline") -> Database:
        return cls(create_engine(url, pool_size=pool_size, application_name=application_name), url=url,
                   pool_size=pool_size, application_name=application_name)

    async def pool(self) -> asyncpg.Pool:
        """The asyncpg pool for statements that must cost one round trip each: prepared once per
        connection, JSON decoded with orjson, and no reset round trip when a connection is released
        (its users leave no session state behind: transaction-scoped locks only)."""
        if self._pool is None:
            async with self._pool_lock:
                if self._pool is None:
                    assert self.url is not None, "a Database built from an engine alone has no asyncpg pool"
                    self._pool = await asyncpg.create_pool(
                        asyncpg_dsn(self.url), min_size=1, max_size=self.pool_size, init=_json_codecs,
                        reset=_no_reset,
                        server_settings={"application_name": self.application_name, "timezone": "UTC"},
                    )
        return self._pool

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A unit of work: commits when the block ends normally, rolls back on any exception."""
        async with self.engine.begin() as connection:
            yield connection

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only snapshot (REPEATABLE READ) so a view is consistent across its queries."""
        async with self.engine.connect() as connection:
            await connection.execution_options(isolation_level="REPEATABLE READ")
            async with connection.begin():
                yield connection

    async def dispose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        await self.engine.dispose()


async def _json_codecs(connection: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await connection.set_type_codec(name, schema="pg_catalog", encoder=_dumps, decoder=orjson.loads)


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Released connections are returned as they are (see Database.pool)."""
