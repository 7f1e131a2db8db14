"""Prism theses through the real MCP client: context, preview, idempotency, commit, human review."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess

import httpx2
import pytest
from sqlalchemy import func, select

from services.gateway.ui import COOKIE, csrf_token
from shared.contracts import Actor, DecideDelta
from shared.db.tables import delta_operations
from shared.errors import InvalidArgument
from shared.spec import SPEC_DIR, SPEC_FILES
from shared.spec.tools import TITLES
from shared.subjects import Command
from tests.events import stream_events, wait_until_published
from tests.factories import new_company, preview_args, previewed_and_committed, ui_sign_in, unframed, unique
from tests.processes import THREADLINE


async def context(mcp, **args):
    result = await mcp.call_tool("get_company_context", args)
    assert not result.is_error, result.content[0].text
    return unframed(result.structured_content)


async def call_ok(mcp, tool, args):
    result = await mcp.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return unframed(result.structured_content)


async def call_refused(mcp, tool, args):
    result = await mcp.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.structured_content["error"]


async def served_tools_json(stack) -> list[dict]:
    """tools/list as the gateway serves it on the wire: the JSON-RPC result, not the client's models."""
    headers = {"Authorization": f"Bearer {stack.tokens['agent']}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    async with httpx2.AsyncClient(base_url=stack.http_url, headers=headers, timeout=30) as http:
        initialized = await http.post("/mcp", json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw-tests", "version": "0"}}})
        assert initialized.status_code == 200, initialized.text
        session = {"Mcp-Session-Id": initialized.headers["mcp-session-id"]} \
            if "mcp-session-id" in initialized.headers else {}
        await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        listed = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                 headers=session)
    assert listed.status_code == 200 and listed.headers["content-type"].startswith("application/json"), listed.text
    return listed.json()["result"]["tools"]


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


async def test_tools_list_is_the_nine_spec_tools_verbatim_plus_company_context(stack):
    expected = [t for name in SPEC_FILES for t in json.loads((SPEC_DIR / name).read_text())["tools"]]
    async with stack.agent() as mcp:
        served = (await mcp.list_tools()).tools
    assert [t.name for t in served] == [t["name"] for t in expected] + ["get_company_context", "search_workspace", "inspect_claims"]
    for tool, spec in zip(served, expected, strict=False):
        assert (tool.name, tool.description, tool.input_schema) == (spec["name"], spec["description"],
                                                                   spec["inputSchema"])
        assert tool.title == spec.get("title", TITLES.get(spec["name"])) and tool.title  # every tool has one
    extra = served[-1]
    assert extra.annotations.read_only_hint is True
    assert extra.input_schema["additionalProperties"] is False

    wire = await served_tools_json(stack)
    assert [t["name"] for t in wire] == [t["name"] for t in expected] + ["get_company_context", "search_workspace", "inspect_claims"]
    for tool, spec in zip(wire, expected, strict=False):
        assert canonical(tool["inputSchema"]) == canonical(spec["inputSchema"]), tool["name"]
        assert tool["description"] == spec["description"]
        assert tool.get("title") == spec.get("title", TITLES.get(spec["name"])), tool["name"]  # the spec's, else ours
    assert wire[len(expected) - 1]["title"] == "Propose claim delta"


async def test_company_context_describes_the_thesis_by_ticker_or_id(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        by_ticker = await context(mcp, ticker=company["ticker"].lower())
        by_id = await context(mcp, companyId=company["companyId"])
        assert by_ticker == by_id
        assert by_ticker["thesisRevision"] == 3
        assert {(c["claimId"], c["label"], c["section"]) for c in by_ticker["claims"]["items"]} == {
            (company["claims"][0], "INFERRED", "Growth"), (company["claims"][1], "UNVERIFIED", "Margins"),
            (company["claims"][2], "CONFIRMED", "Moat")}
        assert by_ticker["sourceFiles"]["items"][0]["sourceFileId"] == company["sourceFileId"]
        assert by_ticker["evidenceHealth"] == {"unverifiedClaims": 1, "inferredClaims": 1, "claimsWithoutSource": 1,
                                               "retiredClaims": 0, "pendingDeltas": 0}
        missing = await call_refused(mcp, "get_company_context", {"ticker": "NOPE"})
        assert missing["code"] == "not_found" and missing["field"] == "ticker"
        both = await call_refused(mcp, "get_company_context",
                                  {"ticker": company["ticker"], "companyId": company["companyId"]})
        assert both["code"] == "invalid_argument"


async def test_preview_retry_commit_review_applies_exactly_what_was_previewed(stack):
    company = await new_company(stack)
    growth, margins, moat = company["claims"]
    key = unique("key")
    async with stack.agent() as mcp:
        preview = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(company, key))
        delta = preview["delta"]
        assert preview["status"] == "previewed" and preview["baseRevision"] == 3 and preview["expiresAt"]
        assert delta["category"] == "strengthened" and delta["newRisks"] == ["dependence on services"]
        assert delta["claims"]["updated"] == [{
            "claimId": growth,
            "before": {"claimId": growth, "text": "Revenue grows 10% a year.", "label": "INFERRED",
                       "section": "Growth", "sourceUrl": "https://example.org/plan"},
            "after": {"claimId": growth, "text": "Revenue grows 14% a year.", "label": "CONFIRMED",
                      "section": "Growth", "sourceUrl": "https://example.org/plan"}}]
        assert delta["claims"]["added"][0]["text"] == "Services attach rate drives growth."
        assert delta["claims"]["retired"][0]["claimId"] == margins
        assert len(base64.urlsafe_b64decode(preview["commitToken"] + "==")) >= 16  # at least 128 bits

        retry = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(company, key))
        assert (retry["operationId"], retry["commitToken"]) == (preview["operationId"], preview["commitToken"])

        commit = {"mode": "commit", "operationId": preview["operationId"], "commitToken": preview["commitToken"]}
        committed = await call_ok(mcp, "propose_claim_delta_from_source", commit)
        assert committed["status"] == "committed" and committed["delta"] == delta
        again = await call_ok(mcp, "propose_claim_delta_from_source", commit)
        assert again["status"] == "committed" and again["committedAt"] == committed["committedAt"]
        after_commit = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(company, key))
        assert after_commit["operationId"] == preview["operationId"] and after_commit["status"] == "committed"

        unchanged = await context(mcp, companyId=company["companyId"])
        assert unchanged["thesisRevision"] == 3 and unchanged["claims"]["total"] == 3
        assert unchanged["pendingDeltas"]["items"][0]["operationId"] == preview["operationId"]

        async with stack.api() as api:
            decided = await api.post(f"/api/v1/deltas/{preview['operationId']}/decision",
                                     json={"decision": "accept", "note": "Matches the filing."})
            assert decided.status_code == 200, decided.text
            assert decided.json()["status"] == "accepted" and decided.json()["thesisRevision"] == 4

        changed = await context(mcp, companyId=company["companyId"])
        assert changed["thesisRevision"] == 4
        active = {c["claimId"]: c for c in changed["claims"]["items"]}
        assert active[growth]["text"] == "Revenue grows 14% a year." and active[growth]["label"] == "CONFIRMED"
        assert margins not in active and changed["retiredClaims"]["items"][0]["claimId"] == margins
        added = [c for c in active.values() if c["claimId"] not in (growth, moat)]
        assert [c["text"] for c in added] == ["Services attach rate drives growth."]
        assert added[0]["sourceUrl"] == company["sourceUrl"]
        assert changed["recentReviews"]["items"][0]["note"] == "Matches the filing."

    await wait_until_published(stack.db)
    events = [e for e in await stream_events(stack.settings) if e["natsSubject"].split(".")[3] == company["companyId"]]
    types = [(e["type"], e.get("revision")) for e in events]
    assert ("threadline.thesis.delta.committed", 3) in types
    assert ("threadline.thesis.changed", 4) in types
    changed_event = next(e for e in events if e["type"] == "threadline.thesis.changed" and e["revision"] == 4)
    assert changed_event["data"]["operationId"] == preview["operationId"]
    assert [c["claimId"] for c in changed_event["data"]["changes"]["retired"]] == [margins]


