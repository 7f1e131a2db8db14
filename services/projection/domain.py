"""Read-side rules: what is unresolved, how evidence is counted, paging, and untrusted-record framing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.projection import health

# The snapshot and the counting rules health.py shares with this module; still read as domain.<name>.
from services.projection.snapshot import (  # noqa: F401
    NAMED_IN_DETAIL,
    ClaimView,
    LedgerSnapshot,
    RelationView,
    independent_units,
    merge_units,
    named_list,
)
from shared import gaps
from shared.ledger import VERDICT

SECTIONS = ("summary", "claims", "sources", "proposals", "unresolved", "guidance")
PAGE_SIZE = 12
MAX_CURSOR = 96
UNRESOLVED_CONFIDENCE = tuple(gaps.CONFIDENCE_GAPS)
STRONG_SOURCE_TYPES = ("primary", "official")
CLAIMS_CAP = 40
SOURCES_CAP = 40
PROPOSALS_CAP = 20
DERIVED_CLAIMS_CAP = 12
GROUPS_PER_CLAIM_CAP = 10


def sections(scope: str) -> set[str]:
    """The sections a get_workspace scope shows: one, or every one for `all`."""
    return set(SECTIONS) if scope == "all" else {scope}


def unresolved(snapshot: LedgerSnapshot) -> list[dict[str, Any]]:
    """Every open question of the case, most fundamental first."""
    items: list[dict[str, Any]] = [] if snapshot.verdict is not None else [missing_verdict_item()]
    items += health.unresolved(snapshot)
    contradicted_by = contradictions(snapshot.relations)
    for claim in snapshot.claims:
        items += claim_open_items(claim, contradicted_by.get(claim.claim_id, []),
                                  strong=grounded(claim.source_ids, snapshot.source_types))
    return items


def missing_verdict_item() -> dict[str, Any]:
    return {
        "type": "missing_verdict",
        "detail": "the case has no accepted verdict",
        "action": "stage_verdict with at least one relation from a canonical claim to the verdict",
    }


def claim_open_items(claim: ClaimView, contradicted_by: Sequence[str], *, strong: bool) -> list[dict[str, Any]]:
    """The open questions about one claim: its confidence, claims contradicting it, its grounding."""
    items: list[dict[str, Any]] = []
    if claim.confidence in UNRESOLVED_CONFIDENCE:
        items.append(
            {
                "type": gaps.CONFIDENCE_GAPS[claim.confidence],
                "claimId": claim.claim_id,
                "detail": f"confidence is {claim.confidence}",
                "action": "find stronger evidence and stage it, or relate this claim to one that settles it",
            }
        )
    if contradicted_by:
        items.append(
            {
                "type": gaps.CONTRADICTED_BY_RELATION,
                "claimId": claim.claim_id,
                "detail": "contradicted by " + named_list(sorted(contradicted_by)),
                "action": "weigh the contradicting claims' evidence; stage a qualifying relation or a verdict",
            }
        )
    if not claim.is_verdict and not strong:
        items.append(
            {
                "type": gaps.NO_PRIMARY_SOURCE,
                "claimId": claim.claim_id,
                "detail": "no primary or official source grounds this claim",
                "action": "find a primary or official record and stage it with stage_sources",
            }
        )
    return items


def contradictions(relations: Iterable[RelationView]) -> dict[str, list[str]]:
    """Per claim, the claims of the active `contradicts` relations pointing at it."""
    contradicted_by: dict[str, list[str]] = {}
    for relation in relations:
        if relation.type == "contradicts":
            contradicted_by.setdefault(relation.target_claim_id, []).append(relation.source_claim_id)
    return contradicted_by


def grounded(source_ids: Iterable[str], source_types: Mapping[str, str]) -> bool:
    """Whether an active primary or official record is among the sources."""
    return any(source_types.get(s) in STRONG_SOURCE_TYPES for s in source_ids)


def support(snapshot: LedgerSnapshot) -> dict[str, dict[str, int]]:
    """Per claim: independent supporting and contradicting claims (merge groups counted once)."""
    by_target: dict[str, dict[str, list[str]]] = {}
    for relation in snapshot.relations:
        if relation.type in ("supports", "contradicts"):
            by_target.setdefault(relation.target_claim_id, {}).setdefault(relation.type, []).append(
                relation.source_claim_id
            )
    return {
        target: {kind: independent_units(sources, snapshot.groups) for kind, sources in kinds.items()}
        for target, kinds in by_target.items()
    }


def page(items: Sequence[Any], cursor: int | None, section: str) -> dict[str, Any]:
    """One page of a paged section: items from the cursor's offset, and the call that reads the next page."""
    start = cursor or 0
    return page_of(items[start : start + PAGE_SIZE], start, len(items), section)


