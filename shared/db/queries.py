"""Reads of the canonical ledger that more than one service needs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Result, Select, Table, and_, exists, or_, select, text
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.history_tables import rating_history
from shared.db.tables import (
    claims,
    closed_proposals,
    item_decisions,
    merge_groups,
    proposal_items,
    proposals,
    relations,
    sources,
)
from shared.ledger import VERDICT, ClaimFact, LedgerFacts, References


def active_at(table: Table, revision: int) -> ColumnElement[bool]:
    """Records installed by `revision` that had not yet left the ledger then: the ledger as of that revision."""
    return and_(table.c.revision <= revision, or_(table.c.ended_revision.is_(None), table.c.ended_revision > revision))


def latest_ratings(case_id: str, revision: int) -> Select:
    """Each claim's rating as it stood at `revision` (its latest re-rating by then): case_id, claim_id, health,
    lost."""
    return (select(rating_history.c.case_id, rating_history.c.claim_id, rating_history.c.health,
                   rating_history.c.lost)
            .where(rating_history.c.case_id == case_id, rating_history.c.revision <= revision)
            .ext(distinct_on(rating_history.c.claim_id))
            .order_by(rating_history.c.claim_id, rating_history.c.revision.desc()))


class SqlLedgerReader:
    """The ledger's facts for the rules (staging and review both check items against them)."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def facts(self, case_id: str, revision: int, refs: References) -> LedgerFacts:
        return await ledger_facts(self.connection, case_id, revision, refs)


async def ledger_facts(connection: AsyncConnection, case_id: str, revision: int, refs: References) -> LedgerFacts:
    """The ledger's facts about exactly the ids `refs` names (any status), plus the active verdict."""
    facts = LedgerFacts(revision=revision)
    if refs.sources:
        rows = await connection.execute(
            select(sources.c.source_id, sources.c.status).where(
                sources.c.case_id == case_id, sources.c.source_id.in_(refs.sources)
            )
        )
        facts.sources = {r.source_id: r.status for r in rows}
    claim_filter = claims.c.claim_id.in_(refs.claims) if refs.claims else None
    verdict_filter = (claims.c.kind == VERDICT) & (claims.c.status == "active")
    rows = await connection.execute(
        select(claims.c.claim_id, claims.c.kind, claims.c.status).where(
            claims.c.case_id == case_id,
            (claim_filter | verdict_filter) if claim_filter is not None else verdict_filter,
        )
    )
    facts.claims = {r.claim_id: ClaimFact(r.kind, r.status) for r in rows}
    if refs.relations:
        rows = await connection.execute(
            select(relations.c.relation_id).where(
                relations.c.case_id == case_id, relations.c.relation_id.in_(refs.relations)
            )
        )
        facts.relations = {r.relation_id for r in rows}
    if refs.groups:
        rows = await connection.execute(
            select(merge_groups.c.group_id).where(
                merge_groups.c.case_id == case_id, merge_groups.c.group_id.in_(refs.groups)
            )
        )
        facts.groups = {r.group_id for r in rows}
    return facts


def dicts(result: Result[Any]) -> list[dict[str, Any]]:
    """A result's rows as plain dicts: its keys are read once (`dict(row_mapping)` builds them for every row,
    three times the cost of the rows themselves at a few thousand)."""
    keys = list(result.keys())
    return [dict(zip(keys, row, strict=True)) for row in result]


def still_open() -> Any:
    """Of `proposals`, those with an undecided item: staged and not yet closed by review."""
    return ~exists().where(closed_proposals.c.proposal_id == proposals.c.proposal_id)


def items_with_outcomes():  # noqa: ANN201
    """Each proposal item beside its outcome, if it has been decided (review writes outcomes, all read them)."""
    return proposal_items.outerjoin(
        item_decisions,
        and_(item_decisions.c.proposal_id == proposal_items.c.proposal_id,
             item_decisions.c.item_id == proposal_items.c.item_id),
    )


# Stage calls hold a case's lock shared, decisions exclusively. Advisory locks queue fairly: once a
# decision waits, new stage calls wait behind it, so a steady stream of agents cannot starve a reviewer
# (row locks would: PostgreSQL grants a new FOR SHARE beside a granted one even while FOR UPDATE waits).
CASE_LOCK_CLASS = 7271


async def lock_case_shared(connection: AsyncConnection, case_id: str) -> None:
    await connection.execute(
        text("SELECT pg_advisory_xact_lock_shared(:lock_class, hashtext(:case_id))"),
        {"lock_class": CASE_LOCK_CLASS, "case_id": case_id},
    )


async def lock_case_exclusive(connection: AsyncConnection, case_id: str) -> None:
    await connection.execute(
        text("SELECT pg_advisory_xact_lock(:lock_class, hashtext(:case_id))"),
        {"lock_class": CASE_LOCK_CLASS, "case_id": case_id},
    )


async def ids_between(connection: AsyncConnection, column: ColumnElement[Any], low: str, high: str,
                      limit: int, *within: ColumnElement[bool]) -> list[str]:
    """Up to `limit` values of the id `column` from `low` to `high`, in order (the ids a prefix covers: an index
    range), among the rows `within` selects when given."""
    query = select(column).where(column.between(low, high), *within).order_by(column).limit(limit)
    return [str(value) for value in (await connection.execute(query)).scalars()]
