"""Many agents stage at once while a reviewer moves the ledger on: nothing lost or mixed, later calls rebased."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from sqlalchemy import select, update

from shared.db.queries import lock_case_exclusive
from shared.db.tables import cases, outbox, proposal_items, proposals
from tests.factories import agent_session, claim_item, seed, source_item

AGENTS = 64  # as many concurrent agents as `threadline bench stage` runs
CALLS_PER_AGENT = 3 if not os.environ.get("THREADLINE_FULL") else 10
TRIES = 5  # calls answered `unavailable` (the gateway's 10 s waited out on a busy machine) are repeated


async def call_until_answered(mcp, tool: str, arguments: dict):
    """A call, repeated while it is answered `unavailable` (at most TRIES times), as that answer says to."""
    for _ in range(TRIES):
        result = await mcp.call_tool(tool, arguments)
        if not (result.is_error and result.structured_content["error"]["code"] == "unavailable"):
            break
    return result


@pytest.mark.slow
async def test_64_agents_stage_while_a_reviewer_accepts_mid_way(stack):
    async with agent_session(stack) as owner:
        source = (await seed(owner, sources=1))["sources"][0]
        trigger = await owner.stage("stage_sources", sources=[source_item("moves-the-ledger")])
        pinned = await owner.revision()
        case_id = owner.case_id

        tokens = [await stack.issue_token("agent", f"{case_id}-agent-{n}", case_id=case_id) for n in range(AGENTS)]
        half = AGENTS * CALLS_PER_AGENT // 2
        outcomes: list[dict] = []
        acked = asyncio.Event()
        accepted_at: list[float] = []

        async def agent(n: int) -> None:
            async with stack.agent(tokens[n]) as mcp:
                # 64 first reads at once on a busy machine can wait out the gateway's 10 s: the answer is then
                # `unavailable`, "retry shortly", and the agent retries, as the answer says to.
                read = await call_until_answered(mcp, "get_workspace", {})
                assert not read.is_error, read.structured_content
                # An agent whose first read waited out several busy spells may read after the reviewer accepted.
                assert read.structured_content["workspaceRevision"] == pinned or (
                    acked.is_set() and read.structured_content["workspaceRevision"] == pinned + 1)
                k = 0
                calls_after_acceptance = 0
                # Stage until this agent made its share and, once the ledger moved, two more calls.
                while k < CALLS_PER_AGENT or calls_after_acceptance < 2:
                    claim_id = f"a{n}-k{k}"
                    k += 1
                    calls_after_acceptance += 1 if accepted_at else 0
                    started = time.monotonic()
                    arguments = {"expectedCaseId": case_id, "expectedRevision": pinned,
                                 "claims": [claim_item(claim_id, [source])]}
                    result = await call_until_answered(mcp, "stage_claims", arguments)  # a repeat: the first outcome
                    outcome = {"agent": n, "claim": claim_id, "started": started, "ended": time.monotonic()}
                    if result.is_error:
                        outcome["refused"] = result.structured_content["error"]["code"]
                    else:
                        outcome["proposal"] = result.structured_content["proposalId"]
                        outcome["stored_at"] = result.structured_content["workspaceRevision"]
                        assert result.structured_content["pinnedRevision"] == pinned
                    outcomes.append(outcome)
                    if sum("proposal" in o for o in outcomes) >= half:
                        acked.set()
                    await asyncio.sleep(0.005)

        async def reviewer() -> None:
            await acked.wait()
            # 64 agents in this process starve a busy machine: a decision that waited out the request timeout is
            # answered 503 "may have been applied", and the reviewer repeats it, as the answer says to.
            async with stack.api() as api:
                while (response := await api.post(f"/api/v1/proposals/{trigger['proposalId']}/decisions", json={
                        "accept": ["moves-the-ledger"], "expectedRevision": pinned})).status_code == 503:
                    assert response.json()["error"]["code"] == "unavailable", response.text
            assert response.status_code == 200, response.text
            accepted_at.append(time.monotonic())
            assert response.json()["revision"] == pinned + 1

        await asyncio.gather(reviewer(), *(agent(n) for n in range(AGENTS)))

        assert len(outcomes) >= AGENTS * CALLS_PER_AGENT
        acknowledged = [o for o in outcomes if "proposal" in o]
        refused = [o for o in outcomes if "refused" in o]
        # The acceptance touched nothing these calls depend on: none is refused, later ones are rebased.
        assert refused == []
        after = [o for o in outcomes if o["started"] > accepted_at[0]]
        assert after, "some calls must start after the acceptance"
        assert all(o["stored_at"] == pinned + 1 for o in after), "a call after the acceptance was not rebased"
        assert len(acknowledged) >= half

        async with stack.db.engine.connect() as connection:
            rows = (await connection.execute(
                select(proposals.c.proposal_id, proposals.c.agent_name, proposals.c.pinned_revision,
                       proposal_items.c.item_id)
                .join(proposal_items, proposal_items.c.proposal_id == proposals.c.proposal_id)
                .where(proposals.c.case_id == case_id, proposals.c.agent_name != owner.name)
            )).all()
        stored = {row.proposal_id: row for row in rows}
        assert len(rows) == len(stored) == len(acknowledged), "every acknowledged proposal is stored exactly once"
        for outcome in acknowledged:
            row = stored[outcome["proposal"]]
            assert row.item_id == outcome["claim"], "a proposal holds another call's item"
            assert row.agent_name == f"{case_id}-agent-{outcome['agent']}"
            assert row.pinned_revision == pinned

        # The acceptance's ledger event was written after every accepted stage call had committed:
        # a call pinned to the old revision that were let through late would show up after it.
        async with stack.db.engine.connect() as connection:
            order = (await connection.execute(
                select(outbox.c.id, outbox.c.event_type, outbox.c.envelope["data"]["proposalId"].astext)
                .where(outbox.c.aggregate == f"case:{case_id}").order_by(outbox.c.id)
            )).all()
        moved = next(i for i, row in enumerate(order) if row.event_type == "threadline.ledger.changed"
                     and row[2] == trigger["proposalId"])
        staged_late = {row[2] for row in order[moved:] if row.event_type == "threadline.proposal.staged"}
        stored_at = {o["proposal"]: o["stored_at"] for o in acknowledged}
        assert all(stored_at[p] == pinned + 1 for p in staged_late & stored_at.keys()), \
            "a call checked against the old revision committed after the acceptance"
        assert all(stored_at[p] == pinned for p in stored_at.keys() - staged_late), \
            "a call stored before the acceptance claims the newer revision"


async def test_a_stage_call_waits_for_a_decision_in_flight_and_is_then_rebased_onto_it(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        pinned = await agent.revision()
        async with stack.db.engine.connect() as decision:
            # A decision holds the case and has moved the revision, but has not committed yet.
            transaction = await decision.begin()
            await lock_case_exclusive(decision, agent.case_id)
            await decision.execute(update(cases).where(cases.c.case_id == agent.case_id)
                                   .values(revision=cases.c.revision + 1))
            call = asyncio.ensure_future(agent.call("stage_claims", {
                "expectedCaseId": agent.case_id, "expectedRevision": pinned,
                "claims": [claim_item("raced", [source])]}))
            await asyncio.sleep(0.5)
            assert not call.done(), "the stage call read the revision while a decision held the case"
            await transaction.commit()
        result = await asyncio.wait_for(call, 10)
        assert not result.is_error, result.content[0].text
        assert (result.structured_content["pinnedRevision"], result.structured_content["workspaceRevision"]) == (
            pinned, pinned + 1)
