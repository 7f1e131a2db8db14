"""Search through the real MCP client and the HTTP API: every canonical claim of a large case reachable,
ids then words then similar spellings, filters and pages, possible duplicates at staging and beside each
proposal item, and bad input answered by a refusal naming the field or a correct empty page."""

from __future__ import annotations

import html
import re
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from sqlalchemy import select

from services.cli.bench.search_corpus import claims
from services.cli.bench.search_fill import CLAIMS_PER_SOURCE, fill_case
from services.projection.domain import MAX_CURSOR, PAGE_SIZE
from shared.db.view_tables import view_unresolved
from tests.events import wait_until_projected, wait_until_published
from tests.factories import (
    Agent,
    agent_session,
    claim_item,
    decide,
    merge_item,
    relation_item,
    seed,
    source_item,
    ui_sign_in,
    unique,
)


@asynccontextmanager
async def agent_on(stack, case_id: str):
    name = unique("agent")
    token = await stack.issue_token("agent", name, case_id=case_id)
    async with stack.agent(token) as mcp:
        agent = Agent(stack, case_id, token, name, mcp)
        await agent.revision()  # discover the case
        yield agent


async def test_an_agent_reaches_every_canonical_claim_of_a_case_of_3000_by_paging_search(stack):
    case_id = unique("big")
    made = claims(3000, seed=11, prefix="c")
    await fill_case(stack.db, case_id, made)
    async with agent_on(stack, case_id) as agent:
        hits = await _every_page(agent, {"expectedCaseId": case_id, "query": "*", "kinds": ["claim"]})
        assert len(hits) == 3000
        assert all(h["kind"] == "claim" and h["status"] == "canonical" and h["match"] == "all" for h in hits)
        seen = [h["id"] for h in hits]
        assert sorted(seen) == sorted(c.claim_id for c in made) and len(seen) == len(set(seen))

        # By four of its words, a claim is first; by a misspelled form, found among the first three.
        target = made[1234]
        words = [w for w in target.text.replace(",", " ").split() if len(w) > 4][:4]
        found = await agent.ok("search_workspace", {"expectedCaseId": case_id, "query": " ".join(words)})
        assert target.claim_id in [h["id"] for h in found["hits"][:3]] and found["hits"][0]["match"] == "text"
        longest = max((w for w in words if w.isalpha()), key=len)
        typo = longest[0] + longest[2] + longest[1] + longest[3:]
        fuzzy = await agent.ok("search_workspace", {"expectedCaseId": case_id,
                                                    "query": " ".join(typo if w == longest else w for w in words)})
        assert target.claim_id in [h["id"] for h in fuzzy["hits"][:3]]
        assert {h["match"] for h in fuzzy["hits"]} <= {"text", "fuzzy"}

        # An exact id comes first, and inspect_claims reads it in full.
        exact = await agent.ok("search_workspace", {"expectedCaseId": case_id, "query": target.claim_id})
        assert exact["hits"][0] == {**exact["hits"][0], "id": target.claim_id, "match": "id"}
        full = await agent.ok("inspect_claims", {"expectedCaseId": case_id, "claimIds": [target.claim_id, "c-nope"]})
        (claim,) = full["claims"]
        assert claim["text"] == target.text and claim["status"] == "canonical" and claim["grounding"] == "primary"
        assert claim["sources"][0]["id"].startswith("s-") and full["unknownClaimIds"] == ["c-nope"]
        assert claim["relations"] == {"in": [], "out": [], "omitted": {"in": 0, "out": 0}}


