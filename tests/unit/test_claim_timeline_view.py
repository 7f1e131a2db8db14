"""A claim's timeline lists at most its cap of each list, and `omitted` says how many each cut list left out, as a
diff's does: the repository hands over the first cap + 1 rows of each, each row with the list's total."""

from __future__ import annotations

from datetime import UTC, datetime

from services.review.history_views import NO_LINKS, TIMELINE_CAP, timeline_view


def staging(n: int, total: int) -> dict:
    return {"proposal_id": f"p-{n:04d}", "kind": "claims", "agent_name": "agent", "created_at": datetime(2026, 1, 1, tzinfo=UTC),
            "pinned_revision": 1, "staged_revision": 1, "outcome": None, "total": total,
            "payload": {"text": "Revenue grew.", "kind": "fact", "confidence": 0.5}}


def stagings(total: int) -> list[dict]:
    return [staging(n, total) for n in range(min(total, TIMELINE_CAP + 1))]


def test_a_claim_staged_as_often_as_the_cap_lists_every_staging_and_cuts_nothing():
    whole = timeline_view("case", "c", None, NO_LINKS, stagings(TIMELINE_CAP))
    assert whole["omitted"] == {} and whole["status"] == "pending"
    assert sum(e["event"] == "staged" for e in whole["events"]) == TIMELINE_CAP


def test_a_claim_staged_more_often_than_the_cap_lists_the_cap_and_says_how_many_it_left_out():
    cut = timeline_view("case", "c", None, NO_LINKS, stagings(TIMELINE_CAP + 37))
    assert cut["omitted"] == {"stagings": 37}
    assert sum(e["event"] == "staged" for e in cut["events"]) == TIMELINE_CAP


def resolution(n: int, total: int) -> dict:
    return {"resolution_id": f"r-{n}", "claim_id": "c", "outcome": "true", "resolved_on": "2026-02-01",
            "source_id": None, "supersedes": None, "note": None, "revision": 2 + n, "resolved_by": "reviewer",
            "at": datetime(2026, 2, 1, tzinfo=UTC), "total": total}


def test_a_predictions_resolutions_past_the_cap_are_cut_and_counted_in_omitted():
    claim = {"claim_id": "c", "proposal_id": None, "revision": 1, "decided_by": "reviewer",
             "decided_at": datetime(2026, 1, 1, tzinfo=UTC), "decision_id": "d", "supersedes": None,
             "ended_revision": None, "text": "It will rain.", "kind": "prediction", "confidence": 0.5,
             "status": "active"}
    links = {**NO_LINKS, "resolutions": [resolution(n, 3) for n in range(3)]}
    view = timeline_view("case", "c", claim, links, [], cap=2)
    assert view["omitted"] == {"resolutions": 1}
    assert [e["resolutionId"] for e in view["events"] if e["event"] == "resolved"] == ["r-0", "r-1"]
