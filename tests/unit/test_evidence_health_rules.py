"""Evidence health rules: what a retirement re-rates, and how the read side names it (pure, no I/O)."""

from __future__ import annotations

from collections import Counter

from services.projection import domain, view_rows
from services.projection import health as read_health
from services.projection.domain import ClaimView, LedgerSnapshot, RelationView
from shared.health import Basis, Rating, independent_origins, rerate


def test_a_claim_whose_every_cited_source_is_retired_becomes_unsupported_and_one_with_a_source_left_does_not():
    ratings = rerate(retired=[("source", "s1")], citations={"lonely": {"s1": "retired"},
                                                             "grounded": {"s1": "retired", "s2": "active"}},
                     verdict_id=None, bases=[], current={})
    assert ratings == [Rating("lonely", "unsupported", (("source", "s1"),))]


def test_the_verdict_is_weakened_when_a_basis_claim_loses_support_or_its_basis_relation_ends():
    bases = [Basis("r1", "lonely"), Basis("r2", "other"), Basis("r3", "fine")]
    ratings = rerate(retired=[("source", "s1"), ("claim", "other"), ("relation", "r2")],
                     citations={"lonely": {"s1": "retired"}}, verdict_id="v", bases=bases, current={})
    assert ratings[-1] == Rating("v", "weakened", (("claim", "lonely"), ("source", "s1"), ("claim", "other"),
                                                   ("relation", "r2")))


def test_a_verdict_weakened_again_keeps_naming_what_it_lost_first_and_rated_claims_are_not_rated_twice():
    ratings = rerate(retired=[("source", "s9")], citations={"gone": {"s9": "retired"}, "again": {"s9": "retired"}},
                     verdict_id="v", bases=[Basis("r", "gone")],
                     current={"v": [("claim", "first")], "again": [("source", "s0")]})
    assert [r.claim_id for r in ratings] == ["gone", "v"]
    assert ratings[1].lost == (("claim", "first"), ("claim", "gone"), ("source", "s9"))


def test_a_new_verdict_resting_on_a_claim_already_unsupported_is_weakened_from_the_start():
    current = {"lonely": [("source", "s1")]}
    assert rerate(retired=[], citations={}, verdict_id="v2", bases=[Basis("r", "lonely"), Basis("q", "firm")],
                  current=current) == [Rating("v2", "weakened", (("claim", "lonely"), ("source", "s1")))]
    assert rerate(retired=[], citations={}, verdict_id="v2", bases=[Basis("r", "lonely")],
                  current={**current, "v2": [("claim", "lonely")]}) == []  # rated already: nothing new


def test_a_retirement_that_touches_no_basis_leaves_the_verdict_as_it_was():
    assert rerate(retired=[("source", "s1")], citations={"side": {"s1": "retired"}}, verdict_id="v",
                  bases=[Basis("r", "main")], current={}) == [Rating("side", "unsupported", (("source", "s1"),))]


def test_sources_of_one_publisher_count_once_toward_independent_origins():
    assert independent_origins(["Example Agency", "example  agency ", "Another Lab", ""]) == 2


def snapshot_with_ratings() -> LedgerSnapshot:
    def claim(claim_id: str, sources: tuple[str, ...], kind: str = "observation") -> ClaimView:
        return ClaimView(claim_id, "t", kind, "supported", "verdict" if kind == "verdict" else None, 1, sources, 1)

    return LedgerSnapshot(
        revision=5,
        claims=[claim("lonely", ("gone",)), claim("firm", ("p1", "p2")), claim("v", ("p1",), "verdict")],
        source_types={"p1": "primary", "p2": "official"},
        publishers={"p1": "Agency", "p2": "agency"},
        relations=[RelationView("b1", "lonely", "v", "supports", True), RelationView("b2", "firm", "v", "supports", True)],
        health={"lonely": ("unsupported", [{"record": "source", "id": "gone"}]),
                "v": ("weakened", [{"record": "claim", "id": "lonely"}, {"record": "source", "id": "gone"}])},
    )


def test_the_summary_names_unsupported_claims_and_the_weakened_verdict():
    view = domain.case_view(snapshot_with_ratings(), [])
    health = view["summary"]["evidenceHealth"]
    assert health["unsupported"] == {"total": 1, "claimIds": ["lonely"], "omitted": 0}
    assert health["verdictHealth"] == "weakened" and health["independentOrigins"] == 1
    verdict = view["summary"]["verdict"]
    assert verdict["health"] == "weakened" and verdict["lost"][0] == {"record": "claim", "id": "lonely"}
    assert verdict["independentBases"] == 2 and verdict["independentOrigins"] == 1


def test_unresolved_lists_the_weakened_verdict_and_each_unsupported_claim_with_what_it_lost():
    items = read_health.unresolved(snapshot_with_ratings())
    assert [(i["type"], i["claimId"]) for i in items] == [("verdict_weakened", "v"), ("claim_unsupported", "lonely")]
    assert items[0]["detail"].endswith("claim lonely, source gone") and items[1]["detail"].endswith("gone")
    assert ("claim_unsupported", "lonely") in {(i["type"], i.get("claimId")) for i in domain.unresolved(
        snapshot_with_ratings())}


def test_the_rows_of_a_rebuilt_view_hold_the_ratings_in_the_order_and_counts_the_read_rules_give():
    snapshot = snapshot_with_ratings()
    rows = view_rows.case_rows(snapshot)
    ordered = sorted(rows.unresolved, key=lambda u: (u.band, u.claim_revision, u.claim_id, u.position))
    assert [u.item for u in ordered] == domain.unresolved(snapshot)
    assert {r.claim_id: r.health for r in rows.claims} == {"lonely": "unsupported", "firm": "supported",
                                                           "v": "weakened"}
    assert rows.origins == {"agency": 2} and rows.counts["sources.origins"] == 1
    health = view_rows.evidence_health(rows.counts, True, ["lonely"], "weakened")
    assert health == domain.evidence_health(snapshot)


def test_a_rating_a_change_carries_replaces_the_rows_rating_and_moves_the_unsupported_counter():
    row = view_rows.ClaimRow("c", "observation", "supported", None, None, 1, ("s1",), strong=True, unit="c")
    rated = row.rerated("unsupported", [{"record": "source", "id": "s1"}])
    assert view_rows.moved([row.counts()], [rated.counts()]) == Counter({"claims.unsupported": 1})
    assert [(u.band, u.item["type"]) for u in view_rows.claim_unresolved(rated)] == [(1, "claim_unsupported")]
