"""Staging rules: a call is stored as one proposal only if it is pinned to the current ledger and fits it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from shared import ledger
from shared.contracts import Actor, Pinned
from shared.errors import InvalidArgument, NotFound, StaleRevision
from shared.kinds import ItemKind
from shared.problems import Problem


@dataclass(frozen=True)
class Proposal:
    proposal_id: str
    case_id: str
    kind: str
    pinned_revision: int
    agent_name: str
    token_id: str | None
    correlation_id: str | None
    items: list[tuple[str, dict[str, Any]]]  # (item id, the item as the call carried it)

    @property
    def item_ids(self) -> list[str]:
        return [item_id for item_id, _ in self.items]


def no_case(case_id: str) -> NotFound:
    return NotFound(f"there is no case {case_id!r}", field="expectedCaseId",
                    hint="call get_workspace first and use the caseId it returns")


def check_pin(*, expected_case_id: str, discovered_case_id: str | None, expected_revision: int, revision: int) -> None:
    ledger.check_discovered(expected_case_id, discovered_case_id)
    if expected_revision != revision:
        raise StaleRevision(
            f"the case is at revision {revision}, not {expected_revision}: the ledger changed since you read it",
            field="expectedRevision",
            hint="call get_workspace again, check your proposal against the current ledger, and stage it "
            "with the new workspaceRevision",
            details={"currentRevision": revision},
        )


def refusal(found: list[Problem]) -> InvalidArgument:
    return InvalidArgument.of(found, "; nothing was staged")


def new_proposal(kind: ItemKind, args: Pinned, *, revision: int, actor: Actor, correlation_id: str | None) -> Proposal:
    return Proposal(
        proposal_id=str(uuid.uuid4()),
        case_id=args.expected_case_id,
        kind=kind.name,
        pinned_revision=revision,
        agent_name=actor.name,
        token_id=actor.token_id,
        correlation_id=correlation_id,
        items=[(kind.id_of(item), item.model_dump(mode="json", by_alias=True)) for item in kind.items_of(args)],
    )


def staged_view(proposal: Proposal) -> dict[str, Any]:
    """What the agent is told: the proposal, its pending items, and what happens next."""
    return {
        "proposalId": proposal.proposal_id,
        "caseId": proposal.case_id,
        "kind": proposal.kind,
        "status": "pending",
        "pinnedRevision": proposal.pinned_revision,
        "items": [{"itemId": item_id, "status": "pending"} for item_id in proposal.item_ids],
        "next": "A reviewer will accept or reject each item; nothing canonical changes until then. "
        "Follow it with get_workspace scope=proposals; reviewers' notes appear in scope=guidance.",
    }
