"""NATS subscribers of the webhooks service: each command, and the use case that answers it."""

from __future__ import annotations

from faststream.nats import NatsRouter

from services.webhooks import use_cases
from shared.service import Meta, ServiceContext, command_router
from shared.subjects import Command

ROUTES = {
    Command.REGISTER_WEBHOOK: use_cases.register,
    Command.LIST_WEBHOOKS: use_cases.list_webhooks,
    Command.GET_WEBHOOK: use_cases.get_webhook,
    Command.DELETE_WEBHOOK: use_cases.delete_webhook,
    Command.LIST_DELIVERIES: use_cases.list_deliveries,
    Command.REDELIVER: use_cases.redeliver,
}


def _context(ctx: ServiceContext, meta: Meta) -> ServiceContext:
    """Its commands run over the service's own context: registrations and their logs are small reads and writes."""
    return ctx


def build_router(ctx: ServiceContext) -> NatsRouter:
    return command_router(ctx, ROUTES, _context)
