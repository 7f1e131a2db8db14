"""Projection use cases: the agents' read views, the reviewers' case ledger, and the presentation focus."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from services.projection import as_of, domain, guidance, read_models, workspace
from services.projection.inspect_claims import STAGING_SOURCES, other_records, staged_ids
from services.projection.ports import ProjectionUnitOfWork
from services.projection.view_rows import UNRESOLVED, ViewState
from shared import events, ledger
from shared.contracts import (
    GetWorkspaceArgs,
    InspectSourcesArgs,
    SetFocusArgs,
    ToolRequest,
)
from shared.errors import NoActiveCase, NotFound, Unavailable
from shared.events import FocusChanged
from shared.history_contracts import CaseAsOf

PAGED = ("unresolved", "guidance")
CATCH_UP_ATTEMPTS = 3


async def get_workspace(request: ToolRequest[GetWorkspaceArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    scope = request.args.scope or "summary"
    # The schema allows a cursor with any scope; one that does not page ignores it, and the answer says so.
    cursor = request.args.cursor if scope in PAGED else None

    async def case_of_agent() -> Any:
        return await _active_case(uow, request.actor.name)

    found = await _at_view(uow, case_of_agent, lambda case, state: _workspace(uow, scope, cursor, case, state,
                                                                              request.actor.name))
    if request.args.cursor is not None and cursor is None:
        found["ignored"] = {"cursor": f"scope={scope} does not page, so cursor {request.args.cursor} was ignored; "
                                      "cursor pages scope=unresolved and scope=guidance"}
    return found


async def _at_view(uow: ProjectionUnitOfWork, find_case: Callable[[], Awaitable[Any]],
                   answer: Callable[[Any, ViewState], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """Answer from the case's view rows, in one read transaction, once they show the case's revision.

    The view behind the ledger (its events still on their way) catches up first; if decisions keep
    moving the ledger meanwhile, the last attempt answers with the revision the view shows."""
    for attempt in range(1, CATCH_UP_ATTEMPTS + 1):
        async with uow.read():
            case = await find_case()
            state = await uow.views.state(case.case_id)
            if state is not None and (state.revision >= case.revision
                                      or (attempt == CATCH_UP_ATTEMPTS and state.revision >= 0)):
                return await answer(case, state)
        await read_models.catch_up(uow, case.case_id)
    raise Unavailable("the case's view is still being built", hint="ask again in a moment")


async def _workspace(uow: ProjectionUnitOfWork, scope: str, cursor: int | None, case: Any, state: ViewState,
                     agent: str) -> dict[str, Any]:
    case_id = case.case_id
    focus = await uow.reads.focus_of(case_id)
    counts = await uow.views.counts(case_id)
    found: dict[str, Any] = {
        "caseId": case_id,
        "workspaceRevision": state.revision,
        "scope": scope,
        "focus": focus,
        "title": case.title,
        "question": case.question,
    }
    shows = domain.sections(scope)
    if "summary" in shows:
        found.update(await workspace.summary(uow, case_id, state, counts))
    if "claims" in shows:
        found["claims"] = await workspace.claims(uow, case_id, state, focus, counts)
    if "sources" in shows:
        found["sources"] = await workspace.sources(uow, case_id, focus, counts)
    if "proposals" in shows:
        found["proposals"] = await _proposals(uow, case_id, agent)
    if "unresolved" in shows:
        found["unresolved"] = await workspace.unresolved(uow, case_id, cursor, counts, state)
    if "guidance" in shows:
        found["guidance"] = await guidance.guidance(uow, case_id, cursor, counts, agent)
    return found


async def _active_case(uow: ProjectionUnitOfWork, agent: str) -> Any:
    """The row of the agent's assigned case, else of the deployment's default, else of the only case there is."""
    case_id = await uow.reads.assigned_case(agent)
    case_id = case_id or uow.default_case or await uow.reads.only_case()
    case = await uow.reads.case_row(case_id) if case_id is not None else None
    if case is None:
        raise NoActiveCase(
            f"no case is assigned to agent {agent!r}",
            hint=f"ask an operator to assign one (PUT /api/v1/agents/{agent}/active-case or "
            "`threadline token create --case`), then call get_workspace again",
        )
    return case


async def _proposals(uow: ProjectionUnitOfWork, case_id: str, agent: str) -> dict[str, Any]:
    total = sum((await uow.reads.pending_by_kind(case_id)).values())
    listed = await uow.reads.pending_proposals(case_id, domain.PROPOSALS_CAP)
    mine = await uow.reads.agent_recent_proposals(case_id, agent, 10)
    items = await uow.reads.proposal_items_status(
        list({p["proposal_id"] for p in [*listed, *mine]})
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
        "pending": {"total": total, "omitted": total - len(listed), "items": [view(p) for p in listed]},
        "yourRecent": [view(p) for p in mine],
    }


LEDGER_CLAIMS_CAP = 500
LEDGER_GUIDANCE_CAP = 20


async def case_ledger(cmd: CaseAsOf, uow: ProjectionUnitOfWork) -> dict[str, Any]:
    """The canonical ledger of a case for reviewers: its first claims in the order of the case's focus
    and their provenance, the verdict, every source, relation and group, and what is pending. Claims and
    sources are read by index from the case's view rows, never the whole ledger; as of a past revision,
    from the ledger itself (`as_of.ledger_at`)."""
    if cmd.as_of is not None:
        return await as_of.ledger_at(uow, cmd.case_id, cmd.as_of, _ledger)

    async def find() -> Any:
        case = await uow.reads.case_row(cmd.case_id)
        if case is None:
            raise NotFound(f"there is no case {cmd.case_id!r}", field="caseId", hint="list cases first")
        return case

    return await _at_view(uow, find, lambda case, state: _ledger(uow, case, state))


async def _ledger(uow: ProjectionUnitOfWork, case: Any, state: ViewState) -> dict[str, Any]:
    case_id = case.case_id
    focus = await uow.reads.focus_of(case_id)
    counts = await uow.views.counts(case_id)
    claims = await workspace.claims(uow, case_id, state, focus, counts, LEDGER_CLAIMS_CAP, with_verdict=False)
    verdict = await workspace.verdict_section(uow, case_id, state) if state.verdict_id else None
    provenance = await uow.reads.provenance_of_claims(
        case_id, [c["claimId"] for c in claims["items"]] + ([state.verdict_id] if verdict else []))
    for claim in claims["items"]:
        claim["provenance"] = provenance.get(claim["claimId"])
    sources = await workspace.sources_in_focus(uow, case_id, focus, counts, counts.get("sources", 0))
    groups = await uow.reads.group_list(case_id)
    members = await uow.views.members_of(case_id, [g["group_id"] for g in groups])
    pending = await uow.reads.pending_proposals(case_id)
    pending_items = await uow.reads.proposal_items_status([p["proposal_id"] for p in pending])
    return {
        "caseId": case_id,
        "title": case.title,
        "question": case.question,
        "revision": state.revision,
        "focus": focus,
        "verdict": verdict | {"provenance": provenance.get(state.verdict_id)} if verdict else {"state": "missing"},
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
            for r in await uow.reads.relation_list(case_id, state.revision)
        ],
        "groups": [
            {"groupId": g["group_id"], "label": g["label"], "confidence": g["confidence"],
             "members": members.get(g["group_id"], [])}
            for g in groups
        ],
        "unresolved": counts.get(UNRESOLVED, 0),
        "guidance": await uow.reads.guidance(case_id, LEDGER_GUIDANCE_CAP),
        "pendingProposals": [
            {"proposalId": p["proposal_id"], "kind": p["kind"], "agent": p["agent_name"],
             "stagedAt": p["created_at"].isoformat(), "pinnedRevision": p["pinned_revision"],
             "items": pending_items.get(p["proposal_id"], [])}
            for p in pending
        ],
    }


async def inspect_sources(request: ToolRequest[InspectSourcesArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    args = request.args
    async with uow.read():
        ledger.check_discovered(args.expected_case_id, request.discovered_case_id)
        found = await uow.reads.sources_by_id(args.expected_case_id, list(args.source_ids))
        derived = await uow.reads.derived_claims(
            args.expected_case_id, list(found), domain.DERIVED_CLAIMS_CAP
        )
        pending = await staged_ids(uow.search.connection, args.expected_case_id, STAGING_SOURCES,
                                   [s for s in args.source_ids if s not in found])
        other = await other_records(uow.search.connection, args.expected_case_id, "claim",
                                    [s for s in args.source_ids if s not in found and s not in {p["id"] for p in pending}])
        retired = await uow.reads.retirements_at(args.expected_case_id, sorted(
            {s["ended_revision"] for s in found.values() if s["status"] == "retired" and s["ended_revision"]}))
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
                **({"retirement": _retirement(source, retired)} if source["status"] == "retired" else {}),
            }
        )
    unknown = [s for s in args.source_ids if s not in found and s not in {p["id"] for p in pending} | {o["id"] for o in other}]
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
        **({"pendingSourceIds": pending,
            "pendingHint": "these ids are staged in the proposals named, pending review: not yet canonical sources "
                           "of the case, so no claim may cite them; search_workspace with status=pending finds "
                           "them"} if pending else {}),
        **({"otherRecords": other} if other else {}),
    }


def _retirement(source: dict[str, Any], retired: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """When, by whom and why a source was retired (the note as the reviewer wrote it; none kept: the revision's)."""
    return retired.get(source["ended_revision"]) or {
        "revision": source["ended_revision"], "by": source["ended_by"],
        "at": source["ended_at"].isoformat() if source["ended_at"] else None, "note": None}


async def set_focus(request: ToolRequest[SetFocusArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    args = request.args
    agent = request.actor.name
    async with uow:
        ledger.check_discovered(args.expected_case_id, request.discovered_case_id)
        # Shared case lock: no decision commits in between, so this event never trails a later revision.
        await uow.reads.lock_case_shared(args.expected_case_id)
        case = await uow.reads.case_row(args.expected_case_id)
        if case is None:
            raise NotFound(f"there is no case {args.expected_case_id!r}", field="expectedCaseId",
                           hint="call get_workspace first")
        previous = await uow.reads.set_focus(args.expected_case_id, args.focus, agent)
        if previous != args.focus:
            uow.emit(events.case(args.expected_case_id), FocusChanged(
                case_id=args.expected_case_id, previous=previous, focus=args.focus, agent=agent,
            ), revision=case.revision)
        await uow.commit()
    return {
        "caseId": args.expected_case_id,
        "previousFocus": previous,
        "focus": args.focus,
        "workspaceRevision": case.revision,
        "note": "presentation only: the ledger and its revision are unchanged",
    }
