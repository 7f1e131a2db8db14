"""Who may do what on NATS: the role → permissions table, the embedded server's users, every client's connect options.

Every process connects as one role. The table below is the only statement of what a role may publish and
subscribe to; the embedded server's configuration is rendered from it, and deploy/nats-permissions.md
repeats it for an external NATS. Each Threadline role reads replies on its own inbox prefix
(`_INBOX_<prefix>_<role>`), so no role can read another's replies; a downstream `subscriber` keeps the
standard `_INBOX` prefix.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from faststream.nats import NatsSecurity
from faststream.nats.security import NatsCredentials, NatsUserPassword

from shared.logging import get_logger
from shared.nats_client import DRAIN_SECONDS
from shared.settings import Settings
from shared.streams import LEGACY_PROJECTION_CONSUMER, WEBHOOKS_CONSUMER, projection_stream_name
from shared.subjects import BACKEND_SERVICES, Command, Service, Subjects

log = get_logger(__name__)

GATEWAY = Service.GATEWAY.value
OPERATOR = "operator"  # the CLI: migrate, case create, events tail, bench, demo load, and `up` itself
SUBSCRIBER = "subscriber"  # a downstream system: reads the event stream, nothing else

# The durable consumers of the event stream that belong to a service: only that service (and the operator,
# who provisions them) may pull from, acknowledge on, recreate or delete them. (The projection's consumers are on a
# stream of its own, which only it and the operator may touch; the name it had on the event stream stays denied.)
DURABLE_CONSUMERS: dict[Service, str] = {Service.PROJECTION: LEGACY_PROJECTION_CONSUMER,
                                         Service.WEBHOOKS: WEBHOOKS_CONSUMER}
# Commands a backend service sends to another one.
CALLS: dict[Service, tuple[Command, ...]] = {Service.THESIS_DELTA: (Command.GET_COMPANY_CONTEXT,)}
# JetStream API requests a backend service makes besides pulling from its durable consumer ("{stream}" is
# the deployment's stream): webhooks reads the stream's last sequence when a webhook is registered.
# The webhooks service reads the stream's info (a new webhook's starting point) and gets the first event after
# its position (services/webhooks/consumer.py: whether a predecessor of a batch is still out with a replica).
JETSTREAM_CALLS: dict[Service, tuple[str, ...]] = {
    Service.WEBHOOKS: ("$JS.API.STREAM.INFO.{stream}", "$JS.API.STREAM.MSG.GET.{stream}"),
    Service.RELAY: ("$JS.API.STREAM.INFO.{stream}",),  # whether the stream takes atomic batches
}

USERS_FILE = Path("nats") / "users.json"  # under the data dir: the embedded server's passwords, mode 0600


def roles() -> list[str]:
    return [GATEWAY, OPERATOR, SUBSCRIBER, *(s.value for s in BACKEND_SERVICES)]


@dataclass(frozen=True)
class Permissions:
    publish: list[str] = field(default_factory=list)
    publish_deny: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)
    allow_responses: bool = False

    def server_config(self) -> dict[str, Any]:
        """The `permissions` map of one user in nats-server's configuration."""
        publish: dict[str, Any] = {"allow": self.publish or []}
        if self.publish_deny:
            publish["deny"] = self.publish_deny
        config: dict[str, Any] = {"subscribe": {"allow": self.subscribe}}
        if self.publish or not self.allow_responses:
            config["publish"] = publish
        if self.allow_responses:
            config["allow_responses"] = True  # replies to the requests it received; nothing else
        return config


def inbox_prefix(settings: Settings, role: str) -> str:
    return SUBSCRIBER_INBOX if role == SUBSCRIBER else f"_INBOX_{settings.nats_prefix}_{role}"


SUBSCRIBER_INBOX = "_INBOX"


def _stream_reader(stream: str, prefix: str) -> Permissions:
    """Read the event stream: create and use one's own consumers, never a service's durable one."""
    api = "$JS.API"
    publish = [
        f"{api}.INFO", f"{api}.STREAM.NAMES", f"{api}.STREAM.INFO.{stream}", f"{api}.STREAM.MSG.GET.{stream}",
        f"{api}.CONSUMER.CREATE.{stream}", f"{api}.CONSUMER.CREATE.{stream}.>",
        f"{api}.CONSUMER.DURABLE.CREATE.{stream}.*", f"{api}.CONSUMER.INFO.{stream}.*",
        f"{api}.CONSUMER.DELETE.{stream}.*", f"{api}.CONSUMER.MSG.NEXT.{stream}.*",
        f"{api}.CONSUMER.NAMES.{stream}", f"{api}.CONSUMER.LIST.{stream}",
        f"$JS.ACK.{stream}.>",  # acknowledgements of the consumer's messages
        f"$JS.FC.{stream}.>",  # flow-control replies of push (ordered) consumers
    ]
    deny = []
    for durable in DURABLE_CONSUMERS.values():
        deny += [f"{api}.CONSUMER.CREATE.{stream}.{durable}", f"{api}.CONSUMER.CREATE.{stream}.{durable}.>",
                 f"{api}.CONSUMER.DURABLE.CREATE.{stream}.{durable}", f"{api}.CONSUMER.DELETE.{stream}.{durable}",
                 f"{api}.CONSUMER.MSG.NEXT.{stream}.{durable}", f"$JS.ACK.{stream}.{durable}.>"]
    return Permissions(publish=publish, publish_deny=deny, subscribe=[f"{prefix}.events.>"])


