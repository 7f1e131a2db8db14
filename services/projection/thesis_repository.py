"""Plain queries behind get_company_context: the thesis-delta service's tables, read, never written."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.tables import companies, delta_operations, source_files, thesis_claims


class SqlTheses:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def companies(self, limit: int) -> tuple[list[Any], int]:
        total = (await self.connection.execute(select(func.count()).select_from(companies))).scalar_one()
        rows = await self.connection.execute(
            select(companies.c.company_id, companies.c.ticker, companies.c.name)
            .order_by(companies.c.ticker).limit(limit))
        return list(rows), total

    async def source_file_page(self, company_id: str, source_file_id: str, start: int, size: int) -> Any:
        """One page of a source file's text (`size` characters from offset `start`), with its whole length."""
        return (await self.connection.execute(
            select(source_files.c.source_file_id, source_files.c.title, source_files.c.url,
                   func.length(source_files.c.text).label("length"),
                   func.substr(source_files.c.text, start + 1, size).label("page"))
            .where(source_files.c.company_id == company_id, source_files.c.source_file_id == source_file_id)
        )).first()

    async def company(self, company_id: str | None, ticker: str | None) -> Any:
        query = select(companies)
        query = query.where(companies.c.company_id == company_id) if company_id else query.where(
            companies.c.ticker == ticker)
        return (await self.connection.execute(query)).first()


    async def thesis_claims_of(self, company_id: str) -> list[Any]:
        rows = await self.connection.execute(
            select(thesis_claims).where(thesis_claims.c.company_id == company_id)
            .order_by(thesis_claims.c.section, thesis_claims.c.created_at, thesis_claims.c.claim_id)
        )
        return list(rows)


    async def source_files_of(self, company_id: str) -> list[Any]:
        rows = await self.connection.execute(
            select(source_files.c.source_file_id, source_files.c.title, source_files.c.url, source_files.c.created_at,
                   func.length(source_files.c.text).label("length"))
            .where(source_files.c.company_id == company_id)
            .order_by(source_files.c.created_at.desc())
        )
        return list(rows)


    async def deltas_of(self, company_id: str, statuses: tuple[str, ...], newest_by: str,
                        limit: int) -> tuple[list[Any], int]:
        condition = (delta_operations.c.company_id == company_id) & delta_operations.c.status.in_(statuses)
        total = (await self.connection.execute(select(func.count()).select_from(delta_operations).where(condition))).scalar_one()
        rows = await self.connection.execute(
            select(delta_operations).where(condition)
            .order_by(getattr(delta_operations.c, newest_by).desc().nulls_last()).limit(limit)
        )
        return list(rows), total
