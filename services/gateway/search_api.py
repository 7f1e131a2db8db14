"""The reviewers' case search over /api/v1: the hits search_workspace gives agents, from the same engine."""

from __future__ import annotations

from typing import Annotated, Any, get_args

from fastapi import APIRouter, Query, Request

from services.gateway import api_models as m
from services.gateway.auth import Principal
from services.gateway.http_api import READERS, CaseId, call, caller
from shared.errors import InvalidArgument
from shared.search_contracts import (
    LISTING_CURSOR_CHARS,
    MAX_CURSOR,
    CaseSearch,
    Gap,
    SearchKind,
    SearchQuery,
    SearchStatus,
)
from shared.subjects import Command

router = APIRouter(prefix="/api/v1", responses=m.ERROR_RESPONSES)
KINDS = get_args(SearchKind)
KINDS_CHARS = 80  # one value of `kinds`; Query(max_length=) on a list bounds how many values, not each one's length


def search_kinds(kinds: list[str] | None) -> list[str] | None:
    """`kinds=claim,source` (or the parameter repeated, each value comma-separated too): each a kind of record, else
    a refusal naming it."""
    if long := next((value for value in kinds or () if len(value) > KINDS_CHARS), None):
        raise InvalidArgument(f"kinds: a value of {len(long)} characters is too long (at most {KINDS_CHARS})",
                              field="kinds", hint=f"give kinds as a comma-separated list of {', '.join(KINDS)}")
    named = list(dict.fromkeys(k.strip() for value in kinds or () for k in value.split(",") if k.strip()))
    if not named:
        return None
    unknown = [k for k in named if k not in KINDS]
    if unknown:
        raise InvalidArgument(f"kinds: {unknown[0][:40]!r} is no kind of record (one of {', '.join(KINDS)})",
                              field="kinds", hint=f"give kinds as a comma-separated list of {', '.join(KINDS)}")
    return named


def search_cursor(cursor: str | None) -> int | str | None:
    """`cursor=`: a search's page number (1 the first), or the position a `*` listing gave, else a refusal naming it."""
    if cursor is None:
        return None
    if cursor.isdigit():
        if not 1 <= int(cursor) <= MAX_CURSOR:
            raise InvalidArgument(f"cursor: page {cursor[:12]} is not one (1 to {MAX_CURSOR})", field="cursor",
                                  hint="page on with the nextCursor of the previous page, or leave cursor out")
        return int(cursor)
    return cursor


def search_query(q: str) -> str:
    if not q.strip():
        raise InvalidArgument("q: give a word or an id to search for (it is blank)", field="q",
                              hint="search by an id, or by words of a record's text")
    return q


@router.get("/cases/{case_id}/search", tags=["cases"], response_model=m.View)
async def case_search(
    case_id: CaseId,
    request: Request,
    q: Annotated[SearchQuery, Query(description="An id (or the start of one), or words of a record's text.")],
    kinds: Annotated[list[str] | None, Query(max_length=80, description="Only these kinds of record, comma-separated "
                                                                        "or the parameter repeated: source, claim, "
                                                                        "relation, group.")] = None,
    status: Annotated[SearchStatus, Query(description="canonical (default), pending, retired or any.")] = "canonical",
    gap: Annotated[Gap | None, Query(description="Only canonical claims with a gap of this type, or any (q=* lists "
                                                 "them all), each hit naming its gaps.")] = None,
    cursor: Annotated[str | None, Query(min_length=1, max_length=LISTING_CURSOR_CHARS, pattern=r"^[A-Za-z0-9_-]+$",
                                        description="The page: a nextCursor, as it was given.")] = None,
    principal: Principal = caller(*READERS),
) -> Any:
    """Search the case: an exact or prefix id first, then records holding every word (English stemming), then
    similar spellings; ten hits a page with `total` and `nextCursor`. Pending items name their proposal."""
    return await call(request, Command.CASE_SEARCH, CaseSearch(
        actor=principal.actor(), case_id=case_id, query=search_query(q), kinds=search_kinds(kinds), status=status,
        gap=gap, cursor=search_cursor(cursor)))
