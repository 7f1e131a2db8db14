"""`threadline up`: the whole system in the foreground, on one machine.

Starts embedded NATS and PostgreSQL unless URLs are configured, migrates, starts every service as
its own process, waits until each answers, prints where everything is, and on SIGINT/SIGTERM stops
the children and the embedded servers in order. Every child is supervised, the embedded servers
included: one that dies is restarted on the same port and data, after a pause that doubles with each
death and starts small again once the child has run a healthy minute.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx2

from services.cli.embedded import (
    EmbeddedNats,
    EmbeddedPostgres,
    PortTaken,
    bind_refusal,
    free_port,
    missing_embedded,
    port_holder,
)
from services.cli.supervision import (
    HEALTHY_SECONDS,
    RESTART_FIRST_SECONDS,
    RESTART_MAX_SECONDS,
    Child,
    Starter,
    Supervised,
    children_of,
    last_error,
)
from shared.bootstrap import prepare
from shared.errors import ThreadlineError
from shared.logging import get_logger
from shared.messaging import ServiceClient, create_broker, stop_broker
from shared.nats_auth import OPERATOR, SUBSCRIBER, USERS_FILE, user_url
from shared.settings import CREDENTIALS_FILE, RUNTIME_FILE, Settings, child_environment
from shared.subjects import BACKEND_SERVICES, Service, Subjects

log = get_logger(__name__)

T = TypeVar("T")

STOP_GRACE_SECONDS = 12.0
LOCK_FILE = "up.lock"
__all__ = ["HEALTHY_SECONDS", "RESTART_FIRST_SECONDS", "RESTART_MAX_SECONDS", "StartupError", "Supervised", "up"]


def how_it_ended(code: int | None) -> str:
    """A child's end as an operator reads it: a negative code is the signal that killed it; None, a process
    watched rather than awaited (the embedded PostgreSQL), whose status nobody can know."""
    if code is None:
        return "exited (exit status unknown)"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited (code {code})"

class StartupError(RuntimeError):
    """The system could not start; the message says why and where to look."""


class Interrupted(Exception):
    """Asked to stop while still starting."""


class Supervisor:
    def __init__(self, settings: Settings, data_dir: Path, demo: bool, replicas: dict[Service, int]) -> None:
        self.settings = settings
        self.data_dir = data_dir.resolve()
        self.demo = demo
        self.nats = EmbeddedNats(self.data_dir / "nats", settings.model_copy(update={"data_dir": self.data_dir}))
        self.postgres = EmbeddedPostgres(self.data_dir / "postgres")
        self.children: list[Child] = children_of(replicas)
        self.stopping = asyncio.Event()
        self.env: dict[str, str] = {}
        self.runtime: dict[str, Any] = {}
        self.runtime_written = False
        self.supervised: list[Supervised] = []
        self.starter: Starter | None = None

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        # SIGHUP too: a closed terminal must not leave the services and servers running.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self.stopping.set)
        started = time.monotonic()
        try:
            await self._start(started)
            await self._watch()
            return 0
        except Interrupted:
            return 130
        finally:
            await self._stop()

    def _checkpoint(self) -> None:
        """Between startup steps: give up at once when asked to stop (each step leaves state _stop undoes)."""
        if self.stopping.is_set():
            raise Interrupted

    async def _start(self, started: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_data_dir()
        self._check_port_free()
        if missing := missing_embedded(nats=not self.settings.nats_url, postgres=not self.settings.database_url):
            raise StartupError(missing)
        # The starter's imports (two seconds of CPU) overlap with the servers' start and the migration; the services
        # it forks get their whole environment with each request.
        self.starter = Starter(child_environment({"THREADLINE_DATA_DIR": str(self.data_dir)}), self.data_dir / "logs")
        await self.starter.launch()
        nats_url = self.settings.nats_url or await _starting("start the embedded NATS server", self._start_nats())
        self._checkpoint()
        database_url = self.settings.database_url or await _starting("start the embedded PostgreSQL",
                                                                     self.postgres.start())
        self._checkpoint()
        http_url = f"http://{self.settings.http_host}:{self.settings.http_port}"
        settings = self.settings.model_copy(
            update={"nats_url": nats_url, "database_url": database_url, "data_dir": self.data_dir}
        )
        self.settings = settings
        await _starting(f"migrate the database and provision the event stream (PostgreSQL {redacted(database_url)}, NATS "
                        f"{redacted(nats_url)})", prepare(settings))
        self._checkpoint()
        secret = settings.resolved_secret().decode()
        self.env = child_environment(
            {
                "THREADLINE_NATS_URL": nats_url,
                "THREADLINE_DATABASE_URL": database_url,
                "THREADLINE_DATA_DIR": str(self.data_dir),
                "THREADLINE_SECRET": secret,
                "THREADLINE_HTTP_HOST": settings.http_host,
                "THREADLINE_HTTP_PORT": str(settings.http_port),
                "THREADLINE_NATS_PREFIX": settings.nats_prefix,
                # Gateway replicas share the HTTP port: the kernel spreads connections among them.
                "THREADLINE_HTTP_REUSE_PORT": "1" if self._gateways() > 1 else "0",
                # On one machine the receivers usually are on it too (loopback); an operator may still say no.
                "THREADLINE_WEBHOOK_ALLOW_PRIVATE": "false" if settings.webhook_allow_private is False else "true",
            }
        )
        self.runtime = {"httpUrl": http_url, "natsUrl": nats_url, "databaseUrl": database_url, "pid": os.getpid(),
                        "services": {}}
        for child in self.children:
            child.metrics_port = free_port()
            await self._spawn(child)
        self._write_runtime()
        await self._wait_ready(http_url)
        self._checkpoint()
        credentials, first_start = await self._credentials(nats_url)
        if self.demo:
            from services.cli.demo import load_demo

            await load_demo(settings)
        self._announce(http_url, nats_url, database_url, credentials, first_start, time.monotonic() - started)

    def _lock_data_dir(self) -> None:
        """One `up` per data dir: two would share one embedded PostgreSQL and stop it under each other.
        The lock goes with the process, however it ends."""
        self._lock = open(self.data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held for the process's life
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.seek(0)
            holder = self._lock.read().strip() or "another process"
            raise StartupError(f"{self.data_dir} is in use by another `threadline up` (pid {holder}); stop it, "
                               "or give this one its own --data-dir") from None
        self._lock.truncate(0)
        self._lock.write(str(os.getpid()))
        self._lock.flush()

    async def _start_nats(self) -> str:
        try:
            return await self.nats.start()
        except PortTaken as taken:
            raise StartupError(str(taken)) from None

    def _check_port_free(self) -> None:
        host, port = self.settings.http_host, self.settings.http_port
        if (error := bind_refusal(port, host)) is not None:
            raise StartupError(f"cannot listen on {host}:{port}: {_bind_refusal(error, port)}")

    def _gateways(self) -> int:
        return sum(c.service is Service.GATEWAY for c in self.children)

    async def _spawn(self, child: Child) -> None:
        assert self.starter is not None
        await child.spawn(self.starter, self.env, self.data_dir / "logs")
        self.runtime["starter"] = {"pid": self.starter.pid}  # after a restart of the starter, its new pid
        base = f"http://{self.settings.http_host}:{child.metrics_port}"
        self.runtime.setdefault("services", {})[child.name] = {
            "pid": child.process.pid, "healthUrl": f"{base}/healthz", "metricsUrl": f"{base}/metrics"}

    async def _wait_ready(self, http_url: str, timeout: float = 60.0) -> None:
        """Every backend service answers on NATS, then every process on its own probe port (each replica,
        not just the first to answer) and the gateway's edge say they are ready."""
        deadline = time.monotonic() + timeout
        broker = create_broker(self.settings, role=OPERATOR, name="threadline-up")
        await broker.connect()
        client = ServiceClient(broker, Subjects(self.settings.nats_prefix), 2.0)
        try:
            await self._until_all({service.value: partial(client.ping, service, timeout=0.5)
                                   for service in BACKEND_SERVICES}, deadline, "services did not answer")
        finally:
            await stop_broker(broker)
        async with httpx2.AsyncClient(timeout=2.0) as http:
            async def ready(url: str) -> bool:
                return (await http.get(f"{url}/readyz")).status_code == 200

            probes = {"the gateway": http_url} | {
                child.name: self.runtime["services"][child.name]["healthUrl"].removesuffix("/healthz")
                for child in self.children}
            await self._until_all({name: partial(ready, url) for name, url in probes.items()}, deadline, "not ready")

    async def _until_all(self, checks: dict[str, Callable[[], Awaitable[Any]]], deadline: float, failing: str) -> None:
        """Poll each check until it passes (returns anything but False without raising), or fail naming those left."""
        waiting = dict(checks)
        while waiting:
            self._checkpoint()
            self._check_children()
            for name, check in list(waiting.items()):
                try:
                    if await check() is not False:
                        del waiting[name]
                except Exception:  # noqa: BLE001 - not up yet
                    pass
            if waiting:
                if time.monotonic() > deadline:
                    raise StartupError(f"{failing}: {', '.join(sorted(waiting))}; see {self.data_dir / 'logs'}")
                await asyncio.sleep(0.1)

    def _check_children(self) -> None:
        for child in self.children:
            if child.process is not None and child.process.returncode is not None:
                log_path = self.data_dir / "logs" / f"{child.name}.log"
                said = last_error(log_path)
                raise StartupError(f"{child.name} exited with code {child.process.returncode} while starting"
                                   f"{f': {said}' if said else ''}; see {log_path}")

    async def _credentials(self, nats_url: str) -> tuple[dict[str, str], bool]:
        path = self.data_dir / CREDENTIALS_FILE
        first_start = not path.exists()
        if first_start:
            from services.cli.credentials import issue_first_credentials

            credentials = await issue_first_credentials(self.settings, demo=self.demo)
        else:
            credentials = json.loads(path.read_text())
        subscriber = self._subscriber_url(nats_url)
        if first_start or credentials.get("subscriberNatsUrl") != subscriber:
            if subscriber is None:
                credentials.pop("subscriberNatsUrl", None)
            else:
                credentials["subscriberNatsUrl"] = subscriber
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(credentials, out, indent=2)
        return credentials, first_start

    def _subscriber_url(self, nats_url: str) -> str | None:
        """The embedded NATS's URL with the subscriber's credentials (an external NATS has its own)."""
        if self.nats.process is None:
            return None
        passwords = json.loads((self.data_dir / USERS_FILE).read_text())["passwords"]
        return user_url(nats_url, SUBSCRIBER, passwords[SUBSCRIBER])

    def _announce(self, http_url: str, nats_url: str, database_url: str, credentials: dict[str, str],
                  first_start: bool, elapsed: float) -> None:
        lines = [
            "",
            f"Threadline is up ({elapsed:.1f}s). Ctrl-C stops everything.",
            f"  MCP (Streamable HTTP)  {http_url}/mcp",
            f"  Review UI              {http_url}/ui",
            f"  HTTP API               {http_url}/api/v1  (OpenAPI: {http_url}/api/v1/openapi.json)",
            f"  Health                 {http_url}/healthz  {http_url}/readyz  {http_url}/metrics",
            f"  Events (AsyncAPI)      {http_url}/docs/asyncapi",
            f"  Event feed (SSE)       {http_url}/api/v1/events?caseId=…   webhooks: {http_url}/api/v1/webhooks",
            f"  NATS                   {redacted(nats_url)}   events stream {self.settings.stream_name}"
            + ("   (credentials required: subscriberNatsUrl in credentials.json)" if self.nats.process else ""),
            f"  PostgreSQL             {redacted(database_url)}",
            f"  Data dir               {self.data_dir}   (logs in {self.data_dir / 'logs'})",
        ]
        credentials_path = self.data_dir / CREDENTIALS_FILE
        if first_start:
            lines += [
                "",
                f"First start: bearer tokens (also in {credentials_path}, mode 0600; shown once):",
                f"  admin       {credentials['admin']}",
                f"  reviewer    {credentials['reviewer']}",
                f"  subscriber  {credentials['subscriber']}   (reads the event feed: /api/v1/events)",
                f"  agent       {credentials['agent']}",
            ]
        else:
            lines += ["", f"Bearer tokens: {credentials_path}"]
        print("\n".join(lines), flush=True)

    async def _watch(self) -> None:
        """Until asked to stop: keep every child running, each in its own task (one slow restart delays
        no other)."""
        if self.nats.process is not None:
            self.supervised.append(Supervised("nats-server", self.nats.start, self.nats.wait, lambda: self.nats.pid))
        if self.postgres.server is not None:
            self.supervised.append(Supervised("postgres", self.postgres.start, self.postgres.wait,
                                              lambda: self.postgres.pid))
        for child in self.children:
            self.supervised.append(Supervised(child.name, lambda c=child: self._spawn(c),
                                              lambda c=child: c.process.wait(), lambda c=child: c.process.pid))
        tasks = [asyncio.create_task(self._supervise(s), name=f"supervise-{s.name}") for s in self.supervised]
        try:
            await self.stopping.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _supervise(self, child: Supervised) -> None:
        while not self.stopping.is_set():
            code = await child.wait()
            if self.stopping.is_set():
                return
            pause = child.died(time.monotonic())
            log.warning("child_died", child=child.name, pid=child.pid(), code=code, deaths=child.deaths,
                        restart_in=pause)
            print(f"{child.name} {how_it_ended(code)}; restarting in {pause:.1f}s", file=sys.stderr, flush=True)
            while not await self._pause(pause):
                try:
                    await child.start()
                except Exception as error:  # noqa: BLE001 - logged; tried again after a longer pause
                    pause = child.failed_to_start()
                    log.error("child_restart_failed", child=child.name, error=f"{type(error).__name__}: {error}",
                              restart_in=pause)
                    continue
                child.started_at = time.monotonic()
                log.info("child_restarted", child=child.name, pid=child.pid(), deaths=child.deaths)
                self._write_runtime()
                break

    async def _pause(self, seconds: float) -> bool:
        """Sleep; True when asked to stop meanwhile."""
        try:
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)
            return True
        except TimeoutError:
            return False

    async def _stop(self) -> None:
        print("Stopping Threadline…", flush=True)
        # The edge first (no new work), then the services, then the servers they need.
        await self._stop_children([c for c in self.children if c.service is Service.GATEWAY])
        await self._stop_children([c for c in self.children if c.service is not Service.GATEWAY])
        if self.starter is not None:
            await self.starter.stop()
        await self.nats.stop()
        await self.postgres.stop()
        if self.runtime_written:  # never another `up`'s file
            (self.data_dir / RUNTIME_FILE).unlink(missing_ok=True)
        print("Stopped.", flush=True)

    async def _stop_children(self, children: list[Child]) -> None:
        running = [c.process for c in children if c.process is not None and c.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        if not running:
            return
        await asyncio.wait([asyncio.create_task(p.wait()) for p in running], timeout=STOP_GRACE_SECONDS)
        for process in running:
            if process.returncode is None:
                process.kill()
                await process.wait()

    def _write_runtime(self) -> None:
        """Replace runtime.json at once (readers never see half a file); it lists every service's pid, and the
        embedded servers' (after a restart, the new one's)."""
        embedded = {name: {"pid": pid} for name, pid in (("nats-server", self.nats.pid), ("postgres", self.postgres.pid))
                    if pid is not None}
        if embedded:
            self.runtime["embedded"] = embedded
        path = self.data_dir / RUNTIME_FILE
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # URLs may carry a password
        with os.fdopen(fd, "w") as out:
            json.dump(self.runtime, out, indent=2)
        tmp.replace(path)
        self.runtime_written = True


async def _starting(what: str, step: Awaitable[T]) -> T:
    """Run one startup step; a failure becomes one clear line instead of a traceback."""
    try:
        return await step
    except (StartupError, Interrupted, ThreadlineError):
        raise
    except Exception as exc:  # noqa: BLE001 - anything else is reported, with where to look
        raise StartupError(f"could not {what}: {type(exc).__name__}: {exc}") from exc


def redacted(url: str) -> str:
    """A URL as it may be printed: without its password."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


async def up(settings: Settings, data_dir: Path, demo: bool, replicas: dict[Service, int]) -> int:
    return await Supervisor(settings, data_dir, demo, replicas).run()


def _bind_refusal(error: OSError, port: int) -> str:
    """Why the gateway could not listen, and what to do: said before any service starts."""
    if error.errno == errno.EADDRINUSE:
        return (f"the port is in use by {port_holder(port)} (another `threadline up`?); stop it or set "
                "THREADLINE_HTTP_PORT")
    if error.errno == errno.EADDRNOTAVAIL:
        return ("the host is not an address of this machine; set THREADLINE_HTTP_HOST to one of its own (127.0.0.1, "
                "or 0.0.0.0 for every interface)")
    if error.errno == errno.EACCES:
        return "a port below 1024 needs privileges; set THREADLINE_HTTP_PORT to 1024 or above"
    if isinstance(error, socket.gaierror):
        return "the host name does not resolve; set THREADLINE_HTTP_HOST to an address of this machine"
    return f"{error.strerror or error}; check THREADLINE_HTTP_HOST and THREADLINE_HTTP_PORT"