async def _every_page(agent: Agent, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Every hit of a search, following nextCursor to the last page."""
    hits: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await agent.ok("search_workspace", {**arguments, **({"cursor": cursor} if cursor else {})})
        assert len(page["hits"]) <= 10 and page["total"] >= len(hits) + len(page["hits"])
        hits += page["hits"]
        cursor = page.get("nextCursor")
        if cursor is None:
            assert len(hits) == page["total"]
            return hits


async def test_star_lists_every_record_by_id_whatever_the_ids_look_like(stack):
    case_id = unique("mixed")
    made = [*claims(23, seed=3, prefix="c"), *claims(14, seed=4, prefix="zeta"), *claims(9, seed=5, prefix="b1")]
    await fill_case(stack.db, case_id, made)
    async with agent_on(stack, case_id) as agent:
        listed = await _every_page(agent, {"expectedCaseId": case_id, "query": "*", "kinds": ["claim"]})
        assert [h["id"] for h in listed] == sorted(c.claim_id for c in made)
        assert {(h["kind"], h["status"], h["match"]) for h in listed} == {("claim", "canonical", "all")}
        everything = await _every_page(agent, {"expectedCaseId": case_id, "query": " * "})
        sources = -(-len(made) // CLAIMS_PER_SOURCE)
        assert len(everything) == len(made) + sources and [h["id"] for h in everything] == sorted(
            h["id"] for h in everything)
        assert {h["kind"] for h in everything} == {"claim", "source"}
        # A word search is still a word search: "*" inside other words is no wildcard.
        assert (await agent.ok("search_workspace", {"expectedCaseId": case_id, "query": "c-* zzz"}))["total"] == 0


async def test_a_star_listing_pages_on_from_its_last_hit_and_its_cursor_keeps_to_its_filters(stack):
    """`*` pages from the last hit a page showed (keyset), so claims accepted mid-way with ids that sort before it
    neither repeat a hit nor hide one, and its total is the one counted at its start; its cursor is refused with
    other filters, by a search of words, and a page number is no cursor of it."""
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1, claims=12)
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        listing = {"expectedCaseId": agent.case_id, "query": "*", "kinds": ["claim"]}
        first = await agent.ok("search_workspace", listing)
        assert first["total"] == 12 and len(first["hits"]) == 10 and isinstance(first["nextCursor"], str)
        await agent.accepted("stage_claims", claims=[claim_item(f"a{i}-early", made["sources"]) for i in range(3)])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        second = await agent.ok("search_workspace", {**listing, "cursor": first["nextCursor"]})
        assert [h["id"] for h in first["hits"] + second["hits"]] == sorted(made["claims"])
        assert second["total"] == 12 and "nextCursor" not in second
        for other in ({"kinds": ["claim", "source"]}, {"status": "any"}, {"gap": "any"}, {"query": "holds"},
                      {"expectedCaseId": agent.case_id, "kinds": ["source"]}):
            refused = await agent.refused("search_workspace", {**listing, **other, "cursor": first["nextCursor"]})
            assert refused["code"] == "invalid_argument" and refused["field"] == "cursor", (other, refused)
        assert refused["message"] == "cursor: it belongs to a search of another case or with other filters"
        for forged in (2, "bm90LWEtY3Vyc29y", first["nextCursor"][:-4]):
            refused = await agent.refused("search_workspace", {**listing, "cursor": forged})
            assert refused["field"] == "cursor", (forged, refused)

        async with stack.api("reviewer") as api:  # reviewers page the same way; a new listing counts again
            url = f"/api/v1/cases/{agent.case_id}/search"
            one = (await api.get(url, params={"q": "*", "kinds": "claim"})).json()
            two = (await api.get(url, params={"q": "*", "kinds": "claim", "cursor": one["nextCursor"]})).json()
            assert [h["id"] for h in one["hits"] + two["hits"]] == sorted([*made["claims"], "a0-early", "a1-early",
                                                                           "a2-early"])
            assert one["total"] == two["total"] == 15 and "nextCursor" not in two
            refused = await api.get(url, params={"q": "*", "kinds": "claim,source", "cursor": one["nextCursor"]})
            assert refused.status_code == 422 and refused.json()["error"]["field"] == "cursor", refused.text
            ranked = (await api.get(url, params={"q": "holds", "kinds": "claim", "cursor": "2"})).json()
            assert len(ranked["hits"]) == 5 and ranked["total"] == 15 and "nextCursor" not in ranked

        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as browser:  # the case page's search
            assert (await ui_sign_in(browser, stack.tokens["reviewer"])).status_code == 303
            shown = await browser.get(f"/ui/cases/{agent.case_id}/search", params={"q": "*", "kinds": "claim"})
            assert shown.status_code == 200 and shown.text.count('<tr class="hit"') == 10 and "page 1" in shown.text
            on = re.search(r'<a rel="next" href="([^"]+)"', shown.text)
            assert on, shown.text[-2000:]
            then = await browser.get(f"/ui/cases/{agent.case_id}/search" + html.unescape(on.group(1)))
            assert then.status_code == 200 and then.text.count('<tr class="hit"') == 5, then.text[-2000:]
            assert 'rel="first"' in then.text and 'rel="next"' not in then.text


async def test_a_search_lists_every_claim_with_a_gap_however_many_and_follows_a_retirement(stack):
    case_id = unique("gaps")
    made = claims(400, seed=7, prefix="c")  # one source in three is reporting: 150 claims lack a primary source
    await fill_case(stack.db, case_id, made)
    async with stack.db.engine.connect() as connection:
        expected = set((await connection.execute(select(view_unresolved.c.claim_id, view_unresolved.c.type).where(
            view_unresolved.c.case_id == case_id, view_unresolved.c.claim_id != ""))).all())
    assert len(expected) > MAX_CURSOR + PAGE_SIZE  # more than get_workspace's cursor reaches
    async with agent_on(stack, case_id) as agent:
        guidance = (await agent.ok("get_workspace", {"scope": "guidance"}))["guidance"]
        summary = guidance["items"][-1]
        assert summary["type"] == "gaps" and summary["total"] == len(expected) + 1  # and the missing verdict
        follow = summary["next"]
        assert follow["tool"] == "search_workspace" and follow["arguments"]["expectedCaseId"] == case_id
        listed = await _every_page(agent, follow["arguments"])
        seen = {(h["id"], gap) for h in listed for gap in h["gaps"]}
        assert seen == expected and len(listed) == len({h["id"] for h in listed})

        # A retirement re-rates the claims citing the source: the search lists them by their new gap at once.
        official = "s-00001"
        async with stack.api("reviewer") as api:
            retired = await api.post(f"/api/v1/cases/{case_id}/retirements", json={
                "records": [{"record": "source", "id": official}], "note": "withdrawn by its publisher"})
            assert retired.status_code == 200, retired.text
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        unsupported = await _every_page(agent, {"expectedCaseId": case_id, "query": "*", "gap": "claim_unsupported"})
        citing = [c.claim_id for c in made[CLAIMS_PER_SOURCE:2 * CLAIMS_PER_SOURCE]]
        assert [h["id"] for h in unsupported] == citing
        assert all("claim_unsupported" in h["gaps"] for h in unsupported)
        async with stack.api("reviewer") as api:  # reviewers list them the same way
            page = (await api.get(f"/api/v1/cases/{case_id}/search",
                                  params={"q": "*", "gap": "claim_unsupported"})).json()
            assert [h["id"] for h in page["hits"]] == citing[:10] and page["total"] == len(citing)
            refused = await api.get(f"/api/v1/cases/{case_id}/search", params={"q": "*", "gap": "missing_verdict"})
            assert refused.status_code == 422 and refused.json()["error"]["field"] == "gap", refused.text
        refused = await agent.refused("search_workspace", {"expectedCaseId": case_id, "query": "*", "gap": "any",
                                                           "status": "pending"})
        assert refused["code"] == "invalid_argument" and refused["field"] == "gap", refused


async def test_an_empty_star_listing_says_what_it_found_none_of_not_to_change_its_words(stack):
    async with agent_session(stack) as agent:
        await seed(agent, sources=1, claims=1)
        pinned = {"expectedCaseId": agent.case_id, "query": "*"}
        no_gap = await agent.ok("search_workspace", {**pinned, "gap": "claim_disputed"})
        assert no_gap["total"] == 0 and no_gap["hint"] == (
            "no canonical claim has a gap of type claim_disputed: get_workspace scope=unresolved lists the case's gaps")
        no_group = await agent.ok("search_workspace", {**pinned, "kinds": ["group", "relation"], "status": "any"})
        assert no_group["total"] == 0 and no_group["hint"] == "the case has no group or relation record yet"
        no_words = await agent.ok("search_workspace", {**pinned, "query": "zeppelin"})
        assert no_words["hint"] == "no record matches: try fewer or other words, an id, or status=any"


async def test_a_word_typed_without_its_accents_finds_it_written_with_them_and_the_snippet_keeps_them(stack):
    """Agents and reviewers mostly type plain ASCII: "Zurich" finds Zürich, "Nestle" Nestlé, a misspelled "Zurihc"
    Zürich by similar spellings; "Zürich" still finds it, ranked as "Zurich" is (no word counted twice)."""
    text = "Heat pumps in Zürich, São Paulo and Łódź cut household heating emissions by a third, utilities report."
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("s-nestle", publisher="Nestlé S.A.")])
        await agent.accepted("stage_claims", claims=[claim_item(
            "c-heat", ["s-nestle"], text=text, transformationNote="Summed the utilities' tariff tables.",
            proposalRationale="Corroborates the Genève survey.")])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)

        async def found(query: str, kinds: list[str]) -> list[tuple[str, str, float, str]]:
            answer = await agent.ok("search_workspace", {"expectedCaseId": agent.case_id, "query": query,
                                                         "kinds": kinds})
            return [(h["id"], h["match"], h["score"], h["snippet"]) for h in answer["hits"]]

        plain, accented = await found("Zurich", ["claim"]), await found("Zürich", ["claim"])
        assert [(i, m) for i, m, _, _ in plain] == [("c-heat", "text")] and accented == plain
        assert "Zürich" in plain[0][3] and "São Paulo" in plain[0][3]
        for query in ('"Sao Paulo" heat', "Lodz", "ŁÓDŹ"):
            assert [(i, m) for i, m, _, _ in await found(query, ["claim"])] == [("c-heat", "text")], query
        assert [(i, m) for i, m, _, _ in await found("Nestle", ["source"])] == [("s-nestle", "text")]
        for query in ("tariff tables", "Geneve survey"):  # a claim's notes are searched as its text is
            assert [(i, m) for i, m, _, _ in await found(query, ["claim"])] == [("c-heat", "text")], query
        ((claim_id, match, _, snippet),) = await found("Zurihc heat pumps", ["claim"])
        assert (claim_id, match) == ("c-heat", "fuzzy") and "Zürich" in snippet
        async with stack.api("reviewer") as api:
            searched = (await api.get(f"/api/v1/cases/{agent.case_id}/search", params={"q": "zurich"})).json()
        assert [(h["id"], h["match"]) for h in searched["hits"]] == [("c-heat", "text")]


async def test_the_case_search_takes_kinds_repeated_as_it_takes_them_comma_separated(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("s-copper", title="Copper smelter output")])
        await agent.accepted("stage_claims", claims=[claim_item("c-copper", ["s-copper"],
                                                                text="Copper output rose at the smelter.")])
        await agent.accepted("stage_claims", claims=[claim_item("c-other", ["s-copper"], text="Copper prices fell.")])
        await agent.accepted("stage_relations", relations=[relation_item(
            "r-copper", "c-other", "c-copper", rationale="Copper prices fell as copper output rose.")])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        url = f"/api/v1/cases/{agent.case_id}/search"
        async with stack.api("reviewer") as api:
            repeated = (await api.get(url, params=[("q", "copper"), ("kinds", "claim"), ("kinds", "source")])).json()
            listed = (await api.get(url, params={"q": "copper", "kinds": "claim,source"})).json()
            mixed = (await api.get(url, params=[("q", "copper"), ("kinds", "claim,source"), ("kinds", "claim")])).json()
            refused = await api.get(url, params=[("q", "copper"), ("kinds", "claim"), ("kinds", "nope")])
        assert sorted(h["id"] for h in repeated["hits"]) == ["c-copper", "c-other", "s-copper"]
        assert repeated["kinds"] == listed["kinds"] == mixed["kinds"] == ["claim", "source"]
        assert repeated["hits"] == listed["hits"] == mixed["hits"] and repeated["total"] == 3
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "kinds", refused.text
        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
            page = (await http.get(f"/ui/cases/{agent.case_id}/search",
                                   params=[("q", "copper"), ("kinds", "claim"), ("kinds", "source")])).text
        assert "s-copper" in page and "c-copper" in page and "r-copper" not in page


async def test_inspect_claims_names_a_pending_claim_with_its_proposal_not_as_no_claim_of_the_case(stack):
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1, claims=1)
        staged = await agent.stage("stage_claims", claims=[claim_item("pend-dup", made["sources"],
                                                                      text="Zinc smelting resumed at the plant.")])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        listed = await agent.ok("search_workspace", {"expectedCaseId": agent.case_id, "query": "pend-dup",
                                                     "status": "pending"})
        assert [(h["id"], h["proposalId"]) for h in listed["hits"]] == [("pend-dup", staged["proposalId"])]
        read = await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id,
                                                 "claimIds": [made["claims"][0], "pend-dup", "c-nope"]})
        assert [c["id"] for c in read["claims"]] == [made["claims"][0]]
        assert read["pendingClaimIds"] == [{"id": "pend-dup", "proposalId": staged["proposalId"]}]
        assert "pending" in read["pendingHint"] and read["unknownClaimIds"] == ["c-nope"]
        await decide(stack, staged["proposalId"], reject=["pend-dup"])
        again = await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id, "claimIds": ["pend-dup"]})
        assert again["unknownClaimIds"] == ["pend-dup"] and "pendingClaimIds" not in again


async def test_an_id_of_the_other_kind_is_named_with_the_tool_that_reads_it(stack):
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1, claims=1)
        source, claim = made["sources"][0], made["claims"][0]
        claims = await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id, "claimIds": [source, "c-nope"]})
        assert claims["unknownClaimIds"] == ["c-nope"]
        assert claims["otherRecords"] == [{"id": source, "record": "source", "readWith": "inspect_sources"}]
        sources = await agent.ok("inspect_sources", {"expectedCaseId": agent.case_id, "sourceIds": [claim]})
        assert sources["unknownSourceIds"] == [] and "unknownHint" not in sources
        assert sources["otherRecords"] == [{"id": claim, "record": "claim", "readWith": "inspect_claims"}]


async def test_a_claims_relations_past_inspects_cap_are_paged_by_searching_its_id(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        hub, spokes = "c-000100", [f"c-0001{i:02d}" for i in range(1, 19)]
        for at in range(0, 1 + len(spokes), 4):
            await agent.accepted("stage_claims", claims=[claim_item(c, [source], text=f"Finding {c} on tin output.")
                                                         for c in [hub, *spokes][at:at + 4]])
        relations = [relation_item(f"r-{c}", c, hub, rationale=f"Tin output {i}.") for i, c in enumerate(spokes)]
        for at in range(0, len(relations), 6):
            await agent.accepted("stage_relations", relations=relations[at:at + 6])
        await agent.accepted("stage_relations", relations=[relation_item("r-out", hub, spokes[0], "qualifies")])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)

        (claim,) = (await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id, "claimIds": [hub]}))["claims"]
        assert claim["relations"]["omitted"] == {"in": 6, "out": 0}
        more = claim["relations"]["more"]
        assert more == {"tool": "search_workspace", "arguments": {
            "expectedCaseId": agent.case_id, "query": hub, "kinds": ["relation"]}}
        listed = await _every_page(agent, more["arguments"])
        assert sorted(h["id"] for h in listed) == sorted([*(r["id"] for r in relations), "r-out"])
        assert {(h["kind"], h["status"]) for h in listed} == {("relation", "canonical")}
        first = await agent.ok("search_workspace", {"expectedCaseId": agent.case_id, "query": hub})
        assert first["hits"][0]["id"] == hub and {h["kind"] for h in first["hits"][1:]} == {"relation"}
        # A spoke's own relations: its one in and its one out, not the hub's others.
        spoke = await agent.ok("search_workspace", {"expectedCaseId": agent.case_id, "query": spokes[0],
                                                    "kinds": ["relation"]})
        assert sorted(h["id"] for h in spoke["hits"]) == sorted([f"r-{spokes[0]}", "r-out"])
        (few,) = (await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id, "claimIds": [spokes[1]]}))["claims"]
        assert "more" not in few["relations"]


async def test_every_claim_a_search_or_inspect_returns_carries_its_grounding_from_its_active_sources(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[
            source_item("s-agency"), source_item("s-paper", type="reporting", publisher="Daily Paper")])
        both = ["s-agency", "s-paper"]
        await agent.accepted("stage_claims", claims=[claim_item("c-kept", both), claim_item("c-gone", both),
                                                     claim_item("c-sole", ["s-agency"])])
        async with stack.api("reviewer") as api:
            retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements", json={
                "records": [{"record": "claim", "id": "c-gone"}], "note": "Withdrawn."})
            assert retired.status_code == 200, retired.text
        staged = await agent.stage("stage_claims", claims=[claim_item("c-new", both)])

        async def labels() -> dict[tuple[str, str], tuple[str, int]]:
            await wait_until_published(stack.db)
            await wait_until_projected(stack.settings)
            hits = await _every_page(agent, {"expectedCaseId": agent.case_id, "query": "*", "kinds": ["claim"],
                                             "status": "any"})
            return {(h["id"], h["status"]): (h["grounding"], h["independentOrigins"]) for h in hits}

        assert await labels() == {("c-kept", "canonical"): ("primary", 2), ("c-gone", "retired"): ("primary", 2),
                                  ("c-sole", "canonical"): ("primary", 1), ("c-new", "pending"): ("primary", 2)}
        # The agency withdraws its record: every claim citing it, whatever its status, is labelled again.
        async with stack.api("reviewer") as api:
            retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements", json={
                "records": [{"record": "source", "id": "s-agency"}], "note": "Withdrawn by the agency."})
            assert retired.status_code == 200, retired.text
        assert await labels() == {("c-kept", "canonical"): ("secondary", 1), ("c-gone", "retired"): ("secondary", 1),
                                  ("c-sole", "canonical"): ("none", 0), ("c-new", "pending"): ("secondary", 1)}
        full = await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id,
                                                 "claimIds": ["c-kept", "c-gone", "c-sole"]})
        assert [(c["id"], c["grounding"], c["independentOrigins"]) for c in full["claims"]] == [
            ("c-kept", "secondary", 1), ("c-gone", "secondary", 1), ("c-sole", "none", 0)]
        assert staged["proposalId"]


async def test_inspect_claims_caps_relations_with_omitted_counts_and_shows_groups_health_and_provenance(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[
            source_item("s-agency"), source_item("s-paper", type="reporting", publisher="Daily Paper")])
        spokes = [f"spoke-{i:02d}" for i in range(14)]
        claimed = await agent.accepted("stage_claims", claims=[claim_item("hub", ["s-agency"]),
                                                               claim_item("peer", ["s-agency", "s-paper"])])
        relations = [*(relation_item(f"r-{i:02d}", c, "hub") for i, c in enumerate(spokes)),
                     relation_item("r-out", "hub", "peer", "qualifies")]
        for at in range(0, len(spokes), 4):  # a call stages four items at most
            await agent.accepted("stage_claims", claims=[claim_item(c, ["s-paper"]) for c in spokes[at:at + 4]])
        for at in range(0, len(relations), 4):
            await agent.accepted("stage_relations", relations=relations[at:at + 4])
        await agent.accepted("stage_merge", groups=[merge_item("g-hub", ["hub", "peer"])])
        async with stack.api("reviewer") as api:
            retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements", json={
                "records": [{"record": "source", "id": "s-agency"}], "note": "Withdrawn by the agency."})
            assert retired.status_code == 200, retired.text
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)

        full = await agent.ok("inspect_claims", {"expectedCaseId": agent.case_id, "claimIds": ["hub", "peer"]})
        hub, peer = full["claims"]
        assert hub["relations"]["in"] == [{"id": f"r-{i:02d}", "type": "supports", "claimId": c, "status": "active"}
                                          for i, c in enumerate(spokes[:12])]
        assert hub["relations"]["out"] == [{"id": "r-out", "type": "qualifies", "claimId": "peer", "status": "active"}]
        assert hub["relations"]["omitted"] == {"in": 2, "out": 0}
        assert peer["relations"] == {"in": [{"id": "r-out", "type": "qualifies", "claimId": "hub", "status": "active"}],
                                     "out": [], "omitted": {"in": 0, "out": 0}}
        assert hub["groups"] == peer["groups"] == [{"groupId": "g-hub", "label": "Group g-hub", "status": "active"}]
        # Its only source retired, the hub is unsupported and grounded by nothing; the peer keeps the paper.
        assert (hub["status"], hub["health"], hub["grounding"], hub["independentOrigins"]) == (
            "canonical", "unsupported", "none", 0)
        assert hub["sources"] == [{"id": "s-agency", "title": "Record s-agency", "type": "primary", "status": "retired"}]
        assert (peer["health"], peer["grounding"], peer["independentOrigins"]) == ("supported", "secondary", 1)
        assert [s["status"] for s in peer["sources"]] == ["retired", "active"]
        proposal = claimed["proposalId"]
        assert hub["provenance"] == peer["provenance"] == {
            "stagedBy": agent.name, "proposalId": proposal, "acceptedBy": "reviewer",
            "revision": hub["provenance"]["revision"]}
        assert 0 < hub["provenance"]["revision"] < full["workspaceRevision"]


async def test_staging_a_restated_claim_flags_it_and_the_proposal_shows_it(stack):
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1)
        text = "Acme Corp shipped 1,200 turbines to Norway in March 2024, according to its annual report."
        await agent.accepted("stage_claims", claims=[claim_item("c-original", made["sources"], text=text)])
        restated = "according to its annual report, ACME Corp shipped 1200 turbines to Norway in March 2024!"
        staged = await agent.stage("stage_claims", claims=[
            claim_item("c-restated", made["sources"], text=restated),
            claim_item("c-other", made["sources"], text="Rainfall in Kenya doubled over the decade to 2020.")])
        assert staged["status"] == "pending"  # never a refusal
        (flag,) = staged["possibleDuplicates"]
        assert flag["itemId"] == "c-restated" and flag["of"] == {"kind": "claim", "id": "c-original",
                                                                 "status": "canonical"}
        assert 0.7 <= flag["similarity"] <= 1

        # A staged source with a known URL (spelt differently: `www.`, port 443, tracking parameters, parameters in
        # another order) is flagged too, and the review check says so; and a pending claim counts.
        await agent.accepted("stage_sources", sources=[source_item(
            "s-outlook", url="https://x.org/grid-outlook?year=2024&page=2")])
        again = await agent.stage("stage_sources", sources=[
            source_item("s-again", url=f"https://www.Example.org/{made['sources'][0]}/#top"),
            source_item("s-tracked", url="https://www.x.org:443/grid-outlook/?page=2&utm_source=x&fbclid=1&year=2024")])
        assert again["possibleDuplicates"] == [
            {"itemId": "s-again", "similarity": 1.0, "of": {"kind": "source", "id": made["sources"][0],
                                                            "status": "canonical"}},
            {"itemId": "s-tracked", "similarity": 1.0, "of": {"kind": "source", "id": "s-outlook",
                                                              "status": "canonical"}}]
        assert [(c["itemId"], c["check"]) for c in again["reviewChecks"]] == [
            ("s-again", "source-url-restaged"), ("s-tracked", "source-url-restaged")]
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)  # pending items are indexed from the staged event
        third = await agent.stage("stage_claims", claims=[claim_item("c-third", made["sources"], text=restated)])
        assert {(f["of"]["id"], f["of"]["status"], f["of"].get("proposalId")) for f in third["possibleDuplicates"]} \
            >= {("c-original", "canonical", None), ("c-restated", "pending", staged["proposalId"])}

        async with stack.api("reviewer") as api:
            shown = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
        by_item = {i["itemId"]: i["possibleDuplicates"] for i in shown["items"]}
        assert by_item["c-other"] == []
        assert by_item["c-restated"][0]["of"] == {"kind": "claim", "id": "c-original", "status": "canonical",
                                                  "text": text}

        # Once the pending item it named is rejected, the later proposal says so.
        await decide(stack, staged["proposalId"], reject=["c-restated", "c-other"])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)  # the search index: the decided items pending no more
        async with stack.api("reviewer") as api:
            later = (await api.get(f"/api/v1/proposals/{third['proposalId']}")).json()
        statuses = {f["of"]["id"]: f["of"]["status"] for f in later["items"][0]["possibleDuplicates"]}
        assert statuses == {"c-original": "canonical", "c-restated": "rejected"}


async def test_a_claim_restated_without_its_accents_is_flagged_as_the_same_and_a_voiced_kana_is_another_word(stack):
    """Duplicates read accents as search does: "Lodz" restates "Łódź" exactly, and カス is not ガス."""
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1)
        heat = "Heat pumps in {} cut household heating emissions by a third in 2024."
        await agent.accepted("stage_claims", claims=[claim_item("c-lodz", made["sources"], text=heat.format("Łódź")),
                                                     claim_item("c-gas", made["sources"], text="ガス")])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        staged = await agent.stage("stage_claims", claims=[
            claim_item("c-lodz-again", made["sources"], text=heat.format("Lodz")),
            claim_item("c-kasu", made["sources"], text="カス")])
        assert [(f["itemId"], f["of"]["id"], f["similarity"]) for f in staged["possibleDuplicates"]] == [
            ("c-lodz-again", "c-lodz", 1.0)]


async def test_a_claim_id_pending_in_two_proposals_is_flagged_once_and_staging_stores(stack):
    """An agent that stages one claim id twice (say, after a stale answer) leaves it pending in two proposals;
    a later restatement names it once, and is stored (it once failed the write's primary key)."""
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1)
        text = "Borealis Grid connected 340 MW of offshore wind to the Baltic interconnector in 2023."
        first = await agent.stage("stage_claims", claims=[claim_item("c-twice", made["sources"], text=text)])
        second = await agent.stage("stage_claims", claims=[claim_item("c-twice", made["sources"], text=text + " ")])
        assert first["proposalId"] != second["proposalId"]
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        later = await agent.stage("stage_claims", claims=[claim_item("c-later", made["sources"], text=text.upper())])
        assert later["status"] == "pending", later
        named = [(f["itemId"], f["of"]["id"]) for f in later["possibleDuplicates"]]
        assert named == [("c-later", "c-twice")]
        async with stack.api("reviewer") as api:
            shown = (await api.get(f"/api/v1/proposals/{later['proposalId']}")).json()
        assert [f["of"]["id"] for f in shown["items"][0]["possibleDuplicates"]] == ["c-twice"]


async def test_a_decision_the_index_has_not_caught_up_with_is_read_from_the_ledger(stack):
    """The search index is a read model a moment behind the review: a staged claim restating one just accepted
    names it canonical, and one just rejected is not named, even while the index still holds both pending."""
    async with agent_session(stack) as agent:
        made = await seed(agent, sources=1)
        kept = "Nordvind Energy commissioned 410 MW of onshore wind in Sweden during 2022, its filings say."
        dropped = "Harbour freight volumes in Rotterdam fell by a fifth between 2019 and 2021, port data show."
        staged = await agent.stage("stage_claims", claims=[claim_item("c-kept", made["sources"], text=kept),
                                                           claim_item("c-dropped", made["sources"], text=dropped)])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        async with stack.db.engine.begin() as connection:
            raw = (await connection.get_raw_connection()).driver_connection
            pending = await raw.fetch("SELECT * FROM search_records WHERE case_id = $1 AND kind = 'claim' "
                                      "AND record_id = ANY($2::text[])", agent.case_id, ["c-kept", "c-dropped"])
        assert {(r["record_id"], r["status"]) for r in pending} == {("c-kept", "pending"), ("c-dropped", "pending")}
        await decide(stack, staged["proposalId"], accept=["c-kept"], reject=["c-dropped"])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        # The index as it stood before the projection applied the decision (on a busy machine, for a moment).
        async with stack.db.engine.begin() as connection:
            raw = (await connection.get_raw_connection()).driver_connection
            await raw.execute("DELETE FROM search_records WHERE case_id = $1 AND kind = 'claim' "
                              "AND record_id = ANY($2::text[])", agent.case_id, ["c-kept", "c-dropped"])
            columns = [r["column_name"] for r in await raw.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'search_records' "
                "AND is_generated = 'NEVER' AND table_schema = current_schema()")]
            await raw.executemany(
                f"INSERT INTO search_records ({', '.join(columns)}) "
                f"VALUES ({', '.join(f'${n}' for n in range(1, len(columns) + 1))})",
                [tuple(r[c] for c in columns) for r in pending])
        again = await agent.stage("stage_claims", claims=[
            claim_item("c-kept-again", made["sources"], text=kept.upper()),
            claim_item("c-dropped-again", made["sources"], text=dropped.lower())])
        assert [(f["itemId"], f["of"]) for f in again["possibleDuplicates"]] == [
            ("c-kept-again", {"kind": "claim", "id": "c-kept", "status": "canonical"})]
