"""Under `threadline up`: a healthy first start prints no warning, and once a killed PostgreSQL or nats-server
is back (`/readyz` 200), the very next calls all succeed — no connection that died with the server is used."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.system import RunningSystem, start_system
from tests.factories import source_item
from tests.processes import threadline

pytestmark = pytest.mark.e2e

CASE = "demo-heat-pumps"  # the demo's case; `up` assigns the agent token to it
CALLS = 100
RECOVERY_SECONDS = 60.0
QUIET_LEVELS = {"debug", "info"}


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    running = start_system(tmp_path_factory.mktemp("back") / "data", demo=True)
    yield running
    if running.process.poll() is None:
        running.stop()


def warnings_in(lines: list[str]) -> list[str]:
    """Every line a person would read as a warning: a log line above info, or anything that is not a log line
    (a Python warning, a traceback) on what `up` writes as JSON when piped."""
    found = []
    for line in filter(str.strip, lines):
        try:
            entry = json.loads(line)
        except ValueError:
            found.append(line)
            continue
        if not isinstance(entry, dict) or entry.get("level") not in QUIET_LEVELS:
            found.append(line)
    return found


def test_a_healthy_first_start_with_the_demo_prints_no_warning(system):
    announced = "\n".join(system.output)
    assert "Threadline is up" in announced and "agent " in announced, announced
    assert "warning" not in announced.lower(), announced
    stderr = (system.data_dir.parent / f"{system.data_dir.name}-up.log").read_text().splitlines()
    assert any(json.loads(line)["event"] == "embedded_postgres_started" for line in stderr), "stderr is up's log"
    assert warnings_in(stderr) == []
    # The operator's commands close their NATS connections on purpose: no warning either.
    for command in (["webhooks", "list"], ["migrate"]):
        done = threadline(*command, "--data-dir", str(system.data_dir))
        assert done.returncode == 0, done.stderr
        assert warnings_in(done.stderr.splitlines()) == [], (command, done.stderr)


class Calls:
    """A mix of agent (MCP) and reviewer (HTTP API) calls, reads and writes, one after another: each round stages
    a source, decides it, and reads it back through every service that answers reads."""

    def __init__(self, system: RunningSystem, mcp: Client, api: httpx2.AsyncClient) -> None:
        self.system, self.mcp, self.api = system, mcp, api
        self.made = 0
        self.failed: list[str] = []

    async def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        self.made += 1
        result = await self.mcp.call_tool(name, arguments)
        if result.is_error:
            self.failed.append(f"call {self.made} {name}: {result.content[0].text}")
            return None
        return result.structured_content

    async def http(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        self.made += 1
        response = await self.api.request(method, path, json=body)
        if response.status_code not in (200, 201):
            self.failed.append(f"call {self.made} {method} {path}: {response.status_code} {response.text}")
            return None
        return response.json()

    async def round(self, tag: str) -> None:
        workspace = await self.tool("get_workspace", {})
        revision = workspace["workspaceRevision"] if workspace else 0
        staged = await self.tool("stage_sources", {"expectedCaseId": CASE, "expectedRevision": revision,
                                                   "sources": [source_item(tag)]})
        proposal = f"/api/v1/proposals/{staged['proposalId']}" if staged else "/api/v1/proposals/none"
        await self.http("GET", proposal)
        await self.http("POST", f"{proposal}/decisions", {"accept": [tag], "note": "back after an outage",
                                                           "expectedRevision": revision})
        await self.tool("inspect_sources", {"expectedCaseId": CASE, "sourceIds": [tag]})
        await self.http("GET", f"/api/v1/cases/{CASE}")
        await self.http("GET", "/api/v1/cases")
        await self.http("GET", f"/api/v1/cases/{CASE}/proposals?status=pending")
        await self.http("GET", f"/api/v1/cases/{CASE}/graph")
        await self.tool("get_workspace", {"scope": "unresolved"})


async def next_calls(system: RunningSystem, tag: str, count: int = CALLS) -> Calls:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {system.credentials['agent']}"}, timeout=30)
    api = httpx2.AsyncClient(base_url=system.http_url, timeout=30,
                             headers={"Authorization": f"Bearer {system.credentials['reviewer']}"})
    async with http, api, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http)) as mcp:
        calls = Calls(system, mcp, api)
        for n in range(count // 10):
            await calls.round(f"{tag}-{n}")
    return calls


def kill_and_wait_until_ready(system: RunningSystem, victim: str) -> float:
    """SIGKILL `victim`; return once `up` has started it again and the gateway's /readyz answers 200."""
    old = system.pid_of(victim)
    os.kill(old, signal.SIGKILL)
    killed = time.monotonic()
    while time.monotonic() - killed < RECOVERY_SECONDS:
        time.sleep(0.05)
        try:
            restarted = system.pid_of(victim) != old
        except (OSError, StopIteration, ValueError, IndexError):
            continue
        if restarted and system.ready():
            return time.monotonic() - killed
    raise AssertionError(f"{victim} was not back within {RECOVERY_SECONDS}s")


@pytest.mark.parametrize("victim", ["postgres", "nats-server"])
async def test_once_ready_after_a_kill_the_next_100_calls_all_succeed(system, victim):
    warm = await next_calls(system, f"before-{victim}", 10)
    assert warm.failed == []
    seconds = kill_and_wait_until_ready(system, victim)
    calls = await next_calls(system, f"after-{victim}")
    print(f"\n{victim} SIGKILLed: ready again after {seconds:.1f}s; then {calls.made} calls, "
          f"{len(calls.failed)} failed")
    assert calls.made == CALLS
    assert calls.failed == []
