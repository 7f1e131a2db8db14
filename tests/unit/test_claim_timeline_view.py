"""A claim's timeline lists at most TIMELINE_CAP stagings, as it does relations and groups, and names what it cut."""

from __future__ import annotations

from datetime import UTC, datetime

from services.review.history_views import NO_LINKS, TIMELINE_CAP, timeline_view


def staging(n: int) -> dict:
    return {"proposal_id": f"p-{n:04d}", "kind": "claims", "agent_name": "agent", "created_at": datetime(2026, 1, 1, tzinfo=UTC),
            "pinned_revision": 1, "staged_revision": 1, "outcome": None,
            "payload": {"text": "Revenue grew.", "kind": "fact", "confidence": 0.5}}


def test_a_claim_staged_as_often_as_the_cap_says_its_stagings_were_cut_and_one_staged_less_does_not():
    cut = timeline_view("case", "c", None, NO_LINKS, [staging(n) for n in range(TIMELINE_CAP)])
    assert cut["omitted"] == {"stagings": TIMELINE_CAP}
    assert sum(e["event"] == "staged" for e in cut["events"]) == TIMELINE_CAP
    whole = timeline_view("case", "c", None, NO_LINKS, [staging(n) for n in range(TIMELINE_CAP - 1)])
    assert whole["omitted"] == {} and whole["status"] == "pending"
