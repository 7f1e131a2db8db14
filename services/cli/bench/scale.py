"""`threadline bench scale`: what reads, decisions and the fill rate cost as one case grows.

One agent (official MCP client) and one reviewer (the HTTP API) fill a fresh case cycle by cycle:
stage four claims pinned to the case's revision, accept them. At each size a fresh reference case is
filled to the first size, and the two are timed turn about — `get_workspace` (summary), `get_workspace
scope=claims` and a decision, a few times each (medians) — so each ratio compares the grown case with a
small one in the same moments, whatever else the machine did between sizes. The fill rate (cycles per
second) of each segment and of the first and last claims are measured on the growing case alone.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from services.cli.bench.calls import mcp_agent, stage_claims_args, tool_outcome
from services.cli.bench.stats import (
    Cycle,
    edge_rates,
    fill_rate,
    median,
    reference_name,
    rounded,
    scale_sizes,
    with_scale_ratios,
)
from services.cli.bench.system import BenchCase, Reviewer, System, machine
from shared.errors import Unavailable
from shared.settings import Settings

CLAIMS_PER_CYCLE = 4


@dataclass(frozen=True)
class ScaleOptions:
    claims: int = 3000
    steps: tuple[int, ...] = (100, 300, 1000)
    probes: int = 9
    window: int = 300


async def timed_call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    result, error = tool_outcome(await client.call_tool(tool, arguments))
    elapsed = (time.perf_counter() - began) * 1000
    if error is not None:
        raise Unavailable(f"{tool} was refused during the scale run ({error}): {result}")
    return elapsed, result or {}


class Filler:
    """The fill loop: stage + accept, one cycle at a time, remembering each cycle's cost."""

    def __init__(self, agent: Any, reviewer: Reviewer, case_id: str, source_ids: list[str], revision: int) -> None:
        self.agent = agent
        self.reviewer = reviewer
        self.case_id = case_id
        self.source_ids = source_ids
        self.revision = revision
        self.claims = 0
        self.cycles: list[Cycle] = []

    @classmethod
    async def of(cls, agent: Any, reviewer: Reviewer, case: BenchCase) -> Filler:
        _, workspace = await timed_call(agent, "get_workspace", {})
        return cls(agent, reviewer, case.case_id, case.source_ids, workspace["workspaceRevision"])

    async def cycle(self, count: int) -> Cycle:
        ids = [f"f{len(self.cycles)}-{j}" for j in range(count)]
        began = time.perf_counter()
        _, staged = await timed_call(self.agent, "stage_claims",
                                     stage_claims_args(self.case_id, self.revision, ids, self.source_ids))
        deciding = time.perf_counter()
        decision, refused = await self.reviewer.accept(staged["proposalId"], ids, self.revision)
        ended = time.perf_counter()
        if decision is None or decision.get("refused"):
            raise Unavailable(f"the decision on {staged['proposalId']} was refused: "
                              f"{refused or decision.get('refused')}")
        self.revision = decision["revision"]
        self.claims += len(decision["accepted"])
        cycle = Cycle(self.claims, ended - began, (ended - deciding) * 1000)
        self.cycles.append(cycle)
        return cycle

    async def settled(self, patience: float = 10.0) -> None:
        """Wait until the case's view shows its last decision, so that a read is not timed catching it up
        (once answered, the read is discarded)."""
        deadline = time.monotonic() + patience
        while (await timed_call(self.agent, "get_workspace", {}))[1]["workspaceRevision"] < self.revision:
            if time.monotonic() > deadline:
                raise Unavailable(f"the view of {self.case_id} did not reach revision {self.revision}")
            await asyncio.sleep(0.05)

    async def fill_to(self, size: int, on_cycle: Any) -> list[Cycle]:
        first = len(self.cycles)
        while self.claims < size:
            await self.cycle(min(CLAIMS_PER_CYCLE, size - self.claims))
            on_cycle(self)
        return self.cycles[first:]


async def side_by_side(grown: Filler, reference: Filler, probes: int) -> dict[str, Any]:
    """Each measure of the grown case and of the reference, taken turn about: `probes` reads of each
    section, then `probes` stage + accept cycles, each case's medians."""
    pair = ((False, grown), (True, reference))
    taken: dict[str, list[float]] = {}

    def keep(who: bool, measure: str, ms: float) -> None:
        taken.setdefault(reference_name(measure) if who else measure, []).append(ms)

    claims = grown.claims
    reference_claims = reference.claims
    for _, filler in pair:
        await filler.settled()
    for measure, arguments in (("summaryMs", {}), ("claimsScopeMs", {"scope": "claims"})):
        for _ in range(probes):
            for who, filler in pair:
                keep(who, measure, (await timed_call(filler.agent, "get_workspace", arguments))[0])
    for _ in range(probes):
        for who, filler in pair:
            keep(who, "decisionMs", (await filler.cycle(CLAIMS_PER_CYCLE)).decision_ms)
    return {"claims": claims, "referenceClaims": reference_claims,
            **{name: rounded(median(values), 1) for name, values in taken.items()}}


async def run_scale(settings: Settings, options: ScaleOptions, console: Console) -> dict[str, Any]:
    sizes = scale_sizes(options.steps, options.claims)
    before = machine()
    async with System.connect(settings) as system:
        case = await system.new_case("scale")
        agent_token = (await system.agent_tokens(case, 1, "filler"))[0]
        reviewer_token = await system.token("reviewer", f"{case.case_id}-reviewer")
        async with mcp_agent(system.mcp_url, agent_token) as agent, system.api(reviewer_token) as api:
            reviewer = Reviewer(api)
            filler = await Filler.of(agent, reviewer, case)
            checkpoints = []
            progress = Progress(TextColumn("{task.description}", style="bold"), BarColumn(),
                                TextColumn("{task.completed:>5.0f}/{task.total:.0f} claims"),
                                TextColumn("{task.fields[rate]} cycles/s"), console=console)
            with progress:
                task = progress.add_task("filling one case", total=options.claims, rate="—")

                def on_cycle(f: Filler) -> None:
                    recent = fill_rate(f.cycles[-10:])
                    progress.update(task, completed=f.claims, rate=f"{recent:.1f}" if recent else "—")

                for size in sizes:
                    segment = await filler.fill_to(size, on_cycle)
                    progress.update(task, description=f"probing at {size} claims")
                    small = await system.new_case("scale-reference")
                    small_token = (await system.agent_tokens(small, 1, "reference"))[0]
                    async with mcp_agent(system.mcp_url, small_token) as small_agent:
                        reference = await Filler.of(small_agent, reviewer, small)
                        await reference.fill_to(sizes[0], lambda _: None)
                        measured = await side_by_side(filler, reference, options.probes)
                    checkpoints.append({**measured, "fillRate": rounded(fill_rate(segment), 2),
                                        "cycles": len(segment)})
                    progress.update(task, description="filling one case")
    return {
        "caseId": case.case_id,
        "claimsPerCycle": CLAIMS_PER_CYCLE,
        "probes": options.probes,
        "sizes": with_scale_ratios(checkpoints),
        "edgeRates": edge_rates(filler.cycles, min(options.window, options.claims)),
        "httpUrl": system.http_url,
        "machineBefore": before,
        "machineAfter": machine(),
    }
