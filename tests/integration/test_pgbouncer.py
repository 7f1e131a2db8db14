"""Behind PgBouncer in transaction mode: the services and the gateway through the pooler, the relay's
leader lock on THREADLINE_RELAY_DATABASE_URL; nothing lost, nothing doubled."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import asyncpg
import pytest

from services.projection.partitions import PARTITION_LOCK as PROJECTION_LOCK
from services.relay.partitions import PARTITION_LOCK
from shared.db.session import asyncpg_dsn
from tests.dependencies import missing
from tests.events import stream_events, wait_until_projected, wait_until_published
from tests.factories import new_case, source_item
from tests.pgbouncer import SERVER_CONNECTIONS, PgBouncer
from tests.support import Stack, new_deployment, remove_deployment

CASES, SOURCES_PER_CASE = 6, 4


@pytest.fixture
async def pooled(servers):
    if PgBouncer.binary() is None:
        missing("pgbouncer is not installed (apt install pgbouncer; .ci/run installs it)")
    settings = await new_deployment(servers)  # migrated on the direct connection, as the migrate Job is
    direct = settings.resolved_database_url()
    bouncer = await PgBouncer(direct).start()
    through_pooler = settings.model_copy(update={
        "database_url": bouncer.url(), "database_transaction_pooler": True, "relay_database_url": direct})
    stack = None
    try:
        stack = await Stack(through_pooler).start()
        yield stack, direct
    finally:
        if stack is not None:
            await stack.stop()
        bouncer.stop()
        await remove_deployment(servers, settings)


async def one_case(stack: Stack) -> str:
    """An agent stages sources one call at a time over MCP; a reviewer accepts each over the API."""
    case_id = await new_case(stack)
    agent = await stack.issue_token("agent", f"agent-{case_id}", case_id=case_id)
    async with stack.agent(agent) as mcp, stack.api() as api:
        revision = (await mcp.call_tool("get_workspace", {})).structured_content["workspaceRevision"]
        for n in range(SOURCES_PER_CASE):
            staged = await mcp.call_tool("stage_sources", {"expectedCaseId": case_id, "expectedRevision": revision,
                                                           "sources": [source_item(f"{case_id}-s{n}")]})
            assert not staged.is_error, staged.content
            decided = await api.post(f"/api/v1/proposals/{staged.structured_content['proposalId']}/decisions",
                                     json={"accept": [f"{case_id}-s{n}"], "note": "ok", "expectedRevision": revision})
            assert decided.status_code == 200, decided.text
            revision = decided.json()["revision"]
        workspace = (await mcp.call_tool("get_workspace", {})).structured_content
    assert workspace["workspaceRevision"] == SOURCES_PER_CASE
    return case_id


async def test_services_through_a_transaction_pooler_with_the_relay_on_a_direct_connection(pooled):
    stack, direct = pooled
    case_ids = await asyncio.gather(*(one_case(stack) for _ in range(CASES)))
    await wait_until_published(stack.db)
    await wait_until_projected(stack.settings)

    revisions: dict[str, list[int]] = defaultdict(list)
    events = await stream_events(stack.settings)
    assert len({e["id"] for e in events}) == len(events), "an event was published twice"
    for event in events:
        if event["type"] == "threadline.ledger.changed":
            revisions[event["data"]["caseId"]].append(event["revision"])
    assert {c: revisions[c] for c in case_ids} == {c: list(range(1, SOURCES_PER_CASE + 1)) for c in case_ids}

    connection = await asyncpg.connect(asyncpg_dsn(direct))
    try:
        # The partitions' leader locks are held by the relay's and the projection's own (direct) sessions ...
        for lock, holder in ((PARTITION_LOCK, "threadline-relay"), (PROJECTION_LOCK, "threadline-projection")):
            holders = await connection.fetch(
                "SELECT DISTINCT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::bigint::oid AND l.objsubid = 2 "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())", lock)
            assert [h["application_name"] for h in holders] == [holder]
        # ... while every other process shared the pooler's few server connections.
        others = await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name NOT IN ('threadline-relay', 'threadline-projection')")
        assert 0 < others <= SERVER_CONNECTIONS
    finally:
        await connection.close()
