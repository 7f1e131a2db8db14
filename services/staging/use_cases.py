"""Staging use cases: every stage_* tool is `stage` with the kind of item it stages."""

from __future__ import annotations

from typing import Any

from services.staging import domain
from services.staging.ports import StagingUnitOfWork
from shared.contracts import Pinned, ToolRequest
from shared.events import ProposalStaged, case
from shared.kinds import ItemKind
from shared.ledger import References


async def stage(kind: ItemKind, request: ToolRequest[Pinned], uow: StagingUnitOfWork) -> dict[str, Any]:
    """Store the call as one pending proposal, or refuse it and store nothing."""
    args = request.args
    case_id = args.expected_case_id
    async with uow:
        revision = await uow.cases.pin(case_id)
        if revision is None:
            raise domain.no_case(case_id)
        domain.check_pin(expected_case_id=case_id, discovered_case_id=request.discovered_case_id,
                         expected_revision=args.expected_revision, revision=revision)
        refs = References.union(kind.references(item) for item in kind.items_of(args))
        facts = await uow.ledger.facts(case_id, revision, refs)
        if problems := kind.problems(args, facts):
            raise domain.refusal(problems)
        proposal = domain.new_proposal(kind, args, revision=revision, actor=request.actor,
                                       correlation_id=uow.origin.correlation_id)
        await uow.proposals.add(proposal)
        uow.emit(case(case_id), ProposalStaged(case_id=case_id, proposal_id=proposal.proposal_id, kind=kind.name,
                                               item_ids=proposal.item_ids, agent=request.actor.name,
                                               pinned_revision=revision), revision=revision)
        await uow.commit()
    return domain.staged_view(proposal)