def page_of(chunk: Sequence[Any], start: int, total: int, section: str) -> dict[str, Any]:
    """A page whose items (at most PAGE_SIZE, from offset `start`) were read by index, of `total` in all."""
    following = start + len(chunk)
    has_next = following < total and following <= MAX_CURSOR
    return {
        "items": list(chunk),
        "offset": start,
        "total": total,
        "nextCursor": following if has_next else None,
        # The cursor pages one section only, so say which (scope=all answers hold two paged sections).
        "next": {"tool": "get_workspace", "arguments": {"scope": section, "cursor": following}} if has_next else None,
        # Items past the last reachable page (cursor at most 96) are counted, not silently dropped.
        "omitted": 0 if has_next else max(0, total - following),
        **({"hint": f"cursor {start} is past the last item of scope={section}: leave cursor out for the first page"}
           if start and not chunk else {}),
    }


def capped(items: Sequence[Any], cap: int) -> tuple[list[Any], int]:
    return list(items[:cap]), max(0, len(items) - cap)


def focus_order(snapshot: LedgerSnapshot, focus: str) -> list[ClaimView]:
    """Claims in the order the case's presentation focus asks for."""
    open_ids = {item.get("claimId") for item in unresolved(snapshot)}
    strong = {
        c.claim_id
        for c in snapshot.claims
        if grounded(c.source_ids, snapshot.source_types)
    }

    def base(c: ClaimView) -> tuple:
        return (c.lane != VERDICT, c.lane or "", c.order or 0, c.revision, c.claim_id)

    if focus == "unresolved":
        return sorted(snapshot.claims, key=lambda c: (c.claim_id not in open_ids, *base(c)))
    if focus == "primary_evidence":
        return sorted(snapshot.claims, key=lambda c: (c.claim_id not in strong, *base(c)))
    return sorted(snapshot.claims, key=base)


def sources_in_focus(sources: Sequence[Mapping[str, Any]], claims_in_focus: Sequence[ClaimView],
                     focus: str) -> list[Mapping[str, Any]]:
    """Sources in the order the case's presentation focus asks for.

    `primary_evidence`: primary and official records first. `unresolved`: the sources behind the first
    claims of the focus order (the open ones) first, uncited sources last. `all`: the ledger's order.
    """
    if focus == "primary_evidence":
        return sorted(sources, key=lambda s: s["type"] not in STRONG_SOURCE_TYPES)
    if focus == "unresolved":
        first_cited: dict[str, int] = {}
        for position, claim in enumerate(claims_in_focus):
            for source_id in claim.source_ids:
                first_cited.setdefault(source_id, position)
        return sorted(sources, key=lambda s: first_cited.get(s["source_id"], len(claims_in_focus)))
    return list(sources)


def counts(values: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items()))


def next_steps(
    *, sources: int, claims: int, relations: int, has_verdict: bool, pending: int, unresolved_count: int
) -> list[str]:
    steps = []
    if sources == 0:
        steps.append("stage_sources: stage the primary and official records you accessed (1–4 per call)")
    elif claims == 0:
        steps.append("stage_claims: stage atomic claims grounded in canonical sources")
    if claims >= 2 and relations == 0:
        steps.append("stage_relations: relate canonical claims (supports, contradicts, qualifies, amplifies)")
    if claims >= 2:
        steps.append("stage_merge: group claims that restate one proposition, so they count once")
    if claims > 0 and not has_verdict:
        steps.append("stage_verdict: propose a verdict with relations from canonical claims into it")
    if unresolved_count:
        steps.append(f"get_workspace scope=unresolved: {unresolved_count} open item(s) need evidence")
    if pending:
        steps.append(f"{pending} proposal(s) await human review; reviewers' notes appear in scope=guidance")
    steps.append("inspect_sources: read canonical evidence text before citing it")
    return steps


