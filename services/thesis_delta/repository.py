"""Persistence for theses: companies, claims and their history, source files, delta operations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.thesis_delta.domain import SourceFile, ThesisClaim
from shared.db.tables import (
    companies,
    delta_operations,
    source_files,
    thesis_claim_history,
    thesis_claims,
)


async def company(connection: AsyncConnection, company_id: str, *, lock: bool = False) -> Any:
    query = select(companies).where(companies.c.company_id == company_id)
    if lock:
        query = query.with_for_update()
    return (await connection.execute(query)).first()


async def company_by_ticker(connection: AsyncConnection, ticker: str) -> Any:
    return (await connection.execute(select(companies).where(companies.c.ticker == ticker))).first()


async def insert_company(connection: AsyncConnection, company_id: str, ticker: str, name: str, actor: str) -> bool:
    row = await connection.execute(
        pg_insert(companies)
        .values(company_id=company_id, ticker=ticker, name=name, created_by=actor)
        .on_conflict_do_nothing()
        .returning(companies.c.company_id)
    )
    return row.scalar_one_or_none() is not None


async def bump_revision(connection: AsyncConnection, company_id: str) -> int:
    row = await connection.execute(
        update(companies)
        .where(companies.c.company_id == company_id)
        .values(thesis_revision=companies.c.thesis_revision + 1)
        .returning(companies.c.thesis_revision)
    )
    return row.scalar_one()


async def claims_of(connection: AsyncConnection, company_id: str) -> dict[str, ThesisClaim]:
    rows = await connection.execute(
        select(thesis_claims).where(thesis_claims.c.company_id == company_id).order_by(thesis_claims.c.created_at)
    )
    return {
        r.claim_id: ThesisClaim(r.claim_id, r.text, r.label, r.section, r.source_url, r.status) for r in rows
    }


async def claims_by_ids(connection: AsyncConnection, company_id: str, claim_ids: list[str]) -> list[dict[str, Any]]:
    """The company's claims with these ids as they read now, in the order of `claim_ids`."""
    if not claim_ids:
        return []
    rows = await connection.execute(
        select(thesis_claims).where(thesis_claims.c.company_id == company_id,
                                    thesis_claims.c.claim_id.in_(claim_ids))
    )
    found = {
        r.claim_id: {"claimId": r.claim_id, "text": r.text, "label": r.label, "section": r.section,
                     "sourceUrl": r.source_url, "status": r.status, "revision": r.revision}
        for r in rows
    }
    return [found[claim_id] for claim_id in claim_ids if claim_id in found]


async def source_file(connection: AsyncConnection, source_file_id: str) -> SourceFile | None:
    row = (
        await connection.execute(select(source_files).where(source_files.c.source_file_id == source_file_id))
    ).first()
    return SourceFile(row.source_file_id, row.company_id, row.title, row.url) if row else None


async def insert_source_file(connection: AsyncConnection, values: dict[str, Any]) -> None:
    await connection.execute(insert(source_files).values(**values))


async def insert_claim(
    connection: AsyncConnection,
    *,
    claim_id: str,
    company_id: str,
    claim: dict[str, Any],
    revision: int,
    actor: str,
    operation_id: str | None,
    at: datetime,
) -> None:
    await connection.execute(
        insert(thesis_claims).values(
            claim_id=claim_id,
            company_id=company_id,
            text=claim["text"],
            label=claim["label"],
            section=claim["section"],
            source_url=claim.get("sourceUrl"),
            revision=revision,
            origin_operation_id=operation_id,
            created_at=at,
            updated_at=at,
        )
    )
    await history(connection, claim_id, company_id, revision, "add", None, {**claim, "claimId": claim_id},
                  actor, operation_id, at)


async def update_claim(
    connection: AsyncConnection, claim_id: str, after: dict[str, Any], revision: int, at: datetime
) -> None:
    await connection.execute(
        update(thesis_claims)
        .where(thesis_claims.c.claim_id == claim_id)
        .values(
            text=after["text"],
            label=after["label"],
            section=after["section"],
            source_url=after.get("sourceUrl"),
            revision=revision,
            updated_at=at,
        )
    )


async def retire_claim(connection: AsyncConnection, claim_id: str, actor: str, revision: int, at: datetime) -> None:
    await connection.execute(
        update(thesis_claims)
        .where(thesis_claims.c.claim_id == claim_id)
        .values(status="retired", retired_at=at, retired_by=actor, revision=revision, updated_at=at)
    )


async def history(
    connection: AsyncConnection,
    claim_id: str,
    company_id: str,
    revision: int,
    action: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    actor: str,
    operation_id: str | None,
    at: datetime,
) -> None:
    await connection.execute(
        insert(thesis_claim_history).values(
            claim_id=claim_id,
            company_id=company_id,
            revision=revision,
            action=action,
            before=before,
            after=after,
            actor=actor,
            operation_id=operation_id,
            at=at,
        )
    )


async def insert_operation(connection: AsyncConnection, values: dict[str, Any]) -> bool:
    """Store a new operation unless the (company, caller, key) triple is taken; True when stored."""
    row = await connection.execute(
        pg_insert(delta_operations)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["company_id", "caller", "idempotency_key"])
        .returning(delta_operations.c.operation_id)
    )
    return row.scalar_one_or_none() is not None


async def operation_by_key(connection: AsyncConnection, company_id: str, caller: str, key: str) -> Any:
    return (
        await connection.execute(
            select(delta_operations).where(
                delta_operations.c.company_id == company_id,
                delta_operations.c.caller == caller,
                delta_operations.c.idempotency_key == key,
            )
        )
    ).first()


async def operation(connection: AsyncConnection, operation_id: str, *, lock: bool = False) -> Any:
    query = select(delta_operations).where(delta_operations.c.operation_id == operation_id)
    if lock:
        query = query.with_for_update()
    return (await connection.execute(query)).first()


async def set_operation(connection: AsyncConnection, operation_id: str, **values: Any) -> None:
    await connection.execute(
        update(delta_operations).where(delta_operations.c.operation_id == operation_id).values(**values)
    )


async def operations(connection: AsyncConnection, company_id: str, status: str | None, limit: int = 100) -> list:
    query = select(delta_operations).where(delta_operations.c.company_id == company_id)
    if status:
        query = query.where(delta_operations.c.status == status)
    rows = await connection.execute(query.order_by(delta_operations.c.created_at.desc()).limit(limit))
    return list(rows)


async def source_files_of(connection: AsyncConnection, company_id: str) -> list:
    rows = await connection.execute(
        select(source_files.c.source_file_id, source_files.c.title, source_files.c.url, source_files.c.created_at,
               func.length(source_files.c.text).label("length"))
        .where(source_files.c.company_id == company_id)
        .order_by(source_files.c.created_at)
    )
    return list(rows)


async def companies_with_counts(connection: AsyncConnection, ticker: str | None) -> list:
    committed = (
        select(delta_operations.c.company_id, func.count().label("committed"))
        .where(delta_operations.c.status == "committed")
        .group_by(delta_operations.c.company_id)
        .subquery()
    )
    query = select(companies, func.coalesce(committed.c.committed, 0).label("committed")).select_from(
        companies.outerjoin(committed, committed.c.company_id == companies.c.company_id)
    )
    if ticker:
        query = query.where(companies.c.ticker == ticker.upper())
    return list(await connection.execute(query.order_by(companies.c.ticker)))
