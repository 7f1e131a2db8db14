"""Outages answer `unavailable`: a database cut off, a service that dies mid-call, a background job that fails."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from urllib.parse import parse_qs, urlparse

import pytest

from services.registry import app_module
from shared.errors import Unavailable
from shared.messaging import ServiceClient, create_broker
from shared.nats_auth import OPERATOR
from shared.service import run_service
from shared.subjects import Command, Service, Subjects
from tests.factories import source_item
from tests.support import Stack, connect_nats, free_port, new_deployment, remove_deployment


class CuttableProxy:
    """A TCP proxy in front of PostgreSQL that the test can cut (every connection dropped, new ones
    refused) and restore on the same port: an outage without touching the machine's server."""

    def __init__(self, admin_url: str) -> None:
        parsed = urlparse(admin_url)
        socket_dir = parse_qs(parsed.query).get("host", [None])[0]  # an embedded server: a unix socket
        self.socket = f"{socket_dir}/.s.PGSQL.{parsed.port or 5432}" if socket_dir else None
        self.target = (parsed.hostname or "127.0.0.1", parsed.port or 5432)
        self.port = free_port()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.socket:
                up_reader, up_writer = await asyncio.open_unix_connection(self.socket)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}

    async def cut(self) -> None:
        self.server.close()
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()
        await self.server.wait_closed()

    async def restore(self) -> None:
        await self.start()


@pytest.fixture
async def cut_off(servers):
    """A whole stack whose every PostgreSQL connection goes through a proxy the test can cut."""
    proxy = CuttableProxy(servers.admin_database_url)
    await proxy.start()
    database = urlparse(await servers.create_database())
    through_proxy = database._replace(netloc=f"{database.username}@127.0.0.1:{proxy.port}", query="").geturl()
    settings = await new_deployment(servers, request_timeout=10.0)
    await servers.drop_database(settings.database_url)
    settings = settings.model_copy(update={"database_url": through_proxy})
    from shared.bootstrap import prepare

    await prepare(settings)
    stack = await Stack(settings).start()
    yield stack, proxy
    if proxy.server is None or not proxy.server.is_serving():
        await proxy.restore()
    await stack.stop()
    await remove_deployment(servers, settings.model_copy(update={"database_url": database.geturl()}))


async def test_a_database_outage_is_unavailable_on_every_path_then_everything_answers_again(cut_off):
    stack, proxy = cut_off
    case_id = f"cut-{secrets.token_hex(3)}"
    async with stack.api("admin") as admin:
        await admin.post("/api/v1/cases", json={"caseId": case_id, "title": "t", "question": "q"})
        token = (await admin.post("/api/v1/tokens", json={"role": "agent", "name": f"agent-{case_id}",
                                                          "caseId": case_id})).json()["token"]
    async with stack.agent(token) as agent:
        await agent.call_tool("get_workspace", {})
        staged = (await agent.call_tool("stage_sources", {"expectedCaseId": case_id, "expectedRevision": 0,
                                                          "sources": [source_item("s1")]})).structured_content

    await proxy.cut()
    async with stack.api() as reviewer, stack.agent(token) as agent:
        listed = await reviewer.get("/api/v1/cases")
        decided = await reviewer.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                      json={"accept": ["s1"], "expectedRevision": 0})
        tool = await agent.call_tool("stage_sources", {"expectedCaseId": case_id, "expectedRevision": 0,
                                                       "sources": [source_item("s2")]})
    for response in (listed, decided):
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "unavailable"
        assert response.json()["error"]["hint"]
    assert tool.is_error and tool.structured_content["error"]["code"] == "unavailable", tool.content[0].text
    assert "Fix: retry" in tool.content[0].text
    # A refused connection names the server that refused it, not "a server the call needs".
    for error in (listed.json()["error"], decided.json()["error"], tool.structured_content["error"]):
        assert error["details"]["dependency"] == "postgresql", error
        assert "PostgreSQL" in error["message"], error

    await proxy.restore()
    async with stack.api() as reviewer:
        deadline = time.monotonic() + 20
        while (response := await reviewer.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                               json={"accept": ["s1"], "expectedRevision": 0})).status_code != 200:
            assert response.json()["error"]["code"] == "unavailable", response.text
            assert time.monotonic() < deadline, response.text
            await asyncio.sleep(0.2)
    assert response.json()["revision"] == 1


async def test_a_call_to_a_service_that_dies_while_handling_it_fails_fast(servers):
    """Not at the 10 s timeout: once NATS says no replica is left to answer."""
    deployment = await new_deployment(servers)  # its own subjects: no real staging service may answer
    subjects = Subjects(deployment.nats_prefix)
    service = await connect_nats(deployment, Service.STAGING.value)  # in staging's place, as its NATS user
    received = asyncio.Event()

    async def hang(message) -> None:  # noqa: ANN001 - takes the command and never answers
        received.set()

    async def healthy(message) -> None:  # noqa: ANN001
        await message.respond(b'{"result": {"service": "staging"}}')

    queue = subjects.queue(Service.STAGING)
    await service.subscribe(f"{deployment.nats_prefix}.cmd.staging.>", queue=queue, cb=hang)
    await service.subscribe(subjects.health(Service.STAGING), queue=queue, cb=healthy)
    await service.flush()  # the server holds both subscriptions before the client's request reaches it
    broker = create_broker(deployment, role=OPERATOR, name="fail-fast-test")
    await broker.connect()
    try:
        client = ServiceClient(broker, subjects, timeout=10.0)
        call = asyncio.create_task(client.call(Command.STAGE_SOURCES, {"actor": {"name": "a", "role": "agent"},
                                                                       "args": {}}))
        await asyncio.wait_for(received.wait(), 5)
        await asyncio.sleep(1.0)
        assert not call.done(), "the call must wait while its service lives"
        died = time.monotonic()
        await service.close()  # the process is gone: NATS drops its subscriptions
        with pytest.raises(Unavailable, match="stopped before answering"):
            await call
        assert time.monotonic() - died < 3.0
    finally:
        await broker.stop()
        await remove_deployment(servers, deployment)


async def test_a_background_job_that_fails_is_restarted_and_never_stops_its_service(servers):
    settings = await new_deployment(servers)
    runs: list[float] = []
    steady = asyncio.Event()

    async def flaky(ctx) -> None:  # noqa: ANN001
        runs.append(time.monotonic())
        if len(runs) == 1:
            raise RuntimeError("the job failed")
        if len(runs) == 2:
            return  # a job that ends is started again too
        steady.set()
        await asyncio.Event().wait()

    stop = asyncio.Event()
    module = app_module(Service.REVIEW)
    task = asyncio.create_task(run_service(Service.REVIEW, settings, module.build_router, background=[flaky],
                                           stop=stop, own_process=False))
    broker = create_broker(settings, role=OPERATOR, name="background-test")
    await broker.connect()
    try:
        await asyncio.wait_for(steady.wait(), 10)
        assert not task.done(), "the service must keep running"
        client = ServiceClient(broker, Subjects(settings.nats_prefix), 5.0)
        assert (await client.ping(Service.REVIEW))["service"] == "review"
        cases = await client.call(Command.LIST_CASES, {"actor": {"name": "admin", "role": "admin"}})
        assert cases is not None
        assert runs[2] - runs[1] > runs[1] - runs[0] > 0.3, "the pause before a restart grows"
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await broker.stop()
        await remove_deployment(servers, settings)
