"""The demo case in a real browser: the argument map with its verdict, claims, relations and a merge group,
what lost support after a retirement, and the proposal still waiting for review."""

from __future__ import annotations

import os

import pytest

from services.cli.demo import DEMO_CASE_ID, load_demo
from services.cli.demo_case import PENDING, RETIRED
from tests.e2e.test_review_ui import DOCS, browser  # noqa: F401 - the module's Chromium fixture
from tests.support import Stack, new_deployment, remove_deployment

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
async def demo(servers):
    """A deployment of its own with the demo loaded twice (the second load must change nothing)."""
    settings = await new_deployment(servers)
    running = await Stack(settings).start()
    try:
        await load_demo(settings)
        async with running.api() as api:
            first = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}")).json()
            await load_demo(settings)
            assert (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}")).json()["revision"] == first["revision"]
        yield running
    finally:
        await running.stop()
        await remove_deployment(servers, settings)


async def test_the_demo_case_page_draws_the_argument_map_and_waits_on_one_proposal(demo, browser, tmp_path):  # noqa: F811
    async with demo.api() as api:
        graph = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/graph")).json()
        pending = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/proposals")).json()["proposals"]
    assert [i["itemId"] for p in pending for i in p["items"]] == [PENDING[1]]
    types = {e["type"] for e in graph["edges"]}
    assert {"supports", "contradicts", "qualifies", "amplifies", "cites"} <= types
    assert len({n["sourceType"] for n in graph["nodes"] if n["kind"] == "source"}) >= 3
    assert graph["health"] == {"unsupported": ["demo-claim-bills"], "weakened": ["demo-verdict"]}

    page = await browser.new_page(viewport={"width": 1280, "height": 1000})
    await page.goto(f"{demo.http_url}/ui/signin")
    await page.fill("#token", demo.tokens["reviewer"])
    await page.click("button[type=submit]")
    await page.goto(f"{demo.http_url}/ui/cases/{DEMO_CASE_ID}")
    svg = page.locator("svg.argument-map")
    assert await svg.is_visible()
    drawn = {await a.get_attribute("data-node"): await a.get_attribute("href")
             for a in await svg.locator("a.map-node").all()}
    assert set(drawn) == {n["id"] for n in graph["nodes"]}
    assert drawn["demo-verdict"] == f"/ui/cases/{DEMO_CASE_ID}#verdict"
    assert drawn["demo-claim-trial-cut"] == f"/ui/cases/{DEMO_CASE_ID}#claim-demo-claim-trial-cut"
    assert await svg.locator("g.cluster[data-group='demo-group-trial-cut']").count() == 1
    labels = await svg.locator("text.elabel").all_text_contents()
    assert {"supports", "contradicts", "qualifies", "amplifies"} <= set(labels)  # said in words, not colour alone
    assert await svg.locator(f"a[data-node='{RETIRED['id']}'] g.retired").count() == 1

    verdict_box = await svg.locator("a[data-node='demo-verdict'] rect").bounding_box()
    source_box = await svg.locator("a[data-node='demo-field-trial-2023'] rect").bounding_box()
    assert verdict_box["y"] < source_box["y"]  # the verdict on top, the sources at the foot

    health = await page.locator("#evidence-health").inner_text()
    assert "demo-claim-bills" in health and "demo-verdict" in health and RETIRED["id"] in health
    assert "1" in await page.locator("h2:has-text('Pending proposals') .count").inner_text()

    # THREADLINE_DOCS_SCREENSHOTS=1 refreshes the README's screenshot; other runs keep theirs private.
    shots = DOCS if os.environ.get("THREADLINE_DOCS_SCREENSHOTS") else tmp_path
    shots.mkdir(exist_ok=True)
    await page.locator("#argument-map").screenshot(path=str(shots / "argument-map.png"))

    await page.click("a.map-node[data-node='demo-claim-trial-cut']")
    assert page.url.endswith("#claim-demo-claim-trial-cut")
    assert await page.locator("#claim-demo-claim-trial-cut").is_visible()

    await page.close()


async def test_a_demo_the_reviewer_changed_loads_again_without_restaging_what_left_the_ledger(demo):
    async with demo.api() as api:
        retired = await api.post(f"/api/v1/cases/{DEMO_CASE_ID}/retirements", json={
            "records": [{"record": "claim", "id": "demo-claim-trial-cut"}], "note": "Superseded by a newer trial."})
        assert retired.status_code == 200, retired.text
        await load_demo(demo.settings)  # the claim is in the ledger's history: nothing is staged again
        case = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}")).json()
        assert case["revision"] == retired.json()["revision"] and case["pendingProposals"] == 1
