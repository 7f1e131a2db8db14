"""What `threadline up` supervises: the service processes (and their replicas), and the restart rules."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.logging import get_logger
from shared.subjects import BACKEND_SERVICES, Service

log = get_logger(__name__)

RESTART_FIRST_SECONDS = 0.5
RESTART_MAX_SECONDS = 30.0
GONE_POLL_SECONDS = 0.2
HEALTHY_SECONDS = 60.0  # a child that ran this long before dying restarts at the first pause again
START_ORDER = [*BACKEND_SERVICES, Service.GATEWAY]


class ReplicasError(ValueError):
    """A replica setting `up` cannot follow."""


def parse_replicas(text: str) -> dict[Service, int]:
    """`staging=2,gateway=2` → {staging: 2, gateway: 2}; services left out run once."""
    counts: dict[Service, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, number = part.partition("=")
        try:
            service = Service(name.strip())
            count = int(number)
        except ValueError:
            raise ReplicasError(f"{part!r} is not <service>=<count> (services: "
                                f"{', '.join(s.value for s in START_ORDER)})") from None
        if not 1 <= count <= 16:
            raise ReplicasError(f"{part!r}: run 1 to 16 processes of a service")
        counts[service] = count
    return counts


def default_replicas(cores: int | None = None) -> dict[Service, int]:
    """What `up` runs when told nothing: one process per service (docs/performance.md has what
    `threadline bench stage` measured for other settings on a two-core machine)."""
    return {}


@dataclass
class Child:
    """One service process `up` runs: `staging`, or `staging-2` for a second replica."""

    service: Service
    replica: int = 1
    metrics_port: int = 0  # its /healthz, /readyz, /metrics; chosen once, kept across restarts
    process: StartedProcess | None = None

    @property
    def name(self) -> str:
        return self.service.value if self.replica == 1 else f"{self.service.value}-{self.replica}"

    async def spawn(self, starter: Starter, env: dict[str, str], log_dir: Path) -> None:
        """Forked by the starter: `threadline serve <service>` with this child's probe port, logging to its file."""
        log_dir.mkdir(exist_ok=True)
        self.process = await starter.spawn(
            self.service.value, {**env, "THREADLINE_METRICS_PORT": str(self.metrics_port)}, log_dir / f"{self.name}.log",
            f"threadline serve {self.service.value} --data-dir {env.get('THREADLINE_DATA_DIR', '')}")

    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


def children_of(replicas: dict[Service, int]) -> list[Child]:
    return [Child(service, n) for service in START_ORDER for n in range(1, replicas.get(service, 1) + 1)]


@dataclass
class Supervised:
    """One thing `up` keeps running: how to start it, how to wait for its end, and its restart record."""

    name: str
    start: Callable[[], Awaitable[Any]]
    wait: Callable[[], Awaitable[int | None]]
    pid: Callable[[], int | None]
    deaths: int = 0
    started_at: float = field(default_factory=time.monotonic)

    def died(self, now: float) -> float:
        """The pause before restarting: doubles with each death, small again after a healthy minute."""
        if now - self.started_at >= HEALTHY_SECONDS:
            self.deaths = 0
        return self.failed_to_start()

    def failed_to_start(self) -> float:
        self.deaths += 1
        return min(RESTART_MAX_SECONDS, RESTART_FIRST_SECONDS * 2 ** (self.deaths - 1))


# `up`'s side of the service starter (services/cli/starter.py, which says how it works).


class StartedProcess:
    """A service process the starter forked, as `up` handles it: the surface of asyncio's Process it uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._ended = asyncio.Event()

    def ended(self, code: int | None) -> None:
        if not self._ended.is_set():
            self.returncode = code
            self._ended.set()

    async def wait(self) -> int | None:
        await self._ended.wait()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Starter:
    """`up`'s side: runs the starter process (again, after it died) and asks it for service processes."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.process: asyncio.subprocess.Process | None = None
        self._answers: asyncio.Queue[StartedProcess | None] = asyncio.Queue()
        self._started: dict[int, StartedProcess] = {}
        self._reader: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._closing = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def launch(self) -> None:
        """Start the starter process; requests wait in its stdin while it imports."""
        from services.cli.embedded import die_with_parent

        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / "starter.log", "ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "services.cli.starter", "--data-dir", self.env.get("THREADLINE_DATA_DIR", ""),
                env=self.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                start_new_session=True, preexec_fn=die_with_parent, limit=1 << 20)
        # Each starter process its own answers and processes: a new one may be running before the last is read out.
        self._answers, self._started = asyncio.Queue(), {}
        self._reader = asyncio.create_task(self._read(self.process, self._answers, self._started),
                                           name="starter-answers")

    async def _read(self, process: asyncio.subprocess.Process, answers: asyncio.Queue[StartedProcess | None],
                    started: dict[int, StartedProcess]) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            message = json.loads(line)
            if "ended" in message:
                if (ended := started.pop(message["ended"], None)) is not None:
                    ended.ended(message["code"])
            else:  # registered here, before the next line: its end may be the very next line
                started[message["pid"]] = StartedProcess(message["pid"])
                await answers.put(started[message["pid"]])
        code = await process.wait()
        if not self._closing:
            log.warning("service_starter_died", pid=process.pid, code=code, services=len(started),
                        log=str(self.log_dir / "starter.log"))
        await answers.put(None)  # a request still waiting for its answer gets none
        # The starter's processes die with it (SIGTERM): each ends when its pid is gone, its status unknown.
        await asyncio.gather(*(_until_gone(orphan) for orphan in started.values()))

    async def spawn(self, service: str, env: dict[str, str], log: Path, title: str) -> StartedProcess:
        async with self._lock:
            if self.process is None or self.process.returncode is not None:
                await self.launch()
            assert self.process is not None and self.process.stdin is not None
            request = {"service": service, "env": env, "log": str(log), "title": title}
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            await self.process.stdin.drain()
            started = await self._answers.get()
            if started is None:
                raise RuntimeError(f"the service starter exited with {self.process.returncode}; see "
                                   f"{self.log_dir / 'starter.log'}")
            return started

    async def stop(self) -> None:
        """After the services stopped: close the starter's stdin, and it ends."""
        if self.process is None or self.process.returncode is not None:
            return
        assert self.process.stdin is not None
        self._closing = True
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), timeout=5)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            await self._reader


async def _until_gone(started: StartedProcess) -> None:
    """Wait for a process that is no longer ours to wait for (its parent died) to end."""
    import psutil

    while True:
        try:
            if psutil.Process(started.pid).status() == psutil.STATUS_ZOMBIE:  # ended; its new parent has not reaped it
                break
        except psutil.NoSuchProcess:
            break
        await asyncio.sleep(GONE_POLL_SECONDS)
    started.ended(None)


LOG_TAIL_BYTES = 64 * 1024
SAID_CHARS = 300


def last_error(log_path: Path) -> str | None:
    """What a child logged last at error level (its event and the exception's last line), read from the end of its
    log: said beside "exited while starting", so that the operator reads why without opening the file."""
    try:
        with open(log_path, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("level") not in ("error", "critical"):
            continue
        said = str(entry.get("event", ""))
        exception = str(entry.get("exception") or "").strip().splitlines()
        if exception and exception[-1] not in said:
            said = f"{said}: {exception[-1]}" if said else exception[-1]
        return said if len(said) <= SAID_CHARS else f"{said[:SAID_CHARS]}…"
    return None
