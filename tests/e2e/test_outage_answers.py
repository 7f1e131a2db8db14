"""Under `threadline up`, outage answers tell the truth: a decision whose answer NATS lost says it may have been
applied and that repeating it is harmless (and the repeat is replayed); a call while `up` restarts a killed
service says it is restarting, not that an operator must start it; a call while PostgreSQL is down names PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx2
import nats
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from shared.nats_auth import OPERATOR, nats_options
from shared.settings import Settings
from shared.subjects import Service, Subjects
from tests.e2e.system import RunningSystem, start_system
from tests.factories import source_item

pytestmark = pytest.mark.e2e

CASE = "outages"
RECOVERY_SECONDS = 60.0


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    # Each decision's reply waits a few seconds after its commit: an outage can be made to strike in between.
    running = start_system(tmp_path_factory.mktemp("answers") / "data",
                           env={"THREADLINE_FAILPOINTS": "pause_after_commit:decide"})
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture(scope="module")
async def agent_token(system):
    async with httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                                  headers={"Authorization": f"Bearer {system.credentials['admin']}"}) as admin:
        created = await admin.post("/api/v1/cases", json={"caseId": CASE, "title": "Outages", "question": "Told?"})
        assert created.status_code == 201, created.text
        issued = await admin.post("/api/v1/tokens", json={"role": "agent", "name": "outage-agent", "caseId": CASE})
        return issued.json()["token"]


def agent(system: RunningSystem, token: str) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http))


def reviewer(system: RunningSystem) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                              headers={"Authorization": f"Bearer {system.credentials['reviewer']}"})


async def stage(mcp: Client, source_id: str) -> dict:
    workspace = (await mcp.call_tool("get_workspace", {})).structured_content
    return await mcp.call_tool("stage_sources", {"expectedCaseId": CASE,
                                                 "expectedRevision": workspace["workspaceRevision"],
                                                 "sources": [source_item(source_id)]})


def serving(system: RunningSystem, victim: str) -> bool:
    """The gateway is ready, and so is a restarted service on its own probe port (subscribed once it says so)."""
    if not system.ready():
        return False
    if victim not in system.runtime["services"]:
        return True
    probe = system.runtime["services"][victim]["healthUrl"].removesuffix("/healthz") + "/readyz"
    try:
        return httpx2.get(probe, timeout=5).status_code == 200
    except httpx2.HTTPError:
        return False


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, its sockets closed, not yet reaped
    except psutil.NoSuchProcess:
        return True


async def until_unanswered(system: RunningSystem, victim: Service, pid: int, timeout: float = 30) -> None:
    """Wait until the killed `pid` is gone and NATS has dropped its subscriptions: a request to the service finds
    no responders, as the gateway's next call will. (A fixed pause was sometimes too short on busy cores.)"""
    settings = Settings(data_dir=system.data_dir, nats_url=system.runtime["natsUrl"])
    connection = await nats.connect(**nats_options(settings, OPERATOR, name="test-outage").client())
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"NATS still had a {victim} subscriber {timeout}s after the kill"
            if _gone(pid):
                try:
                    await connection.request(Subjects(settings.nats_prefix).health(victim), b"", timeout=5)
                except nats.errors.NoRespondersError:
                    return
                except nats.errors.TimeoutError:
                    pass
            await asyncio.sleep(0.05)
    finally:
        await connection.close()


async def until_back(system: RunningSystem, victim: str, old: int) -> None:
    deadline = time.monotonic() + RECOVERY_SECONDS
    while True:
        assert time.monotonic() < deadline, f"{victim} was not back within {RECOVERY_SECONDS}s"
        try:
            if system.pid_of(victim) not in (old, None) and await asyncio.to_thread(serving, system, victim):
                return
        except (OSError, KeyError, ValueError):
            pass
        await asyncio.sleep(0.1)


