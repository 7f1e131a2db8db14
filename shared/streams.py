"""JetStream provisioning: the event stream and its durable consumers are declared here and only here.

Retention: `limits` with no age or size cap by default, because the stream is the history
subscribers replay from (`--from-start`); operators may cap age with THREADLINE_EVENTS_MAX_AGE_DAYS.
The duplicate window (THREADLINE_EVENTS_DUPLICATE_WINDOW_SECONDS, 24 h by default) bounds how late a
relay may re-publish an event it had sent but not yet marked and still have JetStream drop the copy.
Replicas: THREADLINE_EVENTS_REPLICAS (3 on a three-server cluster); unset, `migrate` keeps the stream's
own count, so an operator's `nats stream edit --replicas` is never undone.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, NotFoundError

from shared.events import EventType
from shared.settings import Settings
from shared.subjects import Subjects

PROJECTION_CONSUMER = "projection"
WEBHOOKS_CONSUMER = "webhooks"
PROJECTION_EVENT = EventType.LEDGER_CHANGED  # all the case views need: each case's ledger changes
# ... and the search index: proposals staged (their pending items) and decided
PROJECTION_EVENTS = (PROJECTION_EVENT, EventType.PROPOSAL_STAGED, EventType.PROPOSAL_DECIDED)


def stream_config(settings: Settings, *, replicas: int | None = None) -> StreamConfig:
    """The stream as the settings want it; `replicas` is the count to keep when the settings name none."""
    subjects = Subjects(settings.nats_prefix)
    return StreamConfig(
        name=settings.stream_name,
        description="Threadline change events (CloudEvents 1.0); one ledger.changed per case revision",
        subjects=[subjects.events_wildcard],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        max_age=settings.events_max_age_days * 86400.0,
        max_msgs=-1,
        max_bytes=-1,
        max_msg_size=-1,
        duplicate_window=float(settings.events_duplicate_window_seconds),
        num_replicas=settings.events_replicas or replicas or 1,
        # The relay publishes a case's events as one atomic batch (nats-server 2.12+; older servers ignore this
        # and the relay publishes one event at a time): services/relay/batches.py.
        allow_atomic=True,
    )


def _durable(name: str, description: str, filter_subject: str | list[str]) -> ConsumerConfig:
    """A service's durable pull consumer: every event from the stream's start, each acknowledged
    explicitly once its effect committed, redelivered until it is (no delivery limit)."""
    return ConsumerConfig(durable_name=name, description=description, deliver_policy=DeliverPolicy.ALL,
                          ack_policy=AckPolicy.EXPLICIT, ack_wait=30.0, max_deliver=-1, max_ack_pending=1000,
                          **({"filter_subjects": filter_subject} if isinstance(filter_subject, list)
                             else {"filter_subject": filter_subject}))


def projection_consumer_config(settings: Settings) -> ConsumerConfig:
    return _durable(PROJECTION_CONSUMER, "The projection service's read models",
                    [Subjects(settings.nats_prefix).case_event("*", event) for event in PROJECTION_EVENTS])


def webhooks_consumer_config(settings: Settings) -> ConsumerConfig:
    return _durable(WEBHOOKS_CONSUMER, "The webhooks service: each event becomes deliveries to the matching webhooks",
                    Subjects(settings.nats_prefix).events_wildcard)


async def provision(js: JetStreamContext, settings: Settings) -> None:
    """Create or update the stream and the durable consumers of the projection and webhooks (idempotent)."""
    try:
        existing = await js.stream_info(settings.stream_name)
    except NotFoundError:
        config = stream_config(settings)
        await js.add_stream(config)
    else:
        config = stream_config(settings, replicas=existing.config.num_replicas)
        await js.update_stream(config)
    try:
        await js.add_consumer(config.name, projection_consumer_config(settings))
    except APIError:
        # A consumer of an older configuration the server will not update in place (its filter): made
        # again from the stream's start, which the projection's views skip through (older revisions).
        await js.delete_consumer(config.name, PROJECTION_CONSUMER)
        await js.add_consumer(config.name, projection_consumer_config(settings))
    await js.add_consumer(config.name, webhooks_consumer_config(settings))
