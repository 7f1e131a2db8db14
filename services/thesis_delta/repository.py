"""Persistence for theses — companies, claims and their history, source files, delta operations — in one
PostgreSQL unit of work, which also brings the deployment's secret, the operation TTL and the projection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import pydantic
from sqlalchemy import Select, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.thesis_delta.domain import Company, Operation, SourceFile, ThesisClaim, ThesisStep
from services.thesis_delta.ports import CompanyContexts, ThesisUnitOfWork
from shared.contracts import Actor, GetCompanyContextArgs, ToolRequest
from shared.db.queries import ids_between
from shared.db.session import Database
from shared.db.tables import companies, delta_operations, source_files, thesis_claim_history, thesis_claims
from shared.errors import Unavailable
from shared.events import Origin
from shared.logging import get_logger
from shared.messaging import ServiceClient
from shared.replies import CompanyContext
from shared.service import Meta, ServiceContext, origin
from shared.settings import Settings
from shared.subjects import Command
from shared.uow import SqlUnitOfWork

log = get_logger(__name__)

CONTEXT_TIMEOUT_SECONDS = 5.0
COMPANY = (companies.c.company_id, companies.c.ticker, companies.c.name, companies.c.thesis_revision)
CLAIM = (thesis_claims.c.claim_id, thesis_claims.c.text, thesis_claims.c.label, thesis_claims.c.section,
         thesis_claims.c.source_url, thesis_claims.c.status, thesis_claims.c.revision)
# The operation's progress: what save() writes; everything else is fixed when the preview stores it.
PROGRESS = ("status", "committed_at", "decided_at", "decided_by", "note", "revision_after")


class SqlThesisUnitOfWork(SqlUnitOfWork, ThesisUnitOfWork):
    def __init__(self, db: Database, origin: Origin, settings: Settings, contexts: CompanyContexts) -> None:
        super().__init__(db, origin)
        self.settings = settings
        self.operation_ttl = timedelta(seconds=settings.operation_ttl_seconds)
        self.contexts = contexts

    @property
    def secret(self) -> bytes:
        # Read when a token is made or checked, not per message: it may live in a file of the data dir.
        return self.settings.resolved_secret()

    def bind(self, connection: AsyncConnection) -> None:
        self.companies = SqlCompanies(connection)
        self.claims = SqlClaims(connection)
        self.source_files = SqlSourceFiles(connection)
        self.operations = SqlOperations(connection)

    @classmethod
    def of(cls, ctx: ServiceContext, meta: Meta) -> SqlThesisUnitOfWork:
        return cls(ctx.db, origin(ctx, meta), ctx.settings, NatsCompanyContexts(ctx.client, meta))


class NatsCompanyContexts:
    """get_company_context, asked of the projection (which owns it) over NATS, and read by its contract."""

    def __init__(self, client: ServiceClient | None, meta: Meta) -> None:
        self.client = client
        self.meta = meta

    async def of(self, company_id: str, actor: Actor) -> CompanyContext:
        request = ToolRequest[GetCompanyContextArgs](actor=actor, args=GetCompanyContextArgs(company_id=company_id))
        reply = await self.client.call(Command.GET_COMPANY_CONTEXT, request, correlation_id=self.meta.correlation_id,
                                       traceparent=self.meta.traceparent, timeout=CONTEXT_TIMEOUT_SECONDS)
        try:
            return CompanyContext.model_validate(reply)
        except pydantic.ValidationError as broken:
            # A projection of another version (a rolling update): the preview still answers, without context.
            log.error("company_context_unreadable", errors=broken.error_count())
            raise Unavailable("the projection answered with a company context this service cannot read",
                              hint="call get_company_context for the thesis around it") from broken


class SqlRepository:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def first(self, query: Select, *, lock: bool = False) -> Any:
        return (await self.connection.execute(query.with_for_update() if lock else query)).first()


class SqlCompanies(SqlRepository):
    async def get(self, company_id: str, *, lock: bool = False) -> Company | None:
        row = await self.first(select(*COMPANY).where(companies.c.company_id == company_id), lock=lock)
        return Company(*row) if row else None

    async def by_ticker(self, ticker: str) -> Company | None:
        row = await self.first(select(*COMPANY).where(companies.c.ticker == ticker))
        return Company(*row) if row else None

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        return await ids_between(self.connection, companies.c.company_id, low, high, limit)

    async def add(self, company: Company, created_by: str) -> bool:
        row = await self.connection.execute(
            pg_insert(companies).values(**asdict(company), created_by=created_by).on_conflict_do_nothing()
            .returning(companies.c.company_id)
        )
        return row.scalar_one_or_none() is not None

    async def bump(self, company_id: str) -> int:
        row = await self.connection.execute(
            update(companies).where(companies.c.company_id == company_id)
            .values(thesis_revision=companies.c.thesis_revision + 1).returning(companies.c.thesis_revision)
        )
        return row.scalar_one()

    async def listed(self, ticker: str | None) -> list[tuple[Company, int]]:
        committed = (
            select(delta_operations.c.company_id, func.count().label("committed"))
            .where(delta_operations.c.status == "committed")
            .group_by(delta_operations.c.company_id)
            .subquery()
        )
        query = select(*COMPANY, func.coalesce(committed.c.committed, 0)).select_from(
            companies.outerjoin(committed, committed.c.company_id == companies.c.company_id)
        )
        if ticker:
            query = query.where(companies.c.ticker == ticker.upper())
        rows = await self.connection.execute(query.order_by(companies.c.ticker))
        return [(Company(*row[:-1]), row[-1]) for row in rows]


def _columns(claim: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": claim["text"], "label": claim["label"], "section": claim["section"],
            "source_url": claim.get("sourceUrl")}


class SqlClaims(SqlRepository):
    async def of(self, company_id: str) -> dict[str, ThesisClaim]:
        rows = await self.connection.execute(
            select(*CLAIM).where(thesis_claims.c.company_id == company_id).order_by(thesis_claims.c.created_at)
        )
        return {row.claim_id: ThesisClaim(*row) for row in rows}

    async def by_ids(self, company_id: str, claim_ids: Sequence[str]) -> list[ThesisClaim]:
        if not claim_ids:
            return []
        rows = await self.connection.execute(
            select(*CLAIM).where(thesis_claims.c.company_id == company_id, thesis_claims.c.claim_id.in_(claim_ids))
        )
        found = {row.claim_id: ThesisClaim(*row) for row in rows}
        return [found[claim_id] for claim_id in claim_ids if claim_id in found]

    async def add(self, step: ThesisStep, claim_id: str, claim: Mapping[str, Any]) -> None:
        await self.connection.execute(
            insert(thesis_claims).values(claim_id=claim_id, company_id=step.company_id, **_columns(claim),
                                         revision=step.revision, origin_operation_id=step.operation_id,
                                         created_at=step.at, updated_at=step.at)
        )
        await self._history(step, claim_id, "add", None, {**claim, "claimId": claim_id})

    async def update(self, step: ThesisStep, claim_id: str, before: Mapping[str, Any],
                     after: Mapping[str, Any]) -> None:
        await self._change(step, claim_id, **_columns(after))
        await self._history(step, claim_id, "update", before, after)

    async def retire(self, step: ThesisStep, claim_id: str, before: Mapping[str, Any]) -> None:
        await self._change(step, claim_id, status="retired", retired_at=step.at, retired_by=step.actor)
        await self._history(step, claim_id, "retire", before, None)

    async def _change(self, step: ThesisStep, claim_id: str, **values: Any) -> None:
        await self.connection.execute(
            update(thesis_claims).where(thesis_claims.c.claim_id == claim_id)
            .values(**values, revision=step.revision, updated_at=step.at)
        )

    async def _history(self, step: ThesisStep, claim_id: str, action: str, before: Mapping[str, Any] | None,
                       after: Mapping[str, Any] | None) -> None:
        await self.connection.execute(
            insert(thesis_claim_history).values(
                claim_id=claim_id, company_id=step.company_id, revision=step.revision, action=action,
                before=before, after=after, actor=step.actor, operation_id=step.operation_id, at=step.at,
            )
        )


class SqlSourceFiles(SqlRepository):
    async def get(self, source_file_id: str) -> SourceFile | None:
        query = select(source_files.c.source_file_id, source_files.c.company_id, source_files.c.title,
                       source_files.c.url).where(source_files.c.source_file_id == source_file_id)
        row = await self.first(query)
        return SourceFile(*row) if row else None

    async def add(self, source: SourceFile, text: str, created_by: str) -> None:
        await self.connection.execute(
            insert(source_files).values(source_file_id=source.source_file_id, company_id=source.company_id,
                                        title=source.title, url=source.url, text=text, created_by=created_by)
        )

    async def of(self, company_id: str) -> list[SourceFile]:
        rows = await self.connection.execute(
            select(source_files.c.source_file_id, source_files.c.company_id, source_files.c.title,
                   source_files.c.url, func.length(source_files.c.text))
            .where(source_files.c.company_id == company_id)
            .order_by(source_files.c.created_at)
        )
        return [SourceFile(*row) for row in rows]


class SqlOperations(SqlRepository):
    async def get(self, operation_id: str, *, lock: bool = False) -> Operation | None:
        return _operation(await self.first(
            select(delta_operations).where(delta_operations.c.operation_id == operation_id), lock=lock))

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        return await ids_between(self.connection, delta_operations.c.operation_id, low, high, limit)

    async def by_key(self, company_id: str, caller: str, key: str) -> Operation | None:
        return _operation(await self.first(select(delta_operations).where(
            delta_operations.c.company_id == company_id,
            delta_operations.c.caller == caller,
            delta_operations.c.idempotency_key == key,
        )))

    async def add(self, operation: Operation) -> bool:
        row = await self.connection.execute(
            pg_insert(delta_operations)
            .values(**asdict(operation))
            .on_conflict_do_nothing(index_elements=["company_id", "caller", "idempotency_key"])
            .returning(delta_operations.c.operation_id)
        )
        return row.scalar_one_or_none() is not None

    async def save(self, operation: Operation) -> None:
        await self.connection.execute(
            update(delta_operations).where(delta_operations.c.operation_id == operation.operation_id)
            .values({name: getattr(operation, name) for name in PROGRESS})
        )

    async def of(self, company_id: str, status: str | None, limit: int = 100) -> list[Operation]:
        query = select(delta_operations).where(delta_operations.c.company_id == company_id)
        if status:
            query = query.where(delta_operations.c.status == status)
        rows = await self.connection.execute(query.order_by(delta_operations.c.created_at.desc()).limit(limit))
        return [_operation(row) for row in rows]


def _operation(row: Any) -> Operation | None:
    return Operation(**row._mapping) if row else None
