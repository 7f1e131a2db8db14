"""The reviewers' and operators' JSON API under /api/v1 (OpenAPI at /api/v1/openapi.json)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Security
from fastapi.security import HTTPBearer
from pydantic import StringConstraints

from services.gateway import api_models as m
from services.gateway.argument_map import CaseGraph
from services.gateway.auth import Principal, require_role
from services.gateway.query_check import refuse_unknown_query
from shared import contracts as c
from shared import webhook_contracts as wc
from shared.contracts import Contract, RecordedSource, RequestBody, Revision, Slug
from shared.graph_contracts import CaseGraphRef
from shared.history_contracts import CaseAsOf
from shared.subjects import Command

router = APIRouter(prefix="/api/v1", responses=m.ERROR_RESPONSES)
# The bearer scheme, for the OpenAPI document; `caller` checks the token itself (one error envelope for all).
BEARER = HTTPBearer(auto_error=False, description="A reviewer or admin token (admins: tokens and webhooks).")

READERS = ("reviewer", "admin")
ADMINS = ("admin",)

# Path parameters are typed like the contracts they feed, so a malformed one is a 422 naming it, never a 500.
CaseId = Annotated[Slug, Path(description="The case's id (a slug).")]
AgentName = Annotated[c.bounded_text(100), Path(description="The agent token's name.")]
MapFocus = Annotated[Slug | None, Query(description="A claim of the case: the map shows it and the claims two "
                                                    "relations away (`/ui/cases/{caseId}?focus=` draws it).")]
AsOf = Annotated[int | None, Query(alias="asOf", ge=0, le=9007199254740991,
                                   description="A revision of the case (0 to its revision now): the case as of it.")]


def caller(*roles: str) -> Any:
    async def authenticate(request: Request, _: Any = Security(BEARER)) -> Principal:
        principal = await request.app.state.gateway.tokens.authenticate(request.headers.get("authorization"))
        require_role(principal, *roles)
        refuse_unknown_query(request)
        request.state.principal = principal
        return principal

    return Depends(authenticate)


async def call(request: Request, command: Command, message: Contract) -> Any:
    gateway = request.app.state.gateway
    return await gateway.client.call(
        command,
        message,
        correlation_id=request.state.correlation_id,
        traceparent=request.state.traceparent,
    )


# --- request bodies ---------------------------------------------------------------------------------


class CreateCaseBody(RequestBody):
    case_id: Slug
    title: c.bounded_text(200)
    question: c.bounded_text(1000)


class RecordSourcesBody(RequestBody):
    sources: c.bounded_list(RecordedSource, 50, min_length=1)
    expected_revision: Revision | None = None


class GuidanceBody(RequestBody):
    text: c.bounded_text(2000)


class TokenBody(RequestBody):
    role: Literal["agent", "reviewer", "admin", "subscriber"]
    name: c.bounded_text(100)
    case_id: Slug | None = None


class ActiveCaseBody(RequestBody):
    case_id: Slug


class DecisionBody(RequestBody):
    accept: c.bounded_list(str, 50) = []
    reject: c.bounded_list(str, 50) = []
    # Each item rejected as a duplicate of the record `of` (a canonical or pending claim or source of the case).
    duplicates: c.bounded_list(c.DuplicateOf, 50) = []
    note: c.bounded_text(2000, min_length=0) | None = None
    # The case revision the reviewer saw: a decision on a view the ledger has moved past is refused.
    expected_revision: Revision


class CompanyBody(RequestBody):
    ticker: Annotated[str, StringConstraints(min_length=1, max_length=16, pattern=r"^[A-Z0-9.\-]+$")]
    name: c.bounded_text(200)


class SourceFileBody(RequestBody):
    title: c.bounded_text(300)
    url: c.web_url(2000)
    text: c.bounded_text(200_000)


class ThesisClaimBody(RequestBody):
    text: c.bounded_text(5000)
    label: Literal["CONFIRMED", "INFERRED", "UNVERIFIED"]
    section: c.bounded_text(120)
    source_url: c.bounded_text(2000, min_length=0) | None = None


class DeltaDecisionBody(c.DeltaDecision, RequestBody):
    """Accept or reject a committed delta; a rejection says why in `note`."""


# --- cases ------------------------------------------------------------------------------------------


@router.post("/cases", status_code=201, tags=["cases"], response_model=m.CaseView)
async def create_case(body: CreateCaseBody, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await call(request, Command.CREATE_CASE, c.CreateCase(actor=principal.actor(), **body.model_dump()))


@router.get("/cases", tags=["cases"], response_model=m.CaseList)
async def list_cases(request: Request, principal: Principal = caller(*READERS)) -> Any:
    return await call(request, Command.LIST_CASES, c.ListCases(actor=principal.actor()))


@router.get("/cases/{case_id}", tags=["cases"], response_model=m.CaseView)
async def get_case(case_id: CaseId, request: Request, principal: Principal = caller(*READERS)) -> Any:
    return await call(request, Command.GET_CASE, c.CaseRef(actor=principal.actor(), case_id=case_id))


@router.get("/cases/{case_id}/history", tags=["cases"], response_model=m.HistoryPage)
async def case_history(
    case_id: CaseId,
    request: Request,
    before: Annotated[Revision | None, Query(description="Only revisions below this one (the nextBefore of the "
                                                          "previous page).")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    principal: Principal = caller(*READERS),
) -> Any:
    """The change log newest first, one page at a time; `nextBefore` is the cursor of the next (older) page."""
    return await call(request, Command.CASE_HISTORY,
                      c.CaseHistory(actor=principal.actor(), case_id=case_id, before=before, limit=limit))


@router.post("/cases/{case_id}/guidance", status_code=201, tags=["cases"], response_model=m.GuidanceView)
async def add_guidance(
    case_id: CaseId, body: GuidanceBody, request: Request, principal: Principal = caller(*READERS)
) -> Any:
    return await call(
        request, Command.ADD_GUIDANCE, c.AddGuidance(actor=principal.actor(), case_id=case_id, text=body.text)
    )


@router.post("/cases/{case_id}/sources", status_code=201, tags=["cases"], response_model=m.RecordedSources)
async def record_sources(
    case_id: CaseId, body: RecordSourcesBody, request: Request, principal: Principal = caller(*READERS)
) -> Any:
    return await call(
        request,
        Command.RECORD_SOURCES,
        c.RecordSources(actor=principal.actor(), case_id=case_id, sources=body.sources,
                        expected_revision=body.expected_revision),
    )


class RetireBody(RequestBody):
    records: c.bounded_list(c.RecordRef, 50, min_length=1)
    note: c.bounded_text(2000)
    expected_revision: Revision | None = None


@router.post("/cases/{case_id}/retirements", tags=["cases"], response_model=m.Retirement)
async def retire_records(
    case_id: CaseId, body: RetireBody, request: Request, principal: Principal = caller(*READERS)
) -> Any:
    return await call(
        request,
        Command.RETIRE_RECORDS,
        c.RetireRecords(actor=principal.actor(), case_id=case_id, records=body.records, note=body.note,
                        expected_revision=body.expected_revision),
    )


@router.get("/cases/{case_id}/ledger", tags=["cases"], response_model=m.LedgerView)
async def case_ledger(case_id: CaseId, request: Request, as_of: AsOf = None,
                      principal: Principal = caller(*READERS)) -> Any:
    """The case's canonical ledger; with `asOf`, exactly as it stood at that revision (without what is about
    now rather than a revision: pending proposals and guidance)."""
    return await call(request, Command.CASE_LEDGER, CaseAsOf(actor=principal.actor(), case_id=case_id, as_of=as_of))


@router.get("/cases/{case_id}/graph", tags=["cases"], response_model=CaseGraph)
async def case_graph(case_id: CaseId, request: Request, focus: MapFocus = None, as_of: AsOf = None,
                     principal: Principal = caller(*READERS)) -> Any:
    """The argument map: claims, sources and the verdict as nodes (status, confidence, evidence health),
    relations and citations as edges, merge groups as groups; bounded, nearest the verdict first. With `focus`,
    and for a case too large to draw whole, one neighbourhood: `focus` says its centre, `cut` what it leaves out.
    With `asOf`, the map as it stood at that revision."""
    return await call(request, Command.CASE_GRAPH,
                      CaseGraphRef(actor=principal.actor(), case_id=case_id, focus=focus, as_of=as_of))


@router.get("/cases/{case_id}/proposals", tags=["proposals"], response_model=m.ProposalList)
async def list_proposals(
    case_id: CaseId,
    request: Request,
    status: Literal["pending", "accepted", "rejected", "decided", "all"] = "pending",
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    kind: c.ProposalKind | None = None,
    agent: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    q: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    duplicates: bool = False,
    sort: Literal["oldest", "newest"] | None = None,
    cursor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    principal: Principal = caller(*READERS),
) -> Any:
    """The case's proposals: pending ones oldest first, other statuses newest first (decided ones, unfiltered,
    most recently decided first); filtered by `kind`, `agent`, words of the items (`q`) and possible duplicates
    (`duplicates=true`), ordered by `sort`, paged by `cursor` (the `nextCursor` of the page before)."""
    return await call(
        request,
        Command.LIST_PROPOSALS,
        c.ListProposals(actor=principal.actor(), case_id=case_id, status=status, limit=limit,
                        kind=kind, agent=agent, q=q, duplicates=duplicates, sort=sort, cursor=cursor),
    )


@router.get("/proposals/{proposal_id}", tags=["proposals"], response_model=m.ProposalView)
async def get_proposal(proposal_id: str, request: Request, principal: Principal = caller(*READERS)) -> Any:
    return await call(request, Command.GET_PROPOSAL, c.ProposalRef(actor=principal.actor(), proposal_id=proposal_id))


@router.post("/proposals/{proposal_id}/decisions", tags=["proposals"], response_model=m.DecisionView)
async def decide(
    proposal_id: str, body: DecisionBody, request: Request, principal: Principal = caller(*READERS)
) -> Any:
    """Accept and reject items of a proposal, one revision for whatever it accepts. `duplicates: [{itemId, of}]`
    rejects each item as a duplicate of the canonical or pending claim or source `of`, in a note naming it that
    the agent reads in its guidance. A repeat of the same request returns the decision it recorded."""
    return await call(
        request, Command.DECIDE, c.Decide(actor=principal.actor(), proposal_id=proposal_id, **body.model_dump())
    )


# --- identities -------------------------------------------------------------------------------------


@router.post("/tokens", status_code=201, tags=["identities"], response_model=m.IssuedToken)
async def create_token(body: TokenBody, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await request.app.state.gateway.tokens.issue(
        role=body.role, name=body.name, created_by=principal.name, case_id=body.case_id
    )


@router.get("/tokens", tags=["identities"], response_model=m.TokenList)
async def list_tokens(request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return {"tokens": await request.app.state.gateway.tokens.list()}


@router.delete("/tokens/{token_id}", tags=["identities"], response_model=m.RevokedToken)
async def revoke_token(token_id: str, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await request.app.state.gateway.tokens.revoke(token_id)


@router.put("/agents/{name:path}/active-case", tags=["identities"], response_model=m.Assignment)
async def assign_case(name: AgentName, body: ActiveCaseBody, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await request.app.state.gateway.tokens.assign(name, body.case_id)


# --- companies and theses ---------------------------------------------------------------------------


@router.post("/companies", status_code=201, tags=["theses"], response_model=m.CompanyView)
async def create_company(body: CompanyBody, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await call(request, Command.CREATE_COMPANY, c.CreateCompany(actor=principal.actor(), **body.model_dump()))


@router.get("/companies", tags=["theses"], response_model=m.CompanyList)
async def list_companies(
    request: Request,
    ticker: Annotated[str | None, Query(min_length=1, max_length=16, pattern=c.TICKER_SEARCH)] = None,
    principal: Principal = caller(*READERS),
) -> Any:
    return await call(request, Command.LIST_COMPANIES, c.ListCompanies(actor=principal.actor(), ticker=ticker))


@router.get("/companies/{company_id}", tags=["theses"], response_model=m.CompanyView)
async def get_company(company_id: str, request: Request, principal: Principal = caller(*READERS)) -> Any:
    return await call(request, Command.GET_COMPANY, c.CompanyRef(actor=principal.actor(), company_id=company_id))


@router.post("/companies/{company_id}/source-files", status_code=201, tags=["theses"], response_model=m.SourceFileView)
async def add_source_file(
    company_id: str, body: SourceFileBody, request: Request, principal: Principal = caller(*ADMINS)
) -> Any:
    return await call(
        request,
        Command.ADD_SOURCE_FILE,
        c.AddSourceFile(actor=principal.actor(), company_id=company_id, **body.model_dump()),
    )


@router.post("/companies/{company_id}/claims", status_code=201, tags=["theses"], response_model=m.ThesisClaimView)
async def add_thesis_claim(
    company_id: str, body: ThesisClaimBody, request: Request, principal: Principal = caller(*ADMINS)
) -> Any:
    return await call(
        request,
        Command.ADD_THESIS_CLAIM,
        c.AddThesisClaim(actor=principal.actor(), company_id=company_id, **body.model_dump()),
    )


@router.get("/companies/{company_id}/deltas", tags=["theses"], response_model=m.DeltaList)
async def list_deltas(
    company_id: str,
    request: Request,
    status: Literal["previewed", "committed", "accepted", "rejected", "all"] = "committed",
    principal: Principal = caller(*READERS),
) -> Any:
    return await call(
        request, Command.LIST_DELTAS, c.ListDeltas(actor=principal.actor(), company_id=company_id, status=status)
    )


@router.get("/deltas/{operation_id}", tags=["theses"], response_model=m.DeltaView)
async def get_delta(operation_id: str, request: Request, principal: Principal = caller(*READERS)) -> Any:
    return await call(request, Command.GET_DELTA, c.DeltaRef(actor=principal.actor(), operation_id=operation_id))


@router.post("/deltas/{operation_id}/decision", tags=["theses"], response_model=m.DeltaView)
async def decide_delta(
    operation_id: str, body: DeltaDecisionBody, request: Request, principal: Principal = caller(*READERS)
) -> Any:
    return await call(
        request,
        Command.DECIDE_DELTA,
        c.DecideDelta(actor=principal.actor(), operation_id=operation_id, **body.model_dump()),
    )


# --- webhooks ---------------------------------------------------------------------------------------


class WebhookBody(RequestBody):
    url: c.reachable_url(2000)
    case_id: Slug | None = None
    company_id: wc.Uuid | None = None
    types: c.bounded_list(wc.EventTypeName, 20) = []


WebhookId = Annotated[wc.WebhookId, Path(
    description="The webhook's id (see GET /api/v1/webhooks), or a unique start of it such as the 8 characters the "
                "pages show.")]
EventId = Annotated[wc.Uuid, Path(description="The event's id (the CloudEvents id, also the webhook-id header).")]


@router.post("/webhooks", status_code=201, tags=["webhooks"], response_model=m.RegisteredWebhook)
async def register_webhook(body: WebhookBody, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    """Register a receiver for a case, a company or every event; the answer's `secret` is shown only once."""
    return await call(request, Command.REGISTER_WEBHOOK,
                      wc.RegisterWebhook(actor=principal.actor(), **body.model_dump()))


