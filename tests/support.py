"""Test support: real servers (a test-started NATS with authentication; the machine's PostgreSQL, else an
embedded one), isolated deployments, the running stack."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import asyncpg
import httpx2
import nats
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from services.cli.embedded import EmbeddedPostgres, free_port
from services.gateway.app import create_app, server_config
from services.gateway.auth import TokenStore
from services.registry import app_module
from shared.bootstrap import prepare
from shared.db.session import Database
from shared.errors import Unavailable
from shared.messaging import ServiceClient, create_broker
from shared.nats_auth import OPERATOR, SUBSCRIBER, USERS_FILE, nats_options, user_url
from shared.service import run_service
from shared.settings import Settings
from shared.streams import projection_stream_name
from shared.subjects import BACKEND_SERVICES, Subjects
from tests.auth_nats import AuthNats, claim
from tests.processes import clean_environment

T = TypeVar("T")

# Where the tests look for the machine's PostgreSQL; point them at an unused port to force an embedded one.
# NATS is always the worker's own, with `up`'s users and permissions (tests/auth_nats.py).
TEST_DATABASE_URL = os.environ.get("THREADLINE_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
TEST_LOG_LEVEL = os.environ.get("THREADLINE_TEST_LOG_LEVEL", "WARNING")


# One TLS context for every HTTP client the tests make. httpx2 otherwise builds a new one for each client and loads
# the CA bundle into it (about 25 ms of CPU): 12% of the test processes' own CPU went there (py-spy), for servers that
# speak plain HTTP on loopback.
TLS = httpx2.create_ssl_context()

async def connect_nats(settings: Settings, role: str = OPERATOR, **extra: Any) -> nats.NATS:
    """A raw nats-py connection to the deployment, as `role` (the operator: it may read and provision)."""
    return await nats.connect(**nats_options(settings, role, name=f"threadline-tests-{role}").client(), **extra)


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Servers:
    """A NATS server with JetStream and authentication, a PostgreSQL server the tests may use (and their origin).

    `nats_dir` is the NATS server's folder: a deployment registered there gets `up`'s users (tests/auth_nats.py).
    `claim` replaces that registry where the server is another (the three-server cluster of tests/nats_cluster.py):
    it writes a new deployment's users file into the data dir it is given and returns the subject prefix."""

    nats_url: str
    admin_database_url: str
    nats_dir: Path | None = None
    embedded: list[Any] = field(default_factory=list)
    claim: Callable[[Path], str] | None = None

    @classmethod
    async def find_or_start(cls, scratch: Path) -> Servers:
        nats_server = AuthNats(scratch / "nats")
        servers = cls(await nats_server.start(), TEST_DATABASE_URL, scratch / "nats", [nats_server])
        if not (_reachable(TEST_DATABASE_URL, 5432) and await _postgres_answers(TEST_DATABASE_URL)):
            embedded = EmbeddedPostgres(scratch / "postgres", database="postgres")
            servers.admin_database_url = await embedded.start()
            servers.embedded.append(embedded)
        return servers

    @property
    def origin(self) -> str:
        postgres = "embedded" if any(isinstance(e, EmbeddedPostgres) for e in self.embedded) else "the machine's"
        return (f"NATS with authentication: a test-started nats-server, each deployment's users and permissions "
                f"those of `threadline up`; {postgres} PostgreSQL")

    def claim_prefix(self, data_dir: Path) -> str:
        """A subject prefix of its own for a new deployment, with `up`'s NATS users on this server for it (their
        names and passwords written to `data_dir`'s nats/users.json)."""
        if self.claim is not None:
            return self.claim(data_dir)
        if self.nats_dir is None:
            raise RuntimeError("a deployment needs NATS users: give Servers a nats_dir or a claim")
        return claim(self.nats_dir, data_dir)

    async def nats_deployment(self) -> Settings:
        """Settings of a deployment that has NATS users and no database (a test of the NATS path alone)."""
        data_dir = Path(tempfile.mkdtemp(prefix="threadline-test-"))
        return Settings(nats_url=self.nats_url, nats_prefix=self.claim_prefix(data_dir), data_dir=data_dir,
                        log_level=TEST_LOG_LEVEL)

    async def stop(self) -> None:
        for server in reversed(self.embedded):
            await server.stop()

    async def create_database(self) -> str:
        name = f"tl_test_{secrets.token_hex(5)}"
        connection = await asyncpg.connect(self.admin_database_url)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        return _with_database(self.admin_database_url, name)

    async def drop_database(self, url: str) -> None:
        name = _database_of(url)
        connection = await asyncpg.connect(self.admin_database_url)
        try:
            await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await connection.close()

    async def delete_stream(self, settings: Settings) -> None:
        """Delete the deployment's streams (as its operator): the projection's, then the event stream it sources."""
        try:
            connection = await connect_nats(settings)
        except Exception:  # noqa: BLE001 - the server is gone, and the streams with it
            return
        try:
            for stream in (projection_stream_name(settings), settings.stream_name):
                try:
                    await connection.jetstream().delete_stream(stream)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        finally:
            await connection.close()


