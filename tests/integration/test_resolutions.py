"""Predictions resolve (a ledger change with its events; bad input refused naming the field; never undone, only
superseded with a note), and an agent's track record — its Brier score and calibration worked out by hand."""

from __future__ import annotations

import httpx2
import pytest

from tests.events import stream_events, wait_until_projected, wait_until_published
from tests.factories import agent_session, claim_item, decide, source_item, ui_sign_in


async def resolve(stack, case_id: str, status: int = 200, **body) -> dict:
    async with stack.api() as api:
        response = await api.post(f"/api/v1/cases/{case_id}/resolutions", json=body)
    assert response.status_code == status, response.text
    return response.json()


async def record(stack, name: str, role: str = "reviewer", status: int = 200) -> dict:
    async with stack.api(role) as api:
        response = await api.get(f"/api/v1/agents/{name}/record")
    assert response.status_code == status, response.text
    return response.json()


# Predictions unlike each other: staging flags restatements as possible duplicates, and the track record counts them.
SAID = {
    "p1": "Copper prices double within {year}.", "p2": "Rail freight overtakes road haulage in {year}.",
    "p3": "Offshore wind supplies a third of the grid by {year}.", "p4": "Grain harvests fall after the {year} drought.",
    "p5": "Airline fares halve for short flights in {year}.", "p6": "Chip exports from Taiwan peak during {year}.",
    "p7": "The Rhine runs too low for barges each summer until {year}.", "p8": "Coal imports to India stop by {year}.",
    "p9": "Ten-year bond yields exceed nine percent in {year}.", "p10": "Tourist arrivals in Kyoto recover by {year}.",
    "p11": "Steel output in Brazil triples before {year}.", "past": "Vaccine uptake among adults tops 95% in {year}.",
    "future": "Every city bus in Oslo is electric by {year}.",
}


def prediction(claim_id: str, confidence: str, year: int = 2025) -> dict:
    return claim_item(claim_id, ["outcomes"], kind="prediction", confidence=confidence,
                      text=SAID[claim_id].format(year=year))


