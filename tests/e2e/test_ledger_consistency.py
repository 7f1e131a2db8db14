"""A claim that leaves the ledger takes its links with it: no active relation or group counts a dead claim."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from shared.db.tables import claims, merge_group_members, merge_groups, relations
from tests.factories import agent_session, merge_item, relation_item, seed, verdict_claim


async def dangling_links(stack, case_id: str) -> list[tuple[str, str]]:
    """Active relations and groups that involve a claim which is no longer active."""
    async with stack.db.engine.connect() as connection:
        dead = select(claims.c.claim_id).where(claims.c.case_id == case_id, claims.c.status != "active")
        linked = await connection.execute(
            select(relations.c.relation_id).where(
                relations.c.case_id == case_id, relations.c.status == "active",
                relations.c.source_claim_id.in_(dead) | relations.c.target_claim_id.in_(dead)))
        grouped = await connection.execute(
            select(merge_groups.c.group_id)
            .join(merge_group_members, (merge_group_members.c.case_id == merge_groups.c.case_id)
                  & (merge_group_members.c.group_id == merge_groups.c.group_id))
            .where(merge_groups.c.case_id == case_id, merge_groups.c.status == "active",
                   merge_group_members.c.claim_id.in_(dead)))
        return [("relation", r[0]) for r in linked] + [("group", g[0]) for g in grouped]


async def retire(stack, case_id: str, claim_id: str, expected_revision: int | None = None):
    body = {"records": [{"record": "claim", "id": claim_id}], "note": "withdrawn by its publisher"}
    if expected_revision is not None:
        body["expectedRevision"] = expected_revision
    async with stack.api("reviewer") as api:
        return await api.post(f"/api/v1/cases/{case_id}/retirements", json=body)


async def test_a_superseded_verdict_takes_its_bases_out_of_the_ledger(stack):
    async with agent_session(stack) as agent:
        s, (a, b) = (lambda ids: (ids["sources"][0], ids["claims"]))(await seed(agent, sources=1, claims=2))
        await agent.accepted("stage_verdict", claim=verdict_claim("v1", [s]), relations=[relation_item("r1", a, "v1")])
        decided = await agent.accepted("stage_verdict", claim=verdict_claim("v2", [s], text="On balance, no."),
                                       relations=[relation_item("r2", b, "v2", "contradicts")])
        summary = await agent.ok("get_workspace", {})
        assert summary["counts"]["relations"] == {"total": 1, "byType": {"contradicts": 1}}
        assert await dangling_links(stack, agent.case_id) == []
        async with stack.api() as api:
            history = (await api.get(f"/api/v1/cases/{agent.case_id}/history")).json()
        change = history["changes"][0]
        assert change["revision"] == decided["revision"]
        assert change["changes"]["retired"] == [
            {"record": "relation", "id": "r1", "note": "its claim v1 was superseded by v2"}]
        ended = {(e["record"], e["id"]): e for e in history["ended"]}
        assert ended[("relation", "r1")]["endedInRevision"] == decided["revision"]
        async with stack.api() as api:  # an older page lists what ended in its own revisions only
            older = (await api.get(f"/api/v1/cases/{agent.case_id}/history",
                                   params={"before": decided["revision"]})).json()
        assert older["changes"][0]["revision"] == decided["revision"] - 1 and older["ended"] == []


async def test_retiring_a_claim_ends_its_relations_and_the_groups_it_belongs_to(stack):
    async with agent_session(stack) as agent:
        a, b, c = (await seed(agent, sources=1, claims=3))["claims"]
        await agent.accepted("stage_relations", relations=[relation_item("a-supports-c", a, c)])
        await agent.accepted("stage_merge", groups=[merge_item("ab", [a, b]), merge_item("bc", [b, c])])
        retired = await retire(stack, agent.case_id, a)
        assert retired.status_code == 200, retired.text
        assert {(r["record"], r["id"]) for r in retired.json()["retired"]} == {
            ("claim", a), ("relation", "a-supports-c"), ("group", "ab")}
        assert await dangling_links(stack, agent.case_id) == []
        summary = await agent.ok("get_workspace", {})
        assert summary["counts"]["groups"] == 1 and summary["counts"]["relations"]["total"] == 0


async def test_a_merge_racing_the_retirement_of_its_member_never_leaves_a_dead_member_grouped(stack):
    async with agent_session(stack) as agent:
        members = (await seed(agent, sources=1, claims=12))["claims"]
        pairs = [(members[2 * n], members[2 * n + 1]) for n in range(6)]
        staged = [await agent.stage("stage_merge", groups=[merge_item(f"g{n}", list(pair))])
                  for n, pair in enumerate(pairs)]

        async def accept(proposal_id: str, group_id: str):
            async with stack.api("reviewer") as api:
                shown = (await api.get(f"/api/v1/proposals/{proposal_id}")).json()
                return await api.post(f"/api/v1/proposals/{proposal_id}/decisions",
                                      json={"accept": [group_id], "expectedRevision": shown["caseRevision"]})

        outcomes = await asyncio.gather(*(
            coroutine
            for n, (proposal, pair) in enumerate(zip(staged, pairs, strict=True))
            for coroutine in (accept(proposal["proposalId"], f"g{n}"), retire(stack, agent.case_id, pair[0]))
        ))
        assert all(o.status_code < 500 for o in outcomes), [o.text for o in outcomes if o.status_code >= 500]
        for n in range(6):
            merge, retirement = outcomes[2 * n].json(), outcomes[2 * n + 1].json()
            assert retirement.get("revision"), retirement
            if merge.get("accepted") == [f"g{n}"]:  # the merge went first: the retirement ended the group
                assert ("group", f"g{n}") in {(r["record"], r["id"]) for r in retirement["retired"]}
            else:  # the retirement went first (or the view was stale): the merge was refused, not applied
                assert merge.get("refused") or merge.get("error"), merge
        assert await dangling_links(stack, agent.case_id) == []
