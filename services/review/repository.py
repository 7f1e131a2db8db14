"""Persistence for review: cases, proposals as reviewers see them, decisions — one PostgreSQL unit of work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.review import duplicate_views
from services.review.domain import Decision, StoredItem, StoredProposal
from services.review.history_repository import SqlHistory
from services.review.ledger_repository import SqlLedger
from services.review.ports import ReviewUnitOfWork
from services.review.queue_repository import SqlQueue
from services.review.resolutions import SqlResolutions
from shared.db.queries import dicts, ids_between, items_with_outcomes, lock_case_exclusive, still_open
from shared.db.review_tables import review_check_flags
from shared.db.tables import (
    case_focus,
    cases,
    closed_proposals,
    decisions,
    guidance_notes,
    item_decisions,
    proposal_items,
    proposals,
)
from shared.review_checks import Flag
from shared.uow import SqlUnitOfWork


class SqlReviewUnitOfWork(SqlUnitOfWork, ReviewUnitOfWork):
    def bind(self, connection: AsyncConnection) -> None:
        self.cases = SqlCases(connection)
        self.proposals = SqlProposals(connection)
        self.ledger = SqlLedger(connection)
        self.history = SqlHistory(connection)
        self.queue = SqlQueue(connection)
        self.resolutions = SqlResolutions(connection)



class SqlCases:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def lock(self, case_id: str) -> int | None:
        """The case's revision, locked: decisions on one case apply one at a time, and no stage call runs."""
        await lock_case_exclusive(self.connection, case_id)
        row = await self.connection.execute(
            select(cases.c.revision).where(cases.c.case_id == case_id).with_for_update()
        )
        return row.scalar_one_or_none()

    async def bump(self, case_id: str) -> int:
        row = await self.connection.execute(
            update(cases).where(cases.c.case_id == case_id).values(revision=cases.c.revision + 1)
            .returning(cases.c.revision)
        )
        return row.scalar_one()

    async def add(self, case_id: str, title: str, question: str, created_by: str) -> bool:
        row = await self.connection.execute(
            pg_insert(cases)
            .values(case_id=case_id, title=title, question=question, created_by=created_by)
            .on_conflict_do_nothing(index_elements=[cases.c.case_id])
            .returning(cases.c.case_id)
        )
        return row.scalar_one_or_none() is not None

    async def get(self, case_id: str) -> dict[str, Any] | None:
        row = (await self.connection.execute(select(cases).where(cases.c.case_id == case_id))).mappings().first()
        return dict(row) if row else None

    async def focus(self, case_id: str) -> str | None:
        row = await self.connection.execute(select(case_focus.c.focus).where(case_focus.c.case_id == case_id))
        return row.scalar_one_or_none()

    async def add_guidance(self, note_id: str, case_id: str, author: str, text: str) -> None:
        await self.connection.execute(
            insert(guidance_notes).values(note_id=note_id, case_id=case_id, author=author, text=text)
        )

    async def all(self) -> list[dict[str, Any]]:
        pending = (
            select(proposals.c.case_id, func.count().label("pending"))
            .where(still_open())
            .group_by(proposals.c.case_id)
            .subquery()
        )
        rows = await self.connection.execute(
            select(cases, func.coalesce(pending.c.pending, 0).label("pending_proposals"))
            .select_from(cases.outerjoin(pending, pending.c.case_id == cases.c.case_id))
            .order_by(cases.c.created_at, cases.c.case_id)
        )
        return dicts(rows)


def _items_query(proposal_ids: Sequence[str]):  # noqa: ANN202
    return (
        select(
            proposal_items.c.proposal_id,
            proposal_items.c.item_id,
            proposal_items.c.position,
            proposal_items.c.payload,
            item_decisions.c.outcome,
            item_decisions.c.decision_id,
            decisions.c.reviewer,
            decisions.c.decided_at,
        )
        .select_from(
            items_with_outcomes().outerjoin(decisions, decisions.c.decision_id == item_decisions.c.decision_id)
        )
        .where(proposal_items.c.proposal_id.in_(proposal_ids))
        .order_by(proposal_items.c.proposal_id, proposal_items.c.position)
    )


def _proposal(row: Any, items: list[StoredItem]) -> StoredProposal:
    return StoredProposal(
        proposal_id=row.proposal_id,
        case_id=row.case_id,
        kind=row.kind,
        pinned_revision=row.pinned_revision,
        agent_name=row.agent_name,
        token_id=row.token_id,
        correlation_id=row.correlation_id,
        created_at=row.created_at,
        items=items,
        staged_revision=row.staged_revision,
    )


async def _with_items(connection: AsyncConnection, rows: Sequence[Any]) -> list[StoredProposal]:
    if not rows:
        return []
    by_proposal: dict[str, list[StoredItem]] = {row.proposal_id: [] for row in rows}
    for item in await connection.execute(_items_query(list(by_proposal))):
        by_proposal[item.proposal_id].append(StoredItem(
            item_id=item.item_id, position=item.position, payload=item.payload, outcome=item.outcome,
            decision_id=item.decision_id, decided_by=item.reviewer, decided_at=item.decided_at))
    return [_proposal(row, by_proposal[row.proposal_id]) for row in rows]



