"""Every claim's grounding, from its active sources: in get_workspace, on the map, in `ledger.changed` events,
and kept current when a source is retired."""

from __future__ import annotations

import re

import httpx2

from tests.events import stream_events, wait_until_published
from tests.factories import agent_session, claim_item, source_item, ui_sign_in


async def ledger_changes(stack, case_id: str) -> dict[int, dict]:
    await wait_until_published(stack.db)
    return {e["revision"]: e["data"]["changes"] for e in await stream_events(stack.settings)
            if e["type"] == "threadline.ledger.changed" and e["data"]["caseId"] == case_id}


def claims_of(workspace: dict) -> dict[str, dict]:
    return {c["claimId"]: c for c in workspace["claims"]["items"]}


async def map_badges(stack, case_id: str) -> dict[str, list[str]]:
    """The grounding badge lines of each claim box in the case page's map (the text, not a colour)."""
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        page = (await http.get(f"/ui/cases/{case_id}")).text
    boxes = re.findall(r'<a href="[^"]*" class="map-node" data-node="([^"]+)" data-kind="claim">(.*?)</a>', page, re.S)
    return {node: re.findall(r'class="nground">([^<]*)</text>', box) for node, box in boxes}


async def test_retiring_a_claims_only_primary_source_changes_its_label_in_the_event_and_in_get_workspace(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[
            source_item("census", type="official", publisher="Statistics Office"),
            source_item("paper", type="reporting", publisher="Daily Paper"),
            source_item("wire", type="reporting", publisher="daily  PAPER"),
            source_item("post", type="social", publisher="someone")])
        accepted = await agent.accepted("stage_claims", claims=[
            claim_item("mixed", ["census", "paper", "wire"]), claim_item("social", ["post"]),
            claim_item("press", ["paper"])])
        added = (await ledger_changes(stack, agent.case_id))[accepted["revision"]]
        assert sorted((g["claimId"], g["grounding"], g["independentOrigins"]) for g in added["grounding"]) == [
            ("mixed", "primary", 2), ("press", "secondary", 1), ("social", "social-only", 1)]

        assert (await map_badges(stack, agent.case_id)) == {"mixed": ["[primary] 2 origins"],
                                                            "social": ["[social-only] 1 origin"],
                                                            "press": ["[secondary] 1 origin"]}
        before = claims_of(await agent.ok("get_workspace", {"scope": "claims"}))
        assert (before["mixed"]["grounding"], before["mixed"]["independentOrigins"]) == ("primary", 2)
        assert before["social"]["grounding"] == "social-only"

        async with stack.api() as api:
            response = await api.post(f"/api/v1/cases/{agent.case_id}/retirements", json={
                "records": [{"record": "source", "id": "census"}], "note": "the census was withdrawn"})
        assert response.status_code == 200, response.text
        revision = response.json()["revision"]
        changed = (await ledger_changes(stack, agent.case_id))[revision]
        assert changed["grounding"] == [{"claimId": "mixed", "grounding": "secondary", "independentOrigins": 1}]

        after = await agent.ok("get_workspace", {"scope": "claims"})
        assert after["workspaceRevision"] == revision
        mixed = claims_of(after)["mixed"]
        assert (mixed["grounding"], mixed["independentOrigins"]) == ("secondary", 1)
        assert claims_of(after)["press"]["grounding"] == "secondary"  # untouched by the retirement

        async with stack.api() as api:
            graph = (await api.get(f"/api/v1/cases/{agent.case_id}/graph")).json()
        nodes = {n["id"]: n for n in graph["nodes"] if n.get("kind") == "claim" or n["id"] in ("mixed", "social")}
        assert nodes["mixed"]["grounding"] == {"grounding": "secondary", "independentOrigins": 1}
        assert nodes["social"]["grounding"] == {"grounding": "social-only", "independentOrigins": 1}
        badges = await map_badges(stack, agent.case_id)
        assert badges["mixed"] == ["[secondary] 1 origin"] and badges["press"] == ["[secondary] 1 origin"]
