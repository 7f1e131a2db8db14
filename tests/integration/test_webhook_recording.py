"""Recording events into webhook deliveries against the real PostgreSQL, with the stream as the consumer would
report it: an event that comes back at another sequence after a restore, and a stream restored from an older
backup of itself.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text

from services.webhooks import domain, use_cases
from services.webhooks import repository as repo
from shared.db.session import Database
from shared.service import ServiceContext
from shared.subjects import Service, Subjects
from tests.support import new_deployment, remove_deployment

JAN = datetime(2025, 1, 1, tzinfo=UTC)
MARCH = datetime(2025, 3, 1, tzinfo=UTC)


class Log:
    """Stands in for the use cases' logger: the events logged, by name."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _record(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    info = warning = error = _record


@pytest.fixture
async def ctx(servers, monkeypatch):  # noqa: ANN001, ANN201
    """A deployment's database alone: the test is the webhooks service's consumer."""
    settings = await new_deployment(servers)
    db = Database.from_url(settings.resolved_database_url(), pool_size=2)
    monkeypatch.setattr(use_cases, "log", Log())
    yield ServiceContext(Service.WEBHOOKS, settings, db, Subjects(settings.nats_prefix))
    await db.dispose()
    await remove_deployment(servers, settings)


def envelope(name: str) -> dict[str, Any]:
    return {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, name)), "type": "threadline.proposal.staged",
            "subject": "case/recording", "revision": None, "data": {"name": name}}


async def add_webhook(ctx: ServiceContext, start_after_seq: int) -> str:
    """A webhook without a scope, registered once the stream held `start_after_seq` events."""
    webhook_id = str(uuid.uuid4())
    async with ctx.db.transaction() as connection:
        await repo.insert_webhook(connection, webhook_id=webhook_id, url="https://example.org/hook", case_id=None,
                                  company_id=None, types=[], secret="whsec_test", start_after_seq=start_after_seq,
                                  created_by="tests")
    return webhook_id


async def record(ctx: ServiceContext, stream: domain.Stream, holds: range,
                 batch: list[tuple[int, dict[str, Any]]]) -> use_cases.Recorded:
    """Record a batch as a new process does (it checks the stream first); the stream holds the sequences `holds`."""
    async def first_after(position: int) -> int | None:
        return next((seq for seq in holds if seq > position), None)

    async def now() -> domain.Stream:
        return stream

    return await use_cases.record_events(ctx, batch, first_after, now, None)


async def deliveries(ctx: ServiceContext, webhook_id: str) -> list[tuple[str, int]]:
    """The webhook's deliveries, (event id, stream sequence) in the order they go out."""
    async with ctx.db.read() as connection:
        rows = await connection.execute(text(
            "SELECT event_id::text, stream_seq FROM webhook_deliveries WHERE webhook_id = :w ORDER BY stream_seq"),
            {"w": webhook_id})
        return [(row.event_id, row.stream_seq) for row in rows]


async def position(ctx: ServiceContext) -> tuple[int, str | None]:
    async with ctx.db.read() as connection:
        return tuple((await connection.execute(text("SELECT stream_seq, stream_created FROM webhook_ingest"))).one())


async def test_an_event_recorded_before_makes_no_delivery_to_a_webhook_registered_since_when_it_comes_back(ctx):  # noqa: ANN001
    """A restore into a new data dir: the relay publishes the outbox again, the first event at the new stream's
    sequence 1. The webhook registered after its first recording is not sent it; the one before keeps its one."""
    first, second, third, later = envelope("first"), envelope("second"), envelope("third"), envelope("later")
    before = await add_webhook(ctx, 0)
    recorded = await record(ctx, domain.Stream(JAN, 3), range(1, 4), [(1, first), (2, second), (3, third)])
    assert recorded.position == 3 and recorded.deliveries == 3
    since = await add_webhook(ctx, 3)

    again = await record(ctx, domain.Stream(MARCH, 2), range(1, 3), [(1, first), (2, later)])

    assert again.position == 2, "counted again from the new stream's first event"
    assert again.deliveries == 2, "only the new event, to both webhooks"
    assert await deliveries(ctx, since) == [(later["id"], 2)], "no event from before the webhook existed"
    assert [event for event, _ in await deliveries(ctx, before)] == [e["id"] for e in (first, second, third, later)]
    assert [name for name, _ in use_cases.log.events] == ["event_stream_new"]


async def test_a_stream_restored_from_an_older_backup_of_itself_goes_on_after_its_last_sequence(ctx):  # noqa: ANN001
    """The same stream (same creation time) restored from a backup that ends at 3, with 5 recorded: the relay
    publishes 4 and 5 again at 4 and 5, then a new event comes at 6. Recording goes on after 3; the pending
    deliveries keep their order, before the new one."""
    events = [envelope(f"event-{seq}") for seq in range(1, 6)]
    before = await add_webhook(ctx, 0)
    await record(ctx, domain.Stream(JAN, 3), range(1, 4), list(enumerate(events[:3], start=1)))
    between = await add_webhook(ctx, 4)  # once the stream held 4 events
    await record(ctx, domain.Stream(JAN, 5), range(1, 6), [(4, events[3]), (5, events[4])])
    assert (await position(ctx))[0] == 5
    new = envelope("after-the-restore")

    rewound = await record(ctx, domain.Stream(JAN, 3), range(1, 7), [(4, events[3]), (5, events[4]), (6, new)])

    assert rewound.position == 6, "went on after the backup's last sequence, 3"
    assert rewound.deliveries == 2, "the new event, to each webhook; the events republished, to none again"
    assert [event for event, _ in await deliveries(ctx, before)] == [e["id"] for e in events] + [new["id"]]
    assert [event for event, _ in await deliveries(ctx, between)] == [events[4]["id"], new["id"]]
    assert (await deliveries(ctx, before))[-1] == (new["id"], 6), "the new event at its sequence in the stream"
    assert all(seq <= 0 for _, seq in (await deliveries(ctx, before))[:-1]), "the old ones below it, in order"
    (name, fields), = use_cases.log.events
    assert name == "event_stream_rewound"
    assert (fields["recorded_position"], fields["stream_last_seq"]) == (5, 3)
