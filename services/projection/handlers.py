"""NATS subscribers of the projection service: parse the command, call the use case, reply."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsMessage, NatsRouter

from services.projection import use_cases
from shared.contracts import (
    CaseRef,
    GetCompanyContextArgs,
    GetWorkspaceArgs,
    InspectSourcesArgs,
    SetFocusArgs,
    ToolRequest,
)
from shared.messaging import ok
from shared.service import Meta, ServiceContext
from shared.subjects import Command


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    options = {"queue": ctx.queue, "max_workers": ctx.settings.workers}

    @router.subscriber(ctx.subjects.command(Command.GET_WORKSPACE), **options)
    async def get_workspace(request: ToolRequest[GetWorkspaceArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.get_workspace(ctx, request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.INSPECT_SOURCES), **options)
    async def inspect_sources(request: ToolRequest[InspectSourcesArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.inspect_sources(ctx, request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.SET_FOCUS), **options)
    async def set_focus(request: ToolRequest[SetFocusArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.set_focus(ctx, request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.GET_COMPANY_CONTEXT), **options)
    async def get_company_context(
        request: ToolRequest[GetCompanyContextArgs], message: NatsMessage
    ) -> dict[str, Any]:
        return ok(await use_cases.get_company_context(ctx, request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.CASE_LEDGER), **options)
    async def case_ledger(cmd: CaseRef) -> dict[str, Any]:
        return ok(await use_cases.case_ledger(ctx, cmd))

    return router
