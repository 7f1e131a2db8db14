"""What `threadline bench scaleout` will run, worked out and checked before anything starts.

For each service swept (staging, gateway, relay, projection) the replicas double, 1, 2, 4 … `max_replicas`, while
the other services that scale are held at `max_replicas` (review too, which takes the decisions), so the service
being doubled is the one that can run out; thesis-delta and webhooks run once. `hold` pins some of them lower
instead (`staging=1`): that service is then the bottleneck, and doubling another shows what adding replicas of a
service that is not the bottleneck does to throughput (nothing, if the services are independent). Every process gets a CPU quota
(`quota` cores each: each service process and `up` itself), PostgreSQL and NATS larger ones, and the bench's own
load generator one too; together they must fit the machine's cores, with a margin.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from shared.subjects import BACKEND_SERVICES, Service

SWEEPABLE = ("staging", "gateway", "relay", "projection")
HELD = (Service.GATEWAY, Service.STAGING, Service.RELAY, Service.PROJECTION, Service.REVIEW)
HOLDABLE = tuple(s.value for s in HELD)
SERVICES = [*BACKEND_SERVICES, Service.GATEWAY]
# The shared servers' and the load generator's quotas, in multiples of a service's.
POSTGRES_SHARE, NATS_SHARE, LOAD_SHARE = 8, 4, 12
FIT = 0.95  # the quotas together stay under this share of the machine's cores
QUOTA_STEP = 0.005
MIN_QUOTA = 0.03  # below this a Python service spends its quota idling (timers, heartbeats, health checks)
MEMORY_PER_PROCESS = 160 * 2**20  # a service replica's resident memory, with room


class PlanError(ValueError):
    """An argument the bench refuses before it starts anything."""


@dataclass(frozen=True)
class Point:
    """One measured configuration: a service at some replicas, the others held."""

    service: str
    replicas: dict[str, int]

    @property
    def count(self) -> int:
        return self.replicas[self.service]

    @property
    def processes(self) -> int:
        return sum(self.replicas.values())

    def replicas_argument(self) -> str:
        return ",".join(f"{name}={n}" for name, n in self.replicas.items() if n != 1)

    @property
    def partitions(self) -> int:
        """The relay sweep runs as many partitions as relays (2 relays lead 2 partitions); others the default."""
        return self.count if self.service == "relay" else 16


@dataclass(frozen=True)
class Plan:
    cores: int
    quota: float
    services: tuple[str, ...]
    max_replicas: int
    agents: int
    seconds: float
    cases: int
    cgroup_root: Path
    points: list[Point] = field(default_factory=list)
    rounds: int = 1  # measured windows per point: its figures are the median window's
    hold: dict[str, int] = field(default_factory=dict)  # services pinned below max_replicas (not swept)

    @property
    def quotas(self) -> dict[str, float]:
        return {"service": self.quota, "postgres": round(self.quota * POSTGRES_SHARE, 3),
                "nats-server": round(self.quota * NATS_SHARE, 3), "load": round(self.quota * LOAD_SHARE, 3)}

    def total(self, point: Point) -> float:
        """Every quota of a point together: its service processes and `up`, the servers, the load generator."""
        return round(self.quota * (point.processes + 1 + POSTGRES_SHARE + NATS_SHARE + LOAD_SHARE), 3)

    @property
    def largest(self) -> float:
        return max(self.total(p) for p in self.points)


def is_replica_of(group: str | None, service: str) -> bool:
    """Whether a CPU group or process (`staging`, `staging-2`, …) is one of `service`'s replicas (`thesis-delta` is
    none of a `thesis`'s)."""
    if group is None:
        return False
    name, _, number = group.rpartition("-")
    return group == service or (name == service and number.isdigit())


def doublings(max_replicas: int) -> list[int]:
    counts, n = [], 1
    while n <= max_replicas:
        counts.append(n)
        n *= 2
    return counts


def replicas_of(service: str, count: int, max_replicas: int, hold: dict[str, int] | None = None) -> dict[str, int]:
    held = {s.value: (max_replicas if s in HELD else 1) for s in SERVICES}
    return {**held, **(hold or {}), service: count}


def default_quota(cores: int, max_replicas: int, processes: int | None = None) -> float:
    """The largest quota (a multiple of 0.005 cores) at which the largest point (`processes` service processes; by
    default every held service at `max_replicas`) fits the cores with the margin."""
    largest = processes or sum(replicas_of("staging", max_replicas, max_replicas).values())
    units = largest + 1 + POSTGRES_SHARE + NATS_SHARE + LOAD_SHARE
    return max(QUOTA_STEP, int(cores * FIT / units / QUOTA_STEP) * QUOTA_STEP)


