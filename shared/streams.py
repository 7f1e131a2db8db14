"""JetStream provisioning: the event stream and its durable consumers are declared here and only here.

Retention: `limits` with no age or size cap by default, because the stream is the history
subscribers replay from (`--from-start`); operators may cap age with THREADLINE_EVENTS_MAX_AGE_DAYS.
The duplicate window (THREADLINE_EVENTS_DUPLICATE_WINDOW_SECONDS, 24 h by default) bounds how late a
relay may re-publish an event it had sent but not yet marked and still have JetStream drop the copy.
Replicas: THREADLINE_EVENTS_REPLICAS (3 on a three-server cluster); unset, `migrate` keeps the stream's
own count, so an operator's `nats stream edit --replicas` is never undone.

The projection reads the events it applies from a stream of its own, `<stream>_PROJECTION`, which sources them
from the event stream with each case's events under a partition of the case id
(`<prefix>.projection.<p>.case.<caseId>.<type>`, nats-server's `partition()` subject transform:
THREADLINE_PROJECTION_PARTITIONS of them). Each partition has a durable consumer, `projection-<p>`, led by one
projection replica at a time (services/projection/partitions.py), so a case's events are applied by one replica
and replicas never wait on each other's cases. Subscribers never see that stream; the event stream's subjects are
the contract's. Another partition count makes the projection's stream again (its consumers start over from the
event stream's first event, which the projection skips through: it has applied them).
"""

from __future__ import annotations

import contextlib

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamSource,
    SubjectTransform,
)
from nats.js.errors import APIError, NotFoundError

from shared.events import EventType
from shared.settings import Settings
from shared.subjects import Subjects

LEGACY_PROJECTION_CONSUMER = "projection"  # the event stream's one projection consumer, before partitions
PROJECTION_CONSUMER_PREFIX = "projection-"  # projection-<p>: each partition's consumer of the projection's stream
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


def projection_stream_name(settings: Settings) -> str:
    return f"{settings.stream_name}_PROJECTION"


def projection_consumer(partition: int) -> str:
    return f"{PROJECTION_CONSUMER_PREFIX}{partition}"


def projection_stream_config(settings: Settings, *, replicas: int = 1) -> StreamConfig:
    """The projection's stream: the events it applies, sourced from the event stream, each case's under its
    partition. No subjects of its own (nothing is published to it), the event stream's age limit."""
    subjects, count = Subjects(settings.nats_prefix), settings.projection_partitions
    transforms = [SubjectTransform(src=subjects.case_event("*", event),
                                   dest=subjects.projection_event(f"{{{{partition({count},1)}}}}", "{{wildcard(1)}}",
                                                                  event))
                  for event in PROJECTION_EVENTS]
    return StreamConfig(
        name=projection_stream_name(settings),
        description=f"The projection's events, each case's in one of {count} partitions (sourced from "
                    f"{settings.stream_name})",
        sources=[StreamSource(name=settings.stream_name, subject_transforms=transforms)],
        retention=RetentionPolicy.LIMITS, storage=StorageType.FILE, discard=DiscardPolicy.OLD,
        max_age=settings.events_max_age_days * 86400.0, max_msgs=-1, max_bytes=-1, max_msg_size=-1,
        num_replicas=replicas,
    )


def projection_consumer_config(settings: Settings, partition: int) -> ConsumerConfig:
    return _durable(projection_consumer(partition), f"The projection's read models: partition {partition}",
                    Subjects(settings.nats_prefix).projection_event(partition))


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
    await js.add_consumer(config.name, webhooks_consumer_config(settings))
    await _provision_projection(js, settings, config.num_replicas or 1)


async def _provision_projection(js: JetStreamContext, settings: Settings, replicas: int) -> None:
    """The projection's stream and its partitions' consumers; the event stream's projection consumer from before
    partitions goes (a projection replica of that version waits, saying to run `migrate`)."""
    wanted = projection_stream_config(settings, replicas=replicas)
    try:
        existing = await js.stream_info(wanted.name)
    except NotFoundError:
        await js.add_stream(wanted)
    else:
        if _transforms(existing.config) != _transforms(wanted):  # another partition count: made again
            await js.delete_stream(wanted.name)
            await js.add_stream(wanted)
        else:
            await js.update_stream(wanted)
    for partition in range(settings.projection_partitions):
        consumer = projection_consumer_config(settings, partition)
        try:
            await js.add_consumer(wanted.name, consumer)
        except APIError:  # of an older configuration the server will not update in place: made again
            await js.delete_consumer(wanted.name, consumer.durable_name)
            await js.add_consumer(wanted.name, consumer)
    with contextlib.suppress(NotFoundError):  # gone already: a deployment provisioned since, or a new one
        await js.delete_consumer(settings.stream_name, LEGACY_PROJECTION_CONSUMER)


def _transforms(config: StreamConfig) -> list[tuple[str, str]]:
    return sorted((t.src or "", t.dest or "") for source in config.sources or []
                  for t in source.subject_transforms or [])
