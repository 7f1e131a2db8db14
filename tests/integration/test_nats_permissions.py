"""NATS trusts no stranger: the whole stack on a NATS server with one user per role, and what each role may not do."""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
from pathlib import Path

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from services.cli.embedded import EmbeddedNats
from shared.bootstrap import prepare
from shared.nats_auth import (
    GATEWAY,
    OPERATOR,
    SUBSCRIBER,
    inbox_prefix,
    nats_options,
    permissions,
    roles,
)
from shared.settings import Settings
from shared.subjects import BACKEND_SERVICES, Command, Service, Subjects
from tests.events import stream_events, wait_until_published
from tests.factories import source_item
from tests.processes import clean_environment
from tests.support import Stack


@pytest.fixture(scope="module")
async def guarded(servers):
    """A deployment whose NATS refuses strangers, with every service and the gateway connected by role."""
    data_dir = Path(tempfile.mkdtemp(prefix="threadline-auth-"))
    settings = Settings(database_url=await servers.create_database(), nats_url="nats://127.0.0.1:1",
                        data_dir=data_dir, nats_prefix=f"a{secrets.token_hex(3)}", log_level="WARNING",
                        log_format="json", secret="test-" + secrets.token_hex(8), relay_poll_interval=0.2,
                        auth_cache_seconds=0)
    server = EmbeddedNats(data_dir / "nats", settings)
    settings = settings.model_copy(update={"nats_url": await server.start()})
    await prepare(settings)
    stack = await Stack(settings).start()
    yield stack
    await stack.stop()
    await server.stop()
    await servers.drop_database(settings.resolved_database_url())


async def connect_as(settings: Settings, role: str, errors: list[str] | None = None) -> nats.NATS:
    async def record(error: Exception) -> None:
        if errors is not None:
            errors.append(str(error).lower())

    options = nats_options(settings, role, name=f"test-{role}").client()
    return await nats.connect(**{**options, "error_cb": record}, allow_reconnect=False)


