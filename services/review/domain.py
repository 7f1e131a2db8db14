"""Review rules: which items of a proposal a decision accepts, rejects or must refuse, and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared import ledger
from shared.errors import InvalidArgument, StaleRevision


@dataclass(frozen=True)
class StoredItem:
    item_id: str
    position: int
    payload: dict[str, Any]
    outcome: str | None = None
    decision_id: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None


@dataclass(frozen=True)
class StoredProposal:
    proposal_id: str
    case_id: str
    kind: str
    pinned_revision: int
    agent_name: str
    token_id: str | None
    correlation_id: str | None
    created_at: datetime
    items: list[StoredItem]

    @property
    def status(self) -> str:
        return proposal_status([item.outcome for item in self.items])


def proposal_status(outcomes: Sequence[str | None]) -> str:
    if any(outcome is None for outcome in outcomes):
        return "pending"
    if all(outcome == "accepted" for outcome in outcomes):
        return "accepted"
    if all(outcome == "rejected" for outcome in outcomes):
        return "rejected"
    return "partially_accepted"


@dataclass
class DecisionPlan:
    accepted: list[StoredItem] = field(default_factory=list)
    rejected: list[StoredItem] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)

    @property
    def changes_ledger(self) -> bool:
        return bool(self.accepted)


def status_after(proposal: StoredProposal, plan: DecisionPlan) -> str:
    """The proposal's status once the plan's outcomes are recorded."""
    decided = {i.item_id: "accepted" for i in plan.accepted} | {i.item_id: "rejected" for i in plan.rejected}
    return proposal_status([decided.get(item.item_id, item.outcome) for item in proposal.items])


def check_expected_revision(expected: int | None, revision: int) -> None:
    if expected is not None and expected != revision:
        raise StaleRevision(
            f"the case is at revision {revision}, not {expected}: the ledger changed since you loaded it",
            field="expectedRevision",
            hint="reload the proposal, check what accepting it would change now, and decide again",
            details={"currentRevision": revision},
        )


def check_retirable(wanted: Sequence[tuple[str, str]], statuses: dict[tuple[str, str], str]) -> None:
    for i, key in enumerate(wanted):
        status = statuses.get(key)
        if status is None:
            raise InvalidArgument(f"there is no canonical {key[0]} {key[1]!r} in this case",
                                  field=f"records[{i}].id", hint="retire only canonical records of the case")
        if status != "active":
            raise InvalidArgument(f"the {key[0]} {key[1]!r} is already {status}", field=f"records[{i}].id",
                                  hint="retired and superseded records stay in history as they are")
        if key in wanted[:i]:
            raise InvalidArgument(f"{key[0]} {key[1]!r} is listed twice", field=f"records[{i}]", hint="list it once")


def check_request(proposal: StoredProposal, accept: Sequence[str], reject: Sequence[str]) -> None:
    if not accept and not reject:
        raise InvalidArgument(
            "the decision accepts and rejects nothing", field="accept", hint="list item ids in accept or reject"
        )
    known = {item.item_id for item in proposal.items}
    for name, ids in (("accept", accept), ("reject", reject)):
        for i, item_id in enumerate(ids):
            if item_id not in known:
                raise InvalidArgument(
                    f"{item_id!r} is not an item of proposal {proposal.proposal_id}",
                    field=f"{name}[{i}]",
                    hint=f"use the proposal's item ids: {', '.join(sorted(known))}",
                )
            if item_id in ids[:i]:
                raise InvalidArgument(f"{item_id!r} is listed twice", field=f"{name}[{i}]", hint="list it once")
    both = set(accept) & set(reject)
    if both:
        raise InvalidArgument(
            f"{sorted(both)[0]!r} is both accepted and rejected",
            field="reject",
            hint="decide each item one way",
        )


def plan(
    proposal: StoredProposal, accept: Sequence[str], reject: Sequence[str], facts: ledger.LedgerFacts
) -> DecisionPlan:
    """Accept what still fits the ledger (in the proposal's order), reject what is rejected, refuse the rest."""
    result = DecisionPlan()
    chosen = set(accept) | set(reject)
    for item in proposal.items:
        if item.item_id not in chosen:
            continue
        if item.outcome is not None:
            result.refused.append(
                {
                    "itemId": item.item_id,
                    "reason": f"already {item.outcome} by {item.decided_by}"
                    + (f" at {item.decided_at.isoformat()}" if item.decided_at else ""),
                }
            )
            continue
        if item.item_id in reject:
            result.rejected.append(item)
            continue
        problems = ledger.check_item(proposal.kind, item.payload, facts)
        if problems:
            result.refused.append({"itemId": item.item_id, "reason": reasons(problems)})
            continue
        facts.install(proposal.kind, item.payload)
        result.accepted.append(item)
    return result


def reasons(problems: Sequence[ledger.Problem]) -> str:
    return "; ".join(f"{p.field}: {p.message}" for p in problems)


def refs_of(proposal: StoredProposal, item_ids: Sequence[str]) -> ledger.References:
    wanted = set(item_ids)
    return ledger.references(proposal.kind, [i.payload for i in proposal.items if i.item_id in wanted])


def would_change(proposal: StoredProposal, item: StoredItem, facts: ledger.LedgerFacts) -> dict[str, Any]:
    """What accepting one item would change in the ledger as it is now, or why it no longer can."""
    problems = ledger.check_item(proposal.kind, item.payload, facts)
    kind = proposal.kind
    change: dict[str, Any]
    if kind == "sources":
        change = {"adds": [{"record": "source", "id": item.item_id}]}
    elif kind == "claims":
        change = {
            "adds": [{"record": "claim", "id": item.item_id}],
            "cites": list(item.payload["sourceIds"]),
        }
    elif kind == "relations":
        p = item.payload
        change = {
            "adds": [{"record": "relation", "id": p["id"], "from": p["sourceClaimId"], "to": p["targetClaimId"],
                      "type": p["type"]}]
        }
    elif kind == "merge":
        change = {
            "adds": [{"record": "group", "id": item.payload["groupId"]}],
            "joins": list(item.payload["memberClaimIds"]),
        }
    else:
        current = [cid for cid, fact in facts.claims.items() if fact.kind == "verdict" and fact.status == "active"]
        change = {
            "adds": [{"record": "claim", "id": item.item_id, "kind": "verdict"}]
            + [{"record": "relation", "id": r["id"], "from": r["sourceClaimId"], "to": r["targetClaimId"],
                "type": r["type"]} for r in item.payload["relations"]],
            "bases": ledger.verdict_bases(item.payload),
            "supersedes": current[0] if current else None,
        }
    return {"acceptable": not problems, "change": change, "problems": [p.to_dict() for p in problems]}
