"""A service no replica answers for: restarting while it was heard from within the restart window, not running
(an operator must start it) only once it has been silent for longer."""

from __future__ import annotations

import asyncio

import pytest

from shared import messaging
from shared.errors import Unavailable
from shared.messaging import ServiceClient, create_broker
from shared.nats_auth import OPERATOR
from shared.subjects import Command, Service, Subjects
from tests.support import connect_nats, new_deployment, remove_deployment

WINDOW_SECONDS = 1.0
CALL = {"actor": {"name": "a", "role": "agent"}, "args": {}}


async def refusal(client: ServiceClient) -> Unavailable:
    with pytest.raises(Unavailable) as refused:
        await client.call(Command.STAGE_SOURCES, CALL)
    return refused.value


async def test_no_responders_reads_restarting_within_the_window_and_not_running_after_it(servers, monkeypatch):
    monkeypatch.setattr(messaging, "RESTART_WINDOW_SECONDS", WINDOW_SECONDS)
    deployment = await new_deployment(servers)  # its own subjects: no real staging service answers them
    subjects = Subjects(deployment.nats_prefix)
    broker = create_broker(deployment, role=OPERATOR, name="restart-window-test")
    await broker.connect()
    service = await connect_nats(deployment, Service.STAGING.value)
    try:
        client = ServiceClient(broker, subjects, timeout=5.0)
        never = await refusal(client)
        assert "no staging service answers" in never.message and "the call was not delivered" in never.message
        assert "if it is restarting" in never.hint and "an operator must start it" in never.hint

        async def healthy(message) -> None:  # noqa: ANN001
            await message.respond(b'{"result": {"service": "staging"}}')

        health = await service.subscribe(subjects.health(Service.STAGING), queue=subjects.queue(Service.STAGING),
                                         cb=healthy)
        await service.flush()  # the server holds the subscription before another connection's request reaches it
        assert (await client.ping(Service.STAGING))["service"] == "staging"
        await health.unsubscribe()
        await service.flush()

        restarting = await refusal(client)
        assert "the staging service is restarting" in restarting.message, restarting.message
        assert "retry in a few seconds" in restarting.hint and "operator" not in restarting.hint
        assert restarting.details == {"dependency": "service", "service": "staging", "mayHaveBeenApplied": False}

        await asyncio.sleep(WINDOW_SECONDS + 0.2)
        gone = await refusal(client)
        assert "no staging service is running: one last answered" in gone.message, gone.message
        assert "since this gateway started" not in gone.message
        assert "an operator must start it" in gone.hint and "`threadline serve staging`" in gone.hint
    finally:
        await service.close()
        await broker.stop()
        await remove_deployment(servers, deployment)


async def test_a_client_that_presumes_the_services_running_reads_a_never_heard_service_as_restarting_after_its_start(
        servers, monkeypatch):
    """The gateway just (re)started by `up`: a service it has not called yet, answered by no replica, is being
    restarted by `up` too, not one an operator must start; once the window since its start is over, it is not
    running. A short-lived caller (the CLI) presumes nothing: either/or, as above."""
    monkeypatch.setattr(messaging, "RESTART_WINDOW_SECONDS", WINDOW_SECONDS)
    deployment = await new_deployment(servers)  # its own subjects: no real staging service answers them
    broker = create_broker(deployment, role=OPERATOR, name="restart-window-test")
    await broker.connect()
    try:
        gateway = ServiceClient(broker, Subjects(deployment.nats_prefix), timeout=5.0, presume_running=True)
        restarting = await refusal(gateway)
        assert "the staging service is restarting" in restarting.message, restarting.message
        assert "retry in a few seconds" in restarting.hint and "operator" not in restarting.hint

        await asyncio.sleep(WINDOW_SECONDS + 0.2)
        gone = await refusal(gateway)
        assert "no staging service is running" in gone.message and "an operator must start it" in gone.hint
        assert "none has answered since this gateway started" in gone.message, gone.message

        cli = ServiceClient(broker, Subjects(deployment.nats_prefix), timeout=5.0)
        never = await refusal(cli)
        assert "if it is restarting" in never.hint and "an operator must start it" in never.hint
    finally:
        await broker.stop()
        await remove_deployment(servers, deployment)