class SqlProposals:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def case_of(self, proposal_id: str) -> str | None:
        row = await self.connection.execute(select(proposals.c.case_id).where(proposals.c.proposal_id == proposal_id))
        return row.scalar_one_or_none()

    async def possible_duplicates(self, case_id: str, proposal_ids: Sequence[str]) -> duplicate_views.Flags:
        return await duplicate_views.possible_duplicates(self.connection, case_id, proposal_ids)

    async def staged_checks(self, proposal_ids: Sequence[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        found: dict[tuple[str, str], list[dict[str, Any]]] = {}
        if not proposal_ids:
            return found
        rows = await self.connection.execute(
            select(review_check_flags).where(review_check_flags.c.proposal_id.in_(list(proposal_ids)))
            .order_by(review_check_flags.c.proposal_id, review_check_flags.c.item_id,
                      (review_check_flags.c.severity != "warning"), review_check_flags.c.check))
        for r in rows:
            found.setdefault((str(r.proposal_id), r.item_id), []).append(Flag(
                r.item_id, r.check, r.severity, r.message).to_json())
        return found

    async def ids_between(self, low: str, high: str, limit: int) -> list[str]:
        return await ids_between(self.connection, proposals.c.proposal_id, low, high, limit)

    async def get(self, proposal_id: str) -> StoredProposal | None:
        rows = (await self.connection.execute(select(proposals).where(proposals.c.proposal_id == proposal_id))).all()
        found = await _with_items(self.connection, rows)
        return found[0] if found else None

    async def with_items(self, rows: Sequence[Any]) -> list[StoredProposal]:
        """The proposals of `rows` (of the proposals table), each with its items and their outcomes."""
        return await _with_items(self.connection, rows)

    async def listed(self, case_id: str, status: str, limit: int) -> list[StoredProposal]:
        """The case's pending proposals oldest first (`pending`), or all of them newest first."""
        query = select(proposals).where(proposals.c.case_id == case_id)
        if status == "pending":
            query = query.where(still_open()).order_by(proposals.c.created_at.asc(), proposals.c.proposal_id)
        else:
            query = query.order_by(proposals.c.created_at.desc(), proposals.c.proposal_id)
        rows = (await self.connection.execute(query.limit(limit))).all()
        return await _with_items(self.connection, rows)

    async def record(self, decision: Decision) -> None:
        await self.connection.execute(
            insert(decisions).values(
                decision_id=decision.decision_id,
                proposal_id=decision.proposal_id,
                case_id=decision.case_id,
                reviewer=decision.reviewer,
                note=decision.note,
                expected_revision=decision.expected_revision,
                revision_after=decision.revision_after,
                refused=decision.refused,
                correlation_id=decision.correlation_id,
                decided_at=decision.decided_at,
                request_digest=decision.request_digest,
            )
        )
        rows = [{"proposal_id": decision.proposal_id, "item_id": item_id, "decision_id": decision.decision_id,
                 "outcome": outcome} for item_id, outcome in decision.outcomes]
        if rows:
            await self.connection.execute(insert(item_decisions), rows)
        if decision.closes is not None:
            await self.connection.execute(insert(closed_proposals).values(
                proposal_id=decision.proposal_id, case_id=decision.case_id, status=decision.closes,
                closed_at=decision.decided_at))

    async def decision_by_digest(self, proposal_id: str, reviewer: str, digest: str) -> dict[str, Any] | None:
        found = (await self.connection.execute(
            select(decisions.c.decision_id).where(decisions.c.proposal_id == proposal_id,
                                                  decisions.c.reviewer == reviewer,
                                                  decisions.c.request_digest == digest)
        )).scalar_one_or_none()
        if found is None:
            return None
        every = (await self.decisions_of([proposal_id]))[proposal_id]
        return next(d for d in every if d["decision_id"] == found)

    async def decisions_of(self, proposal_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """Per proposal, its recorded decisions oldest first, each with its item outcomes in the proposal's order."""
        if not proposal_ids:
            return {}
        rows = (
            await self.connection.execute(
                select(decisions)
                .where(decisions.c.proposal_id.in_(proposal_ids))
                .order_by(decisions.c.decided_at, decisions.c.decision_id)
            )
        ).mappings().all()
        outcomes: dict[str, list[tuple[str, str]]] = {}
        for row in await self.connection.execute(
            select(item_decisions.c.decision_id, item_decisions.c.item_id, item_decisions.c.outcome)
            .select_from(
                item_decisions.join(
                    proposal_items,
                    and_(
                        proposal_items.c.proposal_id == item_decisions.c.proposal_id,
                        proposal_items.c.item_id == item_decisions.c.item_id,
                    ),
                )
            )
            .where(item_decisions.c.proposal_id.in_(proposal_ids))
            .order_by(proposal_items.c.position)
        ):
            outcomes.setdefault(row.decision_id, []).append((row.item_id, row.outcome))
        found: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            found.setdefault(row["proposal_id"], []).append({**row, "outcomes": outcomes.get(row["decision_id"], [])})
        return found


    async def proposals_of_decisions(self, decision_ids: Sequence[str]) -> dict[str, str]:
        """The proposal each decision decided."""
        if not decision_ids:
            return {}
        rows = await self.connection.execute(
            select(decisions.c.decision_id, decisions.c.proposal_id).where(decisions.c.decision_id.in_(decision_ids))
        )
        return {row.decision_id: row.proposal_id for row in rows}

    async def recently_decided(self, case_id: str, status: str, limit: int) -> list[StoredProposal]:
        """Fully decided proposals (status accepted, rejected or decided), the most recently decided first.

        `accepted` holds those with any item accepted, partially accepted ones too."""
        query = (
            select(proposals)
            .join(closed_proposals, closed_proposals.c.proposal_id == proposals.c.proposal_id)
            .where(closed_proposals.c.case_id == case_id)
        )
        if status == "accepted":
            query = query.where(closed_proposals.c.status.in_(("accepted", "partially_accepted")))
        elif status == "rejected":
            query = query.where(closed_proposals.c.status == "rejected")
        rows = (await self.connection.execute(
            query.order_by(closed_proposals.c.closed_at.desc(), proposals.c.proposal_id).limit(limit))).all()
        return await _with_items(self.connection, rows)
