"""`threadline demo load` gives a fresh deployment a demo company with a thesis and a source file."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.cli.demo import DEMO_CASE_ID, DEMO_THESIS, DEMO_TICKER
from services.cli.demo_case import LEFT_PENDING
from tests.factories import decide, unique
from tests.processes import threadline
from tests.support import Stack, new_deployment, remove_deployment


@pytest.fixture(scope="module")
async def fresh(servers):
    """A deployment of its own: the demo case and company must not leak into the shared one."""
    settings = await new_deployment(servers)
    running = await Stack(settings).start()
    yield running
    await running.stop()
    await remove_deployment(servers, settings)


def demo_load(stack: Stack) -> dict:
    done = threadline("demo", "load", env=stack.environment(), timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_demo_load_saves_a_company_with_a_thesis_and_a_source_file(fresh):
    loaded = await asyncio.to_thread(demo_load, fresh)
    again = await asyncio.to_thread(demo_load, fresh)  # idempotent: nothing doubled
    assert again == loaded and loaded["ticker"] == DEMO_TICKER

    async with fresh.api() as api:
        listed = (await api.get("/api/v1/companies", params={"ticker": DEMO_TICKER})).json()["companies"]
        assert [c["companyId"] for c in listed] == [loaded["companyId"]]
        company = (await api.get(f"/api/v1/companies/{loaded['companyId']}")).json()
    assert company["ticker"] == DEMO_TICKER and company["thesisRevision"] == len(DEMO_THESIS)
    assert sorted(c["text"] for c in company["claims"]) == sorted(c["text"] for c in DEMO_THESIS)
    assert {c["status"] for c in company["claims"]} == {"active"}
    assert len(company["sourceFiles"]) == 1 and company["sourceFiles"][0]["length"] > 0
    source = company["sourceFiles"][0]

    # An agent finds it by ticker and can propose a delta from the demo source at once.
    async with fresh.agent() as mcp:
        described = (await mcp.call_tool("get_company_context", {"ticker": DEMO_TICKER})).structured_content
        assert described["claims"]["total"] == len(DEMO_THESIS) and described["sourceFiles"]["total"] == 1
        preview = await mcp.call_tool("propose_claim_delta_from_source", {
            "mode": "preview", "companyId": loaded["companyId"], "sourceFileId": source["sourceFileId"],
            "category": "strengthened", "summary": "Order intake rose 22%.", "idempotencyKey": unique("demo"),
            "affectedClaimIds": [described["claims"]["items"][0]["claimId"]]})
    assert not preview.is_error, preview.content[0].text
    assert preview.structured_content["context"]["ticker"] == DEMO_TICKER


async def test_a_demo_item_a_reviewer_rejected_is_not_staged_again_by_the_next_demo_load(fresh):
    await asyncio.to_thread(demo_load, fresh)

    async def proposals(status: str) -> list[dict]:
        async with fresh.api() as api:
            answer = await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/proposals", params={"status": status})
        return answer.json()["proposals"]

    pending = {p["items"][0]["itemId"]: p["proposalId"] for p in await proposals("pending")}
    rejected_item, accepted_item = (first_id for _, first_id, _ in LEFT_PENDING)
    await decide(fresh, pending[rejected_item], reject=[rejected_item], note="The trial homes were not all cold.")
    await decide(fresh, pending[accepted_item], accept=[accepted_item])  # the case's revision moves on

    await asyncio.to_thread(demo_load, fresh)
    assert await proposals("pending") == []  # neither the rejected item nor the accepted one staged anew
    staged = [i["itemId"] for p in await proposals("all") for i in p["items"]]
    assert staged.count(rejected_item) == 1 and staged.count(accepted_item) == 1
