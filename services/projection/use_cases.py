"""Projection use cases: the agents' read views and the presentation focus."""

from __future__ import annotations

import uuid
from typing import Any

from services.projection import domain, repository
from shared import ledger, outbox
from shared.contracts import (
    CaseRef,
    GetCompanyContextArgs,
    GetWorkspaceArgs,
    InspectSourcesArgs,
    SetFocusArgs,
    ToolRequest,
)
from shared.db.queries import lock_case_shared
from shared.errors import InvalidArgument, NoActiveCase, NotFound
from shared.events import EventType, FocusChanged, case_event
from shared.service import Meta, ServiceContext

PAGED = ("unresolved", "guidance")


async def get_workspace(ctx: ServiceContext, request: ToolRequest[GetWorkspaceArgs], meta: Meta) -> dict[str, Any]:
    scope = request.args.scope or "summary"
    if request.args.cursor is not None and scope not in PAGED:
        raise InvalidArgument(
            f"cursor pages only the unresolved and guidance sections, not {scope!r}",
            field="cursor",
            hint="omit cursor, or use it with scope=unresolved or scope=guidance",
        )
    agent = request.actor.name
    async with ctx.db.transaction() as connection:
        case_id = await _active_case(ctx, connection, agent)
        case = await repository.case_row(connection, case_id)
        await repository.record_discovery(connection, agent, case_id, case.revision)
    async with ctx.db.read() as connection:
        case = await repository.case_row(connection, case_id)
        focus = await repository.focus_of(connection, case_id)
        view = await current_view(connection, case)
        workspace: dict[str, Any] = {
            "caseId": case_id,
            "workspaceRevision": case.revision,
            "scope": scope,
            "focus": focus,
            "title": case.title,
            "question": case.question,
        }
        if scope in ("summary", "all"):
            workspace.update(await _summary(connection, case_id, view))
        if scope in ("claims", "all"):
            snapshot = await repository.snapshot(connection, case_id, case.revision)
            workspace["claims"] = _claims(snapshot, focus)
        if scope in ("sources", "all"):
            snapshot = await repository.snapshot(connection, case_id, case.revision)
            workspace["sources"] = await _sources(connection, case_id, snapshot, focus)
        if scope in ("proposals", "all"):
            workspace["proposals"] = await _proposals(connection, case_id, agent)
        if scope in ("unresolved", "all"):
            workspace["unresolved"] = domain.page(view["unresolved"], request.args.cursor, "unresolved")
        if scope in ("guidance", "all"):
            workspace["guidance"] = domain.page(_guidance(view), request.args.cursor, "guidance")
    return workspace


async def current_view(connection: Any, case: Any) -> dict[str, Any]:
    """The case's read model when it is up to date with the ledger and its guidance; else computed now."""
    stored = await repository.stored_view(connection, case.case_id)
    marker = await repository.guidance_marker(connection, case.case_id)
    if stored is not None and stored["revision"] == case.revision and stored["guidance_marker"] == marker:
        return stored
    return await compute_view(connection, case.case_id, case.revision) | {"guidance_marker": marker}


async def compute_view(connection: Any, case_id: str, revision: int) -> dict[str, Any]:
    snapshot = await repository.snapshot(connection, case_id, revision)
    return domain.case_view(snapshot, await repository.guidance(connection, case_id))


async def _active_case(ctx: ServiceContext, connection: Any, agent: str) -> str:
    """The agent's assigned case, else the deployment's default, else the only case there is."""
    case_id = await repository.assigned_case(connection, agent)
    case_id = case_id or ctx.settings.default_case or await repository.only_case(connection)
    if case_id is None or await repository.case_row(connection, case_id) is None:
        raise NoActiveCase(
            f"no case is assigned to agent {agent!r}",
            hint=f"ask an operator to assign one (PUT /api/v1/agents/{agent}/active-case or "
            "`threadline token create --case`), then call get_workspace again",
        )
    return case_id


