"""The reviewers' queue at scale (filters, order by age, keyset paging), "a duplicate of X" decisions that reach
the agent's guidance naming X, and guidance that keeps reviewers' notes in reach however many gaps a case has."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
from sqlalchemy import insert, select, update

from services.projection.domain import MAX_CURSOR, PAGE_SIZE
from shared.db.tables import claims, decisions, item_decisions, possible_duplicates, proposal_items, proposals
from tests.e2e.test_review_cli import threadline
from tests.events import wait_until_projected, wait_until_published
from tests.factories import (
    NEXT_YEAR,
    Agent,
    agent_session,
    claim_item,
    decide,
    relation_item,
    seed,
    source_item,
    ui_sign_in,
    unique,
)


async def _queue(stack: Any, case_id: str, expect: int = 200, **params: Any) -> dict[str, Any]:
    async with stack.api("reviewer") as api:
        response = await api.get(f"/api/v1/cases/{case_id}/proposals", params=params)
    assert response.status_code == expect, response.text
    return response.json()


def _ids(listed: dict[str, Any]) -> list[str]:
    return [p["proposalId"] for p in listed["proposals"]]


async def _flag(stack: Any, proposal_id: str, item_id: str, of_id: str, of_status: str = "canonical",
                of_proposal: str | None = None) -> None:
    """A possible duplicate as staging records it, written here so that the queue's filter is tested apart from
    the similarity threshold (tests/e2e/test_search.py stages real restatements)."""
    async with stack.db.engine.begin() as connection:
        await connection.execute(insert(possible_duplicates).values(
            proposal_id=proposal_id, item_id=item_id, rank=0, of_kind="claim", of_id=of_id, of_status=of_status,
            of_proposal_id=of_proposal, similarity=0.91))


async def _second_agent(stack: Any, case_id: str):
    name = unique("other-agent")
    token = await stack.issue_token("agent", name, case_id=case_id)
    return name, token


async def test_the_queue_filters_by_kind_agent_words_and_possible_duplicates(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        sources = await agent.stage("stage_sources", sources=[source_item("tidal-gauge", title="Tidal gauge records")])
        heat = await agent.stage("stage_claims", claims=[claim_item("heat", [source], text="Heat pumps cut emissions.")])
        name, token = await _second_agent(stack, agent.case_id)
        async with stack.agent(token) as mcp:
            other = Agent(stack, agent.case_id, token, name, mcp)
            wind = await other.stage("stage_claims", claims=[claim_item("wind", [source], text="Wind output rose 40%.")])
        case = agent.case_id
        assert _ids(await _queue(stack, case)) == [sources["proposalId"], heat["proposalId"], wind["proposalId"]]
        assert _ids(await _queue(stack, case, kind="claims")) == [heat["proposalId"], wind["proposalId"]]
        assert _ids(await _queue(stack, case, kind="sources")) == [sources["proposalId"]]
        claims_only = await _queue(stack, case, kind="claims", limit=1)
        assert claims_only["total"] == 2 and len(claims_only["proposals"]) == 1 and claims_only["nextCursor"]
        assert (await _queue(stack, case, kind="claims", limit=1, cursor=claims_only["nextCursor"]))["total"] == 2
        assert _ids(await _queue(stack, case, agent=name)) == [wind["proposalId"]]
        assert _ids(await _queue(stack, case, agent=name, kind="sources")) == []
        # Words of the items' text, case-blind, each of them; SQL wildcards are taken literally.
        assert _ids(await _queue(stack, case, q="HEAT emissions")) == [heat["proposalId"]]
        assert _ids(await _queue(stack, case, q="tidal")) == [sources["proposalId"]]
        assert _ids(await _queue(stack, case, q="40%")) == [wind["proposalId"]]
        assert _ids(await _queue(stack, case, q="heat wind")) == []
        assert _ids(await _queue(stack, case, q="%")) == [wind["proposalId"]]
        assert _ids(await _queue(stack, case, q="wi_d")) == []
        assert _ids(await _queue(stack, case, q="'&|!:*()")) == []
        # Possible duplicates: only proposals staging flagged, each item carrying what it resembles.
        assert _ids(await _queue(stack, case, duplicates="true")) == []
        await _flag(stack, wind["proposalId"], "wind", "heat", "pending", heat["proposalId"])
        flagged = await _queue(stack, case, duplicates="true")
        assert _ids(flagged) == [heat["proposalId"], wind["proposalId"]]  # heat is restated by wind, both pending
        assert flagged["proposals"][0]["items"][0]["possibleDuplicates"] == [{
            "itemId": "heat", "similarity": 0.91, "restatedLater": True, "open": True, "of": {
                "kind": "claim", "id": "wind", "status": "pending", "proposalId": wind["proposalId"],
                "text": "Wind output rose 40%."}}]
        assert flagged["proposals"][1]["items"][0]["possibleDuplicates"][0] == {
            "itemId": "wind", "similarity": 0.91, "flaggedAs": "pending", "open": True, "of": {
                "kind": "claim", "id": "heat", "status": "pending", "proposalId": heat["proposalId"],
                "text": "Heat pumps cut emissions."}}
        async with stack.api("reviewer") as api:
            shown = (await api.get(f"/api/v1/proposals/{wind['proposalId']}")).json()
        assert shown["items"][0]["possibleDuplicates"][0]["of"]["id"] == "heat"
        # Filters apply to decided proposals too.
        await decide(stack, heat["proposalId"], reject=["heat"], note="Say which pumps.")
        assert _ids(await _queue(stack, case, status="rejected", kind="claims")) == [heat["proposalId"]]
        assert _ids(await _queue(stack, case, kind="claims")) == [wind["proposalId"]]
        for bad, field in (({"kind": "bogus"}, "kind"), ({"sort": "sideways"}, "sort"), ({"q": ""}, "q"),
                           ({"q": "x" * 201}, "q"), ({"agent": ""}, "agent"),
                           ({"q": " ".join(f"w{i}" for i in range(9))}, "q"), ({"q": "a\x00b"}, "q"),
                           ({"agent": "x\x00"}, "agent"), ({"cursor": "\x00"}, "cursor"), ({"limit": "0"}, "limit")):
            error = (await _queue(stack, case, 422, **bad))["error"]
            assert error["field"] == field, error


async def test_the_queue_shows_each_items_review_checks_by_name_and_severity(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[
            claim_item("soon", [source], kind="prediction", confidence="established",
                       text=f"The grid is fully decarbonised by {NEXT_YEAR}."),
            claim_item("calm", [source], text="Heat pump sales rose in 2023.")])
        listed = (await _queue(stack, agent.case_id))["proposals"]
        items = {i["itemId"]: i for p in listed if p["proposalId"] == staged["proposalId"] for i in p["items"]}
        assert [(c["check"], c["severity"]) for c in items["soon"]["reviewChecks"]] == [
            ("confidence-beyond-sources", "warning"), ("prediction-established", "warning")]
        assert items["calm"]["reviewChecks"] == []
        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
            page = (await http.get(f"/ui/cases/{agent.case_id}")).text
        row = re.search(rf'<tr data-proposal="{staged["proposalId"]}">(.*?)</tr>', page, re.S)[1]
        shown = re.findall(r'data-check="([^"]+)" title="[^"]+">([^<]+)</span>', row)
        assert shown == [("confidence-beyond-sources", "⚠ warning: confidence-beyond-sources"),
                         ("prediction-established", "⚠ warning: prediction-established")]
        assert row.index('data-check="prediction-established"') > row.index(">soon<")
        assert row.index('data-check="prediction-established"') < row.index(">calm<")  # beside its own item


async def test_the_queue_sorts_by_age_and_pages_by_a_stable_cursor(stack):
    async with agent_session(stack) as agent:
        staged = [(await agent.stage("stage_sources", sources=[source_item(f"page-{i}")]))["proposalId"]
                  for i in range(5)]
        case = agent.case_id
        assert _ids(await _queue(stack, case)) == staged
        assert _ids(await _queue(stack, case, sort="newest")) == staged[::-1]
        for sort, expected in (("oldest", staged), ("newest", staged[::-1])):
            seen, cursor, pages = [], None, 0
            while True:
                page = await _queue(stack, case, status="all", sort=sort, limit=2,
                                    **({"cursor": cursor} if cursor else {}))
                seen += _ids(page)
                pages += 1
                cursor = page["nextCursor"]
                if cursor is None:
                    break
                if sort == "oldest" and pages == 1:  # a decision between pages moves nothing: a key, not an offset
                    await decide(stack, staged[0], accept=["page-0"])
            assert pages == 3 and seen == expected, (sort, seen)
        assert _ids(await _queue(stack, case)) == staged[1:]
        first = await _queue(stack, case, status="all", limit=2)
        assert first["sort"] == "newest" and first["nextCursor"]
        error = (await _queue(stack, case, 422, status="all", limit=2, kind="claims",
                              cursor=first["nextCursor"]))["error"]
        assert error["field"] == "cursor" and "filters" in error["message"]
        for garbage in ("nonsense", "W10", "eyJhIjoxfQ", "!!!"):
            assert (await _queue(stack, case, 422, cursor=garbage))["error"]["field"] == "cursor"


async def _decide_raw(stack: Any, proposal_id: str, body: dict[str, Any]) -> Any:
    async with stack.api("reviewer") as api:
        if "expectedRevision" not in body:
            shown = (await api.get(f"/api/v1/proposals/{proposal_id}")).json()
            body = {**body, "expectedRevision": shown["caseRevision"]}
        return await api.post(f"/api/v1/proposals/{proposal_id}/decisions", json=body)


async def test_a_duplicate_of_x_rejection_reaches_the_agents_guidance_naming_x(stack):
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=1)
        canonical = ids["claims"][0]
        staged = await agent.stage("stage_claims", claims=[
            claim_item("again", ids["sources"], text=f"Claim {canonical} holds, restated."),
            claim_item("fresh", ids["sources"], text="Something new.")])
        pending = await agent.stage("stage_claims", claims=[claim_item("later", ids["sources"])])
        body = {"accept": ["fresh"], "duplicates": [{"itemId": "again", "of": canonical}],
                "note": "Cite the claim that exists."}
        response = await _decide_raw(stack, staged["proposalId"], body)
        assert response.status_code == 200, response.text
        outcome = response.json()
        assert outcome["accepted"] == ["fresh"] and outcome["rejected"] == ["again"]
        # Repeated as it was sent: the same decision back, nothing decided twice.
        repeat = await _decide_raw(stack, staged["proposalId"], {**body, "expectedRevision": outcome["revision"] - 1})
        assert repeat.status_code == 200 and repeat.json()["decisionId"] == outcome["decisionId"]
        assert repeat.json()["replayed"] is True
        # The agent reads, through its MCP tools, which record its item restated.
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"]
        note = next(e for e in guidance if e["type"] == "decision_note" and e["rejected"] == ["again"])
        assert f"claim again duplicates the canonical claim {canonical}" in note["note"]
        assert "Cite the claim that exists." in note["note"]
        # A pending claim of another proposal can be the record duplicated, too.
        other = await agent.stage("stage_claims", claims=[claim_item("twin", ids["sources"])])
        response = await _decide_raw(stack, other["proposalId"], {"duplicates": [{"itemId": "twin", "of": "later"}]})
        assert response.status_code == 200, response.text
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"]
        assert guidance[0]["note"].count("claim twin duplicates the pending claim later") == 1
        assert pending["proposalId"]


async def test_bad_duplicates_are_refused_naming_the_field(stack):
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=2)
        a, b = ids["claims"]
        staged = await agent.stage("stage_claims", claims=[claim_item("dup", ids["sources"]),
                                                           claim_item("other", ids["sources"])])
        relations = await agent.stage("stage_relations", relations=[relation_item("rel", a, b)])
        cases = [
            ({"duplicates": [{"itemId": "dup", "of": "no-such-claim"}]}, "duplicates[0].of"),
            ({"duplicates": [{"itemId": "dup", "of": ids["sources"][0]}]}, "duplicates[0].of"),  # a source, not a claim
            ({"duplicates": [{"itemId": "dup", "of": "dup"}]}, "duplicates[0].of"),
            ({"duplicates": [{"itemId": "ghost", "of": a}]}, "duplicates[0].itemId"),
            ({"duplicates": [{"itemId": "dup", "of": a}, {"itemId": "dup", "of": b}]}, "duplicates[1].itemId"),
            ({"accept": ["dup"], "duplicates": [{"itemId": "dup", "of": a}]}, "duplicates[0].itemId"),
            ({"reject": ["dup"], "duplicates": [{"itemId": "dup", "of": a}]}, "duplicates[0].itemId"),
            ({"duplicates": [{"itemId": "dup"}]}, "duplicates[0].of"),
            ({"duplicates": [{"itemId": "dup", "of": ""}]}, "duplicates[0].of"),
            ({"duplicates": "dup"}, "duplicates"),
        ]
        for body, field in cases:
            response = await _decide_raw(stack, staged["proposalId"], body)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["error"]["field"] == field, (body, response.json())
        response = await _decide_raw(stack, relations["proposalId"], {"duplicates": [{"itemId": "rel", "of": a}]})
        assert response.status_code == 422 and response.json()["error"]["field"] == "duplicates[0].itemId"
        # A retired claim is no longer canonical: not a record to be a duplicate of.
        async with stack.api("reviewer") as api:
            retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements",
                                     json={"records": [{"record": "claim", "id": b}], "note": "Withdrawn."})
            assert retired.status_code == 200, retired.text
        response = await _decide_raw(stack, staged["proposalId"], {"duplicates": [{"itemId": "dup", "of": b}]})
        assert response.status_code == 422 and "retired" in response.json()["error"]["message"]
        async with stack.api("reviewer") as api:
            shown = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
        assert shown["status"] == "pending" and shown["decisions"] == []


async def test_reviewer_notes_stay_on_the_first_guidance_page_however_many_gaps(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        claim_ids = [f"open-{i}" for i in range(40)]
        for start in range(0, len(claim_ids), 4):
            await agent.accepted("stage_claims", claims=[claim_item(c, [source], confidence="disputed")
                                                          for c in claim_ids[start:start + 4]])
        rejected = await agent.stage("stage_sources", sources=[source_item("rumour", type="social")])
        await decide(stack, rejected["proposalId"], reject=["rumour"], note="Rumours are not sources.")
        unresolved = (await agent.ok("get_workspace", {"scope": "unresolved"}))["unresolved"]
        assert unresolved["total"] > 40
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]
        notes = [e for e in guidance["items"] if e["type"] == "decision_note"]
        assert len(notes) == 1 and "Rumours are not sources." in notes[0]["note"]
        summary = guidance["items"][-1]
        assert summary["type"] == "gaps" and summary["total"] == unresolved["total"]
        assert sum(summary["byKind"].values()) == unresolved["total"]
        assert len(summary["first"]) == 5 and summary["inspect"]["tool"] == "inspect_claims"
        assert summary["inspect"]["arguments"]["claimIds"] == [g["claimId"] for g in summary["first"] if "claimId" in g]
        listed = {kind: ids for kind, ids in summary["claimsByKind"].items()}
        assert listed and all(0 < len(ids) <= 5 and set(ids) <= set(claim_ids) for ids in listed.values())
        assert all(len(ids) == min(5, summary["byKind"][kind]) for kind, ids in listed.items())
        assert guidance["total"] == len(guidance["items"]) and guidance["nextCursor"] is None
        assert guidance["omitted"] == 0


async def _noted_rejections(stack: Any, case_id: str, agent: str, count: int) -> None:
    """`count` proposals of `agent`, each rejected with a note, written as staging and review store them, so that
    the notes of a busy case are had in a moment (guidance reads these tables as they are)."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    now = datetime.now(UTC)
    async with stack.db.engine.begin() as connection:
        await connection.execute(insert(proposals), [
            {"proposal_id": p, "case_id": case_id, "kind": "sources", "pinned_revision": 0, "agent_name": agent,
             "item_count": 1} for p in ids])
        await connection.execute(insert(proposal_items), [
            {"proposal_id": p, "item_id": f"busy-{i}", "position": 0, "payload": {}} for i, p in enumerate(ids)])
        await connection.execute(insert(decisions), [
            {"decision_id": p, "proposal_id": p, "case_id": case_id, "reviewer": "reviewer",
             "note": f"Not this one ({i}).", "decided_at": now + timedelta(seconds=i)} for i, p in enumerate(ids)])
        await connection.execute(insert(item_decisions), [
            {"proposal_id": p, "item_id": f"busy-{i}", "decision_id": p, "outcome": "rejected"}
            for i, p in enumerate(ids)])


