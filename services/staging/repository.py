"""Persistence for staging: the case pin and proposal rows, in one PostgreSQL unit of work."""

from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from services.staging.domain import Proposal
from services.staging.ports import StagingUnitOfWork
from shared.db.queries import SqlLedgerReader, lock_case_shared
from shared.db.tables import cases, proposal_items, proposals
from shared.uow import SqlUnitOfWork


class SqlCasePins:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def pin(self, case_id: str) -> int | None:
        """The case's revision, with the case locked shared: no decision can bump it until this call ends."""
        await lock_case_shared(self.connection, case_id)
        row = await self.connection.execute(select(cases.c.revision).where(cases.c.case_id == case_id))
        return row.scalar_one_or_none()


class SqlProposals:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def add(self, proposal: Proposal) -> None:
        await self.connection.execute(
            insert(proposals).values(
                proposal_id=proposal.proposal_id,
                case_id=proposal.case_id,
                kind=proposal.kind,
                pinned_revision=proposal.pinned_revision,
                agent_name=proposal.agent_name,
                token_id=proposal.token_id,
                correlation_id=proposal.correlation_id,
                item_count=len(proposal.items),
            )
        )
        await self.connection.execute(
            insert(proposal_items),
            [
                {"proposal_id": proposal.proposal_id, "item_id": item_id, "position": i, "payload": payload}
                for i, (item_id, payload) in enumerate(proposal.items)
            ],
        )


class SqlStagingUnitOfWork(SqlUnitOfWork, StagingUnitOfWork):
    def bind(self, connection: AsyncConnection) -> None:
        self.cases = SqlCasePins(connection)
        self.ledger = SqlLedgerReader(connection)
        self.proposals = SqlProposals(connection)

