"""The projection's consumer: a failed event is redelivered until it applies, and applies only once."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from services.projection import read_models
from services.projection.repository import SqlProjectionUnitOfWork
from services.projection.view_repository import SqlViews
from shared.events import Origin
from shared.subjects import Service, Subjects
from tests.events import (
    projection_consumers,
    stream_events,
    wait_until_projected,
    wait_until_published,
    wait_until_redelivered,
)
from tests.factories import agent_session, new_case, source_item
from tests.support import connect_nats


async def view_revision(stack, case_id: str) -> int | None:
    async with stack.db.engine.connect() as connection:
        view = await SqlViews(connection).state(case_id)
    return view.revision if view else None


async def record_source(stack, case_id: str, source_id: str) -> None:
    async with stack.api() as api:
        recorded = await api.post(f"/api/v1/cases/{case_id}/sources", json={"sources": [source_item(source_id)]})
        assert recorded.status_code == 201, recorded.text


async def test_a_failing_event_is_redelivered_until_it_applies_then_never_again(stack):
    case_id = await new_case(stack)
    await record_source(stack, case_id, "first")
    await wait_until_published(stack.db)
    await wait_until_projected(stack.settings)
    assert await view_revision(stack, case_id) == 1

    async with stack.db.engine.begin() as connection:
        await connection.execute(text(
            "CREATE FUNCTION refuse_view() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.case_id = '{case_id}' THEN RAISE EXCEPTION 'read model store down'; END IF; "
            "RETURN NEW; END $$"))
        await connection.execute(text(
            "CREATE TRIGGER refuse_view BEFORE INSERT OR UPDATE ON case_views "
            "FOR EACH ROW EXECUTE FUNCTION refuse_view()"))
    try:
        await record_source(stack, case_id, "late")
        await wait_until_published(stack.db)
        await wait_until_redelivered(stack.settings)  # a first attempt failed and was tried again
        assert await view_revision(stack, case_id) == 1
    finally:
        async with stack.db.engine.begin() as connection:
            await connection.execute(text("DROP TRIGGER refuse_view ON case_views"))
            await connection.execute(text("DROP FUNCTION refuse_view()"))

    await wait_until_projected(stack.settings)
    assert await view_revision(stack, case_id) == 2

    event = next(e for e in await stream_events(stack.settings)
                 if e["type"] == "threadline.ledger.changed" and e["data"]["caseId"] == case_id)
    uow = SqlProjectionUnitOfWork(stack.db, Origin(Subjects(stack.settings.nats_prefix), "tests"))
    assert await read_models.apply_event(event, event["seq"], uow) is False  # already applied: a no-op


async def test_a_message_that_is_no_event_is_let_go_and_the_events_after_it_still_apply(servers):
    from tests.support import Stack, new_deployment, remove_deployment

    settings = await new_deployment(servers)  # its own stream: the junk never reaches other tests' streams
    stack = await Stack(settings).start()
    try:
        case_id = await new_case(stack)
        connection = await connect_nats(settings, Service.RELAY.value)  # only the relay may publish events
        try:
            js = connection.jetstream()
            subjects = Subjects(settings.nats_prefix)
            await js.publish(subjects.case_event(case_id, "threadline.ledger.changed"), b"\xff not json")
            await js.publish(subjects.case_event(case_id, "threadline.ledger.changed"), b'{"id": "x", "type": '
                             b'"threadline.ledger.changed", "data": {}}')
        finally:
            await connection.close()
        await record_source(stack, case_id, "after")
        await wait_until_published(stack.db)
        await wait_until_projected(settings, timeout=20)  # nothing is left pending or unacknowledged
        assert await view_revision(stack, case_id) == 1
    finally:
        await stack.stop()
        await remove_deployment(servers, settings)


async def test_the_projection_is_given_ledger_changes_and_proposals_for_search_only(stack):
    async with agent_session(stack) as agent:
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        connection = await connect_nats(stack.settings)
        try:
            js = connection.jetstream()
            before = sum(c.delivered.consumer_seq for c in await projection_consumers(js, stack.settings))
            for n in range(3):
                await agent.stage("stage_sources", sources=[source_item(f"staged-{n}")])
            await wait_until_published(stack.db)
            staged = await stream_events(stack.settings)
            assert sum(e["type"] == "threadline.proposal.staged" and e["data"]["caseId"] == agent.case_id
                       for e in staged) == 3
            await wait_until_projected(stack.settings)
            delivered = sum(c.delivered.consumer_seq for c in await projection_consumers(js, stack.settings))
            assert delivered == before + 3  # the staged proposals
            async with stack.db.engine.connect() as conn:  # their pending items, which search finds
                pending = (await conn.execute(text(
                    "SELECT record_id FROM search_records WHERE case_id = :c AND status = 'pending'"),
                    {"c": agent.case_id})).scalars().all()
            assert sorted(pending) == ["staged-0", "staged-1", "staged-2"]
        finally:
            await connection.close()


SEARCH_ROWS = ("SELECT case_id, kind, record_id, proposal_id, status FROM search_records "
               "WHERE case_id = ANY(:cases) ORDER BY 1, 2, 3, 4")
WORDS = "SELECT case_id, word, n FROM search_words WHERE case_id = ANY(:cases) AND n <> 0 ORDER BY 1, 2"
VIEWS = "SELECT case_id, revision FROM case_views WHERE case_id = ANY(:cases) ORDER BY 1"


async def projected_state(stack, cases: list[str]) -> list[list]:
    async with stack.db.engine.connect() as conn:
        return [(await conn.execute(text(sql), {"cases": cases})).all() for sql in (SEARCH_ROWS, WORDS, VIEWS)]


async def two_cases_forgotten(stack) -> tuple[list, list[str], list[list]]:
    """Two cases' events of every type the projection applies, what it made of them one by one, and then those
    events forgotten (inbox, views and search rows gone) so that they can be applied again."""
    async with agent_session(stack) as first, agent_session(stack) as second:
        for n in range(2):
            await first.stage("stage_sources", sources=[source_item(f"first-{n}")])
            await second.stage("stage_sources", sources=[source_item(f"second-{n}")])
        await second.accepted("stage_sources", sources=[source_item("second-accepted")])
        await record_source(stack, first.case_id, "first-recorded")
        cases = [first.case_id, second.case_id]
        await wait_until_published(stack.db)
        await wait_until_projected(stack.settings)
        one_by_one = await projected_state(stack, cases)
        assert len(one_by_one[0]) >= 6 and len(one_by_one[2]) == 2

    batch = [(e, e["seq"]) for e in await stream_events(stack.settings)
             if e["type"] in read_models.APPLIED and e["data"].get("caseId") in cases]
    assert {e["type"] for e, _ in batch} == set(read_models.APPLIED)
    async with stack.db.engine.begin() as conn:  # forget what the projection made of them
        await conn.execute(text("DELETE FROM projection_inbox WHERE event_id = ANY(CAST(:ids AS uuid[]))"),
                           {"ids": [e["id"] for e, _ in batch]})
        for table in ("search_records", "search_words", "case_views"):
            await conn.execute(text(f"DELETE FROM {table} WHERE case_id = ANY(:cases)"), {"cases": cases})
    return batch, cases, one_by_one


def projection_uow(stack) -> SqlProjectionUnitOfWork:
    return SqlProjectionUnitOfWork(stack.db, Origin(Subjects(stack.settings.nats_prefix), "tests"))


async def test_a_batch_of_events_of_several_cases_applies_as_the_events_one_by_one_and_only_once(stack):
    batch, cases, one_by_one = await two_cases_forgotten(stack)
    uow = projection_uow(stack)
    applied = await read_models.apply_events(batch + batch[:2], uow)  # two of them delivered twice
    assert applied == {e["id"] for e, _ in batch}
    assert await projected_state(stack, cases) == one_by_one
    assert await read_models.apply_events(batch, uow) == set()  # redelivered: nothing applies twice
    assert await projected_state(stack, cases) == one_by_one


async def test_a_case_another_replica_holds_is_passed_over_until_the_rest_of_the_batch_is_applied(stack):
    batch, (first, second), one_by_one = await two_cases_forgotten(stack)
    async with stack.db.engine.begin() as conn:  # the first case's view, never built
        await conn.execute(text("INSERT INTO case_views (case_id, revision) VALUES (:c, -1)"), {"c": first})
    async with stack.db.engine.begin() as other:  # another replica, mid-transaction on the first case
        await other.execute(text("SELECT 1 FROM case_views WHERE case_id = :c FOR UPDATE"), {"c": first})
        applying = asyncio.create_task(read_models.apply_events(batch, projection_uow(stack)))
        shown = dict(one_by_one[2])[second]
        for _ in range(200):  # the second case's view is built while the first is held
            if await view_revision(stack, second) == shown:
                break
            await asyncio.sleep(0.05)
        assert await view_revision(stack, second) == shown, "the free case is applied without waiting"
        assert not applying.done(), "the held case is waited for"
    assert await asyncio.wait_for(applying, 10) == {e["id"] for e, _ in batch}
    assert await projected_state(stack, [first, second]) == one_by_one


async def test_replicas_applying_one_stream_side_by_side_apply_each_event_once_as_one_would(stack):
    batch, cases, one_by_one = await two_cases_forgotten(stack)
    # Two replicas, each fetching every other event (a case's events split between them, in any order).
    halves = [batch[0::2], batch[1::2]]
    applied = await asyncio.gather(*(read_models.apply_events(half, projection_uow(stack)) for half in halves))
    assert applied[0] | applied[1] == {e["id"] for e, _ in batch} and not applied[0] & applied[1]
    assert await projected_state(stack, cases) == one_by_one

