"""`threadline bench stage`: agents staging claims on Threadline and on two anchors, round by round.

Each round measures the three targets one after another with the same number of agents (the order
reversed every other round, so drift hits all alike), waiting for the machine to settle between runs.
Threadline gets a fresh case with canonical sources and fresh agent tokens for every run; the anchors
(`anchors.py`) run in processes of their own on the system's PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from services.cli.bench import plot
from services.cli.bench.anchors import ANCHOR_CASE, AnchorProcess, checked, scratch_table_ddl
from services.cli.bench.calls import stage_claims_args
from services.cli.bench.cpu import CpuWindow, system_pids
from services.cli.bench.load import Load, settle
from services.cli.bench.stats import Run, medians, round_order, stage_report
from services.cli.bench.system import System, machine, replicas
from services.cli.embedded import free_port
from shared.db.session import asyncpg_dsn
from shared.settings import Settings


@dataclass(frozen=True)
class StageOptions:
    agents: int = 64
    seconds: float = 15.0
    rounds: int = 3
    claims_per_call: int = 1
    sweep: tuple[int, ...] = ()
    plot: Path | None = None
    settle: float = 15.0


@contextlib.asynccontextmanager
async def anchors(database_url: str) -> AsyncIterator[dict[str, AnchorProcess]]:
    """The echo and direct anchors, running; the direct one's scratch table exists until they stop."""
    table = checked(f"threadline_bench_{secrets.token_hex(4)}")
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await connection.execute(scratch_table_ddl(table))
        started: dict[str, AnchorProcess] = {}
        try:
            for target, scratch in (("echo", None), ("direct", table)):
                started[target] = await AnchorProcess(target, free_port(), database_url, scratch).start()
            yield started
        finally:
            for process in started.values():
                await process.stop()
            await connection.execute(f"DROP TABLE IF EXISTS {table}")
    finally:
        await connection.close()


def progress_display(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}", style="bold"),
        BarColumn(),
        TextColumn("{task.completed:>4.0f}/{task.total:.0f} s"),
        TextColumn("{task.fields[calls]:>6} calls"),
        TextColumn("{task.fields[rate]:>7} calls/s"),
        TextColumn("{task.fields[errors]} errors"),
        console=console,
    )


class StageBench:
    def __init__(self, system: System, anchors: dict[str, AnchorProcess], options: StageOptions,
                 progress: Progress) -> None:
        self.system = system
        self.urls = {"threadline": system.mcp_url, **{t: p.mcp_url for t, p in anchors.items()}}
        self.anchor_pids = {t: p.process.pid for t, p in anchors.items() if p.process is not None}
        self.options = options
        self.progress = progress
        self.runs = 0

    async def measure(self, target: str, agents: int, label: str) -> dict[str, Any]:
        self.runs += 1
        tag = f"c{self.runs}"
        if target == "threadline":
            case = await self.system.new_case("stage")
            tokens = await self.system.agent_tokens(case, agents, tag)
            sources = case.source_ids
        else:
            tokens, sources = ["anchor"] * agents, [f"{ANCHOR_CASE}-s0"]
        per_call = self.options.claims_per_call

        def arguments(n: int, k: int, workspace: dict[str, Any]) -> dict[str, Any]:
            ids = [f"{tag}-a{n}-k{k}-{j}" for j in range(per_call)]
            return stage_claims_args(workspace["caseId"], workspace["workspaceRevision"], ids, sources)

        task = self.progress.add_task(f"{label} {target:<10}", total=self.options.seconds, calls=0, rate="—",
                                      errors=0)
        await settle(self.options.settle)
        load = Load(Run(target, agents), self.urls[target], tokens, self.options.seconds, "stage_claims", arguments)
        watcher = asyncio.create_task(self._watch(load, task))
        window = CpuWindow(self.processes(target))
        load.on_start = window.start
        try:
            run = await load.measure()
        finally:
            watcher.cancel()
        summary = run.summary()
        summary["cpuMsPerCall"] = window.stop().ms_per(summary["calls"])
        self.progress.update(task, completed=self.options.seconds, calls=summary["calls"],
                             rate=f"{summary['callsPerSecond']}", errors=summary["errors"])
        return summary

    def processes(self, target: str) -> dict[str, list[int]]:
        """The processes whose CPU a run of `target` is charged: the whole system, or the anchor and PostgreSQL."""
        system = system_pids(self.system.settings.runtime(), self.system.settings.data_dir)
        if target == "threadline":
            return system
        database = {"postgres": system["postgres"]} if target == "direct" and "postgres" in system else {}
        return {target: [self.anchor_pids[target]], **database}

    async def _watch(self, load: Load, task: TaskID) -> None:
        while True:
            elapsed = load.elapsed
            calls = len(load.run.latencies_ms)
            self.progress.update(task, completed=min(elapsed, self.options.seconds), calls=calls,
                                 rate=f"{calls / elapsed:.0f}" if elapsed > 0.5 else "—",
                                 errors=sum(load.run.errors.values()))
            await asyncio.sleep(0.25)

    async def rounds(self, agents: int, count: int, first_order: int = 0, label: str = "round") -> list[list]:
        measured = []
        for index in range(count):
            order = round_order(first_order + index)
            name = f"{label} {index + 1}/{count} · {agents:>3} agents"
            measured.append([await self.measure(target, agents, name) for target in order])
        return measured


async def run_stage(settings: Settings, options: StageOptions, console: Console) -> dict[str, Any]:
    before = machine()
    async with System.connect(settings) as system, anchors(settings.resolved_database_url()) as started:
        with progress_display(console) as progress:
            bench = StageBench(system, started, options, progress)
            main_rounds = await bench.rounds(options.agents, options.rounds)
            report = {"agents": options.agents, "seconds": options.seconds, "claimsPerCall": options.claims_per_call,
                      "httpUrl": system.http_url, "replicas": replicas(settings.runtime()), "machineBefore": before,
                      **stage_report(main_rounds)}
            sweep = []
            for index, agents in enumerate(options.sweep):
                point = main_rounds if agents == options.agents else await bench.rounds(
                    agents, 1, first_order=index, label="sweep")
                sweep.append({"agents": agents, "medians": medians(run for runs in point for run in runs)})
    report["machineAfter"] = machine()
    if sweep:
        report["sweep"] = sweep
    if options.plot is not None:
        title = f"bench stage: {options.seconds:g} s per run, {options.claims_per_call} claim(s) a call"
        report["plot"] = str(plot.draw(sweep, options.plot, title))
    return report