async def test_an_agents_own_duplicate_note_is_on_its_first_guidance_page_however_many_other_notes(stack):
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=1)
        canonical = ids["claims"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("again", ids["sources"])])
        response = await _decide_raw(stack, staged["proposalId"], {"duplicates": [{"itemId": "again", "of": canonical}]})
        assert response.status_code == 200, response.text
        others = MAX_CURSOR + 2 * PAGE_SIZE  # more notes than every page a cursor reaches holds
        await _noted_rejections(stack, agent.case_id, unique("other-agent"), others)
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]
        assert guidance["total"] > MAX_CURSOR + PAGE_SIZE
        mine = guidance["items"][0]
        assert mine["agent"] == agent.name and mine["rejected"] == ["again"]
        assert f"claim again duplicates the canonical claim {canonical}" in mine["note"]
        assert [e["note"] for e in guidance["items"][1:4]] == [f"Not this one ({i})." for i in (others - 1, others - 2,
                                                                                               others - 3)]


async def test_every_note_of_a_busy_agent_and_the_gaps_summary_are_within_reach_of_its_guidance(stack):
    """More notes on an agent's own proposals than the pages a cursor reaches (96 is its bound) hold: the gaps
    summary is on the first page and takes no note's place, and the last page carries one entry of the older notes
    naming how many, their proposals and what they say."""
    async with agent_session(stack) as agent:
        count = MAX_CURSOR + PAGE_SIZE + 2
        await _noted_rejections(stack, agent.case_id, agent.name, count)
        pages, arguments = [], {"scope": "guidance"}
        while True:
            page = (await agent.ok("get_workspace", arguments))["guidance"]
            pages.append(page)
            if page["nextCursor"] is None:
                break
            arguments = page["next"]["arguments"]
        first, last = pages[0], pages[-1]
        assert first["items"][-1]["type"] == "gaps" and first["items"][-1]["byKind"] == {"missing_verdict": 1}
        assert first["total"] == count + 1 and last["offset"] == MAX_CURSOR
        notes = [e["note"] for page in pages for e in page["items"] if e["type"] == "decision_note"]
        assert notes == [f"Not this one ({i})." for i in range(count - 1, 1, -1)]  # 108, newest first, none pushed
        older = last["items"][-1]
        assert older["type"] == "older_notes" and older["total"] == 2 and last["omitted"] == 2
        assert older["notes"] == [{"note": "Not this one (1).", "count": 1}, {"note": "Not this one (0).", "count": 1}]
        async with stack.db.engine.connect() as connection:
            on = dict((await connection.execute(select(decisions.c.note, decisions.c.proposal_id).where(
                decisions.c.case_id == agent.case_id))).all())
        assert older["proposalIds"] == [str(on["Not this one (1)."]), str(on["Not this one (0)."])]
        assert older["rejected"] == 2 and older["proposalsOmitted"] == 0


