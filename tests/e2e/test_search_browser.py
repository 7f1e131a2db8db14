"""The case page's search in a real browser (Chromium): a reviewer types words of a claim (one misspelled) into
the case page's search box, reads the hits, pages on, follows a pending hit to its proposal, and sees the
possible duplicate flagged beside the item there, linked to the claim it resembles."""

from __future__ import annotations

import pytest

from tests.e2e.test_argument_map_browser import reviewer_page
from tests.e2e.test_review_ui import browser  # noqa: F401 - the module's Chromium fixture
from tests.events import wait_until_projected, wait_until_published
from tests.factories import agent_session, claim_item, seed

pytestmark = pytest.mark.browser


async def test_a_reviewer_searches_the_case_page_and_follows_a_duplicate(stack, browser):  # noqa: F811
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1, claims=12)  # "Claim … holds.": two pages of hits for "holds"
        text = "Copper smelting output in Chile reached 431.7 million tonnes in March 2024."
        await agent.accepted("stage_claims", claims=[claim_item("c-copper", made["sources"], text=text)])
        staged = await agent.stage("stage_claims", claims=[claim_item(
            "c-copper-again", made["sources"], text="copper smelting output in Chile reached 431.70 million tonnes "
                                                     "in March 2024")])
        assert staged["possibleDuplicates"][0]["of"]["id"] == "c-copper"
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)

    page = await reviewer_page(stack, browser, f"/ui/cases/{agent.case_id}")
    await page.fill("#search-q", "copper smeltnig Chile")  # one word misspelled
    await page.click("form.search button[type=submit]")
    await page.wait_for_selector("#search-results")
    assert [await r.get_attribute("data-id") for r in await page.query_selector_all("tr.hit")] == ["c-copper"]

    await page.select_option("form.search select[name=status]", "any")
    await page.click("form.search button[type=submit]")
    await page.wait_for_selector("#search-results")
    ids = [await r.get_attribute("data-id") for r in await page.query_selector_all("tr.hit")]
    assert set(ids) == {"c-copper", "c-copper-again"}

    await page.fill("#search-q", "holds")
    await page.select_option("form.search select[name=status]", "canonical")
    await page.click("form.search button[type=submit]")
    await page.wait_for_selector("#search-results")
    first = [await r.get_attribute("data-id") for r in await page.query_selector_all("tr.hit")]
    await page.click("a[rel=next]")
    await page.wait_for_selector("#search-results")
    second = [await r.get_attribute("data-id") for r in await page.query_selector_all("tr.hit")]
    assert len(first) == 10 and len(second) == 2 and set(first + second) == set(made["claims"])

    await page.fill("#search-q", "c-copper-again")
    await page.select_option("form.search select[name=status]", "pending")
    await page.click("form.search button[type=submit]")
    await page.click("tr.hit a[href^='/ui/proposals/']")
    duplicates = await page.wait_for_selector("#duplicates-c-copper-again")
    assert "c-copper" in await duplicates.inner_text()
    await page.click("#duplicates-c-copper-again a.mono")
    assert page.url.endswith(f"/ui/cases/{agent.case_id}/claims/c-copper")
    await page.context.close()