async def _postgres_answers(url: str) -> bool:
    try:
        connection = await asyncpg.connect(url, timeout=2)
    except Exception:  # noqa: BLE001
        return False
    await connection.close()
    return True


def _with_database(url: str, name: str) -> str:
    parsed = urlparse(url)
    return parsed._replace(path=f"/{name}").geturl()


def _database_of(url: str) -> str:
    return urlparse(url).path.lstrip("/")


async def new_deployment(servers: Servers, **overrides: Any) -> Settings:
    """Settings for a fresh, isolated deployment: its own database, subject prefix and stream."""
    database_url = await servers.create_database()
    data_dir = Path(tempfile.mkdtemp(prefix="threadline-test-"))
    settings = Settings(**{
        "database_url": database_url,
        "nats_url": servers.nats_url,
        "nats_prefix": servers.claim_prefix(data_dir),
        "data_dir": data_dir,
        "log_level": TEST_LOG_LEVEL,
        "log_format": "json",
        "secret": "test-secret-" + secrets.token_hex(8),
        "relay_poll_interval": 0.2,
        "auth_cache_seconds": 0,
        # Two test workers share the machine's PostgreSQL: their stacks' pools stay under its default
        # max_connections (100) together.
        "db_pool_size": 3,
        # Receivers started by the tests listen on loopback, as under `up`; retries come quickly.
        "webhook_allow_private": True,
        "webhook_retry_base_seconds": 0.2,
        "webhook_retry_max_delay_seconds": 1.0,
        "webhook_poll_interval": 0.2,
        **overrides,
    })
    await prepare(settings)
    return settings


async def remove_deployment(servers: Servers, settings: Settings) -> None:
    await servers.delete_stream(settings)
    await servers.drop_database(settings.resolved_database_url())


