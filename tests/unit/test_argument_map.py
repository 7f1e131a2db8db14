"""The argument map: the graph's bounds and order, the layered layout, and the SVG (pure, no I/O)."""

from __future__ import annotations

import re

from services.gateway.argument_map import CaseGraph, layout, render_svg
from services.review.graph import graph_view


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


def test_the_graph_puts_the_verdict_first_and_says_what_a_large_case_leaves_out():
    whole = graph_view("case", 4, records())
    assert [n["id"] for n in whole["nodes"]] == ["v", "c0", "c1", "s0"] and whole["cut"] is None
    assert whole["health"] == {"unsupported": [], "weakened": ["v"]}
    cut = graph_view("case", 4, records(claims=6, extra_sources=3), nodes_cap=4)
    assert [n["id"] for n in cut["nodes"]] == ["v", "c0", "c1", "c2"]  # nearest the verdict first
    assert cut["cut"]["nodesTotal"] == 11 and cut["cut"]["nodesOmitted"] == 7
    assert all(e["source"] in {"v", "c0", "c1", "c2"} and e["target"] in {"v", "c0", "c1", "c2"} for e in cut["edges"])
    assert cut["groups"] == [{"groupId": "g", "label": "Same", "members": ["c0", "c1"], "membersOmitted": 0}]


def test_the_layout_puts_the_verdict_on_top_and_sources_at_the_foot_with_a_group_in_one_row():
    graph = CaseGraph.model_validate(graph_view("case", 4, records()))
    boxes, blocks, routes, width, height = layout(graph)
    assert boxes["v"].y < boxes["c0"].y < boxes["s0"].y
    assert boxes["c0"].y == boxes["c1"].y and abs(boxes["c0"].x - boxes["c1"].x) >= boxes["c0"].w
    assert [b for b in blocks if b.groups][0].groups[0].group_id == "g"
    assert set(routes) == {e.id for e in graph.edges} and 0 < width and 0 < height


def test_the_svg_escapes_every_text_links_each_node_and_tells_relation_types_apart_without_colour():
    svg = str(render_svg(CaseGraph.model_validate(graph_view("case", 4, records()))))
    assert "<b>" not in svg and "&lt;b&gt;bold&lt;/b&gt;" in svg
    assert set(re.findall(r'data-node="([^"]+)"', svg)) == {"v", "c0", "c1", "s0"}
    assert 'href="/ui/cases/case#verdict"' in svg and 'href="/ui/cases/case#source-s0"' in svg
    supports = re.search(r'<g data-edge="r0" data-type="supports"><path [^>]*/>', svg).group(0)
    contradicts = re.search(r'<g data-edge="r1" data-type="contradicts"><path [^>]*/>', svg).group(0)
    assert "stroke-dasharray" not in supports and 'stroke-dasharray="9 5"' in contradicts
    assert "m-supports" in supports and "m-contradicts" in contradicts
    assert ">supports</text>" in svg and ">contradicts</text>" in svg
    assert "WEAKENED" in svg and " style=" not in svg and "<script" not in svg
