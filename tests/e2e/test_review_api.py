"""The reviewers' API: item-by-item, atomic, conflict-safe decisions; roles; append-only history."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select, text

from shared.db.tables import change_log, claims, item_decisions, outbox
from tests.factories import (
    agent_session,
    claim_item,
    decide,
    merge_item,
    relation_item,
    seed,
    source_item,
    unique,
    verdict_claim,
)


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
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=1, claims=2)
        source, (a, b) = ids["sources"][0], ids["claims"]
        start = await agent.revision()
        pairs = []
        for n in range(5):
            p = await agent.stage("stage_claims", claims=[claim_item(f"same-item-{n}", [source])])
            pairs.append(("same item, both accept", (p["proposalId"], {"accept": [f"same-item-{n}"]}),
                          (p["proposalId"], {"accept": [f"same-item-{n}"]})))
            p = await agent.stage("stage_claims", claims=[claim_item(f"accept-or-reject-{n}", [source])])
            pairs.append(("same item, accept and reject", (p["proposalId"], {"accept": [f"accept-or-reject-{n}"]}),
                          (p["proposalId"], {"reject": [f"accept-or-reject-{n}"], "note": "no"})))
            p1 = await agent.stage("stage_claims", claims=[claim_item(f"taken-id-{n}", [source])])
            p2 = await agent.stage("stage_claims", claims=[claim_item(f"taken-id-{n}", [source], text="Other.")])
            pairs.append(("same new claim id", (p1["proposalId"], {"accept": [f"taken-id-{n}"]}),
                          (p2["proposalId"], {"accept": [f"taken-id-{n}"]})))
            g1 = await agent.stage("stage_merge", groups=[merge_item(f"group-{n}", [a, b])])
            g2 = await agent.stage("stage_merge", groups=[merge_item(f"group-{n}", [a, b], label="Rival")])
            pairs.append(("same new group id", (g1["proposalId"], {"accept": [f"group-{n}"]}),
                          (g2["proposalId"], {"accept": [f"group-{n}"]})))

        async def attempt(proposal_id, body, reviewer):
            async with stack.api(token=reviewer) as api:
                response = await api.post(f"/api/v1/proposals/{proposal_id}/decisions", json=body)
            assert response.status_code in (200, 409), response.text
            outcome = response.json()
            return bool(outcome.get("accepted") or outcome.get("rejected")), outcome

        reviewers = [await stack.issue_token("reviewer", f"reviewer-{n}") for n in range(2)]
        results = await asyncio.gather(*(
            asyncio.gather(attempt(*first, reviewers[0]), attempt(*second, reviewers[1]))
            for _, first, second in pairs))
        winning_accepts = 0
        for (label, _, _), ((won_1, out_1), (won_2, out_2)) in zip(pairs, results, strict=True):
            assert won_1 != won_2, f"{label}: {out_1} / {out_2}"
            loser = out_2 if won_1 else out_1
            assert loser["refused"], f"{label}: the loser must be told why: {loser}"
            winner = out_1 if won_1 else out_2
            winning_accepts += bool(winner["accepted"])
        assert await agent.revision() == start + winning_accepts
        async with stack.db.engine.connect() as connection:
            revisions = (await connection.execute(select(change_log.c.revision).where(
                change_log.c.case_id == agent.case_id).order_by(change_log.c.revision))).scalars().all()
        assert revisions == list(range(1, start + winning_accepts + 1))


ADMIN_ONLY = [
    ("POST", "/api/v1/cases", {"caseId": "matrix-case-x", "title": "t", "question": "q"}),
    ("POST", "/api/v1/tokens", {"role": "agent", "name": "matrix-agent"}),
    ("GET", "/api/v1/tokens", None),
    ("DELETE", "/api/v1/tokens/00000000-0000-4000-8000-000000000000", None),
    ("PUT", "/api/v1/agents/matrix-agent/active-case", {"caseId": "{case}"}),
    ("POST", "/api/v1/companies", {"ticker": "MTRX", "name": "Matrix"}),
    ("POST", "/api/v1/companies/00000000-0000-4000-8000-000000000000/source-files",
     {"title": "t", "url": "https://example.org/x", "text": "t"}),
    ("POST", "/api/v1/companies/00000000-0000-4000-8000-000000000000/claims",
     {"text": "t", "label": "INFERRED", "section": "s"}),
]
REVIEWER = [
    ("GET", "/api/v1/cases", None),
    ("GET", "/api/v1/cases/{case}", None),
    ("GET", "/api/v1/cases/{case}/ledger", None),
    ("GET", "/api/v1/cases/{case}/history", None),
    ("GET", "/api/v1/cases/{case}/proposals", None),
    ("POST", "/api/v1/cases/{case}/guidance", {"text": "Prefer primary sources."}),
    ("POST", "/api/v1/cases/{case}/sources", {"sources": [source_item("matrix-src-{role}")]}),
    ("POST", "/api/v1/cases/{case}/retirements", {"records": [{"record": "claim", "id": "none"}], "note": "x"}),
    ("GET", "/api/v1/proposals/{proposal}", None),
    ("POST", "/api/v1/proposals/{proposal}/decisions", {"reject": ["matrix-src"]}),
    ("GET", "/api/v1/companies/00000000-0000-4000-8000-000000000000", None),
    ("GET", "/api/v1/companies/00000000-0000-4000-8000-000000000000/deltas", None),
    ("GET", "/api/v1/deltas/00000000-0000-4000-8000-000000000000", None),
    ("POST", "/api/v1/deltas/00000000-0000-4000-8000-000000000000/decision", {"decision": "reject"}),
]


async def test_the_role_matrix_of_every_endpoint(stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("matrix-src")])
        revoked = await stack.issue_token("admin", unique("revoked-admin"))
        async with stack.api("admin") as api:
            token_id = next(t["tokenId"] for t in (await api.get("/api/v1/tokens")).json()["tokens"]
                            if t["name"].startswith("revoked-admin"))
            assert (await api.delete(f"/api/v1/tokens/{token_id}")).status_code == 200
        tokens = {"none": None, "agent": stack.tokens["agent"], "reviewer": stack.tokens["reviewer"],
                  "admin": stack.tokens["admin"], "revoked": revoked}
        import httpx2

        async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
            for endpoints, allowed in ((ADMIN_ONLY, {"admin"}), (REVIEWER, {"reviewer", "admin"})):
                for method, path, body in endpoints:
                    for role, token in tokens.items():
                        url = path.format(case=agent.case_id, proposal=staged["proposalId"])
                        payload = json.loads(json.dumps(body).replace("{case}", agent.case_id)
                                             .replace("{role}", role)) if body else None
                        headers = {"Authorization": f"Bearer {token}"} if token else {}
                        response = await http.request(method, url, json=payload, headers=headers)
                        expected = ("allowed" if role in allowed else
                                    "unauthenticated" if role in ("none", "revoked") else "forbidden")
                        actual = ("unauthenticated" if response.status_code == 401 else
                                  "forbidden" if response.status_code == 403 else "allowed")
                        assert actual == expected, f"{role} {method} {path}: {response.status_code} {response.text}"


async def test_agents_can_never_decide_not_even_their_own_proposals(stack):
    async with agent_session(stack) as agent:
        staged = await agent.stage("stage_sources", sources=[source_item("mine")])
        async with stack.api(token=agent.token) as api:
            response = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions", json={"accept": ["mine"]})
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
        import httpx2

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


def threadline(*args: str, stack) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "threadline"), "review", *args, "--url", stack.http_url,
         "--token", stack.tokens["reviewer"]],
        capture_output=True, text=True, timeout=60,
    )


async def test_the_review_cli_lists_shows_accepts_and_rejects(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("cli-yes", [source]),
                                                           claim_item("cli-no", [source])])
        listed = await asyncio.to_thread(threadline, "list", "--case", agent.case_id, stack=stack)
        assert listed.returncode == 0 and staged["proposalId"] in listed.stdout
        shown = await asyncio.to_thread(threadline, "show", staged["proposalId"], "--json", stack=stack)
        assert json.loads(shown.stdout)["items"][0]["wouldChange"]["acceptable"] is True
        accepted = await asyncio.to_thread(threadline, "accept", staged["proposalId"], "cli-yes", stack=stack)
        assert accepted.returncode == 0, accepted.stderr + accepted.stdout
        rejected = await asyncio.to_thread(threadline, "reject", staged["proposalId"], "--note", "unsupported",
                                           "--json", stack=stack)
        assert json.loads(rejected.stdout)["rejected"] == ["cli-no"]
        again = await asyncio.to_thread(threadline, "accept", staged["proposalId"], "cli-no", stack=stack)
        assert again.returncode == 1 and "already rejected" in again.stdout
        assert await agent.revision() == 2


async def test_operators_list_and_revoke_tokens_from_the_cli(stack):
    name = unique("cli-revoked")
    token = await stack.issue_token("reviewer", name)
    env = stack.environment()
    listed = await asyncio.to_thread(subprocess.run, [str(Path(sys.executable).parent / "threadline"), "token", "list"],
                                     env=env, capture_output=True, text=True, timeout=60)
    entry = next(json.loads(line) for line in listed.stdout.splitlines() if json.loads(line)["name"] == name)
    assert token not in listed.stdout and "tokenHash" not in listed.stdout
    revoked = await asyncio.to_thread(subprocess.run, [str(Path(sys.executable).parent / "threadline"), "token",
                                                       "revoke", entry["tokenId"]],
                                      env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(revoked.stdout)["revokedAt"]
    async with stack.api(token=token) as api:
        assert (await api.get("/api/v1/cases")).status_code == 401
