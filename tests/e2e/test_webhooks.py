"""Webhooks and the HTTP event feed as downstream systems use them: real receivers, real signatures."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import insert
from standardwebhooks import Webhook, WebhookVerificationError

from shared.db.webhook_tables import webhooks
from tests.events import wait_until_published
from tests.factories import agent_session, source_item, ui_sign_in
from tests.processes import threadline
from tests.receivers import Receiver
from tests.webhooks import case_events, deliveries, read_feed, register, wait_until_delivered

ROOT = Path(__file__).resolve().parents[2]
LEDGER_CHANGED = "threadline.ledger.changed"


async def accept_sources(agent, count: int, prefix: str = "src") -> None:
    for i in range(count):
        await agent.accepted("stage_sources", sources=[source_item(f"{prefix}-{i}")])


async def test_a_case_receiver_gets_every_ledger_change_in_revision_order_each_signed_with_its_secret(stack):
    async with Receiver() as receiver, agent_session(stack) as agent:
        hook = await register(stack, url=receiver.url, caseId=agent.case_id, types=[LEDGER_CHANGED])
        assert hook["secret"].startswith("whsec_") and hook["status"] == "active"
        await accept_sources(agent, 5)
        await wait_until_delivered(stack, hook["webhookId"], 5)

    verifier = Webhook(hook["secret"])
    events = [verifier.verify(r.body, r.headers) for r in receiver.requests]
    assert [e["type"] for e in events] == [LEDGER_CHANGED] * 5
    assert [e["revision"] for e in events] == [1, 2, 3, 4, 5]
    assert all(e["data"]["caseId"] == agent.case_id for e in events)
    for request, event in zip(receiver.requests, events, strict=True):
        assert request.headers["content-type"] == "application/cloudevents+json"
        assert request.headers["webhook-id"] == event["id"]
        assert request.headers["webhook-signature"].startswith("v1,")
    published = {e["id"] for e in await case_events(stack.settings, agent.case_id) if e["type"] == LEDGER_CHANGED}
    assert {e["id"] for e in events} == published
    other = Webhook("whsec_" + "A" * 43 + "=")
    try:
        other.verify(receiver.requests[0].body, receiver.requests[0].headers)
        raise AssertionError("a delivery verified with another secret")
    except WebhookVerificationError:
        pass
    listed = await deliveries(stack, hook["webhookId"])
    assert {d["status"] for d in listed} == {"delivered"} and all(d["attempts"] == 1 for d in listed)


async def test_a_receiver_answering_500_gets_the_events_again_in_order_and_the_log_shows_each_failure(stack):
    async with Receiver(script=[500, 500, 500]) as failing, Receiver() as healthy, agent_session(stack) as agent:
        flaky = await register(stack, url=failing.url, caseId=agent.case_id)
        steady = await register(stack, url=healthy.url, caseId=agent.case_id)
        await accept_sources(agent, 5)
        await wait_until_published(stack.db)
        # Everything after the case was created (before the webhooks were registered).
        due = [e for e in await case_events(stack.settings, agent.case_id) if e["type"] != "threadline.case.created"]
        log = await wait_until_delivered(stack, flaky["webhookId"], len(due))
        await wait_until_delivered(stack, steady["webhookId"], len(due))

    assert [r.status for r in failing.requests[:3]] == [500, 500, 500]
    first_success: dict[str, dict] = {}
    for request in failing.accepted():
        first_success.setdefault(request.event["id"], request.event)
    assert set(first_success) == {e["id"] for e in due}, "every event arrived in the end"
    in_order = [e["seq"] for e in due]
    assert [next(e["seq"] for e in due if e["id"] == i) for i in first_success] == in_order
    revisions = [e["revision"] for e in first_success.values() if e["type"] == LEDGER_CHANGED]
    assert revisions == [1, 2, 3, 4, 5]
    held = log[0]
    assert held["attempts"] == 4 and held["status"] == "delivered" and held["responseCode"] == 200
    assert [a["responseCode"] for a in held["attemptLog"]] == [500, 500, 500, 200]
    assert all(a["error"] == "HTTP 500" and len(a["responseExcerpt"]) <= 200 for a in held["attemptLog"][:3])
    assert all(a["latencyMs"] >= 0 for a in held["attemptLog"])
    assert [r.status for r in healthy.requests] == [200] * len(due), "the other webhook was never held back"


async def test_the_feed_gives_a_subscriber_the_case_events_and_resumes_after_the_last_event_id(stack):
    async with agent_session(stack) as agent:
        await accept_sources(agent, 2)
        await wait_until_published(stack.db)
        before = await case_events(stack.settings, agent.case_id)
        token = await stack.issue_token("subscriber", "dashboard")
        async with stack.api(token=token) as feed:
            first = await read_feed(feed, {"caseId": agent.case_id, "after": 0}, len(before))
            assert [int(e["id"]) for e in first] == [e["seq"] for e in before]
            assert [e["event"] for e in first] == [e["type"] for e in before]
            assert [e["data"]["id"] for e in first] == [e["id"] for e in before]

            await accept_sources(agent, 1, prefix="later")
            await wait_until_published(stack.db)
            later = [e for e in await case_events(stack.settings, agent.case_id) if e["seq"] > before[-1]["seq"]]
            resumed = await read_feed(feed, {"caseId": agent.case_id, "after": 0}, len(later),
                                      headers={"Last-Event-ID": first[-1]["id"]})
            assert [e["data"]["id"] for e in resumed] == [e["id"] for e in later]

            page = (await feed.get("/api/v1/events", params={"caseId": agent.case_id, "format": "json",
                                                             "limit": 2})).json()
            assert [e["event"]["id"] for e in page["events"]] == [e["id"] for e in before[:2]]
            assert page["more"] is True and page["nextAfter"] == before[1]["seq"]
            rest = (await feed.get("/api/v1/events", params={"caseId": agent.case_id, "format": "json",
                                                             "after": page["nextAfter"], "limit": 500})).json()
            assert [e["event"]["id"] for e in rest["events"]] == [e["id"] for e in [*before[2:], *later]]
            assert rest["more"] is False
            assert (await feed.get("/api/v1/events", params={"caseId": "no-such-case"})).status_code == 404
            assert (await feed.get("/api/v1/events", headers={"Last-Event-ID": "x"})).status_code == 422
            # A subscriber token reads events and nothing else.
            assert (await feed.get("/api/v1/cases")).status_code == 403
            assert (await feed.post("/api/v1/webhooks", json={"url": "https://example.org/h"})).status_code == 403


async def test_only_admins_operate_webhooks_and_bad_registrations_are_refused_by_field(stack):
    async with agent_session(stack) as agent:
        async with stack.api("reviewer") as api:
            assert (await api.get("/api/v1/webhooks")).status_code == 403
        for body, field in [
            ({"url": "ftp://example.org/x"}, "url"),
            ({"url": "https://example.org/x", "caseId": agent.case_id, "companyId": "0" * 8 + "-0000-4000-8000-" + "0" * 12},
             "companyId"),
            ({"url": "https://example.org/x", "types": ["threadline.no.such"]}, "types[0]"),
            ({"url": "https://example.org/x", "caseId": "no-such-case"}, "caseId"),
            ({"url": "https://user:pw@example.org/x"}, "url"),
        ]:
            async with stack.api("admin") as api:
                refused = await api.post("/api/v1/webhooks", json=body)
            assert refused.status_code in (404, 422), refused.text
            assert refused.json()["error"]["field"] == field, refused.text
        async with stack.api("admin") as api:
            missing = await api.get("/api/v1/webhooks/00000000-0000-4000-8000-000000000000/deliveries")
            assert missing.status_code == 404


async def test_the_cli_and_the_admin_pages_list_webhooks_and_deliveries_and_redeliver(stack):
    async with Receiver() as receiver, agent_session(stack) as agent:
        hook = await register(stack, url=receiver.url, caseId=agent.case_id, types=[LEDGER_CHANGED])
        await accept_sources(agent, 1)
        [delivered] = await wait_until_delivered(stack, hook["webhookId"], 1)

        def cli(*args: str) -> subprocess.CompletedProcess:
            return threadline("webhooks", *args, env=stack.environment())

        listed = await asyncio.to_thread(cli, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert hook["webhookId"] in [w["webhookId"] for w in json.loads(listed.stdout)["webhooks"]]
        assert "secret" not in listed.stdout
        log = await asyncio.to_thread(cli, "deliveries", hook["webhookId"])
        assert log.returncode == 0 and delivered["eventId"] in log.stdout
        again = await asyncio.to_thread(cli, "redeliver", hook["webhookId"], delivered["eventId"])
        assert again.returncode == 0, again.stderr
        await receiver.wait_for(lambda requests: len([r for r in requests if r.status == 200]) == 2)
        assert receiver.requests[1].headers["webhook-id"] == delivered["eventId"]

        for role, status in (("admin", 200), ("reviewer", 403)):
            async with stack.api(role) as ui:
                assert (await ui_sign_in(ui, stack.tokens[role])).status_code == 303
                page = await ui.get("/ui/webhooks")
                assert page.status_code == status
                if status == 200:
                    assert hook["webhookId"][:8] in page.text and "whsec_" not in page.text
                    detail = await ui.get(f"/ui/webhooks/{hook['webhookId']}")
                    assert detail.status_code == 200 and delivered["eventId"][:8] in detail.text


async def test_the_documented_webhook_receiver_verifies_and_applies_each_revision_once(stack, tmp_path):
    from services.cli.embedded import free_port

    port = free_port()
    async with agent_session(stack) as agent:
        hook = await register(stack, url=f"http://127.0.0.1:{port}/", caseId=agent.case_id)
        command = [sys.executable, str(ROOT / "docs" / "examples" / "webhook_receiver.py"), "--port", str(port),
                   "--state", str(tmp_path / "receiver.json"), "--exit-when-idle", "4"]
        receiver = subprocess.Popen(command, env={"WEBHOOK_SECRET": hook["secret"], "PATH": "/usr/bin:/bin"},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        await accept_sources(agent, 3)
        out, err = await asyncio.to_thread(receiver.communicate, timeout=60)
    assert receiver.returncode == 0, err
    applied = [json.loads(line) for line in out.splitlines()]
    assert [a["revision"] for a in applied] == [1, 2, 3]
    assert {d["status"] for d in await deliveries(stack, hook["webhookId"])} == {"delivered"}


async def test_the_documented_feed_reader_resumes_where_it_stopped(stack, tmp_path):
    async with agent_session(stack) as agent:
        await accept_sources(agent, 2)
        await wait_until_published(stack.db)
        created = await asyncio.to_thread(threadline, "token", "create", "--role", "subscriber", "--name", "reader",
                                          env=stack.environment())
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip()
        assert token.startswith("tl_subscriber_")
        command = [sys.executable, str(ROOT / "docs" / "examples" / "feed_reader.py"), "--case", agent.case_id,
                   "--state", str(tmp_path / "feed.state"), "--exit-when-idle", "2"]
        env = {"THREADLINE_URL": stack.http_url, "THREADLINE_TOKEN": token, "PATH": "/usr/bin:/bin"}

        def reader() -> list[dict]:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return [json.loads(line) for line in done.stdout.splitlines()]

        first = await asyncio.to_thread(reader)
        assert [e["id"] for e in first] == [e["seq"] for e in await case_events(stack.settings, agent.case_id)]
        assert await asyncio.to_thread(reader) == []
        await accept_sources(agent, 1, prefix="more")
        await wait_until_published(stack.db)
        resumed = await asyncio.to_thread(reader)
        assert [e["type"] for e in resumed] == ["threadline.proposal.staged", LEDGER_CHANGED,
                                                "threadline.proposal.decided"]
        assert resumed[0]["id"] > first[-1]["id"]
        # A state from a stream since made anew (a restore): the feed refuses it; the reader says why and stops,
        # rather than retrying it every 2 s for ever as if the feed were down.
        (tmp_path / "feed.state").write_text(str(10**12))
        done = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and done.stdout == "", done
        assert "is past the event stream's last event" in done.stderr and "retrying" not in done.stderr, done.stderr


async def test_a_webhook_is_named_by_the_start_of_its_id_the_pages_show_and_an_ambiguous_start_is_refused(stack):
    async with Receiver() as receiver, agent_session(stack) as agent:
        hook = await register(stack, url=receiver.url, caseId=agent.case_id, types=[LEDGER_CHANGED])
        whole, short = hook["webhookId"], hook["webhookId"][:8]
        async with stack.api("admin") as api:
            shown = await api.get(f"/api/v1/webhooks/{short}")
            assert shown.status_code == 200 and shown.json()["webhookId"] == whole, shown.text
            log = await api.get(f"/api/v1/webhooks/{short}/deliveries")
            assert log.status_code == 200 and log.json()["webhookId"] == whole, log.text
            assert (await ui_sign_in(api, stack.tokens["admin"])).status_code == 303
            page = await api.get(f"/ui/webhooks/{short}")
            assert page.status_code == 200 and receiver.url in page.text

            twin = f"{short}-0000-4000-8000-000000000000"  # a deleted webhook whose id starts the same way
            async with stack.db.engine.begin() as connection:
                await connection.execute(insert(webhooks).values(
                    webhook_id=twin, url=receiver.url, secret="whsec_twin", status="deleted", start_after_seq=0,
                    created_by="test"))
            ambiguous = await api.get(f"/api/v1/webhooks/{short}")
            assert ambiguous.status_code == 422, ambiguous.text
            error = ambiguous.json()["error"]
            assert error["field"] == "webhookId" and whole in error["message"] and twin in error["message"], error
            assert (await api.get(f"/api/v1/webhooks/{whole}")).json()["webhookId"] == whole
            unknown = await api.get("/api/v1/webhooks/ffffffff-f")
            assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "webhookId", unknown.text


async def test_the_feed_refuses_a_resume_point_past_the_streams_end_saying_so_instead_of_waiting_in_silence(stack):
    """A subscriber's last id from a stream since made anew (a restore starts it at 1 again: README) was answered with
    nothing: a JSON page `{events: [], more: false}` to poll again for ever, an SSE stream waiting until the new
    stream passed that id, every event meanwhile missed and nothing said."""
    token = await stack.issue_token("subscriber", "after-a-restore")
    beyond = 10**12
    async with stack.api(token=token) as feed:
        page = await asyncio.wait_for(feed.get("/api/v1/events", params={"format": "json", "after": beyond}), 20)
        streamed = await asyncio.wait_for(feed.get("/api/v1/events", headers={"Last-Event-ID": str(beyond)}), 20)
    for answer, field in ((page, "after"), (streamed, "Last-Event-ID")):
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert error["code"] == "conflict" and error["field"] == field, error
        assert f"{beyond} is past the event stream's last event" in error["message"], error
        assert "after=0" in error["hint"], error
