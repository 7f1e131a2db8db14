"""`threadline bench agents`: agents that read, think and stage beside reviewers accepting continuously.

Every agent (official MCP client) loops: `get_workspace`, wait `--think` seconds, `stage_claims` pinned
to the revision it read. Reviewers (HTTP API) accept everything pending as it arrives, each taking its
share of the proposals, so the revision keeps moving under the thinking agents. With `--repeat P` an
agent sends a stored call again, identically, with probability P (as after a lost answer). The report
counts each stage call's outcome: stored, refused as stale, replayed (`replayed: true`), other.
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from services.cli.bench.calls import mcp_agent, stage_claims_args, tool_outcome
from services.cli.bench.stats import agents_report, outcome_of
from services.cli.bench.system import BenchCase, Reviewer, System, machine
from shared.settings import Settings

IDLE_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class AgentsOptions:
    agents: int = 8
    think: float = 1.5
    seconds: float = 25.0
    reviewers: int = 2
    repeat: float = 0.0
    seed: int = 1


class AgentsBench:
    def __init__(self, system: System, case: BenchCase, options: AgentsOptions) -> None:
        self.system = system
        self.case = case
        self.options = options
        self.outcomes: Counter[str] = Counter()
        self.other: Counter[str] = Counter()
        self.reviewing: Counter[str] = Counter()
        self.read_errors: Counter[str] = Counter()
        self.repeats: Counter[str] = Counter()
        self.ready = 0
        self.go = asyncio.Event()
        self.agents_done = asyncio.Event()
        self.deadline = 0.0

    async def agent(self, n: int, token: str) -> None:
        chance = random.Random(self.options.seed * 1000 + n)
        async with mcp_agent(self.system.mcp_url, token) as client:
            self.ready += 1
            await self.go.wait()
            k = 0
            while time.perf_counter() < self.deadline:
                workspace, error = tool_outcome(await client.call_tool("get_workspace", {}))
                await asyncio.sleep(self.options.think)
                if error is not None:
                    self.read_errors[error] += 1
                    continue
                k += 1
                arguments = stage_claims_args(self.case.case_id, workspace["workspaceRevision"], [f"t{n}-k{k}"],
                                              self.case.source_ids)
                if await self.stage(client, arguments) == "stored" and chance.random() < self.options.repeat:
                    self.repeats[await self.stage(client, arguments)] += 1

    async def stage(self, client: Any, arguments: dict[str, Any]) -> str:
        result, error = tool_outcome(await client.call_tool("stage_claims", arguments))
        outcome = outcome_of(result, error)
        self.outcomes[outcome] += 1
        if outcome == "other":
            self.other[error or "unknown"] += 1
        return outcome

    async def reviewer(self, r: int, token: str) -> None:
        skipped: set[str] = set()
        async with self.system.api(token) as api:
            reviewer = Reviewer(api)
            while not self.agents_done.is_set():
                mine = [p for p in await reviewer.pending(self.case.case_id)
                        if p["proposalId"] not in skipped
                        and zlib.crc32(p["proposalId"].encode()) % self.options.reviewers == r]
                if not mine:
                    await asyncio.sleep(IDLE_POLL_SECONDS)
                    continue
                revision = await reviewer.revision(self.case.case_id)
                for proposal in mine:
                    items = [item["itemId"] for item in proposal["items"]]
                    decision, refused = await reviewer.accept(proposal["proposalId"], items, revision)
                    if decision is None:
                        self.reviewing["refused"] += 1
                        if refused != "stale_revision":
                            skipped.add(proposal["proposalId"])
                        revision = await reviewer.revision(self.case.case_id)
                        continue
                    self.reviewing["decisions"] += 1
                    revision = decision["revision"]
                    if decision.get("refused"):
                        skipped.add(proposal["proposalId"])  # what is left of it cannot be accepted

    async def run(self, progress: Progress) -> None:
        tokens = await self.system.agent_tokens(self.case, self.options.agents, "thinker")
        reviewer_tokens = [await self.system.token("reviewer", f"{self.case.case_id}-reviewer-{r}")
                           for r in range(self.options.reviewers)]
        agents = [asyncio.create_task(self.agent(n, token)) for n, token in enumerate(tokens)]
        while self.ready < len(tokens):
            if any(task.done() for task in agents):
                await asyncio.gather(*agents)  # raises the failure
            await asyncio.sleep(0.02)
        started = time.perf_counter()
        self.deadline = started + self.options.seconds
        self.go.set()
        reviewers = [asyncio.create_task(self.reviewer(r, t)) for r, t in enumerate(reviewer_tokens)]
        task = progress.add_task("agents thinking and staging", total=self.options.seconds, stored=0, stale=0)
        watcher = asyncio.create_task(self._watch(progress, task, started))
        try:
            await asyncio.gather(*agents)
        finally:
            self.agents_done.set()
            watcher.cancel()
            await asyncio.gather(*reviewers)
        progress.update(task, completed=self.options.seconds, stored=self.outcomes["stored"],
                        stale=self.outcomes["stale"])

    async def _watch(self, progress: Progress, task: Any, started: float) -> None:
        while True:
            progress.update(task, completed=min(time.perf_counter() - started, self.options.seconds),
                            stored=self.outcomes["stored"], stale=self.outcomes["stale"])
            await asyncio.sleep(0.25)


async def run_agents(settings: Settings, options: AgentsOptions, console: Console) -> dict[str, Any]:
    before = machine()
    async with System.connect(settings) as system:
        case = await system.new_case("agents")
        bench = AgentsBench(system, case, options)
        progress = Progress(TextColumn("{task.description}", style="bold"), BarColumn(),
                            TextColumn("{task.completed:>4.0f}/{task.total:.0f} s"),
                            TextColumn("{task.fields[stored]} stored, {task.fields[stale]} stale"), console=console)
        with progress:
            await bench.run(progress)
    return {
        "caseId": case.case_id,
        "agents": options.agents,
        "think": options.think,
        "seconds": options.seconds,
        "reviewers": options.reviewers,
        "repeat": options.repeat,
        **agents_report(bench.outcomes, bench.other),
        "repeats": dict(bench.repeats),
        "readErrors": dict(bench.read_errors),
        "reviewing": {"decisions": bench.reviewing["decisions"], "refused": bench.reviewing["refused"]},
        "httpUrl": system.http_url,
        "machineBefore": before,
        "machineAfter": machine(),
    }