async def test_a_preview_with_several_faults_is_refused_once_naming_every_one(stack):
    company = await new_company(stack)
    other = await new_company(stack)
    growth, _, moat = company["claims"]
    async with stack.agent() as mcp:
        refused = await call_refused(mcp, "propose_claim_delta_from_source", preview_args(
            company, unique(), sourceUrl="https://example.org/elsewhere", sourceTitle="Another title",
            affectedClaimIds=[other["claims"][0]],
            proposedClaims=[{"text": "x", "label": "INFERRED", "section": "s", "action": "update"},
                            {"text": "y", "label": "INFERRED", "section": "s", "action": "add", "targetClaimId": moat},
                            {"text": "z", "label": "INFERRED", "section": "s", "action": "retire",
                             "targetClaimId": growth}]))
    assert refused["code"] == "invalid_argument" and refused["field"] == "sourceUrl"
    assert [p["field"] for p in refused["problems"]] == [
        "sourceUrl", "sourceTitle", "affectedClaimIds[0]", "proposedClaims[0].targetClaimId",
        "proposedClaims[1].targetClaimId"]
    assert all(p["hint"] for p in refused["problems"])
    assert "(and 4 more problems: see problems)" in refused["message"]


async def test_each_refusal_names_the_problem(stack):
    company = await new_company(stack)
    other = await new_company(stack)
    _, margins, moat = company["claims"]
    async with stack.agent() as mcp:
        async def refused(args):
            return await call_refused(mcp, "propose_claim_delta_from_source", args)

        unknown = await refused(preview_args(company, unique(), companyId="00000000-0000-4000-8000-000000000000"))
        assert unknown["code"] == "not_found" and unknown["field"] == "companyId"
        foreign = await refused(preview_args(company, unique(), sourceFileId=other["sourceFileId"]))
        assert foreign["field"] == "sourceFileId" and "another company" in foreign["message"]
        no_target = await refused(preview_args(company, unique(), proposedClaims=[
            {"text": "x", "label": "INFERRED", "section": "s", "action": "update"}]))
        assert no_target["field"] == "proposedClaims[0].targetClaimId"
        add_with_target = await refused(preview_args(company, unique(), proposedClaims=[
            {"text": "x", "label": "INFERRED", "section": "s", "action": "add", "targetClaimId": moat}]))
        assert add_with_target["field"] == "proposedClaims[0].targetClaimId"
        not_ours = await refused(preview_args(company, unique(), affectedClaimIds=[other["claims"][0]]))
        assert not_ours["field"] == "affectedClaimIds[0]"
        twice = await refused(preview_args(company, unique(), affectedClaimIds=[moat, margins, moat.upper()]))
        assert twice["code"] == "invalid_argument" and twice["field"] == "affectedClaimIds[2]"
        assert "once" in twice["hint"]
        too_large = await refused(preview_args(company, unique(), confirms=["c" * 3000] * 100))
        assert too_large["code"] == "invalid_argument" and too_large["field"] == "confirms"
        assert "split" in too_large["hint"]

        # retire `margins` through an accepted delta, then target it
        retire = preview_args(company, unique(), proposedClaims=[
            {"text": "gone", "label": "UNVERIFIED", "section": "Margins", "action": "retire",
             "targetClaimId": margins}], affectedClaimIds=[])
        staged = await previewed_and_committed(mcp, retire)
        async with stack.api() as api:
            assert (await api.post(f"/api/v1/deltas/{staged['operationId']}/decision",
                                   json={"decision": "accept"})).status_code == 200
        retired = await refused(preview_args(company, unique(), affectedClaimIds=[]))
        assert retired["field"] == "proposedClaims[2].targetClaimId" and "retired" in retired["message"]

        key = unique("key")
        first = await call_ok(mcp, "propose_claim_delta_from_source",
                              preview_args(company, key, proposedClaims=[], affectedClaimIds=[]))
        conflict = await refused(preview_args(company, key, proposedClaims=[], affectedClaimIds=[],
                                              summary="A different summary."))
        assert conflict["code"] == "idempotency_conflict" and key in conflict["message"]
        assert conflict["field"] == "idempotencyKey"

        wrong = await refused({"mode": "commit", "operationId": first["operationId"],
                               "commitToken": first["commitToken"][:-2] + "xx"})
        assert wrong["code"] == "invalid_commit_token" and wrong["field"] == "commitToken"
        extra = await refused({"mode": "commit", "operationId": first["operationId"],
                               "commitToken": first["commitToken"], "summary": "replace it"})
        assert extra["code"] == "invalid_argument" and extra["field"] == "summary"

        async with stack.api("admin") as api:  # the thesis moves on before the commit
            await api.post(f"/api/v1/companies/{company['companyId']}/claims",
                           json={"text": "New fact.", "label": "CONFIRMED", "section": "Moat"})
        stale = await refused({"mode": "commit", "operationId": first["operationId"],
                               "commitToken": first["commitToken"]})
        assert stale["code"] == "conflict" and "preview again" in stale["hint"]