@dataclass
class Stack:
    """The backend services and the gateway, running in this process against real NATS/PostgreSQL."""

    settings: Settings
    http_url: str = ""
    tokens: dict[str, str] = field(default_factory=dict)
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task] = field(default_factory=list)
    gateway_server: uvicorn.Server | None = None
    broker: Any = None
    client: ServiceClient | None = None
    db: Database | None = None

    async def start(self, *, gateway: bool = True, services: tuple = BACKEND_SERVICES,
                    background: dict | None = None) -> Stack:
        """Start services in this process; `background` replaces a service's background jobs (the relay)."""
        for service in services:
            module = app_module(service)
            jobs = (background or {}).get(service, module.BACKGROUND)
            self.tasks.append(
                asyncio.create_task(
                    run_service(service, self.settings, module.build_router, background=jobs,
                                stop=self.stop_event, own_process=False),
                    name=f"service-{service.value}",
                )
            )
        self.broker = create_broker(self.settings, role=OPERATOR, name="threadline-tests")
        await self.broker.connect()
        self.client = ServiceClient(self.broker, Subjects(self.settings.nats_prefix), 10.0)
        for service in services:
            await self._wait_for(service)
        self.db = Database.from_url(self.settings.resolved_database_url(), pool_size=4,
                                    transaction_pooler=self.settings.database_transaction_pooler)
        store = TokenStore(self.db)
        for role in ("admin", "reviewer", "agent"):
            self.tokens[role] = (await store.issue(role=role, name=role, created_by="tests"))["token"]
        if gateway:
            port = free_port()
            settings = self.settings.model_copy(update={"http_port": port, "http_host": "127.0.0.1"})
            config = server_config(create_app(settings), settings)  # as `threadline gateway` serves
            self.gateway_server = uvicorn.Server(config)
            self.gateway_server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
            self.tasks.append(asyncio.create_task(self.gateway_server.serve(), name="gateway"))
            self.http_url = f"http://127.0.0.1:{port}"
            for _ in range(200):
                if self.gateway_server.started:
                    break
                await asyncio.sleep(0.05)
        return self

    async def _wait_for(self, service: Any) -> None:
        for _ in range(200):
            try:
                await self.client.ping(service, timeout=0.25)
                return
            except Exception:  # noqa: BLE001
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{service} did not start")

    async def stop(self) -> None:
        if self.gateway_server is not None:
            self.gateway_server.should_exit = True
        self.stop_event.set()
        _, pending = await asyncio.wait(self.tasks, timeout=60)
        if pending:
            for task in pending:
                task.print_stack()
            raise RuntimeError(f"did not stop within 60 s: {[t.get_name() for t in pending]}")
        if self.broker is not None:
            await self.broker.stop()
        if self.db is not None:
            await self.db.dispose()

    async def issue_token(self, role: str, name: str, case_id: str | None = None) -> str:
        return (await TokenStore(self.db).issue(role=role, name=name, created_by="tests", case_id=case_id))["token"]

    def environment(self) -> dict[str, str]:
        """The environment a `threadline` subprocess needs to reach this deployment."""
        return clean_environment(
            THREADLINE_DATABASE_URL=self.settings.resolved_database_url(),
            THREADLINE_NATS_URL=self.settings.resolved_nats_url(),
            THREADLINE_NATS_PREFIX=self.settings.nats_prefix,
            THREADLINE_DATA_DIR=str(self.settings.data_dir),
            THREADLINE_LOG_LEVEL="INFO",
            THREADLINE_RELAY_POLL_INTERVAL="0.2",
        )

    def subscriber_url(self) -> str:
        """The NATS URL with the subscriber's credentials in it, as `up` hands it to a downstream system."""
        known = json.loads((self.settings.data_dir / USERS_FILE).read_text())
        return user_url(self.settings.resolved_nats_url(), known.get("users", {}).get(SUBSCRIBER, SUBSCRIBER),
                        known["passwords"][SUBSCRIBER])

    def api(self, role: str = "reviewer", token: str | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            base_url=self.http_url,
            headers={"Authorization": f"Bearer {token or self.tokens[role]}"},
            timeout=30,
            verify=TLS,
        )

    @asynccontextmanager
    async def agent(self, token: str | None = None):
        """A real MCP client session over Streamable HTTP, authenticated with an agent token."""
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token or self.tokens['agent']}"}, timeout=30,
                                  verify=TLS)
        async with http, Client(streamable_http_client(f"{self.http_url}/mcp", http_client=http)) as client:
            yield client


async def repeating(attempt: Callable[[], Awaitable[T]], *, seconds: float = 120.0) -> T:
    """`attempt()` again while it is answered `unavailable`, as the answer tells a client to: the call may have
    been applied and a repeat is harmless (it comes back `replayed`). For tests whose own load starves the machine
    they share (a call that waited out the 10 s request timeout), never for a test of an outage's answer."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            return await attempt()
        except Unavailable:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)