async def test_the_calls_the_gaps_summary_suggests_run_as_given(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        await agent.accepted("stage_claims", claims=[claim_item("shaky", [source], confidence="disputed")])
        summary = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"][-1]
        assert summary["type"] == "gaps" and "shaky" in summary["inspect"]["arguments"]["claimIds"]
        listed = await agent.ok(summary["next"]["tool"], summary["next"]["arguments"])
        assert "shaky" in [h["id"] for h in listed["hits"]]
        read = await agent.ok(summary["inspect"]["tool"], summary["inspect"]["arguments"])
        assert [c["id"] for c in read["claims"]] == summary["inspect"]["arguments"]["claimIds"]


async def test_when_no_claim_has_a_gap_the_gaps_summary_suggests_the_call_that_says_what_to_do(stack):
    async with agent_session(stack) as agent:
        await seed(agent, sources=1, claims=1)
        summary = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"][-1]
        assert summary["type"] == "gaps" and summary["byKind"] == {"missing_verdict": 1}
        assert summary["next"] == {"tool": "get_workspace", "arguments": {"scope": "unresolved"}}
        assert "search_workspace" not in summary["note"] and "no claim has a gap" in summary["note"]
        answered = await agent.ok(summary["next"]["tool"], summary["next"]["arguments"])
        assert [i["type"] for i in answered["unresolved"]["items"]] == ["missing_verdict"]


async def test_possible_duplicates_follow_the_decisions_made_since_staging_in_both_directions(stack):
    """x-second restates x-first, staged while it was pending; y-second restates y-first. Once x-first is rejected,
    x-second is no possible duplicate in the queue, its page shows x-first as rejected since and offers nothing; y-first,
    staged first, shows its later restatement, and its page and y-second's offer each other."""
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        said = {"x": "Copper output at the Kamoa mine rose by a third in 2023, the operator's report says.",
                "y": "Cobalt exports from the Katanga province halved between 2019 and 2022, customs data show."}
        first = {k: await agent.stage("stage_claims", claims=[claim_item(f"{k}-first", [source], text=text)])
                 for k, text in said.items()}
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)  # pending items are compared once indexed
        name, token = await _second_agent(stack, agent.case_id)
        async with stack.agent(token) as mcp:
            other = Agent(stack, agent.case_id, token, name, mcp)
            second = {k: await other.stage("stage_claims", claims=[claim_item(f"{k}-second", [source], text=text)])
                      for k, text in said.items()}
        for k in said:
            assert [(f["of"]["id"], f["of"]["status"]) for f in second[k]["possibleDuplicates"]] == [
                (f"{k}-first", "pending")]
        await decide(stack, first["x"]["proposalId"], reject=["x-first"], note="Which operator?")

        async with stack.api("reviewer") as api:
            shown = {(k, n): (await api.get(f"/api/v1/proposals/{staged[k]['proposalId']}")).json()["items"][0]
                     for n, staged in (("first", first), ("second", second)) for k in said}
        assert [(f["of"]["id"], f["of"]["status"], f["open"]) for f in shown["x", "second"]["possibleDuplicates"]] == [
            ("x-first", "rejected", False)]
        assert [(f["of"]["id"], f["of"]["status"], f["of"]["proposalId"], f.get("restatedLater"), f["open"])
                for f in shown["y", "first"]["possibleDuplicates"]] == [
            ("y-second", "pending", second["y"]["proposalId"], True, True)]
        assert shown["y", "first"]["possibleDuplicates"][0]["of"]["text"] == said["y"]
        assert shown["x", "first"]["possibleDuplicates"] == []  # rejected: x-second restates nothing pending
        flagged = _ids(await _queue(stack, agent.case_id, duplicates="true"))
        assert flagged == [first["y"]["proposalId"], second["y"]["proposalId"]]

        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
            pages = {k: {n: (await http.get(f"/ui/proposals/{staged[k]['proposalId']}")).text
                         for n, staged in (("first", first), ("second", second))} for k in said}
            queue = (await http.get(f"/ui/cases/{agent.case_id}")).text
        offered = re.compile(r'<input type="text" class="duplicate-of" name="of:([a-z-]+)" value="([^"]*)"')
        assert offered.findall(pages["x"]["second"]) == [("x-second", "")]
        assert re.search(r'>x-first</a>\s*<span class="muted">, since rejected</span>', pages["x"]["second"])
        assert '<option value="x-first">' not in pages["x"]["second"]
        assert offered.findall(pages["y"]["second"]) == [("y-second", "y-first")]
        assert offered.findall(pages["y"]["first"]) == [("y-first", "y-second")]
        assert "restated later by claim" in pages["y"]["first"]
        row = re.search(rf'<tr data-proposal="{second["x"]["proposalId"]}">(.*?)</tr>', queue, re.S)[1]
        assert "possible duplicate" not in row
        row = re.search(rf'<tr data-proposal="{first["y"]["proposalId"]}">(.*?)</tr>', queue, re.S)[1]
        assert 'title="possible duplicate of y-second"' in row


