"""A reviewer's note on a retirement and on a prediction's resolution reaches the agent that staged the record,
through the real MCP client: first in its guidance however many other agents' notes there are, and in
inspect_sources / inspect_claims; every other agent reaches it too, on a page or in the older notes' summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2

from services.projection.domain import MAX_CURSOR, PAGE_SIZE
from tests.e2e.test_review_queue import _noted_rejections
from tests.factories import NEXT_YEAR, Agent, agent_session, claim_item, source_item, ui_sign_in, unique

BAD_SOURCE = "bad source: the press release misquotes the study"
WRONG = "Resolved false: the grid outlook keeps gas plants on past the date."


async def _retire(stack: Any, case_id: str, records: list[tuple[str, str]], note: str) -> dict[str, Any]:
    async with stack.api("reviewer") as api:
        response = await api.post(f"/api/v1/cases/{case_id}/retirements",
                                  json={"records": [{"record": r, "id": i} for r, i in records], "note": note})
    assert response.status_code == 200, response.text
    return response.json()


async def _resolve(stack: Any, case_id: str, claim_id: str, source_id: str, note: str | None) -> dict[str, Any]:
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    body = {"claimId": claim_id, "outcome": "false", "sourceId": source_id, "resolvedOn": yesterday,
            **({"note": note} if note else {})}
    async with stack.api("reviewer") as api:
        response = await api.post(f"/api/v1/cases/{case_id}/resolutions", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def _every_page(agent: Agent) -> list[dict[str, Any]]:
    pages, arguments = [], {"scope": "guidance"}
    while True:
        page = (await agent.ok("get_workspace", arguments))["guidance"]
        pages.append(page)
        if page["nextCursor"] is None:
            return pages
        arguments = page["next"]["arguments"]


async def test_a_retired_sources_note_reaches_the_agent_that_staged_it_first_in_guidance_and_in_inspect(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("press-release", type="reporting"),
                                                       source_item("agency-data")])
        await agent.accepted("stage_claims", claims=[claim_item("quoted", ["press-release", "agency-data"])])
        retired = await _retire(stack, agent.case_id, [("source", "press-release")], BAD_SOURCE)
        # Many other agents' notes, all newer than the retirement: more than every page a cursor reaches holds.
        others = MAX_CURSOR + 2 * PAGE_SIZE
        await _noted_rejections(stack, agent.case_id, unique("other-agent"), others)

        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]
        mine = guidance["items"][0]
        assert mine["type"] == "retirement_note" and mine["note"] == BAD_SOURCE
        assert mine["reviewer"] == "reviewer" and mine["revision"] == retired["revision"]
        assert mine["records"] == [{"record": "source", "id": "press-release", "stagedBy": agent.name}]
        assert mine["yours"] == ["press-release"] and mine["alsoEnded"] == [] and mine["alsoEndedOmitted"] == 0
        assert guidance["items"][1]["note"] == f"Not this one ({others - 1})."  # then the others, newest first
        gaps = 1 if any(e["type"] == "gaps" for e in guidance["items"]) else 0
        assert guidance["total"] == others + 1 + gaps

        read = await agent.ok("inspect_sources", {"expectedCaseId": agent.case_id,
                                                  "sourceIds": ["press-release", "agency-data"]})
        gone, kept = read["records"]
        assert gone["status"] == "retired" and "retirement" not in kept
        assert {k: gone["retirement"][k] for k in ("revision", "by", "note")} == {
            "revision": retired["revision"], "by": "reviewer", "note": BAD_SOURCE}
        assert datetime.fromisoformat(gone["retirement"]["at"]) <= datetime.now(UTC)
        # The note is framed as untrusted text, as guidance's notes are.
        raw = (await agent.call("inspect_sources", {"expectedCaseId": agent.case_id,
                                                    "sourceIds": ["press-release"]})).structured_content
        assert raw["records"][0]["retirement"]["note"].startswith("<<<BEGIN UNTRUSTED TEXT nonce=")
        assert raw["untrusted"]["nonce"] in raw["records"][0]["retirement"]["note"]

        # Staging the retired source's URL again under a new id is flagged, pointing to the note.
        again = await agent.stage("stage_sources", sources=[source_item(
            "press-release-2", type="reporting", url="https://example.org/press-release")])
        assert [(c["itemId"], c["check"]) for c in again["reviewChecks"]] == [("press-release-2", "source-url-retired")]
        assert "source press-release with this URL was retired" in again["reviewChecks"][0]["message"]

        # Another agent on the case reaches the same note: past the pages a cursor reaches, in the older notes'
        # summary, which names the record and the call that reads its note.
        token = await stack.issue_token("agent", unique("bystander"), case_id=agent.case_id)
        async with stack.agent(token) as mcp:
            bystander = Agent(stack, agent.case_id, token, "bystander", mcp)
            pages = await _every_page(bystander)
            listed = [e for page in pages for e in page["items"] if e["type"] == "retirement_note"]
            older = pages[-1]["items"][-1]
            assert listed == [] and older["type"] == "older_notes"
            assert older["retirements"] == 1 and older["retiredRecords"] == [{"record": "source", "id": "press-release"}]
            shown = sum(1 for page in pages for e in page["items"] if e["type"] not in ("gaps", "older_notes"))
            assert shown + older["total"] == others + 1  # every note on a page or in the summary, once
            call = next(c for c in older["inspect"] if c["tool"] == "inspect_sources")
            again = await bystander.ok(call["tool"], call["arguments"])
            assert again["records"][0]["retirement"]["note"] == BAD_SOURCE


async def test_a_predictions_resolution_and_a_retired_claims_note_reach_the_agent_that_staged_them(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("grid-outlook")])
        await agent.accepted("stage_claims", claims=[
            claim_item("gas-gone", ["grid-outlook"], kind="prediction",
                       text=f"Gas plants leave the winter grid by {NEXT_YEAR}."),
            claim_item("restated", ["grid-outlook"]), claim_item("original", ["grid-outlook"])])
        resolved = await _resolve(stack, agent.case_id, "gas-gone", "grid-outlook", WRONG)
        retired = await _retire(stack, agent.case_id, [("claim", "restated")], "Restates original; keep one.")
        # The case page lists them with the guidance reviewers read, saying what each retired or resolved.
        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
            page = (await http.get(f"/ui/cases/{agent.case_id}")).text
        guidance = page[page.index('id="guidance"'):]
        assert "Restates original; keep one." in guidance and 'retiring claim <span class="mono">restated</span>' in guidance
        assert WRONG in guidance and '/claims/gas-gone">gas-gone</a> false' in guidance
        await _noted_rejections(stack, agent.case_id, unique("other-agent"), PAGE_SIZE * 2)

        items = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"]
        assert [e["type"] for e in items[:2]] == ["retirement_note", "resolution_note"]  # its own, newest first
        resolution = items[1]
        assert {k: resolution[k] for k in ("claimId", "outcome", "sourceId", "note", "reviewer", "agent", "revision")} \
            == {"claimId": "gas-gone", "outcome": "false", "sourceId": "grid-outlook", "note": WRONG,
                "reviewer": "reviewer", "agent": agent.name, "revision": resolved["revision"]}
        assert resolution["resolvedOn"] == resolved["resolved"]["resolvedOn"]
        assert items[0]["yours"] == ["restated"] and items[0]["revision"] == retired["revision"]

        claims = (await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id,
                                                    "claimIds": ["gas-gone", "restated", "original"]}))["claims"]
        prediction, gone, kept = claims
        assert [(r["outcome"], r["note"], r["resolvedBy"], r["revision"]) for r in prediction["resolutions"]] == [
            ("false", WRONG, "reviewer", resolved["revision"])]
        assert prediction["resolutionsOmitted"] == 0 and "retirement" not in prediction
        assert gone["status"] == "retired" and gone["retirement"]["note"] == "Restates original; keep one."
        assert gone["retirement"]["by"] == "reviewer" and gone["retirement"]["revision"] == retired["revision"]
        assert "retirement" not in kept and "resolutions" not in kept

