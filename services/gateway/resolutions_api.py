"""Predictions' resolutions and agents' track records over /api/v1 (reviewers and admins)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request

from services.gateway import api_models as m
from services.gateway.auth import Principal
from services.gateway.http_api import READERS, AgentName, CaseId, call, caller
from shared import contracts as c
from shared.resolution_contracts import AgentRecordRef, Day, ResolvePrediction
from shared.subjects import Command

router = APIRouter(prefix="/api/v1", responses=m.ERROR_RESPONSES)


class ResolveBody(c.RequestBody):
    claim_id: c.Slug
    outcome: Literal["true", "false", "void"]
    source_id: c.Slug
    resolved_on: Day
    note: c.bounded_text(2000) | None = None
    expected_revision: c.Revision | None = None


@router.post("/cases/{case_id}/resolutions", tags=["cases"], response_model=m.View)
async def resolve_prediction(case_id: CaseId, body: ResolveBody, request: Request,
                             principal: Principal = caller(*READERS)) -> Any:
    """Resolve a canonical prediction claim `true`, `false` or `void`, citing a canonical source and the day it
    resolved (not in the future): the case's revision + 1 and a `threadline.prediction.resolved` event. A
    resolution is never undone: a later one supersedes it, with a note saying why."""
    return await call(request, Command.RESOLVE_PREDICTION, ResolvePrediction(
        actor=principal.actor(), case_id=case_id, claim_id=body.claim_id, outcome=body.outcome,
        source_id=body.source_id, resolved_on=body.resolved_on, note=body.note,
        expected_revision=body.expected_revision))


@router.get("/agents/{name:path}/record", tags=["agents"], response_model=m.View)
async def agent_record(name: AgentName, request: Request, principal: Principal = caller(*READERS)) -> Any:
    """The agent's track record from the ledger: proposals and items staged, accepted, rejected and pending,
    the acceptance rate, reviewers' rejection notes grouped, possible duplicates and review checks flagged,
    and the Brier score and calibration of its resolved predictions."""
    return await call(request, Command.AGENT_RECORD, AgentRecordRef(actor=principal.actor(), agent=name))
