"""Thesis-delta use cases: preview and commit (agents), companies and sources (operators), review."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from services.thesis_delta import domain, repository
from shared import outbox
from shared.contracts import (
    Actor,
    AddSourceFile,
    AddThesisClaim,
    CompanyRef,
    CreateCompany,
    DecideDelta,
    DeltaRef,
    GetCompanyContextArgs,
    ListCompanies,
    ListDeltas,
    ProposeClaimDeltaRequest,
    ToolRequest,
)
from shared.errors import AlreadyExists, Conflict, NotFound, Unavailable
from shared.events import (
    EventType,
    ThesisChanged,
    ThesisDelta,
    ThesisDeltaCommitted,
    ThesisDeltaDecided,
    company,
    new_event,
)
from shared.logging import get_logger
from shared.service import Meta, ServiceContext, origin
from shared.subjects import Command

log = get_logger(__name__)

CONTEXT_TIMEOUT_SECONDS = 5.0


def _uuid(value: str, field: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"there is no {what} {value!r}", field=field, hint=f"use a {what} id Threadline returned") from None


def _company_not_found(company_id: str, field: str = "companyId") -> NotFound:
    return NotFound(
        f"there is no saved company {company_id}",
        field=field,
        hint="use the companyId of a saved company (get_company_context by ticker finds it)",
    )


def _event(ctx: ServiceContext, event_type: EventType, data: Any, company_id: str, revision: int, meta: Meta):
    return new_event(origin(ctx, meta), company(company_id), data, revision=revision)


# --- the Prism tool ---------------------------------------------------------------------------------


async def propose(ctx: ServiceContext, request: ProposeClaimDeltaRequest, meta: Meta) -> dict[str, Any]:
    if request.args["mode"] == "preview":
        return await preview(ctx, request, meta)
    return await commit(ctx, request, meta)


async def preview(ctx: ServiceContext, request: ProposeClaimDeltaRequest, meta: Meta) -> dict[str, Any]:
    payload = dict(request.args)
    caller = request.actor.name
    company_id = _uuid(payload["companyId"], "companyId", "company")
    source_file_id = _uuid(payload["sourceFileId"], "sourceFileId", "source file")
    key = payload["idempotencyKey"]
    digest = domain.payload_digest(payload)
    secret = ctx.settings.resolved_secret()
    now = datetime.now(UTC)
    async with ctx.db.transaction() as connection:
        existing = await repository.operation_by_key(connection, company_id, caller, key)
        if existing is None:
            company = await repository.company(connection, company_id)
            if company is None:
                raise _company_not_found(payload["companyId"])
            source = await repository.source_file(connection, source_file_id)
            domain.check_source_file(payload, source, company_id)
            claims = await repository.claims_of(connection, company_id)
            built = domain.build_delta(payload, claims, source, company.thesis_revision)
            delta = ThesisDelta.model_validate(built).model_dump(mode="json", by_alias=True)
            operation_id = str(uuid.uuid4())
            stored = await repository.insert_operation(
                connection,
                {
                    "operation_id": operation_id,
                    "company_id": company_id,
                    "caller": caller,
                    "idempotency_key": key,
                    "payload_digest": digest,
                    "payload": payload,
                    "delta": delta,
                    "base_revision": company.thesis_revision,
                    "expires_at": now + timedelta(seconds=ctx.settings.operation_ttl_seconds),
                    "correlation_id": meta.correlation_id,
                    "created_at": now,
                },
            )
            if not stored:  # a concurrent retry with the same key stored it first
                existing = await repository.operation_by_key(connection, company_id, caller, key)
        if existing is not None:
            domain.check_same_payload(key, existing.payload_digest, digest)
            operation = existing
        else:
            operation = await repository.operation(connection, operation_id)
    view = operation_view(operation, now)
    view["commitToken"] = domain.commit_token(secret, operation.operation_id)
    view["context"] = await _context(ctx, request.actor, operation, meta)
    view["next"] = (
        "Show this delta to the person approving it; after approval call propose_claim_delta_from_source "
        "with mode=commit, operationId and commitToken only. Committing never changes the thesis: a reviewer "
        "applies it."
    )
    return view


async def commit(ctx: ServiceContext, request: ProposeClaimDeltaRequest, meta: Meta) -> dict[str, Any]:
    operation_id = _uuid(request.args["operationId"], "operationId", "operation")
    token = request.args["commitToken"]
    secret = ctx.settings.resolved_secret()
    now = datetime.now(UTC)
    async with ctx.db.transaction() as connection:
        operation = await repository.operation(connection, operation_id, lock=True)
        if operation is None:
            raise NotFound(
                f"there is no operation {request.args['operationId']}",
                field="operationId",
                hint="commit the operationId a preview returned",
            )
        domain.verify_commit_token(secret, operation_id, token)
        if operation.status == "previewed":
            domain.check_not_expired(operation.expires_at, now)
            company = await repository.company(connection, operation.company_id, lock=True)
            domain.check_base_revision(operation.base_revision, company.thesis_revision)
            await repository.set_operation(connection, operation_id, status="committed", committed_at=now)
            await outbox.append(
                connection,
                [
                    _event(
                        ctx,
                        EventType.THESIS_DELTA_COMMITTED,
                        ThesisDeltaCommitted(
                            company_id=operation.company_id,
                            operation_id=operation_id,
                            caller=operation.caller,
                            category=operation.delta["category"],
                            summary=operation.delta["summary"],
                            base_revision=operation.base_revision,
                            delta=operation.delta,
                        ),
                        operation.company_id,
                        company.thesis_revision,
                        meta,
                    )
                ],
            )
            operation = await repository.operation(connection, operation_id)
    view = operation_view(operation, now)
    view["context"] = await _context(ctx, request.actor, operation, meta)
    view["next"] = (
        "The delta waits for human review; the thesis is unchanged until a reviewer accepts it."
        if operation.status == "committed"
        else f"This operation was already decided: {operation.status}."
    )
    return view


async def _context(ctx: ServiceContext, actor: Actor, operation: Any, meta: Meta) -> dict[str, Any]:
    """The thesis around the delta, bounded: get_company_context's counts, evidence health and reviews,
    and the current state of the claims the delta names."""
    # The projection owns the company context; it is asked over NATS like any other service.
    request = ToolRequest[GetCompanyContextArgs](actor=actor, args=GetCompanyContextArgs(company_id=operation.company_id))
    try:
        company = await ctx.client.call(Command.GET_COMPANY_CONTEXT, request, correlation_id=meta.correlation_id,
                                        traceparent=meta.traceparent, timeout=CONTEXT_TIMEOUT_SECONDS)
    except Unavailable as unavailable:
        log.warning("company_context_unavailable", reason=unavailable.message)
        return {"unavailable": unavailable.message, "hint": "call get_company_context for the thesis around it"}
    touched = domain.touched_claim_ids(operation.delta)
    async with ctx.db.read() as connection:
        listed = await repository.claims_by_ids(connection, operation.company_id,
                                                touched[: domain.TOUCHED_CLAIMS_CAP])
    return domain.context_block(company, listed, len(touched), operation.base_revision)


def operation_view(operation: Any, now: datetime) -> dict[str, Any]:
    status = operation.status
    if status == "previewed" and now >= operation.expires_at:
        status = "expired"
    view = {
        "operationId": operation.operation_id,
        "status": status,
        "companyId": operation.company_id,
        "idempotencyKey": operation.idempotency_key,
        "baseRevision": operation.base_revision,
        "expiresAt": operation.expires_at.isoformat(),
        "createdAt": operation.created_at.isoformat(),
        "delta": operation.delta,
    }
    if operation.committed_at:
        view["committedAt"] = operation.committed_at.isoformat()
    if operation.decided_at:
        view["decidedAt"] = operation.decided_at.isoformat()
        view["decidedBy"] = operation.decided_by
        view["note"] = operation.note
    if operation.revision_after is not None:
        view["revisionAfter"] = operation.revision_after
    return view


# --- companies, source files, thesis claims (operators) ---------------------------------------------


async def create_company(ctx: ServiceContext, cmd: CreateCompany, meta: Meta) -> dict[str, Any]:
    company_id = str(uuid.uuid4())
    async with ctx.db.transaction() as connection:
        if not await repository.insert_company(connection, company_id, cmd.ticker, cmd.name, cmd.actor.name):
            existing = await repository.company_by_ticker(connection, cmd.ticker)
            raise AlreadyExists(
                f"ticker {cmd.ticker} is already saved as company {existing.company_id if existing else '?'}",
                field="ticker",
                hint="use the existing company",
                details={"companyId": existing.company_id} if existing else None,
            )
    return {"companyId": company_id, "ticker": cmd.ticker, "name": cmd.name, "thesisRevision": 0}


async def list_companies(ctx: ServiceContext, cmd: ListCompanies) -> dict[str, Any]:
    async with ctx.db.read() as connection:
        rows = await repository.companies_with_counts(connection, cmd.ticker)
    return {
        "companies": [
            {"companyId": r.company_id, "ticker": r.ticker, "name": r.name, "thesisRevision": r.thesis_revision,
             "committedDeltas": r.committed}
            for r in rows
        ]
    }


async def get_company(ctx: ServiceContext, cmd: CompanyRef) -> dict[str, Any]:
    company_id = _uuid(cmd.company_id, "companyId", "company")
    async with ctx.db.read() as connection:
        company = await repository.company(connection, company_id)
        if company is None:
            raise _company_not_found(cmd.company_id)
        claims = await repository.claims_of(connection, company_id)
        files = await repository.source_files_of(connection, company_id)
    return {
        "companyId": company.company_id,
        "ticker": company.ticker,
        "name": company.name,
        "thesisRevision": company.thesis_revision,
        "claims": [{**c.public(), "status": c.status} for c in claims.values()],
        "sourceFiles": [
            {"sourceFileId": f.source_file_id, "title": f.title, "url": f.url, "length": f.length} for f in files
        ],
    }


async def add_source_file(ctx: ServiceContext, cmd: AddSourceFile, meta: Meta) -> dict[str, Any]:
    company_id = _uuid(cmd.company_id, "companyId", "company")
    source_file_id = str(uuid.uuid4())
    async with ctx.db.transaction() as connection:
        if await repository.company(connection, company_id) is None:
            raise _company_not_found(cmd.company_id)
        await repository.insert_source_file(
            connection,
            {
                "source_file_id": source_file_id,
                "company_id": company_id,
                "title": cmd.title,
                "url": cmd.url,
                "text": cmd.text,
                "created_by": cmd.actor.name,
            },
        )
    return {"sourceFileId": source_file_id, "companyId": company_id, "title": cmd.title, "url": cmd.url}


async def add_thesis_claim(ctx: ServiceContext, cmd: AddThesisClaim, meta: Meta) -> dict[str, Any]:
    """An operator writes a claim into the thesis directly: a canonical change (revision +1)."""
    company_id = _uuid(cmd.company_id, "companyId", "company")
    claim_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    claim = {"text": cmd.text, "label": cmd.label, "section": cmd.section, "sourceUrl": cmd.source_url}
    async with ctx.db.transaction() as connection:
        company = await repository.company(connection, company_id, lock=True)
        if company is None:
            raise _company_not_found(cmd.company_id)
        revision = await repository.bump_revision(connection, company_id)
        await repository.insert_claim(
            connection, claim_id=claim_id, company_id=company_id, claim=claim, revision=revision,
            actor=cmd.actor.name, operation_id=None, at=now,
        )
        await outbox.append(
            connection,
            [
                _event(
                    ctx,
                    EventType.THESIS_CHANGED,
                    ThesisChanged(
                        company_id=company_id,
                        revision=revision,
                        previous_revision=company.thesis_revision,
                        operation_id=None,
                        reviewer=cmd.actor.name,
                        changes={"added": [{**claim, "claimId": claim_id}], "updated": [], "retired": []},
                    ),
                    company_id,
                    revision,
                    meta,
                )
            ],
        )
    return {"claimId": claim_id, "companyId": company_id, "thesisRevision": revision}


# --- review of committed deltas ---------------------------------------------------------------------


async def list_deltas(ctx: ServiceContext, cmd: ListDeltas) -> dict[str, Any]:
    company_id = _uuid(cmd.company_id, "companyId", "company")
    now = datetime.now(UTC)
    async with ctx.db.read() as connection:
        company = await repository.company(connection, company_id)
        if company is None:
            raise _company_not_found(cmd.company_id)
        rows = await repository.operations(connection, company_id, None if cmd.status == "all" else cmd.status)
    return {
        "companyId": company_id,
        "ticker": company.ticker,
        "thesisRevision": company.thesis_revision,
        # Digests, not whole deltas: a page of full deltas could outgrow a NATS message; GET a delta for its diff.
        "deltas": [{**operation_view(r, now), "caller": r.caller, "delta": delta_digest(r.delta)} for r in rows],
    }


def delta_digest(delta: dict[str, Any]) -> dict[str, Any]:
    """What a list of deltas shows of each: its category, a summary excerpt and how many claims it changes."""
    return {
        "category": delta["category"],
        "summary": delta["summary"][:300],
        "claims": {action: len(delta["claims"].get(action, [])) for action in ("added", "updated", "retired")},
    }


async def get_delta(ctx: ServiceContext, cmd: DeltaRef) -> dict[str, Any]:
    operation_id = _uuid(cmd.operation_id, "operationId", "operation")
    now = datetime.now(UTC)
    async with ctx.db.read() as connection:
        operation = await repository.operation(connection, operation_id)
        if operation is None:
            raise NotFound(f"there is no delta {cmd.operation_id}", field="operationId",
                           hint="list a company's deltas with GET /api/v1/companies/{companyId}/deltas")
        company = await repository.company(connection, operation.company_id)
    view = {**operation_view(operation, now), "caller": operation.caller, "ticker": company.ticker,
            "companyName": company.name, "thesisRevision": company.thesis_revision}
    view["applicable"] = operation.status == "committed" and operation.base_revision == company.thesis_revision
    if operation.status == "committed" and not view["applicable"]:
        view["refusal"] = (
            f"the thesis moved from revision {operation.base_revision} to {company.thesis_revision} since the "
            "preview; accepting could apply a stale delta. Reject it; the agent must preview again."
        )
    return view


async def decide_delta(ctx: ServiceContext, cmd: DecideDelta, meta: Meta) -> dict[str, Any]:
    domain.check_decision(cmd.decision, cmd.note)
    operation_id = _uuid(cmd.operation_id, "operationId", "operation")
    now = datetime.now(UTC)
    reviewer = cmd.actor.name
    async with ctx.db.transaction() as connection:
        operation = await repository.operation(connection, operation_id, lock=True)
        if operation is None:
            raise NotFound(f"there is no delta {cmd.operation_id}", field="operationId",
                           hint="list a company's deltas with GET /api/v1/companies/{companyId}/deltas")
        if operation.status != "committed":
            raise Conflict(
                f"the delta is {operation.status}, not committed: only committed deltas can be decided",
                field="operationId",
                hint="an agent must commit a previewed delta before review" if operation.status == "previewed"
                else "it was already decided",
            )
        company = await repository.company(connection, operation.company_id, lock=True)
        events = [
            _event(
                ctx,
                EventType.THESIS_DELTA_DECIDED,
                ThesisDeltaDecided(company_id=company.company_id, operation_id=operation_id,
                                   decision=cmd.decision, reviewer=reviewer, note=cmd.note),
                company.company_id,
                company.thesis_revision,
                meta,
            )
        ]
        revision = company.thesis_revision
        if cmd.decision == "accept":
            domain.check_base_revision(operation.base_revision, company.thesis_revision)
            revision = await repository.bump_revision(connection, company.company_id)
            changes = await _apply(connection, operation, company.company_id, revision, reviewer, now)
            events.insert(
                0,
                _event(
                    ctx,
                    EventType.THESIS_CHANGED,
                    ThesisChanged(company_id=company.company_id, revision=revision,
                                  previous_revision=company.thesis_revision, operation_id=operation_id,
                                  reviewer=reviewer, changes=changes),
                    company.company_id,
                    revision,
                    meta,
                ),
            )
        await repository.set_operation(
            connection,
            operation_id,
            status="accepted" if cmd.decision == "accept" else "rejected",
            decided_at=now,
            decided_by=reviewer,
            note=cmd.note,
            revision_after=revision if cmd.decision == "accept" else None,
        )
        await outbox.append(connection, events)
        operation = await repository.operation(connection, operation_id)
    return {**operation_view(operation, now), "thesisRevision": revision}


async def _apply(connection: Any, operation: Any, company_id: str, revision: int, reviewer: str,
                 now: datetime) -> dict[str, Any]:
    """Apply every claim change of the delta; return them with the ids of the added claims."""
    delta = operation.delta
    added = []
    for claim in delta["claims"]["added"]:
        claim_id = str(uuid.uuid4())
        await repository.insert_claim(connection, claim_id=claim_id, company_id=company_id, claim=claim,
                                      revision=revision, actor=reviewer, operation_id=operation.operation_id, at=now)
        added.append({**claim, "claimId": claim_id})
    for change in delta["claims"]["updated"]:
        await repository.update_claim(connection, change["claimId"], change["after"], revision, now)
        await repository.history(connection, change["claimId"], company_id, revision, "update", change["before"],
                                 change["after"], reviewer, operation.operation_id, now)
    for change in delta["claims"]["retired"]:
        await repository.retire_claim(connection, change["claimId"], reviewer, revision, now)
        await repository.history(connection, change["claimId"], company_id, revision, "retire", change["before"],
                                 None, reviewer, operation.operation_id, now)
    return {"added": added, "updated": delta["claims"]["updated"], "retired": delta["claims"]["retired"]}