def permissions(role: str, settings: Settings) -> Permissions:
    """The one table: what `role` may publish and subscribe to in the deployment `settings` describe."""
    subjects = Subjects(settings.nats_prefix)
    prefix, stream = settings.nats_prefix, settings.stream_name
    inbox = f"{inbox_prefix(settings, role)}.>"
    reader = _stream_reader(stream, prefix)
    if role == SUBSCRIBER:
        return Permissions(reader.publish, reader.publish_deny, [*reader.subscribe, inbox])
    commands = [f"{prefix}.cmd.>", f"{prefix}.health.>"]
    if role == GATEWAY:
        # The gateway sends every command and health ping, and reads the stream for the HTTP event feed.
        return Permissions([*commands, *reader.publish], reader.publish_deny, [*reader.subscribe, inbox])
    if role == OPERATOR:
        # What the gateway may, plus provisioning the stream and its durable consumers (no deny list).
        api = "$JS.API"
        provisioning = [f"{api}.INFO", f"{api}.STREAM.NAMES", f"{api}.STREAM.LIST", f"{api}.STREAM.*.{stream}",
                        f"{api}.STREAM.MSG.GET.{stream}", f"{api}.CONSUMER.*.{stream}",
                        f"{api}.CONSUMER.*.{stream}.>", f"{api}.CONSUMER.DURABLE.CREATE.{stream}.*",
                        f"{api}.CONSUMER.MSG.NEXT.{stream}.*", f"$JS.ACK.{stream}.>", f"$JS.FC.{stream}.>"]
        projection = projection_stream_name(settings)  # the projection's stream and its partitions' consumers
        provisioning += [f"{api}.STREAM.*.{projection}", f"{api}.CONSUMER.*.{projection}",
                         f"{api}.CONSUMER.*.{projection}.>", f"{api}.CONSUMER.DURABLE.CREATE.{projection}.*"]
        return Permissions([*commands, *provisioning], [], [*reader.subscribe, inbox])
    service = Service(role)
    if service not in BACKEND_SERVICES:
        raise ValueError(f"no NATS role {role!r}")
    queue = subjects.queue(service)
    subscribe = [f"{prefix}.cmd.{service.value}.> {queue}", f"{subjects.health(service)} {queue}", inbox]
    publish = [subjects.command(command) for command in CALLS.get(service, ())]
    if service is Service.RELAY:
        publish.append(subjects.events_wildcard)  # the outbox, relayed; JetStream's acks arrive at the inbox
        subscribe.append(subjects.outbox_committed)  # every relay hears it; the leader acts on it
    else:
        publish.append(subjects.outbox_committed)  # after a commit that stored events: wake the relay
    if service is Service.PROJECTION:  # its partitions' consumers, on its own stream
        projection = projection_stream_name(settings)
        publish += [f"$JS.API.CONSUMER.MSG.NEXT.{projection}.*", f"$JS.API.CONSUMER.INFO.{projection}.*",
                    f"$JS.ACK.{projection}.>"]
    elif service in DURABLE_CONSUMERS:
        durable = DURABLE_CONSUMERS[service]
        publish += [f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}", f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
                    f"$JS.ACK.{stream}.{durable}.>"]
    publish += [subject.format(stream=stream) for subject in JETSTREAM_CALLS.get(service, ())]
    return Permissions(publish=publish, subscribe=subscribe, allow_responses=True)


# The embedded server's users -------------------------------------------------------------------------


def embedded_passwords(data_dir: Path, url: str) -> dict[str, str]:
    """The embedded server's password per role, created once per data dir (so handed-out URLs stay valid)."""
    path = data_dir / USERS_FILE
    known = json.loads(path.read_text()) if path.exists() else {}
    passwords = known.get("passwords", {})
    missing = [role for role in roles() if role not in passwords]
    if missing or known.get("url") != url:
        passwords.update({role: secrets.token_urlsafe(24) for role in missing})
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_private(path, json.dumps({"url": url, "passwords": passwords}, indent=2))
    return passwords


