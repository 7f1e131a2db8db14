"""The canonical ledger's writes (review is their only writer) and the change log, in PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, insert, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.review.history_repository import LOGGED_DECISIONS
from shared import review_check_facts
from shared.contracts import ClaimItem, MergeGroupItem, RecordedSource, RelationItem, SourceItem, VerdictClaim
from shared.db.history_tables import rating_history
from shared.db.queries import active_at, dicts, latest_ratings, ledger_facts
from shared.db.review_tables import prediction_resolutions
from shared.db.tables import (
    change_log,
    claim_sources,
    claims,
    evidence_health,
    merge_group_members,
    merge_groups,
    proposals,
    relations,
    sources,
)
from shared.events import LedgerChanged
from shared.grounding import grounding_for
from shared.health import Basis, Rating
from shared.ledger import ACTIVE, VERDICT, LedgerFacts, Provenance, References
from shared.review_checks import CheckFacts
from shared.search_text import normalise_url

# One retirement: the records named, in their order, each with the agent that staged it (none for a recorded source).
_NOTE_RETIREMENT = """
INSERT INTO retirements (case_id, revision, reviewer, note, records, ended, staged_by, at)
SELECT CAST(:case_id AS text), CAST(:revision AS bigint), CAST(:reviewer AS text), CAST(:note AS text),
       jsonb_agg(jsonb_build_object('record', n.record, 'id', n.id, 'stagedBy', coalesce(s.staged_by, c.staged_by))
                 ORDER BY n.position),
       CAST(:ended AS jsonb),
       coalesce(array_agg(DISTINCT coalesce(s.staged_by, c.staged_by))
                FILTER (WHERE coalesce(s.staged_by, c.staged_by) IS NOT NULL), '{}'),
       CAST(:at AS timestamptz)
