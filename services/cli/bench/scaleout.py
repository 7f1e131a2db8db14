"""`threadline bench scaleout`: does each service scale on its own? Every process confined to a CPU quota.

For each point of the plan (scaleout_plan.py) the bench starts the system as `up` does, on embedded servers in a
scratch data dir, and moves every process — each service replica, `up`, NATS, PostgreSQL — and itself (the load
generator) into a CPU group with a quota (cgroups.py). Then:

* **calls**: `agents` agents stage claims over MCP (the `bench stage` load) for `seconds`, spread over `cases`
  cases, `rounds` times over (the point's figures are the median window's); for the relay and projection sweeps reviewers accept what is staged too (decisions: the events the
  projection works on). Calls/s, p99, events/s published (outbox rows marked in the window), events/s projected
  (the projection's inbox), and each group's CPU as a share of its quota.
* **capacity** (relay and projection sweeps): the relay and the projection work behind the calls, so calls/s never
  waits for them. The relays are paused (SIGSTOP) while the load runs again, with every quota lifted, until a
  backlog has built in the outbox (BACKLOG_PER_RELAY events per relay, BACKLOG_PER_PROJECTION events the projection
  applies per projection replica); then they resume and the drain is read from the database afterwards
  (scaleout_drain.py): for the relay sweep each partition's events over the time its relay took, from the outbox's
  marks, summed over the relays; for the projection sweep the events applied from its inbox's first transaction
  of the drain to its last.

A point's throughput is calls/s for staging and gateway, the capacity for relay and projection; each doubling's
efficiency is throughput at 2n / (2 × throughput at n). The bottleneck is the group nearest its quota.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from services.cli.bench.calls import stage_claims_args
from services.cli.bench.cgroups import CpuGroups
from services.cli.bench.load import Load
from services.cli.bench.scaleout_drain import (
    APPLIED_SQL,
    BACKLOG_MAX_SECONDS,
    BACKLOG_PER_PROJECTION,
    BACKLOG_PER_RELAY,
    MARK_SQL,
    PASSES_SQL,
    PENDING_OF_SQL,
    PENDING_SQL,
    UNAPPLIED_SQL,
    drain_figures,
    projection_figures,
)
from services.cli.bench.scaleout_plan import Plan, Point, is_replica_of
from services.cli.bench.scaleout_system import ConfinedSystem, kill_leftovers
from services.cli.bench.stats import Run, rounded
from services.cli.bench.system import Reviewer, System, machine
from services.projection.partitions import partition_of as projection_partition
from services.projection.read_models import APPLIED
from services.relay.partitions import partition_of
from shared.errors import Unavailable

DECIDING = ("relay", "projection")
DRAIN_SECONDS = 180.0
SETUP_SECONDS = 120.0
HEALTH_TRIES = 6  # a gateway under its quota on a busy machine may miss a 5 s health check
FIRST_READS = 8  # agents reading their first workspace at once (a 0.04-core projection answers ~4 a second)
LEDGER_CHANGED = "threadline.ledger.changed"
COUNTS_SQL = ("SELECT now() AS at, (SELECT count(*) FROM outbox WHERE published_at IS NOT NULL) AS published, "
              "(SELECT count(*) FROM outbox WHERE published_at IS NULL) AS unpublished, "
              "(SELECT count(*) FROM outbox WHERE event_type = $1) AS changes, "
              "(SELECT count(*) FROM projection_inbox WHERE event_type = $1) AS projected")


class ScaleoutBench:
    def __init__(self, plan: Plan, console: Console) -> None:
        self.plan = plan
        self.console = console
        self.groups = CpuGroups(plan.cgroup_root)
        self.progress = Progress(TextColumn("{task.description}", style="bold"), BarColumn(),
                                 TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console)

    async def run(self) -> dict[str, Any]:
        before = machine()
        scratch = Path(tempfile.mkdtemp(prefix="threadline-scaleout-"))
        self.groups.open()
        try:
            self.groups.make("load", self.plan.quotas["load"])
            self.groups.add("load", os.getpid())
            with self.progress:
                points = [await self.point(point, scratch / f"{point.service}-{point.count}")
                          for point in self.plan.points]
        finally:
            kill_leftovers(self.groups)
            self.groups.close()
            shutil.rmtree(scratch, ignore_errors=True)
        return {"cores": self.plan.cores, "quotas": self.plan.quotas, "largestTotalQuota": self.plan.largest,
                "agents": self.plan.agents, "seconds": self.plan.seconds, "cases": self.plan.cases,
                "heldAt": self.plan.max_replicas, "held": self.plan.hold, "machineBefore": before,
                "machineAfter": machine(),
                "sweeps": sweeps(points)}

    async def point(self, point: Point, data_dir: Path) -> dict[str, Any]:
        data_dir.mkdir(parents=True)
        label = f"{point.service} ×{point.count}"
        task = self.progress.add_task(f"{label:<14}", total=None, status="starting the system")
        system = ConfinedSystem(self.plan, point, data_dir, self.groups)
        measured: dict[str, Any]
        try:
            await system.start()
            async with System.connect(system.settings, attempts=HEALTH_TRIES) as bench:
                tokens, reviewers = await self._setup(bench, point)
                measured = await self._rounds(bench, system, tokens, reviewers, task)
                if point.service in DECIDING:
                    self.progress.update(task, status=f"{point.service} paused: building a backlog")
                    measured["capacity"] = await self._capacity(bench, system, point, tokens, reviewers, task)
        except Exception as error:  # noqa: BLE001 - one point that cannot be measured is reported, not the end
            measured = failed(error)
        finally:
            self.progress.update(task, status="stopping")
            with self.groups.unconfined():  # stopping is not measured: under the quotas it took 13 s (Ctrl-C too)
                await system.stop()
            for name in [n for n in self.groups.groups if n != "load"]:
                self.groups.remove(name)
        result = {"service": point.service, "replicas": point.count, "processes": point.replicas,
                  "partitions": point.partitions, "totalQuota": self.plan.total(point), **measured}
        self.progress.update(task, total=1, completed=1, status=_status(result))
        return result

    async def _setup(self, bench: System, point: Point) -> tuple[list[str], list[tuple[str, str]]]:
        if point.service == "projection":  # the cases spread evenly over the projection's partitions instead
            ids = spread(bench.run_id, self.plan.cases, bench.settings.projection_partitions, projection_partition)
        else:
            ids = spread(bench.run_id, self.plan.cases, point.partitions)
        cases = [await bench.new_case("scaleout", case_id) for case_id in ids]
        tokens = [await bench.token("agent", f"{cases[n % len(cases)].case_id}-a{n}", case_id=cases[n % len(cases)].case_id)
                  for n in range(self.plan.agents)]
        reviewers = []
        if point.service in DECIDING:
            reviewers = [(case.case_id, await bench.token("reviewer", f"{case.case_id}-reviewer")) for case in cases]
        await until_projected(bench)
        return tokens, reviewers

    async def _load(self, bench: System, tokens: list[str], reviewers: list[tuple[str, str]], tag: str,
                    seconds: float | None = None, on_start: Callable[[], Any] | None = None,
                    enough: Callable[[], Awaitable[bool]] | None = None) -> Run:
        def arguments(n: int, k: int, workspace: dict[str, Any]) -> dict[str, Any]:
            case_id = workspace["caseId"]
            return stage_claims_args(case_id, workspace["workspaceRevision"], [f"{tag}-a{n}-k{k}"], [f"{case_id}-s0"])

        load = Load(Run("threadline", len(tokens)), bench.mcp_url, tokens, seconds or self.plan.seconds, "stage_claims",
                    arguments, first_reads=FIRST_READS)
        load.on_start = on_start
        done = asyncio.Event()
        deciding = [asyncio.create_task(review(bench, case_id, token, done)) for case_id, token in reviewers]
        if enough is not None:
            deciding.append(asyncio.create_task(_stop_when(enough, load.stop, done)))
        try:
            return await load.measure()
        finally:
            done.set()
            await asyncio.gather(*deciding, return_exceptions=True)

    async def _rounds(self, bench: System, system: ConfinedSystem, tokens: list[str],
                      reviewers: list[tuple[str, str]], task: Any) -> dict[str, Any]:
        """`rounds` windows one after another on the same system; the point's figures are the median window's (a
        window here varies by a quarter from one to the next), its errors those of every window."""
        windows = []
        for n in range(self.plan.rounds):
            of = f" (window {n + 1} of {self.plan.rounds})" if self.plan.rounds > 1 else ""
            self.progress.update(task, status=f"{self.plan.agents} agents staging for {self.plan.seconds:g} s{of}")
            windows.append(await self._calls(bench, system, tokens, reviewers, f"calls{n}"))
        return median_window(windows)

    async def _calls(self, bench: System, system: ConfinedSystem, tokens: list[str],
                     reviewers: list[tuple[str, str]], tag: str = "calls") -> dict[str, Any]:
        # Measured from when the clock starts (every agent connected and past its first read) to its end.
        began: dict[str, Any] = {}

        def clock_started() -> None:
            began["usage"] = self._usage()
            began["counts"] = asyncio.get_running_loop().create_task(counts(bench))

        run = await self._load(bench, tokens, reviewers, tag, on_start=clock_started)
        shares = self._shares(began["usage"])
        end = await counts(bench)
        start = await began["counts"]
        seconds = (end["at"] - start["at"]).total_seconds()
        summary = run.summary()
        return {"callsPerSecond": summary["callsPerSecond"], "p99Ms": summary["p99Ms"], "calls": summary["calls"],
                "errors": summary["errors"], "errorKinds": summary["errorKinds"],
                "eventsPerSecond": rounded((end["published"] - start["published"]) / seconds, 1),
                "projectedPerSecond": rounded((end["projected"] - start["projected"]) / seconds, 1),
                "cpuShare": shares, "bottleneck": max(shares, key=lambda name: shares[name])}

    async def _capacity(self, bench: System, system: ConfinedSystem, point: Point, tokens: list[str],
                        reviewers: list[tuple[str, str]], task: Any) -> dict[str, Any]:
        """Pause the relays, build a backlog with the same load, resume them and time how fast the backlog goes."""
        if point.service == "relay":
            return await self._relay_capacity(bench, system, point, tokens, reviewers, task)
        return await self._projection_capacity(bench, system, point, tokens, reviewers, task)

    async def _projection_capacity(self, bench: System, system: ConfinedSystem, point: Point, tokens: list[str],
                                   reviewers: list[tuple[str, str]], task: Any) -> dict[str, Any]:
        """The projection also serves the agents' and reviewers' reads, so for its sweep the relay is paused instead:
        the events wait in the outbox — BACKLOG_PER_PROJECTION of those the projection applies for each replica —
        and reach the projection all at once when the relay resumes. The drain is read from the projection's inbox
        afterwards (scaleout_drain.projection_figures)."""
        kinds = sorted(event.value for event in APPLIED)

        async def pending() -> int:
            return await fetch_value(bench, PENDING_OF_SQL, kinds)

        mark, backlog = await self._backlog(bench, system, tokens, reviewers, task,
                                            BACKLOG_PER_PROJECTION * point.count, pending)

        async def left() -> int:
            return await fetch_value(bench, UNAPPLIED_SQL, kinds, mark["at"])

        shares = await self._drained(task, f"projection ×{point.count}", left, backlog)
        rows = await fetch_rows(bench, APPLIED_SQL, mark["at"])
        return {**projection_figures([(r["seconds"], r["events"]) for r in rows], backlog), "cpuShare": shares}

    async def _relay_capacity(self, bench: System, system: ConfinedSystem, point: Point, tokens: list[str],
                              reviewers: list[tuple[str, str]], task: Any) -> dict[str, Any]:
        """BACKLOG_PER_RELAY events for each relay, so that the drain under the quotas lasts seconds, not a few
        passes; the drain's curve is read from the outbox afterwards (scaleout_drain.py)."""

        async def pending() -> int:
            return await fetch_value(bench, PENDING_SQL)

        mark, backlog = await self._backlog(bench, system, tokens, reviewers, task, BACKLOG_PER_RELAY * point.count,
                                            pending)
        shares = await self._drained(task, f"relay ×{point.count}", pending, backlog)
        passes = await fetch_rows(bench, PASSES_SQL, point.partitions, mark["at"], mark["last"])
        return {**drain_figures([(r["partition"], r["seconds"], r["events"]) for r in passes], backlog),
                "cpuShare": shares}

    async def _backlog(self, bench: System, system: ConfinedSystem, tokens: list[str],
                       reviewers: list[tuple[str, str]], task: Any, target: int,
                       pending: Callable[[], Awaitable[int]]) -> tuple[dict[str, Any], int]:
        """The relays paused while the load runs with every quota lifted (as fast as the machine allows: building
        the backlog is not what is measured) until `pending()` reaches `target`; the outbox's mark and the backlog
        when they resume."""

        async def enough() -> bool:
            now = await pending()
            self.progress.update(task, status=f"relay paused: a backlog of {now}/{target} events")
            return now >= target

        with system.paused("relay"):
            with self.groups.unconfined():
                await self._load(bench, tokens, reviewers, "backlog", seconds=BACKLOG_MAX_SECONDS, enough=enough)
            return await fetch_row(bench, MARK_SQL), await pending()

    async def _drained(self, task: Any, label: str, left: Callable[[], Awaitable[int]], backlog: int) -> dict[str, float]:
        """Until `left()` is 0 (at most DRAIN_SECONDS); each group's CPU share meanwhile."""
        usage = self._usage()
        began = asyncio.get_running_loop().time()
        while (now := await left()) > 0:
            if asyncio.get_running_loop().time() - began > DRAIN_SECONDS:
                raise Unavailable(f"{label} left {now} of a backlog of {backlog} events after {DRAIN_SECONDS:.0f} s")
            self.progress.update(task, status=f"{label} working off the backlog: {now}/{backlog} left")
            await asyncio.sleep(0.5)
        return self._shares(usage)

    def _usage(self) -> tuple[float, dict[str, float]]:
        return asyncio.get_running_loop().time(), {name: self.groups.usage(name) for name in self.groups.groups}

    def _shares(self, began: tuple[float, dict[str, float]]) -> dict[str, float]:
        """Each group's CPU over the window as a share of its quota (1.0: it used all it may)."""
        seconds = asyncio.get_running_loop().time() - began[0]
        return {name: round((self.groups.usage(name) - began[1].get(name, 0.0)) / (cores * seconds), 2)
                for name, cores in self.groups.groups.items() if seconds > 0}


