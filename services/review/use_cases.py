"""Review use cases: one function per command, each one unit of work. Every decision is one transaction."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from services.review import checks_view, domain, duplicate_views, graph, queue, resolutions, views
from services.review.ports import ReviewUnitOfWork
from shared import health, id_prefix, kinds
from shared.as_of import check_as_of
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
from shared.errors import AlreadyExists, InvalidArgument
from shared.events import (
    AddedVerdict,
    CaseCreated,
    ClaimGrounding,
    GuidanceAdded,
    LedgerChange,
    LedgerChanged,
    ProposalDecided,
    ReratedRecord,
    case,
)
from shared.graph_contracts import CaseGraphRef
from shared.ledger import Provenance, References

# --- cases ------------------------------------------------------------------------------------------


async def create_case(cmd: CreateCase, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow:
        if not await uow.cases.add(cmd.case_id, cmd.title, cmd.question, cmd.actor.name):
            raise AlreadyExists(f"a case {cmd.case_id!r} already exists", field="caseId", hint="choose another case id")
        uow.emit(case(cmd.case_id), CaseCreated(case_id=cmd.case_id, title=cmd.title, question=cmd.question,
                                                created_by=cmd.actor.name), revision=0)
        created = await uow.cases.get(cmd.case_id)
        await uow.commit()
    return views.case_view(created)


async def list_cases(cmd: ListCases, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        rows = await uow.cases.all()
    return {"cases": [{**views.case_view(row), "pendingProposals": row["pending_proposals"]} for row in rows]}


async def get_case(cmd: CaseRef, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        found = await _existing(uow, cmd.case_id)
        focus = await uow.cases.focus(cmd.case_id)
        pending = await uow.proposals.listed(cmd.case_id, "pending", 500)
    return {**views.case_view(found), "focus": focus or "all", "pendingProposals": len(pending)}


async def add_guidance(cmd: AddGuidance, uow: ReviewUnitOfWork) -> dict[str, Any]:
    note_id = str(uuid.uuid4())
    async with uow:
        revision = await uow.cases.lock(cmd.case_id)
        if revision is None:
            raise domain.case_not_found(cmd.case_id)
        await uow.cases.add_guidance(note_id, cmd.case_id, cmd.actor.name, cmd.text)
        uow.emit(case(cmd.case_id), GuidanceAdded(case_id=cmd.case_id, note_id=note_id, author=cmd.actor.name,
                                                  text=cmd.text), revision=revision)
        await uow.commit()
    return {"noteId": note_id, "caseId": cmd.case_id, "author": cmd.actor.name, "text": cmd.text}


async def case_history(cmd: CaseHistory, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        await _existing(uow, cmd.case_id)
        # One entry more than the page holds says whether an older page exists.
        entries = await uow.ledger.history(cmd.case_id, limit=cmd.limit + 1, before=cmd.before)
        older, entries = len(entries) > cmd.limit, entries[: cmd.limit]
        proposal_of = await uow.proposals.proposals_of_decisions([e["decision_id"] for e in entries
                                                                   if e["decision_id"]])
        # The records that left the ledger in the revisions this page shows: history pages as one.
        ended = await uow.ledger.ended(cmd.case_id, entries[-1]["revision"], entries[0]["revision"]) if entries else []
    return views.history_view(cmd.case_id, entries, older, proposal_of, ended)


async def case_graph(cmd: CaseGraphRef, uow: ReviewUnitOfWork) -> dict[str, Any]:
    """The argument map of the case: its active records and their evidence health, bounded (around a focus);
    as of a past revision, the records active then, rated as they were then."""
    async with uow.read():
        found = await _existing(uow, cmd.case_id)
        if cmd.as_of is not None:
            check_as_of(cmd.as_of, found["revision"])
        records = await uow.ledger.graph(cmd.case_id, cmd.as_of)
        resolved = await uow.resolutions.latest_in_case(cmd.case_id, cmd.as_of)
    revision = found["revision"] if cmd.as_of is None else cmd.as_of
    view = graph.graph_view(cmd.case_id, revision, records, focus=cmd.focus)
    for node in view["nodes"]:
        if node["id"] in resolved and node["kind"] == "claim":
            node["resolution"] = resolutions.node_resolution(resolved[node["id"]])
    return view


# --- a reviewer's own changes: recording sources, retiring records ------------------------------------


async def record_sources(cmd: RecordSources, uow: ReviewUnitOfWork) -> dict[str, Any]:
    sources = kinds.SOURCES
    undated = [p.at(sources.where(i)) for i, source in enumerate(cmd.sources)
               for p in kinds.unwritten(source) + kinds.undated(source)]
    if faults := sources.duplicates(cmd.sources) + undated:
        raise InvalidArgument.of(faults)
    async with uow:
        revision = await _locked(uow, cmd.case_id, cmd.expected_revision)
        facts = await uow.ledger.facts(cmd.case_id, revision, References.union(
            sources.references(s) for s in cmd.sources))
        if taken := sources.misfits(cmd.sources, facts):
            raise AlreadyExists.of(taken)
        step_revision = await uow.cases.bump(cmd.case_id)
        provenance = Provenance.recorded(cmd.actor.name, uow.now(), step_revision)
        change = await sources.install(uow.ledger, cmd.case_id, cmd.sources, provenance)
        await _step(uow, domain.ledger_changed(cmd.case_id, step_revision, cmd.actor.name,
                                               f"{cmd.actor.name} recorded {len(cmd.sources)} source(s)", change),
                    provenance.decided_at)
        await uow.commit()
    return {"caseId": cmd.case_id, "revision": step_revision, "recorded": [s.id for s in cmd.sources]}


async def retire_records(cmd: RetireRecords, uow: ReviewUnitOfWork) -> dict[str, Any]:
    wanted = [(r.record, r.id) for r in cmd.records]
    async with uow:
        await _locked(uow, cmd.case_id, cmd.expected_revision)
        statuses = await uow.ledger.statuses(cmd.case_id, [i for r, i in wanted if r == "source"],
                                             [i for r, i in wanted if r == "claim"])
        domain.check_retirable(wanted, statuses)
        step_revision = await uow.cases.bump(cmd.case_id)
        provenance = Provenance.recorded(cmd.actor.name, uow.now(), step_revision)
        retired, ended = [], []
        for record, record_id in wanted:
            links_ended = await uow.ledger.retire(cmd.case_id, record, record_id, provenance)
            retired.append({"record": record, "id": record_id, "note": cmd.note})
            retired += [{"record": kind, "id": linked, "note": f"its claim {record_id} was retired"}
                        for kind, linked in links_ended]
            ended += links_ended
        await uow.ledger.note_retirement(cmd.case_id, step_revision, cmd.actor.name, cmd.note, wanted, ended,
                                         provenance.decided_at)
        rerated, citing = await _rerate(uow, cmd.case_id, [(r["record"], r["id"]) for r in retired], step_revision)
        summary = f"{cmd.actor.name} retired " + ", ".join(f"{r['record']} {r['id']}" for r in retired)
        change = LedgerChange(retired=retired, rerated=rerated,
                              grounding=await _grounding(uow, cmd.case_id, citing))
        await _step(uow, domain.ledger_changed(cmd.case_id, step_revision, cmd.actor.name, summary, change),
                    provenance.decided_at)
        await uow.commit()
    return {"caseId": cmd.case_id, "revision": step_revision, "retired": retired, "rerated": rerated}


async def _rerate(uow: ReviewUnitOfWork, case_id: str, retired: list[tuple[str, str]],
                  revision: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Re-rate what leaned on the records just retired (evidence health), recorded in the same transaction;
    and name the active claims that cited a source retired (their grounding changes with it)."""
    citations = await uow.ledger.citations_of(case_id, [i for record, i in retired if record == "source"])
    verdict_id, bases = await uow.ledger.verdict_bases(case_id)
    ratings = health.rerate(retired=retired, citations=citations, verdict_id=verdict_id, bases=bases,
                            current=await uow.ledger.ratings(case_id))
    await uow.ledger.rate(case_id, ratings, revision)
    return [r.to_json() for r in ratings], list(citations)


