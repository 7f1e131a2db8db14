"""`threadline migrate`: the schema with only a database; the stream too once NATS is configured."""

from __future__ import annotations

import asyncio
import subprocess

import asyncpg
from nats.js.errors import NotFoundError

from shared.db.session import asyncpg_dsn
from shared.settings import Settings
from shared.streams import projection_consumer, projection_stream_name
from tests.processes import clean_environment, threadline
from tests.support import connect_nats


def migrate(env: dict[str, str]) -> subprocess.CompletedProcess:
    return threadline("migrate", env=clean_environment(**env), timeout=120)


async def test_migrate_applies_the_schema_then_provisions_the_stream_when_nats_is_configured(servers, tmp_path):
    database_url = await servers.create_database()
    prefix = servers.claim_prefix(tmp_path)  # its own prefix, with up's NATS users for it
    env = {"THREADLINE_DATABASE_URL": database_url, "THREADLINE_DATA_DIR": str(tmp_path),
           "THREADLINE_NATS_PREFIX": prefix}
    stream = f"{prefix.upper()}_EVENTS"
    try:
        schema_only = await asyncio.to_thread(migrate, env)
        assert schema_only.returncode == 0, schema_only.stderr
        assert "database migrated" in schema_only.stdout and "event stream not provisioned" in schema_only.stderr
        connection = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            assert await connection.fetchval("SELECT count(*) FROM alembic_version") == 1
            assert await connection.fetchval("SELECT to_regclass('outbox') IS NOT NULL")
        finally:
            await connection.close()

        both = await asyncio.to_thread(migrate, {**env, "THREADLINE_NATS_URL": servers.nats_url})
        assert both.returncode == 0, both.stderr
        assert f"event stream {stream} provisioned" in both.stdout
        again = await asyncio.to_thread(migrate, {**env, "THREADLINE_NATS_URL": servers.nats_url})
        assert again.returncode == 0, again.stderr  # idempotent
        client = await connect_nats(Settings(nats_url=servers.nats_url, nats_prefix=prefix, data_dir=tmp_path))
        try:
            js = client.jetstream()
            assert (await js.stream_info(stream)).config.subjects == [f"{prefix}.events.>"]
            settings = Settings(nats_prefix=prefix)
            projection = await js.stream_info(projection_stream_name(settings))
            assert [s.name for s in projection.config.sources] == [stream]  # the projection's, sourced from it
            for partition in range(settings.projection_partitions):
                consumer = await js.consumer_info(projection.config.name, projection_consumer(partition))
                assert consumer.config.filter_subject == f"{prefix}.projection.{partition}.case.*.>"
            await js.delete_stream(projection.config.name)
            await js.delete_stream(stream)
        except NotFoundError as missing:
            raise AssertionError(f"{stream} was not provisioned") from missing
        finally:
            await client.close()
    finally:
        await servers.drop_database(database_url)
