"""Review use cases: one function per command. Every decision is one transaction."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from services.review import domain, repository
from services.review.repository import Provenance
from shared import ledger, outbox
from shared.contracts import (
    AddGuidance,
    CaseHistory,
    CaseRef,
    CreateCase,
    Decide,
    ListCases,
    ListProposals,
    ProposalRef,
    RecordSources,
    RetireRecords,
)
from shared.db.queries import ledger_facts
from shared.db.tables import case_focus, guidance_notes, proposals
from shared.errors import AlreadyExists, InvalidArgument, NotFound
from shared.events import (
    CaseCreated,
    EventType,
    GuidanceAdded,
    LedgerChange,
    LedgerChanged,
    ProposalDecided,
    case_event,
)
from shared.service import Meta, ServiceContext


def _case_not_found(case_id: str) -> NotFound:
    return NotFound(f"there is no case {case_id!r}", field="caseId", hint="list cases with GET /api/v1/cases")


# --- cases ------------------------------------------------------------------------------------------


async def create_case(ctx: ServiceContext, cmd: CreateCase, meta: Meta) -> dict[str, Any]:
    async with ctx.db.transaction() as connection:
        created = await repository.insert_case(connection, cmd.case_id, cmd.title, cmd.question, cmd.actor.name)
        if not created:
            raise AlreadyExists(
                f"a case {cmd.case_id!r} already exists", field="caseId", hint="choose another case id"
            )
        await outbox.append(
            connection,
            [
                case_event(
                    ctx.subjects,
                    EventType.CASE_CREATED,
                    CaseCreated(case_id=cmd.case_id, title=cmd.title, question=cmd.question,
                                created_by=cmd.actor.name),
                    case_id=cmd.case_id,
                    service=ctx.service.value,
                    revision=0,
                    correlation_id=meta.correlation_id,
                    traceparent=meta.traceparent,
                )
            ],
        )
        case = await repository.get_case(connection, cmd.case_id)
    return _case_view(case)


async def list_cases(ctx: ServiceContext, cmd: ListCases) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        rows = await repository.list_cases(connection)
    return {"cases": [{**_case_view(row), "pendingProposals": row["pending_proposals"]} for row in rows]}


async def get_case(ctx: ServiceContext, cmd: CaseRef) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        case = await repository.get_case(connection, cmd.case_id)
        if case is None:
            raise _case_not_found(cmd.case_id)
        focus = (
            await connection.execute(select(case_focus.c.focus).where(case_focus.c.case_id == cmd.case_id))
        ).scalar_one_or_none()
        pending = await repository.list_proposals(connection, cmd.case_id, "pending", 500)
    return {**_case_view(case), "focus": focus or "all", "pendingProposals": len(pending)}


def _case_view(case: dict[str, Any]) -> dict[str, Any]:
    return {
        "caseId": case["case_id"],
        "title": case["title"],
        "question": case["question"],
        "revision": case["revision"],
        "createdBy": case["created_by"],
        "createdAt": case["created_at"].isoformat(),
    }


async def add_guidance(ctx: ServiceContext, cmd: AddGuidance, meta: Meta) -> dict[str, Any]:
    note_id = str(uuid.uuid4())
    async with ctx.db.transaction() as connection:
        revision = await repository.lock_case(connection, cmd.case_id)
        if revision is None:
            raise _case_not_found(cmd.case_id)
        await connection.execute(
            insert(guidance_notes).values(note_id=note_id, case_id=cmd.case_id, author=cmd.actor.name, text=cmd.text)
        )
        await outbox.append(connection, [case_event(
            ctx.subjects,
            EventType.GUIDANCE_ADDED,
            GuidanceAdded(case_id=cmd.case_id, note_id=note_id, author=cmd.actor.name, text=cmd.text),
            case_id=cmd.case_id,
            service=ctx.service.value,
            revision=revision,
            correlation_id=meta.correlation_id,
            traceparent=meta.traceparent,
        )])
    return {"noteId": note_id, "caseId": cmd.case_id, "author": cmd.actor.name, "text": cmd.text}


async def case_history(ctx: ServiceContext, cmd: CaseHistory) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        if await repository.get_case(connection, cmd.case_id) is None:
            raise _case_not_found(cmd.case_id)
        # One entry more than the page holds says whether an older page exists.
        entries = await repository.case_history(connection, cmd.case_id, limit=cmd.limit + 1, before=cmd.before)
        older = len(entries) > cmd.limit
        entries = entries[: cmd.limit]
        proposal_of = await repository.proposals_of_decisions(
            connection, [e["decision_id"] for e in entries if e["decision_id"]]
        )
        # The records that left the ledger in the revisions this page shows: history pages as one.
        ended = (
            await repository.ended_records(connection, cmd.case_id, entries[-1]["revision"], entries[0]["revision"])
            if entries
            else []
        )
    return {
        "caseId": cmd.case_id,
        "changes": [
            {
                "revision": e["revision"],
                "at": e["at"].isoformat(),
                "actor": e["actor"],
                "summary": e["summary"],
                "decisionId": e["decision_id"],
                "proposalId": proposal_of.get(e["decision_id"]),
                "changes": e["changes"],
            }
            for e in entries
        ],
        "nextBefore": entries[-1]["revision"] if older else None,
        "ended": [
            {
                "record": r["record"],
                "id": r["id"],
                "status": r["status"],
                "introducedInRevision": r["revision"],
                "acceptedBy": r["decided_by"],
                "acceptedAt": r["decided_at"].isoformat(),
                "endedBy": r["ended_by"],
                "endedAt": r["ended_at"].isoformat() if r["ended_at"] else None,
                "endedInRevision": r["ended_revision"],
                "supersededBy": r["superseded_by"],
            }
            for r in ended
        ],
    }


# --- recording sources directly ---------------------------------------------------------------------


async def record_sources(ctx: ServiceContext, cmd: RecordSources, meta: Meta) -> dict[str, Any]:
    payloads = [s.model_dump(mode="json", by_alias=True) for s in cmd.sources]
    found = ledger.duplicate_ids("sources", {"sources": payloads})
    if found:
        raise InvalidArgument(found[0].message, field=found[0].field, hint=found[0].hint)
    now = datetime.now(UTC)
    async with ctx.db.transaction() as connection:
        revision = await repository.lock_case(connection, cmd.case_id)
        if revision is None:
            raise _case_not_found(cmd.case_id)
        domain.check_expected_revision(cmd.expected_revision, revision)
        facts = await ledger_facts(connection, cmd.case_id, revision, ledger.references("sources", payloads))
        for i, payload in enumerate(payloads):
            problems = ledger.check_item("sources", payload, facts)
            if problems:
                problem = problems[0].at(f"sources[{i}]")
                raise AlreadyExists(problem.message, field=problem.field, hint=problem.hint)
        new_revision = await repository.bump_revision(connection, cmd.case_id)
        provenance = Provenance(None, None, None, None, cmd.actor.name, now, new_revision)
        await repository.install_sources(connection, cmd.case_id, payloads, provenance)
        change = LedgerChange(sources_added=[{**p, "provenance": provenance.to_json()} for p in payloads])
        summary = f"{cmd.actor.name} recorded {len(payloads)} source(s)"
        await _log_change(ctx, connection, cmd.case_id, new_revision, revision, cmd.actor.name, summary, change,
                          None, None, meta, now)
    return {"caseId": cmd.case_id, "revision": new_revision, "recorded": [p["id"] for p in payloads]}


async def _log_change(
    ctx: ServiceContext,
    connection: AsyncConnection,
    case_id: str,
    revision: int,
    previous: int,
    actor: str,
    summary: str,
    change: LedgerChange,
    decision_id: str | None,
    proposal_id: str | None,
    meta: Meta,
    at: datetime,
    also: list | None = None,
) -> None:
    changes = change.model_dump(mode="json", by_alias=True)
    await repository.insert_change_log(
        connection,
        case_id=case_id,
        revision=revision,
        decision_id=decision_id,
        actor=actor,
        summary=summary,
        changes=changes,
        correlation_id=meta.correlation_id,
        at=at,
    )
    event = case_event(
        ctx.subjects,
        EventType.LEDGER_CHANGED,
        LedgerChanged(
            case_id=case_id,
            revision=revision,
            previous_revision=previous,
            actor=actor,
            summary=summary,
            decision_id=decision_id,
            proposal_id=proposal_id,
            changes=change,
        ),
        case_id=case_id,
        service=ctx.service.value,
        revision=revision,
        correlation_id=meta.correlation_id,
        traceparent=meta.traceparent,
    )
    await outbox.append(connection, [event, *(also or [])])


async def retire_records(ctx: ServiceContext, cmd: RetireRecords, meta: Meta) -> dict[str, Any]:
    now = datetime.now(UTC)
    wanted = [(r.record, r.id) for r in cmd.records]
    async with ctx.db.transaction() as connection:
        revision = await repository.lock_case(connection, cmd.case_id)
        if revision is None:
            raise _case_not_found(cmd.case_id)
        domain.check_expected_revision(cmd.expected_revision, revision)
        statuses = await repository.record_statuses(
            connection, cmd.case_id, [i for r, i in wanted if r == "source"], [i for r, i in wanted if r == "claim"]
        )
        domain.check_retirable(wanted, statuses)
        new_revision = await repository.bump_revision(connection, cmd.case_id)
        provenance = Provenance(None, None, None, None, cmd.actor.name, now, new_revision)
        retired = []
        for record, record_id in wanted:
            links_ended = await repository.retire(connection, cmd.case_id, record, record_id, provenance)
            retired.append({"record": record, "id": record_id, "note": cmd.note})
            retired += [{"record": kind, "id": linked, "note": f"its claim {record_id} was retired"}
                        for kind, linked in links_ended]
        summary = f"{cmd.actor.name} retired " + ", ".join(f"{r['record']} {r['id']}" for r in retired)
        await _log_change(ctx, connection, cmd.case_id, new_revision, revision, cmd.actor.name, summary,
                          LedgerChange(retired=retired), None, None, meta, now)
    return {"caseId": cmd.case_id, "revision": new_revision, "retired": retired}


# --- proposals and decisions ------------------------------------------------------------------------


async def list_proposals(ctx: ServiceContext, cmd: ListProposals) -> dict[str, Any]:
    """Pending proposals oldest first; decided ones most recently decided first; `all` newest staged first."""
    async with ctx.db.read() as connection:
        case = await repository.get_case(connection, cmd.case_id)
        if case is None:
            raise _case_not_found(cmd.case_id)
        if cmd.status in ("accepted", "rejected", "decided"):
            found = await repository.recently_decided(connection, cmd.case_id, cmd.status, cmd.limit)
        else:
            found = await repository.list_proposals(connection, cmd.case_id, cmd.status, cmd.limit)
        decided = await repository.decisions_of(connection, [p.proposal_id for p in found])
    return {
        "caseId": cmd.case_id,
        "revision": case["revision"],
        "status": cmd.status,
        "proposals": [proposal_view(p, decisions=decided.get(p.proposal_id, [])) for p in found],
    }


async def get_proposal(ctx: ServiceContext, cmd: ProposalRef) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        proposal = await repository.get_proposal(connection, _proposal_id(cmd.proposal_id))
        if proposal is None:
            raise _proposal_not_found(cmd.proposal_id)
        case = await repository.get_case(connection, proposal.case_id)
        pending = [item.item_id for item in proposal.items if item.outcome is None]
        facts = await ledger_facts(connection, proposal.case_id, case["revision"], domain.refs_of(proposal, pending))
        decided = await repository.decisions_of(connection, [proposal.proposal_id])
    previews = {
        item.item_id: domain.would_change(proposal, item, facts) for item in proposal.items if item.outcome is None
    }
    view = proposal_view(proposal, previews=previews, decisions=decided.get(proposal.proposal_id, []))
    view["caseRevision"] = case["revision"]
    view["caseQuestion"] = case["question"]
    return view


def _proposal_id(raw: str) -> str:
    try:
        return str(uuid.UUID(raw))
    except ValueError:
        raise _proposal_not_found(raw) from None


def _proposal_not_found(proposal_id: str) -> NotFound:
    return NotFound(
        f"there is no proposal {proposal_id!r}",
        field="proposalId",
        hint="list a case's proposals with GET /api/v1/cases/{caseId}/proposals",
    )


def proposal_view(
    proposal: domain.StoredProposal,
    previews: dict[str, Any] | None = None,
    decisions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A proposal as reviewers see it: its items, their outcomes, and every decision recorded on it."""
    items = []
    for item in proposal.items:
        entry: dict[str, Any] = {
            "itemId": item.item_id,
            "status": item.outcome or "pending",
            "record": item.payload,
        }
        if item.outcome:
            entry["decidedBy"] = item.decided_by
            entry["decidedAt"] = item.decided_at.isoformat() if item.decided_at else None
            entry["decisionId"] = item.decision_id
        if previews and item.item_id in previews:
            entry["wouldChange"] = previews[item.item_id]
        items.append(entry)
    return {
        "proposalId": proposal.proposal_id,
        "caseId": proposal.case_id,
        "kind": proposal.kind,
        "status": proposal.status,
        "pinnedRevision": proposal.pinned_revision,
        "provenance": {
            "agent": proposal.agent_name,
            "tokenName": proposal.agent_name,
            "tokenId": proposal.token_id,
            "stagedAt": proposal.created_at.isoformat(),
            "pinnedRevision": proposal.pinned_revision,
            "correlationId": proposal.correlation_id,
        },
        "items": items,
        "decisions": [_decision_view(d) for d in decisions or []],
    }


