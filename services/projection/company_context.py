"""get_company_context: a saved company's thesis as an agent needs it before proposing a delta (bounded)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from services.projection import domain
from services.projection.ports import ProjectionUnitOfWork
from shared import untrusted
from shared.contracts import GetCompanyContextArgs, ToolRequest
from shared.errors import InvalidArgument, NotFound
from shared.replies import (
    CompanyContext,
    ContextClaim,
    ContextSourceFile,
    EvidenceHealth,
    Listed,
    Newest,
    PendingDelta,
    ReviewedDelta,
    SavedCompanies,
    SavedCompany,
    SourceFilePage,
)

THESIS_CLAIMS_CAP = 100
RETIRED_CLAIMS_CAP = 20
SOURCE_FILES_CAP = 30
REVIEWS_CAP = 10
PENDING_DELTAS_CAP = 20
COMPANIES_CAP = 100
SOURCE_FILE_PAGE = 20_000  # characters of a source file's text per answer

T = TypeVar("T", ContextClaim, ContextSourceFile)


async def get_company_context(request: ToolRequest[GetCompanyContextArgs], uow: ProjectionUnitOfWork) -> dict[str, Any]:
    """A saved company's thesis as an agent needs it before proposing a delta (bounded); with a source file,
    a page of its text; with neither company id nor ticker, the saved companies."""
    args = request.args
    if args.company_id is None and args.ticker is None:
        return await _saved_companies(uow)
    company_id = _company_uuid(args.company_id) if args.company_id else None
    ticker = args.ticker.upper() if args.ticker else None
    async with uow.read():
        company = await uow.theses.company(company_id, ticker)
        if company is None:
            raise NotFound(
                f"no saved company {'with ticker ' + ticker if ticker else args.company_id}",
                field="ticker" if ticker else "companyId",
                hint="check the companyId or ticker: get_company_context with no arguments lists the saved "
                     "companies (an admin saves a company in Prism first)",
            )
        source_file = await _source_file_page(uow, company.company_id, args) if args.source_file_id else None
        claims = await uow.theses.thesis_claims_of(company.company_id)
        files = await uow.theses.source_files_of(company.company_id)
        reviews, reviewed = await uow.theses.deltas_of(company.company_id, ("accepted", "rejected"),
                                                       "decided_at", REVIEWS_CAP)
        pending, waiting = await uow.theses.deltas_of(company.company_id, ("committed",),
                                                      "committed_at", PENDING_DELTAS_CAP)
    active = [c for c in claims if c.status == "active"]
    retired = [c for c in claims if c.status != "active"]
    context = CompanyContext(
        company_id=company.company_id,
        ticker=company.ticker,
        name=company.name,
        thesis_revision=company.thesis_revision,
        claims=_listed(active, THESIS_CLAIMS_CAP, _claim),
        retired_claims=_listed(retired, RETIRED_CLAIMS_CAP, _claim),
        source_files=_listed(files, SOURCE_FILES_CAP, _source_file),
        recent_reviews=Newest[ReviewedDelta](total=reviewed, items=[_reviewed(d) for d in reviews]),
        pending_deltas=Newest[PendingDelta](total=waiting, items=[_pending(d) for d in pending]),
        evidence_health=EvidenceHealth(
            unverified_claims=sum(1 for c in active if c.label == "UNVERIFIED"),
            inferred_claims=sum(1 for c in active if c.label == "INFERRED"),
            claims_without_source=sum(1 for c in active if not c.source_url),
            retired_claims=len(retired),
            pending_deltas=waiting,
        ),
        next=(
            "Propose how one source file changes this thesis with propose_claim_delta_from_source "
            "(mode=preview, a stable idempotencyKey); update or retire claims by their claimId. A person "
            "approves the preview before you commit it, and a reviewer applies it."
        ),
    ).dump()
    return context if source_file is None else {**context, "sourceFile": source_file}


async def _saved_companies(uow: ProjectionUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        rows, total = await uow.theses.companies(COMPANIES_CAP)
    return SavedCompanies(
        companies=[SavedCompany(company_id=r.company_id, ticker=r.ticker, name=r.name) for r in rows],
        total=total, omitted=total - len(rows),
        next="Read one company's thesis with get_company_context and its companyId or ticker (the ticker also "
             "finds a company this list leaves out).",
    ).dump()


async def _source_file_page(uow: ProjectionUnitOfWork, company_id: str, args: GetCompanyContextArgs) -> dict[str, Any]:
    """One page of a source file of the company, its text framed as untrusted data."""
    start = args.cursor or 0
    found = await uow.theses.source_file_page(company_id, _company_uuid(args.source_file_id), start,
                                              SOURCE_FILE_PAGE)
    if found is None:
        raise NotFound(f"no source file {args.source_file_id} of this company", field="sourceFileId",
                       hint="use a sourceFileId from this company's sourceFiles (get_company_context without "
                            "sourceFileId lists them)")
    if args.cursor is not None and start >= found.length:
        raise InvalidArgument(f"cursor {start} is past the end of the source file ({found.length} characters)",
                              field="cursor", hint="use the nextCursor of the previous page, or leave cursor out "
                                                   "for the first page")
    framed = untrusted.frame_record(found.source_file_id, found.page, kind="SOURCE FILE")
    following = start + len(found.page)
    return SourceFilePage(
        source_file_id=found.source_file_id, title=found.title, url=found.url, characters=found.length,
        offset=start, trust=untrusted.UNTRUSTED_NOTICE, nonce=framed["nonce"], text=framed["text"],
        next_cursor=following if following < found.length else None,
    ).dump()


def _listed(rows: list[Any], cap: int, item: Callable[[Any], T]) -> Listed[T]:
    listed, omitted = domain.capped(rows, cap)
    return Listed[T](total=len(rows), omitted=omitted, items=[item(row) for row in listed])


def _claim(c: Any) -> ContextClaim:
    return ContextClaim(claim_id=c.claim_id, text=c.text, label=c.label, section=c.section,
                        source_url=c.source_url, status=c.status, revision=c.revision)


def _source_file(f: Any) -> ContextSourceFile:
    return ContextSourceFile(source_file_id=f.source_file_id, title=f.title, url=f.url, characters=f.length,
                             added_at=f.created_at.isoformat())


def _delta(d: Any) -> dict[str, Any]:
    return {"operation_id": d.operation_id, "status": d.status, "category": d.delta["category"],
            "summary": d.delta["summary"][:300], "caller": d.caller, "base_revision": d.base_revision}


def _reviewed(d: Any) -> ReviewedDelta:
    return ReviewedDelta(**_delta(d), decided_by=d.decided_by, decided_at=d.decided_at.isoformat(), note=d.note)


def _pending(d: Any) -> PendingDelta:
    return PendingDelta(**_delta(d), committed_at=d.committed_at.isoformat())


def _company_uuid(value: str) -> str:
    return str(uuid.UUID(value))
