"""`threadline review …` against the running system: agents' text prints as it is; decisions say what happened."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess

from sqlalchemy import select

from shared.db.tables import proposals
from tests import processes
from tests.factories import (
    agent_session,
    claim_item,
    decide,
    new_company,
    preview_args,
    previewed_and_committed,
    seed,
    unique,
)
from tests.receivers import Receiver
from tests.webhooks import register, wait_until_delivered

# Rich markup an agent might write, on purpose or not: a stray closing tag, a style, a link.
BRACKETED = "Costs fell [/note] then [bold]rose[/bold] per [link=https://evil.example]report[/link]."


def threadline(*args: str, stack) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(processes.THREADLINE), "review", *args, "--url", stack.http_url, "--token", stack.tokens["reviewer"]],
        capture_output=True, text=True, timeout=60,
    )


async def test_the_review_cli_lists_shows_accepts_and_rejects(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("cli-yes", [source]),
                                                           claim_item("cli-no", [source])])
        listed = await asyncio.to_thread(threadline, "list", "--case", agent.case_id, stack=stack)
        # The 8 characters the review pages show, as the README says; --json keeps the whole id.
        assert listed.returncode == 0 and staged["proposalId"][:8] in listed.stdout
        assert staged["proposalId"] not in listed.stdout
        as_json = await asyncio.to_thread(threadline, "list", "--case", agent.case_id, "--json", stack=stack)
        assert staged["proposalId"] in {p["proposalId"] for p in json.loads(as_json.stdout)["proposals"]}
        none = await asyncio.to_thread(threadline, "list", "--case", agent.case_id, "--kind", "verdict", stack=stack)
        assert none.returncode == 0 and none.stdout.strip() == f"no pending proposals in case {agent.case_id} " \
            "(kind verdict)", none.stdout
        shown = await asyncio.to_thread(threadline, "show", staged["proposalId"], "--json", stack=stack)
        assert json.loads(shown.stdout)["items"][0]["wouldChange"]["acceptable"] is True
        accepted = await asyncio.to_thread(threadline, "accept", staged["proposalId"], "cli-yes", stack=stack)
        assert accepted.returncode == 0, accepted.stderr + accepted.stdout
        assert accepted.stdout.strip() == f"revision {await agent.revision()}; accepted cli-yes", accepted.stdout
        rejected = await asyncio.to_thread(threadline, "reject", staged["proposalId"], "--note", "unsupported",
                                           "--json", stack=stack)
        assert json.loads(rejected.stdout)["rejected"] == ["cli-no"]
        again = await asyncio.to_thread(threadline, "accept", staged["proposalId"], "cli-no", stack=stack)
        assert again.returncode == 1 and "already rejected by reviewer at 20" in again.stdout
        assert "nothing recorded" in again.stdout  # every chosen item was refused: no decision, no note
        assert await agent.revision() == 2


async def test_showing_a_proposal_prints_each_items_review_checks_and_grounding(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[
            claim_item("cli-forecast", [source], kind="prediction", confidence="established")])
        shown = await asyncio.to_thread(threadline, "show", staged["proposalId"], stack=stack)
        assert shown.returncode == 0, shown.stderr
        assert "check prediction-established (warning): a prediction stated as established; until it resolves, " \
               "supported is the strongest its sources allow" in shown.stdout, shown.stdout
        assert "grounding: primary, 1 independent origin\n" in shown.stdout, shown.stdout


async def test_a_refusal_of_several_options_prints_each_with_its_fix(stack):
    async with agent_session(stack) as agent:
        listed = await asyncio.to_thread(threadline, "list", "--case", agent.case_id, "--status", "bogus",
                                         "--sort", "bad", stack=stack)
    assert listed.returncode == 1 and "see problems" not in listed.stderr, listed.stderr
    said = " ".join(listed.stderr.split())
    assert "status: Input should be 'pending'" in said and "sort: Input should be 'oldest'" in said, said
    assert "hint: use one of: 'oldest' or 'newest'" in said, said


def test_the_usage_of_each_review_command_names_the_proposal_argument_in_capitals():
    for command in ("reject", "accept", "show", "duplicate"):
        usage = processes.threadline("review", command, "--help", env={**os.environ, "COLUMNS": "100"})
        assert usage.returncode == 0 and "PROPOSAL" in usage.stdout and "{proposal}" not in usage.stdout, usage.stdout


async def test_rejecting_from_the_cli_needs_a_note_and_a_decided_proposal_says_when_and_by_whom(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("noted", [source])])
        for note in ((), ("--note", "   ")):
            missing = await asyncio.to_thread(threadline, "reject", staged["proposalId"], *note, stack=stack)
            assert missing.returncode == 2 and "--note" in missing.stderr, missing.stderr
        assert (await agent.proposals("pending"))[-1]["items"][0]["status"] == "pending"
        rejected = await asyncio.to_thread(threadline, "reject", staged["proposalId"], "--note", "No source says so.",
                                           stack=stack)
        assert rejected.returncode == 0, rejected.stdout + rejected.stderr
        for verb, note in (("accept", ()), ("reject", ("--note", "Again."))):
            again = await asyncio.to_thread(threadline, verb, staged["proposalId"], *note, stack=stack)
            assert again.returncode == 1 and "accepts and rejects nothing" not in again.stdout
            assert f"proposal {staged['proposalId']} is already decided" in again.stdout
            assert re.search(r"noted rejected by reviewer at 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC", again.stdout), \
                again.stdout


async def test_the_cli_takes_a_unique_prefix_of_a_proposal_id_and_lists_the_candidates_of_an_ambiguous_one(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        # 17 proposals: two of them start with the same hex digit, whatever ids staging gives them.
        ids = [(await agent.stage("stage_claims", claims=[claim_item(f"prefix-{n}", [source])]))["proposalId"]
               for n in range(17)]
        first = ids[0]
        shown = await asyncio.to_thread(threadline, "show", first[:8], "--json", stack=stack)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert json.loads(shown.stdout)["proposalId"] == first
        accepted = await asyncio.to_thread(threadline, "accept", first[:8], "--json", stack=stack)
        assert json.loads(accepted.stdout)["accepted"] == ["prefix-0"]

        digit = next(d for d in "0123456789abcdef" if sum(i.startswith(d) for i in ids) > 1)
        # The deployment is the session's: other tests' proposals may start with the digit too. The refusal
        # lists the first ten of all of them, in id order.
        async with stack.db.engine.connect() as db:
            every = sorted((await db.execute(select(proposals.c.proposal_id))).scalars())
        sharing = [str(i) for i in every if str(i).startswith(digit)]
        ambiguous = await asyncio.to_thread(threadline, "show", digit, stack=stack)
        assert ambiguous.returncode == 1 and "invalid_argument" in ambiguous.stderr
        assert f"{digit!r} is the start of several proposal ids: " in ambiguous.stderr
        assert all(i in ambiguous.stderr for i in sharing[:10]) and "more of the id" in ambiguous.stderr
        assert ("and more" in ambiguous.stderr) == (len(sharing) > 10)
        async with stack.api() as api:
            over_http = await api.get(f"/api/v1/proposals/{first[:8]}")
            assert over_http.status_code == 200 and over_http.json()["proposalId"] == first
            refused = await api.get(f"/api/v1/proposals/{digit}")
            assert refused.status_code == 422 and refused.json()["error"]["field"] == "proposalId"
            unknown = await api.get("/api/v1/proposals/not-an-id")
            assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "proposalId"


async def test_agents_bracketed_text_prints_as_it_is_never_as_markup(stack):
    async with agent_session(stack) as agent:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("bracketed", [source], text=BRACKETED)])
        shown = await asyncio.to_thread(threadline, "show", staged["proposalId"], stack=stack)
        assert shown.returncode == 0, shown.stderr
        assert BRACKETED in shown.stdout
        await decide(stack, staged["proposalId"], reject=["bracketed"], note="Not [red]so[/red] [/note].")
        shown = await asyncio.to_thread(threadline, "show", staged["proposalId"], stack=stack)
        assert shown.returncode == 0, shown.stderr
        assert "note: Not [red]so[/red] [/note]." in shown.stdout and "rejected: bracketed" in shown.stdout
        listed = await asyncio.to_thread(threadline, "list", "--case", agent.case_id, "--status", "all", stack=stack)
        assert listed.returncode == 0, listed.stderr


async def test_rejecting_a_delta_from_the_cli_needs_a_note(stack):
    company = await new_company(stack)
    async with stack.agent() as mcp:
        operation = (await previewed_and_committed(mcp, preview_args(company, unique())))["operationId"]
    missing = await asyncio.to_thread(threadline, "reject-delta", operation, stack=stack)
    assert missing.returncode == 2 and "--note" in missing.stderr
    blank = await asyncio.to_thread(threadline, "reject-delta", operation, "--note", "  ", stack=stack)
    assert blank.returncode == 2 and "--note" in blank.stderr
    still = await asyncio.to_thread(threadline, "delta", operation[:8], "--json", stack=stack)  # a prefix names it
    assert json.loads(still.stdout)["status"] == "committed" and json.loads(still.stdout)["operationId"] == operation
    rejected = await asyncio.to_thread(threadline, "reject-delta", operation[:8], "--note", "Q3 says [12%].", "--json",
                                       stack=stack)
    assert json.loads(rejected.stdout)["status"] == "rejected"
    again = await asyncio.to_thread(threadline, "accept-delta", operation, stack=stack)
    assert again.returncode == 1 and "the delta was already rejected by reviewer at 20" in again.stderr


async def test_the_review_cli_takes_the_gateway_and_token_from_the_environment(stack, tmp_path):
    case_id = unique("env-case")
    async with stack.api("admin") as api:
        assert (await api.post("/api/v1/cases", json={"caseId": case_id, "title": "t", "question": "q?"})).status_code == 201
    listed = await asyncio.to_thread(
        processes.threadline, "review", "list", "--json", "--data-dir", str(tmp_path),
        env=processes.clean_environment(THREADLINE_URL=stack.http_url, THREADLINE_TOKEN=stack.tokens["reviewer"]))
    assert listed.returncode == 0, listed.stderr
    assert case_id in {c["caseId"] for c in json.loads(listed.stdout)["cases"]}


async def test_the_webhooks_cli_takes_the_id_prefixes_the_admin_pages_show(stack):
    async with Receiver() as receiver, agent_session(stack) as agent:
        hook = await register(stack, url=receiver.url, caseId=agent.case_id)
        await seed(agent, sources=1)
        [delivered, *_] = await wait_until_delivered(stack, hook["webhookId"], 1)

        def webhooks(*args: str) -> subprocess.CompletedProcess:
            return processes.threadline("webhooks", *args, env=stack.environment())

        log = await asyncio.to_thread(webhooks, "deliveries", hook["webhookId"][:8])
        assert log.returncode == 0, log.stderr
        assert delivered["eventId"] in log.stdout and re.search(r"\d\d:\d\d:\d\d UTC", log.stdout)
        again = await asyncio.to_thread(webhooks, "redeliver", hook["webhookId"][:8], delivered["eventId"][:8])
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["eventId"] == delivered["eventId"]
        await receiver.wait_for(lambda requests: sum(r.headers["webhook-id"] == delivered["eventId"]
                                                     for r in requests) >= 2)
        unknown = await asyncio.to_thread(webhooks, "deliveries", "0" * 7 + "x")
        assert unknown.returncode == 1 and "error (not_found): there is no webhook '0000000x'" in unknown.stderr
        no_event = await asyncio.to_thread(webhooks, "redeliver", hook["webhookId"][:8], "0" * 7 + "x")
        assert no_event.returncode == 1 and "error (not_found): there is no event '0000000x'" in no_event.stderr
        # The fix a terminal can run, as `token revoke` says it (it said GET /api/v1/webhooks/{webhookId}/deliveries).
        assert "hint: list them with threadline webhooks list" in unknown.stderr, unknown.stderr
        assert "hint: list its deliveries with threadline webhooks deliveries WEBHOOK_ID" in no_event.stderr, \
            no_event.stderr
        assert "/api/v1" not in unknown.stderr + no_event.stderr


def test_an_empty_id_is_refused_naming_the_argument_before_any_call(tmp_path):
    for args, argument in ((("reject", "", "--note", "x"), "PROPOSAL"), (("show", "  "), "PROPOSAL"),
                           (("reject-delta", "", "--note", "x"), "OPERATION")):
        refused = subprocess.run(
            [str(processes.THREADLINE), "review", *args, "--url", "http://127.0.0.1:9",
             "--token", "unused", "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2, (args, refused.stderr)
        said = " ".join(refused.stderr.replace("│", " ").split())
        assert f"Invalid value for '{argument}'" in said and "give an id" in said, (args, said)
        assert "openapi" not in said and "not_found" not in said, said
