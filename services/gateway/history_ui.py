"""The review page of one claim: its timeline, each event linking to the case as it stood at that revision."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from services.gateway.auth import Principal
from services.gateway.history_api import ClaimId
from services.gateway.http_api import CaseId
from services.gateway.ui import Reviewer, call, render
from shared.history_contracts import ClaimTimeline
from shared.subjects import Command

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/cases/{case_id}/claims/{claim_id}")
async def claim_page(request: Request, case_id: CaseId, claim_id: ClaimId, principal: Principal = Reviewer) -> Response:
    timeline = await call(request, Command.CLAIM_TIMELINE,
                          ClaimTimeline(actor=principal.actor(), case_id=case_id, claim_id=claim_id))
    return render(request, "timeline.html", timeline=timeline)
