"""Evidence health as the read side tells it: unsupported claims, a weakened verdict, independent origins. Pure.

Review records the ratings when a retirement re-rates what leaned on it (shared/health.py); these functions
turn the ratings in a snapshot into the summary's figures and the `unresolved` section's entries.
"""

from __future__ import annotations

from typing import Any

from services.projection.snapshot import LedgerSnapshot, independent_units, named_list
from shared import gaps, health

NAMED_CAP = 10  # ids a summary names; the total says how many there are


def unsupported(snapshot: LedgerSnapshot) -> list[str]:
    return [c.claim_id for c in snapshot.claims
            if not c.is_verdict and snapshot.health.get(c.claim_id, ("",))[0] == health.UNSUPPORTED]


def verdict_health(snapshot: LedgerSnapshot) -> dict[str, Any]:
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
        "independentBases": independent_units(basis_claims, snapshot.groups),
        "independentOrigins": health.independent_origins(snapshot.publishers.get(s, s) for s in cited),
    }


def summary(snapshot: LedgerSnapshot) -> dict[str, Any]:
    """The evidence-health figures beside the counts: what lost support, named (bounded), and origins."""
    claims = unsupported(snapshot)
    verdict = verdict_health(snapshot)
    return {
        "independentOrigins": health.independent_origins(snapshot.publishers.get(s, s) for s in snapshot.source_types),
        "unsupported": {"total": len(claims), "claimIds": claims[:NAMED_CAP],
                        "omitted": max(0, len(claims) - NAMED_CAP)},
        "verdictHealth": verdict.get("health", "missing"),
    }


def unresolved(snapshot: LedgerSnapshot) -> list[dict[str, Any]]:
    """The open questions evidence health raises: a weakened verdict first, then each unsupported claim."""
    verdict = snapshot.verdict
    items = open_items(verdict.claim_id, True, snapshot.health.get(verdict.claim_id)) if verdict else []
    for claim in snapshot.claims:
        if not claim.is_verdict:
            items += open_items(claim.claim_id, False, snapshot.health.get(claim.claim_id))
    return items


def open_items(claim_id: str, is_verdict: bool, rating: tuple[str, list[dict[str, str]]] | None) -> list[dict[str, Any]]:
    """The open question a claim's rating raises, if any: the verdict weakened, or a claim unsupported."""
    health_now, lost = rating or (health.SUPPORTED, [])
    if is_verdict and health_now == health.WEAKENED:
        return [{
            "type": gaps.VERDICT_WEAKENED,
            "claimId": claim_id,
            "detail": "a basis of the verdict lost its support: "
                      + named_list([f"{x['record']} {x['id']}" for x in lost]),
            "action": "find new evidence for its bases and stage it, or stage a verdict that rests on supported claims",
        }]
    if not is_verdict and health_now == health.UNSUPPORTED:
        return [{
            "type": gaps.CLAIM_UNSUPPORTED,
            "claimId": claim_id,
            "detail": "every source it cites is retired: " + named_list([x["id"] for x in lost]),
            "action": "find an active source for it and stage a claim that cites it, or let a reviewer retire it",
        }]
    return []
