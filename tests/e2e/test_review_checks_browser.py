"""The demo case's pending prediction ("fully decarbonised by 2027", stated as established from a record of past
carbon intensity): its review checks in the stage answer through a real MCP client, and on the proposal page in
Chromium; the demo agent's track record page, reached from the proposal page's link."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.cli.demo import DEMO_AGENT, DEMO_CASE_ID, DEMO_SOURCES
from services.cli.demo_case import PENDING_PREDICTION
from tests.e2e.test_argument_map_browser import demo, reviewer_page  # noqa: F401 - the demo deployment fixture
from tests.e2e.test_review_ui import browser  # noqa: F401 - the module's Chromium fixture
from tests.factories import agent_session, claim_item, decide, source_item

pytestmark = pytest.mark.browser

# The demo prediction names 2027; from 2028 on it has passed, and a reviewer is told that too.
CHECKS = {"prediction-established", "confidence-beyond-sources"} | (
    {"prediction-year-passed"} if datetime.now(UTC).year > 2027 else set())


async def test_the_demo_prediction_shows_its_checks_in_the_stage_answer_through_mcp(stack):
    grid = next(s for s in DEMO_SOURCES if s["id"] == "demo-grid-outlook")
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[grid])
        staged = await agent.stage(PENDING_PREDICTION[0], **PENDING_PREDICTION[2])
    flagged = {c["check"]: c for c in staged["reviewChecks"] if c["itemId"] == PENDING_PREDICTION[1]}
    assert set(flagged) == CHECKS
    assert "single origin (Example Grid Operator (demo data))" in flagged["confidence-beyond-sources"]["message"]
    assert staged["items"] == [{"itemId": PENDING_PREDICTION[1], "status": "pending"}]  # flagged, not refused


async def test_the_demo_prediction_shows_its_checks_on_the_proposal_page_and_links_to_the_agent(demo, browser):  # noqa: F811
    async with demo.api() as api:
        pending = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/proposals")).json()["proposals"]
    proposal = next(p for p in pending if p["items"][0]["itemId"] == PENDING_PREDICTION[1])
    async with demo.api() as api:
        read = (await api.get(f"/api/v1/proposals/{proposal['proposalId']}")).json()
    assert {c["check"] for c in read["items"][0]["reviewChecks"]} == CHECKS

    page = await reviewer_page(demo, browser, f"/ui/proposals/{proposal['proposalId']}")
    checks = page.locator(f"#checks-{PENDING_PREDICTION[1]} li")
    assert await checks.count() == 2
    shown = " ".join(await checks.all_inner_texts())
    assert "prediction-established" in shown and "confidence-beyond-sources" in shown and "warning" in shown
    grounding = await page.locator(f"#grounding-{PENDING_PREDICTION[1]}").inner_text()
    assert "primary" in grounding and "1 independent origin" in grounding

    await page.locator("a.agent-link").first.click()
    await page.wait_for_url(f"**/ui/agents/{DEMO_AGENT}")
    assert f"Track record of {DEMO_AGENT}" in await page.locator("h1").inner_text()
    assert int(await page.locator("#record-pending").inner_text()) == 2  # the two proposals still pending
    assert "prediction-established" in await page.locator("#checks").inner_text()
    await page.context.close()


async def test_the_track_record_page_shows_the_brier_score_and_calibration(stack, browser):  # noqa: F811
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcome")])
        staged = await agent.stage("stage_claims", claims=[
            claim_item(c, ["outcome"], kind="prediction", confidence=conf, text=f"{c} happens by 2025.")
            for c, conf in (("p-est", "established"), ("p-sup", "supported"), ("p-dis", "disputed"))]
            + [claim_item("dull", ["outcome"])])
        await decide(stack, staged["proposalId"], accept=["p-est", "p-sup", "p-dis"], reject=["dull"],
                     note="nothing new")
        async with stack.api() as api:
            for claim_id, outcome in (("p-est", "true"), ("p-sup", "false"), ("p-dis", "true")):
                response = await api.post(f"/api/v1/cases/{agent.case_id}/resolutions", json={
                    "claimId": claim_id, "outcome": outcome, "sourceId": "outcome", "resolvedOn": "2026-01-01"})
                assert response.status_code == 200, response.text
        page = await reviewer_page(stack, browser, f"/ui/agents/{agent.name}")
        # By hand: (.95 - 1)² + (.75 - 0)² + (.5 - 1)² = .0025 + .5625 + .25 = .815; / 3 = .271666…
        assert await page.locator("#record-brier").inner_text() == "0.2717"
        assert await page.locator("#record-resolved").inner_text() == "3"
        rows = [await r.inner_text() for r in await page.locator("#calibration tbody tr").all()]
        assert [r.split("\t")[:4] for r in rows] == [["established", "0.95", "1", "1"], ["supported", "0.75", "1", "0"],
                                                    ["disputed", "0.50", "1", "1"]]
        assert await page.locator("#record-rate").inner_text() == "80% of decided items"  # 4 of 5 (the source too)
        assert "nothing new" in await page.locator("#rejections").inner_text()
        await page.context.close()
