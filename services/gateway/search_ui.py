"""The case page's search: the reviewers' case search (the engine search_workspace uses), a page of hits at a time."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from services.gateway.auth import Principal
from services.gateway.http_api import CaseId
from services.gateway.search_api import search_cursor, search_kinds
from services.gateway.ui import Reviewer, call, failure, render
from shared.contract_base import Storable
from shared.errors import ThreadlineError
from shared.search_contracts import LISTING_CURSOR_CHARS, QUERY_CHARS, CaseSearch, SearchStatus
from shared.subjects import Command

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/cases/{case_id}/search")
async def search_page(
    request: Request,
    case_id: CaseId,
    q: Annotated[str, Query(max_length=QUERY_CHARS), Storable] = "",  # blank opens the empty search form
    kinds: Annotated[list[str] | None, Query(max_length=80)] = None,
    status: SearchStatus = "canonical",
    cursor: Annotated[str | None, Query(max_length=LISTING_CURSOR_CHARS, pattern=r"^[A-Za-z0-9_-]+$")] = None,
    principal: Principal = Reviewer,
) -> Response:
    found, at = None, None
    if q.strip():
        try:
            at = search_cursor(cursor)
            found = await call(request, Command.CASE_SEARCH, CaseSearch(
                actor=principal.actor(), case_id=case_id, query=q, kinds=search_kinds(kinds), status=status,
                cursor=at))
        except ThreadlineError as error:
            return failure(request, error)
    # The page number of a search; a `*` listing's later pages are positions, reached on from its first page.
    return render(request, "search.html", case_id=case_id, q=q, kinds=",".join(kinds or ()), in_status=status,
                  found=found, page=None if isinstance(at, str) else at or 1)
