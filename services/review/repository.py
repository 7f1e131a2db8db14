"""Persistence for review: proposals as reviewers see them, and the ledger writes of a decision."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from services.review.domain import StoredItem, StoredProposal
from shared.db.queries import lock_case_exclusive
from shared.db.tables import (
    cases,
    change_log,
    claim_sources,
    claims,
    decisions,
    item_decisions,
    merge_group_members,
    merge_groups,
    proposal_items,
    proposals,
    relations,
    sources,
)


@dataclass(frozen=True)
class Provenance:
    proposal_id: str | None
    staged_by: str | None
    staged_at: datetime | None
    decision_id: str | None
    decided_by: str
    decided_at: datetime
    revision: int

    def columns(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id,
            "staged_by": self.staged_by,
            "staged_at": self.staged_at,
            "decision_id": self.decision_id,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "revision": self.revision,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "proposalId": self.proposal_id,
            "stagedBy": self.staged_by,
            "stagedAt": self.staged_at.isoformat() if self.staged_at else None,
            "decisionId": self.decision_id,
            "decidedBy": self.decided_by,
            "decidedAt": self.decided_at.isoformat(),
            "revision": self.revision,
        }


# --- cases ------------------------------------------------------------------------------------------


async def lock_case(connection: AsyncConnection, case_id: str) -> int | None:
    """The case's revision, locked: decisions on one case apply one at a time, and no stage call runs."""
    await lock_case_exclusive(connection, case_id)
    row = await connection.execute(
        select(cases.c.revision).where(cases.c.case_id == case_id).with_for_update()
    )
    return row.scalar_one_or_none()


async def bump_revision(connection: AsyncConnection, case_id: str) -> int:
    row = await connection.execute(
        update(cases).where(cases.c.case_id == case_id).values(revision=cases.c.revision + 1).returning(cases.c.revision)
    )
    return row.scalar_one()


async def insert_case(connection: AsyncConnection, case_id: str, title: str, question: str, created_by: str) -> bool:
    row = await connection.execute(
        pg_insert(cases)
        .values(case_id=case_id, title=title, question=question, created_by=created_by)
        .on_conflict_do_nothing(index_elements=[cases.c.case_id])
        .returning(cases.c.case_id)
    )
    return row.scalar_one_or_none() is not None


async def get_case(connection: AsyncConnection, case_id: str) -> dict[str, Any] | None:
    row = (await connection.execute(select(cases).where(cases.c.case_id == case_id))).mappings().first()
    return dict(row) if row else None


async def list_cases(connection: AsyncConnection) -> list[dict[str, Any]]:
    pending = (
        select(proposals.c.case_id, func.count(func.distinct(proposals.c.proposal_id)).label("pending"))
        .select_from(
            proposals.join(proposal_items, proposal_items.c.proposal_id == proposals.c.proposal_id).outerjoin(
                item_decisions,
                and_(
                    item_decisions.c.proposal_id == proposal_items.c.proposal_id,
                    item_decisions.c.item_id == proposal_items.c.item_id,
                ),
            )
        )
        .where(item_decisions.c.item_id.is_(None))
        .group_by(proposals.c.case_id)
        .subquery()
    )
    rows = await connection.execute(
        select(cases, func.coalesce(pending.c.pending, 0).label("pending_proposals"))
        .select_from(cases.outerjoin(pending, pending.c.case_id == cases.c.case_id))
        .order_by(cases.c.created_at, cases.c.case_id)
    )
    return [dict(r) for r in rows.mappings()]


# --- proposals --------------------------------------------------------------------------------------


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
            proposal_items.outerjoin(
                item_decisions,
                and_(
                    item_decisions.c.proposal_id == proposal_items.c.proposal_id,
                    item_decisions.c.item_id == proposal_items.c.item_id,
                ),
            ).outerjoin(decisions, decisions.c.decision_id == item_decisions.c.decision_id)
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
    )


async def _with_items(connection: AsyncConnection, rows: Sequence[Any]) -> list[StoredProposal]:
    if not rows:
        return []
    by_proposal: dict[str, list[StoredItem]] = {row.proposal_id: [] for row in rows}
    for item in await connection.execute(_items_query(list(by_proposal))):
        by_proposal[item.proposal_id].append(
            StoredItem(
                item_id=item.item_id,
                position=item.position,
                payload=item.payload,
                outcome=item.outcome,
                decision_id=item.decision_id,
                decided_by=item.reviewer,
                decided_at=item.decided_at,
            )
        )
    return [_proposal(row, by_proposal[row.proposal_id]) for row in rows]


