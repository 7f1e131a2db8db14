"""The pending queue and deciding from the keyboard, in a real browser (Chromium): the case page's queue filtered
by text, kind and possible duplicates; a proposal decided with j/k, a, r, d and Ctrl+Enter, a duplicate
rejection prefilled from what staging flagged, which the agent then reads in its guidance naming the record."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import insert

from shared.db.tables import possible_duplicates
from tests.e2e.test_argument_map_browser import reviewer_page
from tests.e2e.test_review_ui import DOCS, browser  # noqa: F401 - the module's Chromium fixture
from tests.factories import agent_session, claim_item, seed, source_item

pytestmark = pytest.mark.browser


async def _rows(page) -> list[str]:
    return await page.locator("#queue-list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.proposal)")


async def test_a_reviewer_filters_the_queue_and_decides_from_the_keyboard(stack, browser, tmp_path):  # noqa: F811
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=1)
        canonical, source = ids["claims"][0], ids["sources"][0]
        heat = await agent.stage("stage_claims", claims=[
            claim_item("heat-1", [source], text="Heat pumps cut emissions."),
            claim_item("heat-2", [source], text="Heat pumps cut bills.")])
        wind = await agent.stage("stage_claims", claims=[claim_item("wind", [source], text="Wind output rose.")])
        tidal = await agent.stage("stage_sources", sources=[source_item("tidal", title="Tidal records")])
        # What staging flags (the search helper's staging fills these rows; here the test records them).
        async with stack.db.engine.begin() as connection:
            await connection.execute(insert(possible_duplicates).values(
                proposal_id=wind["proposalId"], item_id="wind", rank=0, of_kind="claim", of_id=canonical,
                of_status="canonical", similarity=0.8))

        page = await reviewer_page(stack, browser, f"/ui/cases/{agent.case_id}")
        assert await _rows(page) == [heat["proposalId"], wind["proposalId"], tidal["proposalId"]]
        await page.fill("form.queue-filters input[name=q]", "heat pumps")
        await page.click("form.queue-filters button[type=submit]")
        assert await _rows(page) == [heat["proposalId"]]
        assert "q=heat+pumps" in page.url
        assert await page.locator("#queue-total").inner_text() == "1 matches these filters"
        # THREADLINE_DOCS_SCREENSHOTS=1 refreshes the README's screenshots; other runs keep theirs private.
        shots = DOCS if os.environ.get("THREADLINE_DOCS_SCREENSHOTS") else tmp_path
        await page.locator("#queue").screenshot(path=str(shots / "review-queue.png"))
        await page.fill("form.queue-filters input[name=q]", "")
        await page.select_option("form.queue-filters select[name=kind]", "sources")
        await page.click("form.queue-filters button[type=submit]")
        assert await _rows(page) == [tidal["proposalId"]]
        await page.select_option("form.queue-filters select[name=kind]", "")
        await page.check("form.queue-filters input[name=duplicates]")
        await page.click("form.queue-filters button[type=submit]")
        assert await _rows(page) == [wind["proposalId"]]
        assert await page.locator("#queue-list .chip.warn", has_text="possible duplicate").count() == 1
        await page.select_option("form.queue-filters select[name=sort]", "newest")
        await page.uncheck("form.queue-filters input[name=duplicates]")
        await page.select_option("form.queue-filters select[name=kind]", "claims")
        await page.click("form.queue-filters button[type=submit]")
        assert await _rows(page) == [wind["proposalId"], heat["proposalId"]]
        await page.goto(f"{stack.http_url}/ui/cases/{agent.case_id}?kind=bogus")
        assert "kind" in await page.locator("#queue-problem").inner_text()

        # Two items decided by keys: accept the first (the page then moves on), reject the second, note, record.
        await page.goto(f"{stack.http_url}/ui/proposals/{heat['proposalId']}")
        assert await page.locator("#key-hints").is_visible()
        assert await page.locator("article.item.current h2").inner_text() == "heat-1"
        await page.keyboard.press("a")
        assert await page.locator("article.item.current h2").inner_text() == "heat-2"
        await page.keyboard.press("k")
        assert await page.locator("article.item.current h2").inner_text() == "heat-1"
        await page.keyboard.press("j")
        await page.keyboard.press("r")
        assert await page.is_checked("input[name='item:heat-1'][value=accept]")
        assert await page.is_checked("input[name='item:heat-2'][value=reject]")
        await page.keyboard.press("n")
        await page.keyboard.type("Bills are not emissions.")
        await page.keyboard.press("Control+Enter")
        await page.wait_for_url("**decision=*")
        banner = await page.locator("#outcome").inner_text()
        assert "Accepted: heat-1" in banner and "Rejected: heat-2" in banner

        # A duplicate of the record staging flagged: the box is prefilled, `d` chooses it.
        await page.goto(f"{stack.http_url}/ui/proposals/{wind['proposalId']}")
        beside = await page.locator("#duplicates-wind").inner_text()
        assert canonical in beside and f"Claim {canonical} holds." in beside  # what the record says, beside it
        assert await page.input_value("input[name='of:wind']") == canonical
        await page.screenshot(path=str(shots / "review-duplicate.png"), full_page=True)
        await page.keyboard.press("d")
        assert await page.is_checked("input[name='item:wind'][value=duplicate]")
        await page.keyboard.press("Control+Enter")
        await page.wait_for_url("**decision=*")
        assert "Rejected: wind" in await page.locator("#outcome").inner_text()
        assert f"duplicates the canonical claim {canonical}" in await page.locator("#decisions").inner_text()

        # The agent reads it, through its MCP tools.
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"]
        assert f"claim wind duplicates the canonical claim {canonical}" in guidance[0]["note"]

        # A duplicate chosen without naming the record is refused, naming what is missing.
        again = await agent.stage("stage_claims", claims=[claim_item("echo", [source], text="Echo.")])
        await page.goto(f"{stack.http_url}/ui/proposals/{again['proposalId']}")
        assert await page.input_value("input[name='of:echo']") == ""
        await page.keyboard.press("d")
        assert await page.evaluate("() => document.activeElement.name") == "of:echo"
        await page.keyboard.press("Escape")
        await page.keyboard.press("Control+Enter")
        await page.wait_for_load_state()
        assert "say which record 'echo' duplicates" in await page.locator("#problem").inner_text()

        # A queue longer than a page: 25 a page, the next page by its cursor, the filters kept.
        bulk = [(await agent.stage("stage_sources", sources=[source_item(f"bulk-{i}")]))["proposalId"]
                for i in range(26)]
        await page.goto(f"{stack.http_url}/ui/cases/{agent.case_id}?kind=sources&q=bulk")
        assert await _rows(page) == bulk[:25]
        await page.click("#queue-next")
        assert await _rows(page) == bulk[25:]
        assert "kind=sources" in page.url and "cursor=" in page.url
        assert await page.locator("#queue-next").count() == 0
        await page.click("text=First page")
        assert await _rows(page) == bulk[:25]
        await page.close()
