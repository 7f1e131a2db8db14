"""The case page's pending queue: the same filters, order and paging as `GET /cases/{caseId}/proposals`, read
from the page's query string; a filter the contract refuses is said beside the queue, never a broken page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import pydantic
from fastapi import Request

from services.gateway.errors import invalid_argument
from shared import contracts as c
from shared.errors import ThreadlineError
from shared.subjects import Command

PAGE = 25  # proposals a page of the queue shows
FILTERS = ("kind", "agent", "q", "duplicates", "sort")
KINDS = ("sources", "claims", "relations", "merge", "verdict")


def asked(request: Request) -> dict[str, str]:
    """The queue's filters in the page's query string, empty ones left out."""
    return {name: request.query_params[name].strip() for name in (*FILTERS, "cursor")
            if request.query_params.get(name, "").strip()}


async def pending_queue(request: Request, actor: c.Actor, case_id: str,
                        call: Callable[[Request, Command, Any], Awaitable[Any]]) -> dict[str, Any]:
    """What the template `_queue.html` shows: one page of pending proposals, the filters as asked, the link to
    the next page (same filters, the page's cursor) and to the first, or the problem with a filter."""
    wanted = asked(request)
    filters = {k: v for k, v in wanted.items() if k != "cursor"}
    context: dict[str, Any] = {"filters": filters, "kinds": KINDS, "paged": "cursor" in wanted, "next": None,
                               "problem": None, "proposals": [], "first": _link(case_id, filters)}
    try:
        listed = await call(request, Command.LIST_PROPOSALS, c.ListProposals(
            actor=actor, case_id=case_id, status="pending", limit=PAGE,
            **{**wanted, "duplicates": wanted.get("duplicates") in ("true", "on", "1")}))
    except (ThreadlineError, pydantic.ValidationError) as error:
        context["problem"] = invalid_argument(error.errors()) if isinstance(error, pydantic.ValidationError) else error
        return context
    context["proposals"], context["total"] = listed["proposals"], listed["total"]
    if listed.get("nextCursor"):
        context["next"] = _link(case_id, {**filters, "cursor": listed["nextCursor"]})
    return context


def _link(case_id: str, params: dict[str, str]) -> str:
    query = urlencode(params)
    return f"/ui/cases/{case_id}{'?' if query else ''}{query}#queue"
