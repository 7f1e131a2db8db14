"""`threadline review …` against the running system: agents' text prints as it is; decisions say what happened."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

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

# Rich markup an agent might write, on purpose or not: a stray closing tag, a style, a link.
BRACKETED = "Costs fell [/note] then [bold]rose[/bold] per [link=https://evil.example]report[/link]."


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
        assert "nothing recorded" in again.stdout  # every chosen item was refused: no decision, no note
        assert await agent.revision() == 2


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
    still = await asyncio.to_thread(threadline, "delta", operation, "--json", stack=stack)
    assert json.loads(still.stdout)["status"] == "committed"
    rejected = await asyncio.to_thread(threadline, "reject-delta", operation, "--note", "Q3 says [12%].", "--json",
                                       stack=stack)
    assert json.loads(rejected.stdout)["status"] == "rejected"


async def test_the_review_cli_takes_the_gateway_and_token_from_the_environment(stack, tmp_path):
    case_id = unique("env-case")
    async with stack.api("admin") as api:
        assert (await api.post("/api/v1/cases", json={"caseId": case_id, "title": "t", "question": "q?"})).status_code == 201
    environment = {k: v for k, v in os.environ.items() if not k.startswith("THREADLINE_")}
    listed = await asyncio.to_thread(subprocess.run, [
        str(Path(sys.executable).parent / "threadline"), "review", "list", "--json", "--data-dir", str(tmp_path)],
        env={**environment, "THREADLINE_URL": stack.http_url, "THREADLINE_TOKEN": stack.tokens["reviewer"]},
        capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert case_id in {c["caseId"] for c in json.loads(listed.stdout)["cases"]}
