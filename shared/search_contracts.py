"""The contracts of search: the agents' search_workspace and inspect_claims, and the reviewers' case search."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from shared import contracts as c
from shared.contract_base import Actor, Contract, Slug, Storable
from shared.gaps import ANY as ANY_GAP
from shared.gaps import GAP_TYPES
from shared.subjects import Command

QUERY_CHARS = 200
PAGE = 10  # hits a page
MAX_CURSOR = 100_000
SearchKind = Literal["source", "claim", "relation", "group"]
SearchStatus = Literal["canonical", "pending", "retired", "any"]
# The gaps a claim can have (shared/gaps.py, the unresolved section's item types), or any.
Gap = Literal[(ANY_GAP, *GAP_TYPES)]  # type: ignore[valid-type]
EVERYTHING = "*"  # the query that lists every record the filters keep, by id
# Storable: PostgreSQL cannot take a NUL in a parameter, so the query refuses it wherever it comes from.
SearchQuery = Annotated[str, StringConstraints(min_length=1, max_length=QUERY_CHARS), Storable]
LISTING_CURSOR_CHARS = 400
# A ranked search's page number, or the opaque position a `*` listing gave (services/projection/search.py).
Cursor = (Annotated[int, Field(ge=1, le=MAX_CURSOR)]
          | Annotated[str, StringConstraints(min_length=1, max_length=LISTING_CURSOR_CHARS, pattern=r"^[A-Za-z0-9_-]+$")])


class SearchWorkspaceArgs(Contract):
    expected_case_id: Slug
    query: SearchQuery
    kinds: Annotated[list[SearchKind], Field(min_length=1, max_length=4)] | None = None
    status: SearchStatus = "canonical"
    gap: Gap | None = None
    cursor: Cursor | None = None


class InspectClaimsArgs(Contract):
    expected_case_id: Slug
    claim_ids: Annotated[list[Slug], Field(min_length=1, max_length=9)]


class CaseSearch(Contract):
    """A reviewer's search of a case (`GET /api/v1/cases/{caseId}/search`): the hits search_workspace gives."""

    actor: Actor
    case_id: Slug
    query: SearchQuery
    kinds: Annotated[list[SearchKind], Field(min_length=1, max_length=4)] | None = None
    status: SearchStatus = "canonical"
    gap: Gap | None = None
    cursor: Cursor | None = None


def search_requests() -> dict[Command, type[Contract]]:
    return {
        Command.SEARCH_WORKSPACE: c.ToolRequest[SearchWorkspaceArgs],
        Command.INSPECT_CLAIMS: c.ToolRequest[InspectClaimsArgs],
        Command.CASE_SEARCH: CaseSearch,
    }
