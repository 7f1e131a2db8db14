"""The rows a case view is kept in, what each adds to the summary's counters, and the summary they make.

Pure, no I/O. A live change and a rebuild both go through these functions: the change rewrites the rows
it touches and moves the counters by (what the new rows add) − (what the old ones added); the rebuild
makes every row from the ledger at once and sums what they add.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from services.projection import domain
from services.projection import health as read_health
from services.projection.domain import ClaimView, LedgerSnapshot
from shared.health import SUPPORTED, UNSUPPORTED, origin
from shared.ledger import VERDICT

UNRESOLVED = "unresolved"
ORIGINS = "sources.origins"  # how many distinct origins (publishers) the active sources have
NEVER_BUILT = -1
WEAK_CONFIDENCE = ("disputed", "unknown")
CASE_BAND, HEALTH_BAND, CLAIM_BAND = 0, 1, 2  # the unresolved section: the case's items, what lost support, the rest


@dataclass(frozen=True)
class ViewState:
    revision: int  # the ledger revision the rows show; NEVER_BUILT before the first rebuild
    verdict_id: str | None


@dataclass(frozen=True)
class SourceRow:
    source_id: str
    type: str
    revision: int
    cited_by: int = 0  # active claims citing it
    origin: str = ""  # its publisher as an origin (shared.health.origin)

    @property
    def strong(self) -> bool:
        return self.type in domain.STRONG_SOURCE_TYPES

    def counts(self) -> Counter[str]:
        return Counter({"sources": 1, f"sources.byType.{self.type}": 1, "sources.uncited": int(self.cited_by == 0)})


@dataclass(frozen=True)
class ClaimRow:
    claim_id: str
    kind: str
    confidence: str
    lane: str | None
    order: int | None
    revision: int
    source_ids: tuple[str, ...]
    strong: bool = False
    contradicted_by: tuple[str, ...] = ()  # sorted
    unit: str = ""  # the least claim id of its merge component (its own id when it is in no group)
    health: str = SUPPORTED  # or how the last retirement that re-rated it left it
    lost: tuple[tuple[str, str], ...] = ()  # (record, id) whose retirement took its support

    @property
    def is_verdict(self) -> bool:
        return self.kind == VERDICT

    @property
    def lane_rank(self) -> int:
        return 0 if self.lane == VERDICT else 1

    @property
    def rating(self) -> tuple[str, list[dict[str, str]]]:
        return self.health, [{"record": record, "id": record_id} for record, record_id in self.lost]

    @property
    def health_items(self) -> list[dict[str, Any]]:
        return read_health.open_items(self.claim_id, self.is_verdict, self.rating)

    @property
    def open_items(self) -> list[dict[str, Any]]:
        view = ClaimView(self.claim_id, "", self.kind, self.confidence, self.lane, self.order, self.source_ids,
                         self.revision)
        return domain.claim_open_items(view, self.contradicted_by, strong=self.strong)

    def rerated(self, health: str, lost: Iterable[Mapping[str, str]]) -> ClaimRow:
        return replace(self, health=health, lost=tuple((x["record"], x["id"]) for x in lost))

    def counts(self) -> Counter[str]:
        counts = Counter({"claims.all": 1})
        if self.is_verdict:
            return counts
        counts.update({
            "claims": 1,
            f"claims.byKind.{self.kind}": 1,
            f"claims.byConfidence.{self.confidence}": 1,
            "claims.independent": int(self.unit == self.claim_id),
            "claims.withoutPrimarySource": int(not self.strong),
            "claims.weak": int(self.confidence in WEAK_CONFIDENCE),
            "claims.contradicted": int(self.confidence == "contradicted" or bool(self.contradicted_by)),
            "claims.unsupported": int(self.health == UNSUPPORTED),
        })
        return counts


def new_claim(claim: Mapping[str, Any], revision: int, source_types: Mapping[str, str]) -> ClaimRow:
    """The row of a claim an event adds (`claimsAdded`), its sources' types known."""
    source_ids = tuple(claim["sourceIds"])
    return ClaimRow(claim["id"], claim["kind"], claim["confidence"], claim.get("lane"), claim.get("order"), revision,
                    source_ids, strong=domain.grounded(source_ids, source_types), unit=claim["id"])


def relation_counts(relation_type: str, verdict_basis: bool) -> Counter[str]:
    return Counter({"relations": 1, f"relations.byType.{relation_type}": 1, "verdict.bases": int(verdict_basis)})


GROUP_COUNTS = Counter({"groups": 1})


@dataclass(frozen=True)
class UnresolvedRow:
    """One item of the unresolved section; (band, claim_revision, claim_id, position) is its place in it."""

    band: int
    claim_revision: int
    claim_id: str
    position: int
    item: dict[str, Any]


def claim_unresolved(row: ClaimRow) -> list[UnresolvedRow]:
    """A claim's items: what its rating raises (the verdict's beside the case's own), then the rest."""
    band = CASE_BAND if row.is_verdict else HEALTH_BAND
    return ([UnresolvedRow(band, row.revision, row.claim_id, i, item) for i, item in enumerate(row.health_items)]
            + [UnresolvedRow(CLAIM_BAND, row.revision, row.claim_id, i, item)
               for i, item in enumerate(row.open_items)])


