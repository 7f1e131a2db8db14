"""Plain queries behind the read views (they bypass the write model), and the projection's own writes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.projection.claim_marks import ClaimMarks
from services.projection.domain import ClaimView, LedgerSnapshot, RelationView
from services.projection.guidance_reads import GuidanceReads
from services.projection.ports import ProjectionUnitOfWork
from services.projection.search_index import SqlSearchIndex
from services.projection.thesis_repository import SqlTheses
from services.projection.view_repository import SqlViews
from shared.db.queries import (
    active_at,
    dicts,
    items_with_outcomes,
    latest_ratings,
    lock_case_shared,
    still_open,
)
from shared.db.session import Database
from shared.db.tables import (
    agents,
    case_focus,
    cases,
    change_log,
    claim_sources,
    claims,
    item_decisions,
    merge_group_members,
    merge_groups,
    proposal_items,
    proposals,
    relations,
    sources,
)
from shared.events import Origin
from shared.service import Meta, ServiceContext, origin
from shared.uow import SqlUnitOfWork

ACTIVE = "active"


_RECORD_APPLIED = """
INSERT INTO projection_inbox (event_id, event_type, stream_seq)
SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:types AS text[]), CAST(:seqs AS bigint[]))
ON CONFLICT DO NOTHING
RETURNING event_id::text
"""

class SqlReads(ClaimMarks, GuidanceReads):
    """The ledger, proposals and guidance as the read views need them, and the read models."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def lock_case_shared(self, case_id: str) -> None:
        await lock_case_shared(self.connection, case_id)

    async def assigned_case(self, agent_name: str) -> str | None:
        row = await self.connection.execute(select(agents.c.assigned_case_id).where(agents.c.name == agent_name))
        return row.scalar_one_or_none()

    async def only_case(self) -> str | None:
        rows = (await self.connection.execute(select(cases.c.case_id).limit(2))).scalars().all()
        return rows[0] if len(rows) == 1 else None

    async def case_row(self, case_id: str) -> Any:
        return (await self.connection.execute(select(cases).where(cases.c.case_id == case_id))).first()

    async def focus_of(self, case_id: str) -> str:
        row = await self.connection.execute(select(case_focus.c.focus).where(case_focus.c.case_id == case_id))
        return row.scalar_one_or_none() or "all"

    async def set_focus(self, case_id: str, focus: str, agent: str) -> str:
        """Store the focus; return the previous one."""
        previous = await self.connection.execute(
            select(case_focus.c.focus).where(case_focus.c.case_id == case_id).with_for_update()
        )
        before = previous.scalar_one_or_none() or "all"
        statement = pg_insert(case_focus).values(case_id=case_id, focus=focus, updated_by=agent)
        await self.connection.execute(
            statement.on_conflict_do_update(
                index_elements=[case_focus.c.case_id],
                set_={"focus": focus, "updated_by": agent, "updated_at": func.now()},
            )
        )
        return before

    async def snapshot(self, case_id: str, revision: int) -> LedgerSnapshot:
        """The records active at `revision` (a later commit changes nothing of what this returns)."""
        cited = (
            select(claim_sources.c.claim_id, func.array_agg(text("source_id ORDER BY position")).label("source_ids"))
            .where(claim_sources.c.case_id == case_id)
            .group_by(claim_sources.c.claim_id)
            .subquery()
        )
        claim_rows = await self.connection.execute(
            select(claims, cited.c.source_ids)
            .select_from(claims.outerjoin(cited, cited.c.claim_id == claims.c.claim_id))
            .where(claims.c.case_id == case_id, active_at(claims, revision))
            .order_by(claims.c.revision, claims.c.claim_id)
        )
        source_rows = (await self.connection.execute(
            select(sources.c.source_id, sources.c.type, sources.c.revision, sources.c.publisher)
            .where(sources.c.case_id == case_id, active_at(sources, revision))
            .order_by(sources.c.revision, sources.c.source_id)
        )).all()
        rating_rows = await self.connection.execute(latest_ratings(case_id, revision))
        relation_rows = await self.connection.execute(
            select(relations).where(relations.c.case_id == case_id, active_at(relations, revision))
        )
        member_rows = await self.connection.execute(
            select(merge_group_members.c.group_id, merge_group_members.c.claim_id)
            .join(
                merge_groups,
                and_(
                    merge_groups.c.case_id == merge_group_members.c.case_id,
                    merge_groups.c.group_id == merge_group_members.c.group_id,
                ),
            )
            .where(merge_group_members.c.case_id == case_id, active_at(merge_groups, revision))
        )
        groups: dict[str, list[str]] = {}
        for row in member_rows:
            groups.setdefault(row.group_id, []).append(row.claim_id)
        return LedgerSnapshot(
            revision=revision,
            claims=[
                ClaimView(
                    claim_id=r.claim_id,
                    text=r.text,
                    kind=r.kind,
                    confidence=r.confidence,
                    lane=r.lane,
                    order=r.display_order,
                    source_ids=tuple(r.source_ids or ()),
                    revision=r.revision,
                )
                for r in claim_rows
            ],
            source_types={r.source_id: r.type for r in source_rows},
            source_revisions={r.source_id: r.revision for r in source_rows},
            relations=[
                RelationView(r.relation_id, r.source_claim_id, r.target_claim_id, r.type, r.verdict_basis)
                for r in relation_rows
            ],
            groups=groups,
            publishers={r.source_id: r.publisher for r in source_rows},
            health={r.claim_id: (r.health, r.lost) for r in rating_rows},
        )

    # --- what applying one ledger change reads of the ledger (ids the change names, at its revision) -----

    async def changes_since(self, case_id: str, after: int, upto: int) -> list[tuple[int, dict[str, Any]]]:
        """The change log's entries after a revision, up to another: each revision's change, in order."""
        rows = await self.connection.execute(
            select(change_log.c.revision, change_log.c.changes)
            .where(change_log.c.case_id == case_id, change_log.c.revision > after, change_log.c.revision <= upto)
            .order_by(change_log.c.revision))
        return [(r.revision, r.changes) for r in rows]

    async def relations_by_id(self, case_id: str, relation_ids: Sequence[str]) -> list[RelationView]:
        rows = await self.connection.execute(
            select(relations).where(relations.c.case_id == case_id, relations.c.relation_id.in_(relation_ids)))
        return [RelationView(r.relation_id, r.source_claim_id, r.target_claim_id, r.type, r.verdict_basis)
                for r in rows]

    async def relations_into(self, case_id: str, claim_ids: Sequence[str], revision: int,
                             types: Sequence[str] | None = None) -> list[RelationView]:
        """The relations (of these types, or any) pointing at these claims, active at `revision`."""
        query = select(relations).where(relations.c.case_id == case_id, relations.c.target_claim_id.in_(claim_ids),
                                        active_at(relations, revision))
        rows = await self.connection.execute(query.where(relations.c.type.in_(types)) if types else query)
        return [RelationView(r.relation_id, r.source_claim_id, r.target_claim_id, r.type, r.verdict_basis)
                for r in rows]

    async def claims_citing(self, case_id: str, source_ids: Sequence[str]) -> list[str]:
        rows = await self.connection.execute(select(claim_sources.c.claim_id).where(
            claim_sources.c.case_id == case_id, claim_sources.c.source_id.in_(source_ids)))
        return [r.claim_id for r in rows]

    async def verdict(self, case_id: str, claim_id: str, revision: int) -> LedgerSnapshot | None:
        """The case's verdict, its bases and their claims, and the active sources those cite, at `revision`."""
        bases = [r for r in await self.relations_into(case_id, [claim_id], revision) if r.verdict_basis]
        # Active claims only: a basis may run from the verdict this one superseded, no longer a verdict then.
        found = await self.snapshot_of_claims(case_id, [claim_id, *(r.source_claim_id for r in bases)], revision)
        if not any(c.claim_id == claim_id for c in found):
            return None
        cited = sorted({s for c in found if c.claim_id != claim_id for s in c.source_ids})
        source_rows = (await self.connection.execute(
            select(sources.c.source_id, sources.c.type, sources.c.publisher)
            .where(sources.c.case_id == case_id, sources.c.source_id.in_(cited), active_at(sources, revision)))).all()
        return LedgerSnapshot(revision, claims=found, relations=bases,
                              source_types={r.source_id: r.type for r in source_rows},
                              publishers={r.source_id: r.publisher for r in source_rows})

    async def snapshot_of_claims(self, case_id: str, claim_ids: Sequence[str], revision: int) -> list[ClaimView]:
        """These claims, those of them active at `revision`."""
        cited = await self.connection.execute(
            select(claim_sources.c.claim_id, claim_sources.c.source_id)
            .where(claim_sources.c.case_id == case_id, claim_sources.c.claim_id.in_(claim_ids))
            .order_by(claim_sources.c.claim_id, claim_sources.c.position))
        source_ids: dict[str, list[str]] = {}
        for r in cited:
            source_ids.setdefault(r.claim_id, []).append(r.source_id)
        rows = await self.connection.execute(
            select(claims).where(claims.c.case_id == case_id, claims.c.claim_id.in_(claim_ids),
                                 active_at(claims, revision)).order_by(claims.c.revision, claims.c.claim_id))
        return [ClaimView(r.claim_id, r.text, r.kind, r.confidence, r.lane, r.display_order,
                          tuple(source_ids.get(r.claim_id, ())), r.revision) for r in rows]

    async def pending_proposals(self, case_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """Proposals with at least one undecided item, oldest first: the first `limit` of them."""
        rows = await self.connection.execute(
            select(proposals)
            .where(proposals.c.case_id == case_id, still_open())
            .order_by(proposals.c.created_at, proposals.c.proposal_id)
            .limit(limit)
        )
        return dicts(rows)

    async def proposal_items_status(self, proposal_ids: list[str]) -> dict[str, list[dict]]:
        if not proposal_ids:
            return {}
        rows = await self.connection.execute(
            select(proposal_items.c.proposal_id, proposal_items.c.item_id, item_decisions.c.outcome)
            .select_from(items_with_outcomes())
            .where(proposal_items.c.proposal_id.in_(proposal_ids))
            .order_by(proposal_items.c.proposal_id, proposal_items.c.position)
        )
        items: dict[str, list[dict]] = {}
        for r in rows:
            items.setdefault(r.proposal_id, []).append({"itemId": r.item_id, "status": r.outcome or "pending"})
        return items

    async def agent_recent_proposals(
        self, case_id: str, agent_name: str, limit: int
    ) -> list[dict[str, Any]]:
        rows = await self.connection.execute(
            select(proposals)
            .where(proposals.c.case_id == case_id, proposals.c.agent_name == agent_name)
            .order_by(proposals.c.created_at.desc())
            .limit(limit)
        )
        return dicts(rows)

    async def source_list(self, case_id: str) -> list[dict[str, Any]]:
        derived = (
            select(claim_sources.c.source_id, func.count().label("derived"))
            .join(claims, and_(claims.c.case_id == claim_sources.c.case_id, claims.c.claim_id == claim_sources.c.claim_id))
            .where(claim_sources.c.case_id == case_id, claims.c.status == ACTIVE)
            .group_by(claim_sources.c.source_id)
            .subquery()
        )
        rows = await self.connection.execute(
            select(
                sources.c.source_id,
                sources.c.publisher,
                sources.c.title,
                sources.c.url,
                sources.c.type,
                sources.c.publication_date,
                sources.c.snapshot_date,
                sources.c.authority,
                sources.c.revision,
                func.jsonb_array_length(sources.c.transcriptions).label("transcriptions"),
                func.coalesce(derived.c.derived, 0).label("derived"),
            )
            .select_from(sources.outerjoin(derived, derived.c.source_id == sources.c.source_id))
            .where(sources.c.case_id == case_id, sources.c.status == ACTIVE)
            .order_by(sources.c.revision, sources.c.source_id)
        )
        return dicts(rows)

    async def sources_by_id(self, case_id: str, source_ids: list[str]) -> dict[str, dict]:
        rows = await self.connection.execute(
            select(sources).where(sources.c.case_id == case_id, sources.c.source_id.in_(source_ids))
        )
        return {r["source_id"]: r for r in dicts(rows)}

    async def derived_claims(
        self, case_id: str, source_ids: list[str], cap: int
    ) -> dict[str, tuple[list[dict], int]]:
        ranked = (
            select(
                claim_sources.c.source_id,
                claims.c.claim_id,
                claims.c.text,
                claims.c.kind,
                claims.c.confidence,
                func.row_number()
                .over(partition_by=claim_sources.c.source_id, order_by=(claims.c.revision, claims.c.claim_id))
                .label("n"),
                func.count().over(partition_by=claim_sources.c.source_id).label("total"),
            )
            .join(claims, and_(claims.c.case_id == claim_sources.c.case_id, claims.c.claim_id == claim_sources.c.claim_id))
            .where(
                claim_sources.c.case_id == case_id,
                claim_sources.c.source_id.in_(source_ids),
                claims.c.status == ACTIVE,
            )
            .subquery()
        )
        rows = await self.connection.execute(select(ranked).where(ranked.c.n <= cap).order_by(ranked.c.source_id, ranked.c.n))
        found: dict[str, tuple[list[dict], int]] = {}
        for r in rows:
            listed, total = found.get(r.source_id, ([], r.total))
            listed.append({"claimId": r.claim_id, "text": r.text, "kind": r.kind, "confidence": r.confidence})
            found[r.source_id] = (listed, total)
        return {sid: (listed, total - len(listed)) for sid, (listed, total) in found.items()}

    async def pending_by_kind(self, case_id: str) -> dict[str, int]:
        rows = await self.connection.execute(
            select(proposals.c.kind, func.count()).where(proposals.c.case_id == case_id, still_open())
            .group_by(proposals.c.kind).order_by(proposals.c.kind))
        return {kind: count for kind, count in rows.all()}

    async def provenance_of_claims(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        rows = await self.connection.execute(
            select(claims.c.claim_id, claims.c.staged_by, claims.c.decided_by, claims.c.decided_at,
                   claims.c.proposal_id).where(claims.c.case_id == case_id, claims.c.claim_id.in_(claim_ids))
        )
        return {
            r.claim_id: {"stagedBy": r.staged_by, "acceptedBy": r.decided_by, "acceptedAt": r.decided_at.isoformat(),
                         "proposalId": r.proposal_id}
            for r in rows
        }

    async def relation_list(self, case_id: str, revision: int) -> list[RelationView]:
        """The relations active at `revision`, in the ledger's order."""
        rows = await self.connection.execute(
            select(relations).where(relations.c.case_id == case_id, active_at(relations, revision))
            .order_by(relations.c.revision, relations.c.relation_id))
        return [RelationView(r.relation_id, r.source_claim_id, r.target_claim_id, r.type, r.verdict_basis)
                for r in rows]

    async def group_list(self, case_id: str, revision: int | None = None) -> list[dict[str, Any]]:
        """The active groups (those active at `revision`, when given), in the ledger's order."""
        active = merge_groups.c.status == ACTIVE if revision is None else active_at(merge_groups, revision)
        rows = await self.connection.execute(
            select(merge_groups).where(merge_groups.c.case_id == case_id, active)
            .order_by(merge_groups.c.revision, merge_groups.c.group_id)
        )
        return dicts(rows)

    # --- the projection's inbox ---------------------------------------------------------------------------

    async def record_applied(self, event_id: str, event_type: str, stream_seq: int) -> bool:
        """Record an event as applied; False when it already was (a redelivery)."""
        return bool(await self.record_all_applied([(event_id, event_type, stream_seq)]))

    async def record_all_applied(self, events: Sequence[tuple[str, str, int]]) -> set[str]:
        """Record events (id, type, stream sequence) as applied, in one statement; the ids (as given) of
        those not recorded before — the others are redeliveries."""
        given = {str(uuid.UUID(event_id)): event_id for event_id, _, _ in events}  # as PostgreSQL spells it
        rows = await self.connection.execute(text(_RECORD_APPLIED), {
            "ids": [str(uuid.UUID(i)) for i, _, _ in events], "types": [t for _, t, _ in events],
            "seqs": [s for _, _, s in events]})
        return {given[event_id] for event_id in rows.scalars()}

    async def case_ids(self) -> list[str]:
        return list((await self.connection.execute(select(cases.c.case_id).order_by(cases.c.case_id))).scalars())


class SqlProjectionUnitOfWork(SqlUnitOfWork, ProjectionUnitOfWork):
    def __init__(self, db: Database, origin: Origin, default_case: str | None = None) -> None:
        super().__init__(db, origin)
        self.default_case = default_case

    def bind(self, connection: AsyncConnection) -> None:
        self.reads = SqlReads(connection)
        self.views = SqlViews(connection)
        self.theses = SqlTheses(connection)
        self.search = SqlSearchIndex(connection)

    @classmethod
    def of(cls, ctx: ServiceContext, meta: Meta) -> SqlProjectionUnitOfWork:
        return cls(ctx.db, origin(ctx, meta), ctx.settings.default_case)
