"""A diff cut by its cap still counts every change: claims whose grounding did not change do not use up the cap,
and `counts` and `omitted` hold every claim whose grounding alone changed."""

from __future__ import annotations

from services.review.history_repository import SqlHistory
from services.review.history_views import diff_view
from tests.factories import agent_session, claim_item, source_item


async def test_a_diff_cut_by_its_cap_counts_every_grounding_change_however_many_unchanged_claims_come_first(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[
            source_item("k-prim", publisher="Agency A"), source_item("k-prim-bis", publisher="Agency A"),
            source_item("k-sec", type="reporting", publisher="Paper B")])
        # a1 and a2 come first in id order, cite the retired source and keep their grounding (the same publisher
        # still grounds them); z1..z3 lose their primary source and keep only a reporting one.
        await agent.accepted("stage_claims", claims=[claim_item(c, ["k-prim", "k-prim-bis"]) for c in ("k-a1", "k-a2")])
        await agent.accepted("stage_claims", claims=[claim_item(c, ["k-prim", "k-sec"]) for c in ("k-z1", "k-z2", "k-z3")])
    async with stack.api() as api:
        answer = await api.post(f"/api/v1/cases/{agent.case_id}/retirements",
                                json={"records": [{"record": "source", "id": "k-prim"}], "note": "withdrawn"})
        assert answer.status_code == 200, answer.text
    retired = answer.json()["revision"]
    async with stack.db.engine.connect() as connection:
        whole = diff_view(agent.case_id, retired - 1, retired,
                          await SqlHistory(connection).diff(agent.case_id, retired - 1, retired, 500))
        cut = diff_view(agent.case_id, retired - 1, retired,
                        await SqlHistory(connection).diff(agent.case_id, retired - 1, retired, 2), cap=2)
    grounding_only = [r["claimId"] for r in whole["rerated"] if "health" not in r]
    assert grounding_only == ["k-z1", "k-z2", "k-z3"]
    assert cut["counts"] == whole["counts"] and whole["counts"]["rerated"] == len(whole["rerated"])
    assert cut["rerated"] == whole["rerated"][:2]
    assert cut["omitted"]["rerated"] == whole["counts"]["rerated"] - 2
