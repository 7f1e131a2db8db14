"""The ledger read back in a real browser: a history entry opens the case as it stood then (its map included),
the case page lists what changed since a revision, and a claim's page tells its life."""

from __future__ import annotations

import os

import pytest

from tests.e2e.test_history_exports import history  # noqa: F401 - the module's case with a long history
from tests.e2e.test_review_ui import DOCS, browser  # noqa: F401 - the module's Chromium fixture

pytestmark = pytest.mark.browser


async def signed_in_page(stack, browser):  # noqa: F811
    page = await browser.new_page(viewport={"width": 1280, "height": 1000})
    await page.goto(f"{stack.http_url}/ui/signin")
    await page.fill("#token", stack.tokens["reviewer"])
    await page.click("button[type=submit]")
    return page


async def test_a_history_entry_opens_the_case_and_its_map_as_they_stood_then(stack, browser, history, tmp_path):  # noqa: F811
    case, marks = history
    page = await signed_in_page(stack, browser)
    await page.goto(f"{stack.http_url}/ui/cases/{case.case_id}/history")
    await page.click(f"#revision-{marks['first_verdict']} a.as-of")
    assert page.url.endswith(f"/ui/cases/{case.case_id}?asOf={marks['first_verdict']}")
    banner = await page.locator("#as-of").inner_text()
    assert f"revision {marks['first_verdict']}" in banner
    assert "v1" in await page.locator("#verdict").inner_text()
    drawn = {await a.get_attribute("data-node") for a in await page.locator("svg.argument-map a.map-node").all()}
    assert {"v1", "a", "b", "c", "d", "s1"} <= drawn and "v2" not in drawn
    assert await page.locator("#guidance").count() == 0  # about now, not about revision N
    await page.goto(f"{stack.http_url}/ui/cases/{case.case_id}")
    assert await page.locator("#as-of").count() == 0
    assert "v2" in await page.locator("#verdict").inner_text()


async def test_the_case_page_shows_the_changes_since_a_revision(stack, browser, history, tmp_path):  # noqa: F811
    case, marks = history
    page = await signed_in_page(stack, browser)
    await page.goto(f"{stack.http_url}/ui/cases/{case.case_id}")
    await page.fill("#since", str(marks["first_verdict"]))
    await page.click("#changes-since button")
    changes = page.locator("#changes")
    assert f"Changes since revision {marks['first_verdict']}" in await changes.locator("h2").inner_text()
    assert "v2" in await changes.locator(".changes-added").inner_text()
    retired = await changes.locator(".changes-retired").inner_text()
    assert "s1" in retired and "c" in retired
    assert "v1 by v2" in await changes.locator(".changes-superseded").inner_text()
    assert await changes.locator(".changes-decisions li").count() == 3
    shots = DOCS if os.environ.get("THREADLINE_DOCS_SCREENSHOTS") else tmp_path
    await changes.screenshot(path=str(shots / "changes-since.png"))


async def test_a_claims_page_shows_its_timeline_linked_to_each_revision(stack, browser, history, tmp_path):  # noqa: F811
    case, marks = history
    page = await signed_in_page(stack, browser)
    await page.goto(f"{stack.http_url}/ui/cases/{case.case_id}?asOf={marks['first_verdict']}")
    await page.click("#claim-c a.mono")
    assert page.url.endswith(f"/ui/cases/{case.case_id}/claims/c")
    events = [await e.get_attribute("class") for e in await page.locator("#timeline li").all()]
    assert events[:2] == ["event-staged", "event-accepted"]
    assert {"event-related", "event-grouped", "event-retired"} <= set(events)
    assert events[-1] in ("event-retired", "event-relation_ended", "event-group_ended")
    await page.locator("#timeline li.event-retired a").click()
    assert page.url.endswith(f"?asOf={marks['claim_retired']}")
    assert 'id="claim-c"' not in await page.content()  # retired by then
    shots = DOCS if os.environ.get("THREADLINE_DOCS_SCREENSHOTS") else tmp_path
    await page.go_back()
    await page.screenshot(path=str(shots / "claim-timeline.png"), full_page=True)
