"""Recognises "cannot reach PostgreSQL or NATS" in any exception, so every edge answers `unavailable`."""

from __future__ import annotations

import errno
import socket

import asyncpg
import nats.errors
from sqlalchemy import exc as sa_exc

from shared.errors import Unavailable

DATABASE_HINT = "retry shortly: PostgreSQL is unreachable or restarting; nothing was changed unless a retry says so"
NATS_HINT = "retry shortly: the processes reconnect on their own once NATS is back"


class PostgreSQLUnreachable(ConnectionError):
    """A connection to PostgreSQL could not be opened. asyncpg lets the socket's own error through (a refused
    connection, a timeout), which names no server; the connect step raises this instead so the answer can."""


# asyncpg's errors for a server that is gone, restarting or refusing connections for now.
_DATABASE_GONE = (
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,  # starting up, shutting down, in recovery
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionFailureError,
    asyncpg.exceptions.InterfaceError,  # includes "connection is closed"
    # A pooled connection that a server's death left mid-operation ("another operation is in progress");
    # it is closed when released (Database.release), so a retry gets a fresh one.
    asyncpg.exceptions.InternalClientError,
)
_NATS_GONE = (
    nats.errors.ConnectionClosedError,
    nats.errors.NoServersError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
)

# A socket that cannot connect; ENOENT is a PostgreSQL unix socket that is not there while it restarts.
_UNREACHABLE = {errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT,
                errno.EPIPE, errno.ENOENT}


def outage(error: BaseException, where: str | None = None) -> Unavailable | None:
    """The `unavailable` error a caller should get when `error` means a server cannot be reached, else None.

    It names the server (NATS, PostgreSQL) and, given `where` (`review`), the process that could not reach it.
    """
    seen_by = f" from the {where} service" if where else ""
    for cause in _chain(error):
        if isinstance(cause, Unavailable):
            return cause
        if isinstance(cause, _NATS_GONE):
            return Unavailable(f"NATS (the message bus) is unreachable{seen_by}", hint=NATS_HINT,
                               details=_details("nats", where))
        if isinstance(cause, (PostgreSQLUnreachable, *_DATABASE_GONE)) or _disconnect(cause):
            return Unavailable(f"PostgreSQL is unreachable{seen_by}", hint=DATABASE_HINT,
                               details=_details("postgresql", where))
        if isinstance(cause, sa_exc.TimeoutError):  # no pooled connection came free in time
            return Unavailable(f"PostgreSQL is overloaded: no connection came free in time{seen_by}",
                               hint="retry shortly", details=_details("postgresql", where))
        if isinstance(cause, (ConnectionError, TimeoutError, socket.gaierror)) or (
                isinstance(cause, OSError) and cause.errno in _UNREACHABLE):
            return Unavailable(f"a server the call needs is unreachable{seen_by} ({type(cause).__name__})",
                               hint=DATABASE_HINT, details=_details("unknown", where))
    return None


def stale_connection(error: BaseException) -> bool:
    """`error` came from a pooled PostgreSQL connection that had died (with its server): a read that failed so
    ran nothing the server kept, and runs again on a fresh connection."""
    return any(isinstance(cause, _STALE) or _disconnect(cause) for cause in _chain(error))


# A connection that was open and is not any more: asyncpg refuses to use a closed one ("connection is
# closed") or finds it cut off mid-statement.
_STALE = (asyncpg.exceptions.InterfaceError, asyncpg.exceptions.ConnectionDoesNotExistError)


def _details(dependency: str, where: str | None) -> dict[str, str]:
    return {"dependency": dependency, **({"service": where} if where else {})}


def _disconnect(error: BaseException) -> bool:
    return isinstance(error, sa_exc.DBAPIError) and bool(error.connection_invalidated)


def _chain(error: BaseException):  # noqa: ANN202 - a generator of the error and its causes
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)  # SQLAlchemy wraps the driver's error
        if isinstance(orig, BaseException):
            yield orig
        current = current.__cause__ or current.__context__
