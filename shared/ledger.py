"""Ledger facts and rules: what the canonical ledger holds about the ids a staged item names. Pure, no I/O.

Staging applies the rules when an agent stages a proposal; review applies them again, item by item,
against the ledger as it is when a reviewer accepts, because the ledger may have moved on in between.
The kinds of staged item (shared/kinds.py) say which rules apply to each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from shared.errors import WrongCase
from shared.problems import Problem

ACTIVE = "active"
VERDICT = "verdict"  # the claim kind (and lane) of a case's verdict

__all__ = ["ACTIVE", "VERDICT", "ClaimFact", "LedgerFacts", "LedgerWriter", "Problem", "Provenance", "RecordHistory",
           "References"]


@dataclass(frozen=True)
class ClaimFact:
    kind: str
    status: str

    @property
    def is_verdict(self) -> bool:
        return self.kind == VERDICT


@dataclass(frozen=True)
class References:
    """The ids a check needs the ledger's facts about."""

    sources: frozenset[str] = frozenset()
    claims: frozenset[str] = frozenset()
    relations: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def __or__(self, other: References) -> References:
        return References(
            self.sources | other.sources,
            self.claims | other.claims,
            self.relations | other.relations,
            self.groups | other.groups,
        )

    @classmethod
    def union(cls, refs: Iterable[References]) -> References:
        total = cls()
        for ref in refs:
            total = total | ref
        return total


@dataclass(frozen=True)
class RecordHistory:
    """When a canonical record came (the revision that installed it) and went (retired or superseded)."""

    status: str
    introduced: int
    ended: int | None = None


@dataclass
class LedgerFacts:
    """What the ledger holds about the referenced ids: their status, or absence (plus the active verdict).

    `history` (record, id) → RecordHistory and `verdict_slot_changed` (the last revision that installed or
    ended a verdict) are filled where a call is rebased onto a newer revision than its pin.
    """

    revision: int
    sources: dict[str, str] = field(default_factory=dict)
    claims: dict[str, ClaimFact] = field(default_factory=dict)
    relations: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    history: dict[tuple[str, str], RecordHistory] = field(default_factory=dict)
    verdict_slot_changed: int = 0

    def source_usable(self, source_id: str) -> bool:
        return self.sources.get(source_id) == ACTIVE

    def claim_usable(self, claim_id: str) -> bool:
        fact = self.claims.get(claim_id)
        return fact is not None and fact.status == ACTIVE

    def active_verdict(self) -> str | None:
        return next((cid for cid, fact in self.claims.items() if fact.is_verdict and fact.status == ACTIVE), None)

    # Recording accepted items, so that later items of the same decision see them.

    def add_source(self, source_id: str) -> None:
        self.sources[source_id] = ACTIVE

    def add_claim(self, claim_id: str, kind: str) -> None:
        if kind == VERDICT:
            for other, fact in list(self.claims.items()):
                if fact.is_verdict and fact.status == ACTIVE:
                    self.claims[other] = ClaimFact(VERDICT, "superseded")
        self.claims[claim_id] = ClaimFact(kind, ACTIVE)

    def add_relation(self, relation_id: str) -> None:
        self.relations.add(relation_id)

    def add_group(self, group_id: str) -> None:
        self.groups.add(group_id)


@dataclass(frozen=True)
class Provenance:
    """Where a canonical record came from: the proposal and agent (none when a reviewer recorded it
    directly), the decision and reviewer, and the revision that installed it."""

    decided_by: str
    decided_at: datetime
    revision: int
    proposal_id: str | None = None
    staged_by: str | None = None
    staged_at: datetime | None = None
    decision_id: str | None = None

    @classmethod
    def recorded(cls, by: str, at: datetime, revision: int) -> Provenance:
        """A reviewer's own act (recording sources, retiring records): no proposal behind it."""
        return cls(decided_by=by, decided_at=at, revision=revision)

    def to_json(self) -> dict[str, Any]:
        return {
            "proposalId": self.proposal_id,
            "stagedBy": self.staged_by,
            "stagedAt": self.staged_at.isoformat() if self.staged_at else None,
            "decisionId": self.decision_id,
            "decidedBy": self.decided_by,
            "decidedAt": self.decided_at.isoformat(),
            "revision": self.revision,
        }


class LedgerWriter(Protocol):
    """The writes that install accepted items in the canonical ledger (review's repository implements it)."""

    async def add_sources(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None: ...

    async def add_claims(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None: ...

    async def add_relations(self, case_id: str, items: Sequence[Any], provenance: Provenance, *,
                            verdict_id: str | None = None) -> None: ...

    async def add_groups(self, case_id: str, items: Sequence[Any], provenance: Provenance) -> None: ...

    async def supersede_verdict(self, case_id: str, new_verdict_id: str, provenance: Provenance) -> str | None:
        """Mark the active verdict superseded by the new one; its id, or None when there was none."""

    async def end_links(self, case_id: str, claim_id: str, provenance: Provenance) -> list[tuple[str, str]]:
        """End the active relations and merge groups of a claim leaving the ledger: (record, id) pairs."""


def check_discovered(expected_case_id: str, discovered_case_id: str | None) -> None:
    """Agents act only on the case they most recently discovered with get_workspace."""
    if discovered_case_id != expected_case_id:
        raise WrongCase(
            f"expectedCaseId {expected_case_id!r} is not the case you most recently discovered"
            + (f" ({discovered_case_id!r})" if discovered_case_id else ""),
            field="expectedCaseId",
            hint="call get_workspace first and use the caseId it returns",
        )


# --- the rules the kinds share ----------------------------------------------------------------------

_REFRESH = "call get_workspace to see the canonical ledger, then stage against it"


def taken(where: str, value: str, record: str) -> Problem:
    return Problem(
        where,
        f"the id {value!r} already names a canonical {record} of this case",
        f"choose a new id; canonical ids are never reused ({_REFRESH})",
    )


def duplicate(where: str, value: str) -> Problem:
    return Problem(where, f"the id {value!r} is used twice in this call", "give every new record its own id")


def sources_usable(source_ids: Iterable[str], facts: LedgerFacts) -> list[Problem]:
    problems = []
    for i, source_id in enumerate(source_ids):
        status = facts.sources.get(source_id)
        if status is None:
            problems.append(
                Problem(
                    f"sourceIds[{i}]",
                    f"{source_id!r} is not a canonical source of this case",
                    "cite only canonical sources; a source that is only staged must be accepted by a "
                    "reviewer first (stage_sources, then wait for review)",
                )
            )
        elif status != ACTIVE:
            problems.append(
                Problem(f"sourceIds[{i}]", f"the source {source_id!r} is {status}", "cite an active source")
            )
    return problems


def claim_usable(where: str, claim_id: str, facts: LedgerFacts) -> list[Problem]:
    fact = facts.claims.get(claim_id)
    if fact is None:
        return [
            Problem(
                where,
                f"{claim_id!r} is not a canonical claim of this case",
                "reference only canonical claims; a claim that exists only in a pending proposal must be "
                "accepted by a reviewer first",
            )
        ]
    if fact.status != ACTIVE:
        return [Problem(where, f"the claim {claim_id!r} is {fact.status}", "reference an active claim")]
    return []


def reasons(problems: Sequence[Problem]) -> str:
    """Problems as one line, for a refusal reason."""
    return "; ".join(f"{p.field}: {p.message}" for p in problems)
