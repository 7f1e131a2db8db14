"""Thesis-delta use cases: preview and commit (agents), companies and sources (operators), review."""

from __future__ import annotations

import uuid
from typing import Any

from services.thesis_delta import domain, views
from services.thesis_delta.domain import Company, Operation, SourceFile, ThesisStep
from services.thesis_delta.ports import ThesisUnitOfWork
from shared import id_prefix
from shared.contracts import (
    Actor,
    AddSourceFile,
    AddThesisClaim,
    CompanyRef,
    CreateCompany,
    DecideDelta,
    DeltaRef,
    ListCompanies,
    ListDeltas,
    ProposeClaimDeltaRequest,
)
from shared.errors import AlreadyExists, Conflict, NotFound, Unavailable
from shared.events import ThesisChanged, ThesisDeltaCommitted, ThesisDeltaDecided
from shared.events import company as thesis_of
from shared.logging import get_logger

log = get_logger(__name__)


def _uuid(value: str, field: str, what: str) -> str:
    """The UUID `value` spells out whole; `not_found` otherwise."""
    if whole := id_prefix.full_uuid(value):
        return whole
    raise NotFound(f"there is no {what} {value!r}", field=field, hint=f"use a {what} id Threadline returned")


COMPANY_HINT = "use the companyId of a saved company (get_company_context by ticker finds it)"


async def _company(uow: ThesisUnitOfWork, company_id: str, *, lock: bool = False) -> Company:
    """The company `company_id` names: whole, or by a unique prefix of its id (the webhook pages show 8)."""
    missing = NotFound(f"there is no saved company {company_id}", field="companyId", hint=COMPANY_HINT)
    whole = await id_prefix.resolve(company_id, uow.companies.ids_between, what="company", field="companyId",
                                    hint=COMPANY_HINT, missing=missing.message)
    company = await uow.companies.get(whole, lock=lock)
    if company is None:
        raise missing
    return company


DELTAS_HINT = "list a company's deltas with GET /api/v1/companies/{companyId}/deltas"


async def _delta(uow: ThesisUnitOfWork, operation_id: str, *, lock: bool = False) -> Operation:
    """The delta `operation_id` names: whole, or by a unique prefix of its id (the review page shows 8)."""
    missing = NotFound(f"there is no delta {operation_id}", field="operationId", hint=DELTAS_HINT)
    whole = await id_prefix.resolve(operation_id, uow.operations.ids_between, what="delta", field="operationId",
                                    hint=DELTAS_HINT, missing=missing.message)
    operation = await uow.operations.get(whole, lock=lock)
    if operation is None:
        raise missing
    return operation


# --- the Prism tool ---------------------------------------------------------------------------------


async def propose_claim_delta(request: ProposeClaimDeltaRequest, uow: ThesisUnitOfWork) -> dict[str, Any]:
    if request.args["mode"] == "preview":
        return await preview(request, uow)
    return await commit(request, uow)


async def preview(request: ProposeClaimDeltaRequest, uow: ThesisUnitOfWork) -> dict[str, Any]:
    """Store the checked delta as an operation — or, for a key seen before with this payload, return that one."""
    payload = dict(request.args)
    caller, key = request.actor.name, payload["idempotencyKey"]
    company_id = _uuid(payload["companyId"], "companyId", "company")
    source_file_id = _uuid(payload["sourceFileId"], "sourceFileId", "source file")
    now = uow.now()
    async with uow:
        operation = await uow.operations.by_key(company_id, caller, key)
        if operation is None:
            company = await _company(uow, company_id)
            source = await uow.source_files.get(source_file_id)
            domain.check_source_file(payload, source, company_id)
            claims = await uow.claims.of(company_id)
            operation = domain.new_operation(payload, caller, company, source, claims, now, uow.operation_ttl,
                                             uow.origin.correlation_id)
            if not await uow.operations.add(operation):  # a concurrent retry with the same key stored it first
                operation = await uow.operations.by_key(company_id, caller, key)
        domain.check_same_payload(key, operation.payload_digest, domain.payload_digest(payload))
        await uow.commit()
    return {**views.operation_view(operation, now), "commitToken": domain.commit_token(uow.secret, operation.operation_id),
            "context": await _context(uow, request.actor, operation), "next": views.NEXT_AFTER_PREVIEW}


