"""Staging use cases: one per stage_* tool, all through `stage`."""

from __future__ import annotations

from typing import Any

from services.staging import domain, repository
from shared import ledger, outbox
from shared.contracts import ToolRequest
from shared.db.queries import ledger_facts
from shared.errors import NotFound
from shared.events import EventType, ProposalStaged, case_event
from shared.service import Meta, ServiceContext


async def stage(ctx: ServiceContext, tool: str, request: ToolRequest, meta: Meta) -> dict[str, Any]:
    """Store the call as one pending proposal, or refuse it and store nothing."""
    kind = domain.KIND_BY_TOOL[tool]
    args = request.args.model_dump(mode="json", by_alias=True)
    case_id = args["expectedCaseId"]
    async with ctx.db.transaction() as connection:
        revision = await repository.pin_case(connection, case_id)
        if revision is None:
            raise NotFound(
                f"there is no case {case_id!r}",
                field="expectedCaseId",
                hint="call get_workspace first and use the caseId it returns",
            )
        discovered = await repository.discovered_case(connection, request.actor.name)
        domain.check_pin(
            expected_case_id=case_id,
            discovered_case_id=discovered,
            expected_revision=args["expectedRevision"],
            revision=revision,
        )
        refs = ledger.references(kind, [payload for _, payload in ledger.items_of(kind, args)])
        facts = await ledger_facts(connection, case_id, revision, refs)
        found = domain.problems(kind, args, facts)
        if found:
            raise domain.refusal(found)
        proposal = domain.new_proposal(
            kind,
            args,
            revision=revision,
            agent_name=request.actor.name,
            token_id=request.actor.token_id,
            correlation_id=meta.correlation_id,
        )
        await repository.insert_proposal(connection, proposal)
        await outbox.append(
            connection,
            [
                case_event(
                    ctx.subjects,
                    EventType.PROPOSAL_STAGED,
                    ProposalStaged(
                        case_id=case_id,
                        proposal_id=proposal.proposal_id,
                        kind=kind,
                        item_ids=[item_id for item_id, _ in proposal.items],
                        agent=request.actor.name,
                        pinned_revision=revision,
                    ),
                    case_id=case_id,
                    service=ctx.service.value,
                    revision=revision,
                    correlation_id=meta.correlation_id,
                    traceparent=meta.traceparent,
                )
            ],
        )
    return {
        "proposalId": proposal.proposal_id,
        "caseId": case_id,
        "kind": kind,
        "status": "pending",
        "pinnedRevision": revision,
        "items": [{"itemId": item_id, "status": "pending"} for item_id, _ in proposal.items],
        "next": "A reviewer will accept or reject each item; nothing canonical changes until then. "
        "Follow it with get_workspace scope=proposals; reviewers' notes appear in scope=guidance.",
    }