async def violation(errors: list[str], subject: str, timeout: float = 5.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if any("permissions violation" in e and subject.lower() in e for e in errors):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_every_role_does_its_work_through_its_own_user(guarded):
    """Agent → gateway → staging; reviewer → review; relay → stream; projection ← its durable; thesis-delta → projection."""
    case_id = f"auth-{secrets.token_hex(3)}"
    async with guarded.api("admin") as admin:
        assert (await admin.post("/api/v1/cases", json={"caseId": case_id, "title": "t",
                                                        "question": "q"})).status_code == 201
        token = (await admin.post("/api/v1/tokens", json={"role": "agent", "name": "auth-agent",
                                                          "caseId": case_id})).json()["token"]
        company = (await admin.post("/api/v1/companies", json={"ticker": "AUTH", "name": "Auth plc"})).json()
    async with guarded.agent(token) as agent:
        assert (await agent.call_tool("get_workspace", {})).structured_content["workspaceRevision"] == 0
        staged = await agent.call_tool("stage_sources", {"expectedCaseId": case_id, "expectedRevision": 0,
                                                         "sources": [source_item("s1")]})
        assert not staged.is_error, staged.content[0].text
        context = await agent.call_tool("get_company_context", {"companyId": company["companyId"]})
        assert not context.is_error, context.content[0].text
    async with guarded.api() as reviewer:
        decided = await reviewer.post(f"/api/v1/proposals/{staged.structured_content['proposalId']}/decisions",
                                      json={"accept": ["s1"], "expectedRevision": 0})
        assert decided.status_code == 200, decided.text
    await wait_until_published(guarded.db)
    events = await stream_events(guarded.settings)
    assert [e["revision"] for e in events if e["type"] == "threadline.ledger.changed"
            and e["data"]["caseId"] == case_id] == [1]
    async with guarded.agent(token) as agent:
        for _ in range(100):  # the projection applies the event from its own durable consumer
            workspace = (await agent.call_tool("get_workspace", {})).structured_content
            if workspace["workspaceRevision"] == 1:
                break
            await asyncio.sleep(0.1)
    assert workspace["workspaceRevision"] == 1


async def test_a_connection_without_credentials_or_with_a_wrong_password_is_refused(guarded):
    url = guarded.settings.resolved_nats_url()
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(url, user=GATEWAY, password="guess", allow_reconnect=False, max_reconnect_attempts=0)


async def test_the_subscriber_reads_the_stream_but_cannot_command_listen_to_commands_or_steal_from_a_service(
        guarded):
    settings = guarded.settings
    subjects = Subjects(settings.nats_prefix)
    case_id = f"sub-{secrets.token_hex(3)}"
    async with guarded.api("admin") as admin:
        await admin.post("/api/v1/cases", json={"caseId": case_id, "title": "t", "question": "q"})
        token = (await admin.post("/api/v1/tokens", json={"role": "agent", "name": "sub-agent",
                                                          "caseId": case_id})).json()["token"]
    async with guarded.agent(token) as agent:
        await agent.call_tool("get_workspace", {})
        staged = (await agent.call_tool("stage_sources", {"expectedCaseId": case_id, "expectedRevision": 0,
                                                          "sources": [source_item("s1")]})).structured_content
    await wait_until_published(guarded.db)

    errors: list[str] = []
    subscriber = await connect_as(settings, SUBSCRIBER, errors)
    try:
        js = subscriber.jetstream()
        reading = await js.subscribe(subjects.case_events(case_id), stream=settings.stream_name,
                                     ordered_consumer=True, deliver_policy="all")
        first = json.loads((await reading.next_msg(timeout=10)).data)
        assert first["data"]["caseId"] == case_id  # reading the event stream works

        forged = {"actor": {"name": "mallory", "role": "reviewer"}, "proposalId": staged["proposalId"],
                  "accept": ["s1"], "expectedRevision": 0}
        decide = subjects.command(Command.DECIDE)
        with pytest.raises((NatsTimeout, NoRespondersError)):
            await subscriber.request(decide, json.dumps(forged).encode(), timeout=1.5)
        assert await violation(errors, f"publish to \"{decide}\"")
        await subscriber.subscribe(f"{settings.nats_prefix}.cmd.>")
        assert await violation(errors, f"subscription to \"{settings.nats_prefix}.cmd.>\"")
        await subscriber.subscribe(f"{inbox_prefix(settings, GATEWAY)}.>")
        assert await violation(errors, f"subscription to \"{inbox_prefix(settings, GATEWAY)}.>\"")
        stealing = await js.pull_subscribe_bind("projection", stream=settings.stream_name)
        with pytest.raises((NatsTimeout, TimeoutError)):
            await stealing.fetch(1, timeout=1)
        assert await violation(errors, f"consumer.msg.next.{settings.stream_name}.projection")
    finally:
        await subscriber.close()
    async with guarded.api() as reviewer:
        proposal = (await reviewer.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
    assert proposal["status"] == "pending", "a forged decision must have no effect"


@pytest.mark.parametrize("service", [Service.STAGING, Service.PROJECTION, Service.RELAY])
async def test_a_service_may_not_send_commands_nor_answer_another_services_commands(guarded, service):
    settings = guarded.settings
    errors: list[str] = []
    connection = await connect_as(settings, service.value, errors)
    try:
        decide = Subjects(settings.nats_prefix).command(Command.DECIDE)
        await connection.publish(decide, b"{}")
        assert await violation(errors, f"publish to \"{decide}\"")
        await connection.subscribe(decide, queue=Subjects(settings.nats_prefix).queue(Service.REVIEW))
        assert await violation(errors, f"subscription to \"{decide}\"")
    finally:
        await connection.close()


async def test_the_gateway_may_command_but_not_pose_as_a_service(guarded):
    settings = guarded.settings
    errors: list[str] = []
    connection = await connect_as(settings, GATEWAY, errors)
    try:
        pong = await connection.request(Subjects(settings.nats_prefix).health(Service.REVIEW), b"{}", timeout=5)
        assert json.loads(pong.data)["result"]["service"] == "review"
        await connection.subscribe(f"{settings.nats_prefix}.cmd.review.>")
        assert await violation(errors, f"subscription to \"{settings.nats_prefix}.cmd.review.>\"")
    finally:
        await connection.close()


def test_the_table_names_every_role_and_grants_no_wildcard_publish():
    settings = Settings(nats_prefix="threadline")
    assert set(roles()) == {GATEWAY, OPERATOR, SUBSCRIBER, *(s.value for s in BACKEND_SERVICES)}
    for role in roles():
        granted = permissions(role, settings)
        assert ">" not in granted.publish and "$JS.API.>" not in granted.publish, role
        assert f"{inbox_prefix(settings, role)}.>" in granted.subscribe, role
    for service in BACKEND_SERVICES:
        granted = permissions(service.value, settings)
        assert granted.allow_responses
        assert not any(s.startswith("threadline.cmd.") and not s.startswith(f"threadline.cmd.{service.value}.")
                       for s in granted.subscribe), service
    assert permissions(SUBSCRIBER, settings).publish_deny, "a subscriber must not touch a service's durable consumer"
    assert not any(s.startswith("threadline.cmd") for s in permissions(SUBSCRIBER, settings).publish)


async def test_the_documented_example_subscriber_runs_with_subscriber_credentials(guarded, tmp_path):
    import subprocess
    import sys

    from shared.nats_auth import user_url

    settings = guarded.settings
    case_id = f"example-{secrets.token_hex(3)}"
    async with guarded.api("admin") as admin:
        await admin.post("/api/v1/cases", json={"caseId": case_id, "title": "t", "question": "q"})
        await admin.post(f"/api/v1/cases/{case_id}/sources", json={"sources": [source_item("s1")]})
    await wait_until_published(guarded.db)
    secret = json.loads((settings.data_dir / "nats" / "users.json").read_text())["passwords"][SUBSCRIBER]
    environment = clean_environment(THREADLINE_NATS_URL=user_url(settings.resolved_nats_url(), SUBSCRIBER, secret),
                                    THREADLINE_NATS_PREFIX=settings.nats_prefix)
    example = Path(__file__).parents[2] / "docs" / "examples" / "subscriber.py"
    done = await asyncio.to_thread(subprocess.run, [sys.executable, str(example), "--name", case_id, "--case", case_id, "--state",
                                                    str(tmp_path / "state.json"), "--exit-when-idle", "2"],
                                   env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["revision"] for line in done.stdout.splitlines()] == [1]