async def commit(request: ProposeClaimDeltaRequest, uow: ThesisUnitOfWork) -> dict[str, Any]:
    """Commit the previewed delta as it was stored (idempotent); it then waits for human review."""
    operation_id = _uuid(request.args["operationId"], "operationId", "operation")
    now = uow.now()
    async with uow:
        operation = await uow.operations.get(operation_id, lock=True)
        if operation is None:
            raise NotFound(f"there is no operation {request.args['operationId']}", field="operationId",
                           hint="commit the operationId a preview returned")
        domain.verify_commit_token(uow.secret, operation_id, request.args["commitToken"])
        if operation.status == "previewed":
            domain.check_not_expired(operation.expires_at, now)
            company = await _company(uow, operation.company_id, lock=True)
            domain.check_base_revision(operation.base_revision, company.thesis_revision)
            operation = operation.committed(now)
            await uow.operations.save(operation)
            delta = operation.delta
            uow.emit(thesis_of(operation.company_id), ThesisDeltaCommitted(
                company_id=operation.company_id, operation_id=operation_id, caller=operation.caller,
                category=delta["category"], summary=delta["summary"], base_revision=operation.base_revision,
                delta=delta), revision=company.thesis_revision)
            await uow.commit()
    return {**views.operation_view(operation, now), "context": await _context(uow, request.actor, operation),
            "next": views.next_after_commit(operation)}


async def _context(uow: ThesisUnitOfWork, actor: Actor, operation: Operation) -> dict[str, Any]:
    """The thesis around the delta, bounded: get_company_context's counts, evidence health and reviews,
    and the current state of the claims the delta names."""
    try:
        company = await uow.contexts.of(operation.company_id, actor)
    except Unavailable as unavailable:
        log.warning("company_context_unavailable", reason=unavailable.message)
        return views.context_unavailable(unavailable.message)
    touched = domain.touched_claim_ids(operation.delta)
    async with uow.read():
        listed = await uow.claims.by_ids(operation.company_id, touched[: domain.TOUCHED_CLAIMS_CAP])
    return domain.context_block(company, listed, len(touched), operation.base_revision)


# --- companies, source files, thesis claims (operators) ---------------------------------------------


async def create_company(cmd: CreateCompany, uow: ThesisUnitOfWork) -> dict[str, Any]:
    company = Company(str(uuid.uuid4()), cmd.ticker, cmd.name, 0)
    async with uow:
        if not await uow.companies.add(company, cmd.actor.name):
            existing = await uow.companies.by_ticker(cmd.ticker)
            raise AlreadyExists(
                f"ticker {cmd.ticker} is already saved as company {existing.company_id if existing else '?'}",
                field="ticker",
                hint="use the existing company",
                details={"companyId": existing.company_id} if existing else None,
            )
        await uow.commit()
    return views.company_view(company)


