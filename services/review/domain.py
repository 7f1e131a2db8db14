"""Review rules: which items of a proposal a decision accepts, rejects or must refuse, and why."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared import kinds
from shared.errors import InvalidArgument, NotFound, StaleRevision
from shared.events import LedgerChange, LedgerChanged
from shared.ledger import LedgerFacts, Provenance, References, reasons


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
    staged_revision: int | None = None  # the revision it was stored at: its pin, or the one it was rebased onto

    @property
    def status(self) -> str:
        return proposal_status([item.outcome for item in self.items])

    @property
    def item_kind(self) -> kinds.ItemKind:
        return kinds.kind(self.kind)

    def typed(self, item: StoredItem) -> Any:
        return self.item_kind.parse(item.payload)


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

    @property
    def records_anything(self) -> bool:
        return bool(self.accepted or self.rejected)

    def outcomes(self) -> list[tuple[str, str]]:
        return [(i.item_id, "accepted") for i in self.accepted] + [(i.item_id, "rejected") for i in self.rejected]


@dataclass(frozen=True)
class Decision:
    """A reviewer's recorded decision on a proposal: what became of each chosen item, and why."""

    decision_id: str
    proposal_id: str
    case_id: str
    reviewer: str
    note: str | None
    expected_revision: int | None
    revision_after: int | None  # the revision it moved the case to; None when it changed nothing
    refused: list[dict[str, str]]
    outcomes: list[tuple[str, str]]
    correlation_id: str | None
    decided_at: datetime
    request_digest: str | None = None
    closes: str | None = None  # the proposal's final status when this decision decides its last item


def request_digest(accept: Sequence[str], reject: Sequence[str], note: str | None, expected_revision: int,
                   duplicates: Sequence[tuple[str, str]] = ()) -> str:
    """A decision request as canonical JSON: the same request repeated has the same digest."""
    request: dict[str, Any] = {"accept": list(accept), "reject": list(reject), "note": note,
                               "expectedRevision": expected_revision}
    if duplicates:  # only then, so the digests of requests without the field stay what they were
        request["duplicates"] = [list(pair) for pair in duplicates]
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def new_decision(proposal: StoredProposal, plan: DecisionPlan, *, reviewer: str, note: str | None,
                 expected_revision: int | None, revision: int, correlation_id: str | None,
                 at: datetime, digest: str | None = None) -> Decision:
    return Decision(
        decision_id=str(uuid.uuid4()), proposal_id=proposal.proposal_id, case_id=proposal.case_id,
        reviewer=reviewer, note=note, expected_revision=expected_revision,
        revision_after=revision + 1 if plan.changes_ledger else None, refused=plan.refused,
        outcomes=plan.outcomes(), correlation_id=correlation_id, decided_at=at, request_digest=digest,
        closes=None if (status := status_after(proposal, plan)) == "pending" else status,
    )


def provenance_of(proposal: StoredProposal, decision: Decision) -> Provenance:
    """What every record a decision installs remembers of where it came from."""
    assert decision.revision_after is not None
    return Provenance(decided_by=decision.reviewer, decided_at=decision.decided_at, revision=decision.revision_after,
                      proposal_id=proposal.proposal_id, staged_by=proposal.agent_name, staged_at=proposal.created_at,
                      decision_id=decision.decision_id)


def ledger_changed(case_id: str, revision: int, actor: str, summary: str, change: LedgerChange,
                   decision_id: str | None = None, proposal_id: str | None = None) -> LedgerChanged:
    """One revision of a case's ledger, as its change log entry and its `ledger.changed` event tell it."""
    return LedgerChanged(case_id=case_id, revision=revision, previous_revision=revision - 1, actor=actor,
                         summary=summary, decision_id=decision_id, proposal_id=proposal_id, changes=change)


def status_after(proposal: StoredProposal, plan: DecisionPlan) -> str:
    """The proposal's status once the plan's outcomes are recorded."""
    decided = dict(plan.outcomes())
    return proposal_status([decided.get(item.item_id, item.outcome) for item in proposal.items])


def check_expected_revision(expected: int | None, revision: int) -> None:
    if expected is not None and expected > revision:  # no one loaded a revision the case has not reached
        raise StaleRevision(
            f"expectedRevision {expected} is ahead of the case, which is at revision {revision}",
            field="expectedRevision",
            hint="send the revision you read: revision of GET /api/v1/cases/{caseId}, or a proposal's caseRevision",
            details={"currentRevision": revision},
        )
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


def check_rejection_note(reject: Sequence[str], note: str | None) -> None:
    """A rejection records why: the agent reads the reason in the proposal's decisions to correct what it stages
    next. Accepting needs none, and a `duplicates` entry writes its own (the record it duplicates)."""
    if reject and not (note or "").strip():
        raise InvalidArgument(
            "a rejection needs a note saying why the items are rejected",
            field="note",
            hint="give a non-empty note the agent can act on, e.g. what the source does not support; "
                 "to reject an item as a duplicate of a record, name it in duplicates instead",
        )


def plan(
    proposal: StoredProposal, accept: Sequence[str], reject: Sequence[str], facts: LedgerFacts
) -> DecisionPlan:
    """Accept what still fits the ledger (in the proposal's order), reject what is rejected, refuse the rest."""
    kind = proposal.item_kind
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
        typed = kind.parse(item.payload)
        problems = kind.check(typed, facts)
        if problems:
            result.refused.append({"itemId": item.item_id, "reason": reasons(problems)})
            continue
        kind.learn(typed, facts)
        result.accepted.append(item)
    return result


def refs_of(proposal: StoredProposal, item_ids: Sequence[str]) -> References:
    wanted = set(item_ids)
    return References.union(proposal.item_kind.references(proposal.typed(i)) for i in proposal.items
                            if i.item_id in wanted)


def would_change(proposal: StoredProposal, item: StoredItem, facts: LedgerFacts) -> dict[str, Any]:
    """What accepting one item would change in the ledger as it is now, or why it no longer can."""
    return proposal.item_kind.would_change(proposal.typed(item), facts)


def accepted_summary(proposal: StoredProposal, plan: DecisionPlan, reviewer: str) -> str:
    return (f"{reviewer} accepted {len(plan.accepted)} {proposal.kind} item(s) of proposal "
            f"{proposal.proposal_id} staged by {proposal.agent_name}")


PROPOSALS_HINT = "list a case's proposals with GET /api/v1/cases/{caseId}/proposals"


def proposal_not_found(proposal_id: str) -> NotFound:
    return NotFound(f"there is no proposal {proposal_id!r}", field="proposalId", hint=PROPOSALS_HINT)


def case_not_found(case_id: str) -> NotFound:
    return NotFound(f"there is no case {case_id!r}", field="caseId", hint="list cases with GET /api/v1/cases")
