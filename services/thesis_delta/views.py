"""What thesis-delta answers: operations, deltas and companies as agents, reviewers and operators read them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from services.thesis_delta.domain import Company, Operation, SourceFile, ThesisClaim

NEXT_AFTER_PREVIEW = (
    "Show this delta to the person approving it; after approval call propose_claim_delta_from_source "
    "with mode=commit, operationId and commitToken only. Committing never changes the thesis: a reviewer "
    "applies it."
)


def operation_view(operation: Operation, now: datetime) -> dict[str, Any]:
    view = {
        "operationId": operation.operation_id,
        "status": operation.status_at(now),
        "companyId": operation.company_id,
        "idempotencyKey": operation.idempotency_key,
        "baseRevision": operation.base_revision,
        "expiresAt": operation.expires_at.isoformat(),
        "createdAt": operation.created_at.isoformat(),
        "delta": operation.delta,
    }
    if operation.committed_at:
        view["committedAt"] = operation.committed_at.isoformat()
    if operation.decided_at:
        view["decidedAt"] = operation.decided_at.isoformat()
        view["decidedBy"] = operation.decided_by
        view["note"] = operation.note
    if operation.revision_after is not None:
        view["revisionAfter"] = operation.revision_after
    return view


def next_after_commit(operation: Operation) -> str:
    if operation.status == "committed":
        return "The delta waits for human review; the thesis is unchanged until a reviewer accepts it."
    return f"This operation was already decided: {operation.status}."


def context_unavailable(reason: str) -> dict[str, Any]:
    return {"unavailable": reason, "hint": "call get_company_context for the thesis around it"}


def delta_digest(delta: dict[str, Any]) -> dict[str, Any]:
    """What a list of deltas shows of each: its category, a summary excerpt and how many claims it changes."""
    return {
        "category": delta["category"],
        "summary": delta["summary"][:300],
        "claims": {action: len(delta["claims"].get(action, [])) for action in ("added", "updated", "retired")},
    }


def deltas_view(company: Company, operations: list[Operation], now: datetime) -> dict[str, Any]:
    return {
        "companyId": company.company_id,
        "ticker": company.ticker,
        "thesisRevision": company.thesis_revision,
        # Digests, not whole deltas: a page of full deltas could outgrow a NATS message; GET a delta for its diff.
        "deltas": [{**operation_view(o, now), "caller": o.caller, "delta": delta_digest(o.delta)} for o in operations],
    }


def delta_view(operation: Operation, company: Company, now: datetime) -> dict[str, Any]:
    view = {**operation_view(operation, now), "caller": operation.caller, "ticker": company.ticker,
            "companyName": company.name, "thesisRevision": company.thesis_revision}
    view["applicable"] = operation.status == "committed" and operation.base_revision == company.thesis_revision
    if operation.status == "committed" and not view["applicable"]:
        view["refusal"] = (
            f"the thesis moved from revision {operation.base_revision} to {company.thesis_revision} since the "
            "preview; accepting could apply a stale delta. Reject it; the agent must preview again."
        )
    return view


def company_view(company: Company) -> dict[str, Any]:
    return {"companyId": company.company_id, "ticker": company.ticker, "name": company.name,
            "thesisRevision": company.thesis_revision}


def companies_view(listed: list[tuple[Company, int]]) -> dict[str, Any]:
    return {"companies": [{**company_view(company), "committedDeltas": committed} for company, committed in listed]}


def thesis_view(company: Company, claims: dict[str, ThesisClaim], files: list[SourceFile]) -> dict[str, Any]:
    return {
        **company_view(company),
        "claims": [{**c.public(), "status": c.status} for c in claims.values()],
        "sourceFiles": [
            {"sourceFileId": f.source_file_id, "title": f.title, "url": f.url, "length": f.characters} for f in files
        ],
    }
