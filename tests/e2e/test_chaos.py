"""Chaos under `threadline up`: agents stage over MCP and reviewers decide over the API while every service,
the relay, the embedded NATS and the embedded PostgreSQL are SIGKILLed in turn.

Nothing acknowledged is lost, the event stream is exact (every outbox event once, none extra), revisions
have no gaps, and every error a caller saw was `unavailable`. The gateway is not among the victims: it is
the edge the callers talk to, and killing it can only drop their connections. `make test` kills each
victim once; THREADLINE_FULL=1 kills each twice over at least 90 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from shared.db.session import asyncpg_dsn
from shared.settings import Settings
from tests.e2e.system import RunningSystem, start_system
from tests.events import stream_events
from tests.factories import source_item

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FULL = bool(os.environ.get("THREADLINE_FULL"))
VICTIMS = ("staging", "review", "thesis-delta", "projection", "relay", "nats-server", "postgres")
ROUNDS = 2 if FULL else 1
QUIET_SECONDS = 5.0 if FULL else 0.5  # load runs on between one victim's recovery and the next kill
MIN_CHAOS_SECONDS = 90.0 if FULL else 0.0
CASES, AGENTS_PER_CASE = (4, 3) if FULL else (2, 2)
RECOVERY_SECONDS = 30.0
# What a caller may be told during the run: `unavailable` in an outage, and `stale_revision` when a reviewer's
# decision moved the case past the agent's pin (the agent reads again and stages anew).
ANSWERS = {"unavailable", "stale_revision"}


@dataclass
class Record:
    """What callers were told: acknowledged work, and every error they saw (code, or the exception)."""

    proposals: dict[str, str] = field(default_factory=dict)  # proposalId → caseId
    decisions: list[tuple[str, int]] = field(default_factory=list)  # (caseId, revision after)
    errors: Counter = field(default_factory=Counter)
    dropped: list[str] = field(default_factory=list)  # failures that were not an answer at all
    refusals: list[str] = field(default_factory=list)  # answers other than `unavailable`, as the caller read them
    committed_unseen: int = 0  # decisions that committed although their caller was told `unavailable`
    stopping: bool = False


class Caller:
    """Records the error code of every refused HTTP answer on one client (MCP transport included)."""

    def __init__(self, record: Record) -> None:
        self.record = record
        self.refused: str | None = None
        self.last_code: str | None = None

    async def on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            await response.aread()
            try:
                self.refused = response.json()["error"]["code"]
            except (ValueError, KeyError, TypeError):
                self.refused = f"http {response.status_code}"
            self.last_code = self.refused

    def failed(self, error: Exception) -> None:
        if self.refused is not None:
            self.record.errors[self.refused] += 1
        else:
            self.record.dropped.append(repr(error)[:200])
        self.refused = None


async def agent(system: RunningSystem, record: Record, token: str, case_id: str, name: str) -> None:
    caller = Caller(record)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30,
                              event_hooks={"response": [caller.on_response]})

    async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        try:
            result = await client.call_tool(tool, arguments)
        except Exception as error:  # noqa: BLE001 - recorded: the assertion says whether it was an answer
            caller.failed(error)
            return None
        if result.is_error:
            error = result.structured_content["error"]
            record.errors[error["code"]] += 1
            caller.last_code = error["code"]
            if error["code"] not in ANSWERS:
                record.refusals.append(f"{tool}: {result.content[0].text}"[:300])
            return None
        return result.structured_content

    async with http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http)) as client:
        for k in range(10_000):
            if record.stopping:
                return
            workspace = await call(client, "get_workspace", {})
            if workspace is None:
                await asyncio.sleep(0.2)
                continue
            arguments = {"expectedCaseId": case_id, "expectedRevision": workspace["workspaceRevision"],
                         "sources": [source_item(f"{name}-{k}")]}
            while (staged := await call(client, "stage_sources", arguments)) is None:  # the identical call again
                if record.refusals or record.dropped:
                    return
                if caller.last_code == "stale_revision":
                    break
                await asyncio.sleep(0.2)
            if staged is not None:
                record.proposals[staged["proposalId"]] = case_id
            await asyncio.sleep(0.05)


async def reviewer(system: RunningSystem, record: Record, case_id: str) -> None:
    caller = Caller(record)
    async with httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                                  headers={"Authorization": f"Bearer {system.credentials['reviewer']}"},
                                  event_hooks={"response": [caller.on_response]}) as http:

        async def get(path: str) -> Any:
            try:
                response = await http.get(path)
            except httpx2.HTTPError as error:
                caller.failed(error)
                return None
            if response.status_code != 200:
                caller.failed(RuntimeError(response.text))
                return None
            return response.json()

        async def decided(proposal_id: str) -> bool:
            found = await get(f"/api/v1/proposals/{proposal_id}")
            return found is not None and found["status"] != "pending"

        while not record.stopping:
            listed = await get(f"/api/v1/cases/{case_id}/proposals?status=pending")
            case = await get(f"/api/v1/cases/{case_id}")
            if listed is None or case is None or not listed["proposals"]:
                await asyncio.sleep(0.2)
                continue
            proposal = listed["proposals"][0]
            body = {"accept": [i["itemId"] for i in proposal["items"]], "expectedRevision": case["revision"],
                    "note": "chaos"}
            retried = False
            while True:  # the identical decision again until it is answered
                try:
                    response = await http.post(f"/api/v1/proposals/{proposal['proposalId']}/decisions", json=body)
                except httpx2.HTTPError as error:
                    caller.failed(error)
                    response = None
                if response is not None and response.status_code == 200:
                    record.decisions.append((case_id, response.json()["revision"]))
                    break
                if response is not None:
                    caller.failed(RuntimeError(response.text))
                    if retried and caller.last_code == "stale_revision" and await decided(proposal["proposalId"]):
                        # The attempt that answered `unavailable` had committed, and the repeat is refused
                        # instead of returning the recorded decision (harmless repeats: issue 12).
                        record.committed_unseen += 1
                        break
                    if response.status_code != 503:
                        record.refusals.append(f"decide: {response.text}"[:300])
                if record.refusals or record.dropped:
                    return
                retried = True
                await asyncio.sleep(0.2)


async def kill_and_wait(system: RunningSystem, victim: str) -> float:
    """SIGKILL one child; seconds until `up` restarted it and the system is ready again."""
    old = system.pid_of(victim)
    os.kill(old, signal.SIGKILL)
    killed = time.monotonic()
    while time.monotonic() - killed < RECOVERY_SECONDS:
        await asyncio.sleep(0.1)
        try:
            restarted = system.pid_of(victim) not in (old, None)
        except (OSError, KeyError, ValueError):
            continue
        if restarted and await asyncio.to_thread(system.ready):
            return time.monotonic() - killed
    raise AssertionError(f"{victim} was not back within {RECOVERY_SECONDS}s")


async def outbox(database_url: str) -> list[str]:
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        deadline = time.monotonic() + 30
        while await connection.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL"):
            assert time.monotonic() < deadline, "the relay did not publish every event"
            await asyncio.sleep(0.2)
        return [str(r["event_id"]) for r in await connection.fetch("SELECT event_id FROM outbox ORDER BY id")]
    finally:
        await connection.close()


@pytest.fixture
def system(tmp_path):
    running = start_system(tmp_path / "chaos")
    yield running
    if running.process.poll() is None:
        running.stop()


async def test_killing_every_child_in_turn_loses_nothing_and_every_error_is_unavailable(system):
    record = Record()
    case_ids = [f"chaos-{n}" for n in range(CASES)]
    async with httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                                  headers={"Authorization": f"Bearer {system.credentials['admin']}"}) as admin:
        tokens = []
        for case_id in case_ids:
            assert (await admin.post("/api/v1/cases", json={"caseId": case_id, "title": case_id,
                                                            "question": "Does it heal?"})).status_code == 201
            for a in range(AGENTS_PER_CASE):
                issued = await admin.post("/api/v1/tokens", json={"role": "agent", "name": f"{case_id}-agent-{a}",
                                                                  "caseId": case_id})
                tokens.append((issued.json()["token"], case_id, f"{case_id}-a{a}"))
    load = [asyncio.create_task(agent(system, record, *t)) for t in tokens]
    load += [asyncio.create_task(reviewer(system, record, case_id)) for case_id in case_ids]

    recovery: dict[str, list[float]] = defaultdict(list)
    started = time.monotonic()
    try:
        await asyncio.sleep(1.0)
        for _ in range(ROUNDS):
            for victim in VICTIMS:
                recovery[victim].append(await kill_and_wait(system, victim))
                await asyncio.sleep(QUIET_SECONDS)
        while time.monotonic() - started < MIN_CHAOS_SECONDS:
            await asyncio.sleep(0.5)
        chaos_seconds = time.monotonic() - started
        acknowledged_before_stop = len(record.proposals)
    finally:
        record.stopping = True
        done, pending = await asyncio.wait(load, timeout=60)
    assert not pending, f"callers did not finish; refusals {record.refusals[:3]}, dropped {record.dropped[:3]}"
    for task in done:
        task.result()

    # Nothing acknowledged is lost.
    async with httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                                  headers={"Authorization": f"Bearer {system.credentials['reviewer']}"}) as http:
        stored = {}
        revisions = {}
        for case_id in case_ids:
            listed = (await http.get(f"/api/v1/cases/{case_id}/proposals?status=all&limit=500")).json()
            stored.update({p["proposalId"]: case_id for p in listed["proposals"]})
            revisions[case_id] = (await http.get(f"/api/v1/cases/{case_id}")).json()["revision"]
        for proposal_id in set(record.proposals) - set(stored):  # beyond one page
            if (await http.get(f"/api/v1/proposals/{proposal_id}")).status_code == 200:
                stored[proposal_id] = record.proposals[proposal_id]
    lost = set(record.proposals) - set(stored)
    assert not lost, f"{len(lost)} acknowledged proposal(s) lost"
    for case_id, revision in record.decisions:
        assert revision <= revisions[case_id]

    # The stream holds every committed event exactly once, and revisions have no gaps.
    committed = await outbox(system.runtime["databaseUrl"])
    events = await stream_events(Settings(data_dir=system.data_dir))
    in_stream = Counter(e["id"] for e in events)
    assert [i for i, n in in_stream.items() if n > 1] == [], "duplicated events in the stream"
    assert set(committed) - set(in_stream) == set(), "committed events missing from the stream"
    assert set(in_stream) - set(committed) == set(), "events in the stream that were never committed"
    for case_id in case_ids:
        seen = [e["revision"] for e in events if e["type"] == "threadline.ledger.changed"
                and e["data"]["caseId"] == case_id]
        assert seen == list(range(1, revisions[case_id] + 1)), f"{case_id}: {seen}"

    # Every error a caller saw was an answer saying `unavailable`.
    kills = sum(len(times) for times in recovery.values())
    print(f"\nchaos: {kills} kills over {chaos_seconds:.0f}s; recovery seconds (max per victim): "
          + ", ".join(f"{v} {max(t):.1f}" for v, t in recovery.items())
          + f"; {acknowledged_before_stop} proposals acknowledged during the kills, {len(record.proposals)} in all, "
            f"{len(record.decisions)} decisions (+{record.committed_unseen} committed unseen), {len(events)} events; errors seen: {dict(record.errors)}; "
            f"dropped: {len(record.dropped)}")
    assert record.dropped == [], record.dropped[:5]
    assert record.refusals == [], record.refusals[:5]
    assert set(record.errors) <= ANSWERS, dict(record.errors)
    assert all(len(recovery[v]) == ROUNDS for v in VICTIMS)
    assert len(record.decisions) >= CASES, "reviewers must have decided during the run"
    if FULL:
        assert chaos_seconds >= 90
