"""NATS subscribers of the webhooks service: parse the command, call the use case, reply."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsRouter

from services.webhooks import use_cases
from shared.messaging import ok
from shared.service import ServiceContext
from shared.subjects import Command
from shared.webhook_contracts import ListDeliveries, ListWebhooks, Redeliver, RegisterWebhook, WebhookRef


def build_router(ctx: ServiceContext) -> NatsRouter:
    router = NatsRouter()
    options = {"queue": ctx.queue, "max_workers": ctx.settings.workers}

    @router.subscriber(ctx.subjects.command(Command.REGISTER_WEBHOOK), **options)
    async def register_webhook(cmd: RegisterWebhook) -> dict[str, Any]:
        return ok(await use_cases.register(ctx, cmd))

    @router.subscriber(ctx.subjects.command(Command.LIST_WEBHOOKS), **options)
    async def list_webhooks(cmd: ListWebhooks) -> dict[str, Any]:
        return ok(await use_cases.list_webhooks(ctx, cmd))

    @router.subscriber(ctx.subjects.command(Command.GET_WEBHOOK), **options)
    async def get_webhook(cmd: WebhookRef) -> dict[str, Any]:
        return ok(await use_cases.get_webhook(ctx, cmd))

    @router.subscriber(ctx.subjects.command(Command.DELETE_WEBHOOK), **options)
    async def delete_webhook(cmd: WebhookRef) -> dict[str, Any]:
        return ok(await use_cases.delete_webhook(ctx, cmd))

    @router.subscriber(ctx.subjects.command(Command.LIST_DELIVERIES), **options)
    async def list_deliveries(cmd: ListDeliveries) -> dict[str, Any]:
        return ok(await use_cases.list_deliveries(ctx, cmd))

    @router.subscriber(ctx.subjects.command(Command.REDELIVER), **options)
    async def redeliver(cmd: Redeliver) -> dict[str, Any]:
        return ok(await use_cases.redeliver(ctx, cmd))

    return router
