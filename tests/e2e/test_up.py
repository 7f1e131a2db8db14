"""The system as a user starts it: `threadline up` with embedded NATS and PostgreSQL, a fresh data dir."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import nats
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.cli.embedded import free_port
from shared.spec import SPEC_DIR, SPEC_FILES
from tests.e2e.system import start_system
from tests.factories import source_item
from tests.processes import THREADLINE, clean_environment, threadline

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("up") / "data"


@pytest.fixture(scope="module")
def system(data_dir):
    running = start_system(data_dir)
    yield running
    if running.process.poll() is None:
        running.stop()


def mcp_client(system, token):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http))


def test_first_start_prints_urls_and_writes_private_credentials(system, data_dir):
    text = "\n".join(system.output)
    assert f"{system.http_url}/mcp" in text and f"{system.http_url}/ui" in text
    credentials = system.credentials
    assert {"admin", "reviewer", "agent", "subscriber"} <= set(credentials)
    for role in ("admin", "reviewer", "agent", "subscriber"):
        assert credentials[role] in text
    columns = {line.index(credentials[role]) for line in system.output for role in ("admin", "reviewer", "agent",
                                                                                     "subscriber")
               if line.lstrip().startswith(role + " ") and credentials[role] in line}
    assert len(columns) == 1, "the tokens start in one column"
    assert stat.S_IMODE(os.stat(data_dir / "credentials.json").st_mode) == 0o600
    assert set(system.runtime) >= {"httpUrl", "natsUrl", "databaseUrl"}
    assert "?host=" in system.runtime["databaseUrl"], "no URL was configured, so PostgreSQL must be embedded"
    assert system.runtime["natsUrl"] != "nats://127.0.0.1:4222", "the embedded NATS must take a free port"
    subscriber = urlsplit(credentials["subscriberNatsUrl"])
    assert subscriber.username == "subscriber" and subscriber.password
    assert f"{subscriber.hostname}:{subscriber.port}" == system.runtime["natsUrl"].removeprefix("nats://")
    assert "@" not in system.runtime["natsUrl"], "runtime.json names the server, never a password"
    assert stat.S_IMODE(os.stat(data_dir / "nats" / "users.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(data_dir / "nats" / "server.conf").st_mode) == 0o600


async def test_the_embedded_nats_refuses_a_connection_without_credentials(system):
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(system.runtime["natsUrl"], allow_reconnect=False, max_reconnect_attempts=0)


async def test_tools_list_serves_the_nine_spec_tools_with_their_exact_schemas(system):
    expected = [tool for name in SPEC_FILES for tool in json.loads((SPEC_DIR / name).read_text())["tools"]]
    http, client = mcp_client(system, system.credentials["agent"])
    async with http, client:
        served = (await client.list_tools()).tools
    assert len(expected) == 9
    # The nine spec tools, in order, then Threadline's one addition (get_company_context).
    assert [tool.name for tool in served] == [tool["name"] for tool in expected] + ["get_company_context", "search_workspace", "inspect_claims"]
    for tool, spec in zip(served[:9], expected, strict=True):
        assert tool.input_schema == spec["inputSchema"]
        assert tool.description == spec["description"]


async def test_one_real_path_through_every_service(system):
    credentials = system.credentials
    admin = httpx2.AsyncClient(base_url=system.http_url, headers={"Authorization": f"Bearer {credentials['admin']}"})
    reviewer = httpx2.AsyncClient(base_url=system.http_url,
                                  headers={"Authorization": f"Bearer {credentials['reviewer']}"})
    async with admin, reviewer:
        assert (await admin.post("/api/v1/cases", json={"caseId": "skeleton", "title": "Skeleton",
                                                        "question": "Does it run?"})).status_code == 201
        assert (await admin.put("/api/v1/agents/agent/active-case", json={"caseId": "skeleton"})).status_code == 200
        company = (await admin.post("/api/v1/companies", json={"ticker": "SKEL", "name": "Skeleton plc"})).json()
        source_file = (
            await admin.post(f"/api/v1/companies/{company['companyId']}/source-files",
                             json={"title": "Annual report", "url": "https://example.org/ar", "text": "Revenue up."})
        ).json()

        http, client = mcp_client(system, credentials["agent"])
        async with http, client:
            workspace = (await client.call_tool("get_workspace", {})).structured_content
            assert workspace["caseId"] == "skeleton"
            start = workspace["workspaceRevision"]
            staged = await client.call_tool(
                "stage_sources",
                {"expectedCaseId": "skeleton", "expectedRevision": start, "sources": [source_item("annual-report")]},
            )
            assert not staged.is_error, staged.content[0].text
            proposal_id = staged.structured_content["proposalId"]

            listed = (await reviewer.get("/api/v1/cases/skeleton/proposals")).json()
            assert [p["proposalId"] for p in listed["proposals"]] == [proposal_id]
            decided = await reviewer.post(f"/api/v1/proposals/{proposal_id}/decisions",
                                          json={"accept": ["annual-report"], "expectedRevision": start})
            assert decided.status_code == 200, decided.text
            assert decided.json()["revision"] == start + 1
            after = (await client.call_tool("get_workspace", {})).structured_content
            assert after["workspaceRevision"] == start + 1
            # Search (the projection's index, kept from the events the embedded NATS delivered) and its reads.
            for _ in range(100):
                found = (await client.call_tool("search_workspace", {"expectedCaseId": "skeleton",
                                                                     "query": "annual-report"})).structured_content
                if found["total"]:
                    break
                await asyncio.sleep(0.1)
            assert [h["id"] for h in found["hits"]] == ["annual-report"] and found["hits"][0]["match"] == "id"
            searched = await reviewer.get("/api/v1/cases/skeleton/search", params={"q": "annual-report"})
            assert searched.status_code == 200 and searched.json()["total"] == 1
            read = await client.call_tool("inspect_claims", {"expectedCaseId": "skeleton", "claimIds": ["none-yet"]})
            assert read.structured_content["unknownClaimIds"] == ["none-yet"]

            preview = await client.call_tool(
                "propose_claim_delta_from_source",
                {"mode": "preview", "companyId": company["companyId"], "sourceFileId": source_file["sourceFileId"],
                 "category": "newly_introduced", "summary": "Revenue grew.", "idempotencyKey": "skeleton-1",
                 "proposedClaims": [{"text": "Revenue grows.", "label": "CONFIRMED", "section": "Growth",
                                     "action": "add"}]},
            )
            assert not preview.is_error, preview.content[0].text
            operation = preview.structured_content
            assert operation["operationId"]
            committed = await client.call_tool("propose_claim_delta_from_source", {
                "mode": "commit", "operationId": operation["operationId"], "commitToken": operation["commitToken"]})
            assert committed.structured_content["status"] == "committed"
            logs = "".join(path.read_text() for path in (system.data_dir / "logs").glob("*.log"))
            assert '"event": "command_handled"' in logs and '"service": "thesis-delta"' in logs
            assert operation["commitToken"] not in logs, "a commit token was logged"

    connection = await nats.connect(credentials["subscriberNatsUrl"])  # what a downstream system is given
    try:
        subscription = await connection.jetstream().subscribe("threadline.events.case.skeleton.ledger.changed",
                                                               ordered_consumer=True)
        message = await subscription.next_msg(timeout=15)
        event = json.loads(message.data)
        assert event["type"] == "threadline.ledger.changed"
        assert event["revision"] == start + 1
        assert message.headers["Nats-Msg-Id"] == event["id"]
    finally:
        await connection.close()


async def test_with_the_subscriber_credentials_a_forged_decision_has_no_effect(system):
    credentials = system.credentials
    http, client = mcp_client(system, credentials["agent"])
    async with http, client:
        revision = (await client.call_tool("get_workspace", {})).structured_content["workspaceRevision"]
        staged = (await client.call_tool("stage_sources", {"expectedCaseId": "skeleton", "expectedRevision": revision,
                                                           "sources": [source_item("forged-target")]}))
    proposal_id = staged.structured_content["proposalId"]
    errors: list[str] = []

    async def record(error: Exception) -> None:
        errors.append(str(error))

    connection = await nats.connect(credentials["subscriberNatsUrl"], error_cb=record, allow_reconnect=False)
    try:
        forged = {"actor": {"name": "mallory", "role": "reviewer"}, "proposalId": proposal_id,
                  "accept": ["forged-target"], "expectedRevision": revision}
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await connection.request("threadline.cmd.review.decide", json.dumps(forged).encode(), timeout=2)
        for _ in range(50):
            if errors:
                break
            await asyncio.sleep(0.05)
        assert any("permissions violation" in e.lower() for e in errors), errors
    finally:
        await connection.close()
    async with httpx2.AsyncClient(base_url=system.http_url,
                                  headers={"Authorization": f"Bearer {credentials['reviewer']}"}) as reviewer:
        proposal = (await reviewer.get(f"/api/v1/proposals/{proposal_id}")).json()
    assert proposal["status"] == "pending"


async def test_a_bad_argument_is_a_tool_error_naming_the_field(system):
    http, client = mcp_client(system, system.credentials["agent"])
    async with http, client:
        result = await client.call_tool("get_workspace", {"scope": "everything"})
    assert result.is_error
    assert "scope" in result.content[0].text
    assert result.structured_content["error"]["field"] == "scope"


async def test_calls_without_a_valid_agent_token_are_refused(system):
    async with httpx2.AsyncClient(base_url=system.http_url) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        missing = await http.post("/mcp", json=body, headers=headers)
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "unauthenticated"
        forged = await http.post("/mcp", json=body, headers={**headers, "Authorization": "Bearer tl_a_forged"})
        assert forged.status_code == 401
    http, client = mcp_client(system, system.credentials["reviewer"])
    async with http, client:
        result = await client.call_tool("get_workspace", {})
    assert result.is_error and result.structured_content["error"]["code"] == "forbidden"


async def test_one_correlation_id_follows_a_call_from_the_gateway_into_the_service_logs(system, data_dir):
    correlation_id = "e2e-correlation-4f1c"
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {system.credentials['agent']}", "X-Correlation-Id": correlation_id},
        timeout=30,
    )
    async with http, Client(streamable_http_client(f"{system.http_url}/mcp", http_client=http)) as client:
        await client.call_tool("get_workspace", {})

    def lines(service: str) -> list[dict]:
        path = data_dir / "logs" / f"{service}.log"
        return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]

    gateway = [e for e in lines("gateway") if e.get("correlation_id") == correlation_id]
    projection = [e for e in lines("projection") if e.get("correlation_id") == correlation_id]
    assert any(e["event"] == "tool_call" and e["tool"] == "get_workspace" for e in gateway)
    assert any(e["event"] == "command_handled" for e in projection)
    assert all(e["service"] == "projection" for e in projection)


async def test_a_local_agent_host_reaches_the_running_system_over_stdio_through_the_data_dir(system, data_dir):
    from mcp import StdioServerParameters

    # An agent and a case of its own: the test reads them whether or not the tests before it ran, and leaves the
    # first-start agent's active case to the tests after it.
    admin = httpx2.AsyncClient(base_url=system.http_url,
                               headers={"Authorization": f"Bearer {system.credentials['admin']}"})
    async with admin:
        made = await admin.post("/api/v1/cases", json={"caseId": "stdio-host", "title": "Stdio host",
                                                       "question": "Does stdio reach it?"})
        assert made.status_code in (201, 409), made.text
        issued = await admin.post("/api/v1/tokens", json={"role": "agent", "name": "stdio-agent", "caseId": "stdio-host"})
        assert issued.status_code == 201, issued.text
    server = StdioServerParameters(command=str(THREADLINE), args=["serve", "gateway", "--stdio", "--data-dir",
                                                                  str(data_dir)],
                                   env=clean_environment(THREADLINE_TOKEN=issued.json()["token"]))
    async with Client(server) as client:
        workspace = await client.call_tool("get_workspace", {})
    assert workspace.structured_content["caseId"] == "stdio-host"


def ignored_signals(pid: int | str) -> int:
    status = (Path("/proc") / str(pid) / "status").read_text()
    return int(status.split("SigIgn:")[1].split()[0], 16)


def test_every_service_ignores_the_signals_the_interpreter_ignores_so_a_peer_gone_is_an_error_not_its_death(system):
    """SIGPIPE above all: a service forked from the starter that wrote to PostgreSQL's socket as it was killed died
    of it (the gateway too, dropping its callers' connections) instead of answering `unavailable`. (Only the two the
    interpreter sets: what else a process ignores it inherits, as a background job ignores SIGQUIT.)"""
    wanted = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
    command = subprocess.run([sys.executable, "-c", "from tests.e2e.test_up import ignored_signals as i; "
                              "print(i('self'))"], capture_output=True, text=True, check=True, timeout=60)
    assert int(command.stdout) & wanted == wanted, "what a Python command ignores"
    for name, entry in system.runtime["services"].items():
        assert ignored_signals(entry["pid"]) & wanted == wanted, name


def test_a_second_up_on_the_same_data_dir_is_refused_and_leaves_the_first_running(system, data_dir):
    second = threadline("up", "--data-dir", str(data_dir), "--no-demo",
                        env=clean_environment(THREADLINE_HTTP_PORT=str(free_port())))
    assert second.returncode == 1
    assert f"in use by another `threadline up` (pid {system.process.pid})" in second.stderr
    assert (data_dir / "runtime.json").exists() and system.process.poll() is None
    assert httpx2.get(f"{system.http_url}/readyz", timeout=10).status_code == 200


async def stream_size(subscriber_url: str) -> int:
    connection = await nats.connect(subscriber_url)
    try:
        return (await connection.jetstream().stream_info("THREADLINE_EVENTS")).state.messages
    finally:
        await connection.close()


def test_stopping_leaves_no_process_and_a_second_start_keeps_the_data(system, data_dir):
    processes = system.processes()
    assert len(processes) >= 7, [p.name() for p in processes]  # up, 5 services, nats-server, postgres
    nats_url, subscriber_url = system.runtime["natsUrl"], system.credentials["subscriberNatsUrl"]
    events_before = asyncio.run(stream_size(subscriber_url))
    assert events_before >= 1
    assert system.stop(signal.SIGINT) == 0
    _, alive = psutil.wait_procs(processes, timeout=15)
    assert not alive, f"left behind: {described(alive)}"
    assert not (data_dir / "runtime.json").exists()

    again = start_system(data_dir)
    try:
        assert "First start" not in "\n".join(again.output)

        async def revision() -> int:
            http, client = mcp_client(again, again.credentials["agent"])
            async with http, client:
                return (await client.call_tool("get_workspace", {})).structured_content["workspaceRevision"]

        assert asyncio.run(revision()) == 1
        # The same NATS URL and subscriber credentials: a downstream subscriber is not cut off by a restart.
        assert again.runtime["natsUrl"] == nats_url and again.credentials["subscriberNatsUrl"] == subscriber_url
        assert asyncio.run(stream_size(subscriber_url)) >= events_before  # the stream kept its events
        processes = again.processes()
    finally:
        assert again.stop(signal.SIGTERM) == 0
    _, alive = psutil.wait_procs(processes, timeout=15)
    assert not alive


def test_a_kept_nats_port_held_by_a_stranger_is_refused_naming_the_holder(system, data_dir):
    """After the system above stopped: its data dir keeps its NATS port, and says who took it."""
    import socket

    assert system.process.poll() is not None
    port = json.loads((data_dir / "nats" / "port.json").read_text())["port"]
    with socket.socket() as stranger:
        stranger.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        stranger.bind(("127.0.0.1", port))
        stranger.listen()
        done = threadline("up", "--data-dir", str(data_dir), "--no-demo",
                          env=clean_environment(THREADLINE_HTTP_PORT=str(free_port())))
    assert done.returncode == 1
    assert f"port {port}" in done.stderr and f"in use by pid {os.getpid()}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def leftovers(data_dir) -> list[psutil.Process]:
    """Processes that belong to the system in data_dir: by their command line or their environment."""
    marker = str(data_dir)
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid == os.getpid():
                continue
            if marker in " ".join(process.cmdline()) or process.environ().get("THREADLINE_DATA_DIR") == marker:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def described(processes: list[psutil.Process]) -> list[tuple[int, str]]:
    """Each process's pid and command line (which service, or the guard), for a failure's message."""
    found = []
    for process in processes:
        try:
            found.append((process.pid, " ".join(process.cmdline())[-160:]))
        except psutil.Error:
            found.append((process.pid, "(gone)"))
    return found


def gone_within(data_dir, seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    while (alive := leftovers(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


@pytest.mark.slow
def test_killing_up_outright_or_closing_its_terminal_leaves_no_process(tmp_path):
    killed = start_system(tmp_path / "killed")
    assert len(killed.processes()) >= 7
    killed.process.kill()  # SIGKILL: no handler runs; children, NATS and PostgreSQL must still go
    killed.process.wait()
    alive = gone_within(tmp_path / "killed", 30)
    assert not alive, f"left behind: {described(alive)}"

    hung_up = start_system(tmp_path / "hung-up")
    assert hung_up.stop(signal.SIGHUP) == 0
    alive = gone_within(tmp_path / "hung-up", 15)
    assert not alive, f"left behind: {described(alive)}"


def test_ctrl_c_while_starting_stops_at_once_and_leaves_no_process(tmp_path):
    data_dir = tmp_path / "interrupted"
    process = subprocess.Popen([str(THREADLINE), "up", "--data-dir", str(data_dir), "--no-demo"],
                               env=clean_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not (data_dir / "postgres").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # PostgreSQL is being created: the slowest step of a first start
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "Threadline is up" not in output and "Stopped." in output
    alive = gone_within(data_dir, 15)
    assert not alive, f"left behind: {described(alive)}"


def test_an_unreachable_database_is_one_clear_line_not_a_traceback(tmp_path):
    done = threadline(
        "up", "--data-dir", str(tmp_path / "data"), "--no-demo",
        env=clean_environment(THREADLINE_DATABASE_URL="postgresql://someone:hunter2@127.0.0.1:1/nowhere",
                              THREADLINE_HTTP_PORT=str(free_port())))
    assert done.returncode == 1
    assert "could not migrate the database" in done.stderr and "127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr + done.stdout
    assert not gone_within(tmp_path / "data", 15)


def test_up_refuses_a_port_in_use_with_a_clear_message(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = threadline("up", "--data-dir", str(tmp_path / "data"), "--no-demo",
                          env=clean_environment(THREADLINE_HTTP_PORT=str(port)))
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use by pid {os.getpid()}" in done.stderr, done.stderr
    assert "THREADLINE_HTTP_PORT" in done.stderr


def test_up_refuses_a_host_that_is_not_this_machines_saying_so_not_that_the_port_is_in_use(tmp_path):
    done = threadline("up", "--data-dir", str(tmp_path / "data"), "--no-demo",
                      env=clean_environment(THREADLINE_HTTP_HOST="192.0.2.1", THREADLINE_HTTP_PORT=str(free_port())))
    assert done.returncode == 1
    assert "the host is not an address of this machine; set THREADLINE_HTTP_HOST" in done.stderr, done.stderr
    assert "in use" not in done.stderr and "Traceback" not in done.stderr