async def test_a_possible_duplicate_of_a_claim_retired_in_its_case_is_closed_whatever_other_cases_hold(stack):
    """Two cases hold a claim of the same id; retired in the first, it is no open duplicate there, though active in
    the second: the queue leaves the proposal out, and its item's match says it is not open, as the CLI shows."""
    shared_id = unique("shared")
    async with agent_session(stack) as other:
        source = (await seed(other, sources=1))["sources"][0]
        await other.accepted("stage_claims", claims=[claim_item(shared_id, [source])])
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        await agent.accepted("stage_claims", claims=[claim_item(shared_id, [source])])
        staged = await agent.stage("stage_claims", claims=[claim_item("again", [source], text="Said once more.")])
        await _flag(stack, staged["proposalId"], "again", shared_id)
        assert _ids(await _queue(stack, agent.case_id, duplicates="true")) == [staged["proposalId"]]
        async with stack.db.engine.begin() as connection:  # retired as the ledger retires, without a retiring flow
            await connection.execute(update(claims).where(claims.c.case_id == agent.case_id,
                                                          claims.c.claim_id == shared_id).values(status="retired"))
        assert _ids(await _queue(stack, agent.case_id, duplicates="true")) == []
        (item,) = (await _queue(stack, agent.case_id))["proposals"][0]["items"]
        assert [(f["of"]["id"], f["of"]["status"], f["open"]) for f in item["possibleDuplicates"]] == [
            (shared_id, "retired", False)]
        shown = await asyncio.to_thread(threadline, "show", staged["proposalId"], stack=stack)
        assert f"resembles claim {shared_id}, since retired" in shown.stdout, shown.stdout + shown.stderr


