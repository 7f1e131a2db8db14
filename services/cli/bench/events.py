"""`threadline bench events`: how long from a decision's commit until its event reaches a subscriber.

Runs against a running system (it finds it like every CLI command). Each measured decision accepts
one staged source, which commits revision r+1 and its `ledger.changed` event; a subscriber on the
stream notes when each event arrives. The event's CloudEvents `time` is taken inside the committing
transaction, just before the commit, so `arrival - time` is commit-to-subscriber latency (overstated
by the last statements of the transaction, well under a millisecond here). Two phases: at rest (one
reviewer, one decision at a time) and under load (N reviewers deciding concurrently, each on a case).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import statistics
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import nats
from nats.js.api import DeliverPolicy
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from services.cli.bench.stats import percentile
from services.cli.bench.system import machine
from services.gateway.auth import TokenStore
from shared.contracts import Actor
from shared.db.session import Database
from shared.events import EventType
from shared.messaging import ServiceClient, create_broker, stop_broker
from shared.nats_auth import OPERATOR, nats_options
from shared.settings import Settings
from shared.subjects import Command, Subjects


def describe(name: str, latencies_ms: list[float], seconds: float, decisions: int) -> dict[str, Any]:
    return {
        "phase": name,
        "decisions": decisions,
        "decisionsPerSecond": round(decisions / seconds, 1) if seconds else None,
        "p50Ms": round(percentile(latencies_ms, 0.50), 2),
        "p90Ms": round(percentile(latencies_ms, 0.90), 2),
        "p99Ms": round(percentile(latencies_ms, 0.99), 2),
        "maxMs": round(max(latencies_ms), 2),
        "meanMs": round(statistics.fmean(latencies_ms), 2),
    }


class Bench:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.run_id = secrets.token_hex(3)
        self.arrivals: dict[str, float] = {}
        self.sent_at: dict[str, float] = {}
        self.arrived = asyncio.Condition()
        self.on_arrival: Callable[[], None] = lambda: None  # the progress display's tick

    async def prepare_case(self, n: int, proposals: int) -> list[tuple[str, str]]:
        case_id = f"bench-{self.run_id}-{n}"
        operator = Actor(name="bench", role="admin").dump()
        agent = {"name": f"bench-agent-{self.run_id}-{n}", "role": "agent"}
        await self.client.call(Command.CREATE_CASE, {"actor": operator, "caseId": case_id, "title": "bench",
                                                     "question": "How fast do events arrive?"})
        await self.tokens.assign(agent["name"], case_id)
        staged = []
        for k in range(proposals):
            source = {"id": f"s{k}", "publisher": "bench", "title": "bench", "url": "https://example.org/bench",
                      "publicationDate": "unknown", "snapshotDate": "2026-01-01", "type": "primary",
                      "authority": "bench", "evidenceText": "bench", "provenanceNote": "bench"}
            # Straight to staging, as the gateway sends it: with the case the agent works on.
            result = await self.client.call(Command.STAGE_SOURCES, {"actor": agent, "discoveredCaseId": case_id, "args": {
                "expectedCaseId": case_id, "expectedRevision": 0, "sources": [source]}})
            staged.append((result["proposalId"], f"s{k}"))
        return staged

    async def listen(self, js: Any) -> Any:
        async def on_event(message: Any) -> None:
            arrived = time.time()
            event = json.loads(message.data)
            committed = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            async with self.arrived:
                self.arrivals[event["data"]["decisionId"]] = (arrived - committed) * 1000
                self.arrived.notify_all()
            self.on_arrival()

        every_case = Subjects(self.settings.nats_prefix).case_event("*", EventType.LEDGER_CHANGED)
        return await js.subscribe(every_case, cb=on_event,
                                  ordered_consumer=True, deliver_policy=DeliverPolicy.NEW,
                                  stream=self.settings.stream_name)

    async def decide(self, proposal_id: str, item: str, reviewer: str, expected_revision: int) -> str:
        outcome = await self.client.call(Command.DECIDE, {
            "actor": {"name": reviewer, "role": "reviewer"}, "proposalId": proposal_id, "accept": [item],
            "expectedRevision": expected_revision})
        return outcome["decisionId"]

    async def wait_for(self, decision_ids: list[str], timeout: float = 30) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: all(d in self.arrivals for d in decision_ids)),
                                   timeout)

    async def run(self, decisions: int, reviewers: int, progress: Progress) -> list[dict[str, Any]]:
        broker = create_broker(self.settings, role=OPERATOR, name="threadline-bench")
        await broker.connect()
        db = Database.from_url(self.settings.resolved_database_url(), pool_size=2, application_name="threadline-bench")
        self.client = ServiceClient(broker, Subjects(self.settings.nats_prefix), 30.0)
        self.tokens = TokenStore(db)
        connection = await nats.connect(**nats_options(self.settings, OPERATOR, name="threadline-bench-subscriber").client())
        try:
            subscription = await self.listen(connection.jetstream())
            per_reviewer = max(1, decisions // reviewers)
            at_rest = await self.prepare_case(0, decisions)
            loaded = await asyncio.gather(*(self.prepare_case(n + 1, per_reviewer) for n in range(reviewers)))
            rest_task = progress.add_task("at rest: events arrived", total=len(at_rest))
            load_task = progress.add_task(f"{reviewers} reviewers: events arrived", total=per_reviewer * reviewers)

            started = time.perf_counter()
            rest_ids = []
            self.on_arrival = lambda: progress.advance(rest_task)
            for revision, (proposal_id, item) in enumerate(at_rest):
                decision_id = await self.decide(proposal_id, item, "bench-reviewer", revision)
                await self.wait_for([decision_id])
                rest_ids.append(decision_id)
            rest_seconds = time.perf_counter() - started

            async def reviewer(n: int, staged: list[tuple[str, str]]) -> list[str]:
                # Each reviewer works its own case, so its decisions move that case one revision each.
                return [await self.decide(p, i, f"bench-reviewer-{n}", r) for r, (p, i) in enumerate(staged)]

            started = time.perf_counter()
            self.on_arrival = lambda: progress.advance(load_task)
            load_ids = [d for ids in await asyncio.gather(*(reviewer(n, s) for n, s in enumerate(loaded)))
                        for d in ids]
            await self.wait_for(load_ids, timeout=120)
            load_seconds = time.perf_counter() - started
            await subscription.unsubscribe()
        finally:
            await connection.close()
            await stop_broker(broker)
            await db.dispose()
        return [
            describe("at rest (1 reviewer, sequential)", [self.arrivals[d] for d in rest_ids], rest_seconds,
                     len(rest_ids)),
            describe(f"under load ({reviewers} concurrent reviewers)", [self.arrivals[d] for d in load_ids],
                     load_seconds, len(load_ids)),
        ]


async def run_events(settings: Settings, decisions: int, reviewers: int, console: Console) -> dict[str, Any]:
    """The events bench's report: each phase's decisions and commit-to-subscriber latencies."""
    before = machine()
    progress = Progress(TextColumn("{task.description}", style="bold"), BarColumn(), MofNCompleteColumn(),
                        console=console)
    with progress:
        phases = await Bench(settings).run(decisions, reviewers, progress)
    return {"decisions": decisions, "reviewers": reviewers, "phases": phases,
            "machineBefore": before, "machineAfter": machine()}
