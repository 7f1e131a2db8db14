"""Engines and transactions: one unit of work per message, committed explicitly or rolled back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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
    """The service's handle on PostgreSQL."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @classmethod
    def from_url(cls, url: str, *, pool_size: int = 10, application_name: str = "threadline") -> Database:
        return cls(create_engine(url, pool_size=pool_size, application_name=application_name))

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
        await self.engine.dispose()