async def _summary(connection: Any, case_id: str, view: dict[str, Any]) -> dict[str, Any]:
    pending = await repository.pending_by_kind(connection, case_id)
    counts = view["summary"]["counts"]
    verdict = view["summary"]["verdict"] | {"pendingProposals": pending.get("verdict", 0)}
    return {
        "counts": {
            **counts,
            "pendingProposals": {"total": sum(pending.values()), "byKind": pending},
            "unresolved": len(view["unresolved"]),
        },
        "verdict": verdict,
        "evidenceHealth": view["summary"]["evidenceHealth"],
        "nextSteps": domain.next_steps(
            sources=counts["sources"]["total"],
            claims=counts["claims"]["total"],
            relations=counts["relations"]["total"],
            has_verdict=verdict["state"] == "accepted",
            pending=sum(pending.values()),
            unresolved_count=len(view["unresolved"]),
        ),
        "sections": "get_workspace scope=claims|sources|proposals|unresolved|guidance|all for detail",
    }


def _claims(
    snapshot: domain.LedgerSnapshot, focus: str, cap: int = domain.CLAIMS_CAP, with_verdict: bool = True
) -> dict[str, Any]:
    ordered = [c for c in domain.focus_order(snapshot, focus) if with_verdict or c.kind != "verdict"]
    listed, omitted = domain.capped(ordered, cap)
    support = domain.support(snapshot)
    groups_of: dict[str, list[str]] = {}
    for group_id, members in snapshot.groups.items():
        for member in members:
            groups_of.setdefault(member, []).append(group_id)
    open_by_claim: dict[str, list[str]] = {}
    for item in domain.unresolved(snapshot):
        if "claimId" in item:
            open_by_claim.setdefault(item["claimId"], []).append(item["type"])
    return {
        "total": len(ordered),
        "omitted": omitted,
        "items": [
            {
                "claimId": c.claim_id,
                "text": c.text,
                "kind": c.kind,
                "confidence": c.confidence,
                "lane": c.lane,
                "order": c.order,
                "sourceIds": list(c.source_ids),
                "revision": c.revision,
                "groups": sorted(groups_of.get(c.claim_id, []))[: domain.GROUPS_PER_CLAIM_CAP],
                "groupsOmitted": max(0, len(groups_of.get(c.claim_id, [])) - domain.GROUPS_PER_CLAIM_CAP),
                "independentSupport": support.get(c.claim_id, {}).get("supports", 0),
                "independentContradiction": support.get(c.claim_id, {}).get("contradicts", 0),
                "unresolved": open_by_claim.get(c.claim_id, []),
            }
            for c in listed
        ],
    }


async def _sources(connection: Any, case_id: str, snapshot: domain.LedgerSnapshot, focus: str) -> dict[str, Any]:
    rows = domain.sources_in_focus(await repository.source_list(connection, case_id),
                                   domain.focus_order(snapshot, focus), focus)
    listed, omitted = domain.capped(rows, domain.SOURCES_CAP)
    return {
        "total": len(rows),
        "omitted": omitted,
        "note": "metadata only; read evidence text with inspect_sources",
        "items": [
            {
                "sourceId": r["source_id"],
                "publisher": r["publisher"],
                "title": r["title"],
                "url": r["url"],
                "type": r["type"],
                "publicationDate": r["publication_date"],
                "snapshotDate": r["snapshot_date"],
                "authority": r["authority"],
                "revision": r["revision"],
                "transcriptions": r["transcriptions"],
                "derivedClaims": r["derived"],
            }
            for r in listed
        ],
    }


async def _proposals(connection: Any, case_id: str, agent: str) -> dict[str, Any]:
    pending = await repository.pending_proposals(connection, case_id)
    listed, omitted = domain.capped(pending, domain.PROPOSALS_CAP)
    mine = await repository.agent_recent_proposals(connection, case_id, agent, 10)
    items = await repository.proposal_items_status(
        connection, list({p["proposal_id"] for p in [*listed, *mine]})
    )

    def view(p: dict[str, Any]) -> dict[str, Any]:
        statuses = items.get(p["proposal_id"], [])
        return {
            "proposalId": p["proposal_id"],
            "kind": p["kind"],
            "agent": p["agent_name"],
            "stagedAt": p["created_at"].isoformat(),
            "pinnedRevision": p["pinned_revision"],
            "items": statuses,
        }

    return {
        "pending": {"total": len(pending), "omitted": omitted, "items": [view(p) for p in listed]},
        "yourRecent": [view(p) for p in mine],
    }


