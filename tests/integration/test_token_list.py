"""`threadline token list --json` prints one JSON line a token: none, not an empty line, when there is none."""

from __future__ import annotations

import asyncio

from shared.bootstrap import migrate_database
from tests.processes import clean_environment, threadline


async def test_token_list_json_prints_nothing_when_there_is_no_token(servers, tmp_path):
    database_url = await servers.create_database()
    try:
        await migrate_database(database_url)
        listed = await asyncio.to_thread(threadline, "token", "list", "--json", "--data-dir", str(tmp_path),
                                         env=clean_environment(THREADLINE_DATABASE_URL=database_url))
    finally:
        await servers.drop_database(database_url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == ""
