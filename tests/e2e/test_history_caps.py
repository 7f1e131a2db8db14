"""A diff cut by its cap still counts every change: claims whose grounding did not change do not use up the cap,
and `counts` and `omitted` hold every claim whose grounding alone changed."""

from __future__ import annotations

from services.review import history_repository
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


async def test_a_diff_over_many_grounding_changes_read_a_batch_at_a_time_counts_them_exactly_under_its_cap(
        stack, monkeypatch):
    groups = range(4)  # each retires its own primary source, at its own revision
    async with agent_session(stack) as agent:  # (at most 4 items staged at a time)
        await agent.accepted("stage_sources", sources=[source_item("m-sec", type="reporting", publisher="Paper B")])
        for g in groups:
            await agent.accepted("stage_sources", sources=[source_item(f"m-p{g}{bis}", publisher=f"Agency {g}")
                                                           for bis in ("", "-bis")])
            # per revision, a claim that keeps its grounding comes first, then three that lose their primary source
            await agent.accepted("stage_claims", claims=[claim_item(f"m-a{g}", [f"m-p{g}", f"m-p{g}-bis"])] + [
                claim_item(f"m-z{g}{n}", [f"m-p{g}", "m-sec"]) for n in range(3)])
    async with stack.api() as api:
        for g in groups:
            answer = await api.post(f"/api/v1/cases/{agent.case_id}/retirements",
                                    json={"records": [{"record": "source", "id": f"m-p{g}"}], "note": "withdrawn"})
            assert answer.status_code == 200, answer.text
    last = answer.json()["revision"]
    first = last - len(groups) + 1

    async def diff(cap: int) -> dict:
        async with stack.db.engine.connect() as connection:
            found = await SqlHistory(connection).diff(agent.case_id, first - 1, last, cap)
        return diff_view(agent.case_id, first - 1, last, found, cap=cap)

    whole = await diff(500)
    monkeypatch.setattr(history_repository, "CANDIDATES_AT_A_TIME", 3)  # batches that cut through a revision
    batched, cut = await diff(500), await diff(4)
    grounding_only = [r["claimId"] for r in whole["rerated"] if "health" not in r]
    assert grounding_only == [f"m-z{g}{n}" for g in groups for n in range(3)]
    assert batched == whole
    assert cut["counts"] == whole["counts"] and cut["rerated"] == whole["rerated"][:4]
    assert cut["omitted"]["rerated"] == whole["counts"]["rerated"] - 4