async def test_a_rejection_note_reaches_the_agent(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        preview = await previewed_and_committed(mcp, preview_args(company, unique()))
        async with stack.api() as api:
            rejected = await api.post(f"/api/v1/deltas/{preview['operationId']}/decision",
                                      json={"decision": "reject", "note": "The filing says 12%, not 14%."})
            assert rejected.json()["status"] == "rejected" and rejected.json()["thesisRevision"] == 3
        review = (await context(mcp, companyId=company["companyId"]))["recentReviews"]["items"][0]
        assert review["status"] == "rejected" and review["note"] == "The filing says 12%, not 14%."


async def test_a_rejection_without_a_reason_is_refused_by_the_service_itself(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        preview = await previewed_and_committed(mcp, preview_args(company, unique()))
    reviewer = Actor(name="reviewer", role="reviewer")
    for note in ({}, {"note": "  "}):  # the command as any NATS client may send it, unchecked by a gateway
        with pytest.raises(InvalidArgument) as refused:
            await stack.client.call(Command.DECIDE_DELTA, {
                "actor": reviewer.dump(), "operationId": preview["operationId"], "decision": "reject", **note})
        assert refused.value.field == "note" and refused.value.hint
    async with stack.api() as api:
        still = (await api.get(f"/api/v1/deltas/{preview['operationId']}")).json()
    assert still["status"] == "committed" and "decidedBy" not in still
    rejected = await stack.client.call(Command.DECIDE_DELTA, DecideDelta(
        actor=reviewer, operation_id=preview["operationId"], decision="reject", note="Not in the filing."))
    assert rejected["status"] == "rejected" and rejected["note"] == "Not in the filing."


async def test_preview_and_commit_results_carry_the_thesis_context(stack):
    company = await new_company(stack)
    growth, margins, moat = company["claims"]
    async with stack.agent() as mcp:
        first = await previewed_and_committed(mcp, preview_args(company, unique()))
        async with stack.api() as api:
            assert (await api.post(f"/api/v1/deltas/{first['operationId']}/decision",
                                   json={"decision": "reject", "note": "Q3 says 12%."})).status_code == 200

        preview = await call_ok(mcp, "propose_claim_delta_from_source",
                                preview_args(company, unique(), affectedClaimIds=[growth, moat]))
        given = preview["context"]
        described = await context(mcp, companyId=company["companyId"])
        assert given["thesisRevision"] == described["thesisRevision"] == 3
        assert given["evidenceHealth"] == described["evidenceHealth"]  # get_company_context's own figures
        assert given["counts"] == {"activeClaims": 3, "retiredClaims": 0, "sourceFiles": 1, "pendingDeltas": 0,
                                   "reviews": 1}
        assert given["recentReviews"]["items"] == described["recentReviews"]["items"]
        assert given["recentReviews"]["items"][0]["note"] == "Q3 says 12%."
        touched = given["touchedClaims"]
        assert (touched["total"], touched["omitted"]) == (3, 0)  # growth (affected and updated), moat, margins
        assert [(c["claimId"], c["status"], c["label"], c["revision"], c["changedSincePreview"])
                for c in touched["items"]] == [(growth, "active", "INFERRED", 1, False),
                                               (moat, "active", "CONFIRMED", 3, False),
                                               (margins, "active", "UNVERIFIED", 2, False)]
        assert touched["items"][0]["excerpt"] == "Revenue grows 10% a year."

        commit = {"mode": "commit", "operationId": preview["operationId"], "commitToken": preview["commitToken"]}
        committed = await call_ok(mcp, "propose_claim_delta_from_source", commit)
        assert committed["context"]["counts"]["pendingDeltas"] == 1
        assert committed["context"]["evidenceHealth"]["pendingDeltas"] == 1

        async with stack.api() as api:
            assert (await api.post(f"/api/v1/deltas/{preview['operationId']}/decision",
                                   json={"decision": "accept"})).status_code == 200
        again = await call_ok(mcp, "propose_claim_delta_from_source", commit)
    assert again["status"] == "accepted" and again["context"]["thesisRevision"] == 4
    now = {c["claimId"]: c for c in again["context"]["touchedClaims"]["items"]}
    assert now[growth]["excerpt"] == "Revenue grows 14% a year." and now[growth]["changedSincePreview"] is True
    assert now[margins]["status"] == "retired" and now[moat]["changedSincePreview"] is False
    assert again["context"]["counts"]["reviews"] == 2


async def test_the_context_lists_a_bounded_number_of_touched_claims_and_counts_the_rest(stack):
    company = await new_company(stack)
    claims = list(company["claims"])
    async with stack.api("admin") as api:
        for i in range(27):
            created = await api.post(f"/api/v1/companies/{company['companyId']}/claims",
                                     json={"text": f"Claim {i}. " + "x" * 4000, "label": "INFERRED",
                                           "section": "Bulk"})
            claims.append(created.json()["claimId"])
    async with stack.agent() as mcp:
        preview = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(
            company, unique(), affectedClaimIds=claims, proposedClaims=[]))
    touched = preview["context"]["touchedClaims"]
    assert (touched["total"], touched["omitted"], len(touched["items"])) == (30, 5, 25)
    assert [c["claimId"] for c in touched["items"]] == claims[:25]
    assert max(len(c["excerpt"]) for c in touched["items"]) <= 200
    assert len(preview["delta"]["affectedClaims"]) == 30  # the delta itself keeps every claim it names


async def test_keys_are_scoped_per_company(stack):
    first, second = await new_company(stack), await new_company(stack)
    key = unique("same-key")
    async with stack.agent() as mcp:
        one = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(first, key))
        other = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(second, key))
        assert one["operationId"] != other["operationId"] and one["commitToken"] != other["commitToken"]
        assert (one["companyId"], other["companyId"]) == (first["companyId"], second["companyId"])
        retried = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(second, key))
        assert retried["operationId"] == other["operationId"]


