"""`threadline token revoke` takes a token's id as `token list` prints it, or a unique start of it; never an empty one."""

from __future__ import annotations

import asyncio
import json
import subprocess

from tests.factories import unique
from tests.processes import threadline


def token(stack, *args: str) -> subprocess.CompletedProcess:
    return threadline("token", *args, env=stack.environment())


async def test_token_revoke_takes_a_unique_start_of_the_id_and_refuses_an_empty_one(stack):
    name = unique("revoked-by-prefix")
    await stack.issue_token("reviewer", name)
    table = await asyncio.to_thread(token, stack, "list")  # a table, as `review list` and `webhooks list` print
    assert table.returncode == 0 and name in table.stdout and "tokenId" not in table.stdout, table.stdout
    listed = await asyncio.to_thread(token, stack, "list", "--json")
    token_id = next(t["tokenId"] for t in map(json.loads, listed.stdout.splitlines()) if t["name"] == name)

    for empty in ("", "  "):
        refused = await asyncio.to_thread(token, stack, "revoke", empty)
        assert refused.returncode == 2 and "give a tokenId, or its first characters" in refused.stderr, refused.stderr
    unknown = await asyncio.to_thread(token, stack, "revoke", "not-a-token")
    assert unknown.returncode == 1 and "error (not_found): there is no token 'not-a-token'" in unknown.stderr
    assert "hint: list them with threadline token list" in unknown.stderr

    revoked = await asyncio.to_thread(token, stack, "revoke", token_id[:8])
    assert revoked.returncode == 0, revoked.stderr
    table = await asyncio.to_thread(token, stack, "list")
    assert next(line for line in table.stdout.splitlines() if token_id[:8] in line).count(" UTC") == 2, table.stdout
    assert json.loads(revoked.stdout)["tokenId"] == token_id
    listed = await asyncio.to_thread(token, stack, "list", "--json")
    assert next(t for t in map(json.loads, listed.stdout.splitlines()) if t["tokenId"] == token_id)["revokedAt"]


async def test_token_create_refuses_a_name_of_blanks_as_it_refuses_an_empty_one(stack):
    """A token named "   " showed in `token list` as a blank cell nobody could tell apart or name to revoke."""
    for blank in ("", "   "):
        refused = await asyncio.to_thread(token, stack, "create", "--role", "agent", "--name", blank)
        assert refused.returncode == 1 and "name must be 1–100 characters" in refused.stderr, refused
        assert refused.stdout == "", refused.stdout  # no token printed, none made
