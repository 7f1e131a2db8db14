"""Operator commands that act on the system directly: tokens, cases, commands sent over NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from services.gateway.auth import TokenStore
from shared.contracts import Actor, CreateCase
from shared.db.session import Database
from shared.settings import Settings
from shared.subjects import Command, Subjects

OPERATOR = Actor(name="operator", role="admin")


@asynccontextmanager
async def token_store(settings: Settings) -> AsyncIterator[TokenStore]:
    """The gateway's token store, used directly (tokens live in PostgreSQL)."""
    db = Database.from_url(settings.resolved_database_url(), pool_size=1, application_name="threadline-cli",
                           transaction_pooler=settings.database_transaction_pooler)
    try:
        yield TokenStore(db)
    finally:
        await db.dispose()


async def issue_token(settings: Settings, *, role: str, name: str, case_id: str | None,
                      created_by: str = "operator") -> dict[str, Any]:
    async with token_store(settings) as tokens:
        return await tokens.issue(role=role, name=name, created_by=created_by, case_id=case_id)


async def list_tokens(settings: Settings) -> list[dict[str, Any]]:
    async with token_store(settings) as tokens:
        return await tokens.list()


async def revoke_token(settings: Settings, token_id: str) -> dict[str, Any]:
    async with token_store(settings) as tokens:
        return await tokens.revoke(token_id)


async def command(settings: Settings, name: Command, message: Any, timeout: float | None = None) -> Any:
    """Send one command to the running services over NATS."""
    # Here, not at the top: the token commands never send one, and NATS's client with its middlewares (OpenTelemetry,
    # Prometheus) is most of what importing this module costs.
    from shared.messaging import ServiceClient, create_broker, stop_broker
    from shared.nats_auth import OPERATOR as OPERATOR_ROLE

    broker = create_broker(settings, role=OPERATOR_ROLE, name="threadline-cli")
    await broker.connect()
    try:
        client = ServiceClient(broker, Subjects(settings.nats_prefix), timeout or settings.request_timeout)
        return await client.call(name, message)
    finally:
        await stop_broker(broker)


async def create_case(settings: Settings, case: CreateCase) -> Any:
    return await command(settings, Command.CREATE_CASE, case)