FROM unnest(CAST(:records AS text[]), CAST(:ids AS text[])) WITH ORDINALITY AS n(record, id, position)
LEFT JOIN sources s ON n.record = 'source' AND s.case_id = :case_id AND s.source_id = n.id
LEFT JOIN claims c ON n.record = 'claim' AND c.case_id = :case_id AND c.claim_id = n.id
"""


def _provenance(provenance: Provenance) -> dict[str, Any]:
    return {
        "proposal_id": provenance.proposal_id,
        "staged_by": provenance.staged_by,
        "staged_at": provenance.staged_at,
        "decision_id": provenance.decision_id,
        "decided_by": provenance.decided_by,
        "decided_at": provenance.decided_at,
        "revision": provenance.revision,
    }


def _ended(provenance: Provenance, status: str) -> dict[str, Any]:
    return {"status": status, "ended_by": provenance.decided_by, "ended_at": provenance.decided_at,
            "ended_revision": provenance.revision}


class SqlLedger:
    """The ledger of every case, as review reads and writes it inside a decision's transaction."""

    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection

    async def facts(self, case_id: str, revision: int, refs: References) -> LedgerFacts:
        return await ledger_facts(self.connection, case_id, revision, refs)

    async def grounding(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return await grounding_for(self.connection, case_id, claim_ids)

    async def resolutions_of(self, case_id: str, claim_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        found = await self.connection.execute(
            select(prediction_resolutions, claims.c.text.label("claim_text"))
            .join(claims, and_(claims.c.case_id == prediction_resolutions.c.case_id,
                               claims.c.claim_id == prediction_resolutions.c.claim_id))
            .where(prediction_resolutions.c.case_id == case_id,
                   prediction_resolutions.c.claim_id.in_(list(claim_ids)), claims.c.status == ACTIVE,
                   claims.c.kind == "prediction")
            .order_by(prediction_resolutions.c.revision))
        return {row["claim_id"]: dict(row) for row in found.mappings()}  # the latest of each claim last

    async def review_facts(self, case_id: str, items: Sequence[Any], relations: bool) -> CheckFacts:
        return await review_check_facts.load(self.connection, case_id, items, relations)

    # --- installing accepted items ---------------------------------------------------------------

    async def add_sources(self, case_id: str, items: Sequence[SourceItem | RecordedSource],
                          provenance: Provenance) -> None:
        await self.connection.execute(insert(sources), [
            {
                "case_id": case_id, "source_id": s.id, "publisher": s.publisher, "title": s.title, "url": s.url,
                "url_key": normalise_url(s.url),
                "publication_date": s.publication_date, "snapshot_date": s.snapshot_date, "type": s.type,
                "authority": s.authority, "evidence_text": s.evidence_text, "provenance_note": s.provenance_note,
                "transcriptions": [t.model_dump() for t in getattr(s, "transcriptions", [])],
                **_provenance(provenance),
            }
            for s in items
        ])

    async def add_claims(self, case_id: str, items: Sequence[ClaimItem | VerdictClaim],
                         provenance: Provenance) -> None:
        await self.connection.execute(insert(claims), [
            {
                "case_id": case_id, "claim_id": c.id, "text": c.text, "kind": c.kind, "confidence": c.confidence,
                "transformation_note": c.transformation_note,
                "proposal_rationale": getattr(c, "proposal_rationale", None),
                "lane": getattr(c, "lane", None), "display_order": getattr(c, "order", None),
                **_provenance(provenance),
            }
            for c in items
        ])
        await self.connection.execute(insert(claim_sources), [
            {"case_id": case_id, "claim_id": c.id, "source_id": source_id, "position": i}
            for c in items
            for i, source_id in enumerate(c.source_ids)
        ])

    async def add_relations(self, case_id: str, items: Sequence[RelationItem], provenance: Provenance, *,
                            verdict_id: str | None = None) -> None:
        await self.connection.execute(insert(relations), [
            {
                "case_id": case_id, "relation_id": r.id, "source_claim_id": r.source_claim_id,
                "target_claim_id": r.target_claim_id, "type": r.type, "rationale": r.rationale,
                "verdict_basis": verdict_id is not None and r.target_claim_id == verdict_id,
                **_provenance(provenance),
            }
            for r in items
        ])

    async def add_groups(self, case_id: str, items: Sequence[MergeGroupItem], provenance: Provenance) -> None:
        await self.connection.execute(insert(merge_groups), [
            {"case_id": case_id, "group_id": g.group_id, "label": g.label, "confidence": g.confidence,
             "rationale": g.rationale, **_provenance(provenance)}
            for g in items
        ])
        await self.connection.execute(insert(merge_group_members), [
            {"case_id": case_id, "group_id": g.group_id, "claim_id": claim_id}
            for g in items
            for claim_id in g.member_claim_ids
        ])

    async def supersede_verdict(self, case_id: str, new_verdict_id: str, provenance: Provenance) -> str | None:
        row = await self.connection.execute(
            update(claims)
            .where(claims.c.case_id == case_id, claims.c.kind == VERDICT, claims.c.status == "active")
            .values(**_ended(provenance, "superseded"), superseded_by=new_verdict_id)
            .returning(claims.c.claim_id)
        )
        return row.scalar_one_or_none()

    async def end_links(self, case_id: str, claim_id: str, provenance: Provenance) -> list[tuple[str, str]]:
        """End the active relations and merge groups that involve a claim leaving the ledger.

        A relation or a restatement group is only as good as its claims: once one of them is retired or
        superseded, the link would count evidence that is no longer canonical. Returns (record, id) pairs.
        """
        relation_rows = await self.connection.execute(
            update(relations)
            .where(
                relations.c.case_id == case_id,
                relations.c.status == "active",
                (relations.c.source_claim_id == claim_id) | (relations.c.target_claim_id == claim_id),
            )
            .values(**_ended(provenance, "retired"))
            .returning(relations.c.relation_id)
        )
        ended = [("relation", r.relation_id) for r in relation_rows]
        group_rows = await self.connection.execute(
            update(merge_groups)
            .where(
                merge_groups.c.case_id == case_id,
                merge_groups.c.status == "active",
                merge_groups.c.group_id.in_(
                    select(merge_group_members.c.group_id).where(
                        merge_group_members.c.case_id == case_id, merge_group_members.c.claim_id == claim_id
                    )
                ),
            )
            .values(**_ended(provenance, "retired"))
            .returning(merge_groups.c.group_id)
        )
        return ended + [("group", r.group_id) for r in group_rows]

    # --- retiring records ------------------------------------------------------------------------

    async def retire(self, case_id: str, record: str, record_id: str, provenance: Provenance) -> list[tuple[str, str]]:
        table, key = (sources, sources.c.source_id) if record == "source" else (claims, claims.c.claim_id)
        await self.connection.execute(
            update(table).where(table.c.case_id == case_id, key == record_id).values(**_ended(provenance, "retired"))
        )
        return [] if record == "source" else await self.end_links(case_id, record_id, provenance)

    async def statuses(self, case_id: str, source_ids: list[str], claim_ids: list[str]) -> dict[tuple[str, str], str]:
        found: dict[tuple[str, str], str] = {}
        for record, table, key, ids in (("source", sources, sources.c.source_id, source_ids),
                                        ("claim", claims, claims.c.claim_id, claim_ids)):
            if ids:
                rows = await self.connection.execute(
                    select(key.label("id"), table.c.status).where(table.c.case_id == case_id, key.in_(ids))
                )
                found.update({(record, r.id): r.status for r in rows})
        return found

    async def note_retirement(self, case_id: str, revision: int, reviewer: str, note: str,
                              named: Sequence[tuple[str, str]], ended: Sequence[tuple[str, str]], at: datetime) -> None:
        """Keep why the records were retired, with who staged each: what agents read in guidance and inspect."""
        await self.connection.execute(text(_NOTE_RETIREMENT), {
            "case_id": case_id, "revision": revision, "reviewer": reviewer, "note": note, "at": at,
            "records": [r for r, _ in named], "ids": [i for _, i in named],
            "ended": json.dumps([{"record": r, "id": i} for r, i in ended])})

    # --- evidence health: what leaned on retired records ---------------------------------------------

    async def citations_of(self, case_id: str, source_ids: list[str]) -> dict[str, dict[str, str]]:
        """Per active claim citing any of the sources: the status of every source it cites."""
        if not source_ids:
            return {}
        citing = (select(claim_sources.c.claim_id)
                  .where(claim_sources.c.case_id == case_id, claim_sources.c.source_id.in_(source_ids)))
        rows = await self.connection.execute(
            select(claim_sources.c.claim_id, claim_sources.c.source_id, sources.c.status)
            .join(sources, and_(sources.c.case_id == claim_sources.c.case_id,
                                sources.c.source_id == claim_sources.c.source_id))
            .join(claims, and_(claims.c.case_id == claim_sources.c.case_id,
                               claims.c.claim_id == claim_sources.c.claim_id))
            .where(claim_sources.c.case_id == case_id, claim_sources.c.claim_id.in_(citing),
                   claims.c.status == ACTIVE)
            .order_by(claim_sources.c.claim_id, claim_sources.c.position)
        )
        found: dict[str, dict[str, str]] = {}
        for r in rows:
            found.setdefault(r.claim_id, {})[r.source_id] = r.status
        return found

    async def verdict_bases(self, case_id: str) -> tuple[str | None, list[Basis]]:
        """The active verdict and every basis it was accepted with (ended ones too)."""
        verdict_id = (await self.connection.execute(
            select(claims.c.claim_id).where(claims.c.case_id == case_id, claims.c.kind == VERDICT,
                                            claims.c.status == ACTIVE)
        )).scalar_one_or_none()
        if verdict_id is None:
            return None, []
        rows = await self.connection.execute(
            select(relations.c.relation_id, relations.c.source_claim_id)
            .where(relations.c.case_id == case_id, relations.c.target_claim_id == verdict_id,
                   relations.c.verdict_basis)
            .order_by(relations.c.relation_id)
        )
        return verdict_id, [Basis(r.relation_id, r.source_claim_id) for r in rows]

    async def ratings(self, case_id: str) -> dict[str, list[tuple[str, str]]]:
        """The ratings recorded so far: claim id → the (record, id) pairs it lost."""
        rows = await self.connection.execute(
            select(evidence_health.c.claim_id, evidence_health.c.lost).where(evidence_health.c.case_id == case_id)
        )
        return {r.claim_id: [(x["record"], x["id"]) for x in r.lost] for r in rows}

    async def rate(self, case_id: str, ratings: Sequence[Rating], revision: int) -> None:
        if not ratings:
            return
        rows = [{"case_id": case_id, "claim_id": r.claim_id, "health": r.health, "revision": revision,
                 "lost": r.to_json()["lost"]} for r in ratings]
        await self.connection.execute(insert(rating_history), rows)  # the history a revision reads back
        statement = pg_insert(evidence_health).values(rows)
        await self.connection.execute(statement.on_conflict_do_update(
            index_elements=[evidence_health.c.case_id, evidence_health.c.claim_id],
            set_={"health": statement.excluded.health, "lost": statement.excluded.lost,
                  "revision": statement.excluded.revision},
        ))

    # --- what reviewers read beside the records: the argument map, the evidence of a proposal -------

    async def graph(self, case_id: str, as_of: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The records the argument map draws: those active now, or (`as_of`) those active at that revision,
        each rated as it was then."""

        def alive(table: Any) -> Any:
            return table.c.status == ACTIVE if as_of is None else active_at(table, as_of)

        health = evidence_health if as_of is None else latest_ratings(case_id, as_of).subquery()
        source_status = sources.c.status if as_of is None else case(
            (sources.c.ended_revision <= as_of, sources.c.status), else_=literal(ACTIVE))
        claim_rows = await self.connection.execute(
            select(claims.c.claim_id, claims.c.text, claims.c.kind, claims.c.confidence, literal(ACTIVE).label("status"),
                   health.c.health, health.c.lost)
            .select_from(claims.outerjoin(health, and_(health.c.case_id == claims.c.case_id,
                                                       health.c.claim_id == claims.c.claim_id)))
            .where(claims.c.case_id == case_id, alive(claims))
            .order_by(claims.c.kind != VERDICT, claims.c.revision, claims.c.claim_id)
        )
        citation_rows = await self.connection.execute(
            select(claim_sources.c.claim_id, claim_sources.c.source_id)
            .join(claims, and_(claims.c.case_id == claim_sources.c.case_id,
                               claims.c.claim_id == claim_sources.c.claim_id))
            .where(claim_sources.c.case_id == case_id, alive(claims))
            .order_by(claim_sources.c.claim_id, claim_sources.c.position)
        )
        citations = dicts(citation_rows)
        cited = {c["source_id"] for c in citations}
        source_rows = await self.connection.execute(
            select(sources.c.source_id, sources.c.title, sources.c.publisher, sources.c.type,
                   source_status.label("status"))
            .where(sources.c.case_id == case_id, alive(sources) | sources.c.source_id.in_(cited))
            .order_by(sources.c.revision, sources.c.source_id)
        )
        relation_rows = await self.connection.execute(
            select(relations.c.relation_id, relations.c.source_claim_id, relations.c.target_claim_id,
                   relations.c.type, relations.c.verdict_basis)
            .where(relations.c.case_id == case_id, alive(relations))
            .order_by(relations.c.revision, relations.c.relation_id)
        )
        member_rows = await self.connection.execute(
            select(merge_groups.c.group_id, merge_groups.c.label, merge_group_members.c.claim_id)
            .join(merge_group_members, and_(merge_group_members.c.case_id == merge_groups.c.case_id,
                                            merge_group_members.c.group_id == merge_groups.c.group_id))
            .where(merge_groups.c.case_id == case_id, alive(merge_groups))
            .order_by(merge_groups.c.group_id, merge_group_members.c.claim_id)
        )
        return {"claims": dicts(claim_rows), "citations": citations,
                "sources": dicts(source_rows),
                "relations": dicts(relation_rows),
                "members": dicts(member_rows)}

    async def evidence(self, case_id: str, refs: References) -> dict[str, dict[str, dict[str, Any]]]:
        found: dict[str, dict[str, dict[str, Any]]] = {"sources": {}, "claims": {}}
        if refs.sources:
            rows = await self.connection.execute(
                select(sources).where(sources.c.case_id == case_id, sources.c.source_id.in_(refs.sources))
            )
            found["sources"] = {r["source_id"]: r for r in dicts(rows)}
        if refs.claims:
            rows = await self.connection.execute(
                select(claims.c.claim_id, claims.c.text, claims.c.kind, claims.c.confidence, claims.c.status,
                       evidence_health.c.health)
                .select_from(claims.outerjoin(evidence_health, and_(
                    evidence_health.c.case_id == claims.c.case_id, evidence_health.c.claim_id == claims.c.claim_id)))
                .where(claims.c.case_id == case_id, claims.c.claim_id.in_(refs.claims))
            )
            found["claims"] = {r["claim_id"]: r for r in dicts(rows)}
        return found

    # --- the change log --------------------------------------------------------------------------

    async def log(self, step: LedgerChanged, at: datetime, correlation_id: str | None) -> None:
        await self.connection.execute(insert(change_log).values(
            case_id=step.case_id, revision=step.revision, decision_id=step.decision_id, actor=step.actor,
            summary=step.summary, changes=step.changes.model_dump(mode="json", by_alias=True),
            correlation_id=correlation_id, at=at,
        ))

    async def history(self, case_id: str, limit: int, before: int | None) -> list[dict[str, Any]]:
        """Change log entries, newest first, each with the agent that staged the proposal it decided (if any)."""
        query = (select(change_log, proposals.c.agent_name.label("staged_by"))
                 .select_from(LOGGED_DECISIONS)
                 .where(change_log.c.case_id == case_id))
        if before is not None:
            query = query.where(change_log.c.revision < before)
        rows = await self.connection.execute(query.order_by(change_log.c.revision.desc()).limit(limit))
        return dicts(rows)

    async def ended(self, case_id: str, oldest: int, newest: int) -> list[dict[str, Any]]:
        """Records that left the ledger (superseded or retired) in a range of revisions, oldest first."""
        found: list[dict[str, Any]] = []
        for table, id_column, record in (
            (claims, claims.c.claim_id, "claim"),
            (sources, sources.c.source_id, "source"),
            (relations, relations.c.relation_id, "relation"),
            (merge_groups, merge_groups.c.group_id, "group"),
        ):
            rows = await self.connection.execute(
                select(id_column.label("id"), table.c.status, table.c.ended_by, table.c.ended_at,
                       table.c.ended_revision, table.c.superseded_by, table.c.revision, table.c.decided_by,
                       table.c.decided_at)
                .where(table.c.case_id == case_id, table.c.status != "active",
                       table.c.ended_revision.between(oldest, newest))
            )
            found += [{"record": record, **r} for r in rows.mappings()]
        return sorted(found, key=lambda r: (r["ended_revision"], r["record"], r["id"]))