def _decision_view(decision: dict[str, Any]) -> dict[str, Any]:
    """Who decided, when, why, and what became of each item they chose (refused items were left as they were)."""
    return {
        "decisionId": decision["decision_id"],
        "reviewer": decision["reviewer"],
        "decidedAt": decision["decided_at"].isoformat(),
        "note": decision["note"],
        "expectedRevision": decision["expected_revision"],
        "revisionAfter": decision["revision_after"],
        "accepted": [item for item, outcome in decision["outcomes"] if outcome == "accepted"],
        "rejected": [item for item, outcome in decision["outcomes"] if outcome == "rejected"],
        "refused": decision["refused"],
    }


async def decide(ctx: ServiceContext, cmd: Decide, meta: Meta) -> dict[str, Any]:
    proposal_id = _proposal_id(cmd.proposal_id)
    now = datetime.now(UTC)
    async with ctx.db.transaction() as connection:
        case_id = (
            await connection.execute(select(proposals.c.case_id).where(proposals.c.proposal_id == proposal_id))
        ).scalar_one_or_none()
        if case_id is None:
            raise _proposal_not_found(cmd.proposal_id)
        revision = await repository.lock_case(connection, case_id)
        domain.check_expected_revision(cmd.expected_revision, revision)
        # Read the items only now, under the case lock, so decisions committed meanwhile are seen.
        proposal = await repository.get_proposal(connection, proposal_id)
        domain.check_request(proposal, cmd.accept, cmd.reject)
        facts = await ledger_facts(connection, case_id, revision, domain.refs_of(proposal, cmd.accept))
        plan = domain.plan(proposal, cmd.accept, cmd.reject, facts)
        result = {
            "proposalId": proposal_id,
            "caseId": case_id,
            "revision": revision,
            "accepted": [i.item_id for i in plan.accepted],
            "rejected": [i.item_id for i in plan.rejected],
            "refused": plan.refused,
        }
        if not plan.accepted and not plan.rejected:
            # Every chosen item was refused: nothing is stored, the note included; the reply says so.
            return {**result, "decisionId": None, "status": proposal.status, "recorded": False}
        decision_id = str(uuid.uuid4())
        revision_after = revision + 1 if plan.accepted else revision
        decided = case_event(
            ctx.subjects,
            EventType.PROPOSAL_DECIDED,
            ProposalDecided(
                case_id=case_id,
                proposal_id=proposal_id,
                decision_id=decision_id,
                reviewer=cmd.actor.name,
                accepted=result["accepted"],
                rejected=result["rejected"],
                refused=plan.refused,
                note=cmd.note,
                revision=revision_after,
            ),
            case_id=case_id,
            service=ctx.service.value,
            revision=revision_after,
            correlation_id=meta.correlation_id,
            traceparent=meta.traceparent,
        )
        await repository.insert_decision(
            connection,
            decision_id=decision_id,
            proposal=proposal,
            reviewer=cmd.actor.name,
            note=cmd.note,
            expected_revision=cmd.expected_revision,
            revision_after=revision_after if plan.accepted else None,
            refused=plan.refused,
            correlation_id=meta.correlation_id,
            decided_at=now,
            outcomes=[(i.item_id, "accepted") for i in plan.accepted] + [(i.item_id, "rejected") for i in plan.rejected],
        )
        if plan.accepted:
            await repository.bump_revision(connection, case_id)
            provenance = Provenance(
                proposal_id, proposal.agent_name, proposal.created_at, decision_id, cmd.actor.name, now, revision_after
            )
            change = await _install(connection, proposal, plan.accepted, provenance)
            summary = (
                f"{cmd.actor.name} accepted {len(plan.accepted)} {proposal.kind} item(s) of proposal "
                f"{proposal_id} staged by {proposal.agent_name}"
            )
            await _log_change(ctx, connection, case_id, revision_after, revision, cmd.actor.name, summary, change,
                              decision_id, proposal_id, meta, now, also=[decided])
        else:
            await outbox.append(connection, [decided])
    return {**result, "revision": revision_after, "decisionId": decision_id,
            "status": domain.status_after(proposal, plan), "recorded": True}