def server_users(settings: Settings, passwords: dict[str, str],
                 names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The `authorization.users` of nats-server's configuration: one user per role, with its permissions.

    A user is named for its role; `names` renames them where one server holds several deployments' users
    (the test suite's server: a user name is unique in a server)."""
    return [{"user": (names or {}).get(role, role), "password": passwords[role],
             "permissions": permissions(role, settings).server_config()} for role in roles()]


def user_url(url: str, role: str, password: str) -> str:
    """`url` with one role's credentials in it (what a downstream subscriber is given)."""
    parts = urlsplit(url)
    return parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}").geturl()


def _write_private(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    temporary.replace(path)


# Every client's connect options ------------------------------------------------------------------------


@dataclass(frozen=True)
class NatsOptions:
    """How one process of one role connects: the server, its credentials, TLS and its inbox prefix."""

    url: str
    name: str
    inbox_prefix: str
    user: str | None = None
    password: str | None = None
    credentials: str | None = None
    tls: ssl.SSLContext | None = None

    def _callbacks(self) -> dict[str, Any]:
        """Connection events as structured log lines (nats-py would log a traceback per failed reconnect).

        nats-py reports a disconnect for a deliberate close too (a command done, a process stopping), then at
        once the close: a disconnect is judged on the next turn of the loop, a warning only when no close
        followed it (the connection was lost, and the client reconnects)."""
        last: dict[str, object] = {}

        async def on_error(error: Exception) -> None:
            log.warning("nats_connection_error", connection=self.name, error=repr(error))

        async def on_disconnected() -> None:
            last["disconnect"] = disconnect = object()
            asyncio.get_running_loop().call_soon(judge, disconnect)

        def judge(disconnect: object) -> None:
            if last.get("closed") is disconnect:
                log.debug("nats_closed", connection=self.name)
            else:
                log.warning("nats_disconnected", connection=self.name)

        async def on_closed() -> None:
            last["closed"] = last.get("disconnect")

        async def on_reconnected() -> None:
            log.info("nats_reconnected", connection=self.name)

        return {"error_cb": on_error, "disconnected_cb": on_disconnected, "closed_cb": on_closed,
                "reconnected_cb": on_reconnected}

    def client(self) -> dict[str, Any]:
        """Keyword arguments of `nats.connect`."""
        options: dict[str, Any] = {"servers": [self.url], "name": self.name, "inbox_prefix": self.inbox_prefix,
                                   "drain_timeout": DRAIN_SECONDS, **self._callbacks()}
        if self.credentials:
            options["user_credentials"] = self.credentials
        if self.user:
            options.update(user=self.user, password=self.password)
        if self.tls is not None:
            options["tls"] = self.tls
        return options

    def broker(self) -> dict[str, Any]:
        """Keyword arguments of FastStream's `NatsBroker` (credentials go in its `security` object)."""
        security: NatsSecurity | None = None
        if self.credentials:
            security = NatsCredentials.from_file(self.credentials, ssl_context=self.tls)
        elif self.user:
            security = NatsUserPassword(self.user, self.password or "", ssl_context=self.tls)
        elif self.tls is not None:
            security = NatsSecurity(ssl_context=self.tls)
        return {"servers": [self.url], "name": self.name, "inbox_prefix": self.inbox_prefix, "security": security,
                "drain_timeout": DRAIN_SECONDS, **self._callbacks()}


def nats_options(settings: Settings, role: str, *, name: str) -> NatsOptions:
    """The one place any NATS client gets its connect options.

    THREADLINE_NATS_CREDS or THREADLINE_NATS_USER/PASSWORD (an external NATS) win; else, when the URL is the
    embedded server's of the data dir, the role's own user; else a plain connection (an open NATS).
    """
    url = settings.resolved_nats_url()
    options: dict[str, Any] = {"url": url, "name": name, "inbox_prefix": inbox_prefix(settings, role)}
    if settings.nats_tls_ca is not None:
        options["tls"] = ssl.create_default_context(cafile=str(settings.nats_tls_ca))
    if settings.nats_creds is not None:
        options["credentials"] = str(settings.nats_creds)
    elif settings.nats_user:
        password = settings.nats_password.get_secret_value() if settings.nats_password else ""
        options.update(user=settings.nats_user, password=password)
    elif (embedded := _embedded_user(settings, role, url)) is not None:
        options.update(user=embedded[0], password=embedded[1])
    return NatsOptions(**options)


def _embedded_user(settings: Settings, role: str, url: str) -> tuple[str, str] | None:
    """The role's user name and password in the users file of the data dir, when it is for the server at `url`."""
    path = settings.data_dir / USERS_FILE
    if urlsplit(url).username or not path.exists():
        return None
    known = json.loads(path.read_text())
    if known.get("url") != url or role not in known["passwords"]:
        return None
    return known.get("users", {}).get(role, role), known["passwords"][role]


def markdown_table(settings: Settings) -> str:
    """The table as deploy/nats-permissions.md shows it (a test keeps the two the same)."""
    lines = ["| role | publish | publish denied | subscribe | replies |", "| --- | --- | --- | --- | --- |"]
    for role in roles():
        granted = permissions(role, settings)
        cell = lambda subjects: "<br>".join(f"`{s}`" for s in subjects) or "—"  # noqa: E731
        lines.append(f"| `{role}` | {cell(granted.publish)} | {cell(granted.publish_deny)} | {cell(granted.subscribe)}"
                     f" | {'allow_responses' if granted.allow_responses else '—'} |")
    return "\n".join(lines)
