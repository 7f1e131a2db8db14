"""The argument map: the graph's bounds, order and neighbourhoods, the layered layout, and the SVG (pure, no I/O)."""

from __future__ import annotations

import re

import pytest

from services.gateway.argument_map import MAX_LINES, WRAP, CaseGraph, MapLinks, layout, render_svg
from services.review.graph import graph_view
from shared.errors import NotFound


def records(claims: int = 2, extra_sources: int = 0) -> dict:
    claim_rows = [{"claim_id": "v", "text": "The verdict <b>bold</b>", "kind": "verdict", "confidence": "supported",
                   "status": "active", "health": "weakened", "lost": [{"record": "claim", "id": "c0"}]}]
    claim_rows += [{"claim_id": f"c{i}", "text": f"Claim {i}", "kind": "observation", "confidence": "supported",
                    "status": "active", "health": None, "lost": None} for i in range(claims)]
    return {
        "claims": claim_rows,
        "citations": [{"claim_id": f"c{i}", "source_id": "s0"} for i in range(claims)],
        "sources": [{"source_id": f"s{i}", "title": f"Source {i}", "publisher": "P", "type": "primary",
                     "status": "retired" if i == 0 else "active"} for i in range(1 + extra_sources)],
        "relations": [{"relation_id": "r0", "source_claim_id": "c0", "target_claim_id": "v", "type": "supports",
                       "verdict_basis": True},
                      {"relation_id": "r1", "source_claim_id": "c1", "target_claim_id": "c0", "type": "contradicts",
                       "verdict_basis": False}],
        "members": [{"group_id": "g", "label": "Same", "claim_id": "c0"}, {"group_id": "g", "label": "Same",
                                                                           "claim_id": "c1"}],
    }


def chain(length: int, unrelated: int, verdict: bool = True) -> dict:
    """v ← c0 ← c1 ← … (each supports the one before), then `unrelated` claims no relation touches; c(i)
    cites source s(i)."""
    built = records(claims=0)
    built["claims"] = built["claims"][: 1 if verdict else 0]
    built["claims"] += [{"claim_id": f"c{i}", "text": f"Claim {i}", "kind": "observation", "confidence": "supported",
                         "status": "active", "health": None, "lost": None} for i in range(length + unrelated)]
    built["sources"] = [{"source_id": f"s{i}", "title": f"Source {i}", "publisher": "P", "type": "primary",
                         "status": "active"} for i in range(length + unrelated)]
    built["citations"] = [{"claim_id": f"c{i}", "source_id": f"s{i}"} for i in range(length + unrelated)]
    ends = ["v", *[f"c{i}" for i in range(length)]] if verdict else [f"c{i}" for i in range(length)]
    built["relations"] = [{"relation_id": f"r{i}", "source_claim_id": b, "target_claim_id": a, "type": "supports",
                           "verdict_basis": a == "v"} for i, (a, b) in enumerate(zip(ends, ends[1:], strict=False))]
    built["members"] = []
    return built


def ids(graph: dict, kind: str | None = None) -> list[str]:
    return [n["id"] for n in graph["nodes"] if kind is None or n["kind"] == kind]


def test_a_small_case_is_drawn_whole_with_the_verdict_first():
    whole = graph_view("case", 4, records())
    assert ids(whole) == ["v", "c0", "c1", "s0"] and whole["cut"] is None and whole["focus"] is None
    assert whole["health"] == {"unsupported": [], "weakened": ["v"]}
    assert whole["groups"] == [{"groupId": "g", "label": "Same", "members": ["c0", "c1"], "membersOmitted": 0}]
    assert {n["id"]: n.get("relationsOmitted") for n in whole["nodes"]} == {"v": 0, "c0": 0, "c1": 0, "s0": None}


def test_a_case_too_large_to_draw_whole_opens_on_the_verdicts_neighbourhood_and_says_what_it_cut():
    large = graph_view("case", 9, chain(length=5, unrelated=40), nodes_cap=30)
    assert large["focus"] == {"claimIds": ["v"], "hops": 2, "reason": "verdict"}
    assert ids(large) == ["v", "c0", "c1", "s0", "s1"]  # two relations from the verdict, and what they cite
    assert {n["id"]: n["relationsOmitted"] for n in large["nodes"] if n["kind"] != "source"} == {
        "v": 0, "c0": 0, "c1": 1}  # c1 is supported by c2, which is not drawn
    assert large["cut"]["nodesTotal"] == 1 + 45 + 45 and large["cut"]["nodesOmitted"] == 91 - 5
    assert large["cut"]["edgesTotal"] == 5 + 45 and large["cut"]["edgesOmitted"] == 50 - 4
    assert "the verdict v and the claims within 2 relations of it (3 claims, 2 sources)" in large["cut"]["note"]
    assert {e["id"] for e in large["edges"]} == {"r0", "r1", "c0~cites~s0", "c1~cites~s1"}


def test_a_focus_view_holds_one_claim_and_its_neighbours_two_relations_away_in_a_case_of_any_size():
    focused = graph_view("case", 9, chain(length=6, unrelated=3), focus="c3")
    assert focused["focus"] == {"claimIds": ["c3"], "hops": 2, "reason": "requested"}
    assert ids(focused, "claim") == ["c3", "c2", "c4", "c1", "c5"] and ids(focused, "verdict") == []
    assert ids(focused, "source") == ["s3", "s2", "s4", "s1", "s5"]
    assert "claim c3 and the claims within 2 relations" in focused["cut"]["note"]
    assert focused["cut"]["nodesOmitted"] == 1 + 9 + 9 - 10
    small = graph_view("case", 4, records(), focus="c1")  # within reach of everything: nothing cut
    assert ids(small) == ["c1", "c0", "v", "s0"] and small["cut"] is None
    with pytest.raises(NotFound) as refused:
        graph_view("case", 4, records(), focus="s0")  # a source is no claim to centre on
    assert refused.value.field == "focus" and "s0" in refused.value.message


