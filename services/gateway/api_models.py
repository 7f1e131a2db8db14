"""What each /api/v1 operation answers, for the OpenAPI document: success bodies and the one error envelope.

The success models name the fields every answer carries (camelCase, as sent) and allow more, so a service
can add a field without breaking the gateway; the error envelope is the one every refusal uses.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class View(BaseModel):
    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


# --- the error envelope -----------------------------------------------------------------------------


class ProblemView(BaseModel):
    field: str
    message: str
    hint: str


class ErrorBody(BaseModel):
    code: str = Field(description="A stable code: invalid_argument, not_found, stale_revision, unavailable, …")
    message: str
    field: str | None = Field(None, description="The field at fault, as a path (sources[0].url).")
    hint: str | None = Field(None, description="How to fix it.")
    problems: list[ProblemView] | None = Field(None, description="Every problem of the request, each with its fix.")
    details: dict[str, Any] | None = None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


_ERRORS = {
    400: "The request cannot be read (a body that is not JSON).",
    401: "No bearer token, or one that is unknown or revoked.",
    403: "The token's role may not do this.",
    404: "No such record or path.",
    405: "The path does not take this method (see the Allow header).",
    409: "The ledger moved on (a stale revision) or the record exists already.",
    413: "The request body is larger than the gateway accepts.",
    422: "A field is missing or invalid; every problem is named with its fix.",
    503: "A service, NATS or PostgreSQL is unreachable: retry shortly.",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorEnvelope, "description": text} for status, text in _ERRORS.items()
}


# --- cases and proposals ----------------------------------------------------------------------------


class CaseView(View):
    case_id: str
    title: str
    question: str
    revision: int


class CaseList(View):
    cases: list[CaseView]


class GuidanceView(View):
    note_id: str
    case_id: str
    text: str


class RecordedSources(View):
    case_id: str
    revision: int
    recorded: list[str]


class HistoryPage(View):
    case_id: str
    changes: list[dict[str, Any]]
    next_before: int | None


class Retirement(View):
    case_id: str
    revision: int
    retired: list[dict[str, Any]]


class LedgerView(View):
    case_id: str
    revision: int
    claims: dict[str, Any]
    sources: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    groups: list[dict[str, Any]]


class ProposalView(View):
    proposal_id: str
    case_id: str
    kind: str
    status: str
    items: list[dict[str, Any]]


class ProposalList(View):
    case_id: str
    proposals: list[ProposalView]
    total: int | None = Field(None, description="How many proposals the filters match, on every page.")
    next_cursor: str | None = Field(None, description="Reads the next page of the same query; null on the last.")


class DecisionView(View):
    proposal_id: str
    revision: int
    accepted: list[str]
    rejected: list[str]
    refused: list[dict[str, Any]]


# --- identities -------------------------------------------------------------------------------------


class IssuedToken(View):
    token: str = Field(description="Shown once; stored only as a digest.")
    token_id: str
    role: str
    name: str


class TokenView(View):
    token_id: str
    name: str
    role: str


class TokenList(View):
    tokens: list[TokenView]


class RevokedToken(View):
    token_id: str
    revoked_at: str


class Assignment(View):
    agent: str
    case_id: str


# --- companies and theses ---------------------------------------------------------------------------


class CompanyView(View):
    company_id: str
    ticker: str
    name: str
    thesis_revision: int


class CompanyList(View):
    companies: list[CompanyView]


class SourceFileView(View):
    source_file_id: str
    company_id: str


class ThesisClaimView(View):
    claim_id: str
    company_id: str
    thesis_revision: int


class DeltaView(View):
    operation_id: str
    status: str
    company_id: str
    delta: dict[str, Any]


class DeltaList(View):
    company_id: str
    deltas: list[DeltaView]


# --- webhooks ---------------------------------------------------------------------------------------


class WebhookView(View):
    webhook_id: str
    url: str
    status: str


class RegisteredWebhook(WebhookView):
    secret: str = Field(description="The signing secret (whsec_…), shown once.")


class WebhookList(View):
    webhooks: list[WebhookView]


class DeliveryView(View):
    event_id: str
    status: str
    attempts: int


class DeliveryLog(View):
    webhook_id: str
    deliveries: list[DeliveryView]


class EventPage(View):
    events: list[dict[str, Any]]
    next_after: int
    more: bool
