"""Through `threadline up` (its own NATS users and permissions): the demo's pending prediction is flagged, one
check is turned off by configuration, a reviewer resolves the prediction, and the agent's record counts it all."""

from __future__ import annotations

import httpx2
import pytest

from services.cli.demo import DEMO_AGENT, DEMO_CASE_ID
from services.cli.demo_case import PENDING_PREDICTION
from tests.e2e.system import start_system


@pytest.mark.slow
def test_checks_resolutions_and_records_through_threadline_up(tmp_path):
    system = start_system(tmp_path / "data", demo=True,
                          env={"THREADLINE_REVIEW_CHECKS_DISABLED": "confidence-beyond-sources"})
    try:
        with httpx2.Client(base_url=system.http_url, timeout=15,
                           headers={"Authorization": f"Bearer {system.credentials['reviewer']}"}) as api:
            pending = api.get(f"/api/v1/cases/{DEMO_CASE_ID}/proposals").json()["proposals"]
            proposal = next(p for p in pending if p["items"][0]["itemId"] == PENDING_PREDICTION[1])
            read = api.get(f"/api/v1/proposals/{proposal['proposalId']}").json()
            assert [c["check"] for c in read["items"][0]["reviewChecks"]] == ["prediction-established"]  # one off
            decided = api.post(f"/api/v1/proposals/{proposal['proposalId']}/decisions", json={
                "accept": [PENDING_PREDICTION[1]], "reject": [], "note": "accepted to be resolved",
                "expectedRevision": read["caseRevision"]})
            assert decided.status_code == 200, decided.text

            refused = api.post(f"/api/v1/cases/{DEMO_CASE_ID}/resolutions", json={
                "claimId": "demo-claim-grid", "outcome": "true", "sourceId": "demo-grid-outlook",
                "resolvedOn": "2026-01-01"})
            assert refused.status_code == 422 and refused.json()["error"]["field"] == "claimId"
            resolved = api.post(f"/api/v1/cases/{DEMO_CASE_ID}/resolutions", json={
                "claimId": PENDING_PREDICTION[1], "outcome": "void", "sourceId": "demo-grid-outlook",
                "resolvedOn": "2026-01-01", "note": "the target year was withdrawn"})
            assert resolved.status_code == 200, resolved.text

            found = api.get(f"/api/v1/agents/{DEMO_AGENT}/record").json()
            assert found["checks"].get("prediction-established") == 1
            assert "confidence-beyond-sources" not in found["checks"]
            assert found["predictions"]["void"] == 1 and found["predictions"]["brier"] is None
            mine = api.get("/api/v1/agents/agent/record").json()  # up's agent token: the demo staged nothing as it
            assert mine["proposals"] == 0 and mine["checks"] == {} and mine["predictions"]["void"] == 0
    finally:
        system.stop()