def _guidance(view: dict[str, Any]) -> list[dict[str, Any]]:
    """Reviewers' notes newest first, then the gaps the ledger shows."""
    gaps = [
        {"type": "gap", "gap": item["type"], "claimId": item.get("claimId"), "note": item["action"]}
        for item in view["unresolved"]
    ]
    return view["guidance"] + gaps


LEDGER_CLAIMS_CAP = 500
LEDGER_GUIDANCE_CAP = 20


async def case_ledger(ctx: ServiceContext, cmd: CaseRef) -> dict[str, Any]:
    """The whole canonical ledger of a case for reviewers, claims in the order of the case's focus."""
    async with ctx.db.read() as connection:
        case = await repository.case_row(connection, cmd.case_id)
        if case is None:
            raise NotFound(f"there is no case {cmd.case_id!r}", field="caseId", hint="list cases first")
        focus = await repository.focus_of(connection, cmd.case_id)
        snapshot = await repository.snapshot(connection, cmd.case_id, case.revision)
        provenance = await repository.provenance_of_claims(connection, cmd.case_id)
        sources = domain.sources_in_focus(await repository.source_list(connection, cmd.case_id),
                                          domain.focus_order(snapshot, focus), focus)
        groups = await repository.group_list(connection, cmd.case_id)
        pending = await repository.pending_proposals(connection, cmd.case_id)
        pending_items = await repository.proposal_items_status(connection, [p["proposal_id"] for p in pending])
        guidance = (await current_view(connection, case))["guidance"]
    claims = _claims(snapshot, focus, cap=LEDGER_CLAIMS_CAP, with_verdict=False)
    for claim in claims["items"]:
        claim["provenance"] = provenance.get(claim["claimId"])
    verdict = snapshot.verdict
    return {
        "caseId": case.case_id,
        "title": case.title,
        "question": case.question,
        "revision": case.revision,
        "focus": focus,
        "verdict": domain.verdict_view(snapshot) | ({"provenance": provenance.get(verdict.claim_id)} if verdict
                                                    else {}),
        "claims": claims,
        "sources": [
            {"sourceId": r["source_id"], "publisher": r["publisher"], "title": r["title"], "url": r["url"],
             "type": r["type"], "publicationDate": r["publication_date"], "revision": r["revision"],
             "derivedClaims": r["derived"]}
            for r in sources
        ],
        "relations": [
            {"relationId": r.relation_id, "sourceClaimId": r.source_claim_id, "targetClaimId": r.target_claim_id,
             "type": r.type, "verdictBasis": r.verdict_basis}
            for r in snapshot.relations
        ],
        "groups": [
            {"groupId": g["group_id"], "label": g["label"], "confidence": g["confidence"],
             "members": sorted(snapshot.groups.get(g["group_id"], []))}
            for g in groups
        ],
        "unresolved": len(domain.unresolved(snapshot)),
        "guidance": guidance[:LEDGER_GUIDANCE_CAP],
        "pendingProposals": [
            {"proposalId": p["proposal_id"], "kind": p["kind"], "agent": p["agent_name"],
             "stagedAt": p["created_at"].isoformat(), "pinnedRevision": p["pinned_revision"],
             "items": pending_items.get(p["proposal_id"], [])}
            for p in pending
        ],
    }


