"""The argument map over the API and on the case page, and the evidence beside each claim on the proposal page."""

from __future__ import annotations

import re
from html import unescape

from tests.e2e.test_review_ui import signed_in
from tests.factories import agent_session, claim_item, relation_item, source_item, verdict_claim

EVIDENCE = "Measured CO2 fell by 41% across 120 homes <not markup>."


async def small_case(agent) -> dict:
    """Two sources, two claims, a relation between them and a verdict resting on one of them."""
    await agent.accepted("stage_sources", sources=[
        source_item("map-trial", evidenceText=EVIDENCE), source_item("map-grid", type="official")])
    await agent.accepted("stage_claims", claims=[
        claim_item("map-cut", ["map-trial"], text="Heat pumps cut emissions by 41%."),
        claim_item("map-grid-claim", ["map-grid"], text="The grid got cleaner.")])
    await agent.accepted("stage_relations", relations=[
        relation_item("map-amplifies", "map-grid-claim", "map-cut", "amplifies")])
    await agent.accepted("stage_verdict", claim=verdict_claim("map-verdict", ["map-trial"], text="Yes, they do."),
                         relations=[relation_item("map-basis", "map-cut", "map-verdict", "supports")])
    return {"claims": ["map-cut", "map-grid-claim"], "verdict": "map-verdict"}


def svg_of(page: str) -> str:
    match = re.search(r'<svg xmlns="http://www.w3.org/2000/svg" class="argument-map".*?</svg>', page, re.S)
    assert match, page[:500]
    return match.group(0)


async def test_the_graph_names_every_claim_the_verdict_and_both_relations(stack):
    async with agent_session(stack) as agent:
        built = await small_case(agent)
        async with stack.api() as api:
            response = await api.get(f"/api/v1/cases/{agent.case_id}/graph")
        assert response.status_code == 200, response.text
        graph = response.json()
        nodes = {n["id"]: n for n in graph["nodes"]}
        assert nodes["map-verdict"]["kind"] == "verdict" and nodes["map-verdict"]["label"] == "Yes, they do."
        assert {c: nodes[c]["kind"] for c in built["claims"]} == {"map-cut": "claim", "map-grid-claim": "claim"}
        assert nodes["map-cut"] | {"health": "supported", "status": "active", "confidence": "supported"} == nodes["map-cut"]
        assert {n["kind"] for n in graph["nodes"] if n["id"].startswith("map-t") or n["id"] == "map-grid"} == {"source"}
        edges = {e["id"]: e for e in graph["edges"]}
        assert edges["map-amplifies"] | {"source": "map-grid-claim", "target": "map-cut", "type": "amplifies"} == \
            edges["map-amplifies"]
        assert edges["map-basis"]["verdictBasis"] is True and edges["map-basis"]["type"] == "supports"
        assert {(e["source"], e["target"]) for e in graph["edges"] if e["type"] == "cites"} == {
            ("map-cut", "map-trial"), ("map-grid-claim", "map-grid"), ("map-verdict", "map-trial")}
        assert graph["cut"] is None and graph["groups"] == [] and graph["focus"] is None