async def test_a_decision_whose_answer_nats_lost_says_a_repeat_is_harmless_and_the_repeat_is_replayed(
        system, agent_token):
    http, mcp = agent(system, agent_token)
    async with http, mcp:
        staged = (await stage(mcp, "lost-answer")).structured_content
    proposal = f"/api/v1/proposals/{staged['proposalId']}"
    body = {"accept": ["lost-answer"], "note": "accepted while NATS dies", "expectedRevision": 0}
    async with reviewer(system) as api:
        decision = asyncio.create_task(api.post(f"{proposal}/decisions", json=body))
        deadline = time.monotonic() + 20
        while (await api.get(proposal)).json()["status"] == "pending":  # committed: its reply is held back
            assert time.monotonic() < deadline and not decision.done(), "the decision did not commit"
            await asyncio.sleep(0.1)
        nats_server = system.pid_of("nats-server")
        os.kill(nats_server, signal.SIGKILL)
        answer = await asyncio.wait_for(decision, 30)

        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "unavailable"
        assert "NATS" in error["message"] and "may have been applied" in error["message"], error
        assert "repeating it is harmless" in error["hint"], error
        assert error["details"] == {"dependency": "nats", "service": "review", "mayHaveBeenApplied": True}

        await until_back(system, "nats-server", nats_server)
        repeated = await api.post(f"{proposal}/decisions", json=body)
        assert repeated.status_code == 200, repeated.text
        assert repeated.json()["replayed"] is True and repeated.json()["accepted"] == ["lost-answer"]
        assert (await api.get(f"/api/v1/cases/{CASE}")).json()["revision"] == 1, "applied once"


async def test_a_call_while_up_restarts_a_killed_service_is_told_it_is_restarting(system, agent_token):
    http, mcp = agent(system, agent_token)
    async with http, mcp:
        assert not (await stage(mcp, "before-the-kill")).is_error
        staging = system.pid_of("staging")
        os.kill(staging, signal.SIGKILL)
        await until_unanswered(system, Service.STAGING, staging)
        answer = await stage(mcp, "while-restarting")
        assert answer.is_error, "up cannot have restarted it yet"
        text = answer.content[0].text
        assert answer.structured_content["error"]["code"] == "unavailable", text
        assert "staging service is restarting" in text and "retry in a few seconds" in text, text
        assert "operator must start it" not in text, text

        await until_back(system, "staging", staging)
        assert not (await stage(mcp, "after-the-restart")).is_error


async def test_a_gateway_just_restarted_tells_a_call_to_a_killed_service_it_has_not_called_yet_that_it_is_restarting(
        system, agent_token):
    gateway = system.pid_of("gateway")
    os.kill(gateway, signal.SIGKILL)
    await until_back(system, "gateway", gateway)
    http, mcp = agent(system, agent_token)
    async with http, mcp:  # the new gateway has heard from no staging replica: nothing was staged through it
        staging = system.pid_of("staging")
        os.kill(staging, signal.SIGKILL)
        await until_unanswered(system, Service.STAGING, staging)
        answer = await stage(mcp, "first-call-after-the-gateway-restart")
        text = answer.content[0].text
        assert answer.is_error and answer.structured_content["error"]["code"] == "unavailable", text
        assert "staging service is restarting" in text and "operator must start it" not in text, text

        await until_back(system, "staging", staging)
        assert not (await stage(mcp, "after-both-restarts")).is_error


async def test_a_call_while_postgresql_is_down_is_told_it_is_postgresql(system, agent_token):
    """`up` is held (SIGSTOP) so that it cannot start PostgreSQL again while the calls are made."""
    postmaster = psutil.Process(system.pid_of("postgres"))
    backends = postmaster.children(recursive=True)
    up = psutil.Process(system.process.pid)
    up.suspend()
    try:
        postmaster.kill()
        psutil.wait_procs([postmaster, *backends], timeout=30)  # every server process is gone
        http, mcp = agent(system, agent_token)
        async with reviewer(system) as api, http, mcp:
            answer = await api.get(f"/api/v1/cases/{CASE}")
            tool = await mcp.call_tool("get_workspace", {})
        assert answer.status_code == 503, answer.text
        assert tool.is_error, tool.content[0].text
        for error in (answer.json()["error"], tool.structured_content["error"]):
            assert error["code"] == "unavailable", error
            assert error["details"]["dependency"] == "postgresql", error
            assert "PostgreSQL" in error["message"], error
    finally:
        up.resume()
    await until_back(system, "postgres", postmaster.pid)
