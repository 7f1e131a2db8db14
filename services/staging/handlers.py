"""NATS subscribers of the staging service: parse the command, call the use case, reply."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsMessage, NatsRouter

from services.staging import use_cases
from shared.contracts import (
    StageClaimsArgs,
    StageMergeArgs,
    StageRelationsArgs,
    StageSourcesArgs,
    StageVerdictArgs,
    ToolRequest,
)
from shared.messaging import ok
from shared.service import Meta, ServiceContext
from shared.subjects import Command


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    options = {"queue": ctx.queue, "max_workers": ctx.settings.workers}

    @router.subscriber(ctx.subjects.command(Command.STAGE_SOURCES), **options)
    async def stage_sources(request: ToolRequest[StageSourcesArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.stage(ctx, "stage_sources", request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.STAGE_CLAIMS), **options)
    async def stage_claims(request: ToolRequest[StageClaimsArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.stage(ctx, "stage_claims", request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.STAGE_RELATIONS), **options)
    async def stage_relations(request: ToolRequest[StageRelationsArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.stage(ctx, "stage_relations", request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.STAGE_MERGE), **options)
    async def stage_merge(request: ToolRequest[StageMergeArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.stage(ctx, "stage_merge", request, Meta.of(message)))

    @router.subscriber(ctx.subjects.command(Command.STAGE_VERDICT), **options)
    async def stage_verdict(request: ToolRequest[StageVerdictArgs], message: NatsMessage) -> dict[str, Any]:
        return ok(await use_cases.stage(ctx, "stage_verdict", request, Meta.of(message)))

    return router
