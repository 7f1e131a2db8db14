"""Applies the Alembic migrations (`threadline migrate`, also run by `threadline up`), then keys the sources a
previous release wrote without a URL key and keeps the retirements it logged without their `retirements` row."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from shared.search_text import normalise_url

MIGRATIONS = Path(__file__).parent / "migrations"
KEYED_AT_A_TIME = 2000
UNKEYED = "SELECT case_id, source_id, url FROM sources WHERE url_key IS NULL LIMIT :batch"
SET_URL_KEYS = """
UPDATE sources s SET url_key = u.url_key
FROM unnest(CAST(:case_ids AS text[]), CAST(:ids AS text[]), CAST(:keys AS text[])) AS u(case_id, source_id, url_key)
WHERE s.case_id = u.case_id AND s.source_id = u.source_id AND s.url_key IS NULL
"""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Bring the schema up to `revision` over the engine's connection, in one transaction."""
    await _move(engine, command.upgrade, revision)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    """Take the schema back down to `revision`, in one transaction (what a migration's downgrade is tested by)."""
    await _move(engine, command.downgrade, revision)


async def _move(engine: AsyncEngine, step: Callable[[Config, str], None], revision: str) -> None:
    def _step(connection) -> None:  # noqa: ANN001
        config = alembic_config(engine.url.render_as_string(hide_password=False))
        config.attributes["connection"] = connection
        step(config, revision)

    async with engine.begin() as connection:
        await connection.run_sync(_step)


def revision(url: str, message: str) -> None:
    """Autogenerate a new migration from the table definitions (development helper)."""
    command.revision(alembic_config(url), message=message, autogenerate=True)


async def fill_url_keys(engine: AsyncEngine) -> int:
    """Key the sources a previous release wrote without a URL key (`sources.url_key`, during a rollout or after a
    rollback; migration 0024), by `normalise_url`, a batch per transaction; how many it keyed (none: a no-op)."""
    keyed = 0
    while True:
        async with engine.begin() as connection:
            rows = (await connection.execute(text(UNKEYED), {"batch": KEYED_AT_A_TIME})).all()
            if not rows:
                return keyed
            await connection.execute(text(SET_URL_KEYS), {
                "case_ids": [r.case_id for r in rows], "ids": [r.source_id for r in rows],
                "keys": [normalise_url(r.url) for r in rows]})
        keyed += len(rows)


async def fill_retirements(engine: AsyncEngine) -> int:
    """Keep the retirements a previous release logged without a `retirements` row (during a rollout or after a
    rollback), so their notes reach agents; how many (none: a no-op). One pass over the change log, at migrate only:
    migration 0025's own backfill, whose ON CONFLICT keeps the rows there are."""
    backfill = import_module("shared.db.migrations.versions.0025_retirements").BACKFILL
    async with engine.begin() as connection:
        return (await connection.execute(text(backfill))).rowcount
