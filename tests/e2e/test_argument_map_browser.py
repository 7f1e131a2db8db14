"""The argument map in a real browser (Chromium, a 1,400 px window): the demo case's map with its verdict,
claims, relations and a merge group, drawn at a size its labels can be read at; its focus view, reached from a
map node and from a claim's row; zoom (buttons, keyboard, Ctrl + wheel) and pan (drag, keys); the map without
JavaScript; a case of thousands of claims, which opens on its verdict's neighbourhood; and what lost support
after a retirement, with the proposal still waiting for review."""

from __future__ import annotations

import asyncio
import os

import pytest

from services.cli.bench.search_corpus import Claim
from services.cli.bench.search_fill import CLAIMS_PER_SOURCE, fill_case
from services.cli.demo import DEMO_CASE_ID, load_demo
from services.cli.demo_case import PENDING, PENDING_PREDICTION, RETIRED
from tests.e2e.test_review_ui import DOCS, browser  # noqa: F401 - the module's Chromium fixture
from tests.factories import Agent, claim_item, relation_item, seed, unique, verdict_claim
from tests.support import Stack, new_deployment, remove_deployment

pytestmark = pytest.mark.browser

WINDOW = {"width": 1400, "height": 1000}
READABLE_PX = 12
LARGE_CLAIMS = 10_000 if os.environ.get("THREADLINE_FULL") else 2000
BULK = LARGE_CLAIMS - 1 - 3 - 6 - 6  # the large case's unrelated claims, and their sources (25 claims each)
LARGE_SOURCES = 2 + -(-BULK // CLAIMS_PER_SOURCE)

# Every text of the map as drawn: its rendered height, and for a node's text how far it runs past its box.
MEASURE_TEXTS = """svg => Array.from(svg.querySelectorAll("text")).map(t => {
  const r = t.getBoundingClientRect();
  const node = t.closest("a.map-node");
  const box = node ? node.querySelector("rect:not(.ring)").getBoundingClientRect() : null;
  return {text: t.textContent, height: r.height, overrun: box ? r.right - box.right : 0};
})"""


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


async def reviewer_page(stack, browser, path: str, **context):  # noqa: F811
    """A signed-in reviewer's page in a 1,400 px window, opened at `path`."""
    opened = await browser.new_context(viewport=WINDOW, **context)
    page = await opened.new_page()
    await page.goto(f"{stack.http_url}/ui/signin")
    await page.fill("#token", stack.tokens["reviewer"])
    await page.click("button[type=submit]")
    await page.goto(f"{stack.http_url}{path}")
    return page


async def until(read, holds, timeout: float = 5.0):
    """Poll `read()` until `holds` of it (the page's CSP forbids the eval behind wait_for_function)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not holds(value := await read()):
        assert asyncio.get_running_loop().time() < deadline, value
        await asyncio.sleep(0.05)
    return value


async def measured(page) -> list[dict]:
    texts = await page.locator("svg.argument-map").evaluate(MEASURE_TEXTS)
    assert texts
    return texts


async def test_the_demo_map_is_drawn_at_a_size_its_labels_can_be_read_at(demo, browser, tmp_path):  # noqa: F811
    async with demo.api() as api:
        graph = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/graph")).json()
        pending = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/proposals")).json()["proposals"]
    assert [i["itemId"] for p in pending for i in p["items"]] == [PENDING[1], PENDING_PREDICTION[1]]
    types = {e["type"] for e in graph["edges"]}
    assert {"supports", "contradicts", "qualifies", "amplifies", "cites"} <= types
    assert len({n["sourceType"] for n in graph["nodes"] if n["kind"] == "source"}) >= 3
    assert graph["health"] == {"unsupported": ["demo-claim-bills"], "weakened": ["demo-verdict"]}
    assert graph["focus"] is None and graph["cut"] is None  # twelve records: drawn whole

    page = await reviewer_page(demo, browser, f"/ui/cases/{DEMO_CASE_ID}")
    svg = page.locator("svg.argument-map")
    assert await svg.is_visible()
    texts = await measured(page)
    small = [t for t in texts if t["height"] < READABLE_PX]
    assert not small, small  # every label, id, state, relation name and legend entry
    overrun = [t for t in texts if t["overrun"] > 1]
    assert not overrun, overrun  # and each line of a box stays inside it
    label = await svg.locator("a[data-node='demo-claim-trial-cut'] text.nlabel").first.bounding_box()
    assert label["height"] >= READABLE_PX
    drawn = {await a.get_attribute("data-node"): await a.get_attribute("href")
             for a in await svg.locator("a.map-node").all()}
    assert set(drawn) == {n["id"] for n in graph["nodes"]}
    assert drawn["demo-verdict"] == f"/ui/cases/{DEMO_CASE_ID}?focus=demo-verdict#argument-map"
    assert drawn["demo-claim-trial-cut"] == f"/ui/cases/{DEMO_CASE_ID}?focus=demo-claim-trial-cut#argument-map"
    assert drawn[RETIRED["id"]] == f"#source-{RETIRED['id']}"
    assert await svg.locator("g.cluster[data-group='demo-group-trial-cut']").count() == 1
    labels = await svg.locator("text.elabel").all_text_contents()
    assert {"supports", "contradicts", "qualifies", "amplifies"} <= set(labels)  # said in words, not colour alone
    assert await svg.locator(f"a[data-node='{RETIRED['id']}'] g.retired").count() == 1

    verdict_box = await svg.locator("a[data-node='demo-verdict'] rect").bounding_box()
    source_box = await svg.locator("a[data-node='demo-field-trial-2023'] rect").bounding_box()
    assert verdict_box["y"] < source_box["y"]  # the verdict on top, the sources at the foot

    health = await page.locator("#evidence-health").inner_text()
    assert "demo-claim-bills" in health and "demo-verdict" in health and RETIRED["id"] in health
    assert "2" in await page.locator("h2:has-text('Pending proposals') .count").inner_text()  # two left pending

    # The full text of a node on hover (its title, shown below the map); its row through "row ↓".
    await svg.locator("a[data-node='demo-claim-cold-snap']").hover()
    detail = page.locator("#map-detail")
    assert await detail.is_visible() and "on a coal-heavy grid" in await detail.inner_text()
    await svg.locator("a.map-row[data-row='demo-claim-trial-cut']").click()
    assert page.url.endswith("#claim-demo-claim-trial-cut") and "?focus" not in page.url
    assert await page.locator("#claim-demo-claim-trial-cut").is_visible()

    # THREADLINE_DOCS_SCREENSHOTS=1 refreshes the README's screenshot: the map as it opens, the full text of the
    # verdict (cut in its box) shown below it on hover; other runs keep theirs private.
    shots = DOCS if os.environ.get("THREADLINE_DOCS_SCREENSHOTS") else tmp_path
    shots.mkdir(exist_ok=True)
    await page.goto(f"{demo.http_url}/ui/cases/{DEMO_CASE_ID}")
    await svg.locator("a[data-node='demo-verdict']").hover()
    section = await page.locator("#argument-map").bounding_box()
    view = await page.locator("#map-view").bounding_box()
    foot = await page.locator("#argument-map form.map-find").bounding_box()
    await page.screenshot(path=str(shots / "argument-map.png"), full_page=True, clip={
        "x": view["x"] - 8, "y": section["y"], "width": view["width"] + 16,
        "height": foot["y"] + foot["height"] + 8 - section["y"]})
    await page.context.close()


async def test_a_claims_focus_view_is_reached_from_its_map_node_and_from_its_row(demo, browser):  # noqa: F811
    async with demo.api() as api:
        focused = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/graph", params={"focus": "demo-claim-grid"})).json()
        whole = len((await api.get(f"/api/v1/cases/{DEMO_CASE_ID}/graph")).json()["nodes"])
    assert focused["focus"] == {"claimIds": ["demo-claim-grid"], "hops": 2, "reason": "requested"}
    claims = {n["id"] for n in focused["nodes"] if n["kind"] != "source"}
    # grid amplifies trial-cut, which supports the verdict and is qualified by cold-snap; bills is three away
    assert claims == {"demo-claim-grid", "demo-claim-trial-cut", "demo-verdict", "demo-claim-cold-snap"}
    assert focused["cut"]["nodesOmitted"] > 0 and "claim demo-claim-grid" in focused["cut"]["note"]

    page = await reviewer_page(demo, browser, f"/ui/cases/{DEMO_CASE_ID}")
    await page.locator("svg.argument-map a.map-node[data-node='demo-claim-grid']").click()
    await page.wait_for_url(f"**/ui/cases/{DEMO_CASE_ID}?focus=demo-claim-grid#argument-map")
    svg = page.locator("svg.argument-map")
    assert await svg.get_attribute("data-centre") == "demo-claim-grid"
    drawn = {await a.get_attribute("data-node") for a in await svg.locator("a.map-node").all()}
    assert drawn == {n["id"] for n in focused["nodes"]}
    assert await svg.locator("a[data-node='demo-claim-grid'] rect.ring").count() == 1
    assert "Focused on claim demo-claim-grid" in await page.locator("#map-focus").inner_text()
    cut = focused["cut"]
    assert await page.locator("#map-cut").inner_text() == (
        f"{cut['nodesOmitted']} of {cut['nodesTotal']} records and {cut['edgesOmitted']} of {cut['edgesTotal']} "
        f"links are not drawn: {cut['note']}.")
    assert all(t["height"] >= READABLE_PX for t in await measured(page))
    centre = await svg.locator("a[data-node='demo-claim-grid'] rect:not(.ring)").bounding_box()
    view = await page.locator("#map-view").bounding_box()
    assert view["x"] <= centre["x"] and centre["x"] + centre["width"] <= view["x"] + view["width"]  # in view

    await page.locator("#map-focus a").click()  # back to the case's own map
    await page.wait_for_url(f"**/ui/cases/{DEMO_CASE_ID}#argument-map")
    assert await page.locator("svg.argument-map a.map-node").count() == whole

    await page.locator("#claim-demo-claim-bills a.map-focus-link").click()
    await page.wait_for_url(f"**/ui/cases/{DEMO_CASE_ID}?focus=demo-claim-bills#argument-map")
    assert await page.locator("svg.argument-map").get_attribute("data-centre") == "demo-claim-bills"
    assert await page.locator("#map-view").is_visible()  # the page opens at the map

    await page.goto(f"{demo.http_url}/ui/cases/{DEMO_CASE_ID}?focus=no-such-claim")  # a stale link
    assert "no active claim 'no-such-claim'" in await page.locator("#map-unfocused").inner_text()
    assert await page.locator("svg.argument-map a.map-node").count() == whole
    await page.context.close()


async def test_the_map_zooms_by_button_key_and_wheel_and_pans_by_drag_and_keys(demo, browser):  # noqa: F811
    page = await reviewer_page(demo, browser, f"/ui/cases/{DEMO_CASE_ID}")
    view, svg = page.locator("#map-view"), page.locator("svg.argument-map")
    natural = float((await svg.get_attribute("viewBox")).split()[2])
    assert float(await svg.get_attribute("width")) == natural and await page.locator("#map-zoom").inner_text() == "100%"
    label = svg.locator("a[data-node='demo-claim-grid'] text.nlabel").first
    height = (await label.bounding_box())["height"]

    await page.click("#map-tools button[data-zoom='in']")
    assert await view.get_attribute("data-zoom") == "1.25" and await page.locator("#map-zoom").inner_text() == "125%"
    assert (await svg.bounding_box())["width"] == pytest.approx(natural * 1.25, abs=1)
    assert (await label.bounding_box())["height"] == pytest.approx(height * 1.25, rel=0.1)
    await page.click("#map-tools button[data-zoom='out']")
    assert await view.get_attribute("data-zoom") == "1"

    await view.focus()
    await page.keyboard.press("+")
    await page.keyboard.press("+")
    assert await view.get_attribute("data-zoom") == "1.5625"
    await page.keyboard.press("0")
    assert await view.get_attribute("data-zoom") == "1"

    # Ctrl + wheel zooms about the pointer: the box under it stays where it was.
    target = svg.locator("a[data-node='demo-claim-trial-cut'] rect")
    before = await target.bounding_box()
    x, y = before["x"] + before["width"] / 2, before["y"] + before["height"] / 2
    await page.mouse.move(x, y)
    await page.keyboard.down("Control")
    await page.mouse.wheel(0, -240)
    await page.keyboard.up("Control")
    await until(lambda: view.get_attribute("data-zoom"), lambda zoom: float(zoom) > 1.5)
    after = await target.bounding_box()
    assert after["width"] > before["width"] * 1.5
    assert after["x"] + after["width"] / 2 == pytest.approx(x, abs=4)
    assert after["y"] + after["height"] / 2 == pytest.approx(y, abs=4)
    zoom = await view.get_attribute("data-zoom")

    # A plain wheel scrolls the view; a drag pans it, and a drag that ends on a box does not follow its link.
    left, top = await view.evaluate("v => [v.scrollLeft, v.scrollTop]")
    await page.mouse.wheel(0, 120)
    await until(lambda: view.evaluate("v => v.scrollTop"), lambda scrolled: scrolled > top)
    assert await view.get_attribute("data-zoom") == zoom
    left, top = await view.evaluate("v => [v.scrollLeft, v.scrollTop]")
    await page.mouse.move(x, y)
    await page.mouse.down()
    await page.mouse.move(x - 150, y - 60, steps=6)
    await page.mouse.up()
    moved = await view.evaluate("v => [v.scrollLeft, v.scrollTop]")
    assert moved[0] == pytest.approx(left + 150, abs=2) and moved[1] == pytest.approx(top + 60, abs=2)
    assert "focus=" not in page.url

    await view.focus()
    await page.keyboard.press("ArrowLeft")
    await page.keyboard.press("ArrowUp")
    assert await view.evaluate("v => [v.scrollLeft, v.scrollTop]") == [moved[0] - 80, moved[1] - 80]
    await page.context.close()


async def test_without_javascript_the_map_is_a_plain_scrollable_drawing_at_its_natural_size(demo, browser):  # noqa: F811
    page = await reviewer_page(demo, browser, f"/ui/cases/{DEMO_CASE_ID}", java_script_enabled=False)
    svg, view = page.locator("svg.argument-map"), page.locator("#map-view")
    assert not await page.locator("#map-tools").is_visible()
    natural = float((await svg.get_attribute("viewBox")).split()[2])
    assert (await svg.bounding_box())["width"] == pytest.approx(natural, abs=1)
    assert all(t["height"] >= READABLE_PX for t in await measured(page))
    await page.set_viewport_size({"width": 900, "height": 900})  # now wider than its view: it scrolls
    node = svg.locator("a[data-node='demo-claim-cold-snap'] rect")
    before = (await node.bounding_box())["x"]
    box = await view.bounding_box()
    await page.mouse.move(box["x"] + 100, box["y"] + 100)
    await page.mouse.wheel(300, 0)
    await page.wait_for_timeout(300)
    assert (await node.bounding_box())["x"] == pytest.approx(before - 300, abs=2)
    await page.context.close()


def bulk_text(i: int) -> str:
    regions = ["Nordic", "Alpine", "Baltic", "Atlantic", "Continental", "Mediterranean", "Pannonian"]
    return (f"Survey {i}: {regions[i % 7]} households with heat pumps reported {20 + i % 37}% lower heating "
            f"emissions in winter {2015 + i % 10}.")


@pytest.fixture(scope="module")
async def large(demo):
    """A case of LARGE_CLAIMS claims: the verdict, three bases, two supporters of each base (two relations from
    the verdict), one supporter of each of those (three relations away), and the rest unrelated.

    The unrelated ones are written as `bench search` fills a case (the ledger's own bulk write, then the
    projection's rebuild of the case's views); the neighbourhood is staged and accepted over MCP and the API."""
    case_id = unique("large")
    await fill_case(demo.db, case_id, [Claim(f"bulk-{i}", bulk_text(i)) for i in range(BULK)])
    name = unique("agent")
    token = await demo.issue_token("agent", name, case_id=case_id)
    async with demo.agent(token) as mcp:
        agent = Agent(demo, case_id, token, name, mcp)
        await agent.revision()
        sources = (await seed(agent, sources=2))["sources"]
        near = [f"near-{b}-{j}" for b in range(3) for j in range(2)]
        far = [f"far-{b}-{j}" for b in range(3) for j in range(2)]
        await agent.accepted("stage_claims", claims=[claim_item(f"base-{b}", [sources[1]]) for b in range(3)])
        for ids in (near[:4], near[4:] + far[:2], far[2:]):
            await agent.accepted("stage_claims", claims=[claim_item(i, [sources[1]]) for i in ids])
        await agent.accepted("stage_relations", relations=[
            relation_item(f"r-{n}", n, f"base-{n.split('-')[1]}") for n in near])
        await agent.accepted("stage_relations", relations=[
            relation_item(f"r-{f}", f, f.replace("far", "near"), "qualifies") for f in far])
        await agent.accepted("stage_verdict", claim=verdict_claim("large-verdict", [sources[1]]), relations=[
            relation_item(f"basis-{b}", f"base-{b}", "large-verdict") for b in range(3)])
    return {"caseId": agent.case_id, "near": near, "far": far}  # the MCP session closes in the task it opened in


async def test_a_case_of_thousands_of_claims_opens_on_its_verdicts_neighbourhood_with_readable_labels(
        demo, large, browser):  # noqa: F811
    case_id = large["caseId"]
    async with demo.api() as api:
        graph = (await api.get(f"/api/v1/cases/{case_id}/graph")).json()
    assert graph["focus"] == {"claimIds": ["large-verdict"], "hops": 2, "reason": "verdict"}
    claims = {n["id"] for n in graph["nodes"] if n["kind"] != "source"}
    assert claims == {"large-verdict", "base-0", "base-1", "base-2", *large["near"]}
    total = LARGE_CLAIMS + LARGE_SOURCES
    assert graph["cut"]["nodesTotal"] == total and graph["cut"]["nodesOmitted"] == total - 11
    assert {n["id"]: n["relationsOmitted"] for n in graph["nodes"] if n["id"] in large["near"]} == dict.fromkeys(
        large["near"], 1)  # each near claim's far supporter is left out, and said to be

    page = await reviewer_page(demo, browser, f"/ui/cases/{case_id}")
    svg = page.locator("svg.argument-map")
    drawn = {await a.get_attribute("data-node") for a in await svg.locator("a.map-node").all()}
    assert drawn == {n["id"] for n in graph["nodes"]}
    assert float(await svg.get_attribute("width")) == float((await svg.get_attribute("viewBox")).split()[2])
    small = [t for t in await measured(page) if t["height"] < READABLE_PX]
    assert not small, small
    assert "opens on the verdict large-verdict" in await page.locator("#map-focus").inner_text()
    assert f"of {total} records" in await page.locator("#map-cut").inner_text()
    assert await svg.locator("text.nmore").count() == 6  # "+1 relation not drawn" on each near claim

    # Elsewhere in the case: a claim found by its id opens its own focus view.
    await page.fill("#map-focus-id", "far-2-1")
    await page.click("form.map-find button[type=submit]")
    await page.wait_for_url(f"**/ui/cases/{case_id}?focus=far-2-1#argument-map")
    assert await svg.get_attribute("data-centre") == "far-2-1"
    drawn = {await a.get_attribute("data-node") for a in await svg.locator("a.map-node").all()}
    assert {"far-2-1", "near-2-1", "base-2"} <= drawn and not {"large-verdict", "base-0"} & drawn  # 3 away
    assert all(t["height"] >= READABLE_PX for t in await measured(page))
    await page.context.close()


async def test_a_demo_the_reviewer_changed_loads_again_without_restaging_what_left_the_ledger(demo):
    async with demo.api() as api:
        retired = await api.post(f"/api/v1/cases/{DEMO_CASE_ID}/retirements", json={
            "records": [{"record": "claim", "id": "demo-claim-trial-cut"}], "note": "Superseded by a newer trial."})
        assert retired.status_code == 200, retired.text
        await load_demo(demo.settings)  # the claim is in the ledger's history: nothing is staged again
        case = (await api.get(f"/api/v1/cases/{DEMO_CASE_ID}")).json()
        assert case["revision"] == retired.json()["revision"] and case["pendingProposals"] == 2
