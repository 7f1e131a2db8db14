"""The relay under fire: killed with SIGKILL and restarted, or run twice at once; the stream stays exact."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from services.gateway.auth import TokenStore
from shared.contracts import Actor
from shared.db.tables import outbox
from shared.subjects import BACKEND_SERVICES, Command, Service
from tests.events import stream_events, wait_until_published
from tests.factories import source_item
from tests.processes import ServiceProcesses
from tests.support import Stack, new_deployment, remove_deployment, repeating

FULL = bool(os.environ.get("THREADLINE_FULL"))
# The size (500 decisions over 20 cases) runs in `make test`; THREADLINE_FULL=1 runs four times as many.
CASES, DECISIONS_PER_CASE = (40, 50) if FULL else (20, 25)
KILL_EVERY_SECONDS = 1.0
KILLS = 3  # at least: the load goes on until the relay has been killed this many times


class Relays(ServiceProcesses):
    """Relay processes, started and SIGKILLed like a crashing deployment."""

    def __init__(self, stack: Stack, log_dir: Path) -> None:
        super().__init__("relay", stack.environment(), log_dir)

    async def leading(self, candidates: list[subprocess.Popen], timeout: float = 30) -> subprocess.Popen:
        """The relay among the candidates that has taken the lead (it logs `partitions_leading`)."""
        for _ in range(int(timeout / 0.1)):
            for process in candidates:
                if "partitions_leading" in self.log_of(process):
                    return process
            await asyncio.sleep(0.1)
        raise AssertionError("no relay took the lead")


@pytest.fixture
async def relay_stack(servers):
    settings = await new_deployment(servers)
    without_relay = tuple(s for s in BACKEND_SERVICES if s is not Service.RELAY)  # the test runs its own
    stack = await Stack(settings).start(gateway=False, services=without_relay)
    yield stack
    await stack.stop()
    await remove_deployment(servers, settings)


async def make_decisions(stack: Stack, cases: int = CASES, per_case: int = DECISIONS_PER_CASE,
                         load_until: Callable[[], bool] = lambda: True) -> int:
    """`cases` cases, each with `per_case` accepted proposals (one revision each); the cases' focus events keep
    coming until their decisions are made and `load_until()` holds, so a chaos test's kills all land under load
    however fast the machine decides."""
    operator = Actor(name="operator", role="admin").dump()
    reviewer = Actor(name="reviewer", role="reviewer").dump()
    store = TokenStore(stack.db)

    async def one_case(n: int) -> None:
        case_id = f"chaos-{n}"
        await stack.client.call(Command.CREATE_CASE, {"actor": operator, "caseId": case_id, "title": "t",
                                                      "question": "q"})
        agent = {"name": f"agent-{n}", "role": "agent"}
        await store.assign(agent["name"], case_id)
        proposals = []  # the commands carry the case the gateway knows the agent discovered
        for k in range(per_case):
            staged = await repeating(lambda k=k: stack.client.call(Command.STAGE_SOURCES, {
                "actor": agent, "discoveredCaseId": case_id, "args": {
                    "expectedCaseId": case_id, "expectedRevision": 0, "sources": [source_item(f"s{k}")]}}))
            proposals.append((staged["proposalId"], f"s{k}"))
        deciding = True

        async def toggle_focus() -> None:
            # Focus events race the decisions: each must still land in revision order.
            focus = ["unresolved", "all"]
            while deciding or not load_until():
                await repeating(lambda f=focus[0]: stack.client.call(Command.SET_FOCUS, {
                    "actor": agent, "discoveredCaseId": case_id, "args": {"expectedCaseId": case_id, "focus": f}}))
                focus.reverse()

        toggler = asyncio.create_task(toggle_focus())
        for revision, (proposal_id, item) in enumerate(proposals):
            # The focus togglers keep the machine busy: a decision that waited out the request timeout is
            # repeated, as its answer says to (the repeat comes back replayed).
            await repeating(lambda p=proposal_id, i=item, r=revision: stack.client.call(
                Command.DECIDE, {"actor": reviewer, "proposalId": p, "accept": [i], "expectedRevision": r}))
        deciding = False
        await toggler

    await asyncio.gather(*(one_case(n) for n in range(cases)))
    return cases * per_case


def assert_exact_stream(events: list[dict], expected_cases: int, expected_revisions: int) -> None:
    ids = Counter(e["id"] for e in events)
    assert [i for i, n in ids.items() if n > 1] == [], "duplicate event ids in the stream"
    assert all(e["headers"]["Nats-Msg-Id"] == e["id"] for e in events)
    revisions: dict[str, list[int]] = defaultdict(list)
    every_case_event: dict[str, list[int]] = defaultdict(list)
    for event in events:
        case_id = event["natsSubject"].split(".")[3]
        if event["type"] == "threadline.ledger.changed":
            revisions[case_id].append(event["revision"])
        every_case_event[case_id].append(event["revision"])
    assert len(revisions) == expected_cases
    for case_id, seen in revisions.items():
        assert seen == list(range(1, expected_revisions + 1)), f"{case_id}: {seen}"
    for case_id, seen in every_case_event.items():
        assert seen == sorted(seen), f"{case_id}: events out of revision order {seen}"


async def assert_outbox_published_once(db, events: list[dict]) -> None:  # noqa: ANN001
    """Nothing lost and nothing twice, of every event type: the stream holds each outbox row's event exactly once,
    at the sequence the relay recorded when it marked the row, and nothing that is not in the outbox."""
    async with db.engine.connect() as connection:
        rows = (await connection.execute(select(outbox.c.event_id, outbox.c.event_type, outbox.c.stream_seq))).all()
    times = Counter(e["id"] for e in events)
    assert len(events) == len(rows), f"{len(events)} events in the stream, {len(rows)} in the outbox"
    assert set(times) == {r.event_id for r in rows}, "the stream and the outbox hold different events"
    assert set(times.values()) == {1}, "an event is in the stream more than once"
    assert Counter(e["type"] for e in events) == Counter(r.event_type for r in rows)
    assert {e["id"]: e["seq"] for e in events} == {r.event_id: r.stream_seq for r in rows}


@pytest.mark.slow
async def test_killing_the_relay_repeatedly_loses_and_duplicates_nothing(relay_stack, tmp_path):
    relays = Relays(relay_stack, tmp_path)
    current = relays.start()
    work = asyncio.create_task(make_decisions(relay_stack, load_until=lambda: relays.kills >= KILLS))
    try:
        while not work.done():
            await asyncio.sleep(KILL_EVERY_SECONDS)
            relays.kill(current)
            current = relays.start()
        decisions = await work
        await wait_until_published(relay_stack.db)
    finally:
        relays.stop_all()
    assert relays.kills >= KILLS, "the relay must be killed several times during the run"
    suppressed = sum(log.read_text().count("relay_duplicate_suppressed") for log in tmp_path.glob("relay-*.log"))
    print(f"\nrelay killed {relays.kills} times; JetStream dropped {suppressed} re-published duplicate(s)")
    assert decisions == CASES * DECISIONS_PER_CASE
    events = await stream_events(relay_stack.settings)
    assert_exact_stream(events, CASES, DECISIONS_PER_CASE)
    await assert_outbox_published_once(relay_stack.db, events)


@pytest.mark.slow
async def test_two_relays_at_once_keep_the_stream_exact_and_the_standby_takes_over(relay_stack, tmp_path):
    relays = Relays(relay_stack, tmp_path)
    both = [relays.start(), relays.start()]
    work = asyncio.create_task(make_decisions(relay_stack))
    try:
        leader = await relays.leading(both)
        await asyncio.sleep(KILL_EVERY_SECONDS)
        assert all(p.poll() is None for p in both), "both relays must run at the same time"
        relays.kill(leader)
        standby = await relays.leading([p for p in both if p is not leader])
        await work
        await wait_until_published(relay_stack.db)
    finally:
        relays.stop_all()
    assert "partitions_leading" in relays.log_of(standby)
    events = await stream_events(relay_stack.settings)
    assert_exact_stream(events, CASES, DECISIONS_PER_CASE)
    await assert_outbox_published_once(relay_stack.db, events)
