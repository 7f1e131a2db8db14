"""Brings a deployment's shared infrastructure up to date: database schema and JetStream stream."""

from __future__ import annotations

import nats

from shared.db import migrate
from shared.db.session import Database
from shared.nats_auth import OPERATOR, nats_options
from shared.nats_client import let_go
from shared.settings import Settings
from shared.streams import provision


async def migrate_database(database_url: str) -> None:
    db = Database.from_url(database_url, pool_size=1, application_name="threadline-migrate")
    try:
        await migrate.upgrade(db.engine)
        await migrate.fill_url_keys(db.engine)  # sources a previous release wrote during a rollout or after a rollback
        await migrate.fill_retirements(db.engine)  # retirements a previous release logged without their row
    finally:
        await db.dispose()


async def provision_streams(settings: Settings) -> None:
    connection = await nats.connect(**nats_options(settings, OPERATOR, name="threadline-provision").client())
    try:
        await provision(connection.jetstream(), settings)
    finally:
        await let_go(connection)


async def prepare(settings: Settings) -> None:
    """`threadline migrate`: apply migrations, then create or update the stream and its consumers."""
    await migrate_database(settings.resolved_database_url())
    await provision_streams(settings)