async def _install(
    connection: AsyncConnection,
    proposal: domain.StoredProposal,
    accepted: list[domain.StoredItem],
    provenance: Provenance,
) -> LedgerChange:
    """Write the accepted items as canonical records; return what changed, for the change log and event."""
    case_id = proposal.case_id
    payloads = [item.payload for item in accepted]
    stamped = [{**p, "provenance": provenance.to_json()} for p in payloads]
    if proposal.kind == "sources":
        await repository.install_sources(connection, case_id, payloads, provenance)
        return LedgerChange(sources_added=stamped)
    if proposal.kind == "claims":
        await repository.install_claims(connection, case_id, payloads, provenance)
        return LedgerChange(claims_added=stamped)
    if proposal.kind == "relations":
        await repository.install_relations(connection, case_id, payloads, provenance)
        return LedgerChange(relations_added=stamped)
    if proposal.kind == "merge":
        await repository.install_groups(connection, case_id, payloads, provenance)
        return LedgerChange(groups_added=stamped)
    patch = payloads[0]
    verdict = patch["claim"]
    previous = await repository.supersede_verdict(connection, case_id, verdict["id"], provenance)
    links_ended = await repository.end_links(connection, case_id, previous, provenance) if previous else []
    await repository.install_claims(connection, case_id, [verdict], provenance)
    await repository.install_relations(connection, case_id, patch["relations"], provenance, verdict_id=verdict["id"])
    return LedgerChange(
        claims_added=[{**verdict, "bases": ledger.verdict_bases(patch), "provenance": provenance.to_json()}],
        relations_added=[{**r, "provenance": provenance.to_json()} for r in patch["relations"]],
        superseded=[{"record": "claim", "id": previous, "supersededBy": verdict["id"]}] if previous else [],
        retired=[
            {"record": kind, "id": linked, "note": f"its claim {previous} was superseded by {verdict['id']}"}
            for kind, linked in links_ended
        ],
    )
