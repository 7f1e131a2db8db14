"""On a three-server JetStream cluster with the event stream at 3 replicas and two replicas of each service:
one NATS server and one replica of every service killed under load lose no acknowledged proposal and no
event, and duplicate none. The servers hold `up`'s users and permissions: every service, the second replicas
and the test's own checks connect as their roles."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx2
import nats
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import select

from services.cli.embedded import free_port
from shared.db.tables import cases, outbox, proposals
from shared.settings import Settings
from shared.streams import provision
from shared.subjects import BACKEND_SERVICES, Service
from tests.events import stream_events, stream_info, wait_until_projected, wait_until_published
from tests.factories import new_case, source_item
from tests.nats_cluster import NatsCluster
from tests.processes import ServiceProcesses
from tests.support import TLS, Servers, Stack, connect_nats, new_deployment

FULL = bool(os.environ.get("THREADLINE_FULL"))
CASES, DECISIONS_PER_CASE = (16, 40) if FULL else (6, 12)
KILL_AFTER = 1 / 3  # of all decisions acknowledged
CALL_DEADLINE_SECONDS = 90.0
POOL_SIZE = 3  # eleven processes share the machine's PostgreSQL (and its max_connections) with other runs
REPLICATED = (Service.GATEWAY, Service.STAGING, Service.REVIEW, Service.PROJECTION, Service.RELAY, Service.WEBHOOKS)

# Who connects where: the in-process replicas to n1 (the server that is killed), the second replicas to
# n2, the test's own checks to n0. A client whose server dies fails over to the ones the cluster told it of.
CHECKS, FIRST_REPLICAS, SECOND_REPLICAS = 0, 1, 2


class Replicas:
    """The second replica of each service: `threadline serve …` processes, SIGKILLed like a lost pod."""

    def __init__(self, stack: Stack, on: Settings, log_dir: Path) -> None:
        self.env = {**stack.environment(), "THREADLINE_NATS_URL": on.nats_url, "THREADLINE_DATA_DIR": str(on.data_dir),
                    "THREADLINE_SECRET": "cluster-test",
                    "THREADLINE_REQUEST_TIMEOUT": "5", "THREADLINE_LOG_LEVEL": "WARNING",
                    "THREADLINE_DB_POOL_SIZE": str(POOL_SIZE)}
        self.log_dir = log_dir
        self.services: dict[Service, ServiceProcesses] = {}
        self.processes: dict[Service, subprocess.Popen] = {}
        self.probes: dict[Service, str] = {}

    def start(self, service: Service) -> None:
        port = free_port()
        own = {"THREADLINE_METRICS_PORT": str(port)}
        if service is Service.GATEWAY:
            own["THREADLINE_HTTP_PORT"] = str(free_port())
            self.gateway_url = f"http://127.0.0.1:{own['THREADLINE_HTTP_PORT']}"
        self.services[service] = ServiceProcesses(service.value, self.env, self.log_dir)
        self.processes[service] = self.services[service].start(**own)
        self.probes[service] = f"http://127.0.0.1:{port}/readyz"

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        async with httpx2.AsyncClient(timeout=2, verify=TLS) as http:
            for service, probe in self.probes.items():
                while True:
                    process = self.processes[service]
                    if process.poll() is not None:
                        raise AssertionError(f"{service} exited: {self.services[service].log_of(process)}")
                    try:
                        if (await http.get(probe)).status_code == 200:
                            break
                    except httpx2.HTTPError:
                        pass
                    assert time.monotonic() < deadline, f"{service} not ready at {probe}"
                    await asyncio.sleep(0.2)

    def kill_all(self) -> None:
        for service, process in self.processes.items():
            self.services[service].kill(process)

    def stop(self) -> None:
        for processes in self.services.values():
            processes.stop_all()


def connected_to(cluster: NatsCluster, settings: Settings, n: int) -> Settings:
    """The deployment's settings as a client of server `n` sees them: that server's URL and a data dir whose users
    file names it (a pod's own mounted credentials)."""
    data_dir = Path(tempfile.mkdtemp(prefix="threadline-test-"))
    cluster.claim(data_dir, n)
    return settings.model_copy(update={"nats_url": cluster.url(n), "data_dir": data_dir})


@pytest.fixture
async def cluster_stack(servers, tmp_path):
    cluster = await NatsCluster().start()
    on_cluster = Servers(nats_url=cluster.url(FIRST_REPLICAS), admin_database_url=servers.admin_database_url,
                         claim=lambda data_dir: cluster.claim(data_dir, FIRST_REPLICAS))
    settings = await new_deployment(on_cluster, events_replicas=3, request_timeout=5.0)
    settings = settings.model_copy(update={"db_pool_size": POOL_SIZE})
    checks = connected_to(cluster, settings, CHECKS)
    stack = replicas = None
    try:
        stack = await Stack(settings).start()
        replicas = Replicas(stack, connected_to(cluster, settings, SECOND_REPLICAS), tmp_path)
        for service in REPLICATED:
            replicas.start(service)
        await replicas.wait_ready()
        yield cluster, stack, replicas, checks
    finally:
        # Waiting for processes to exit happens off the event loop: the session's services share it.
        if replicas is not None:
            await asyncio.to_thread(replicas.stop)
        if stack is not None:
            await stack.stop()
        await servers.drop_database(settings.resolved_database_url())  # the stream goes with the cluster
        await asyncio.to_thread(cluster.stop)


class Load:
    """Agents staging over MCP and reviewers accepting over the API, through either gateway, retrying
    what an outage interrupted; it keeps what was acknowledged."""

    def __init__(self, stack: Stack, gateways: list[str]) -> None:
        self.stack = stack
        self.gateways = gateways
        self.acknowledged_proposals: set[str] = set()
        self.decisions = 0
        self.calls = 0  # calls alternate between the gateways that still listen (a load balancer's view)
        self.gone: set[str] = set()
        self.retries: Counter[str] = Counter()

    async def _retrying(self, what: str, attempt):  # noqa: ANN001, ANN202
        deadline = time.monotonic() + CALL_DEADLINE_SECONDS
        last = ""
        while True:
            listening = [g for g in self.gateways if g not in self.gone] or self.gateways
            gateway = listening[self.calls % len(listening)]
            self.calls += 1
            try:
                return await attempt(gateway)
            except AssertionError:
                raise
            except Exception as error:  # noqa: BLE001 - an outage: a gateway gone mid-call, or `unavailable`
                self.retries[type(error).__name__] += 1
                last = repr(error)
                if _refused(error):
                    self.gone.add(gateway)
            assert time.monotonic() < deadline, f"{what} did not succeed within {CALL_DEADLINE_SECONDS}s: {last}"
            await asyncio.sleep(0.2)

    async def call_tool(self, token: str, tool: str, arguments: dict) -> dict:
        async def attempt(gateway: str):  # noqa: ANN202
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=15, verify=TLS)
            async with http, Client(streamable_http_client(f"{gateway}/mcp", http_client=http)) as mcp:
                result = await mcp.call_tool(tool, arguments)
            if result.is_error:
                assert result.structured_content["error"]["code"] == "unavailable", result.content
                raise ConnectionError(result.content[0].text)
            return result.structured_content

        return await self._retrying(tool, attempt)

    async def stage(self, token: str, case_id: str, revision: int, source_id: str) -> str:
        staged = await self.call_tool(token, "stage_sources", {
            "expectedCaseId": case_id, "expectedRevision": revision, "sources": [source_item(source_id)]})
        proposal_id = staged["proposalId"]
        self.acknowledged_proposals.add(proposal_id)
        return proposal_id

    async def accept(self, proposal_id: str, item: str, revision: int) -> int:
        tried = False

        async def attempt(gateway: str):  # noqa: ANN202
            nonlocal tried
            async with httpx2.AsyncClient(base_url=gateway, timeout=15, verify=TLS, headers={
                    "Authorization": f"Bearer {self.stack.tokens['reviewer']}"}) as api:
                retry, tried = tried, True
                decided = await api.post(f"/api/v1/proposals/{proposal_id}/decisions",
                                         json={"accept": [item], "note": "ok", "expectedRevision": revision})
                if decided.status_code == 409 and retry:
                    # The first attempt was applied but its answer lost. The repeat is refused as stale
                    # instead of returning the recorded decision, so do as the hint says: reload the proposal.
                    return await self.recorded_decision(api, proposal_id, item, revision)
            if decided.status_code == 503:
                raise ConnectionError(decided.text)
            assert decided.status_code == 200, decided.text
            return decided.json()["revision"]

        new_revision = await self._retrying("decide", attempt)
        self.decisions += 1
        return new_revision

    async def recorded_decision(self, api: httpx2.AsyncClient, proposal_id: str, item: str, revision: int) -> int:
        shown = await api.get(f"/api/v1/proposals/{proposal_id}")
        if shown.status_code == 503:
            raise ConnectionError(shown.text)
        assert shown.status_code == 200, shown.text
        (decision,) = [d for d in shown.json()["decisions"] if d["expectedRevision"] == revision]
        assert decision["accepted"] == [item] and decision["revisionAfter"] == revision + 1, decision
        self.retries["decision_found_on_reload"] += 1
        return decision["revisionAfter"]

    async def one_case(self) -> str:
        case_id = await new_case(self.stack)
        token = await self.stack.issue_token("agent", f"agent-{case_id}", case_id=case_id)
        revision = (await self.call_tool(token, "get_workspace", {}))["workspaceRevision"]
        for n in range(DECISIONS_PER_CASE):
            proposal_id = await self.stage(token, case_id, revision, f"{case_id}-s{n}")
            revision = await self.accept(proposal_id, f"{case_id}-s{n}", revision)
            assert revision == n + 1
        return case_id