async def test_the_review_cli_filters_pages_and_rejects_as_a_duplicate(stack):
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=1)
        canonical = ids["claims"][0]
        texts = ["Glaciers retreated along the northern coast.", "Wind farms doubled their output last winter.",
                 "Rainfall fell sharply across the valley in June."]  # unlike each other: staging flags none
        staged = [await agent.stage("stage_claims", claims=[claim_item(f"cli-{i}", ids["sources"], text=text)])
                  for i, text in enumerate(texts)]
        await _flag(stack, staged[1]["proposalId"], "cli-1", canonical)

        def cli(*args: str):
            return threadline(*args, stack=stack)

        first = await asyncio.to_thread(cli, "list", "--case", agent.case_id, "--kind", "claims", "--sort", "newest")
        assert first.returncode == 0, first.stderr + first.stdout
        listed = json.loads((await asyncio.to_thread(cli, "list", "--case", agent.case_id, "--text", "rainfall june",
                                                     "--json")).stdout)
        assert _ids(listed) == [staged[2]["proposalId"]]
        flagged = json.loads((await asyncio.to_thread(cli, "list", "--case", agent.case_id, "--duplicates",
                                                      "--json")).stdout)
        assert _ids(flagged) == [staged[1]["proposalId"]]
        assert [f["open"] for f in flagged["proposals"][0]["items"][0]["possibleDuplicates"]] == [True]
        shown = await asyncio.to_thread(cli, "show", staged[1]["proposalId"])
        assert f"possible duplicate of canonical claim {canonical}" in shown.stdout
        refused = await asyncio.to_thread(cli, "duplicate", staged[1]["proposalId"], "cli-1", "--of", "nothing")
        assert refused.returncode == 1 and "'nothing' is neither canonical nor pending" in refused.stderr, refused.stderr
        assert "error (invalid_argument): --of: the claim 'nothing'" in refused.stderr, refused.stderr  # the option typed
        assert "duplicates[0]" not in refused.stderr, refused.stderr
        assert refused.stdout == ""  # a refusal never lands in what a script reads
        done = await asyncio.to_thread(cli, "duplicate", staged[1]["proposalId"], "cli-1", "--of", canonical,
                                       "--note", "Cite it instead.")
        assert done.returncode == 0 and f"as a duplicate of {canonical}" in done.stdout, done.stdout + done.stderr
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]["items"]
        assert f"claim cli-1 duplicates the canonical claim {canonical}" in guidance[0]["note"]
