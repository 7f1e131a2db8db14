"""Webhooks that must not or cannot be delivered: private targets, and receivers that keep failing."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import insert

from shared.db.webhook_tables import webhooks
from tests.events import stream_events, wait_until_published
from tests.factories import agent_session, source_item
from tests.receivers import Receiver
from tests.support import Stack, new_deployment, remove_deployment
from tests.webhooks import case_events, deliveries, register, wait_until_delivered


async def test_private_and_loopback_targets_are_refused_at_registration_and_at_delivery(servers):
    settings = await new_deployment(servers, webhook_allow_private=False)
    stack = await Stack(settings).start()
    try:
        # Refused by address, before any connection is made.
        for url, reason in [("http://127.0.0.1:9/hook", "loopback"), ("http://localhost:9/hook", "loopback"),
                            ("http://[::1]:9/hook", "loopback"), ("http://10.1.2.3/hook", "private"),
                            ("http://192.168.0.10/hook", "private"), ("http://169.254.169.254/latest", "unicast"),
                            ("http://[::ffff:127.0.0.1]/hook", "loopback")]:
            refused = await register(stack, status=422, url=url)
            assert refused["error"]["field"] == "url" and reason in refused["error"]["message"], refused
            assert "THREADLINE_WEBHOOK_ALLOW_PRIVATE" in refused["error"]["hint"]

        # A webhook on file whose address is now private (registered when it was allowed, or a name that
        # resolves elsewhere since) is checked again at each delivery, and nothing is sent.
        async with Receiver() as receiver, agent_session(stack) as agent:
            webhook_id = str(uuid.uuid4())
            async with stack.db.transaction() as connection:
                await connection.execute(insert(webhooks).values(
                    webhook_id=webhook_id, url=receiver.url, case_id=agent.case_id, secret="whsec_" + "A" * 44,
                    start_after_seq=0, created_by="tests"))
            await agent.accepted("stage_sources", sources=[source_item("one")])
            deadline = asyncio.get_running_loop().time() + 30
            while not (log := await deliveries(stack, webhook_id)) or log[-1]["attempts"] < 2:
                assert asyncio.get_running_loop().time() < deadline, log
                await asyncio.sleep(0.1)
            assert log[-1]["lastError"].startswith("refused: 127.0.0.1 is a loopback address")
            assert log[-1]["status"] == "pending" and log[-1]["responseCode"] is None
            assert receiver.requests == []
    finally:
        await stack.stop()
        await remove_deployment(servers, settings)


async def test_a_webhook_failing_past_the_retry_period_is_marked_failing_holds_back_only_its_events_and_resumes(
        servers):
    settings = await new_deployment(servers, webhook_retry_for_seconds=1.0, webhook_retry_max_delay_seconds=0.3)
    stack = await Stack(settings).start()
    try:
        async with Receiver(script=[500] * 1000) as down, Receiver() as up, agent_session(stack) as agent:
            broken = await register(stack, url=down.url, caseId=agent.case_id)
            healthy = await register(stack, url=up.url, caseId=agent.case_id)
            for i in range(2):
                await agent.accepted("stage_sources", sources=[source_item(f"s{i}")])
            await wait_until_published(stack.db)
            due = [e for e in await case_events(settings, agent.case_id) if e["type"] != "threadline.case.created"]
            await wait_until_delivered(stack, healthy["webhookId"], len(due))

            deadline = asyncio.get_running_loop().time() + 30
            while True:
                async with stack.api("admin") as api:
                    shown = (await api.get(f"/api/v1/webhooks/{broken['webhookId']}")).json()
                if shown["status"] == "failing":
                    break
                assert asyncio.get_running_loop().time() < deadline, shown
                await asyncio.sleep(0.1)
            log = sorted(await deliveries(stack, broken["webhookId"]), key=lambda d: d["streamSequence"])
            assert log[0]["eventId"] == due[0]["id"] and log[0]["status"] == "failed" and log[0]["attempts"] >= 2
            assert all(d["status"] == "pending" and d["attempts"] == 0 for d in log[1:]), "the rest wait, in order"
            assert {r.event["id"] for r in down.requests} == {due[0]["id"]}
            await wait_until_published(stack.db)
            told = [e for e in await stream_events(settings) if e["type"] == "threadline.webhook.failing"]
            assert [e["data"]["webhookId"] for e in told] == [broken["webhookId"]]
            assert told[0]["data"]["eventId"] == due[0]["id"] and told[0]["data"]["host"] == "127.0.0.1"
            assert told[0]["natsSubject"] == f"{settings.nats_prefix}.events.webhook.{broken['webhookId']}.webhook.failing"

            down.recover()
            async with stack.api("admin") as api:
                again = await api.post(f"/api/v1/webhooks/{broken['webhookId']}/deliveries/{due[0]['id']}/redeliver")
            assert again.status_code == 200, again.text
            await wait_until_delivered(stack, broken["webhookId"], len(due))
            resumed = [r.event["id"] for r in down.accepted()]
            assert resumed == [e["id"] for e in due]
    finally:
        await stack.stop()
        await remove_deployment(servers, settings)
