"""Each NATS role against a real nats-server with `threadline up`'s configuration: everything the product does as
that role is allowed (each proven by its effect: an answer, a delivery, an acknowledgement), and a sample of
what the role must not do is refused (the server reports a permissions violation)."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest

from services.cli.embedded import EmbeddedNats
from services.projection.partitions import partition_of
from services.relay.batches import Message, publish_batch, stream_takes_batches
from shared.nats_auth import GATEWAY, OPERATOR, SUBSCRIBER, inbox_prefix, nats_options, roles
from shared.settings import Settings
from shared.streams import WEBHOOKS_CONSUMER, projection_consumer, projection_stream_name, provision
from shared.subjects import BACKEND_SERVICES, Command, Service, Subjects, owner_name


async def settled(nc: nats.NATS) -> None:
    """Until the server has the connection's subscriptions. nats-py writes a flush's PING ahead of the commands
    still buffered (a SUB may follow it): the first round trip lets the buffer go out, the second confirms it."""
    await nc.flush()
    await nc.flush()


@dataclass
class Connection:
    nc: nats.NATS
    errors: list[str] = field(default_factory=list)

    async def refused(self, what: str, subject: str, timeout: float = 5.0) -> None:
        """The server reported a permissions violation for `what` ("publish" or "subscription") to `subject`."""
        expected = f'{what} to "{subject}"'.lower()
        for _ in range(int(timeout / 0.05)):
            if any("permissions violation" in e and expected in e for e in self.errors):
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"no permissions violation for {expected}; errors: {self.errors}")

    async def publish_refused(self, subject: str) -> None:
        await self.nc.publish(subject, b"{}")
        await self.refused("publish", subject)

    async def subscribe_refused(self, subject: str, queue: str = "") -> None:
        await self.nc.subscribe(subject, queue=queue)
        await self.refused("subscription", subject)

    def clean(self) -> None:
        assert not any("permissions violation" in e for e in self.errors), self.errors


@dataclass
class Deployment:
    settings: Settings
    opened: list[Connection] = field(default_factory=list)

    @property
    def subjects(self) -> Subjects:
        return Subjects(self.settings.nats_prefix)

    @property
    def stream(self) -> str:
        return self.settings.stream_name

    async def connect(self, role: str) -> Connection:
        connection = Connection(None)  # type: ignore[arg-type]

        async def record(error: Exception) -> None:
            connection.errors.append(str(error).lower())

        options = {**nats_options(self.settings, role, name=f"roles-{role}").client(), "error_cb": record}
        connection.nc = await nats.connect(**options, allow_reconnect=False)
        self.opened.append(connection)
        return connection

    async def service(self, service: Service) -> Connection:
        """A stand-in for `service`, connected as its user: it answers its commands and health pings."""
        connection = await self.connect(service.value)

        async def answer(message) -> None:  # noqa: ANN001
            await message.respond(b"answered by " + service.value.encode())

        queue = self.subjects.queue(service)
        await connection.nc.subscribe(f"{self.settings.nats_prefix}.cmd.{service.value}.>", queue=queue, cb=answer)
        await connection.nc.subscribe(self.subjects.health(service), queue=queue, cb=answer)
        await settled(connection.nc)
        return connection


@pytest.fixture(scope="module")
async def deployment():
    """`up`'s own server and configuration (EmbeddedNats with the deployment's settings); the operator
    provisions the stream and durable consumers, as `up` and `migrate` do, and the relay publishes one event."""
    data_dir = Path(tempfile.mkdtemp(prefix="threadline-roles-"))
    settings = Settings(nats_url="nats://127.0.0.1:1", data_dir=data_dir, nats_prefix=f"r{secrets.token_hex(3)}")
    server = EmbeddedNats(data_dir / "nats", settings)
    running = Deployment(settings.model_copy(update={"nats_url": await server.start()}))
    operator = await running.connect(OPERATOR)
    await provision(operator.nc.jetstream(), running.settings)
    relay = await running.connect(Service.RELAY.value)
    ack = await relay.nc.jetstream().publish(running.subjects.case_event("c1", "threadline.ledger.changed"), b"{}")
    assert ack.stream == running.stream
    yield running
    for connection in running.opened:
        await connection.nc.close()
    await server.stop()


async def reads_the_stream(deployment: Deployment, connection: Connection) -> None:
    """Stream info, and an ordered consumer of its own that delivers the event (the event feed's way)."""
    js = connection.nc.jetstream()
    assert (await js.stream_info(deployment.stream)).state.messages >= 1
    reading = await js.subscribe(deployment.subjects.case_events("c1"), stream=deployment.stream,
                                 ordered_consumer=True, deliver_policy="all")
    assert (await reading.next_msg(timeout=10)).subject.startswith(f"{deployment.settings.nats_prefix}.events.")
    await reading.unsubscribe()


def projection_pull(deployment: Deployment) -> str:
    """Pulling from a partition's consumer of the projection's stream: the projection's (and the operator's) only."""
    return f"$JS.API.CONSUMER.MSG.NEXT.{projection_stream_name(deployment.settings)}.{projection_consumer(0)}"


async def refused_everywhere_else(deployment: Deployment, connection: Connection, role: str) -> None:
    """What no role but the named ones may do: forge an event, steal a service's durable, delete the stream,
    read another role's replies."""
    prefix, stream = deployment.settings.nats_prefix, deployment.stream
    await connection.publish_refused(f"{prefix}.events.case.c1.ledger.changed")
    await connection.publish_refused(projection_pull(deployment))
    await connection.publish_refused(f"$JS.API.STREAM.DELETE.{stream}")
    other = Service.REVIEW.value if role == GATEWAY else GATEWAY
    await connection.subscribe_refused(f"{inbox_prefix(deployment.settings, other)}.>")


async def check_gateway(deployment: Deployment) -> None:
    gateway = await deployment.connect(GATEWAY)
    for service in BACKEND_SERVICES:  # every command and health ping, answered by the service's own user
        await deployment.service(service)
        reply = await gateway.nc.request(f"{deployment.settings.nats_prefix}.cmd.{service.value}.any", b"{}", 5)
        assert reply.data == b"answered by " + service.value.encode()
        assert (await gateway.nc.request(deployment.subjects.health(service), b"{}", 5)).data == reply.data
    await reads_the_stream(deployment, gateway)
    gateway.clean()
    await gateway.subscribe_refused(f"{deployment.settings.nats_prefix}.cmd.review.>")  # pose as a service
    await gateway.publish_refused(deployment.subjects.outbox_committed)
    await refused_everywhere_else(deployment, gateway, GATEWAY)


async def check_operator(deployment: Deployment) -> None:
    operator = await deployment.connect(OPERATOR)
    js = operator.nc.jetstream()
    await provision(js, deployment.settings)  # idempotent: `migrate` again
    assert (await js.consumer_info(deployment.stream, WEBHOOKS_CONSUMER)).config.durable_name == WEBHOOKS_CONSUMER
    await deployment.service(Service.REVIEW)
    assert (await operator.nc.request(deployment.subjects.command(Command.LIST_CASES), b"{}", 5)).data
    await reads_the_stream(deployment, operator)
    operator.clean()
    prefix = deployment.settings.nats_prefix
    await operator.subscribe_refused(f"{prefix}.cmd.>")
    await operator.publish_refused(f"{prefix}.events.case.c1.ledger.changed")
    await operator.publish_refused("$JS.API.STREAM.DELETE.SOMEONE_ELSES_EVENTS")
    await operator.subscribe_refused(f"{inbox_prefix(deployment.settings, GATEWAY)}.>")


async def check_subscriber(deployment: Deployment) -> None:
    subscriber = await deployment.connect(SUBSCRIBER)
    await reads_the_stream(deployment, subscriber)
    js = subscriber.nc.jetstream()
    mine = await js.pull_subscribe(deployment.subjects.case_events(), durable="downstream", stream=deployment.stream)
    (message,) = await mine.fetch(1, timeout=10)
    await message.ack()
    subscriber.clean()
    await subscriber.publish_refused(deployment.subjects.command(Command.DECIDE))
    await subscriber.subscribe_refused(f"{deployment.settings.nats_prefix}.cmd.>")
    await subscriber.publish_refused(f"$JS.API.CONSUMER.DELETE.{deployment.stream}.{WEBHOOKS_CONSUMER}")
    await refused_everywhere_else(deployment, subscriber, SUBSCRIBER)


async def check_backend(deployment: Deployment, service: Service) -> Connection:
    """What every backend service does: answer its commands and pings (from its queue group), wake the relay."""
    connection = await deployment.service(service)
    gateway = await deployment.connect(GATEWAY)
    reply = await gateway.nc.request(f"{deployment.settings.nats_prefix}.cmd.{service.value}.any", b"{}", 5)
    assert reply.data == b"answered by " + service.value.encode()
    if service is not Service.RELAY:
        relay = await deployment.connect(Service.RELAY.value)
        woken = await relay.nc.subscribe(deployment.subjects.outbox_committed)
        await settled(relay.nc)
        await connection.nc.publish(deployment.subjects.outbox_committed, b"")
        assert (await woken.next_msg(timeout=5)).subject == deployment.subjects.outbox_committed
    connection.clean()
    return connection


async def backend_refused(deployment: Deployment, connection: Connection, service: Service) -> None:
    """A backend service may not send another's commands, answer them, or listen outside its queue group."""
    other = next(s for s in BACKEND_SERVICES if s is not service and s is not Service.STAGING)
    prefix = deployment.settings.nats_prefix
    await connection.publish_refused(f"{prefix}.cmd.{other.value}.anything")  # no command but its own calls
    await connection.subscribe_refused(f"{prefix}.cmd.{other.value}.>", queue=deployment.subjects.queue(other))
    await connection.subscribe_refused(f"{prefix}.cmd.{service.value}.>")  # outside its queue group: a copy
    await connection.subscribe_refused(f"{prefix}.events.>")


async def pulls_its_durable(deployment: Deployment, connection: Connection, durable: str,
                            stream: str | None = None) -> None:
    js = connection.nc.jetstream()
    stream = stream or deployment.stream
    pulling = await js.pull_subscribe_bind(durable, stream=stream)
    (message,) = await pulling.fetch(1, timeout=10)
    await message.ack_sync()
    assert (await js.consumer_info(stream, durable)).num_ack_pending == 0


async def check_staging(deployment: Deployment) -> None:
    staging = await check_backend(deployment, Service.STAGING)
    await backend_refused(deployment, staging, Service.STAGING)
    await refused_everywhere_else(deployment, staging, Service.STAGING.value)


async def check_review(deployment: Deployment) -> None:
    review = await check_backend(deployment, Service.REVIEW)
    await backend_refused(deployment, review, Service.REVIEW)
    await refused_everywhere_else(deployment, review, Service.REVIEW.value)


async def check_thesis_delta(deployment: Deployment) -> None:
    thesis = await check_backend(deployment, Service.THESIS_DELTA)
    await deployment.service(Service(owner_name(Command.GET_COMPANY_CONTEXT)))
    context = deployment.subjects.command(Command.GET_COMPANY_CONTEXT)  # the one command it sends
    assert (await thesis.nc.request(context, b"{}", 5)).data.startswith(b"answered by ")
    thesis.clean()
    await backend_refused(deployment, thesis, Service.THESIS_DELTA)
    await refused_everywhere_else(deployment, thesis, Service.THESIS_DELTA.value)


async def check_projection(deployment: Deployment) -> None:
    projection = await check_backend(deployment, Service.PROJECTION)
    # Its partitions' consumers, on its own stream (which sources the event stream's case events).
    in_zero = next(f"c{n}" for n in range(1000) if partition_of(f"c{n}", deployment.settings.projection_partitions) == 0)
    case_event = deployment.subjects.case_event(in_zero, "threadline.ledger.changed")
    relay = await deployment.connect(Service.RELAY.value)
    await relay.nc.jetstream().publish(case_event, b"{}")
    await pulls_its_durable(deployment, projection, projection_consumer(0), projection_stream_name(deployment.settings))
    projection.clean()
    await backend_refused(deployment, projection, Service.PROJECTION)
    await projection.publish_refused(f"$JS.API.CONSUMER.MSG.NEXT.{deployment.stream}.{WEBHOOKS_CONSUMER}")
    await projection.publish_refused(f"$JS.API.STREAM.INFO.{deployment.stream}")
    await projection.publish_refused(f"$JS.API.STREAM.DELETE.{deployment.stream}")
    await projection.publish_refused(f"$JS.API.STREAM.DELETE.{projection_stream_name(deployment.settings)}")


async def check_relay(deployment: Deployment) -> None:
    relay = await check_backend(deployment, Service.RELAY)
    ack = await relay.nc.jetstream().publish(deployment.subjects.case_event("c2", "threadline.ledger.changed"), b"{}")
    assert ack.stream == deployment.stream and ack.seq >= 2  # the outbox, relayed; JetStream acknowledges it
    # ... and a case's chain as one atomic batch, after reading from the stream's info that it takes them.
    assert await stream_takes_batches(relay.nc.jetstream(), deployment.stream)
    chain = [Message(deployment.subjects.case_event("c2", "threadline.ledger.changed"), b"{}",
                     {"Nats-Msg-Id": f"batch-{n}-{deployment.stream}"}) for n in range(3)]
    assert await publish_batch(relay.nc, chain, timeout=5) == [ack.seq + 1, ack.seq + 2, ack.seq + 3]
    woken = await relay.nc.subscribe(deployment.subjects.outbox_committed)
    await settled(relay.nc)
    staging = await deployment.connect(Service.STAGING.value)
    await staging.nc.publish(deployment.subjects.outbox_committed, b"")
    assert (await woken.next_msg(timeout=5)).data == b""
    relay.clean()
    await backend_refused(deployment, relay, Service.RELAY)
    await relay.publish_refused(projection_pull(deployment))
    await relay.publish_refused(f"$JS.API.STREAM.DELETE.{deployment.stream}")
    await relay.subscribe_refused(f"{inbox_prefix(deployment.settings, GATEWAY)}.>")


async def check_webhooks(deployment: Deployment) -> None:
    webhooks = await check_backend(deployment, Service.WEBHOOKS)
    js = webhooks.nc.jetstream()
    last = (await js.stream_info(deployment.stream)).state.last_seq  # a new webhook's starting point
    assert last >= 1
    # The first event after a position: how a replica tells whether a batch's predecessor is still out.
    assert (await js.get_msg(deployment.stream, seq=1, subject=f"{deployment.settings.nats_prefix}.events.>",
                             next=True)).seq >= 1
    await pulls_its_durable(deployment, webhooks, WEBHOOKS_CONSUMER)
    webhooks.clean()
    await backend_refused(deployment, webhooks, Service.WEBHOOKS)
    await webhooks.publish_refused(projection_pull(deployment))
    await webhooks.publish_refused(f"$JS.API.STREAM.DELETE.{deployment.stream}")
    await webhooks.publish_refused(f"$JS.API.STREAM.PURGE.{deployment.stream}")
    await webhooks.publish_refused(f"{deployment.settings.nats_prefix}.events.case.c1.ledger.changed")


CHECKS: dict[str, Callable[[Deployment], Awaitable[None]]] = {
    GATEWAY: check_gateway, OPERATOR: check_operator, SUBSCRIBER: check_subscriber,
    Service.STAGING.value: check_staging, Service.REVIEW.value: check_review,
    Service.THESIS_DELTA.value: check_thesis_delta, Service.PROJECTION.value: check_projection,
    Service.RELAY.value: check_relay, Service.WEBHOOKS.value: check_webhooks,
}


@pytest.mark.parametrize("role", roles())
async def test_a_role_may_do_what_the_product_does_as_it_and_is_refused_a_sample_of_the_rest(deployment, role):
    assert role in CHECKS, f"the NATS role {role!r} has no check here: add what it does and must not do"
    await CHECKS[role](deployment)


async def test_the_suites_own_nats_refuses_strangers_and_admits_a_deployments_roles(servers):
    """Every test stack runs on this server (tests/auth_nats.py): authentication is on, as under `up`."""
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(servers.nats_url, allow_reconnect=False, max_reconnect_attempts=0)
    settings = await servers.nats_deployment()
    connection = await nats.connect(**nats_options(settings, SUBSCRIBER, name="roles-suite").client(),
                                    allow_reconnect=False)
    try:
        assert connection.is_connected
    finally:
        await connection.close()
