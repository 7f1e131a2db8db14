"""Reply contracts: the answers one service parses from another, typed so that a change of shape breaks here.

Like the command contracts in `shared.contracts` they refuse unknown fields and are frozen; unlike those,
a reply travels whole, its nulls included, because its reader sees exactly what an agent would.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from shared.contracts import Contract
from shared.events import ClaimLabel

T = TypeVar("T", bound=BaseModel)


class Reply(Contract):
    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class Listed(Reply, Generic[T]):
    """A bounded list: how many there are, how many the list leaves out, and the ones it holds."""

    total: int
    omitted: int
    items: list[T]


class Newest(Reply, Generic[T]):
    """The newest few of a list, and how many there are in all."""

    total: int
    items: list[T]


class ContextClaim(Reply):
    claim_id: str
    text: str
    label: ClaimLabel
    section: str
    source_url: str | None
    status: Literal["active", "retired"]
    revision: int


class ContextSourceFile(Reply):
    source_file_id: str
    title: str
    url: str
    characters: int
    added_at: str


class ContextDelta(Reply):
    operation_id: str
    status: str
    category: str
    summary: str
    caller: str
    base_revision: int


class ReviewedDelta(ContextDelta):
    status: Literal["accepted", "rejected"]
    decided_by: str
    decided_at: str
    note: str | None


class PendingDelta(ContextDelta):
    status: Literal["committed"]
    committed_at: str


class EvidenceHealth(Reply):
    unverified_claims: int
    inferred_claims: int
    claims_without_source: int
    retired_claims: int
    pending_deltas: int


class CompanyContext(Reply):
    """get_company_context's answer: the projection builds it, thesis-delta reads it for its previews."""

    company_id: str
    ticker: str
    name: str
    thesis_revision: int
    claims: Listed[ContextClaim]
    retired_claims: Listed[ContextClaim]
    source_files: Listed[ContextSourceFile]
    recent_reviews: Newest[ReviewedDelta]
    pending_deltas: Newest[PendingDelta]
    evidence_health: EvidenceHealth
    next: str


class SavedCompany(Reply):
    company_id: str
    ticker: str
    name: str


class SavedCompanies(Reply):
    """get_company_context with no arguments: the saved companies (bounded), and what to call next."""

    companies: list[SavedCompany]
    total: int
    omitted: int
    next: str


class SourceFilePage(Reply):
    """One page of a source file's text, framed as untrusted data (the text as inspect_sources frames a record)."""

    source_file_id: str
    title: str
    url: str
    characters: int
    offset: int
    trust: str
    nonce: str
    text: str
    next_cursor: int | None