async def inspect_sources(
    ctx: ServiceContext, request: ToolRequest[InspectSourcesArgs], meta: Meta
) -> dict[str, Any]:
    args = request.args
    async with ctx.db.read() as connection:
        await _check_discovered(connection, request.actor.name, args.expected_case_id)
        found = await repository.sources_by_id(connection, args.expected_case_id, list(args.source_ids))
        derived = await repository.derived_claims(
            connection, args.expected_case_id, list(found), domain.DERIVED_CLAIMS_CAP
        )
    records = []
    for source_id in args.source_ids:
        source = found.get(source_id)
        if source is None:
            continue
        claims, omitted = derived.get(source_id, ([], 0))
        # Labels and derived claims' texts are agent-written too: they go inside the frame, ids outside.
        body = domain.record_body(source, source["transcriptions"], claims, omitted)
        framed = domain.frame_record(source_id, body)
        records.append(
            {
                "sourceId": source_id,
                "status": source["status"],
                "trust": domain.UNTRUSTED_NOTICE,
                "nonce": framed["nonce"],
                "record": framed["text"],
                "transcriptions": len(source["transcriptions"]),
                "derivedClaims": [{k: c[k] for k in ("claimId", "kind", "confidence")} for c in claims],
                "derivedClaimsOmitted": omitted,
            }
        )
    unknown = [s for s in args.source_ids if s not in found]
    return {
        "caseId": args.expected_case_id,
        "records": records,
        "unknownSourceIds": unknown,
        **(
            {"unknownHint": "these ids are not canonical sources of the case; list them with "
                            "get_workspace scope=sources"}
            if unknown
            else {}
        ),
    }


async def _check_discovered(connection: Any, agent: str, expected_case_id: str) -> None:
    ledger.check_discovered(expected_case_id, await repository.discovered_case(connection, agent))


async def set_focus(ctx: ServiceContext, request: ToolRequest[SetFocusArgs], meta: Meta) -> dict[str, Any]:
    args = request.args
    agent = request.actor.name
    async with ctx.db.transaction() as connection:
        await _check_discovered(connection, agent, args.expected_case_id)
        # Shared case lock: no decision commits in between, so this event never trails a later revision.
        await lock_case_shared(connection, args.expected_case_id)
        case = await repository.case_row(connection, args.expected_case_id)
        if case is None:
            raise NotFound(f"there is no case {args.expected_case_id!r}", field="expectedCaseId",
                           hint="call get_workspace first")
        previous = await repository.set_focus(connection, args.expected_case_id, args.focus, agent)
        if previous != args.focus:
            await outbox.append(
                connection,
                [
                    case_event(
                        ctx.subjects,
                        EventType.FOCUS_CHANGED,
                        FocusChanged(case_id=args.expected_case_id, previous=previous, focus=args.focus, agent=agent),
                        case_id=args.expected_case_id,
                        service=ctx.service.value,
                        revision=case.revision,
                        correlation_id=meta.correlation_id,
                        traceparent=meta.traceparent,
                    )
                ],
            )
    return {
        "caseId": args.expected_case_id,
        "previousFocus": previous,
        "focus": args.focus,
        "workspaceRevision": case.revision,
        "note": "presentation only: the ledger and its revision are unchanged",
    }


# --- read models, kept by change events -------------------------------------------------------------

REFRESHING = {
    EventType.CASE_CREATED.value,
    EventType.LEDGER_CHANGED.value,
    EventType.PROPOSAL_DECIDED.value,
    EventType.GUIDANCE_ADDED.value,
}


async def apply_event(ctx: ServiceContext, envelope: dict[str, Any], stream_seq: int) -> bool:
    """Apply one change event to the read models, exactly once; False when it was applied before."""
    async with ctx.db.transaction() as connection:
        if not await repository.record_applied(connection, envelope["id"], envelope["type"], stream_seq):
            return False
        if envelope["type"] in REFRESHING:
            await refresh_view(connection, envelope["data"]["caseId"])
    return True


async def refresh_view(connection: Any, case_id: str) -> None:
    """Recompute a case's view from the ledger. The shared case lock keeps decisions out meanwhile, so
    concurrent refreshes (several replicas) each see a settled ledger and write in ledger order."""
    await lock_case_shared(connection, case_id)
    case = await repository.case_row(connection, case_id)
    if case is None:
        return
    marker = await repository.guidance_marker(connection, case_id)
    await repository.save_view(connection, case_id, await compute_view(connection, case_id, case.revision), marker)


async def rebuild(ctx: ServiceContext) -> int:
    """Recompute every case's view from the ledger (`threadline projection rebuild`)."""
    async with ctx.db.read() as connection:
        every_case = await repository.case_ids(connection)
    for case_id in every_case:
        async with ctx.db.transaction() as connection:
            await refresh_view(connection, case_id)
    return len(every_case)


