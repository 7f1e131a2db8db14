"""Engines and transactions: one unit of work per message, committed explicitly or rolled back."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import orjson
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from shared.outage import PostgreSQLUnreachable


def sqlalchemy_url(url: str) -> str:
    """Accept the usual `postgresql://…` form and select the asyncpg driver."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


def asyncpg_dsn(url: str) -> str:
    """The same URL as a plain libpq DSN, for raw asyncpg connections (LISTEN/NOTIFY)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def create_engine(url: str, *, pool_size: int = 10, application_name: str = "threadline",
                  transaction_pooler: bool = False) -> AsyncEngine:
    # Every timestamp is read and written in UTC, whatever the server's default.
    connect_args: dict[str, Any] = {"server_settings": {"application_name": application_name, "timezone": "UTC"},
                                    "async_creator_fn": connect}
    if transaction_pooler:
        connect_args.update(pooler_connect_args())
    engine = create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=1800,
        connect_args=connect_args,
    )
    event.listen(engine.sync_engine, "checkout", _discard_dead)
    return engine


async def connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
    """asyncpg.connect, whose failure to reach the server says it was PostgreSQL that could not be reached."""
    try:
        return await asyncpg.connect(*args, **kwargs)
    except (OSError, TimeoutError) as error:
        raise PostgreSQLUnreachable(f"cannot connect to PostgreSQL: {error!r}") from error


def _discard_dead(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Never hand out a pooled connection PostgreSQL dropped (its server restarted): asyncpg knows it is closed
    without a round trip, and the pool then replaces it — and every connection opened before it, which died
    with the same server — instead of letting the first statement of each fail. A pre-ping would cost every
    checkout a round trip."""
    if dbapi_connection.driver_connection.is_closed():
        raise sa_exc.InvalidatePoolError("the connection was closed by its server")


def pooler_connect_args() -> dict[str, Any]:
    """asyncpg behind a transaction pooler (PgBouncer `pool_mode = transaction`), as SQLAlchemy's asyncpg
    dialect documents it: consecutive transactions of one client may land on different server
    connections, so no statement may be cached across them (asyncpg's cache and SQLAlchemy's both off),
    and the statements SQLAlchemy still prepares inside a transaction get names no other client can
    collide with on a shared server connection."""
    return {
        "statement_cache_size": 0,
        "prepared_statement_cache_size": 0,
        "prepared_statement_name_func": lambda: f"__asyncpg_{uuid.uuid4().hex}__",
    }


DISPOSE_SECONDS = 5.0
PING_TIMEOUT = 2.0  # seconds a readiness probe waits for PostgreSQL, as for NATS


class Database:
    """The service's handle on PostgreSQL: a SQLAlchemy engine, and for hot paths a plain asyncpg pool."""

    def __init__(self, engine: AsyncEngine, *, url: str | None = None, pool_size: int = 10,
                 application_name: str = "threadline", transaction_pooler: bool = False) -> None:
        self.engine = engine
        self.transaction_pooler = transaction_pooler
        self.url = url
        self.pool_size = pool_size
        self.application_name = application_name
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str, *, pool_size: int = 10, application_name: str = "threadline",
                 transaction_pooler: bool = False) -> Database:
        engine = create_engine(url, pool_size=pool_size, application_name=application_name,
                               transaction_pooler=transaction_pooler)
        return cls(engine, url=url, pool_size=pool_size, application_name=application_name,
                   transaction_pooler=transaction_pooler)

    async def pool(self) -> asyncpg.Pool:
        """The asyncpg pool for statements that must cost one round trip each: prepared once per
        connection (unless a transaction pooler is in between), JSON decoded with orjson, and no reset
        round trip when a connection is released (its users leave no session state behind:
        transaction-scoped locks only)."""
        if self._pool is None:
            async with self._pool_lock:
                if self._pool is None:
                    assert self.url is not None, "a Database built from an engine alone has no asyncpg pool"
                    pooled = {"statement_cache_size": 0} if self.transaction_pooler else {}
                    self._pool = await asyncpg.create_pool(
                        asyncpg_dsn(self.url), min_size=1, max_size=self.pool_size, init=_json_codecs,
                        reset=_no_reset, connect=connect, **pooled,
                        server_settings={"application_name": self.application_name, "timezone": "UTC"},
                    )
        return self._pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection of the asyncpg pool for a few statements."""
        connection = await self.acquire()
        try:
            yield connection
        except BaseException as error:
            await self.release(connection, error)
            raise
        await self.release(connection)

    async def acquire(self) -> asyncpg.Connection:
        """A connection of the asyncpg pool, to be given back with `release`."""
        return await (await self.pool()).acquire()

    async def release(self, connection: asyncpg.Connection, error: BaseException | None = None) -> None:
        """Return a connection to the pool — unless `error` may have left it mid-operation (cut off,
        cancelled mid-statement, confused): with no reset on release, such a connection would fail whoever
        got it next, so it is closed and the pool opens a fresh one."""
        pool = await self.pool()
        if error is not None and isinstance(error, _CLIENT_SIDE):
            connection.terminate()
        if error is not None and isinstance(error, _SERVER_GONE):
            # The server went away: the pool's other idle connections went with it (asyncpg also sees a closed
            # one when it is next acquired; this covers those the kernel has not reported closed yet).
            await pool.expire_connections()
        await pool.release(connection)

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

    async def ping(self, timeout: float = PING_TIMEOUT) -> bool:
        """PostgreSQL answers (a readiness probe), within `timeout` seconds.

        One round trip: a simple query on the asyncpg pool, with no transaction to begin and roll back and
        nothing to prepare (the engine's way costs three). On a loaded machine each round trip waits for a
        server process to be scheduled, so a probe's time is mostly the number of its round trips."""
        async with asyncio.timeout(timeout), self.connection() as connection:
            await connection.execute("SELECT 1")
        return True

    async def dispose(self, seconds: float = DISPOSE_SECONDS) -> None:
        """Close every connection; one still in use after `seconds` (a server gone, a task that did not stop) is
        dropped: asyncpg's close waits for each to be released, for ever unless bounded."""
        if self._pool is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pool.close(), seconds)  # a close cut short terminates the pool
            self._pool = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.engine.dispose(), seconds)


async def _json_codecs(connection: asyncpg.Connection) -> None:
    for name in ("json", "jsonb"):
        await connection.set_type_codec(name, schema="pg_catalog", encoder=_dumps, decoder=orjson.loads)


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


# Failures on the client side of a connection, after which its protocol state cannot be trusted (a server's
# own error, asyncpg.PostgresError, leaves the connection as good as before).
_CLIENT_SIDE = (asyncpg.InterfaceError, asyncpg.InternalClientError, OSError, asyncio.CancelledError, TimeoutError)
_SERVER_GONE = (asyncpg.ConnectionDoesNotExistError, asyncpg.AdminShutdownError, asyncpg.CrashShutdownError,
                ConnectionError)


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Released connections are returned as they are (see Database.pool)."""
