"""The admins' webhook pages: the webhooks, one webhook's recent deliveries, and redelivering one."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pydantic
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from services.gateway import ui_access
from services.gateway.auth import Principal
from services.gateway.ui import Reviewer, call, form_of, problem_of, render, status_of
from shared import webhook_contracts as wc
from shared.errors import ThreadlineError
from shared.subjects import Command

router = APIRouter(prefix="/ui", include_in_schema=False)

RECENT_DELIVERIES = 50


@router.get("/webhooks")
async def webhooks_page(request: Request, principal: Principal = Reviewer) -> Response:
    ui_access.require(principal, request.url.path)
    listed = await call(request, Command.LIST_WEBHOOKS, wc.ListWebhooks(actor=principal.actor()))
    return render(request, "webhooks.html", webhooks=listed["webhooks"])


@router.get("/webhooks/{webhook_id}")
async def webhook_page(request: Request, webhook_id: str, redelivered: str | None = None,
                       principal: Principal = Reviewer) -> Response:
    ui_access.require(principal, request.url.path)
    outcome = {"eventId": redelivered} if redelivered else None  # after a redelivery (post/redirect/get)
    return await _webhook(request, principal, webhook_id, outcome=outcome, problem=None)


async def _webhook(request: Request, principal: Principal, webhook_id: str, *, outcome: Any,
                   problem: ThreadlineError | None) -> Response:
    try:
        ref = wc.WebhookRef(actor=principal.actor(), webhook_id=webhook_id)
    except pydantic.ValidationError as error:
        raise problem_of(error) from None
    webhook = await call(request, Command.GET_WEBHOOK, ref)
    log = await call(request, Command.LIST_DELIVERIES, wc.ListDeliveries(
        actor=principal.actor(), webhook_id=webhook_id, limit=RECENT_DELIVERIES))
    return render(request, "webhook.html", status=status_of(problem) if problem else 200, webhook=webhook,
                  deliveries=log["deliveries"], outcome=outcome, problem=problem)


@router.post("/webhooks/{webhook_id}/deliveries/{event_id}/redeliver")
async def redeliver(request: Request, webhook_id: str, event_id: str, principal: Principal = Reviewer) -> Response:
    ui_access.require(principal, request.url.path)
    await form_of(request)
    try:
        outcome = await call(request, Command.REDELIVER,
                             wc.Redeliver(actor=principal.actor(), webhook_id=webhook_id, event_id=event_id))
    except (ThreadlineError, pydantic.ValidationError) as error:
        return await _webhook(request, principal, webhook_id, outcome=None, problem=problem_of(error))
    return RedirectResponse(f"/ui/webhooks/{webhook_id}?{urlencode({'redelivered': outcome['eventId']})}",
                            status_code=303)
