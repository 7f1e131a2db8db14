"""NATS subscribers of the review service: parse the command, call the use case, reply."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsMessage, NatsRouter

from services.review import use_cases
from shared.contracts import (
    AddGuidance,
    CaseHistory,
    CaseRef,
    CreateCase,
    Decide,
    ListCases,
    ListProposals,
    ProposalRef,
    RecordSources,
    RetireRecords,
)
from shared.messaging import ok
from shared.service import Meta, ServiceContext
from shared.subjects import Command


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    options = {"queue": ctx.queue, "max_workers": ctx.settings.workers}

    def subject(command: Command) -> str:
        return ctx.subjects.command(command)

    @router.subscriber(subject(Command.CREATE_CASE), **options)
    async def create_case(cmd: CreateCase, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.create_case(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.LIST_CASES), **options)
    async def list_cases(cmd: ListCases) -> dict[str, Any]:
        return ok(await use_cases.list_cases(ctx, cmd))

    @router.subscriber(subject(Command.GET_CASE), **options)
    async def get_case(cmd: CaseRef) -> dict[str, Any]:
        return ok(await use_cases.get_case(ctx, cmd))

    @router.subscriber(subject(Command.CASE_HISTORY), **options)
    async def case_history(cmd: CaseHistory) -> dict[str, Any]:
        return ok(await use_cases.case_history(ctx, cmd))

    @router.subscriber(subject(Command.ADD_GUIDANCE), **options)
    async def add_guidance(cmd: AddGuidance, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.add_guidance(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.RECORD_SOURCES), **options)
    async def record_sources(cmd: RecordSources, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.record_sources(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.RETIRE_RECORDS), **options)
    async def retire_records(cmd: RetireRecords, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.retire_records(ctx, cmd, Meta.of(message)))

    @router.subscriber(subject(Command.LIST_PROPOSALS), **options)
    async def list_proposals(cmd: ListProposals) -> dict[str, Any]:
        return ok(await use_cases.list_proposals(ctx, cmd))

    @router.subscriber(subject(Command.GET_PROPOSAL), **options)
    async def get_proposal(cmd: ProposalRef) -> dict[str, Any]:
        return ok(await use_cases.get_proposal(ctx, cmd))

    @router.subscriber(subject(Command.DECIDE), **options)
    async def decide(cmd: Decide, message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.decide(ctx, cmd, Meta.of(message)))

    return router