async def test_a_resolution_is_a_revision_with_its_events_and_bad_input_is_refused_naming_the_field(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes"), source_item("gone")])
        await agent.accepted("stage_claims", claims=[prediction("p1", "supported"),
                                                     claim_item("seen", ["outcomes"])])
        async with stack.api() as api:
            assert (await api.post(f"/api/v1/cases/{agent.case_id}/retirements", json={
                "records": [{"record": "source", "id": "gone"}], "note": "withdrawn"})).status_code == 200
        before = await agent.revision()
        body = {"claimId": "p1", "outcome": "true", "sourceId": "outcomes", "resolvedOn": "2026-01-15"}

        refused = [
            ({**body, "claimId": "seen"}, "claimId"),  # an observation, not a prediction
            ({**body, "claimId": "nothing"}, "claimId"),
            ({**body, "sourceId": "gone"}, "sourceId"),  # retired: not canonical
            ({**body, "sourceId": "nowhere"}, "sourceId"),
            ({**body, "resolvedOn": "2999-01-01"}, "resolvedOn"),
            ({**body, "resolvedOn": "2026-02-30"}, "resolvedOn"),
            ({**body, "outcome": "maybe"}, "outcome"),
            ({**body, "note": "  "}, "note"),  # blank: says nothing
        ]
        messages = []
        for bad, field in refused:
            async with stack.api() as api:
                response = await api.post(f"/api/v1/cases/{agent.case_id}/resolutions", json=bad)
            assert response.status_code in (400, 404, 422), response.text
            error = response.json()["error"]
            assert error.get("field") == field or field in {p["field"] for p in error.get("problems", [])}, error
            messages.append(error["message"])
        assert "claim 'seen' is of kind observation, not a canonical prediction" in messages[0]
        assert await agent.revision() == before  # nothing refused changed the ledger

        first = await resolve(stack, agent.case_id, **body)
        assert first["revision"] == before + 1 and first["resolved"]["outcome"] == "true"
        again = await resolve(stack, agent.case_id, 422, **{**body, "outcome": "false"})
        assert again["error"]["field"] == "note"  # resolving twice without a note
        blank = await resolve(stack, agent.case_id, 422, **{**body, "outcome": "false", "note": " \n "})
        assert blank["error"]["field"] == "note"  # nor with a blank one
        same = (await resolve(stack, agent.case_id, 409, **body))["error"]
        assert same["field"] == "claimId" and "claim 'p1' is already resolved so" in same["message"]
        second = await resolve(stack, agent.case_id, **{**body, "outcome": "void", "note": "the series was revised"})
        assert second["revision"] == before + 2 and second["resolved"]["supersedes"] == first["resolved"]["resolutionId"]

        await wait_until_published(stack.db)
        events = [e for e in await stream_events(stack.settings) if e["subject"] == f"case/{agent.case_id}"]
        resolved = [e for e in events if e["type"] == "threadline.prediction.resolved"]
        assert [(e["revision"], e["data"]["outcome"]) for e in resolved] == [(before + 1, "true"), (before + 2, "void")]
        assert resolved[1]["data"]["note"] == "the series was revised"
        changed = {e["revision"]: e["data"] for e in events if e["type"] == "threadline.ledger.changed"}
        assert changed[before + 1]["changes"]["resolved"][0]["claimId"] == "p1"
        assert changed[before + 2]["previousRevision"] == before + 1


async def test_the_track_record_of_ten_resolved_predictions_matches_the_figures_worked_out_by_hand(stack):
    outcomes = {  # claim: (confidence, outcome)
        "p1": ("established", "true"), "p2": ("established", "true"), "p3": ("established", "false"),
        "p4": ("supported", "true"), "p5": ("supported", "false"), "p6": ("supported", "true"),
        "p7": ("disputed", "true"), "p8": ("disputed", "false"),
        "p9": ("contradicted", "false"), "p10": ("unknown", "true"),
        "p11": ("supported", "void"),  # void: resolved, but never scored
    }
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes")])
        listed = [prediction(c, conf) for c, (conf, _) in outcomes.items()] + [claim_item("dull", ["outcomes"])]
        for start in range(0, len(listed), 4):  # at most four claims a call: three proposals
            staged = await agent.stage("stage_claims", claims=listed[start:start + 4])
            ids = [i["itemId"] for i in staged["items"]]
            await decide(stack, staged["proposalId"], accept=[i for i in ids if i != "dull"],
                         reject=[i for i in ids if i == "dull"], note="says nothing new" if "dull" in ids else None)
        for claim_id, (_, outcome) in outcomes.items():
            await resolve(stack, agent.case_id, claimId=claim_id, outcome=outcome, sourceId="outcomes",
                          resolvedOn="2026-01-02")
        pending = await agent.stage("stage_claims", claims=[claim_item("later", ["outcomes"])])
        rejected = await agent.stage("stage_claims", claims=[claim_item("again", ["outcomes"])])
        await decide(stack, rejected["proposalId"], reject=["again"], note="says nothing new")
        assert pending["proposalId"]

        found = await record(stack, agent.name)
        # By hand: (p - o)² per scored prediction, p from docs/review-checks.md.
        # established .95: T, T, F -> .0025 + .0025 + .9025 = .9075
        # supported   .75: T, F, T -> .0625 + .5625 + .0625 = .6875
        # disputed    .50: T, F    -> .25 + .25             = .5
        # contradicted .10: F      -> .01
        # unknown     .50: T       -> .25
        # sum 2.355 over 10 -> Brier .2355
        assert found["predictions"]["resolved"] == 10 and found["predictions"]["void"] == 1
        assert found["predictions"]["brier"] == pytest.approx(0.2355)
        table = [(r["confidence"], r["n"], r["true"]) for r in found["predictions"]["calibration"]]
        assert table == [("established", 3, 2), ("supported", 3, 2), ("disputed", 2, 1), ("unknown", 1, 1),
                         ("contradicted", 1, 0)]
        assert found["agent"] == agent.name and found["proposals"] == 6  # sources, three of claims, later, again
        assert found["items"] == {"accepted": 12, "rejected": 2, "pending": 1}
        assert found["acceptanceRate"] == pytest.approx(12 / 14, abs=1e-6)
        assert found["rejectionNotes"] == [{"note": "says nothing new", "count": 2}]
        assert found["checks"]["prediction-established"] == 3  # p1, p2, p3 staged as established
        assert found["duplicatesFlagged"] == 0

        assert (await record(stack, agent.name, role="admin"))["proposals"] == 6
        assert (await record(stack, "nobody-at-all", status=404))["error"]["field"] == "name"


async def test_predictions_whose_year_passed_are_listed_until_resolved_and_the_outcome_shows_everywhere(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes")])
        made = await agent.accepted("stage_claims", claims=[prediction("past", "supported", 2020),
                                                            prediction("future", "supported", 2999)])
        summary = await agent.ok("get_workspace", {})
        assert [d["claimId"] for d in summary["predictionsDue"]["items"]] == ["past"]
        section = (await agent.ok("get_workspace", {"scope": "unresolved"}))["unresolved"]["predictionsDue"]
        assert section["total"] == 1 and section["items"][0]["year"] == 2020

        resolved = await resolve(stack, agent.case_id, claimId="past", outcome="false", sourceId="outcomes",
                                 resolvedOn="2021-01-01")
        assert (await agent.ok("get_workspace", {}))["predictionsDue"]["total"] == 0
        claims = {c["claimId"]: c for c in (await agent.ok("get_workspace", {"scope": "claims"}))["claims"]["items"]}
        assert claims["past"]["resolution"] == {"outcome": "false", "resolvedOn": "2021-01-01", "sourceId": "outcomes"}
        assert "resolution" not in claims["future"]
        async with stack.api() as api:
            nodes = {n["id"]: n for n in (await api.get(f"/api/v1/cases/{agent.case_id}/graph")).json()["nodes"]}
        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
            page = (await http.get(f"/ui/cases/{agent.case_id}")).text
            accepted_page = (await http.get(f"/ui/proposals/{made['proposalId']}")).text
        assert nodes["past"]["resolution"]["outcome"] == "false" and nodes["future"].get("resolution") is None
        assert "resolved false · 2021-01-01" in page and "resolved FALSE · 2021-01-01" in page  # the list; the map

        # The page of the proposal that made the prediction canonical: its outcome, day, source and reviewer.
        async with stack.api() as api:
            shown = {i["itemId"]: i for i in (await api.get(f"/api/v1/proposals/{made['proposalId']}")).json()["items"]}
        by, at = resolved["resolvedBy"], resolved["revision"]
        assert shown["past"]["resolution"] == {"outcome": "false", "resolvedOn": "2021-01-01", "sourceId": "outcomes",
                                               "resolvedBy": by, "revision": at}
        assert "resolution" not in shown["future"]
        assert (f'id="resolution-past">Resolved <strong>FALSE</strong> · 2021-01-01 · citing <a class="mono" '
                f'href="/ui/cases/{agent.case_id}#source-outcomes">outcomes</a> · by {by} (revision {at})'
                in accepted_page)
        assert 'id="resolution-future"' not in accepted_page


async def test_an_item_resembling_two_records_counts_once_among_the_duplicates_an_agent_staged(stack):
    text = "Acme Corp shipped 1,200 turbines to Norway in March 2024, according to its annual report."
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes")])
        await agent.accepted("stage_claims", claims=[claim_item("c-first", ["outcomes"], text=text),
                                                     claim_item("c-second", ["outcomes"], text=text + " Indeed.")])
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)  # the search index the staging compares against
        staged = await agent.stage("stage_claims", claims=[claim_item("c-third", ["outcomes"], text=text.upper())])
        assert {f["of"]["id"] for f in staged["possibleDuplicates"]} == {"c-first", "c-second"}
        assert (await record(stack, agent.name))["duplicatesFlagged"] == 1


async def test_a_resolution_with_several_bad_fields_is_refused_once_naming_each_with_its_fix(stack):
    async with agent_session(stack) as agent:
        await agent.accepted("stage_sources", sources=[source_item("outcomes")])
        await agent.accepted("stage_claims", claims=[prediction("p1", "supported")])
        for day in ("2026-02-30", "yesterday"):
            error = (await resolve(stack, agent.case_id, 422, claimId="p1", outcome="maybe", sourceId="outcomes",
                                   resolvedOn=day))["error"]
            fixes = {p["field"]: p["hint"] for p in error.get("problems", [])}
            assert set(fixes) == {"outcome", "resolvedOn"}, error
            assert "YYYY-MM-DD" in fixes["resolvedOn"], fixes
