"""get_company_context: a saved company's thesis as an agent needs it before proposing a delta (bounded)."""

from __future__ import annotations

import uuid
from typing import Any

from services.projection import domain
from services.projection.ports import ProjectionUnitOfWork
from shared.contracts import GetCompanyContextArgs, ToolRequest
from shared.errors import NotFound

THESIS_CLAIMS_CAP = 100
RETIRED_CLAIMS_CAP = 20
SOURCE_FILES_CAP = 30
REVIEWS_CAP = 10
PENDING_DELTAS_CAP = 20


async def get_company_context(request: ToolRequest[GetCompanyContextArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    """A saved company's thesis as an agent needs it before proposing a delta (bounded)."""
    args = request.args
    company_id = _company_uuid(args.company_id) if args.company_id else None
    ticker = args.ticker.upper() if args.ticker else None
    async with uow.read():
        company = await uow.theses.company(company_id, ticker)
        if company is None:
            raise NotFound(
                f"no saved company {'with ticker ' + ticker if ticker else args.company_id}",
                field="ticker" if ticker else "companyId",
                hint="the company must be saved in Prism first (an admin adds it); check the ticker or id",
            )
        claims = await uow.theses.thesis_claims_of(company.company_id)
        files = await uow.theses.source_files_of(company.company_id)
        reviews, reviewed = await uow.theses.deltas_of(company.company_id, ("accepted", "rejected"),
                                                       "decided_at", REVIEWS_CAP)
        pending, waiting = await uow.theses.deltas_of(company.company_id, ("committed",),
                                                      "committed_at", PENDING_DELTAS_CAP)
    active = [c for c in claims if c.status == "active"]
    retired = [c for c in claims if c.status != "active"]
    listed_active, omitted_active = domain.capped(active, THESIS_CLAIMS_CAP)
    listed_retired, omitted_retired = domain.capped(retired, RETIRED_CLAIMS_CAP)
    listed_files, omitted_files = domain.capped(files, SOURCE_FILES_CAP)

    def claim(c: Any) -> dict[str, Any]:
        return {"claimId": c.claim_id, "text": c.text, "label": c.label, "section": c.section,
                "sourceUrl": c.source_url, "status": c.status, "revision": c.revision}

    def delta(d: Any) -> dict[str, Any]:
        entry = {"operationId": d.operation_id, "status": d.status, "category": d.delta["category"],
                 "summary": d.delta["summary"][:300], "caller": d.caller, "baseRevision": d.base_revision}
        if d.status in ("accepted", "rejected"):
            entry |= {"decidedBy": d.decided_by, "decidedAt": d.decided_at.isoformat(), "note": d.note}
        else:
            entry |= {"committedAt": d.committed_at.isoformat()}
        return entry

    return {
        "companyId": company.company_id,
        "ticker": company.ticker,
        "name": company.name,
        "thesisRevision": company.thesis_revision,
        "claims": {"total": len(active), "omitted": omitted_active, "items": [claim(c) for c in listed_active]},
        "retiredClaims": {"total": len(retired), "omitted": omitted_retired,
                          "items": [claim(c) for c in listed_retired]},
        "sourceFiles": {"total": len(files), "omitted": omitted_files, "items": [
            {"sourceFileId": f.source_file_id, "title": f.title, "url": f.url, "characters": f.length,
             "addedAt": f.created_at.isoformat()} for f in listed_files]},
        "recentReviews": {"total": reviewed, "items": [delta(d) for d in reviews]},
        "pendingDeltas": {"total": waiting, "items": [delta(d) for d in pending]},
        "evidenceHealth": {
            "unverifiedClaims": sum(1 for c in active if c.label == "UNVERIFIED"),
            "inferredClaims": sum(1 for c in active if c.label == "INFERRED"),
            "claimsWithoutSource": sum(1 for c in active if not c.source_url),
            "retiredClaims": len(retired),
            "pendingDeltas": waiting,
        },
        "next": (
            "Propose how one source file changes this thesis with propose_claim_delta_from_source "
            "(mode=preview, a stable idempotencyKey); update or retire claims by their claimId. A person "
            "approves the preview before you commit it, and a reviewer applies it."
        ),
    }


def _company_uuid(value: str) -> str:
    return str(uuid.UUID(value))
