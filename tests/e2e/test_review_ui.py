"""A reviewer in a real browser (headless Chromium via Playwright) decides a proposal item by item."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.factories import agent_session, claim_item, seed

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("THREADLINE_CHROMIUM", "/usr/bin/chromium")
DOCS = Path(__file__).resolve().parents[2] / "docs"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2"> Heat pumps <b>work</b>.'


@pytest.fixture(scope="module")
async def browser():
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium package (CI's .ci/run does)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )
        yield launched
        await launched.close()


async def test_a_reviewer_accepts_one_item_and_rejects_another_in_the_browser(stack, browser, tmp_path):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[
            claim_item("hostile-claim", [source], text=HOSTILE[:240]),
            claim_item("weak-claim", [source], confidence="unknown", text="Heat pumps always pay for themselves."),
        ])
        start = await agent.revision()

        page = await browser.new_page(viewport={"width": 1200, "height": 900})
        await page.goto(f"{stack.http_url}/ui")
        assert "/ui/signin" in page.url
        await page.fill("#token", stack.tokens["reviewer"])
        await page.click("button[type=submit]")
        await page.click(f"a[href='/ui/cases/{agent.case_id}']")
        assert await page.locator("text=Pending proposals").count() == 1
        await page.click(f"a[href='/ui/proposals/{staged['proposalId']}']")

        hostile_item = page.locator("#item-hostile-claim")
        assert HOSTILE[:60] in await hostile_item.inner_text()  # shown as text, markup and all
        assert await page.evaluate("window.__pwned") is None
        assert await page.locator("#item-hostile-claim script").count() == 0

        await page.check("input[name='item:hostile-claim'][value=accept]")
        await page.check("input[name='item:weak-claim'][value=reject]")
        await page.fill("#note", "weak-claim needs a primary source for 'always'.")
        # THREADLINE_DOCS_SCREENSHOTS=1 refreshes the README's screenshot; other runs keep theirs private.
        shots = DOCS if os.environ.get("THREADLINE_DOCS_SCREENSHOTS") else tmp_path
        shots.mkdir(exist_ok=True)
        await page.screenshot(path=str(shots / "review-proposal.png"), full_page=True)
        await page.click("button:has-text('Record decision')")

        outcome = await page.locator("#outcome").inner_text()
        assert "revision" in outcome and "hostile-claim" in outcome and "weak-claim" in outcome
        assert await page.evaluate("window.__pwned") is None

        workspace = await agent.ok("get_workspace", {"scope": "all"})
        assert workspace["workspaceRevision"] == start + 1
        assert [c["claimId"] for c in workspace["claims"]["items"]] == ["hostile-claim"]
        note = next(e for e in workspace["guidance"]["items"] if e["type"] == "decision_note")
        assert note["note"] == "weak-claim needs a primary source for 'always'."
        assert note["accepted"] == ["hostile-claim"] and note["rejected"] == ["weak-claim"]

        await page.goto(f"{stack.http_url}/ui/cases/{agent.case_id}")
        assert HOSTILE[:60] in await page.locator("li.claim").first.inner_text()
        assert await page.evaluate("window.__pwned") is None
        await page.close()


async def test_the_ui_refuses_agents_and_forged_forms(stack, browser):
    page = await browser.new_page()
    await page.goto(f"{stack.http_url}/ui/signin")
    await page.fill("#token", stack.tokens["agent"])
    await page.click("button[type=submit]")
    assert "Agent tokens cannot review" in await page.content()
    await page.close()
    async with stack.api("reviewer") as api:
        api.cookies.set("threadline_session", stack.tokens["reviewer"], path="/ui")
        forged = await api.post("/ui/proposals/00000000-0000-4000-8000-000000000000/decide",
                                data={"item:x": "accept", "csrf": "guessed"})
        assert forged.status_code == 403


async def test_reviewers_write_case_guidance_on_the_case_page(stack, browser):
    async with agent_session(stack) as agent:
        page = await browser.new_page()
        await page.goto(f"{stack.http_url}/ui/signin")
        await page.fill("#token", stack.tokens["reviewer"])
        await page.click("button[type=submit]")
        await page.goto(f"{stack.http_url}/ui/cases/{agent.case_id}")
        await page.fill("#guidance-text", "Weight measured data over <models>.")
        await page.click("button:has-text('Add guidance')")
        assert "Weight measured data over <models>." in await page.locator("#guidance").inner_text()
        await page.close()
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"]
        assert guidance[0] == guidance[0] | {"type": "case_guidance", "note": "Weight measured data over <models>.",
                                             "reviewer": "reviewer"}
