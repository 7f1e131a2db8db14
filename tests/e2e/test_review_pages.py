"""The review pages as people meet them: every form answered by a redirect to a page (a refresh posts
nothing again), times with their zone, and a page that says why when a role may not open one."""

from __future__ import annotations

import re
from contextlib import asynccontextmanager
from urllib.parse import quote

import httpx2

from services.gateway.ui import COOKIE, csrf_token
from tests.factories import agent_session, claim_item, seed, ui_sign_in, unique
from tests.receivers import Receiver
from tests.webhooks import register, wait_until_delivered

TIME_WITH_ZONE = re.compile(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC")
TIME_WITHOUT_ZONE = re.compile(r"20\d\d-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?! UTC)")


@asynccontextmanager
async def signed_in(stack, role: str = "reviewer"):
    async with httpx2.AsyncClient(base_url=stack.http_url, timeout=30) as http:
        assert (await ui_sign_in(http, stack.tokens[role])).status_code == 303
        http.csrf = csrf_token(http.cookies.get(COOKIE, ""))
        yield http


async def test_a_decision_on_the_page_redirects_to_the_proposal_showing_it_and_times_carry_their_zone(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("prg-yes", [source]),
                                                           claim_item("prg-no", [source])])
        revision = await agent.revision()
        posted = await http.post(f"/ui/proposals/{staged['proposalId']}/decide", data={
            "item:prg-yes": "accept", "item:prg-no": "reject", "note": "one of two", "expectedRevision": str(revision),
            "csrf": http.csrf})
        assert posted.status_code == 303, posted.text[:300]
        location = posted.headers["location"]
        assert re.fullmatch(rf"/ui/proposals/{staged['proposalId']}\?decision=[0-9a-f-]{{36}}#outcome", location)
        for _ in range(2):  # what a refresh does: GET the page again, recording nothing more
            page = await http.get(location.split("#")[0])
            assert page.status_code == 200
            banner = page.text[page.text.index('id="outcome"'):]
            assert f"the case is now at revision {revision + 1}" in banner and "prg-no" in banner
        async with stack.api() as api:
            shown = (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()
        assert len(shown["decisions"]) == 1 and await agent.revision() == revision + 1
        assert TIME_WITH_ZONE.search(page.text) and not TIME_WITHOUT_ZONE.search(page.text)
        for path in (f"/ui/cases/{agent.case_id}", f"/ui/cases/{agent.case_id}/history"):
            other = (await http.get(path)).text
            assert TIME_WITH_ZONE.search(other) and not TIME_WITHOUT_ZONE.search(other), path


async def test_a_rejection_without_a_note_is_refused_by_the_api_and_the_page_naming_the_note(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http, stack.api() as api:
        source = (await seed(agent, sources=1))["sources"][0]
        staged = await agent.stage("stage_claims", claims=[claim_item("no-why", [source])])
        revision = await agent.revision()
        for note in ({}, {"note": "  "}):
            answer = await api.post(f"/api/v1/proposals/{staged['proposalId']}/decisions",
                                    json={"reject": ["no-why"], "expectedRevision": revision, **note})
            assert answer.status_code == 422, answer.text
            error = answer.json()["error"]
            assert error["field"] == "note" and "note" in error["hint"], error
        page = await http.post(f"/ui/proposals/{staged['proposalId']}/decide", data={
            "item:no-why": "reject", "note": "", "expectedRevision": str(revision), "csrf": http.csrf})
        assert page.status_code == 422 and "a rejection needs a note" in page.text, page.text[:300]
        assert (await api.get(f"/api/v1/proposals/{staged['proposalId']}")).json()["status"] == "pending"
        posted = await http.post(f"/ui/proposals/{staged['proposalId']}/decide", data={
            "item:no-why": "reject", "note": "No source says so.", "expectedRevision": str(revision),
            "csrf": http.csrf})
        assert posted.status_code == 303, posted.text[:300]


async def test_a_reviewer_is_not_linked_to_admin_pages_and_opening_one_says_why(stack):
    async with signed_in(stack, "reviewer") as reviewer, signed_in(stack, "admin") as admin:
        home = await reviewer.get("/ui")
        assert home.status_code == 200 and 'href="/ui/webhooks"' not in home.text
        assert 'href="/ui/webhooks"' in (await admin.get("/ui")).text
        for path in ("/ui/webhooks", "/ui/webhooks/00000000-0000-4000-8000-000000000000"):
            page = await reviewer.get(path)
            assert page.status_code == 403 and page.headers["content-type"].startswith("text/html")
            said = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page.text))
            assert "This page is not for your role" in said
            assert "Webhooks (receivers of change events and their delivery logs) are for admin tokens" in said
            assert "You are signed in as reviewer, a reviewer." in said
            assert 'href="/ui/signin?next=/ui/webhooks' in page.text and 'href="/ui/webhooks"' not in page.text
        refused = await reviewer.post("/ui/webhooks/00000000-0000-4000-8000-000000000000/deliveries/"
                                      "00000000-0000-4000-8000-000000000000/redeliver", data={"csrf": reviewer.csrf})
        assert refused.status_code == 403 and "This page is not for your role" in refused.text


