"""The reviewers' API: item-by-item, atomic, conflict-safe decisions; roles; append-only history."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
from fastapi.routing import APIRoute
from sqlalchemy import func, select, text

from services.gateway import http_api
from services.gateway.app import create_app
from services.gateway.auth import TokenStore
from shared import contracts as c
from shared.db.tables import change_log, claims, item_decisions, outbox
from tests.factories import (
    agent_session,
    claim_item,
    decide,
    merge_item,
    new_company,
    preview_args,
    relation_item,
    seed,
    source_item,
    unique,
    verdict_claim,
)
from tests.processes import threadline


async def test_items_are_decided_one_by_one_and_each_decision_is_one_revision(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item(c, [source]) for c in ("c1", "c2", "c3")])
        first = await decide(stack, staged["proposalId"], accept=["c1"], reject=["c2"], note="c2 overreaches",
                             expected_revision=1)
        assert first == first | {"revision": 2, "accepted": ["c1"], "rejected": ["c2"], "refused": [],
                                 "status": "pending"}
        second = await decide(stack, staged["proposalId"], reject=["c3"], expected_revision=2)
        assert second["revision"] == 2 and second["status"] == "partially_accepted"
        async with stack.api() as api:
            shown = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
        assert {i["itemId"]: i["status"] for i in shown["items"]} == {"c1": "accepted", "c2": "rejected",
                                                                       "c3": "rejected"}
        assert all(i["decidedBy"] == "reviewer" for i in shown["items"])
        canonical = (await agent.ok("get_workspace", {"scope": "claims"}))["claims"]["items"]
        assert [c["claimId"] for c in canonical] == ["c1"]


async def test_a_proposal_shows_what_accepting_would_change_and_why_it_no_longer_can(stack):
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=2)
        a, b = ids["claims"]
        merge = await agent.stage("stage_merge", groups=[merge_item("g1", [a, b])])
        verdict = await agent.stage("stage_verdict", claim=verdict_claim("v1", ids["sources"]),
                                    relations=[relation_item("r-av", a, "v1")])
        async with stack.api() as api:
            shown = (await api.get(f"/api/v1/proposals/{merge['proposalId']}")).json()
            preview = shown["items"][0]["wouldChange"]
            assert preview["acceptable"] and preview["change"]["joins"] == [a, b]
            retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements",
                                     json={"records": [{"record": "claim", "id": b}], "note": "duplicate"})
            assert retired.status_code == 200, retired.text
            shown = (await api.get(f"/api/v1/proposals/{merge['proposalId']}")).json()
            preview = shown["items"][0]["wouldChange"]
            assert not preview["acceptable"]
            assert preview["problems"][0]["message"] == f"the claim {b!r} is retired"
            outcome = await decide(stack, merge["proposalId"], accept=["g1"])
            assert outcome["accepted"] == [] and outcome["refused"][0]["itemId"] == "g1"
            assert "retired" in outcome["refused"][0]["reason"]
            shown = (await api.get(f"/api/v1/proposals/{verdict['proposalId']}")).json()
            change = shown["items"][0]["wouldChange"]["change"]
            assert change["bases"] == ["r-av"] and change["supersedes"] is None


async def test_a_failure_mid_decision_changes_nothing(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("fine", [source]),
                                                           claim_item("explodes", [source])])
        async with stack.db.engine.begin() as connection:
            await connection.execute(text(
                "CREATE FUNCTION fail_on_explodes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.claim_id = 'explodes' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$"))
            await connection.execute(text(
                "CREATE TRIGGER inject_failure BEFORE INSERT ON claims FOR EACH ROW EXECUTE FUNCTION fail_on_explodes()"))
        try:
            async with stack.db.engine.connect() as connection:
                outbox_before = (await connection.execute(select(func.count()).select_from(outbox))).scalar_one()
            async with stack.api() as api:
                failed = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                        json={"accept": ["fine", "explodes"], "expectedRevision": 1})
            assert failed.status_code == 500
            assert failed.json()["error"]["code"] == "internal" and "injected" not in failed.text
        finally:
            async with stack.db.engine.begin() as connection:
                await connection.execute(text("DROP TRIGGER inject_failure ON claims"))
                await connection.execute(text("DROP FUNCTION fail_on_explodes()"))
        assert await agent.revision() == 1
        async with stack.db.engine.connect() as connection:
            assert (await connection.execute(select(func.count()).select_from(claims).where(
                claims.c.case_id == agent.case_id))).scalar_one() == 0
            assert (await connection.execute(select(func.count()).select_from(item_decisions).where(
                item_decisions.c.proposal_id == staged["proposalId"]))).scalar_one() == 0
            assert (await connection.execute(select(func.count()).select_from(change_log).where(
                change_log.c.case_id == agent.case_id))).scalar_one() == 1
            assert (await connection.execute(select(func.count()).select_from(outbox))).scalar_one() == outbox_before
        retried = await decide(stack, staged["proposalId"], accept=["fine", "explodes"], expected_revision=1)
        assert retried["revision"] == 2 and retried["accepted"] == ["fine", "explodes"]


async def test_a_decision_on_a_stale_view_is_refused(stack):
    async with agent_session(stack) as agent:
        await seed(agent, sources=1)
        staged = await agent.stage("stage_sources", sources=[source_item("late")])
        refused = await decide(stack, staged["proposalId"], accept=["late"], expected_revision=0, status=409)
        assert refused["error"]["code"] == "stale_revision" and refused["error"]["details"]["currentRevision"] == 1
        assert await agent.revision() == 1


async def test_twenty_pairs_of_conflicting_decisions_in_parallel_have_one_winner_each(stack):
    """Two reviewers on the same page (the same expectedRevision) decide at once: one wins, the other is told why."""

    async def pair(kind: str, n: int):
        async with agent_session(stack) as agent:
            ids = await seed(agent, sources=1, claims=2 if kind == "same new group id" else 0)
            source, claims_ = ids["sources"][0], ids["claims"]
            if kind == "same new claim id":
                p1 = await agent.stage("stage_claims", claims=[claim_item(f"taken-id-{n}", [source])])
                p2 = await agent.stage("stage_claims", claims=[claim_item(f"taken-id-{n}", [source], text="Other.")])
                first, second = (p1["proposalId"], {"accept": [f"taken-id-{n}"]}), \
                    (p2["proposalId"], {"accept": [f"taken-id-{n}"]})
            elif kind == "same new group id":
                g1 = await agent.stage("stage_merge", groups=[merge_item(f"group-{n}", claims_)])
                g2 = await agent.stage("stage_merge", groups=[merge_item(f"group-{n}", claims_, label="Rival")])
                first, second = (g1["proposalId"], {"accept": [f"group-{n}"]}), \
                    (g2["proposalId"], {"accept": [f"group-{n}"]})
            else:
                item = f"item-{n}"
                p = (await agent.stage("stage_claims", claims=[claim_item(item, [source])]))["proposalId"]
                first, second = {
                    "same item, both accept": ((p, {"accept": [item]}), (p, {"accept": [item]})),
                    "same item, accept and reject": ((p, {"accept": [item]}), (p, {"reject": [item], "note": "no"})),
                    "same item, both reject": ((p, {"reject": [item], "note": "a"}),
                                               (p, {"reject": [item], "note": "b"})),
                }[kind]
            seen = await agent.revision()  # what both reviewers' pages show
        pin = {"expectedRevision": seen}
        return f"{kind} #{n}", agent.case_id, seen, (first[0], first[1] | pin), (second[0], second[1] | pin)

    kinds = ["same item, both accept", "same item, accept and reject", "same item, both reject",
             "same new claim id", "same new group id"]
    pairs = await asyncio.gather(*(pair(kind, n) for kind in kinds for n in range(4)))
    assert len(pairs) == 20

    async def attempt(proposal_id, body, reviewer):
        async with stack.api(token=reviewer) as api:
            response = await api.post(f"/api/v1/proposals/{proposal_id}/decisions", json=body)
        assert response.status_code in (200, 409), response.text
        outcome = response.json()
        return bool(outcome.get("accepted") or outcome.get("rejected")), outcome

    reviewers = [await stack.issue_token("reviewer", f"reviewer-{n}") for n in range(2)]
    results = await asyncio.gather(*(
        asyncio.gather(attempt(*first, reviewers[0]), attempt(*second, reviewers[1]))
        for _, _, _, first, second in pairs))
    stale = refused = 0
    for (label, case_id, seen, _, _), ((won_1, out_1), (won_2, out_2)) in zip(pairs, results, strict=True):
        assert won_1 != won_2, f"{label}: {out_1} / {out_2}"
        winner, loser = (out_1, out_2) if won_1 else (out_2, out_1)
        # The loser is told why: its view went stale (the winner moved the case), or its item was decided.
        if "error" in loser:
            assert loser["error"]["code"] == "stale_revision", f"{label}: {loser}"
            assert loser["error"]["details"]["currentRevision"] == seen + 1, f"{label}: {loser}"
            stale += 1
        else:
            assert loser["refused"] and loser["recorded"] is False, f"{label}: the loser must be told why: {loser}"
            refused += 1
        async with stack.db.engine.connect() as connection:
            revisions = (await connection.execute(select(change_log.c.revision).where(
                change_log.c.case_id == case_id).order_by(change_log.c.revision))).scalars().all()
        assert revisions == list(range(1, seen + bool(winner["accepted"]) + 1)), label
    assert stale and refused  # both ways of losing happened


async def test_a_decision_must_name_the_revision_it_was_made_on(stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("unpinned")])
        async with stack.api() as api:
            for body in ({"accept": ["unpinned"]}, {"accept": ["unpinned"], "expectedRevision": None}):
                response = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions", json=body)
                assert response.status_code == 422, response.text
                error = response.json()["error"]
                assert error["code"] == "invalid_argument" and error["field"] == "expectedRevision"
                assert "caseRevision" in error["hint"]
        assert (await agent.proposals("pending"))[0]["items"][0]["status"] == "pending"
        assert await agent.revision() == 0


async def test_when_every_chosen_item_is_refused_nothing_is_recorded_and_the_reply_says_so(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("once", [source])])
        rival = await agent.stage("stage_claims", claims=[claim_item("once", [source], text="Rival.")])
        await decide(stack, staged["proposalId"], accept=["once"])
        outcome = await decide(stack, rival["proposalId"], accept=["once"], note="this note goes nowhere")
        assert outcome["recorded"] is False and outcome["decisionId"] is None
        assert outcome["accepted"] == [] and outcome["refused"][0]["itemId"] == "once"
        async with stack.api() as api:
            shown = (await api.get(f"/api/v1/proposals/{rival['proposalId']}")).json()
        assert shown["decisions"] == [] and shown["status"] == "pending"


async def test_a_proposal_shows_its_decisions_with_who_when_the_note_and_each_outcome(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item(c, [source]) for c in ("d1", "d2", "d3")])
        url = f"/api/v1/cases/{agent.case_id}/proposals"

        async def listed_as(status: str) -> list[str]:
            async with stack.api() as api:
                return [p["proposalId"] for p in (await api.get(url, params={"status": status})).json()["proposals"]]

        first = await decide(stack, staged["proposalId"], accept=["d1"], reject=["d2"], note="d2 <overreaches>")
        assert staged["proposalId"] in await listed_as("pending"), "d3 is still undecided"
        assert staged["proposalId"] not in await listed_as("decided")
        second = await decide(stack, staged["proposalId"], reject=["d3"], note="d3 is a duplicate", role="admin")
        assert staged["proposalId"] not in await listed_as("pending")
        assert staged["proposalId"] in await listed_as("accepted"), "partially accepted is listed as accepted"
        assert staged["proposalId"] not in await listed_as("rejected")
        async with stack.api() as api:
            shown = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
            listed = (await api.get(url, params={"status": "decided"})).json()
        assert [d["decisionId"] for d in shown["decisions"]] == [first["decisionId"], second["decisionId"]]
        one, two = shown["decisions"]
        assert one == one | {"reviewer": "reviewer", "note": "d2 <overreaches>", "accepted": ["d1"],
                             "rejected": ["d2"], "refused": [], "expectedRevision": 1, "revisionAfter": 2}
        assert two == two | {"reviewer": "admin", "note": "d3 is a duplicate", "accepted": [], "rejected": ["d3"],
                             "revisionAfter": None}
        assert one["decidedAt"] <= two["decidedAt"]
        assert listed["proposals"][0]["proposalId"] == staged["proposalId"]
        assert listed["proposals"][0]["decisions"] == shown["decisions"]


async def test_decided_proposals_are_listed_most_recently_decided_first(stack):
    async with agent_session(stack) as agent:
        await seed(agent, sources=1)
        older = await agent.stage("stage_sources", sources=[source_item("staged-first")])
        newer = await agent.stage("stage_sources", sources=[source_item("staged-second")])
        await decide(stack, newer["proposalId"], reject=["staged-second"], note="no")
        await decide(stack, older["proposalId"], accept=["staged-first"])
        async with stack.api() as api:
            def ids(response):
                assert response.status_code == 200, response.text
                return [p["proposalId"] for p in response.json()["proposals"]]

            url = f"/api/v1/cases/{agent.case_id}/proposals"
            decided = ids(await api.get(url, params={"status": "decided"}))
            assert decided[:2] == [older["proposalId"], newer["proposalId"]]
            assert ids(await api.get(url, params={"status": "rejected"})) == [newer["proposalId"]]
            assert older["proposalId"] in ids(await api.get(url, params={"status": "accepted", "limit": 2}))


async def test_history_pages_back_with_before_and_a_next_cursor(stack):
    async with agent_session(stack) as agent:
        await seed(agent, sources=1)  # revision 1, through a proposal
        async with stack.api() as api:
            for n in range(4):  # revisions 2-5, recorded directly
                recorded = await api.post(f"/api/v1/cases/{agent.case_id}/sources",
                                          json={"sources": [source_item(f"direct-{n}")]})
                assert recorded.status_code == 201, recorded.text
            url = f"/api/v1/cases/{agent.case_id}/history"
            pages, before = [], None
            for _ in range(5):  # three pages, and a bound should the cursor never end
                page = await api.get(url, params={"limit": 2, **({"before": before} if before is not None else {})})
                assert page.status_code == 200, page.text
                pages.append([c["revision"] for c in page.json()["changes"]])
                before = page.json()["nextBefore"]
                if before is None:
                    break
            assert pages == [[5, 4], [3, 2], [1]]
            everything = (await api.get(url)).json()
            assert [c["revision"] for c in everything["changes"]] == [5, 4, 3, 2, 1]
            assert everything["nextBefore"] is None
            proposal_id = (await agent.proposals("decided"))[0]["proposalId"]
            assert everything["changes"][-1]["proposalId"] == proposal_id
            assert everything["changes"][0]["proposalId"] is None  # recorded directly, no proposal
            for params, field in (({"limit": 0}, "limit"), ({"limit": 501}, "limit"), ({"before": -1}, "before"),
                                  ({"before": "x"}, "before")):
                refused = await api.get(url, params=params)
                assert refused.status_code == 422 and refused.json()["error"]["field"] == field, refused.text


async def test_rejecting_a_delta_requires_a_note(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        operation = await committed_delta(mcp, company)
        async with stack.api() as api:
            url = f"/api/v1/deltas/{operation}/decision"
            for body in ({"decision": "reject"}, {"decision": "reject", "note": "   "},
                         {"decision": "reject", "note": None}):
                refused = await api.post(url, json=body)
                assert refused.status_code == 422, refused.text
                assert refused.json()["error"] == refused.json()["error"] | {"code": "invalid_argument",
                                                                            "field": "note"}
                assert (await api.get(f"/api/v1/deltas/{operation}")).json()["status"] == "committed"
            rejected = await api.post(url, json={"decision": "reject", "note": "The filing says otherwise."})
            assert rejected.status_code == 200 and rejected.json()["status"] == "rejected", rejected.text


async def committed_delta(mcp, company) -> str:
    """A committed thesis delta waiting for review; returns its operation id."""
    preview = await mcp.call_tool("propose_claim_delta_from_source",
                                  preview_args(company, unique("key"), proposedClaims=[], affectedClaimIds=[]))
    assert not preview.is_error, preview.content[0].text
    operation = preview.structured_content["operationId"]
    committed = await mcp.call_tool("propose_claim_delta_from_source", {
        "mode": "commit", "operationId": operation, "commitToken": preview.structured_content["commitToken"]})
    assert not committed.is_error, committed.content[0].text
    return operation


# --- every endpoint of the API, from its router -----------------------------------------------------

ROLES = ("none", "agent", "subscriber", "reviewer", "admin", "revoked")
READERS = {"reviewer", "admin"}
ADMIN = {"admin"}


@dataclass
class Matrix:
    """What the endpoint matrix needs: a case with a pending proposal, a company with a committed delta."""

    stack: Any
    agent: Any
    company: dict
    proposal: str
    delta: str
    webhook: str = ""
    webhooks: list[str] = field(default_factory=list)  # registered by the matrix: deleted at its end

    async def revision(self) -> int:
        return await self.agent.revision()

    async def fresh_proposal(self) -> tuple[str, str]:
        source_id = unique("matrix-src")
        staged = await self.agent.stage("stage_sources", sources=[source_item(source_id)])
        return staged["proposalId"], source_id

    async def recorded_source(self) -> str:
        source_id = unique("matrix-rec")
        async with self.stack.api("admin") as api:
            recorded = await api.post(f"/api/v1/cases/{self.agent.case_id}/sources",
                                      json={"sources": [source_item(source_id)]})
        assert recorded.status_code == 201, recorded.text
        return source_id


ZERO = "00000000-0000-4000-8000-000000000000"


async def _decision(m: Matrix, ready: bool) -> tuple[str, dict]:
    if not ready:
        return f"/api/v1/proposals/{m.proposal}/decisions", {"reject": ["x"], "note": "n", "expectedRevision": 0}
    proposal_id, item = await m.fresh_proposal()
    return (f"/api/v1/proposals/{proposal_id}/decisions",
            {"reject": [item], "note": "matrix", "expectedRevision": await m.revision()})


async def _retirement(m: Matrix, ready: bool) -> tuple[str, dict]:
    record = await m.recorded_source() if ready else "none"
    return f"/api/v1/cases/{m.agent.case_id}/retirements", {"records": [{"record": "source", "id": record}],
                                                             "note": "matrix"}


async def _revocation(m: Matrix, ready: bool) -> tuple[str, None]:
    token_id = (await TokenStore(m.stack.db).issue(role="reviewer", name=unique("doomed"), created_by="tests"))[
        "tokenId"] if ready else ZERO
    return f"/api/v1/tokens/{token_id}", None


# A webhook no event reaches (its type never occurs on a case), pointing at a port nothing listens on.
QUIET_WEBHOOK = {"url": "http://127.0.0.1:9/matrix", "types": ["threadline.webhook.failing"]}


async def quiet_webhook(m: Matrix, **body: Any) -> str:
    async with m.stack.api("admin") as api:
        registered = await api.post("/api/v1/webhooks", json={**QUIET_WEBHOOK, "caseId": m.agent.case_id, **body})
    assert registered.status_code == 201, registered.text
    m.webhooks.append(registered.json()["webhookId"])
    return m.webhooks[-1]


async def _webhook_deletion(m: Matrix, ready: bool) -> tuple[str, None]:
    return f"/api/v1/webhooks/{await quiet_webhook(m) if ready else ZERO}", None


async def _redelivery(m: Matrix, ready: bool) -> tuple[str, None]:
    if not ready:
        return f"/api/v1/webhooks/{m.webhook}/deliveries/{ZERO}/redeliver", None
    webhook = await quiet_webhook(m, types=["threadline.guidance.added"])
    async with m.stack.api("admin") as api:
        await api.post(f"/api/v1/cases/{m.agent.case_id}/guidance", json={"text": "Matrix guidance."})
        for _ in range(300):
            log = (await api.get(f"/api/v1/webhooks/{webhook}/deliveries")).json()["deliveries"]
            if log:
                return f"/api/v1/webhooks/{webhook}/deliveries/{log[0]['eventId']}/redeliver", None
            await asyncio.sleep(0.1)
    raise AssertionError("the guidance event never became a delivery")


async def _delta_decision(m: Matrix, ready: bool) -> tuple[str, dict]:
    operation = await committed_delta(m.agent.mcp, m.company) if ready else m.delta
    return f"/api/v1/deltas/{operation}/decision", {"decision": "reject", "note": "matrix"}


def _fixed(url: str, body: dict | None = None):
    async def build(m: Matrix, ready: bool) -> tuple[str, dict | None]:
        fill = {"case": m.agent.case_id, "proposal": m.proposal, "company": m.company["companyId"],
                "delta": m.delta, "agent": m.agent.name, "unique": unique("m"), "webhook": m.webhook,
                "ticker": "M" + unique("").strip("-")[:6].upper()}
        filled = json.loads(json.dumps(body).replace("{case}", fill["case"])
                            .replace("{unique}", fill["unique"]).replace("{ticker}", fill["ticker"])) if body else None
        return url.format(**fill), filled

    return build


# Who may call each endpoint, and how to build a request that succeeds. The test checks that this table
# and the router list the same endpoints, so a new endpoint cannot escape the matrix.
ENDPOINTS = {
    ("POST", "/api/v1/cases"): (ADMIN, _fixed("/api/v1/cases", {"caseId": "matrix-{unique}", "title": "t",
                                                                 "question": "q"})),
    ("GET", "/api/v1/cases"): (READERS, _fixed("/api/v1/cases")),
    ("GET", "/api/v1/cases/{case_id}"): (READERS, _fixed("/api/v1/cases/{case}")),
    ("GET", "/api/v1/cases/{case_id}/history"): (READERS, _fixed("/api/v1/cases/{case}/history")),
    ("POST", "/api/v1/cases/{case_id}/guidance"): (READERS, _fixed("/api/v1/cases/{case}/guidance",
                                                                   {"text": "Prefer primary sources."})),
    ("POST", "/api/v1/cases/{case_id}/sources"): (READERS, _fixed("/api/v1/cases/{case}/sources",
                                                                  {"sources": [source_item("src-{unique}")]})),
    ("POST", "/api/v1/cases/{case_id}/retirements"): (READERS, _retirement),
    ("GET", "/api/v1/cases/{case_id}/ledger"): (READERS, _fixed("/api/v1/cases/{case}/ledger")),
    ("GET", "/api/v1/cases/{case_id}/graph"): (READERS, _fixed("/api/v1/cases/{case}/graph")),
    ("GET", "/api/v1/cases/{case_id}/proposals"): (READERS, _fixed("/api/v1/cases/{case}/proposals")),
    ("GET", "/api/v1/proposals/{proposal_id}"): (READERS, _fixed("/api/v1/proposals/{proposal}")),
    ("POST", "/api/v1/proposals/{proposal_id}/decisions"): (READERS, _decision),
    ("POST", "/api/v1/tokens"): (ADMIN, _fixed("/api/v1/tokens", {"role": "agent", "name": "agent-{unique}"})),
    ("GET", "/api/v1/tokens"): (ADMIN, _fixed("/api/v1/tokens")),
    ("DELETE", "/api/v1/tokens/{token_id}"): (ADMIN, _revocation),
    ("PUT", "/api/v1/agents/{name:path}/active-case"): (ADMIN, _fixed("/api/v1/agents/{agent}/active-case",
                                                                 {"caseId": "{case}"})),
    ("POST", "/api/v1/companies"): (ADMIN, _fixed("/api/v1/companies", {"ticker": "{ticker}", "name": "Matrix"})),
    ("GET", "/api/v1/companies"): (READERS, _fixed("/api/v1/companies")),
    ("GET", "/api/v1/companies/{company_id}"): (READERS, _fixed("/api/v1/companies/{company}")),
    ("POST", "/api/v1/companies/{company_id}/source-files"): (
        ADMIN, _fixed("/api/v1/companies/{company}/source-files",
                      {"title": "t", "url": "https://example.org/x", "text": "t"})),
    ("POST", "/api/v1/companies/{company_id}/claims"): (
        ADMIN, _fixed("/api/v1/companies/{company}/claims", {"text": "t", "label": "INFERRED", "section": "s"})),
    ("GET", "/api/v1/companies/{company_id}/deltas"): (READERS, _fixed("/api/v1/companies/{company}/deltas")),
    ("GET", "/api/v1/deltas/{operation_id}"): (READERS, _fixed("/api/v1/deltas/{delta}")),
    ("POST", "/api/v1/deltas/{operation_id}/decision"): (READERS, _delta_decision),
    ("POST", "/api/v1/webhooks"): (ADMIN, _fixed("/api/v1/webhooks", {**QUIET_WEBHOOK, "caseId": "{case}"})),
    ("GET", "/api/v1/webhooks"): (ADMIN, _fixed("/api/v1/webhooks")),
    ("GET", "/api/v1/webhooks/{webhook_id}"): (ADMIN, _fixed("/api/v1/webhooks/{webhook}")),
    ("DELETE", "/api/v1/webhooks/{webhook_id}"): (ADMIN, _webhook_deletion),
    ("GET", "/api/v1/webhooks/{webhook_id}/deliveries"): (ADMIN, _fixed("/api/v1/webhooks/{webhook}/deliveries")),
    ("POST", "/api/v1/webhooks/{webhook_id}/deliveries/{event_id}/redeliver"): (ADMIN, _redelivery),
}


def routed() -> dict[tuple[str, str], APIRoute]:
    return {(method, route.path): route for route in http_api.router.routes if isinstance(route, APIRoute)
            for method in route.methods}


@asynccontextmanager
async def endpoint_matrix(stack):
    # A context manager, not a fixture: the MCP session must close in the task that opened it.
    company = await new_company(stack)
    async with agent_session(stack) as agent:
        proposal, _ = await Matrix(stack, agent, company, "", "").fresh_proposal()
        delta = await committed_delta(agent.mcp, company)
        matrix = Matrix(stack, agent, company, proposal, delta)
        matrix.webhook = await quiet_webhook(matrix)
        try:
            yield matrix
        finally:
            async with stack.api("admin") as api:
                for webhook in matrix.webhooks:
                    await api.delete(f"/api/v1/webhooks/{webhook}")


async def test_the_role_matrix_covers_every_endpoint_of_the_router(stack):
    assert set(ENDPOINTS) == set(routed()), "every route needs its row in ENDPOINTS (who may call it, and how)"
    revoked = await stack.issue_token("admin", unique("revoked-admin"))
    async with stack.api("admin") as api:
        token_id = next(t["tokenId"] for t in (await api.get("/api/v1/tokens")).json()["tokens"]
                        if t["name"].startswith("revoked-admin"))
        assert (await api.delete(f"/api/v1/tokens/{token_id}")).status_code == 200
    tokens = {"none": None, "agent": stack.tokens["agent"], "reviewer": stack.tokens["reviewer"],
              "admin": stack.tokens["admin"], "revoked": revoked,
              "subscriber": await stack.issue_token("subscriber", unique("matrix-subscriber"))}
    routes = routed()
    async with endpoint_matrix(stack) as matrix, httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        for (method, path), (allowed, build) in ENDPOINTS.items():
            succeeds = routes[(method, path)].status_code or 200
            for role in ROLES:
                url, body = await build(matrix, role in allowed)
                headers = {"Authorization": f"Bearer {tokens[role]}"} if tokens[role] else {}
                response = await http.request(method, url, json=body, headers=headers)
                where = f"{role} {method} {path}: {response.status_code} {response.text}"
                assert response.status_code < 500, where
                if role in allowed:
                    assert response.status_code == succeeds, where
                else:
                    expected = 401 if role in ("none", "revoked") else 403
                    assert response.status_code == expected, where
                    assert response.json()["error"]["code"] == ("unauthenticated" if expected == 401 else "forbidden")


# Values a path parameter must survive: malformed ids, an overlong one, a NUL byte, non-ASCII.
HOSTILE_PATH_VALUES = ["Bad_Case", "x" * 3000, "%00", "%C3%BC-id", "-1", "null"]


def _poisoned(body: Any, poison: str) -> Any:
    """The body with every string replaced by a hostile variant of itself."""
    if isinstance(body, dict):
        return {k: _poisoned(v, poison) for k, v in body.items()}
    if isinstance(body, list):
        return [_poisoned(v, poison) for v in body]
    if isinstance(body, str):
        return body + poison if poison != "long" else body + "x" * 300_000
    return body


async def test_bad_input_to_any_endpoint_is_a_4xx_naming_the_field_never_a_5xx(stack):
    routes = routed()
    seen_codes = set()
    async with endpoint_matrix(stack) as matrix, stack.api("admin") as api:
        for (method, path), (_, build) in ENDPOINTS.items():
            route = routes[(method, path)]
            url, body = await build(matrix, False)
            attempts = []
            names = [p.name for p in route.dependant.path_params]
            for value in HOSTILE_PATH_VALUES:
                bad = path
                for name in names:
                    bad = bad.replace("{" + name + "}", value)
                if names:  # some of these are fine for some parameters (an agent may be named Bad_Case)
                    attempts.append((bad, body, False))
            if route.body_field is not None:
                attempts += [(url, bad_body, True) for bad_body in (
                    {}, [], "x", {**(body or {}), "unexpected": 1}, _poisoned(body, "\u0000"), _poisoned(body, "long"))]
            for target, payload, invalid in attempts:
                response = await api.request(method, target, json=payload)
                where = f"{method} {target[:120]} {str(payload)[:200]}: {response.status_code} {response.text[:300]}"
                assert response.status_code < 500, where
                if not invalid and response.status_code < 400:
                    continue
                assert 400 <= response.status_code < 500, where
                error = response.json()["error"]
                assert error["code"] and error["message"], where
                if response.status_code == 422:
                    assert error["field"] and error["hint"], where
                seen_codes.add(error["code"])
        for params in ({"status": "bogus"}, {"limit": 0}, {"limit": 10**6}):
            response = await api.get(f"/api/v1/cases/{matrix.agent.case_id}/proposals", params=params)
            assert response.status_code == 422 and response.json()["error"]["field"] in params, response.text
        for ticker in ("\u0000", "x" * 300):
            response = await api.get("/api/v1/companies", params={"ticker": ticker})
            assert response.status_code == 422 and response.json()["error"]["field"] == "ticker", response.text
    assert {"invalid_argument", "not_found"} <= seen_codes


async def test_malformed_case_ids_are_refused_with_the_field_and_the_fix(stack):
    async with stack.api() as api:
        for path in ("/api/v1/cases/Bad_Case", "/api/v1/cases/Bad_Case/history", "/api/v1/cases/BAD/proposals",
                     "/api/v1/cases/Bad_Case/ledger"):
            response = await api.get(path)
            assert response.status_code == 422, f"{path}: {response.text}"
            error = response.json()["error"]
            assert error["code"] == "invalid_argument" and error["field"] == "caseId", error
            assert "slug" in error["hint"]
        unknown = await api.get("/api/v1/cases/no-such-case")
        assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "caseId"


async def test_a_contract_the_gateway_cannot_build_is_invalid_input_json_for_the_api_html_for_pages(stack):
    # The gateway builds contracts from what callers send; whatever still slips past a route's own types
    # (a path parameter, a form field) must come back as invalid_argument, never as an internal error.
    app = create_app(stack.settings)
    actor = c.Actor(name="probe", role="reviewer")

    async def builds_a_case_ref(case_id: str) -> dict:
        return c.CaseRef(actor=actor, case_id=case_id).dump()

    async def fails(case_id: str) -> dict:
        raise RuntimeError(f"unexpected {case_id}")

    app.add_api_route("/api/v1/probe/{case_id}", builds_a_case_ref)
    app.add_api_route("/ui/probe/{case_id}", builds_a_case_ref)
    app.add_api_route("/ui/fails/{case_id}", fails)
    try:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app, raise_app_exceptions=False),
                                      base_url="http://gateway") as http:
            assert (await http.get("/api/v1/probe/fine-case")).status_code == 200
            api = await http.get("/api/v1/probe/Bad_Case")
            assert api.status_code == 422 and api.json()["error"] == api.json()["error"] | {
                "code": "invalid_argument", "field": "caseId"}
            assert "slug" in api.json()["error"]["hint"]
            page = await http.get("/ui/probe/Bad_Case")
            assert page.status_code == 422 and page.headers["content-type"].startswith("text/html")
            assert "caseId" in page.text and "<script" not in page.text
            failed = await http.get("/ui/fails/x")
            assert failed.status_code == 500 and failed.headers["content-type"].startswith("text/html")
            assert "unexpected" not in failed.text and "it has been logged" in failed.text
    finally:
        await app.state.gateway.db.dispose()


async def test_agents_can_never_decide_not_even_their_own_proposals(stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("mine")])
        async with stack.api(token=agent.token) as api:
            response = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                      json={"accept": ["mine"], "expectedRevision": 0})
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
        assert (await agent.proposals("pending"))[0]["items"][0]["status"] == "pending"


async def test_a_revoked_token_is_refused_everywhere(stack):
    async with agent_session(stack) as agent:
        reviewer = await stack.issue_token("reviewer", unique("short-lived-reviewer"))
        async with stack.api(token=reviewer) as api:
            assert (await api.get("/api/v1/cases")).status_code == 200
        async with stack.api("admin") as api:
            listed = (await api.get("/api/v1/tokens")).json()["tokens"]
            for name in (agent.name,):
                for token in [t for t in listed if t["name"] in (name,) or t["name"].startswith("short-lived")]:
                    assert (await api.delete(f"/api/v1/tokens/{token['tokenId']}")).status_code == 200
        async with stack.api(token=reviewer) as api:
            refused = await api.get("/api/v1/cases")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthenticated"
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(f"{stack.http_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                       headers={"Authorization": f"Bearer {agent.token}",
                                                "Accept": "application/json, text/event-stream"})
        assert response.status_code == 401


async def test_superseded_verdicts_stay_in_history_with_who_and_when(stack):
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=2)
        s, (a, b) = ids["sources"][0], ids["claims"]
        await agent.accepted("stage_verdict", claim=verdict_claim("v1", [s]), relations=[relation_item("r1", a, "v1")])
        await agent.accepted("stage_verdict", claim=verdict_claim("v2", [s], text="On balance, no."),
                             relations=[relation_item("r2", b, "v2", "contradicts")])
        summary = await agent.ok("get_workspace", {})
        assert summary["verdict"]["claimId"] == "v2"
        async with stack.api() as api:
            history = (await api.get(f"/api/v1/cases/{agent.case_id}/history")).json()
        ended = {(e["record"], e["id"]): e for e in history["ended"]}
        old = ended[("claim", "v1")]
        assert old["status"] == "superseded" and old["supersededBy"] == "v2"
        assert old["endedBy"] == "reviewer" and old["endedAt"] and old["endedInRevision"] == summary["workspaceRevision"]
        assert [c["revision"] for c in history["changes"]] == list(range(summary["workspaceRevision"], 0, -1))
        assert history["changes"][0]["changes"]["superseded"] == [
            {"record": "claim", "id": "v1", "supersededBy": "v2"}]


async def test_the_agent_loop_through_review_moves_the_case_five_revisions(stack):
    async with agent_session(stack) as agent:
        start = await agent.revision()
        await agent.accepted("stage_sources", sources=[source_item("agency-report"), source_item("field-study")])
        await agent.accepted("stage_claims", claims=[
            claim_item("emissions-fall", ["agency-report"]),
            claim_item("savings-measured", ["field-study"]),
            claim_item("savings-restated", ["agency-report"], text="Savings were measured again."),
        ])
        await agent.accepted(
            "stage_relations", relations=[relation_item("measured-supports-fall", "savings-measured", "emissions-fall")])
        await agent.accepted("stage_merge", groups=[merge_item("savings", ["savings-measured", "savings-restated"])])
        await agent.accepted("stage_verdict", claim=verdict_claim("answer", ["agency-report"]),
                             relations=[relation_item("fall-answers", "emissions-fall", "answer"),
                                        relation_item("savings-answer", "savings-measured", "answer", "qualifies")])
        summary = await agent.ok("get_workspace", {})
        assert summary["workspaceRevision"] == start + 5
        verdict = summary["verdict"]
        assert verdict["state"] == "accepted" and verdict["claimId"] == "answer"
        assert {(b["relationId"], b["claimId"], b["type"]) for b in verdict["bases"]} == {
            ("fall-answers", "emissions-fall", "supports"), ("savings-answer", "savings-measured", "qualifies")}
        assert summary["counts"]["claims"]["independent"] == 2  # the group counts once
        listed = (await agent.ok("get_workspace", {"scope": "claims"}))["claims"]
        counted = summary["counts"]["claims"]
        assert (counted["total"], counted["verdicts"]) == (3, 1) and listed["total"] == 4  # the verdict apart, and in


async def test_operators_list_and_revoke_tokens_from_the_cli(stack):
    name = unique("cli-revoked")
    token = await stack.issue_token("reviewer", name)
    env = stack.environment()
    listed = await asyncio.to_thread(threadline, "token", "list", "--json", env=env)
    entry = next(json.loads(line) for line in listed.stdout.splitlines() if json.loads(line)["name"] == name)
    assert token not in listed.stdout and "tokenHash" not in listed.stdout
    revoked = await asyncio.to_thread(threadline, "token", "revoke", entry["tokenId"], env=env)
    assert json.loads(revoked.stdout)["revokedAt"]
    async with stack.api(token=token) as api:
        assert (await api.get("/api/v1/cases")).status_code == 401
