"""How review's records read to reviewers: cases, proposals with their decisions, and the case history."""

from __future__ import annotations

from typing import Any

from services.review.domain import DecisionPlan, StoredProposal, status_after
from shared import health, kinds
from shared.untrusted import UNTRUSTED_NOTICE, frame_record, record_body


def case_view(case: dict[str, Any]) -> dict[str, Any]:
    return {
        "caseId": case["case_id"],
        "title": case["title"],
        "question": case["question"],
        "revision": case["revision"],
        "createdBy": case["created_by"],
        "createdAt": case["created_at"].isoformat(),
    }


def proposal_view(
    proposal: StoredProposal,
    previews: dict[str, Any] | None = None,
    decisions: list[dict[str, Any]] | None = None,
    evidence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A proposal as reviewers see it: its items, their outcomes, and every decision recorded on it."""
    items = []
    for item in proposal.items:
        entry: dict[str, Any] = {
            "itemId": item.item_id,
            "status": item.outcome or "pending",
            "record": item.payload,
        }
        if item.outcome:
            entry["decidedBy"] = item.decided_by
            entry["decidedAt"] = item.decided_at.isoformat() if item.decided_at else None
            entry["decisionId"] = item.decision_id
        if previews and item.item_id in previews:
            entry["wouldChange"] = previews[item.item_id]
        if evidence and item.item_id in evidence:
            entry["evidence"] = evidence[item.item_id]
        items.append(entry)
    return {
        "proposalId": proposal.proposal_id,
        "caseId": proposal.case_id,
        "kind": proposal.kind,
        "status": proposal.status,
        "pinnedRevision": proposal.pinned_revision,
        "rebasedOnto": rebased_onto(proposal),
        "provenance": {
            "agent": proposal.agent_name,
            "tokenName": proposal.agent_name,
            "tokenId": proposal.token_id,
            "stagedAt": proposal.created_at.isoformat(),
            "pinnedRevision": proposal.pinned_revision,
            "rebasedOnto": rebased_onto(proposal),
            "correlationId": proposal.correlation_id,
        },
        "items": items,
        "decisions": [decision_view(d) for d in decisions or []],
    }


def evidence_view(kind: kinds.ItemKind[Any], item: Any, found: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """What an item rests on, beside it: each cited source's evidence, framed as untrusted data, and the text of
    each canonical claim it connects. Ids that name no canonical record are listed as such."""
    refs = kind.references(item)
    own = kind.id_of(item)
    sources, claims = found["sources"], found["claims"]
    framed = []
    cited = refs.sources - {own}
    for source_id in sorted(cited):
        source = sources.get(source_id)
        if source is None:
            continue
        record = frame_record(source_id, record_body(source, source["transcriptions"]))
        framed.append({"sourceId": source_id, "title": source["title"], "publisher": source["publisher"],
                       "type": source["type"], "url": source["url"], "status": source["status"],
                       "trust": UNTRUSTED_NOTICE, "nonce": record["nonce"], "record": record["text"]})
    connected = [{"claimId": claim_id, "text": claims[claim_id]["text"], "kind": claims[claim_id]["kind"],
                  "confidence": claims[claim_id]["confidence"], "status": claims[claim_id]["status"],
                  "health": claims[claim_id]["health"] or health.SUPPORTED}
                 for claim_id in sorted(refs.claims - {own}) if claim_id in claims]
    missing = sorted((cited - sources.keys()) | (refs.claims - claims.keys() - {own}))
    return {"sources": framed, "claims": connected, "notCanonical": missing}


def rebased_onto(proposal: StoredProposal) -> int | None:
    """The newer revision a call pinned behind the case was checked against and stored at (None: its pin)."""
    staged = proposal.staged_revision
    return staged if staged is not None and staged != proposal.pinned_revision else None


def recorded_decision(proposal: StoredProposal, decision: dict[str, Any]) -> dict[str, Any]:
    """The answer to a repeat of a recorded decision: that decision, as it was answered."""
    view = decision_view(decision)
    revision = decision["revision_after"] if decision["revision_after"] is not None else decision["expected_revision"]
    return {"proposalId": proposal.proposal_id, "caseId": proposal.case_id, "revision": revision,
            "accepted": view["accepted"], "rejected": view["rejected"], "refused": view["refused"],
            "decisionId": view["decisionId"], "status": proposal.status, "recorded": True, "replayed": True}


def decision_view(decision: dict[str, Any]) -> dict[str, Any]:
    """Who decided, when, why, and what became of each item they chose (refused items were left as they were)."""
    return {
        "decisionId": decision["decision_id"],
        "reviewer": decision["reviewer"],
        "decidedAt": decision["decided_at"].isoformat(),
        "note": decision["note"],
        "expectedRevision": decision["expected_revision"],
        "revisionAfter": decision["revision_after"],
        "accepted": [item for item, outcome in decision["outcomes"] if outcome == "accepted"],
        "rejected": [item for item, outcome in decision["outcomes"] if outcome == "rejected"],
        "refused": decision["refused"],
    }


def decided(proposal: StoredProposal, plan: DecisionPlan, *, revision: int, decision_id: str | None) -> dict[str, Any]:
    """The answer to a decision: what was accepted, rejected and refused, and whether anything was stored."""
    return {
        "proposalId": proposal.proposal_id,
        "caseId": proposal.case_id,
        "revision": revision,
        "accepted": [i.item_id for i in plan.accepted],
        "rejected": [i.item_id for i in plan.rejected],
        "refused": plan.refused,
        "decisionId": decision_id,
        "status": status_after(proposal, plan) if decision_id else proposal.status,
        "recorded": decision_id is not None,
    }


def history_view(case_id: str, entries: list[dict[str, Any]], older: bool, proposal_of: dict[str, str],
                 ended: list[dict[str, Any]]) -> dict[str, Any]:
    """A page of the change log, newest first, with the records that left the ledger in those revisions."""
    return {
        "caseId": case_id,
        "changes": [
            {
                "revision": e["revision"],
                "at": e["at"].isoformat(),
                "actor": e["actor"],
                "summary": e["summary"],
                "decisionId": e["decision_id"],
                "proposalId": proposal_of.get(e["decision_id"]),
                "stagedBy": e.get("staged_by"),
                "changes": e["changes"],
            }
            for e in entries
        ],
        "nextBefore": entries[-1]["revision"] if older else None,
        "ended": [
            {
                "record": r["record"],
                "id": r["id"],
                "status": r["status"],
                "introducedInRevision": r["revision"],
                "acceptedBy": r["decided_by"],
                "acceptedAt": r["decided_at"].isoformat(),
                "endedBy": r["ended_by"],
                "endedAt": r["ended_at"].isoformat() if r["ended_at"] else None,
                "endedInRevision": r["ended_revision"],
                "supersededBy": r["superseded_by"],
            }
            for r in ended
        ],
    }
