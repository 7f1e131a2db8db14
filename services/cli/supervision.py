"""What `threadline up` supervises: the service processes (and their replicas), and the restart rules."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.cli.starter import StartedProcess, Starter
from shared.subjects import BACKEND_SERVICES, Service

RESTART_FIRST_SECONDS = 0.5
RESTART_MAX_SECONDS = 30.0
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
