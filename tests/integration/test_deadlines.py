"""A service does no work for a caller that has stopped waiting: a command sent longer ago than its caller waits is
answered `unavailable` and not handled; a fresh one, one without a deadline and a health ping are handled."""

from __future__ import annotations

import secrets
import time

import orjson
import pytest
from prometheus_client import REGISTRY

from services.gateway.auth import TokenStore
from shared import messaging
from shared.deadlines import deadline_headers
from shared.errors import Unavailable
from shared.subjects import Command, Service, Subjects
from tests.factories import source_item
from tests.support import connect_nats

ADMIN = {"name": "operator", "role": "admin"}


def expired(service: str, command: Command) -> float:
    return REGISTRY.get_sample_value("threadline_commands_expired_total",
                                     {"service": service, "command": command.value}) or 0.0


def sent_seconds_ago(monkeypatch, seconds: float) -> None:  # noqa: ANN001
    """The client's requests say they were sent `seconds` ago: as if each had waited that long in a queue."""
    monkeypatch.setattr(messaging, "deadline_headers",
                        lambda timeout: deadline_headers(timeout, now=time.time() - seconds))


async def new_case(stack) -> tuple[str, dict]:  # noqa: ANN001
    case_id = f"late-{secrets.token_hex(3)}"
    await stack.client.call(Command.CREATE_CASE, {"actor": ADMIN, "caseId": case_id, "title": "t", "question": "q"})
    agent = {"name": f"agent-{case_id}", "role": "agent"}
    await TokenStore(stack.db).assign(agent["name"], case_id)
    return case_id, agent


def stage(case_id: str, agent: dict, source_id: str) -> dict:
    return {"actor": agent, "discoveredCaseId": case_id,
            "args": {"expectedCaseId": case_id, "expectedRevision": 0, "sources": [source_item(source_id)]}}


async def staged(stack, case_id: str) -> list[str]:  # noqa: ANN001
    listed = await stack.client.call(Command.LIST_PROPOSALS, {"actor": ADMIN, "caseId": case_id, "status": "all"})
    return [item["itemId"] for proposal in listed["proposals"] for item in proposal["items"]]


async def test_a_stage_call_sent_longer_ago_than_its_timeout_stores_nothing_and_a_fresh_one_is_handled(
        stack, monkeypatch):
    case_id, agent = await new_case(stack)
    before = expired("staging", Command.STAGE_SOURCES)

    sent_seconds_ago(monkeypatch, stack.client.timeout + 5)
    with pytest.raises(Unavailable) as refused:
        await stack.client.call(Command.STAGE_SOURCES, stage(case_id, agent, "s1"))
    monkeypatch.undo()
    assert "stopped waiting" in refused.value.message and "did nothing" in refused.value.message
    assert refused.value.details["mayHaveBeenApplied"] is False
    assert expired("staging", Command.STAGE_SOURCES) == before + 1
    assert await staged(stack, case_id) == []

    answer = await stack.client.call(Command.STAGE_SOURCES, stage(case_id, agent, "s2"))
    assert answer["proposalId"]
    assert await staged(stack, case_id) == ["s2"]
    assert expired("staging", Command.STAGE_SOURCES) == before + 1


async def test_a_command_without_a_deadline_or_from_a_clock_far_behind_is_handled(stack, monkeypatch):
    case_id, agent = await new_case(stack)
    subjects = Subjects(stack.settings.nats_prefix)
    nc = await connect_nats(stack.settings)
    try:  # another caller: no headers at all
        reply = await nc.request(subjects.command(Command.STAGE_SOURCES), orjson.dumps(stage(case_id, agent, "s1")),
                                 timeout=10)
        assert "result" in orjson.loads(reply.data), reply.data
        # A health ping is never shed, whatever it carries.
        old = deadline_headers(1.0, now=time.time() - 5)
        pong = await nc.request(subjects.health(Service.STAGING), b"{}", timeout=5, headers=old)
        assert orjson.loads(pong.data)["result"]["service"] == "staging"
    finally:
        await nc.close()

    sent_seconds_ago(monkeypatch, 3600)  # the caller's clock an hour behind: skew, not a queue
    await stack.client.call(Command.STAGE_SOURCES, stage(case_id, agent, "s2"))
    monkeypatch.undo()
    assert sorted(await staged(stack, case_id)) == ["s1", "s2"]