async def counts(bench: System) -> dict[str, Any]:
    return await fetch_row(bench, COUNTS_SQL, LEDGER_CHANGED)


async def fetch_rows(bench: System, sql: str, *args: Any) -> list[dict[str, Any]]:  # noqa: ANN401 - query arguments
    async with bench.db.engine.connect() as connection:
        raw = await connection.get_raw_connection()
        return [dict(row) for row in await raw.driver_connection.fetch(sql, *args)]  # type: ignore[union-attr]


async def fetch_row(bench: System, sql: str, *args: Any) -> dict[str, Any]:  # noqa: ANN401 - query arguments
    return (await fetch_rows(bench, sql, *args))[0]


async def fetch_value(bench: System, sql: str, *args: Any) -> Any:  # noqa: ANN401 - whatever the one column holds
    return next(iter((await fetch_row(bench, sql, *args)).values()))


async def _stop_when(enough: Callable[[], Awaitable[bool]], stop: asyncio.Event, done: asyncio.Event) -> None:
    """Set `stop` once `enough()` says so, asking once a second until the load is done."""
    while not done.is_set():
        if await enough():
            stop.set()
            return
        await asyncio.sleep(1.0)


async def until_projected(bench: System) -> None:
    """Until the projection has applied every ledger change so far (the cases the setup made), so that the agents'
    first reads find their cases' views built, as they would in a deployment whose cases exist before its agents."""
    deadline = asyncio.get_running_loop().time() + SETUP_SECONDS
    while (now := await counts(bench))["unpublished"] or now["projected"] < now["changes"]:
        if asyncio.get_running_loop().time() > deadline:
            raise Unavailable(f"the projection had applied {now['projected']} of the setup's {now['changes']} ledger "
                              f"changes ({now['unpublished']} events unpublished) after {SETUP_SECONDS:.0f} s")
        await asyncio.sleep(0.25)