def test_without_a_verdict_a_large_case_opens_on_its_most_connected_claims():
    built = chain(length=4, unrelated=30, verdict=False)
    hub = [{"relation_id": f"h{i}", "source_claim_id": f"c{10 + i}", "target_claim_id": "c20", "type": "qualifies",
            "verdict_basis": False} for i in range(6)]
    built["relations"] += hub
    opened = graph_view("case", 9, built, nodes_cap=20)
    assert opened["focus"]["reason"] == "most_connected" and opened["focus"]["claimIds"][0] == "c20"
    assert {"c20", *[f"c{10 + i}" for i in range(6)]} <= set(ids(opened, "claim"))
    assert len(opened["nodes"]) <= 20 and opened["cut"]["nodesOmitted"] > 0


def test_the_layout_puts_the_verdict_on_top_and_sources_at_the_foot_with_a_group_in_one_row():
    graph = CaseGraph.model_validate(graph_view("case", 4, records()))
    boxes, blocks, routes, width, height = layout(graph)
    assert boxes["v"].y < boxes["c0"].y < boxes["s0"].y
    assert boxes["c0"].y == boxes["c1"].y and abs(boxes["c0"].x - boxes["c1"].x) >= boxes["c0"].w
    assert [b for b in blocks if b.groups][0].groups[0].group_id == "g"
    assert set(routes) == {e.id for e in graph.edges} and 0 < width and 0 < height


def test_a_long_label_is_wrapped_and_cut_and_its_whole_text_stays_in_the_nodes_title():
    built = records()
    long_text = "Residential heat pumps cut household heating emissions " * 8 + "END"
    built["claims"][1]["text"] = long_text
    graph = CaseGraph.model_validate(graph_view("case", 4, built))
    boxes, *_ = layout(graph)
    lines = boxes["c0"].lines
    assert len(lines) == MAX_LINES and all(len(line) <= WRAP for line in lines) and lines[-1].endswith("…")
    svg = str(render_svg(graph))
    assert f"claim c0: {graph.nodes[1].label}</title>" in svg and graph.nodes[1].label.startswith(long_text[:200])


def test_the_svg_escapes_every_text_links_each_node_and_tells_relation_types_apart_without_colour():
    graph = CaseGraph.model_validate(graph_view("case", 4, records()))
    svg = str(render_svg(graph))
    assert "<b>" not in svg and "&lt;b&gt;bold&lt;/b&gt;" in svg
    assert set(re.findall(r'data-node="([^"]+)"', svg)) == {"v", "c0", "c1", "s0"}
    assert 'href="/ui/cases/case?focus=v#argument-map"' in svg and 'href="/ui/cases/case?focus=c1#argument-map"' in svg
    assert 'href="#source-s0"' in svg and 'href="#verdict"' in svg and 'href="#claim-c0"' in svg  # rows
    assert re.findall(r'width="(\d+)" height="(\d+)"', svg)[0] == re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).groups()
    supports = re.search(r'<g data-edge="r0" data-type="supports"><title>[^<]*</title><path [^>]*/>', svg).group(0)
    contradicts = re.search(r'<g data-edge="r1" data-type="contradicts"><title>[^<]*</title><path [^>]*/>', svg)
    assert "stroke-dasharray" not in supports and 'stroke-dasharray="9 5"' in contradicts.group(0)
    assert "m-supports" in supports and "m-contradicts" in contradicts.group(0)
    assert ">supports</text>" in svg and ">contradicts</text>" in svg
    assert "WEAKENED" in svg and " style=" not in svg and "<script" not in svg
    assert svg.count('<g class="cluster"') == 1 and "merge group: Same (g)" in svg


def test_a_focus_view_rings_its_centre_and_says_what_each_edge_node_leaves_out():
    graph = CaseGraph.model_validate(graph_view("case", 9, chain(length=6, unrelated=0), focus="c3"))
    svg = str(render_svg(graph))
    assert re.search(r'data-node="c3" data-kind="claim"><title>[^<]*</title><g class="node claim active supported '
                     r'centre"><rect [^>]*class="ring"/>', svg)
    assert svg.count('class="ring"') == 1 and 'data-centre="c3"' in svg
    assert "+1 relation not drawn" in svg  # c1 and c5 each have a neighbour beyond the map
    grouped = records()
    grouped["members"].append({"group_id": "g", "label": "Same", "claim_id": "c9"})
    grouped["claims"].append({**grouped["claims"][1], "claim_id": "c9"})  # a member beyond the map
    svg = str(render_svg(CaseGraph.model_validate(graph_view("case", 4, grouped, focus="c1"))))
    assert "<title>merge group: Same (g) (1 more member not drawn)</title>" in svg


def test_map_links_carry_the_pages_other_parameters_on_to_each_focus_view():
    links = MapLinks("case", keep=(("asOf", "3"),))
    assert links.focus("c0") == "/ui/cases/case?asOf=3&focus=c0#argument-map"
    assert links.focus() == "/ui/cases/case?asOf=3#argument-map" and MapLinks("x").focus() == "/ui/cases/x#argument-map"
    svg = str(render_svg(CaseGraph.model_validate(graph_view("case", 4, records())), links))
    assert 'href="/ui/cases/case?asOf=3&amp;focus=c0#argument-map"' in svg