async def get_proposal(connection: AsyncConnection, proposal_id: str) -> StoredProposal | None:
    rows = (await connection.execute(select(proposals).where(proposals.c.proposal_id == proposal_id))).all()
    found = await _with_items(connection, rows)
    return found[0] if found else None


async def list_proposals(
    connection: AsyncConnection, case_id: str, status: str, limit: int
) -> list[StoredProposal]:
    counts = (
        select(
            proposal_items.c.proposal_id,
            func.count().label("item_total"),
            func.count(item_decisions.c.item_id).label("decided"),
            func.count(case((item_decisions.c.outcome == "accepted", 1))).label("accepted"),
        )
        .select_from(
            proposal_items.outerjoin(
                item_decisions,
                and_(
                    item_decisions.c.proposal_id == proposal_items.c.proposal_id,
                    item_decisions.c.item_id == proposal_items.c.item_id,
                ),
            )
        )
        .group_by(proposal_items.c.proposal_id)
        .subquery()
    )
    query = (
        select(proposals)
        .join(counts, counts.c.proposal_id == proposals.c.proposal_id)
        .where(proposals.c.case_id == case_id)
    )
    if status == "pending":
        query = query.where(counts.c.decided < counts.c.item_total)
    elif status == "accepted":
        query = query.where(counts.c.decided == counts.c.item_total, counts.c.accepted > 0)
    elif status == "rejected":
        query = query.where(counts.c.decided == counts.c.item_total, counts.c.accepted == 0)
    elif status == "decided":
        query = query.where(counts.c.decided == counts.c.item_total)
    order = proposals.c.created_at.asc() if status == "pending" else proposals.c.created_at.desc()
    rows = (await connection.execute(query.order_by(order, proposals.c.proposal_id).limit(limit))).all()
    return await _with_items(connection, rows)


# --- decisions --------------------------------------------------------------------------------------


async def insert_decision(
    connection: AsyncConnection,
    *,
    decision_id: str,
    proposal: StoredProposal,
    reviewer: str,
    note: str | None,
    expected_revision: int | None,
    revision_after: int | None,
    refused: list[dict[str, str]],
    correlation_id: str | None,
    decided_at: datetime,
    outcomes: Iterable[tuple[str, str]],
) -> None:
    await connection.execute(
        insert(decisions).values(
            decision_id=decision_id,
            proposal_id=proposal.proposal_id,
            case_id=proposal.case_id,
            reviewer=reviewer,
            note=note,
            expected_revision=expected_revision,
            revision_after=revision_after,
            refused=refused,
            correlation_id=correlation_id,
            decided_at=decided_at,
        )
    )
    rows = [
        {"proposal_id": proposal.proposal_id, "item_id": item_id, "decision_id": decision_id, "outcome": outcome}
        for item_id, outcome in outcomes
    ]
    if rows:
        await connection.execute(insert(item_decisions), rows)


async def insert_change_log(
    connection: AsyncConnection,
    *,
    case_id: str,
    revision: int,
    decision_id: str | None,
    actor: str,
    summary: str,
    changes: dict[str, Any],
    correlation_id: str | None,
    at: datetime,
) -> None:
    await connection.execute(
        insert(change_log).values(
            case_id=case_id,
            revision=revision,
            decision_id=decision_id,
            actor=actor,
            summary=summary,
            changes=changes,
            correlation_id=correlation_id,
            at=at,
        )
    )


# --- installing canonical records -------------------------------------------------------------------


def source_row(case_id: str, p: dict[str, Any], provenance: Provenance) -> dict[str, Any]:
    return {
        "case_id": case_id,
        "source_id": p["id"],
        "publisher": p["publisher"],
        "title": p["title"],
        "url": p["url"],
        "publication_date": p["publicationDate"],
        "snapshot_date": p["snapshotDate"],
        "type": p["type"],
        "authority": p["authority"],
        "evidence_text": p["evidenceText"],
        "provenance_note": p["provenanceNote"],
        "transcriptions": p.get("transcriptions", []),
        **provenance.columns(),
    }


async def install_sources(
    connection: AsyncConnection, case_id: str, payloads: Sequence[dict[str, Any]], provenance: Provenance
) -> None:
    await connection.execute(insert(sources), [source_row(case_id, p, provenance) for p in payloads])


