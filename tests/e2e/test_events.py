"""Subscribers' view: read models kept by events, replay and resume, the example subscriber, AsyncAPI."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

from sqlalchemy import delete, text

from services.projection.view_repository import SqlViews
from shared.db.view_tables import case_views
from tests.events import stream_events, wait_until_projected, wait_until_published
from tests.factories import agent_session, claim_item, decide, seed, source_item
from tests.processes import threadline

ROOT = Path(__file__).resolve().parents[2]


def run(stack, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return threadline(*args, env=stack.environment(), timeout=timeout)


async def some_traffic(stack) -> str:
    async with agent_session(stack) as agent:
        ids = await seed(agent, sources=2, claims=3)
        staged = await agent.stage("stage_claims", claims=[claim_item("rejected-one", ids["sources"])])
        await decide(stack, staged["proposalId"], reject=["rejected-one"], note="Too broad.")
        async with stack.api() as api:
            await api.post(f"/api/v1/cases/{agent.case_id}/guidance", json={"text": "Cite the agency data."})
        await agent.ok("set_focus", {"expectedCaseId": agent.case_id, "focus": "unresolved"})
        return agent.case_id


async def test_read_models_rebuilt_from_the_ledger_equal_those_kept_live(stack):
    case_id = await some_traffic(stack)
    await wait_until_published(stack.db)
    await wait_until_projected(stack.settings)
    index = ("SELECT kind, record_id, proposal_id, status, tsv::text, dup_key FROM search_records WHERE case_id = :case "
             "ORDER BY 1, 2, 3")
    async with stack.db.engine.connect() as connection:
        live = await SqlViews(connection).everything(case_id)
        live_index = (await connection.execute(text(index), {"case": case_id})).all()
    assert live["revision"] == 2
    assert {(r.kind, r.status) for r in live_index} == {("source", "canonical"), ("claim", "canonical")}
    assert {c["name"]: c["value"] for c in live["view_counts"]}["claims"] == 3
    assert len(live["view_claims"]) == 3 and live["view_unresolved"][0]["type"] == "missing_verdict"
    async with stack.db.engine.begin() as connection:  # the rebuild must write every view itself
        await connection.execute(delete(case_views).where(case_views.c.case_id == case_id))
        await connection.execute(text("DELETE FROM view_claims WHERE case_id = :case"), {"case": case_id})
        await connection.execute(text("DELETE FROM search_records WHERE case_id = :case"), {"case": case_id})
    rebuilt = await asyncio.to_thread(run, stack, "projection", "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    async with stack.db.engine.connect() as connection:
        after = await SqlViews(connection).everything(case_id)
        after_index = (await connection.execute(text(index), {"case": case_id})).all()
    assert after == live
    assert after_index == live_index  # the search index too (the rejected item is pending no more)


async def test_tail_from_a_sequence_past_the_streams_end_is_refused_in_one_line_and_the_next_one_resumes(stack):
    # Past the end a tail would wait in silence until the stream got there (a sequence of another stream, or of one
    # restored since), missing every event meanwhile; the sequence after the last is a resume.
    await some_traffic(stack)
    await wait_until_published(stack.db)
    last = max(e["seq"] for e in await stream_events(stack.settings))
    for past in (last + 2, 2**64):
        refused = await asyncio.to_thread(run, stack, "events", "tail", "--from-seq", str(past), "--idle-exit", "2")
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr == (f"error: --from-seq {past} is past the event stream's end (its last event is "
                                  f"#{last}), so the tail would wait in silence until the stream reached it: the "
                                  "sequence is from another stream, or one restored since; resume from at most "
                                  f"{last + 1}, or read from --from-start\n"), refused.stderr
    resumed = await asyncio.to_thread(run, stack, "events", "tail", "--from-seq", str(last + 1), "--idle-exit", "2")
    assert (resumed.returncode, resumed.stdout, resumed.stderr) == (0, "", "")


def json_lines(output: str) -> list[dict]:
    # Lines end at "\n" only: an event's text may hold U+2028 or U+001D, which str.splitlines() also splits on.
    return [json.loads(line) for line in output.split("\n") if line]


async def test_tail_from_start_sees_every_event_and_a_resumed_tail_only_the_rest(stack):
    await some_traffic(stack)
    await wait_until_published(stack.db)
    everything = await stream_events(stack.settings)
    replay = await asyncio.to_thread(run, stack, "events", "tail", "--from-start", "--format", "json",
                                     "--count", str(len(everything)), "--idle-exit", "5")
    lines = json_lines(replay.stdout)
    assert [line["event"]["id"] for line in lines] == [e["id"] for e in everything]
    middle = lines[len(lines) // 2]["streamSequence"]
    resumed = await asyncio.to_thread(run, stack, "events", "tail", "--from-seq", str(middle + 1), "--format", "json",
                                      "--idle-exit", "2")
    rest = json_lines(resumed.stdout)
    assert [r["streamSequence"] for r in rest] == [e["seq"] for e in everything if e["seq"] > middle]
    readable = await asyncio.to_thread(run, stack, "events", "tail", "--from-start", "--format", "line", "--count", "1")
    assert re.match(r"^#\d+ \S+ threadline\.\S+", readable.stdout)


async def test_the_documented_example_subscriber_applies_each_revision_once_and_resumes(stack, tmp_path):
    async with agent_session(stack) as agent:
        await seed(agent, sources=2, claims=2)
        await wait_until_published(stack.db)
        command = [sys.executable, str(ROOT / "docs" / "examples" / "subscriber.py"), "--name",
                   f"example-{agent.case_id}", "--case", agent.case_id, "--state", str(tmp_path / "state.json"),
                   "--exit-when-idle", "2"]

        def subscriber() -> list[dict]:
            environment = {**stack.environment(), "THREADLINE_NATS_URL": stack.subscriber_url()}  # as handed out
            done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return [json.loads(line) for line in done.stdout.splitlines()]

        first = await asyncio.to_thread(subscriber)
        assert [e["revision"] for e in first] == [1, 2]
        assert await asyncio.to_thread(subscriber) == []
        await agent.accepted("stage_sources", sources=[source_item("one-more")])
        await wait_until_published(stack.db)
        assert [e["revision"] for e in await asyncio.to_thread(subscriber)] == [3]


def resolve(document: dict, pointer: str) -> object:
    node: object = document
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part]  # type: ignore[index]
    return node


async def test_the_asyncapi_document_describes_every_subject_and_resolves(stack):
    printed = await asyncio.to_thread(run, stack, "docs", "asyncapi")
    document = json.loads(printed.stdout)
    assert document["asyncapi"] == "3.0.0"
    addresses = {c["address"] for c in document["channels"].values() if c["address"]}
    prefix = stack.settings.nats_prefix
    assert f"{prefix}.cmd.staging.stage_sources" in addresses
    assert f"{prefix}.events.case.{{caseId}}.ledger.changed" in addresses
    refs = re.findall(r'"\$ref": "([^"]+)"', json.dumps(document))
    for ref in refs:
        resolve(document, ref)
    for operation in document["operations"].values():
        resolve(document, operation["channel"]["$ref"])
    async with stack.api() as api:
        page = await api.get("/docs/asyncapi")
        served = (await api.get("/docs/asyncapi.json")).json()
    assert page.status_code == 200 and "<script" not in page.text.lower()
    assert not re.search(r'(src|href)="https?://', page.text), "no external scripts or styles"
    assert served == document
