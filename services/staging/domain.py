"""Staging rules: a proposal is stored only if it is pinned to the current ledger and fits it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared import ledger
from shared.errors import InvalidArgument, StaleRevision

KIND_BY_TOOL = {
    "stage_sources": "sources",
    "stage_claims": "claims",
    "stage_relations": "relations",
    "stage_merge": "merge",
    "stage_verdict": "verdict",
}


@dataclass(frozen=True)
class Proposal:
    proposal_id: str
    case_id: str
    kind: str
    pinned_revision: int
    agent_name: str
    token_id: str | None
    correlation_id: str | None
    items: list[tuple[str, dict[str, Any]]]


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


def problems(kind: str, args: Mapping[str, Any], facts: ledger.LedgerFacts) -> list[ledger.Problem]:
    """Every way the call does not fit the ledger, with fields named as in the tool arguments."""
    found = ledger.duplicate_ids(kind, args)
    if kind == "verdict":
        found += ledger.check_item(kind, {"claim": args["claim"], "relations": args["relations"]}, facts)
        return found
    list_name = ledger.ITEM_LISTS[kind]
    for i, payload in enumerate(args[list_name]):
        found += [p.at(f"{list_name}[{i}]") for p in ledger.check_item(kind, payload, facts)]
    return found


def refusal(found: list[ledger.Problem]) -> InvalidArgument:
    first = found[0]
    more = f" ({len(found) - 1} more problem{'s' if len(found) > 2 else ''} in details)" if len(found) > 1 else ""
    return InvalidArgument(
        f"{first.field}: {first.message}{more}; nothing was staged",
        field=first.field,
        hint=first.hint,
        details={"problems": [p.to_dict() for p in found]},
    )


def new_proposal(
    kind: str,
    args: Mapping[str, Any],
    *,
    revision: int,
    agent_name: str,
    token_id: str | None,
    correlation_id: str | None,
) -> Proposal:
    return Proposal(
        proposal_id=str(uuid.uuid4()),
        case_id=args["expectedCaseId"],
        kind=kind,
        pinned_revision=revision,
        agent_name=agent_name,
        token_id=token_id,
        correlation_id=correlation_id,
        items=ledger.items_of(kind, args),
    )