async def install_claims(
    connection: AsyncConnection, case_id: str, payloads: Sequence[dict[str, Any]], provenance: Provenance
) -> None:
    await connection.execute(
        insert(claims),
        [
            {
                "case_id": case_id,
                "claim_id": p["id"],
                "text": p["text"],
                "kind": p["kind"],
                "confidence": p["confidence"],
                "transformation_note": p["transformationNote"],
                "proposal_rationale": p.get("proposalRationale"),
                "lane": p.get("lane"),
                "display_order": p.get("order"),
                **provenance.columns(),
            }
            for p in payloads
        ],
    )
    await connection.execute(
        insert(claim_sources),
        [
            {"case_id": case_id, "claim_id": p["id"], "source_id": source_id, "position": i}
            for p in payloads
            for i, source_id in enumerate(p["sourceIds"])
        ],
    )


async def install_relations(
    connection: AsyncConnection,
    case_id: str,
    payloads: Sequence[dict[str, Any]],
    provenance: Provenance,
    *,
    verdict_id: str | None = None,
) -> None:
    await connection.execute(
        insert(relations),
        [
            {
                "case_id": case_id,
                "relation_id": p["id"],
                "source_claim_id": p["sourceClaimId"],
                "target_claim_id": p["targetClaimId"],
                "type": p["type"],
                "rationale": p["rationale"],
                "verdict_basis": verdict_id is not None and p["targetClaimId"] == verdict_id,
                **provenance.columns(),
            }
            for p in payloads
        ],
    )


async def install_groups(
    connection: AsyncConnection, case_id: str, payloads: Sequence[dict[str, Any]], provenance: Provenance
) -> None:
    await connection.execute(
        insert(merge_groups),
        [
            {
                "case_id": case_id,
                "group_id": p["groupId"],
                "label": p["label"],
                "confidence": p["confidence"],
                "rationale": p["rationale"],
                **provenance.columns(),
            }
            for p in payloads
        ],
    )
    await connection.execute(
        insert(merge_group_members),
        [
            {"case_id": case_id, "group_id": p["groupId"], "claim_id": claim_id}
            for p in payloads
            for claim_id in p["memberClaimIds"]
        ],
    )


async def supersede_verdict(
    connection: AsyncConnection, case_id: str, new_verdict_id: str, provenance: Provenance
) -> str | None:
    """Mark the active verdict superseded by the new one; return its id (None when there was none)."""
    row = await connection.execute(
        update(claims)
        .where(claims.c.case_id == case_id, claims.c.kind == "verdict", claims.c.status == "active")
        .values(**_ended(provenance, "superseded"), superseded_by=new_verdict_id)
        .returning(claims.c.claim_id)
    )
    return row.scalar_one_or_none()


def _ended(provenance: Provenance, status: str) -> dict[str, Any]:
    return {"status": status, "ended_by": provenance.decided_by, "ended_at": provenance.decided_at,
            "ended_revision": provenance.revision}