def case_unresolved(verdict_id: str | None) -> list[UnresolvedRow]:
    """The case's own items, before every claim's."""
    return [] if verdict_id else [UnresolvedRow(CASE_BAND, -1, "", 0, domain.missing_verdict_item())]


def regrouped(rows: Iterable[ClaimRow], groups: Mapping[str, list[str]]) -> list[ClaimRow]:
    """The rows whose unit changes once their merge components are computed again from these groups."""
    chosen = [r for r in rows if not r.is_verdict]
    units = domain.merge_units([r.claim_id for r in chosen], groups)
    return [replace(r, unit=units[r.claim_id]) for r in chosen if r.unit != units[r.claim_id]]


def moved(before: Iterable[Counter[str]], after: Iterable[Counter[str]]) -> Counter[str]:
    """How counters move when rows adding `before` are replaced by rows adding `after`."""
    delta: Counter[str] = Counter()
    for counts in after:
        delta.update(counts)
    for counts in before:
        delta.subtract(counts)
    return delta


@dataclass
class CaseRows:
    """Every row of one case's view."""

    revision: int
    verdict_id: str | None = None
    sources: list[SourceRow] = field(default_factory=list)
    claims: list[ClaimRow] = field(default_factory=list)
    members: list[tuple[str, str]] = field(default_factory=list)  # (group, claim)
    origins: Counter[str] = field(default_factory=Counter)  # origin → active sources from it
    unresolved: list[UnresolvedRow] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def case_rows(snapshot: LedgerSnapshot) -> CaseRows:
    """The whole view of a case, from its ledger (the rebuild)."""
    contradicted_by = domain.contradictions(snapshot.relations)
    cited = Counter(s for c in snapshot.claims for s in c.source_ids)
    units = domain.merge_units([c.claim_id for c in snapshot.claims if not c.is_verdict], snapshot.groups)
    verdict = snapshot.verdict
    rows = CaseRows(snapshot.revision, verdict.claim_id if verdict else None)
    rows.sources = [SourceRow(s, t, snapshot.source_revisions.get(s, 0), cited[s], origin(snapshot.publishers.get(s, s)))
                    for s, t in snapshot.source_types.items()]
    rows.claims = [
        ClaimRow(c.claim_id, c.kind, c.confidence, c.lane, c.order, c.revision, c.source_ids,
                 strong=domain.grounded(c.source_ids, snapshot.source_types),
                 contradicted_by=tuple(sorted(contradicted_by.get(c.claim_id, []))),
                 unit=units.get(c.claim_id, c.claim_id))
        .rerated(*snapshot.health.get(c.claim_id, (SUPPORTED, [])))
        for c in snapshot.claims
    ]
    rows.members = [(g, m) for g, members in snapshot.groups.items() for m in members]
    rows.origins = Counter(s.origin for s in rows.sources if s.origin)
    rows.unresolved = case_unresolved(rows.verdict_id) + [u for r in rows.claims for u in claim_unresolved(r)]
    rows.counts = moved([], [
        *(s.counts() for s in rows.sources),
        *(c.counts() for c in rows.claims),
        *(relation_counts(r.type, r.verdict_basis) for r in snapshot.relations),
        *(GROUP_COUNTS for _ in snapshot.groups),
        Counter({UNRESOLVED: len(rows.unresolved), ORIGINS: len(rows.origins)}),
    ])
    return rows


# --- the summary, from the counters ------------------------------------------------------------------


def _by(counts: Mapping[str, int], prefix: str) -> dict[str, int]:
    return {name.removeprefix(prefix): value for name, value in sorted(counts.items())
            if name.startswith(prefix) and value}


def ledger_counts(counts: Mapping[str, int]) -> dict[str, Any]:
    """`domain.ledger_counts`, read from the counters."""
    return {
        "sources": {"total": counts.get("sources", 0), "byType": _by(counts, "sources.byType.")},
        "claims": {
            "total": counts.get("claims", 0),
            "verdicts": counts.get("claims.all", 0) - counts.get("claims", 0),
            "independent": counts.get("claims.independent", 0),
            "byKind": _by(counts, "claims.byKind."),
            "byConfidence": _by(counts, "claims.byConfidence."),
        },
        "relations": {"total": counts.get("relations", 0), "byType": _by(counts, "relations.byType.")},
        "groups": counts.get("groups", 0),
    }


def evidence_health(counts: Mapping[str, int], has_verdict: bool, unsupported: list[str],
                    verdict_health: str) -> dict[str, Any]:
    """`domain.evidence_health`, read from the counters (`unsupported`: the first of the claims that are)."""
    total = counts.get("claims.unsupported", 0)
    return {
        "sources": {
            "total": counts.get("sources", 0),
            "byType": _by(counts, "sources.byType."),
            "uncited": counts.get("sources.uncited", 0),
        },
        "claims": {
            "total": counts.get("claims", 0),
            "verdicts": counts.get("claims.all", 0) - counts.get("claims", 0),
            "independent": counts.get("claims.independent", 0),
            **{name: counts.get(f"claims.{name}", 0) for name in ("withoutPrimarySource", "weak", "contradicted")},
        },
        "verdict": {"state": "accepted" if has_verdict else "missing", "bases": counts.get("verdict.bases", 0)},
        "independentOrigins": counts.get(ORIGINS, 0),
        "unsupported": {"total": total, "claimIds": unsupported, "omitted": max(0, total - len(unsupported))},
        "verdictHealth": verdict_health,
    }