async def test_a_redelivery_on_the_admin_page_redirects_to_the_webhook_page(stack):
    async with Receiver() as receiver, agent_session(stack) as agent, signed_in(stack, "admin") as http:
        hook = await register(stack, url=receiver.url, caseId=agent.case_id)
        await seed(agent, sources=1)
        [delivered, *_] = await wait_until_delivered(stack, hook["webhookId"], 1)
        posted = await http.post(f"/ui/webhooks/{hook['webhookId']}/deliveries/{delivered['eventId']}/redeliver",
                                 data={"csrf": http.csrf})
        assert posted.status_code == 303
        assert posted.headers["location"] == f"/ui/webhooks/{hook['webhookId']}?redelivered={delivered['eventId']}"
        page = await http.get(posted.headers["location"])
        assert page.status_code == 200 and f"Event <span class=\"mono\">{delivered['eventId'][:8]}" in page.text
        assert TIME_WITH_ZONE.search(page.text) and not TIME_WITHOUT_ZONE.search(page.text)
        await receiver.wait_for(lambda requests: sum(r.headers["webhook-id"] == delivered["eventId"]
                                                     for r in requests) >= 2)


async def test_a_page_refusing_several_parameters_lists_every_one_with_its_fix(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http:
        queue = await http.get(f"/ui/cases/{agent.case_id}", params={"kind": "zz", "sort": "bad"})
        as_of = await http.get(f"/ui/cases/{agent.case_id}", params={"asOf": "x", "since": "y"})
    assert queue.status_code == 200
    problems = queue.text[queue.text.index('id="queue-problem"'):]
    problems = problems[:problems.index("</div>")]
    assert "see problems" not in problems
    assert "kind" in problems and "sort" in problems and "oldest" in problems, problems
    assert as_of.status_code == 422 and "see problems" not in as_of.text
    shown = as_of.text[as_of.text.index("<h1>"):]
    assert "asOf" in shown and "since" in shown, shown[:1000]


async def test_a_claims_retired_source_is_marked_retired_where_the_case_page_lists_its_sources(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http, stack.api() as api:
        kept, gone = (await seed(agent, sources=2))["sources"]
        await agent.accepted("stage_claims", claims=[claim_item("cites-both", [kept, gone])])
        retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements",
                                 json={"records": [{"record": "source", "id": gone}], "note": "withdrawn"})
        assert retired.status_code == 200, retired.text
        page = await http.get(f"/ui/cases/{agent.case_id}")
        before = await http.get(f"/ui/cases/{agent.case_id}", params={"asOf": retired.json()["revision"] - 1})
    listed = page.text[page.text.index('id="claim-cites-both"'):]
    listed = " ".join(listed[:listed.index("</li>")].split())
    assert f"sources {kept}, " in listed and f'{gone} (retired)' in listed, listed
    then = before.text[before.text.index('id="claim-cites-both"'):]
    assert "(retired)" not in then[:then.index("</li>")]


async def test_the_history_page_says_why_records_were_retired(stack):
    async with agent_session(stack) as agent, signed_in(stack) as http, stack.api() as api:
        gone = (await seed(agent, sources=1))["sources"][0]
        retired = await api.post(f"/api/v1/cases/{agent.case_id}/retirements",
                                 json={"records": [{"record": "source", "id": gone}], "note": "the page moved"})
        assert retired.status_code == 200, retired.text
        page = await http.get(f"/ui/cases/{agent.case_id}/history")
    assert page.status_code == 200
    shown = " ".join(page.text.split())
    retirement = shown[shown.index(f'id="revision-{retired.json()["revision"]}"'):]
    assert "the page moved" in retirement[:retirement.index("</li>")], retirement[:800]


async def test_an_agent_named_with_a_slash_has_its_track_record_and_its_case_reassigned(stack):
    name = f"team/{unique('agent')}?v=2#x"
    async with agent_session(stack, name=name) as agent, signed_in(stack) as http, stack.api() as api:
        source = (await seed(agent, sources=1))["sources"][0]
        await agent.stage("stage_claims", claims=[claim_item("slashed", [source])])
        record = await api.get(f"/api/v1/agents/{quote(name, safe='')}/record")
        case = await http.get(f"/ui/cases/{agent.case_id}")
        link = re.search(r'href="(/ui/agents/[^"]+)"', case.text).group(1)
        page = await http.get(link)
        async with stack.api("admin") as admin:
            moved = await admin.put(f"/api/v1/agents/{quote(name, safe='')}/active-case", json={"caseId": agent.case_id})
    assert record.status_code == 200 and record.json()["agent"] == name, record.text
    assert page.status_code == 200 and "Track record of" in page.text, page.text[:300]
    assert moved.status_code == 200, moved.text
