"""Persistence for the reviewers' queue at scale: proposals filtered and paged by a keyset, the possible
duplicates staging flagged beside each item, and the records a "duplicate of X" decision may name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, literal_column, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.queries import items_with_outcomes, still_open
from shared.db.tables import (
    claims,
    closed_proposals,
    item_decisions,
    possible_duplicates,
    proposal_items,
    proposals,
    sources,
)

DECIDED = {"accepted": ("accepted", "partially_accepted"), "rejected": ("rejected",),
           "decided": ("accepted", "partially_accepted", "rejected")}


@dataclass(frozen=True)
class QueueQuery:
    """What a reviewer asked of the queue: the status and filters, the order by age and where the page starts."""

    case_id: str
    status: str
    limit: int
    newest_first: bool
    kind: str | None = None
    agent: str | None = None
    words: tuple[str, ...] = ()  # every word must appear in some text of the proposal's items (or an item id)
    duplicates: bool = False
    after: tuple[datetime, str] | None = None  # the (staged at, proposal id) of the last proposal already shown


def _like(word: str) -> str:
    """`word` as an ILIKE pattern matching it anywhere, its own wildcards taken literally."""
    return "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _mentions(word: str) -> Any:
    """Proposals with an item whose id, or any string anywhere in its payload, contains `word` (case-blind)."""
    pattern = _like(word)
    value = func.jsonb_path_query(proposal_items.c.payload, literal_column("'strict $.**'::jsonpath")) \
        .table_valued("value").alias("value")
    in_text = exists(select(1).select_from(value).where(
        func.jsonb_typeof(value.c.value) == "string",
        value.c.value.op("#>>")(literal_column("'{}'::text[]")).ilike(pattern, escape="\\")))
    return exists(select(1).select_from(proposal_items).where(
        proposal_items.c.proposal_id == proposals.c.proposal_id,
        or_(proposal_items.c.item_id.ilike(pattern, escape="\\"), in_text)).correlate(proposals))


def _open_duplicate() -> Any:
    """Proposals with an undecided item flagged as a possible duplicate of a record still canonical (or a pending
    item still undecided), or named as restated by a later item still undecided: what the queue calls possible
    duplicates (services/review/duplicate_views.py lists the same)."""
    flag, named, item = possible_duplicates, item_decisions.alias("named"), item_decisions.alias("item")
    undecided = ~exists().where(item.c.proposal_id == flag.c.proposal_id, item.c.item_id == flag.c.item_id)
    named_undecided = ~exists().where(named.c.proposal_id == flag.c.of_proposal_id, named.c.item_id == flag.c.of_id)
    # Nested two exists() deep, the record's check would not see the proposal and the flag without naming them: it
    # would take a record of that id active in any case.
    canonical = or_(
        and_(flag.c.of_kind == "claim", exists().where(
            claims.c.case_id == proposals.c.case_id, claims.c.claim_id == flag.c.of_id, claims.c.status == "active")
            .correlate(proposals, flag)),
        and_(flag.c.of_kind == "source", exists().where(
            sources.c.case_id == proposals.c.case_id, sources.c.source_id == flag.c.of_id,
            sources.c.status == "active").correlate(proposals, flag)))
    resembles = exists().where(flag.c.proposal_id == proposals.c.proposal_id, undecided,
                               or_(canonical, and_(flag.c.of_proposal_id.is_not(None), named_undecided)))
    restated = exists().where(flag.c.of_proposal_id == proposals.c.proposal_id, undecided, named_undecided)
    return or_(resembles, restated)


def _filtered(query: Any, wanted: QueueQuery) -> Any:
    """`query` (of proposals) narrowed to the case, the status and every filter asked."""
    query = query.where(proposals.c.case_id == wanted.case_id)
    if wanted.status == "pending":
        query = query.where(still_open())
    elif wanted.status in DECIDED:
        query = query.where(exists().where(closed_proposals.c.proposal_id == proposals.c.proposal_id,
                                           closed_proposals.c.status.in_(DECIDED[wanted.status])))
    if wanted.kind is not None:
        query = query.where(proposals.c.kind == wanted.kind)
    if wanted.agent is not None:
        query = query.where(proposals.c.agent_name == wanted.agent)
    for word in wanted.words:
        query = query.where(_mentions(word))
    if wanted.duplicates:
        query = query.where(_open_duplicate())
    return query


class SqlQueue:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def page(self, wanted: QueueQuery) -> list[Any]:
        """One page of the case's proposals' rows (one more than `limit`, to say whether another page follows)."""
        query = _filtered(select(proposals), wanted)
        key = (proposals.c.created_at, proposals.c.proposal_id)
        if wanted.after is not None:
            at, proposal_id = wanted.after
            later = or_(key[0] > at, and_(key[0] == at, key[1] > proposal_id))
            earlier = or_(key[0] < at, and_(key[0] == at, key[1] < proposal_id))
            query = query.where(earlier if wanted.newest_first else later)
        order = [k.desc() for k in key] if wanted.newest_first else list(key)
        return list((await self.connection.execute(query.order_by(*order).limit(wanted.limit + 1))).all())

    async def count(self, wanted: QueueQuery) -> int:
        """How many proposals the query's filters match, on every page."""
        return (await self.connection.execute(_filtered(select(func.count()).select_from(proposals), wanted))).scalar_one()

    async def records_named(self, case_id: str, record: str, ids: Sequence[str]) -> dict[str, str]:
        """Of `ids`, the `record`s (claim or source) the case has: canonical ones (`canonical`, or their status
        when retired or superseded), else staged in an undecided item of a pending proposal (`pending`)."""
        table, key = (claims, claims.c.claim_id) if record == "claim" else (sources, sources.c.source_id)
        found: dict[str, str] = {}
        rows = await self.connection.execute(select(key, table.c.status).where(table.c.case_id == case_id,
                                                                               key.in_(ids)))
        for record_id, status in rows:
            found[record_id] = "canonical" if status == "active" else status
        staged_kind = "claims" if record == "claim" else "sources"
        pending = await self.connection.execute(
            select(proposal_items.c.item_id).select_from(
                items_with_outcomes().join(proposals, proposals.c.proposal_id == proposal_items.c.proposal_id))
            .where(proposals.c.case_id == case_id, proposals.c.kind == staged_kind,
                   proposal_items.c.item_id.in_([i for i in ids if i not in found]),
                   item_decisions.c.outcome.is_(None)))
        for (record_id,) in pending:
            found.setdefault(record_id, "pending")
        return found