def parse_hold(text: str | None) -> dict[str, int]:
    """`staging=1,review=2` as {"staging": 1, "review": 2}, or a PlanError naming what cannot be read."""
    hold: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, _, count = part.partition("=")
        name = name.strip()
        if name not in HOLDABLE:
            raise PlanError(f"--hold {part!r}: the services that can be held are {', '.join(HOLDABLE)}")
        if name in hold:
            raise PlanError(f"--hold {part!r}: {name} is held twice")
        try:
            hold[name] = int(count)
        except ValueError:
            raise PlanError(f"--hold {part!r}: give SERVICE=REPLICAS, replicas a whole number from 1 up") from None
        if hold[name] < 1:
            raise PlanError(f"--hold {part!r}: a service runs at least 1 replica")
    return hold


def make_plan(*, quota: float | None, service: str | None, max_replicas: int = 4, agents: int = 64,
              seconds: float = 15.0, cases: int = 16, rounds: int = 1, cgroup_root: Path = Path("/sys/fs/cgroup"),
              cores: int | None = None, hold: dict[str, int] | None = None) -> Plan:
    """The points to run, or a PlanError saying which argument cannot be followed and why."""
    cores = cores or os.cpu_count() or 1
    if service is not None and service not in SWEEPABLE:
        raise PlanError(f"--service {service!r}: the services that can be swept are {', '.join(SWEEPABLE)}")
    if max_replicas < 2 or max_replicas & (max_replicas - 1):
        raise PlanError(f"--max-replicas {max_replicas}: replicas double from 1, so give a power of two from 2 up")
    if quota is not None and not 0 < quota <= cores:
        raise PlanError(f"--quota {quota:g}: a process's quota is a share of the machine's {cores} core(s), "
                        f"above 0 and at most {cores}")
    if agents < 1 or seconds <= 0 or cases < 1 or rounds < 1:
        raise PlanError("--agents, --cases and --rounds must be at least 1 and --seconds above 0")
    hold = dict(hold or {})
    if service is not None and service in hold:
        raise PlanError(f"--hold {service}={hold[service]}: {service} is the service swept; hold the others")
    if bad := [f"{name}={n}" for name, n in hold.items() if n > max_replicas]:
        raise PlanError(f"--hold {','.join(bad)}: hold a service at most at --max-replicas ({max_replicas})")
    services = (service,) if service else tuple(s for s in SWEEPABLE if s not in hold)
    points = [Point(s, replicas_of(s, n, max_replicas, hold)) for s in services for n in doublings(max_replicas)]
    chosen = quota if quota is not None else default_quota(cores, max_replicas, max(p.processes for p in points))
    plan = Plan(cores, round(chosen, 4), services, max_replicas, agents, seconds, cases, cgroup_root, points, rounds,
                hold)
    most = max(p.processes for p in points)
    if quota is not None and quota < MIN_QUOTA:
        raise PlanError(f"--quota {quota:g}: a service process needs at least {MIN_QUOTA:g} of a core; "
                        f"raise --quota to at least {MIN_QUOTA:g}")
    if plan.quota < MIN_QUOTA:
        raise PlanError(f"the machine cannot hold {most} service processes: on {cores} core(s) each would get "
                        f"{plan.quota:g} of a core (at least {MIN_QUOTA:g} is needed); lower --max-replicas")
    memory = psutil.virtual_memory().available
    if most * MEMORY_PER_PROCESS > memory:
        raise PlanError(f"the machine cannot hold {most} service processes: they need about "
                        f"{most * MEMORY_PER_PROCESS / 2**30:.1f} GiB and {memory / 2**30:.1f} GiB is available; "
                        "lower --max-replicas")
    if plan.largest > cores:
        biggest = max(plan.points, key=plan.total)
        raise PlanError(
            f"the machine cannot hold {biggest.processes} service processes at {plan.quota:g} core(s) each beside "
            f"PostgreSQL ({plan.quotas['postgres']:g}), NATS ({plan.quotas['nats-server']:g}) and the load "
            f"generator ({plan.quotas['load']:g}): {plan.largest:g} cores of quota on {cores}; lower --quota "
            f"(at most {default_quota(cores, max_replicas, biggest.processes):g} here) or --max-replicas")
    return plan