async def _grounding(uow: ReviewUnitOfWork, case_id: str, claim_ids: list[str]) -> list[ClaimGrounding]:
    """The grounding of these claims from the sources active now (inside the change's transaction)."""
    found = await uow.ledger.grounding(case_id, claim_ids)
    return [ClaimGrounding(claim_id=claim_id, grounding=g["grounding"], independent_origins=g["independentOrigins"])
            for claim_id, g in found.items()]


async def _existing(uow: ReviewUnitOfWork, case_id: str) -> dict[str, Any]:
    found = await uow.cases.get(case_id)
    if found is None:
        raise domain.case_not_found(case_id)
    return found


async def _locked(uow: ReviewUnitOfWork, case_id: str, expected_revision: int | None) -> int:
    revision = await uow.cases.lock(case_id)
    if revision is None:
        raise domain.case_not_found(case_id)
    domain.check_expected_revision(expected_revision, revision)
    return revision


async def _step(uow: ReviewUnitOfWork, step: LedgerChanged, at: datetime) -> None:
    """Log one revision of the ledger and emit its `ledger.changed` event, in the unit of work. `at` is the one
    clock reading of the change: the time its records were installed or ended at, so that the revision's time
    (PROV: its activity's start and end) and theirs (generated, invalidated) are the same instant."""
    await uow.ledger.log(step, at, uow.origin.correlation_id)
    uow.emit(case(step.case_id), step, revision=step.revision)