async def test_keys_are_scoped_per_caller(stack):
    company = await new_company(stack)
    other_agent = await stack.issue_token("agent", unique("other-agent"))
    async with stack.agent() as mcp, stack.agent(other_agent) as other:
        mine = await call_ok(mcp, "propose_claim_delta_from_source", preview_args(company, "shared-key"))
        theirs = await call_ok(other, "propose_claim_delta_from_source",
                               preview_args(company, "shared-key", summary="Their own reading."))
        assert mine["operationId"] != theirs["operationId"]


async def test_sixteen_retries_make_one_operation_and_sixteen_commits_one_committed_delta(stack):
    company = await new_company(stack)
    key = unique("concurrent")

    async def preview_once():
        async with stack.agent() as mcp:
            return await call_ok(mcp, "propose_claim_delta_from_source", preview_args(company, key))

    previews = await asyncio.gather(*(preview_once() for _ in range(16)))
    assert len({(p["operationId"], p["commitToken"]) for p in previews}) == 1
    async with stack.db.engine.connect() as connection:
        stored = (await connection.execute(select(func.count()).select_from(delta_operations).where(
            delta_operations.c.idempotency_key == key))).scalar_one()
    assert stored == 1

    commit = {"mode": "commit", "operationId": previews[0]["operationId"], "commitToken": previews[0]["commitToken"]}

    async def commit_once():
        async with stack.agent() as mcp:
            return await call_ok(mcp, "propose_claim_delta_from_source", commit)

    commits = await asyncio.gather(*(commit_once() for _ in range(16)))
    assert {c["status"] for c in commits} == {"committed"} and len({c["committedAt"] for c in commits}) == 1
    await wait_until_published(stack.db)
    committed_events = [e for e in await stream_events(stack.settings)
                        if e["type"] == "threadline.thesis.delta.committed"
                        and e["data"]["operationId"] == commit["operationId"]]
    assert len(committed_events) == 1


