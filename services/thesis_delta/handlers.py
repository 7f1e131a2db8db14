"""NATS subscribers of the thesis-delta service: parse the command, call the use case, reply."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsMessage, NatsRouter

from services.thesis_delta import use_cases
from shared.contracts import (
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
from shared.messaging import ok
from shared.service import Meta, ServiceContext
from shared.subjects import Command


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    options = {"queue": ctx.queue, "max_workers": ctx.settings.workers}

    def subject(command: Command) -> str:
        return ctx.subjects.command(command)

    @router.subscriber(subject(Command.PROPOSE_CLAIM_DELTA), **options)
    async def propose(request: ProposeClaimDeltaRequest, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.propose(ctx, request, Meta.of(message)))

    @router.subscriber(subject(Command.CREATE_COMPANY), **options)
    async def create_company(cmd: CreateCompany, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.create_company(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.LIST_COMPANIES), **options)
    async def list_companies(cmd: ListCompanies) -> dict[str, Any]:
        return ok(await use_cases.list_companies(ctx, cmd))

    @router.subscriber(subject(Command.GET_COMPANY), **options)
    async def get_company(cmd: CompanyRef) -> dict[str, Any]:
        return ok(await use_cases.get_company(ctx, cmd))

    @router.subscriber(subject(Command.ADD_SOURCE_FILE), **options)
    async def add_source_file(cmd: AddSourceFile, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.add_source_file(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.ADD_THESIS_CLAIM), **options)
    async def add_thesis_claim(cmd: AddThesisClaim, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.add_thesis_claim(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.LIST_DELTAS), **options)
    async def list_deltas(cmd: ListDeltas) -> dict[str, Any]:
        return ok(await use_cases.list_deltas(ctx, cmd))

    @router.subscriber(subject(Command.GET_DELTA), **options)
    async def get_delta(cmd: DeltaRef) -> dict[str, Any]:
        return ok(await use_cases.get_delta(ctx, cmd))

    @router.subscriber(subject(Command.DECIDE_DELTA), **options)
    async def decide_delta(cmd: DecideDelta, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.decide_delta(ctx, cmd, Meta.of(message)))

    return router