@router.get("/webhooks", tags=["webhooks"], response_model=m.WebhookList)
async def list_webhooks(request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await call(request, Command.LIST_WEBHOOKS, wc.ListWebhooks(actor=principal.actor()))


@router.get("/webhooks/{webhook_id}", tags=["webhooks"], response_model=m.WebhookView)
async def get_webhook(webhook_id: WebhookId, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await call(request, Command.GET_WEBHOOK, wc.WebhookRef(actor=principal.actor(), webhook_id=webhook_id))


@router.delete("/webhooks/{webhook_id}", tags=["webhooks"], response_model=m.WebhookView)
async def delete_webhook(webhook_id: WebhookId, request: Request, principal: Principal = caller(*ADMINS)) -> Any:
    return await call(request, Command.DELETE_WEBHOOK, wc.WebhookRef(actor=principal.actor(), webhook_id=webhook_id))


@router.get("/webhooks/{webhook_id}/deliveries", tags=["webhooks"], response_model=m.DeliveryLog)
async def list_deliveries(
    webhook_id: WebhookId,
    request: Request,
    status: Literal["pending", "delivered", "failed", "all"] = "all",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    principal: Principal = caller(*ADMINS),
) -> Any:
    """The delivery log, newest event first: attempts, status, response code, latency, last error."""
    return await call(request, Command.LIST_DELIVERIES,
                      wc.ListDeliveries(actor=principal.actor(), webhook_id=webhook_id, status=status, limit=limit))


@router.post("/webhooks/{webhook_id}/deliveries/{event_id}/redeliver", tags=["webhooks"], response_model=m.DeliveryView)
async def redeliver(webhook_id: WebhookId, event_id: EventId, request: Request,
                    principal: Principal = caller(*ADMINS)) -> Any:
    """Send the event again now; a webhook marked failing resumes."""
    return await call(request, Command.REDELIVER,
                      wc.Redeliver(actor=principal.actor(), webhook_id=webhook_id, event_id=event_id))