async def list_companies(cmd: ListCompanies, uow: ThesisUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        listed = await uow.companies.listed(cmd.ticker)
    return views.companies_view(listed)


async def get_company(cmd: CompanyRef, uow: ThesisUnitOfWork) -> dict[str, Any]:
    async with uow.read():
        company = await _company(uow, cmd.company_id)
        claims = await uow.claims.of(company.company_id)
        files = await uow.source_files.of(company.company_id)
    return views.thesis_view(company, claims, files)


async def add_source_file(cmd: AddSourceFile, uow: ThesisUnitOfWork) -> dict[str, Any]:
    async with uow:
        company = await _company(uow, cmd.company_id)
        source = SourceFile(str(uuid.uuid4()), company.company_id, cmd.title, cmd.url)
        await uow.source_files.add(source, cmd.text, cmd.actor.name)
        await uow.commit()
    return {"sourceFileId": source.source_file_id, "companyId": source.company_id, "title": cmd.title,
            "url": cmd.url}


async def add_thesis_claim(cmd: AddThesisClaim, uow: ThesisUnitOfWork) -> dict[str, Any]:
    """An operator writes a claim into the thesis directly: a canonical change (revision +1)."""
    claim_id = str(uuid.uuid4())
    claim = {"text": cmd.text, "label": cmd.label, "section": cmd.section, "sourceUrl": cmd.source_url}
    async with uow:
        company = await _company(uow, cmd.company_id, lock=True)
        step = ThesisStep(company.company_id, await uow.companies.bump(company.company_id), cmd.actor.name, None,
                          uow.now())
        await uow.claims.add(step, claim_id, claim)
        uow.emit(thesis_of(company.company_id), ThesisChanged(
            company_id=company.company_id, revision=step.revision, previous_revision=company.thesis_revision,
            operation_id=None, reviewer=cmd.actor.name,
            changes={"added": [{**claim, "claimId": claim_id}], "updated": [], "retired": []}), revision=step.revision)
        await uow.commit()
    return {"claimId": claim_id, "companyId": company.company_id, "thesisRevision": step.revision}


# --- review of committed deltas ---------------------------------------------------------------------


async def list_deltas(cmd: ListDeltas, uow: ThesisUnitOfWork) -> dict[str, Any]:
    now = uow.now()
    async with uow.read():
        company = await _company(uow, cmd.company_id)
        operations = await uow.operations.of(company.company_id, None if cmd.status == "all" else cmd.status)
    return views.deltas_view(company, operations, now)


async def get_delta(cmd: DeltaRef, uow: ThesisUnitOfWork) -> dict[str, Any]:
    now = uow.now()
    async with uow.read():
        operation = await _delta(uow, cmd.operation_id)
        company = await uow.companies.get(operation.company_id)
    return views.delta_view(operation, company, now)


async def decide_delta(cmd: DecideDelta, uow: ThesisUnitOfWork) -> dict[str, Any]:
    """Accept (apply every claim change, revision +1) or reject (with its reason) a committed delta."""
    domain.check_decision(cmd.decision, cmd.note)
    now = uow.now()
    async with uow:
        operation = await _delta(uow, cmd.operation_id, lock=True)
        if operation.status != "committed":
            raise _not_decidable(operation)
        company = await _company(uow, operation.company_id, lock=True)
        revision = company.thesis_revision
        if cmd.decision == "accept":
            domain.check_base_revision(operation.base_revision, company.thesis_revision)
            revision = await uow.companies.bump(company.company_id)
            step = ThesisStep(company.company_id, revision, cmd.actor.name, operation.operation_id, now)
            changes = await _apply(uow, step, operation.delta)
            uow.emit(thesis_of(company.company_id), ThesisChanged(
                company_id=company.company_id, revision=revision, previous_revision=company.thesis_revision,
                operation_id=operation.operation_id, reviewer=cmd.actor.name, changes=changes), revision=revision)
        uow.emit(thesis_of(company.company_id), ThesisDeltaDecided(
            company_id=company.company_id, operation_id=operation.operation_id, decision=cmd.decision,
            reviewer=cmd.actor.name, note=cmd.note), revision=company.thesis_revision)
        operation = operation.decided(cmd.decision, cmd.actor.name, cmd.note, now, revision)
        await uow.operations.save(operation)
        await uow.commit()
    return {**views.operation_view(operation, now), "thesisRevision": revision}


def _not_decidable(operation: Operation) -> Conflict:
    if operation.decided_by is not None:
        return Conflict(f"the delta was already {operation.status} by {operation.decided_by} at "
                        f"{operation.decided_at.isoformat()}", field="operationId",
                        hint="a delta is decided once; the agent can propose a new delta")
    return Conflict(f"the delta is {operation.status}, not committed: only committed deltas can be decided",
                    field="operationId", hint="an agent must commit a previewed delta before review")


async def _apply(uow: ThesisUnitOfWork, step: ThesisStep, delta: dict[str, Any]) -> dict[str, Any]:
    """Apply every claim change of the delta; return them with the ids of the added claims."""
    added = []
    for claim in delta["claims"]["added"]:
        claim_id = str(uuid.uuid4())
        await uow.claims.add(step, claim_id, claim)
        added.append({**claim, "claimId": claim_id})
    for change in delta["claims"]["updated"]:
        await uow.claims.update(step, change["claimId"], change["before"], change["after"])
    for change in delta["claims"]["retired"]:
        await uow.claims.retire(step, change["claimId"], change["before"])
    return {"added": added, "updated": delta["claims"]["updated"], "retired": delta["claims"]["retired"]}
