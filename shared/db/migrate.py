"""Applies the Alembic migrations (`threadline migrate`, also run by `threadline up`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS = Path(__file__).parent / "migrations"


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