def relay_partition(case_id: str, partitions: int) -> int:
    return partition_of(f"case:{case_id}", partitions)


def spread(run_id: str, cases: int, partitions: int,
           partition_of: Callable[[str, int], int] = relay_partition) -> list[str]:
    """Case ids that fall evenly on the partitions — the outbox's, or the projection's (as a deployment's many cases
    do; a few cases hashed at random would leave one relay or projection replica most of the work)."""
    chosen: list[str] = []
    per = {p: 0 for p in range(partitions)}
    n = 0
    while len(chosen) < cases:
        n += 1
        case_id = f"bench-scaleout-{run_id}-{n}"
        partition = partition_of(case_id, partitions)
        if per[partition] < -(-cases // partitions):
            per[partition] += 1
            chosen.append(case_id)
    return chosen


async def review(bench: System, case_id: str, token: str, done: asyncio.Event) -> None:
    """A reviewer accepting everything pending in one case until `done`."""
    async with bench.api(token) as api:
        reviewer = Reviewer(api)
        while not done.is_set():
            pending = await reviewer.pending(case_id)
            if not pending:
                await asyncio.sleep(0.2)
                continue
            revision = await reviewer.revision(case_id)
            for proposal in pending:
                if done.is_set():
                    return
                decision, _ = await reviewer.accept(proposal["proposalId"],
                                                    [item["itemId"] for item in proposal["items"]], revision)
                revision = decision["revision"] if decision else await reviewer.revision(case_id)


def median_window(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """The window of median calls/s (the lower middle of an even number), with every window's calls/s beside it and
    the errors of all of them."""
    middle = sorted(windows, key=lambda w: w["callsPerSecond"] or 0.0)[(len(windows) - 1) // 2]
    kinds: dict[str, int] = {}
    for window in windows:
        for kind, n in window["errorKinds"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    return {**middle, "errors": sum(w["errors"] for w in windows), "errorKinds": kinds,
            "windowsCallsPerSecond": [w["callsPerSecond"] for w in windows]}


def throughput(point: dict[str, Any]) -> float | None:
    """What a point is judged by: calls/s, or the capacity of the relay or projection it sweeps."""
    if point["service"] in DECIDING:
        return (point.get("capacity") or {}).get("eventsPerSecond")
    return point["callsPerSecond"]


def whole_backlog(point: dict[str, Any]) -> float | None:
    """The relay's other capacity figure: the whole backlog over the whole drain, pauses and a partition that
    finished early included (scaleout_drain.py), beside the summed per-partition rate that `throughput` reads."""
    return (point.get("capacity") or {}).get("wholeBacklogPerSecond")


def ratio(high: float | None, low: float | None) -> float | None:
    return rounded(high / low) if high and low else None


def sweeps(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points grouped by service, each doubling's efficiency and the calls/s change it brought (and, for the relay,
    the speedup of the whole backlog's rate too)."""
    out: list[dict[str, Any]] = []
    for service in dict.fromkeys(p["service"] for p in points):
        mine = [p for p in points if p["service"] == service]
        doublings = []
        for low, high in zip(mine, mine[1:], strict=False):
            a, b = throughput(low), throughput(high)
            doublings.append({"from": low["replicas"], "to": high["replicas"],
                              "bottlenecks": [low.get("bottleneck"), high.get("bottleneck")],
                              "sweptIsBottleneck": any(is_replica_of(p.get("bottleneck"), service)
                                                       for p in (low, high)),
                              "speedup": ratio(b, a),
                              "wholeBacklogSpeedup": ratio(whole_backlog(high), whole_backlog(low)),
                              "efficiency": rounded(b / (2 * a)) if a and b else None,
                              "callsChange": rounded(high["callsPerSecond"] / low["callsPerSecond"] - 1)
                              if low["callsPerSecond"] and high["callsPerSecond"] else None})
        out.append({"service": service, "measure": "events/s (capacity)" if service in DECIDING else "calls/s",
                    "points": mine, "doublings": doublings})
    return out


def failed(error: BaseException) -> dict[str, Any]:
    """A point the system could not be measured at (say, one replica that cannot answer the agents' first reads
    under its quota): no figures, and why."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return {"failed": f"{type(error).__name__}: {error}"[:300], "callsPerSecond": None, "p99Ms": None,
            "eventsPerSecond": None, "projectedPerSecond": None, "bottleneck": None, "cpuShare": {}}


def _status(point: dict[str, Any]) -> str:
    if point.get("failed"):
        return f"not measured: {point['failed']}"
    capacity = point.get("capacity")
    extra = f", capacity {capacity['eventsPerSecond']} events/s of a {capacity['backlog']} backlog" if capacity else ""
    return (f"{point['callsPerSecond']} calls/s, {point['eventsPerSecond']} events/s{extra}; "
            f"bottleneck {point['bottleneck']} at {point['cpuShare'][point['bottleneck']]:.0%}")


async def run_scaleout(plan: Plan, console: Console) -> dict[str, Any]:
    return await ScaleoutBench(plan, console).run()
