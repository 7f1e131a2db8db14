"""Staging rules: a call is stored as one proposal if it fits the ledger as it was at the call's pin and
nothing it depends on changed since; an identical repeat returns the first proposal."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from shared import ledger
from shared.contracts import Actor, Pinned
from shared.errors import InvalidArgument, NotFound, StaleRevision
from shared.kinds import VERDICT, ItemKind
from shared.ledger import LedgerFacts
from shared.problems import Problem
from shared.review_checks import Flag

CHANGES_NAMED = 20  # a stale refusal names at most this many changed records
CHANGED_IDS = 5  # a rebase digest lists at most this many ids per kind of change
# The key that holds a record's id in each kind of change a revision's log lists (shared/events.py,
# LedgerChange): groups name theirs groupId, re-rated claims claimId, every other record id.
RECORD_ID_KEYS = ("id", "groupId", "claimId")


@dataclass(frozen=True)
class Proposal:
    proposal_id: str
    case_id: str
    kind: str
    pinned_revision: int
    staged_revision: int  # the revision it was checked against: its pin, or the newer one it was rebased onto
    agent_name: str
    token_id: str | None
    correlation_id: str | None
    request_digest: str
    items: list[tuple[str, dict[str, Any]]]  # (item id, the item as the call carried it)
    duplicates: list[dict[str, Any]] = field(default_factory=list)  # possibleDuplicates, stored with it
    flags: tuple[Flag, ...] = ()  # what the review checks flagged, stored with it (shared/review_checks.py)

    @property
    def item_ids(self) -> list[str]:
        return [item_id for item_id, _ in self.items]


@dataclass(frozen=True)
class Prior:
    """The proposal an identical earlier call of the same agent stored."""

    proposal_id: str
    kind: str
    pinned_revision: int
    staged_revision: int
    item_ids: list[str]


@dataclass(frozen=True)
class StageFacts:
    """What one read of the ledger tells a stage call: the revision, the facts about every record the call
    names (with when each came and went), an identical earlier call, and a digest of the changes since
    the pin."""

    revision: int
    facts: LedgerFacts
    prior: Prior | None = None
    since_pin: dict[str, dict[str, Any]] = field(default_factory=dict)  # change kind → {count, first}
    similar_claims: list[list[Any]] = field(default_factory=list)  # services/staging/duplicates.py
    same_urls: list[list[Any]] = field(default_factory=list)


VERDICT_SLOT = ("verdict", "slot")  # a verdict call depends on the case's one verdict slot, named so in details


@dataclass(frozen=True)
class Change:
    """A record the call depends on that changed after its pin."""

    record: str
    id: str
    what: str  # created | taken | retired | superseded | changed
    revision: int

    def describe(self) -> str:
        if (self.record, self.id) == VERDICT_SLOT:
            return f"the case's verdict changed at revision {self.revision} (one was accepted or superseded)"
        return f"{self.record} {self.id!r} {self.what} at revision {self.revision}"

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "id": self.id, "change": self.what, "revision": self.revision}


def request_digest(kind: ItemKind, args: Pinned) -> str:
    """The call as canonical JSON (case, pin, items): equal calls, equal digests."""
    canonical = json.dumps({"tool": kind.tool, "args": args.model_dump(mode="json", by_alias=True)},
                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def no_case(case_id: str) -> NotFound:
    return NotFound(f"there is no case {case_id!r}", field="expectedCaseId",
                    hint="call get_workspace first and use the caseId it returns")


def check_pin(*, expected_case_id: str, discovered_case_id: str | None, expected_revision: int, revision: int) -> None:
    ledger.check_discovered(expected_case_id, discovered_case_id)
    if expected_revision > revision:
        raise StaleRevision(
            f"expectedRevision {expected_revision} is ahead of the case, which is at revision {revision}",
            field="expectedRevision",
            hint="pin the workspaceRevision get_workspace returned",
            details={"currentRevision": revision},
        )


_RECORDS = (("source", "sources"), ("claim", "claims"), ("relation", "relations"), ("group", "groups"))


def changed_since_pin(kind: ItemKind, items: list[Any], facts: LedgerFacts, pin: int) -> list[Change]:
    """Every record the call depends on that changed after its pin: referenced records created or ended
    since, its own new ids taken since, and for a verdict the verdict slot."""
    found: dict[tuple[str, str], Change] = {}
    for item in items:
        own = {(namespace, new_id) for namespace, _, new_id in kind.new_ids(item)}
        refs = kind.references(item)
        for record, namespace in _RECORDS:
            for record_id in sorted(getattr(refs, namespace)):
                history = facts.history.get((record, record_id))
                if history is None:
                    continue
                if history.introduced > pin:
                    what = "taken" if (namespace, record_id) in own else "created"
                    found[(record, record_id)] = Change(record, record_id, what, history.introduced)
                elif history.ended is not None and history.ended > pin:
                    found[(record, record_id)] = Change(record, record_id, history.status, history.ended)
    if kind is VERDICT and facts.verdict_slot_changed > pin:
        found[VERDICT_SLOT] = Change(*VERDICT_SLOT, "changed", facts.verdict_slot_changed)
    return sorted(found.values(), key=lambda c: (c.revision, c.record, c.id))


def stale(changes: list[Change], problems: list[Problem], pin: int, revision: int) -> StaleRevision:
    named = changes[:CHANGES_NAMED]
    more = f" and {len(changes) - len(named)} more" if len(changes) > len(named) else ""
    return StaleRevision(
        f"the ledger changed since your pin at revision {pin} in what this call depends on: "
        + "; ".join(c.describe() for c in named) + more + f"; the case is at revision {revision}; nothing was staged",
        field="expectedRevision",
        hint=f"call get_workspace to read the case at revision {revision}, check your proposal against it, "
        "and stage it with the new workspaceRevision",
        details={"currentRevision": revision, "pinnedRevision": pin, "changed": [c.to_dict() for c in named]},
        problems=problems,
    )


def refusal(found: list[Problem]) -> InvalidArgument:
    return InvalidArgument.of(found, "; nothing was staged")


def new_proposal(kind: ItemKind, args: Pinned, *, revision: int, actor: Actor, correlation_id: str | None,
                 digest: str, duplicates: list[dict[str, Any]] | None = None) -> Proposal:
    return Proposal(
        proposal_id=str(uuid.uuid4()),
        case_id=args.expected_case_id,
        kind=kind.name,
        pinned_revision=args.expected_revision,
        staged_revision=revision,
        agent_name=actor.name,
        token_id=actor.token_id,
        correlation_id=correlation_id,
        request_digest=digest,
        items=[(kind.id_of(item), item.model_dump(mode="json", by_alias=True)) for item in kind.items_of(args)],
        duplicates=duplicates or [],
    )


NEXT = ("A reviewer will accept or reject each item; nothing canonical changes until then. "
        "Follow it with get_workspace scope=proposals; reviewers' notes appear in scope=guidance.")


def staged_view(case_id: str, proposal_id: str, kind: str, item_ids: list[str], *, pinned: int, revision: int,
                since_pin: dict[str, dict[str, Any]] | None = None, replayed: bool = False,
                flags: tuple[Flag, ...] | list[Flag] = (),
                possible_duplicates: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the agent is told: the proposal, its pending items, where it was pinned and stored, and what
    changed in between when it was rebased."""
    view: dict[str, Any] = {
        "proposalId": proposal_id,
        "caseId": case_id,
        "kind": kind,
        "status": "pending",
        "pinnedRevision": pinned,
        "workspaceRevision": revision,
        "items": [{"itemId": item_id, "status": "pending"} for item_id in item_ids],
        "reviewChecks": [flag.to_json() for flag in flags],
    }
    view["possibleDuplicates"] = possible_duplicates or []
    if replayed:
        view["replayed"] = True
    if revision > pinned and since_pin is not None:
        view["rebased"] = {"from": pinned, "onto": revision, "changes": since_pin,
                           "note": "the ledger moved on since your pin, in nothing this call depends on; "
                                   "it was stored against the current revision"}
    view["next"] = NEXT
    return view