# --- company context (Prism) ------------------------------------------------------------------------

THESIS_CLAIMS_CAP = 100
RETIRED_CLAIMS_CAP = 20
SOURCE_FILES_CAP = 30
REVIEWS_CAP = 10
PENDING_DELTAS_CAP = 20


async def get_company_context(
    ctx: ServiceContext, request: ToolRequest[GetCompanyContextArgs], meta: Meta
) -> dict[str, Any]:
    """A saved company's thesis as an agent needs it before proposing a delta (bounded)."""
    args = request.args
    company_id = _company_uuid(args.company_id) if args.company_id else None
    ticker = args.ticker.upper() if args.ticker else None
    async with ctx.db.read() as connection:
        company = await repository.company(connection, company_id, ticker)
        if company is None:
            raise NotFound(
                f"no saved company {'with ticker ' + ticker if ticker else args.company_id}",
                field="ticker" if ticker else "companyId",
                hint="the company must be saved in Prism first (an admin adds it); check the ticker or id",
            )
        claims = await repository.thesis_claims_of(connection, company.company_id)
        files = await repository.source_files_of(connection, company.company_id)
        reviews, reviewed = await repository.deltas_of(connection, company.company_id, ("accepted", "rejected"),
                                                       "decided_at", REVIEWS_CAP)
        pending, waiting = await repository.deltas_of(connection, company.company_id, ("committed",),
                                                      "committed_at", PENDING_DELTAS_CAP)
    active = [c for c in claims if c.status == "active"]
    retired = [c for c in claims if c.status != "active"]
    listed_active, omitted_active = domain.capped(active, THESIS_CLAIMS_CAP)
    listed_retired, omitted_retired = domain.capped(retired, RETIRED_CLAIMS_CAP)
    listed_files, omitted_files = domain.capped(files, SOURCE_FILES_CAP)

    def claim(c: Any) -> dict[str, Any]:
        return {"claimId": c.claim_id, "text": c.text, "label": c.label, "section": c.section,
                "sourceUrl": c.source_url, "status": c.status, "revision": c.revision}

    def delta(d: Any) -> dict[str, Any]:
        entry = {"operationId": d.operation_id, "status": d.status, "category": d.delta["category"],
                 "summary": d.delta["summary"][:300], "caller": d.caller, "baseRevision": d.base_revision}
        if d.status in ("accepted", "rejected"):
            entry |= {"decidedBy": d.decided_by, "decidedAt": d.decided_at.isoformat(), "note": d.note}
        else:
            entry |= {"committedAt": d.committed_at.isoformat()}
        return entry

    return {
        "companyId": company.company_id,
        "ticker": company.ticker,
        "name": company.name,
        "thesisRevision": company.thesis_revision,
        "claims": {"total": len(active), "omitted": omitted_active, "items": [claim(c) for c in listed_active]},
        "retiredClaims": {"total": len(retired), "omitted": omitted_retired,
                          "items": [claim(c) for c in listed_retired]},
        "sourceFiles": {"total": len(files), "omitted": omitted_files, "items": [
            {"sourceFileId": f.source_file_id, "title": f.title, "url": f.url, "characters": f.length,
             "addedAt": f.created_at.isoformat()} for f in listed_files]},
        "recentReviews": {"total": reviewed, "items": [delta(d) for d in reviews]},
        "pendingDeltas": {"total": waiting, "items": [delta(d) for d in pending]},
        "evidenceHealth": {
            "unverifiedClaims": sum(1 for c in active if c.label == "UNVERIFIED"),
            "inferredClaims": sum(1 for c in active if c.label == "INFERRED"),
            "claimsWithoutSource": sum(1 for c in active if not c.source_url),
            "retiredClaims": len(retired),
            "pendingDeltas": waiting,
        },
        "next": (
            "Propose how one source file changes this thesis with propose_claim_delta_from_source "
            "(mode=preview, a stable idempotencyKey); update or retire claims by their claimId. A person "
            "approves the preview before you commit it, and a reviewer applies it."
        ),
    }


def _company_uuid(value: str) -> str:
    return str(uuid.UUID(value))