async def test_a_focus_view_holds_a_claim_and_its_neighbours_two_relations_away_and_says_what_it_cut(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http:
        await small_case(agent)
        await agent.accepted("stage_claims", claims=[claim_item("map-far", ["map-grid"], text="Coal fell too.")])
        await agent.accepted("stage_relations", relations=[
            relation_item("map-far-rel", "map-far", "map-grid-claim", "qualifies")])
        async with stack.api() as api:
            response = await api.get(f"/api/v1/cases/{agent.case_id}/graph", params={"focus": "map-far"})
            assert response.status_code == 200, response.text
            graph = response.json()
            # map-far qualifies map-grid-claim, which amplifies map-cut; the verdict is three relations away
            assert graph["focus"] == {"claimIds": ["map-far"], "hops": 2, "reason": "requested"}
            nodes = {n["id"]: n for n in graph["nodes"]}
            assert [i for i, n in nodes.items() if n["kind"] != "source"] == ["map-far", "map-grid-claim", "map-cut"]
            assert set(nodes) - {"map-far", "map-grid-claim", "map-cut"} == {"map-grid", "map-trial"}
            assert nodes["map-cut"]["relationsOmitted"] == 1 and nodes["map-far"]["relationsOmitted"] == 0
            assert graph["cut"] == {"nodesTotal": 6, "nodesOmitted": 1, "edgesTotal": 7, "edgesOmitted": 2,
                                    "note": graph["cut"]["note"]}
            assert graph["cut"]["note"].startswith("the map shows claim map-far and the claims within 2 relations")
            for focus, status, field in (("no-such-claim", 404, "focus"), ("map-trial", 404, "focus"),
                                         ("Not A Slug!", 422, "focus")):
                refused = await api.get(f"/api/v1/cases/{agent.case_id}/graph", params={"focus": focus})
                assert refused.status_code == status and refused.json()["error"]["field"] == field, refused.text
            document = (await api.get("/api/v1/openapi.json")).json()
        parameters = document["paths"]["/api/v1/cases/{case_id}/graph"]["get"]["parameters"]
        assert [p for p in parameters if p["name"] == "focus"][0]["in"] == "query"

        page = await http.get(f"/ui/cases/{agent.case_id}", params={"focus": "map-far"})
        svg = svg_of(page.text)
        assert page.status_code == 200 and 'data-centre="map-far"' in svg and 'data-node="map-verdict"' not in svg
        assert "Focused on claim <strong class=\"mono\">map-far</strong>" in page.text
        assert "1 of 6 records and 2 of 7 links are not drawn" in page.text
        stale = await http.get(f"/ui/cases/{agent.case_id}", params={"focus": "gone-claim"})
        assert stale.status_code == 200 and 'id="map-unfocused"' in stale.text and "gone-claim" in stale.text
        assert 'data-node="map-verdict"' in svg_of(stale.text)  # the case's own map instead


async def test_the_case_page_draws_the_map_and_the_proposal_page_shows_the_cited_evidence(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http:
        built = await small_case(agent)
        page = await http.get(f"/ui/cases/{agent.case_id}")
        assert page.status_code == 200
        svg = svg_of(page.text)
        for claim_id in [*built["claims"], built["verdict"]]:
            assert f'data-node="{claim_id}"' in svg
        assert "Heat pumps cut emissions by 41%." in unescape(svg) and "Yes, they do." in unescape(svg)
        assert f'href="/ui/cases/{agent.case_id}?focus=map-verdict#argument-map"' in svg  # its focus view
        assert f'href="/ui/cases/{agent.case_id}?focus=map-cut#argument-map"' in svg
        assert 'href="#verdict"' in svg and 'href="#claim-map-cut"' in svg and 'href="#source-map-trial"' in svg
        assert "<script" not in svg and " style=" not in svg  # nothing today's CSP would block
        row = re.search(r'<li class="claim[^"]*" id="claim-map-grid-claim">.*?</li>', page.text, re.S).group(0)
        assert f'href="/ui/cases/{agent.case_id}?focus=map-grid-claim#argument-map"' in row
        # The pan and zoom script comes from the gateway itself, which the page's policy allows, and nothing else.
        assert re.findall(r"<script[^>]*>", page.text) == ['<script src="/ui/static/argument-map.js" defer>']
        assert "script-src 'self'" in page.headers["content-security-policy"]
        script = await http.get("/ui/static/argument-map.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]

        staged = await agent.stage("stage_claims", claims=[claim_item("map-new", ["map-trial"])])
        proposal = await http.get(f"/ui/proposals/{staged['proposalId']}")
        evidence = re.search(r'<div class="evidence" id="evidence-map-new">(.*?)</div>\s*</div>', proposal.text, re.S)
        assert evidence, proposal.text[:2000]
        assert EVIDENCE.replace("<", "&lt;").replace(">", "&gt;") in evidence.group(1)  # escaped, not markup
        assert '<figure class="untrusted" data-untrusted="map-trial">' in evidence.group(1)  # a marked box
        assert "UNTRUSTED" not in unescape(evidence.group(1))  # with no frame markers: they are for agents

        relations = await agent.stage("stage_relations", relations=[
            relation_item("map-new-rel", "map-grid-claim", "map-cut", "contradicts")])
        related = await http.get(f"/ui/proposals/{relations['proposalId']}")
        block = re.search(r'id="evidence-map-new-rel">(.*?)</form>', related.text, re.S).group(1)
        assert "Heat pumps cut emissions by 41%." in block and "The grid got cleaner." in block


async def test_agents_cannot_read_the_graph_or_open_the_pages_and_the_graph_is_in_the_openapi_document(stack):
    async with agent_session(stack) as agent:
        async with stack.api(token=agent.token) as api:
            refused = await api.get(f"/api/v1/cases/{agent.case_id}/graph")
            assert refused.status_code == 403, refused.text
        async with signed_in(stack, role="agent") as http:
            page = await http.get(f"/ui/cases/{agent.case_id}", follow_redirects=False)
            assert page.status_code == 303 and "/ui/signin" in page.headers["location"]
        async with stack.api() as api:
            missing = await api.get("/api/v1/cases/no-such-case/graph")
            assert missing.status_code == 404
            document = (await api.get("/api/v1/openapi.json")).json()
    schema = document["paths"]["/api/v1/cases/{case_id}/graph"]["get"]["responses"]["200"]["content"]
    assert schema["application/json"]["schema"] == {"$ref": "#/components/schemas/CaseGraph"}
    edge_types = document["components"]["schemas"]["GraphEdge"]["properties"]["type"]["enum"]
    assert set(edge_types) == {"supports", "contradicts", "qualifies", "amplifies", "cites"}