async def test_reviewers_decide_deltas_on_the_web_page(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        preview = await previewed_and_committed(mcp, preview_args(
            company, unique(), summary="<script>alert(1)</script> growth"))
    async with stack.api() as http:
        assert (await ui_sign_in(http, stack.tokens["reviewer"])).status_code == 303
        listed = await http.get("/ui/companies")
        assert company["ticker"] in listed.text
        page = await http.get(f"/ui/deltas/{preview['operationId']}")
        assert page.status_code == 200
        assert "Revenue grows 10% a year." in page.text and "Revenue grows 14% a year." in page.text
        assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;" in page.text
        decided = await http.post(f"/ui/deltas/{preview['operationId']}/decide",
                                  data={"decision": "accept", "note": "ok",
                                        "csrf": csrf_token(http.cookies[COOKIE])}, follow_redirects=True)
        assert [r.status_code for r in decided.history] == [303]  # post/redirect/get
        assert decided.status_code == 200 and "the thesis is now at revision 4" in decided.text


def threadline(stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(THREADLINE), "review", *args, "--url", stack.http_url, "--token",
                           stack.tokens["reviewer"]], capture_output=True, text=True, timeout=60)


async def test_the_review_cli_lists_shows_and_decides_deltas(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        preview = await previewed_and_committed(mcp, preview_args(company, unique()))
    listed = await asyncio.to_thread(threadline, stack, "deltas", "--ticker", company["ticker"])
    assert preview["operationId"] in listed.stdout
    shown = await asyncio.to_thread(threadline, stack, "delta", preview["operationId"])
    assert "Revenue grows 10% a year. → Revenue grows 14% a year." in shown.stdout
    rejected = await asyncio.to_thread(threadline, stack, "reject-delta", preview["operationId"], "--note", "no",
                                       "--json")
    assert json.loads(rejected.stdout)["status"] == "rejected"


async def test_a_list_of_deltas_carries_digests_and_one_delta_its_whole_diff(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        preview = await previewed_and_committed(mcp, preview_args(company, unique()))
    async with stack.api() as api:
        listed = (await api.get(f"/api/v1/companies/{company['companyId']}/deltas", params={"status": "all"})).json()
        whole = (await api.get(f"/api/v1/deltas/{preview['operationId']}")).json()
    digest = next(d for d in listed["deltas"] if d["operationId"] == preview["operationId"])["delta"]
    assert set(digest) == {"category", "summary", "claims"}
    assert digest["claims"] == {action: len(whole["delta"]["claims"][action])
                                for action in ("added", "updated", "retired")}
    assert digest["category"] == whole["delta"]["category"] and "confirms" in whole["delta"]


async def test_a_call_too_large_for_one_nats_message_is_refused_with_what_to_do(stack):
    company = await new_company(stack)
    claims = [{"text": "é" * 5000, "label": "INFERRED", "section": "Growth", "action": "add"} for _ in range(200)]
    async with stack.agent() as mcp:
        error = await call_refused(mcp, "propose_claim_delta_from_source",
                                   preview_args(company, unique(), proposedClaims=claims))
    assert error["code"] == "invalid_argument" and "NATS message" in error["message"]
    assert "fewer or shorter" in error["hint"]


async def test_a_company_is_named_by_the_start_of_its_id_the_webhook_pages_show(stack):
    company = await new_company(stack)
    whole = company["companyId"]
    async with stack.api() as api:
        shown = await api.get(f"/api/v1/companies/{whole[:8]}")
        assert shown.status_code == 200 and shown.json()["companyId"] == whole, shown.text
        deltas = await api.get(f"/api/v1/companies/{whole[:8]}/deltas")
        assert deltas.status_code == 200, deltas.text
        assert (await ui_sign_in(api, stack.tokens["reviewer"])).status_code == 303
        assert (await api.get(f"/ui/companies/{whole[:8]}")).status_code == 200