# --- proposals and decisions ------------------------------------------------------------------------


async def list_proposals(cmd: ListProposals, uow: ReviewUnitOfWork) -> dict[str, Any]:
    """Pending proposals oldest first; decided ones most recently decided first; `all` newest staged first."""
    async with uow.read():
        found_case = await _existing(uow, cmd.case_id)
        if not queue.plain_listing(cmd):  # filtered, ordered by age, paged (services/review/queue.py)
            return await queue.list_proposals(cmd, uow, found_case)
        found = await uow.proposals.recently_decided(cmd.case_id, cmd.status, cmd.limit)
        decided = await uow.proposals.decisions_of([p.proposal_id for p in found])
    return {
        "caseId": cmd.case_id,
        "revision": found_case["revision"],
        "status": cmd.status,
        "proposals": [views.proposal_view(p, decisions=decided.get(p.proposal_id, [])) for p in found],
    }


async def _proposal_id(uow: ReviewUnitOfWork, raw: str) -> str:
    """The proposal id `raw` names: itself when whole, else the one id it is a unique prefix of."""
    return await id_prefix.resolve(raw, uow.proposals.ids_between, what="proposal", field="proposalId",
                                   hint=domain.PROPOSALS_HINT)


async def get_proposal(cmd: ProposalRef, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        proposal = await uow.proposals.get(await _proposal_id(uow, cmd.proposal_id))
        if proposal is None:
            raise domain.proposal_not_found(cmd.proposal_id)
        found_case = await uow.cases.get(proposal.case_id)
        pending = [item.item_id for item in proposal.items if item.outcome is None]
        facts = await uow.ledger.facts(proposal.case_id, found_case["revision"], domain.refs_of(proposal, pending))
        decided = await uow.proposals.decisions_of([proposal.proposal_id])
        cited = await uow.ledger.evidence(proposal.case_id, domain.refs_of(proposal, [i.item_id for i in proposal.items]))
        flags = await uow.proposals.possible_duplicates(proposal.case_id, [proposal.proposal_id])
        checked = await checks_view.annotations(uow.ledger, proposal.case_id, proposal.kind,
                                                {i.item_id: proposal.typed(i) for i in proposal.items})
    previews = {i.item_id: domain.would_change(proposal, i, facts) for i in proposal.items if i.outcome is None}
    evidence = {i.item_id: views.evidence_view(proposal.item_kind, proposal.typed(i), cited) for i in proposal.items}
    view = views.proposal_view(proposal, previews=previews, decisions=decided.get(proposal.proposal_id, []),
                               evidence=evidence)
    view = duplicate_views.with_possible_duplicates(view, flags)
    for entry in view["items"]:
        entry.update(checked[entry["itemId"]])
    return {**view, "caseRevision": found_case["revision"], "caseQuestion": found_case["question"]}


async def decide(cmd: Decide, uow: ReviewUnitOfWork) -> dict[str, Any]:
    async with uow:
        proposal_id = await _proposal_id(uow, cmd.proposal_id)
        case_id = await uow.proposals.case_of(proposal_id)
        if case_id is None:
            raise domain.proposal_not_found(cmd.proposal_id)
        digest = domain.request_digest(cmd.accept, cmd.reject, cmd.note, cmd.expected_revision,
                                       [(d.item_id, d.of) for d in cmd.duplicates])
        revision = await uow.cases.lock(case_id)
        # Read only now, under the case lock, so decisions committed meanwhile are seen: a repeat of a
        # recorded decision gets that decision back, even once the revision has moved on.
        proposal = await uow.proposals.get(proposal_id)
        if recorded := await uow.proposals.decision_by_digest(proposal_id, cmd.actor.name, digest):
            return views.recorded_decision(proposal, recorded)
        domain.check_expected_revision(cmd.expected_revision, revision)
        queue.check_duplicates(proposal, cmd)
        domain.check_rejection_note(cmd.reject, cmd.note)
        reject, note = await queue.resolve_duplicates(cmd, proposal, uow)  # "a duplicate of X" is a rejection
        domain.check_request(proposal, cmd.accept, reject)
        facts = await uow.ledger.facts(case_id, revision, domain.refs_of(proposal, cmd.accept))
        plan = domain.plan(proposal, cmd.accept, reject, facts)
        if not plan.records_anything:
            # Every chosen item was refused: nothing is stored, the note included; the reply says so.
            return views.decided(proposal, plan, revision=revision, decision_id=None)
        decision = domain.new_decision(proposal, plan, reviewer=cmd.actor.name, note=note,
                                       expected_revision=cmd.expected_revision, revision=revision,
                                       correlation_id=uow.origin.correlation_id, at=uow.now(), digest=digest)
        await uow.proposals.record(decision)
        if plan.changes_ledger:
            await _install(uow, proposal, plan, decision)
        uow.emit(case(case_id), ProposalDecided(
            case_id=case_id, proposal_id=proposal_id, decision_id=decision.decision_id, reviewer=cmd.actor.name,
            accepted=[i.item_id for i in plan.accepted], rejected=[i.item_id for i in plan.rejected],
            refused=plan.refused, note=note, revision=decision.revision_after or revision,
        ), revision=decision.revision_after or revision)
        await uow.commit()
    return views.decided(proposal, plan, revision=decision.revision_after or revision,
                         decision_id=decision.decision_id)


async def _install(uow: ReviewUnitOfWork, proposal: domain.StoredProposal, plan: domain.DecisionPlan,
                   decision: domain.Decision) -> None:
    """Install the accepted items as canonical records, in one new revision."""
    revision = await uow.cases.bump(proposal.case_id)
    provenance = domain.provenance_of(proposal, decision)
    change = await proposal.item_kind.install(uow.ledger, proposal.case_id,
                                              [proposal.typed(i) for i in plan.accepted], provenance)
    if any(isinstance(claim, AddedVerdict) for claim in change.claims_added):  # a verdict may rest on lost support
        rerated, _ = await _rerate(uow, proposal.case_id, [], revision)
        change = change.model_copy(update={"rerated": [ReratedRecord.model_validate(r) for r in rerated]})
    if change.claims_added:
        change = change.model_copy(update={
            "grounding": await _grounding(uow, proposal.case_id, [c.id for c in change.claims_added])})
    await _step(uow, domain.ledger_changed(proposal.case_id, revision, decision.reviewer,
                                           domain.accepted_summary(proposal, plan, decision.reviewer), change,
                                           decision.decision_id, proposal.proposal_id), provenance.decided_at)
