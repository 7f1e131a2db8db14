"""Alembic environment: runs migrations over an async (asyncpg) connection."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.ext.asyncio import create_async_engine

from shared.db.session import sqlalchemy_url
from shared.db.tables import metadata

config = context.config


def _configure(connection) -> None:  # noqa: ANN001
    context.configure(connection=connection, target_metadata=metadata, compare_type=True)
    with context.begin_transaction():
        # Replicas may run `migrate` at the same time: one waits for the other.
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(727274)")
        context.run_migrations()


async def _run() -> None:
    engine = create_async_engine(sqlalchemy_url(config.get_main_option("sqlalchemy.url")), poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_configure)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    existing = config.attributes.get("connection")
    if existing is not None:
        _configure(existing)
    else:
        asyncio.run(_run())
