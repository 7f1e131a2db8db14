"""Read-side rules: paging, capped sections, independent evidence, what is unresolved."""

from __future__ import annotations

from services.projection import domain, view_rows
from services.projection.domain import ClaimView, LedgerSnapshot, RelationView


def claim(claim_id, confidence="supported", sources=("s1",), kind="observation"):
    return ClaimView(claim_id, "t", kind, confidence, None, None, tuple(sources), 1)


def test_pages_follow_item_offsets_up_to_cursor_96_and_count_what_is_beyond():
    items = list(range(130))
    first = domain.page(items, None, "unresolved")
    assert first["items"] == list(range(12)) and first["nextCursor"] == 12
    assert first["next"] == {"tool": "get_workspace", "arguments": {"scope": "unresolved", "cursor": 12}}
    last = domain.page(items, 96, "guidance")
    assert last["items"] == list(range(96, 108)) and last["nextCursor"] is None and last["omitted"] == 22
    assert domain.page(items[:20], 12, "guidance") == {"items": list(range(12, 20)), "offset": 12, "total": 20,
                                                       "nextCursor": None, "next": None, "omitted": 0}


def test_a_long_list_of_ids_in_a_detail_line_is_cut_and_counted():
    assert domain.named_list(["a", "b"]) == "a, b"
    assert domain.named_list([f"c{i}" for i in range(8)]) == "c0, c1, c2, c3, c4 and 3 more"


def test_a_merge_group_counts_as_one_independent_item_even_when_groups_overlap():
    groups = {"g1": ["a", "b"], "g2": ["b", "c"], "g3": ["x", "y"]}
    assert domain.independent_units(["a", "b", "c", "d"], groups) == 2
    assert domain.independent_units(["a", "d"], groups) == 2


def test_unresolved_names_weak_contradicted_and_unsourced_claims_and_the_missing_verdict():
    snapshot = LedgerSnapshot(
        revision=3,
        claims=[claim("firm", sources=("p",)), claim("weak", "disputed", ("p",)), claim("hearsay", sources=("s",))],
        source_types={"p": "primary", "s": "social"},
        relations=[RelationView("r", "hearsay", "firm", "contradicts", False)],
    )
    found = [(i["type"], i.get("claimId")) for i in domain.unresolved(snapshot)]
    assert found == [("missing_verdict", None), ("contradicted_by_relation", "firm"), ("claim_disputed", "weak"),
                     ("no_primary_source", "hearsay")]
    health = domain.evidence_health(snapshot)
    assert health["claims"]["withoutPrimarySource"] == 1 and health["claims"]["contradicted"] == 1
    assert health["sources"]["uncited"] == 0


def test_sources_follow_the_focus_primary_records_first_or_those_behind_open_claims():
    sources = [{"source_id": "blog", "type": "social"}, {"source_id": "gov", "type": "official"},
               {"source_id": "lab", "type": "primary"}, {"source_id": "uncited", "type": "reporting"}]
    open_first = [claim("open", "disputed", ["lab"]), claim("settled", "established", ["blog"])]

    def ids(ordered):
        return [s["source_id"] for s in ordered]

    assert ids(domain.sources_in_focus(sources, open_first, "all")) == ["blog", "gov", "lab", "uncited"]
    assert ids(domain.sources_in_focus(sources, open_first, "primary_evidence")) == ["gov", "lab", "blog", "uncited"]
    assert ids(domain.sources_in_focus(sources, open_first, "unresolved")) == ["lab", "blog", "gov", "uncited"]


def test_a_claims_independent_unit_is_the_least_id_of_its_merge_component_and_only_moved_rows_are_rewritten():
    assert domain.merge_units(["b", "a", "c", "d"], {"g1": ["c", "b"], "g2": ["a", "c"]}) == {
        "a": "a", "b": "a", "c": "a", "d": "d"}
    rows = [view_rows.ClaimRow(c, "observation", "supported", None, None, 1, ("s1",), unit=c) for c in "abc"]
    verdict = view_rows.ClaimRow("v", "verdict", "supported", "verdict", 1, 2, ("s1",), unit="v")
    moved = view_rows.regrouped([*rows, verdict], {"g": ["c", "b", "v"]})
    assert [(r.claim_id, r.unit) for r in moved] == [("c", "b")]
    counted = view_rows.moved([r.counts() for r in rows], [r.counts() for r in [*rows[:2], *moved]])
    assert {k: v for k, v in counted.items() if v} == {"claims.independent": -1}
