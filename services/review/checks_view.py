"""The review checks and grounding beside each item of a proposal a reviewer opens, evaluated against the
ledger as it is now (the stage answer showed them against the ledger as it was then), and the resolution of
a prediction the proposal made canonical."""

from __future__ import annotations

from typing import Any

from services.review.resolutions import item_resolution
from shared.contracts import ClaimItem, RelationItem, VerdictPatch
from shared.grounding import label
from shared.review_checks import CheckFacts, evaluate
from shared.settings import get_settings


def _grounding(item: Any, facts: CheckFacts) -> dict[str, Any] | None:
    claim = item.claim if isinstance(item, VerdictPatch) else item
    if isinstance(claim, ClaimItem) or isinstance(item, VerdictPatch):
        cited = [facts.sources[s] for s in claim.source_ids if s in facts.sources]
        return label((s.type, s.publisher) for s in cited)
    if isinstance(item, RelationItem):
        return {end: label((s.type, s.publisher) for s in facts.claims[claim_id].sources)
                for end, claim_id in (("source", item.source_claim_id), ("target", item.target_claim_id))
                if claim_id in facts.claims}
    return None


async def annotations(ledger: Any, case_id: str, kind: str, typed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each item's `reviewChecks` (and a claim's `grounding`, a relation's ends'; a resolved prediction's
    `resolution`)."""
    items = list(typed.values())
    facts = await ledger.review_facts(case_id, items, relations=kind == "relations")
    flags = evaluate(items, facts, get_settings().disabled_review_checks)
    found: dict[str, dict[str, Any]] = {}
    for item_id, item in typed.items():
        found[item_id] = {"reviewChecks": [f.to_json() for f in flags if f.item_id == item_id]}
        if (grounding := _grounding(item, facts)) is not None:
            found[item_id]["grounding"] = grounding
    for item_id, row in (await _resolved(ledger, case_id, typed)).items():
        found[item_id]["resolution"] = item_resolution(row)
    return found


async def _resolved(ledger: Any, case_id: str, typed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The latest resolution of each prediction item that is the canonical claim now (same id, same text: a
    pending restatement under a taken id is not the claim that resolved)."""
    predictions = {i: item for i, item in typed.items() if isinstance(item, ClaimItem) and item.kind == "prediction"}
    if not predictions:
        return {}
    rows = await ledger.resolutions_of(case_id, list(predictions))
    return {i: row for i, row in rows.items() if row["claim_text"] == predictions[i].text}


def with_staged_checks(view: dict[str, Any], flags: dict[tuple[str, str], list[dict[str, Any]]]) -> dict[str, Any]:
    """A proposal of the queue, each item with the review checks it was flagged with when staged (its page
    evaluates them again against the ledger as it is now)."""
    off = get_settings().disabled_review_checks
    for item in view["items"]:
        item["reviewChecks"] = [f for f in flags.get((view["proposalId"], item["itemId"]), []) if f["check"] not in off]
    return view
