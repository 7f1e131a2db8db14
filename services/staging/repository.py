"""Persistence for staging: the case pin, the agent's discovered case, and proposal rows."""

from __future__ import annotations

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from services.staging.domain import Proposal
from shared.db.queries import lock_case_shared
from shared.db.tables import agent_discoveries, cases, proposal_items, proposals


async def pin_case(connection: AsyncConnection, case_id: str) -> int | None:
    """The case's revision, with the case locked shared: no decision can bump it until this call ends."""
    await lock_case_shared(connection, case_id)
    row = await connection.execute(select(cases.c.revision).where(cases.c.case_id == case_id))
    return row.scalar_one_or_none()


async def discovered_case(connection: AsyncConnection, agent_name: str) -> str | None:
    row = await connection.execute(
        select(agent_discoveries.c.case_id).where(agent_discoveries.c.agent_name == agent_name)
    )
    return row.scalar_one_or_none()


async def insert_proposal(connection: AsyncConnection, proposal: Proposal) -> None:
    await connection.execute(
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
    await connection.execute(
        insert(proposal_items),
        [
            {"proposal_id": proposal.proposal_id, "item_id": item_id, "position": i, "payload": payload}
            for i, (item_id, payload) in enumerate(proposal.items)
        ],
    )
