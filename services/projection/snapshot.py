"""The read side's snapshot of a case's active records, and the counting rules on it that the workspace
rules (domain.py) and evidence health (health.py) both use. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from shared.ledger import VERDICT


@dataclass(frozen=True)
class ClaimView:
    claim_id: str
    text: str
    kind: str
    confidence: str
    lane: str | None
    order: int | None
    source_ids: tuple[str, ...]
    revision: int

    @property
    def is_verdict(self) -> bool:
        return self.kind == VERDICT


@dataclass(frozen=True)
class RelationView:
    relation_id: str
    source_claim_id: str
    target_claim_id: str
    type: str
    verdict_basis: bool


@dataclass
class LedgerSnapshot:
    """The active canonical records of a case, as the read side needs them."""

    revision: int
    claims: list[ClaimView] = field(default_factory=list)
    source_types: dict[str, str] = field(default_factory=dict)
    relations: list[RelationView] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    source_revisions: dict[str, int] = field(default_factory=dict)
    publishers: dict[str, str] = field(default_factory=dict)  # active source id → publisher
    health: dict[str, tuple[str, list[dict[str, str]]]] = field(default_factory=dict)  # claim id → rating, lost

    @property
    def verdict(self) -> ClaimView | None:
        return next((c for c in self.claims if c.is_verdict), None)


NAMED_IN_DETAIL = 5


def named_list(ids: Sequence[str], cap: int = NAMED_IN_DETAIL) -> str:
    """`a, b, c and 4 more`: a bounded mention of ids inside one line of text."""
    shown = ", ".join(ids[:cap])
    return f"{shown} and {len(ids) - cap} more" if len(ids) > cap else shown


def independent_units(claim_ids: Iterable[str], groups: Mapping[str, Sequence[str]]) -> int:
    """How many independent items the claims amount to: a merge group counts once (union of overlaps)."""
    return len(set(merge_units(claim_ids, groups).values()))


def merge_units(claim_ids: Iterable[str], groups: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each claim's independent unit — the least claim id of its merge component, among these claims only."""
    ids = set(claim_ids)
    parent = {c: c for c in ids}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for members in groups.values():
        present = [m for m in members if m in ids]
        for other in present[1:]:
            a, b = find(other), find(present[0])
            parent[max(a, b)] = min(a, b)
    return {c: find(c) for c in ids}