def _refused(error: BaseException) -> bool:
    """The gateway's port refuses connections (its process is gone), however deep the MCP client wrapped it."""
    if isinstance(error, httpx2.ConnectError):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_refused(e) for e in error.exceptions)
    return error.__cause__ is not None and _refused(error.__cause__)


async def stream_leader(cluster: NatsCluster, stream: str) -> str:
    connection = await nats.connect(cluster.admin_url(CHECKS))
    try:
        return (await stream_info(connection.jetstream(), stream)).cluster.leader
    finally:
        await connection.close()


async def lead_from(cluster: NatsCluster, stream: str, n: int, attempts: int = 10) -> bool:
    """Ask the stream's leader to step down until server `n` leads it (elections are random)."""
    connection = await nats.connect(cluster.admin_url(CHECKS))
    try:
        js = connection.jetstream()
        for _ in range(attempts):
            if (await stream_info(js, stream)).cluster.leader == cluster.server_name(n):
                return True
            await connection.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", b"", timeout=5)
            for _ in range(50):
                leader = (await stream_info(js, stream)).cluster.leader
                if leader:
                    break
                await asyncio.sleep(0.1)
        return (await stream_info(js, stream)).cluster.leader == cluster.server_name(n)
    finally:
        await connection.close()


@pytest.mark.slow
async def test_losing_a_nats_server_and_a_replica_of_each_service_loses_and_duplicates_nothing(cluster_stack):
    cluster, stack, replicas, checks = cluster_stack
    settings = stack.settings
    connection = await connect_nats(checks)  # as the operator, who provisions
    try:
        js = connection.jetstream()
        # A migrate that names no replica count keeps the stream's three.
        await provision(js, settings.model_copy(update={"events_replicas": None}))
        info = await stream_info(js, settings.stream_name)
    finally:
        await connection.close()
    assert info.config.num_replicas == 3 and len(info.cluster.replicas) == 2  # a leader and two followers
    leader_killed = await lead_from(cluster, settings.stream_name, FIRST_REPLICAS)

    load = Load(stack, [stack.http_url, replicas.gateway_url])
    started = time.monotonic()
    work = asyncio.gather(*(load.one_case() for _ in range(CASES)))
    while load.decisions < CASES * DECISIONS_PER_CASE * KILL_AFTER:
        assert not work.done(), work.exception() if work.done() else None
        await asyncio.sleep(0.05)
    killed_at = load.decisions
    cluster.kill(FIRST_REPLICAS)  # the server the first replicas are connected to (and the stream leader)
    replicas.kill_all()  # the second replica of every service
    case_ids = await work
    elapsed = time.monotonic() - started

    await wait_until_published(stack.db)
    await wait_until_projected(checks)
    events = await stream_events(checks)
    async with stack.db.engine.connect() as db:
        stored = set((await db.execute(select(proposals.c.proposal_id))).scalars())
        outboxed = list((await db.execute(select(outbox.c.event_id))).scalars())
        revisions = dict((await db.execute(select(cases.c.case_id, cases.c.revision))).all())
    new_leader = await stream_leader(cluster, settings.stream_name)
    print(f"\ncluster test: {CASES} cases x {DECISIONS_PER_CASE} decisions in {elapsed:.1f}s; killed NATS server "
          f"{cluster.server_name(FIRST_REPLICAS)} ({'the' if leader_killed else 'not the'} stream leader; now "
          f"{new_leader} leads) and "
          f"{len(replicas.processes)} service replicas after {killed_at} decisions; "
          f"{len(load.acknowledged_proposals)} proposals acknowledged, {len(events)} events in the stream; "
          f"retries {dict(load.retries)}")

    assert load.acknowledged_proposals <= stored, "an acknowledged proposal was lost"
    assert {c: revisions[c] for c in case_ids} == {c: DECISIONS_PER_CASE for c in case_ids}
    ids = Counter(e["id"] for e in events)
    assert [i for i, n in ids.items() if n > 1] == [], "an event is in the stream twice"
    assert set(ids) == set(outboxed) and len(outboxed) == len(set(outboxed)), "an event was lost"
    ledger: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if event["type"] == "threadline.ledger.changed":
            ledger[event["data"]["caseId"]].append(event["revision"])
    assert {c: ledger[c] for c in case_ids} == {c: list(range(1, DECISIONS_PER_CASE + 1)) for c in case_ids}
    assert new_leader and new_leader != cluster.server_name(FIRST_REPLICAS)
    assert set(BACKEND_SERVICES) - {Service.THESIS_DELTA} <= set(REPLICATED)
