"""Staging use cases: every stage_* tool is `stage` with the kind of item it stages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from services.staging import domain, duplicates
from services.staging.ports import REPLAYED, LedgerMoved, StagingUnitOfWork
from shared.contracts import Pinned, ToolRequest
from shared.events import ProposalStaged, case
from shared.kinds import ItemKind
from shared.ledger import References
from shared.review_checks import evaluate
from shared.settings import get_settings

# A decision committing between a call's check and its write makes the call check again; this many times
# at most, which only a case moving on every few milliseconds could exhaust.
ATTEMPTS = 5


async def stage(kind: ItemKind, request: ToolRequest[Pinned], uow: StagingUnitOfWork) -> dict[str, Any]:
    """Store the call as one pending proposal — rebased when the ledger moved on in nothing it depends
    on — or refuse it and store nothing; an identical repeat returns the first proposal."""
    for attempt in range(ATTEMPTS):
        try:
            return await _stage_once(kind, request, uow)
        except LedgerMoved:
            if attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


async def _stage_once(kind: ItemKind, request: ToolRequest[Pinned], uow: StagingUnitOfWork) -> dict[str, Any]:
    args, agent = request.args, request.actor.name
    case_id, pin = args.expected_case_id, args.expected_revision
    items = kind.items_of(args)
    digest = domain.request_digest(kind, args)
    claim_ids, claim_keys, source_ids, urls = duplicates.keys(
        [(kind.record, kind.id_of(item), _compared(kind, item)) for item in items])
    async with uow:
        found = await uow.ledger.stage_facts(case_id, pin, References.union(map(kind.references, items)), agent,
                                             digest, (claim_keys, urls))
        if found is None:
            raise domain.no_case(case_id)
        revision = found.revision
        domain.check_pin(expected_case_id=case_id, discovered_case_id=request.discovered_case_id,
                         expected_revision=pin, revision=revision)
        # The review checks' facts: the one read beyond stage_facts (never a refusal, only flags).
        facts = await uow.ledger.review_facts(case_id, items, relations=kind.name == "relations")
        checks = evaluate(items, facts, get_settings().disabled_review_checks)
        if found.prior is not None:
            return _replayed(case_id, found.prior, revision, checks, duplicates.flagged(
                claim_ids, found.similar_claims, source_ids, found.same_urls, own_proposal=found.prior.proposal_id))
        problems = kind.problems(args, found.facts)
        if changes := domain.changed_since_pin(kind, items, found.facts, pin):
            raise domain.stale(changes, problems, pin, revision)
        if problems:
            raise domain.refusal(problems)
        similar = duplicates.flagged(claim_ids, found.similar_claims, source_ids, found.same_urls)
        proposal = replace(domain.new_proposal(kind, args, revision=revision, actor=request.actor,
                                               correlation_id=uow.origin.correlation_id, digest=digest,
                                               duplicates=similar), flags=tuple(checks))
        uow.proposals.add(proposal)
        uow.emit(case(case_id), ProposalStaged(
            case_id=case_id, proposal_id=proposal.proposal_id, kind=kind.name, item_ids=proposal.item_ids,
            agent=agent, pinned_revision=pin, staged_revision=revision,
        ), revision=revision)
        outcome = await uow.commit()
    if isinstance(outcome, tuple) and outcome[0] == REPLAYED:  # an identical call stored first, just now
        return domain.staged_view(case_id, outcome[1], kind.name, proposal.item_ids, pinned=pin, revision=revision,
                                  replayed=True, flags=checks, possible_duplicates=similar)
    return domain.staged_view(case_id, proposal.proposal_id, kind.name, proposal.item_ids, pinned=pin,
                              revision=revision, since_pin=found.since_pin, flags=checks, possible_duplicates=similar)


def _compared(kind: ItemKind, item: Any) -> dict[str, Any]:
    """What an item is compared by for possible duplicates (a verdict patch: its claim)."""
    return kind.record_payload(item.model_dump(mode="json", by_alias=True))


def _replayed(case_id: str, prior: domain.Prior, revision: int, checks: list[Any],
              similar: list[dict[str, Any]]) -> dict[str, Any]:
    return domain.staged_view(case_id, prior.proposal_id, prior.kind, prior.item_ids, pinned=prior.pinned_revision,
                              revision=revision, replayed=True, flags=checks, possible_duplicates=similar)
