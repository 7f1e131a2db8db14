"""The unit of work a use case runs in: its repositories, the events it emits, and one explicit commit.

A use case sees only this interface and the repositories a service's unit of work adds to it:

    async with uow:                      # one transaction
        ...                              # repositories and domain rules
        uow.emit(case(case_id), data, revision=r)   # an outbox row, written in the same transaction
        await uow.commit()               # without it, everything rolls back

`async with uow.read():` opens a consistent read-only snapshot instead. The real unit of work wraps a
SQLAlchemy connection (SqlUnitOfWork); tests run use cases against in-memory ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from shared import outbox
from shared.db.session import Database
from shared.events import Aggregate, Event, EventData, Origin, new_event
from shared.service import Meta, ServiceContext, origin


class UnitOfWork(ABC):
    """What every use case may ask of its unit of work, whatever stores it."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.events: list[Event] = []
        self.committed_events: list[Event] = []  # what its commits stored, for the relay's wake-up
        self.failure: BaseException | None = None
        self._committed = False

    def now(self) -> datetime:
        return datetime.now(UTC)

    def emit(self, aggregate: Aggregate, data: EventData, *, revision: int | None = None) -> Event:
        """Queue an event of this change; it is stored with the change, at commit, or not at all."""
        event = new_event(self.origin, aggregate, data, revision=revision)
        outbox.check_size(event)
        self.events.append(event)
        return event

    async def __aenter__(self) -> UnitOfWork:
        self.events = []
        self._committed = False
        self.failure = None
        await self._begin()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if not self._committed:
            self.failure = exc[1]  # what ended the block early, if anything: a store may need to know
            await self._rollback()

    async def commit(self) -> Any:
        """Make the change durable with its events; what it returns is the unit of work's to say."""
        result = await self._commit(list(self.events))
        self._committed = True
        self.committed_events += self.events
        return result

    def read(self) -> AbstractAsyncContextManager[UnitOfWork]:
        """A consistent read-only snapshot; nothing is committed."""
        return self._reading()

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[UnitOfWork]:
        await self._begin(read_only=True)
        try:
            yield self
        finally:
            await self._rollback()

    @abstractmethod
    async def _begin(self, read_only: bool = False) -> None:
        """Open the transaction (or snapshot) and bind the repositories to it."""

    @abstractmethod
    async def _commit(self, events: list[Event]) -> Any:
        """Store the events with the change and make both durable."""

    @abstractmethod
    async def _rollback(self) -> None:
        """Forget everything since _begin."""


class SqlUnitOfWork(UnitOfWork):
    """A unit of work over one PostgreSQL transaction; subclasses bind their repositories to it."""

    def __init__(self, db: Database, origin: Origin) -> None:
        super().__init__(origin)
        self.db = db
        self.connection: AsyncConnection | None = None

    def bind(self, connection: AsyncConnection) -> None:
        """Create the repositories on the transaction's connection."""

    @classmethod
    def of(cls, ctx: ServiceContext, meta: Meta) -> SqlUnitOfWork:
        """The unit of work of one message a service handles."""
        return cls(ctx.db, origin(ctx, meta))

    async def _begin(self, read_only: bool = False) -> None:
        self.connection = await self.db.engine.connect()
        try:
            if read_only:
                await self.connection.execution_options(isolation_level="REPEATABLE READ")
            await self.connection.begin()
            self.bind(self.connection)
        except BaseException:
            await self.connection.close()
            raise

    async def _commit(self, events: list[Event]) -> None:
        assert self.connection is not None
        await outbox.append(self.connection, events)
        await self.connection.commit()
        await self.connection.close()
        self.connection = None

    async def _rollback(self) -> None:
        if self.connection is not None:
            try:
                await self.connection.rollback()
            finally:
                await self.connection.close()
                self.connection = None