async def end_links(
    connection: AsyncConnection, case_id: str, claim_id: str, provenance: Provenance
) -> list[tuple[str, str]]:
    """End the active relations and merge groups that involve a claim leaving the ledger.

    A relation or a restatement group is only as good as its claims: once one of them is retired or
    superseded, the link would count evidence that is no longer canonical. Returns (record, id) pairs.
    """
    relation_rows = await connection.execute(
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
    group_rows = await connection.execute(
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


async def case_history(connection: AsyncConnection, case_id: str, limit: int, before: int | None) -> list[dict]:
    query = select(change_log).where(change_log.c.case_id == case_id)
    if before is not None:
        query = query.where(change_log.c.revision < before)
    rows = await connection.execute(query.order_by(change_log.c.revision.desc()).limit(limit))
    return [dict(r) for r in rows.mappings()]


async def ended_records(
    connection: AsyncConnection, case_id: str, oldest_revision: int, newest_revision: int
) -> list[dict[str, Any]]:
    """Records that left the ledger (superseded or retired) in a range of revisions, oldest first."""
    found: list[dict[str, Any]] = []
    for table, id_column, record in (
        (claims, claims.c.claim_id, "claim"),
        (sources, sources.c.source_id, "source"),
        (relations, relations.c.relation_id, "relation"),
        (merge_groups, merge_groups.c.group_id, "group"),
    ):
        rows = await connection.execute(
            select(id_column.label("id"), table.c.status, table.c.ended_by, table.c.ended_at, table.c.ended_revision,
                   table.c.superseded_by, table.c.revision, table.c.decided_by, table.c.decided_at)
            .where(table.c.case_id == case_id, table.c.status != "active",
                   table.c.ended_revision.between(oldest_revision, newest_revision))
        )
        found += [{"record": record, **r} for r in rows.mappings()]
    return sorted(found, key=lambda r: (r["ended_revision"], r["record"], r["id"]))


async def retire(
    connection: AsyncConnection, case_id: str, record: str, record_id: str, provenance: Provenance
) -> list[tuple[str, str]]:
    """Retire one active source or claim (a claim takes its relations and groups with it); return what else ended."""
    if record == "source":
        await connection.execute(
            update(sources)
            .where(sources.c.case_id == case_id, sources.c.source_id == record_id)
            .values(**_ended(provenance, "retired"))
        )
        return []
    await connection.execute(
        update(claims)
        .where(claims.c.case_id == case_id, claims.c.claim_id == record_id)
        .values(**_ended(provenance, "retired"))
    )
    return await end_links(connection, case_id, record_id, provenance)


async def record_statuses(
    connection: AsyncConnection, case_id: str, source_ids: list[str], claim_ids: list[str]
) -> dict[tuple[str, str], str]:
    found: dict[tuple[str, str], str] = {}
    if source_ids:
        rows = await connection.execute(
            select(sources.c.source_id, sources.c.status).where(
                sources.c.case_id == case_id, sources.c.source_id.in_(source_ids)
            )
        )
        found.update({("source", r.source_id): r.status for r in rows})
    if claim_ids:
        rows = await connection.execute(
            select(claims.c.claim_id, claims.c.status).where(claims.c.case_id == case_id, claims.c.claim_id.in_(claim_ids))
        )
        found.update({("claim", r.claim_id): r.status for r in rows})
    return found


# --- reviewers' read views: decisions of proposals, the proposals behind history, recent decisions -----


async def decisions_of(connection: AsyncConnection, proposal_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Per proposal, its recorded decisions oldest first, each with its item outcomes in the proposal's order."""
    if not proposal_ids:
        return {}
    rows = (
        await connection.execute(
            select(decisions)
            .where(decisions.c.proposal_id.in_(proposal_ids))
            .order_by(decisions.c.decided_at, decisions.c.decision_id)
        )
    ).mappings().all()
    outcomes: dict[str, list[tuple[str, str]]] = {}
    for row in await connection.execute(
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


async def proposals_of_decisions(connection: AsyncConnection, decision_ids: Sequence[str]) -> dict[str, str]:
    """The proposal each decision decided."""
    if not decision_ids:
        return {}
    rows = await connection.execute(
        select(decisions.c.decision_id, decisions.c.proposal_id).where(decisions.c.decision_id.in_(decision_ids))
    )
    return {row.decision_id: row.proposal_id for row in rows}


async def recently_decided(
    connection: AsyncConnection, case_id: str, status: str, limit: int
) -> list[StoredProposal]:
    """Fully decided proposals (status accepted, rejected or decided), the most recently decided first."""
    decided = (
        select(
            item_decisions.c.proposal_id,
            func.count().label("decided"),
            func.count(case((item_decisions.c.outcome == "accepted", 1))).label("accepted"),
            func.max(decisions.c.decided_at).label("last_decided_at"),
        )
        .select_from(item_decisions.join(decisions, decisions.c.decision_id == item_decisions.c.decision_id))
        .where(decisions.c.case_id == case_id)
        .group_by(item_decisions.c.proposal_id)
        .subquery()
    )
    items = (
        select(proposal_items.c.proposal_id, func.count().label("item_total"))
        .select_from(proposal_items.join(proposals, proposals.c.proposal_id == proposal_items.c.proposal_id))
        .where(proposals.c.case_id == case_id)
        .group_by(proposal_items.c.proposal_id)
        .subquery()
    )
    query = (
        select(proposals)
        .join(decided, decided.c.proposal_id == proposals.c.proposal_id)
        .join(items, items.c.proposal_id == proposals.c.proposal_id)
        .where(proposals.c.case_id == case_id, decided.c.decided == items.c.item_total)
    )
    if status == "accepted":
        query = query.where(decided.c.accepted > 0)
    elif status == "rejected":
        query = query.where(decided.c.accepted == 0)
    rows = (
        await connection.execute(
            query.order_by(decided.c.last_decided_at.desc(), proposals.c.proposal_id).limit(limit)
        )
    ).all()
    return await _with_items(connection, rows)
