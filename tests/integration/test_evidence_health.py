"""Evidence health propagates: a retirement re-rates what leaned on it, in its own transaction, and says so."""

from __future__ import annotations

from sqlalchemy import select

from shared.db.tables import evidence_health
from tests.events import stream_events, wait_until_published
from tests.factories import agent_session, claim_item, relation_item, source_item, verdict_claim


async def retire(stack, case_id: str, *records: tuple[str, str], note: str = "withdrawn") -> dict:
    async with stack.api() as api:
        response = await api.post(f"/api/v1/cases/{case_id}/retirements", json={
            "records": [{"record": r, "id": i} for r, i in records], "note": note})
    assert response.status_code == 200, response.text
    return response.json()


async def build_case(agent) -> None:
    """Three sources (two from one publisher), a claim on one source, a claim on two, a verdict on both."""
    await agent.accepted("stage_sources", sources=[
        source_item("only-source", publisher="Example Agency"),
        source_item("same-origin", publisher="example  agency"),
        source_item("other-origin", publisher="Another Lab", type="analysis"),
    ])
    await agent.accepted("stage_claims", claims=[
        claim_item("lonely", ["only-source"]), claim_item("grounded", ["same-origin", "other-origin"])])
    await agent.accepted("stage_verdict", claim=verdict_claim("verdict", ["other-origin"]), relations=[
        relation_item("lonely-basis", "lonely", "verdict"), relation_item("grounded-basis", "grounded", "verdict")])


async def test_retiring_the_only_source_of_a_basis_claim_leaves_it_unsupported_and_the_verdict_weakened(stack):
    async with agent_session(stack) as agent:
        await build_case(agent)
        before = (await agent.ok("get_workspace", {}))["evidenceHealth"]
        assert before["independentOrigins"] == 2  # "Example Agency" twice counts once
        assert before["unsupported"]["total"] == 0 and before["verdictHealth"] == "supported"

        retired = await retire(stack, agent.case_id, ("source", "only-source"))
        assert retired["rerated"] == [
            {"claimId": "lonely", "health": "unsupported", "lost": [{"record": "source", "id": "only-source"}]},
            {"claimId": "verdict", "health": "weakened",
             "lost": [{"record": "claim", "id": "lonely"}, {"record": "source", "id": "only-source"}]},
        ]

        summary = await agent.ok("get_workspace", {})
        assert summary["evidenceHealth"]["unsupported"] == {"total": 1, "claimIds": ["lonely"], "omitted": 0}
        assert summary["evidenceHealth"]["verdictHealth"] == "weakened"
        assert summary["verdict"]["health"] == "weakened"
        assert summary["verdict"]["lost"][0] == {"record": "claim", "id": "lonely"}
        assert summary["evidenceHealth"]["independentOrigins"] == 2  # same-origin and other-origin remain
        unresolved = (await agent.ok("get_workspace", {"scope": "unresolved"}))["unresolved"]["items"]
        by_type = {(item["type"], item.get("claimId")): item for item in unresolved}
        assert "only-source" in by_type[("claim_unsupported", "lonely")]["detail"]
        assert "lonely" in by_type[("verdict_weakened", "verdict")]["detail"]

        async with stack.db.engine.connect() as connection:
            rows = (await connection.execute(select(evidence_health.c.claim_id, evidence_health.c.health)
                                             .where(evidence_health.c.case_id == agent.case_id))).all()
        assert sorted(rows) == [("lonely", "unsupported"), ("verdict", "weakened")]

        await wait_until_published(stack.db)
        changed = [e for e in await stream_events(stack.settings)
                   if e["type"] == "threadline.ledger.changed" and e["data"]["caseId"] == agent.case_id]
        assert changed[-1]["revision"] == retired["revision"]
        assert changed[-1]["data"]["changes"]["rerated"] == retired["rerated"]


async def test_a_claim_with_an_active_source_left_stays_supported_and_the_verdict_keeps_what_it_lost(stack):
    async with agent_session(stack) as agent:
        await build_case(agent)
        assert (await retire(stack, agent.case_id, ("source", "same-origin")))["rerated"] == []

        retired = await retire(stack, agent.case_id, ("claim", "grounded"))  # its basis relation ends with it
        assert retired["rerated"] == [{"claimId": "verdict", "health": "weakened", "lost": [
            {"record": "claim", "id": "grounded"}, {"record": "relation", "id": "grounded-basis"}]}]
        again = await retire(stack, agent.case_id, ("source", "only-source"))
        weakened = next(r for r in again["rerated"] if r["claimId"] == "verdict")
        assert weakened["lost"][:2] == retired["rerated"][0]["lost"]  # what it lost first is still named
        assert {"record": "claim", "id": "lonely"} in weakened["lost"]

        async with stack.api() as api:
            graph = (await api.get(f"/api/v1/cases/{agent.case_id}/graph")).json()
        nodes = {n["id"]: n for n in graph["nodes"]}
        assert nodes["lonely"]["health"] == "unsupported" and nodes["verdict"]["health"] == "weakened"
        assert nodes["only-source"]["status"] == "retired"  # still drawn: a claim cites it
        assert "grounded" not in nodes and "same-origin" not in nodes
        assert graph["health"] == {"unsupported": ["lonely"], "weakened": ["verdict"]}


async def test_a_verdict_accepted_on_a_claim_that_is_already_unsupported_is_weakened_when_it_is_installed(stack):
    async with agent_session(stack) as agent:
        await build_case(agent)
        await retire(stack, agent.case_id, ("claim", "verdict"))
        await retire(stack, agent.case_id, ("source", "only-source"))
        decided = await agent.accepted("stage_verdict", claim=verdict_claim("second-verdict", ["other-origin"]),
                                       relations=[relation_item("second-basis", "lonely", "second-verdict")])
        assert decided["accepted"] == ["second-verdict"]
        summary = await agent.ok("get_workspace", {})
        assert summary["verdict"]["claimId"] == "second-verdict" and summary["verdict"]["health"] == "weakened"
        await wait_until_published(stack.db)
        changed = [e for e in await stream_events(stack.settings)
                   if e["type"] == "threadline.ledger.changed" and e["data"]["caseId"] == agent.case_id]
        assert changed[-1]["data"]["changes"]["rerated"] == [{"claimId": "second-verdict", "health": "weakened",
                                                              "lost": [{"record": "claim", "id": "lonely"},
                                                                       {"record": "source", "id": "only-source"}]}]
