"""Evidence health as the read side tells it: unsupported claims, a weakened verdict, independent origins. Pure.

Review records the ratings when a retirement re-rates what leaned on it (shared/health.py); these functions
turn the ratings in a snapshot into the summary's figures and the `unresolved` section's entries.
"""

from __future__ import annotations

from typing import Any

from services.projection import domain  # imports this module too: only its functions are used, at call time
from shared import health

NAMED_CAP = 10  # ids a summary names; the total says how many there are


def _lost(snapshot: domain.LedgerSnapshot, claim_id: str) -> list[dict[str, str]]:
    return snapshot.health.get(claim_id, (health.SUPPORTED, []))[1]


def unsupported(snapshot: domain.LedgerSnapshot) -> list[str]:
    return [c.claim_id for c in snapshot.claims
            if not c.is_verdict and snapshot.health.get(c.claim_id, ("",))[0] == health.UNSUPPORTED]


def verdict_health(snapshot: domain.LedgerSnapshot) -> dict[str, Any]:
    """The verdict's health, what its bases lost, and how independent the evidence behind its bases is."""
    verdict = snapshot.verdict
    if verdict is None:
        return {}
    rating = snapshot.health.get(verdict.claim_id, (health.SUPPORTED, []))
    basis_claims = [r.source_claim_id for r in snapshot.relations
                    if r.target_claim_id == verdict.claim_id and r.verdict_basis]
    cited = {s for c in snapshot.claims if c.claim_id in basis_claims for s in c.source_ids
             if s in snapshot.source_types}
    return {
        "health": rating[0],
        "lost": rating[1][: health.LOST_CAP],
        "independentBases": domain.independent_units(basis_claims, snapshot.groups),
        "independentOrigins": health.independent_origins(snapshot.publishers.get(s, s) for s in cited),
    }


def summary(snapshot: domain.LedgerSnapshot) -> dict[str, Any]:
    """The evidence-health figures beside the counts: what lost support, named (bounded), and origins."""
    claims = unsupported(snapshot)
    verdict = verdict_health(snapshot)
    return {
        "independentOrigins": health.independent_origins(snapshot.publishers.get(s, s) for s in snapshot.source_types),
        "unsupported": {"total": len(claims), "claimIds": claims[:NAMED_CAP],
                        "omitted": max(0, len(claims) - NAMED_CAP)},
        "verdictHealth": verdict.get("health", "missing"),
    }


def unresolved(snapshot: domain.LedgerSnapshot) -> list[dict[str, Any]]:
    """The open questions evidence health raises: a weakened verdict first, then each unsupported claim."""
    items: list[dict[str, Any]] = []
    verdict = snapshot.verdict
    if verdict is not None and snapshot.health.get(verdict.claim_id, ("",))[0] == health.WEAKENED:
        lost = [f"{x['record']} {x['id']}" for x in _lost(snapshot, verdict.claim_id)]
        items.append({
            "type": "verdict_weakened",
            "claimId": verdict.claim_id,
            "detail": "a basis of the verdict lost its support: " + domain.named_list(lost),
            "action": "find new evidence for its bases and stage it, or stage a verdict that rests on supported claims",
        })
    for claim_id in unsupported(snapshot):
        lost = [x["id"] for x in _lost(snapshot, claim_id)]
        items.append({
            "type": "claim_unsupported",
            "claimId": claim_id,
            "detail": "every source it cites is retired: " + domain.named_list(lost),
            "action": "find an active source for it and stage a claim that cites it, or let a reviewer retire it",
        })
    return items
