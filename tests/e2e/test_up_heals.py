"""`up` heals itself: SIGKILL the embedded NATS, the embedded PostgreSQL or a service and nothing is done by hand."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.system import RunningSystem, start_system
from tests.factories import source_item

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    running = start_system(tmp_path_factory.mktemp("heals") / "data", demo=True)
    yield running
    if running.process.poll() is None:
        running.stop()


def api(system: RunningSystem) -> httpx2.Client:
    return httpx2.Client(base_url=system.http_url, timeout=15,
                         headers={"Authorization": f"Bearer {system.credentials['reviewer']}"})


def wait_until(check, seconds: float, what: str):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (outcome := check()) is not None:
            return outcome
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {seconds}s")


def kill(system: RunningSystem, child: str) -> tuple[int, float]:
    pid = system.pid_of(child)
    os.kill(pid, signal.SIGKILL)
    return pid, time.monotonic()


async def stage_one(system: RunningSystem, source_id: str) -> bool:
    """One agent read and stage over MCP; False when a service could not answer (`unavailable`, nothing else)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {system.credentials['agent']}"}, timeout=30)
    async with http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http)) as client:
        workspace = await client.call_tool("get_workspace", {})
        if not workspace.is_error:
            read = workspace.structured_content
            workspace = await client.call_tool("stage_sources", {"expectedCaseId": read["caseId"],
                                                                 "expectedRevision": read["workspaceRevision"],
                                                                 "sources": [source_item(source_id)]})
    if workspace.is_error:
        assert workspace.structured_content["error"]["code"] == "unavailable", workspace.content[0].text
    return not workspace.is_error


def names_it(system: RunningSystem, server: str) -> None:
    """runtime.json names the restarted server's new pid (written once `up` has seen it start)."""
    wait_until(lambda: system.runtime["embedded"][server]["pid"] == system.pid_of(server) or None, 10,
               f"runtime.json naming the new {server}")


def test_runtime_json_names_the_embedded_servers_pids_as_it_names_the_services(system):
    """An operator reads which process to watch or kill in runtime.json, the embedded servers' as the services'."""
    assert system.runtime["embedded"] == {"nats-server": {"pid": system.pid_of("nats-server")},
                                          "postgres": {"pid": system.pid_of("postgres")}}


def test_a_killed_nats_server_is_back_within_30s_on_the_same_url(system):
    before = system.runtime
    subscriber_url = system.credentials["subscriberNatsUrl"]
    old, killed = kill(system, "nats-server")

    def back() -> float | None:
        restarted = system.pid_of("nats-server") not in (old, None)  # None: the old one gone, no new one yet
        return time.monotonic() - killed if restarted and system.ready() else None

    seconds = wait_until(back, 30, "NATS and every service ready again")
    print(f"\nnats-server SIGKILLed: ready again after {seconds:.1f}s")
    assert system.runtime["natsUrl"] == before["natsUrl"]
    names_it(system, "nats-server")
    assert system.credentials["subscriberNatsUrl"] == subscriber_url


def test_while_postgresql_is_down_the_api_answers_503_unavailable_and_is_ready_again_within_30s(system):
    _, killed = kill(system, "postgres")
    answers: list[tuple[int, str]] = []
    with api(system) as http:
        def back() -> float | None:
            response = http.get("/api/v1/cases")
            answers.append((response.status_code, response.json().get("error", {}).get("code", "")))
            return time.monotonic() - killed if response.status_code == 200 and system.ready() else None

        seconds = wait_until(back, 30, "the API answering again")
    refused = [a for a in answers if a[0] != 200]
    print(f"\npostgres SIGKILLed: {len(refused)} refusal(s) meanwhile, ready again after {seconds:.1f}s")
    assert refused, "the outage must have been seen"
    assert set(refused) == {(503, "unavailable")}, answers
    names_it(system, "postgres")


async def test_staging_killed_twice_in_a_row_serves_again_within_20s(system):
    for attempt in range(2):
        old, killed = kill(system, "staging")
        deadline = killed + 20
        while True:
            assert time.monotonic() < deadline, "staging did not serve again within 20 s"
            if system.runtime["services"]["staging"]["pid"] != old and await stage_one(system, f"after-{attempt}"):
                break
            time.sleep(0.1)
        print(f"\nstaging SIGKILLed ({attempt + 1}): serving again after {time.monotonic() - killed:.1f}s")


def test_up_logged_each_death_and_restart_as_events(system):
    log_path = system.data_dir.parent / f"{system.data_dir.name}-up.log"
    events = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    died = [e["child"] for e in events if e["event"] == "child_died"]
    restarted = [e["child"] for e in events if e["event"] == "child_restarted"]
    # Only the victims: an outage of PostgreSQL or NATS is one the services ride out (answering `unavailable`),
    # never their death (a service killed by SIGPIPE as PostgreSQL went, once).
    assert sorted(died) == ["nats-server", "postgres", "staging", "staging"], died
    assert sorted(died) == sorted(restarted)
    assert died.count("staging") == 2
    first, second = [e for e in events if e["event"] == "child_died" and e["child"] == "staging"]
    assert second["restart_in"] == 2 * first["restart_in"], "the pause doubles for a child that dies again soon"
    # What the operator's terminal says: the signal that killed a child `up` awaits; for PostgreSQL, which `up`
    # only watches (pg_ctl detached it), that its status is unknown, not "code None".
    said = [line for line in log_path.read_text().splitlines() if "; restarting in " in line]
    assert any(line.startswith("staging was killed by SIGKILL;") for line in said), said
    assert any(line.startswith("nats-server was killed by SIGKILL;") for line in said), said
    assert any(line.startswith("postgres exited (exit status unknown);") for line in said), said
    assert not any("code None" in line for line in said), said


async def test_a_killed_service_starter_takes_its_services_with_it_and_up_starts_all_again(system):
    """Last: the services `up` forks from its starter end with it (SIGTERM), and come back from a new one."""
    import psutil

    starter, services = system.runtime["starter"]["pid"], dict(system.runtime["services"])
    old = [psutil.Process(entry["pid"]) for entry in services.values()]
    os.kill(starter, signal.SIGKILL)
    _, alive = psutil.wait_procs(old, timeout=20)
    assert not alive, "a service outlived the starter it was forked from"

    def back() -> bool | None:
        runtime = system.runtime
        fresh = all(runtime["services"][name]["pid"] != entry["pid"] for name, entry in services.items())
        return True if fresh and runtime["starter"]["pid"] != starter and system.ready() else None

    wait_until(back, 30, "a new starter and every service ready again")
    assert await stage_one(system, "after-the-starter")
    for entry in system.runtime["services"].values():
        assert psutil.Process(entry["pid"]).ppid() == system.runtime["starter"]["pid"]
    log_path = system.data_dir.parent / f"{system.data_dir.name}-up.log"
    assert '"event": "service_starter_died"' in log_path.read_text()