# --- untrusted evidence framing: in shared/untrusted.py, which review's proposal page uses too ----------

from shared.untrusted import UNTRUSTED_NOTICE, frame_record, record_body  # noqa: E402, F401

# --- read models ------------------------------------------------------------------------------------


def evidence_health(snapshot: LedgerSnapshot) -> dict[str, Any]:
    """Counts that say how well the case's claims are grounded (merge groups counted once)."""
    claims = [c for c in snapshot.claims if not c.is_verdict]
    cited = {s for c in snapshot.claims for s in c.source_ids}
    contradicted = {r.target_claim_id for r in snapshot.relations if r.type == "contradicts"}
    verdict = snapshot.verdict
    return {
        "sources": {
            "total": len(snapshot.source_types),
            "byType": counts(snapshot.source_types.values()),
            "uncited": len(set(snapshot.source_types) - cited),
        },
        "claims": {
            "total": len(claims),
            "verdicts": len(snapshot.claims) - len(claims),  # apart from total; scope=claims lists them too
            "independent": independent_units([c.claim_id for c in claims], snapshot.groups),
            "withoutPrimarySource": sum(
                1 for c in claims if not grounded(c.source_ids, snapshot.source_types)
            ),
            "weak": sum(1 for c in claims if c.confidence in ("disputed", "unknown")),
            "contradicted": sum(1 for c in claims if c.confidence == "contradicted" or c.claim_id in contradicted),
        },
        "verdict": {
            "state": "accepted" if verdict else "missing",
            "bases": sum(1 for r in snapshot.relations if verdict and r.target_claim_id == verdict.claim_id
                         and r.verdict_basis),
        },
        **health.summary(snapshot),
    }


def ledger_counts(snapshot: LedgerSnapshot) -> dict[str, Any]:
    claims = [c for c in snapshot.claims if not c.is_verdict]
    return {
        "sources": {"total": len(snapshot.source_types), "byType": counts(snapshot.source_types.values())},
        "claims": {
            "total": len(claims),
            "verdicts": len(snapshot.claims) - len(claims),  # apart from total; scope=claims lists them too
            "independent": independent_units([c.claim_id for c in claims], snapshot.groups),
            "byKind": counts(c.kind for c in claims),
            "byConfidence": counts(c.confidence for c in claims),
        },
        "relations": {"total": len(snapshot.relations), "byType": counts(r.type for r in snapshot.relations)},
        "groups": len(snapshot.groups),
    }


def verdict_view(snapshot: LedgerSnapshot) -> dict[str, Any]:
    verdict = snapshot.verdict
    if verdict is None:
        return {"state": "missing"}
    bases = [r for r in snapshot.relations if r.target_claim_id == verdict.claim_id and r.verdict_basis]
    return {
        "state": "accepted",
        "claimId": verdict.claim_id,
        "text": verdict.text,
        "confidence": verdict.confidence,
        "sourceIds": list(verdict.source_ids),
        "revision": verdict.revision,
        "bases": [{"relationId": r.relation_id, "claimId": r.source_claim_id, "type": r.type} for r in bases],
        **health.verdict_health(snapshot),
    }


def case_view(snapshot: LedgerSnapshot, guidance: list[dict[str, Any]]) -> dict[str, Any]:
    """The projection's read model of one case: the same function serves live updates and rebuilds."""
    return {
        "revision": snapshot.revision,
        "summary": {
            "counts": ledger_counts(snapshot),
            "verdict": verdict_view(snapshot),
            "evidenceHealth": evidence_health(snapshot),
        },
        "unresolved": unresolved(snapshot),
        "guidance": guidance,
    }
