"""One configuration of `threadline bench scaleout`: `threadline up` with the point's replicas on embedded servers
in a scratch data dir, every process moved into a CPU group of its own, and stopped with nothing left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psutil

from services.cli.bench.cgroups import CpuGroups
from services.cli.bench.cpu import embedded_servers
from services.cli.bench.scaleout_plan import Plan, Point, is_replica_of
from services.cli.embedded import free_port
from shared.errors import Unavailable
from shared.settings import RUNTIME_FILE, Settings

STARTUP_SECONDS = 120.0
STOP_SECONDS = 30.0
# Settings that would point `up` at someone else's servers, or this bench's own system elsewhere.
NOT_INHERITED = ("THREADLINE_DATABASE_URL", "THREADLINE_NATS_URL", "THREADLINE_URL", "THREADLINE_RELAY_DATABASE_URL",
                 "THREADLINE_REPLICAS", "THREADLINE_HTTP_PORT", "THREADLINE_DATA_DIR", "THREADLINE_RELAY_PARTITIONS",
                 "THREADLINE_DB_POOL_SIZE")


class ConfinedSystem:
    """`up` for one point, each process in its CPU group; `groups` names them as the report does."""

    def __init__(self, plan: Plan, point: Point, data_dir: Path, groups: CpuGroups) -> None:
        self.plan = plan
        self.point = point
        self.data_dir = data_dir
        self.groups = groups
        self.process: asyncio.subprocess.Process | None = None
        self.runtime: dict[str, Any] = {}
        self.members: dict[str, list[int]] = {}

    @property
    def settings(self) -> Settings:
        """This system's settings, whatever the environment says (runtime.json once it is up)."""
        runtime = self.runtime or {}
        return Settings(data_dir=self.data_dir, url=runtime.get("httpUrl"), database_url=runtime.get("databaseUrl"),
                        nats_url=runtime.get("natsUrl"))

    async def start(self, attempts: int = 3) -> ConfinedSystem:
        """Up and confined; a start that times out on a busy machine is tried again on the same data dir."""
        for attempt in range(1, attempts + 1):
            try:
                await self._start_once()
                break
            except Unavailable:
                await self.stop()
                if attempt == attempts:
                    raise
        self._confine()
        return self

    async def _start_once(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        env.update({"THREADLINE_HTTP_PORT": str(free_port()), "THREADLINE_LOG_LEVEL": "WARNING",
                    # Two pooled connections (four at a burst) per process keep two dozen processes under the
                    # embedded PostgreSQL's 100 connections; one replica under its quota never needs more.
                    "THREADLINE_DB_POOL_SIZE": "2",
                    "THREADLINE_RELAY_PARTITIONS": str(self.point.partitions)})
        log = open(self.data_dir / "up.log", "ab")  # noqa: SIM115 - the child owns it
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.cli.main", "up", "--no-demo", "--data-dir", str(self.data_dir),
            "--replicas", self.point.replicas_argument() or "staging=1", env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True, preexec_fn=self.groups.leave)  # Ctrl-C reaches the bench, which stops `up` itself
        log.close()
        await self._ready()

    async def _ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        path = self.data_dir / RUNTIME_FILE
        async with httpx2.AsyncClient(timeout=2) as http:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.returncode is not None:
                    raise Unavailable(f"`threadline up` exited with {self.process.returncode}: {self._log_tail()}")
                if path.exists():
                    with contextlib.suppress(ValueError, OSError):
                        runtime = Settings(data_dir=self.data_dir).runtime()
                        services = runtime.get("services") or {}
                        if len(services) == self.point.processes and await _all_ready(http, runtime):
                            self.runtime = runtime
                            return
                await asyncio.sleep(0.3)
        raise Unavailable(f"the system did not come up within {STARTUP_SECONDS:.0f} s: {self._log_tail()}")

    def _confine(self) -> None:
        """Each service process, `up`, NATS and PostgreSQL (with every backend) into a group of its own."""
        quotas = self.plan.quotas
        assert self.process is not None
        # `up` and the starter its services are forked from: neither does any work once the system is up.
        self.members = {"up": [self.process.pid, *([self.runtime["starter"]["pid"]] if "starter" in self.runtime else [])]}
        for name, entry in self.runtime["services"].items():
            self.members[name] = [entry["pid"]]
        for name, processes in embedded_servers(self.process.pid, self.data_dir).items():
            self.members[name] = [p.pid for p in processes]
        for name, pids in self.members.items():
            self.groups.make(name, quotas.get(name, quotas["service"]))
            for pid in pids:
                if name == "up":
                    self.groups.add(name, pid)  # its children have groups of their own
                else:
                    self.groups.add_tree(name, pid)

    def pids_of(self, service: str) -> list[int]:
        return [pid for name, pids in self.members.items() if is_replica_of(name, service) for pid in pids]

    def pause(self, service: str) -> None:
        for pid in self.pids_of(service):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self, service: str) -> None:
        for pid in self.pids_of(service):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    @contextlib.contextmanager
    def paused(self, service: str) -> Iterator[None]:
        """The service's processes stopped (SIGSTOP) for the block, resumed however it ends."""
        self.pause(service)
        try:
            yield
        finally:
            self.resume(service)

    async def stop(self) -> None:
        """Stop `up` (it stops its children) and kill whatever still runs in the run's groups."""
        if self.process is None:
            return
        for service in self.point.replicas:  # a paused process would not hear `up` stop it
            self.resume(service)
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), STOP_SECONDS)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()
        kill_leftovers(self.groups)

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.data_dir / "up.log").read_text()[-1500:]
        return ""


def kill_leftovers(groups: CpuGroups, wait: float = 10.0) -> None:
    """Any process still in the run's groups but the bench itself: SIGKILL, then wait for it to go."""
    others = [pid for pid in groups.pids() if pid != os.getpid()]
    for pid in others:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while any(_alive(pid) for pid in others) and time.monotonic() < deadline:
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def _all_ready(http: httpx2.AsyncClient, runtime: dict[str, Any]) -> bool:
    urls = [runtime["httpUrl"], *(entry["healthUrl"].removesuffix("/healthz") for entry in runtime["services"].values())]
    try:
        answers = await asyncio.gather(*(http.get(f"{url}/readyz") for url in urls))
    except httpx2.HTTPError:
        return False
    return all(a.status_code == 200 for a in answers)
